// Point-to-point bootstrap messages (Bootstrap::send_to, recv_from) between ranks that are
// threads of this process: each reaches only its receiver, messages for other (rank, tag)
// pairs that arrive first are kept for their own receive, two pairs exchange at once, a
// rank may send to itself, and a message that never comes ends in a timeout.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"

namespace symcomm {
namespace {

class BootstrapP2p : public ::testing::Test {
 protected:
  static constexpr int kRanks = 4;

  void SetUp() override {
    setenv("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1", 1);
    UniqueId uid;
    uid.token = random_token();
    uid.root = start_bootstrap_root(tcp_listen(NetAddr::parse("127.0.0.1", 0), 16), uid.token);
    on_every_rank([&](int r) { ranks_[r] = Bootstrap::join(uid, kRanks, r); });
  }

  void TearDown() override {
    on_every_rank([&](int r) {
      if (!ranks_[r]) return;
      ranks_[r]->begin_finalize();
      ranks_[r]->barrier();
      ranks_[r].reset();
    });
    unsetenv("SYMCOMM_BOOTSTRAP_TIMEOUT");
  }

  // Runs body(rank) on a thread per rank; what a rank throws becomes a test failure.
  void on_every_rank(const std::function<void(int)>& body) {
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (const std::exception& e) {
          ADD_FAILURE() << "rank " << r << ": " << e.what();
        }
      });
    for (std::thread& t : threads) t.join();
  }

  std::unique_ptr<Bootstrap> ranks_[kRanks];
};

TEST_F(BootstrapP2p, MessagesReachTheirReceiversInAnyOrder) {
  const std::string big(1 << 20, 'x');
  std::string got[kRanks][2];
  on_every_rank([&](int r) {
    Bootstrap& b = *ranks_[r];
    switch (r) {
      case 0:  // tag 2 before tag 1 to rank 1; a large one to rank 3; one to itself
        b.send_to(1, 2, "two");
        b.send_to(1, 1, "one");
        b.send_to(3, 7, big);
        b.send_to(0, 5, "self");
        got[0][0] = b.recv_from(0, 5);
        break;
      case 1:  // tag 1 first: "two" arrives before it and is kept
        got[1][0] = b.recv_from(0, 1);
        got[1][1] = b.recv_from(0, 2);
        break;
      case 2:  // the same tag as rank 0's message to rank 3, from another rank
        b.send_to(3, 7, "from 2");
        break;
      case 3:
        got[3][0] = b.recv_from(2, 7);
        got[3][1] = b.recv_from(0, 7);
        break;
    }
  });
  EXPECT_EQ(got[0][0], "self");
  EXPECT_EQ(got[1][0], "one");
  EXPECT_EQ(got[1][1], "two");
  EXPECT_EQ(got[3][0], "from 2");
  EXPECT_TRUE(got[3][1] == big) << got[3][1].size() << " bytes";
}

TEST_F(BootstrapP2p, AMessageThatNeverComesTimesOut) {
  setenv("SYMCOMM_BOOTSTRAP_TIMEOUT", "1", 1);
  symcommResult_t code = symcommSuccess;
  std::string message;
  try {
    ranks_[1]->recv_from(0, 99);
  } catch (const Error& e) {
    code = e.code();
    message = e.what();
  }
  EXPECT_EQ(code, symcommTimeout) << message;
  EXPECT_NE(message.find("from rank 0"), std::string::npos) << message;
  // The rank goes on: a later message arrives.
  unsetenv("SYMCOMM_BOOTSTRAP_TIMEOUT");
  ranks_[0]->send_to(1, 100, "later");
  EXPECT_EQ(ranks_[1]->recv_from(0, 100), "later");
}

}  // namespace
}  // namespace symcomm
