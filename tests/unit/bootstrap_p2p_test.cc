// Point-to-point bootstrap messages (Bootstrap::send_to, recv_from) between ranks that are
// threads of this process: each reaches only its receiver, messages for other (rank, tag)
// pairs that arrive first are kept for their own receive, two pairs exchange at once, a
// rank may send to itself, and a message that never comes ends in a timeout.
// BootstrapProtocol: a peer that holds the token but announces a message larger than the
// receiver's call gives (rank 0 in a collective, the others in rank 0's answer, the receiver
// of a point-to-point message) fails the receiver at once with symcommSystemError, before it
// allocates what the header asks for.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
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
    uid_.token = random_token();
    uid_.root = start_bootstrap_root(tcp_listen(NetAddr::parse("127.0.0.1", 0), 16), uid_.token);
    on_every_rank([&](int r) { ranks_[r] = Bootstrap::join(uid_, kRanks, r); });
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

  UniqueId uid_;
  std::unique_ptr<Bootstrap> ranks_[kRanks];
};

// The largest resident set this process has had, in bytes.
int64_t peak_rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

// Runs `call`, which must throw; returns the error and how long it took.
struct Failure {
  symcommResult_t code = symcommSuccess;
  std::string message;
  double seconds = 0;
};
Failure failure_of(const std::function<void()>& call) {
  Failure f;
  auto start = std::chrono::steady_clock::now();
  try {
    call();
  } catch (const Error& e) {
    f.code = e.code();
    f.message = e.what();
  }
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return f;
}

// Sizes a header announces: over the cap but under the memory of most machines (a reader
// that trusts the header allocates and zero-fills it), one that cannot be allocated, and one
// std::string refuses.
constexpr uint64_t kAnnounced[] = {uint64_t{1} << 30, uint64_t{1} << 46, uint64_t{1} << 63};
// None of them may be allocated: the peak grows by less than the smallest.
constexpr int64_t kMaxGrowth = int64_t{256} << 20;

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

TEST_F(BootstrapP2p, AMessageLargerThanAnyIsRefusedUnread) {
  const int64_t peak = peak_rss();
  for (uint64_t bytes : kAnnounced) {
    // Rank 2's message as a process holding the token could write it.
    Fd c = tcp_connect(ranks_[1]->peers()[1].p2p, Deadline::after_ms(5000), nullptr, "test");
    P2pHeader h{kP2pMagic, 2, {}, ranks_[1]->comm_id(), 9, bytes};
    std::memcpy(h.token, uid_.token.data(), sizeof h.token);
    send_all(c.get(), &h, sizeof h, Deadline::after_ms(5000), nullptr, "test");
    Failure f = failure_of([&] { ranks_[1]->recv_from(2, 9); });
    EXPECT_EQ(f.code, symcommSystemError) << bytes << ": " << f.message;
    EXPECT_LT(f.seconds, 5.0) << f.message;
    EXPECT_NE(f.message.find("rank 2 announced bootstrap message 9 of " + format_bytes(bytes)),
              std::string::npos) << f.message;
    EXPECT_NE(f.message.find(format_bytes(kMaxUnexpectedBytes)), std::string::npos) << f.message;
  }
  EXPECT_LT(peak_rss() - peak, kMaxGrowth);
  // The sender refuses what the receiver would.
  const std::string too_large(kMaxUnexpectedBytes + 1, 'x');
  Failure f = failure_of([&] { ranks_[0]->send_to(1, 11, too_large); });
  EXPECT_EQ(f.code, symcommInternalError) << f.message;
  // The rank goes on: a later message arrives.
  ranks_[2]->send_to(1, 10, "later");
  EXPECT_EQ(ranks_[1]->recv_from(2, 10), "later");
}

// One rank of a communicator of two, played by hand: it joins through the root, then speaks
// to the real rank as `play` says, on the data connection to (or from) rank 0.
class BootstrapProtocol : public ::testing::Test {
 protected:
  void SetUp() override { setenv("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1", 1); }

  // The hand-played rank `rank` in a thread, while the real one joins here through a root of
  // their own; returns how the real rank's join failed. What the hand-played rank throws
  // becomes a test failure.
  Failure join_with(int rank, const std::function<void(int data)>& play) {
    uid_.token = random_token();
    uid_.root = start_bootstrap_root(tcp_listen(NetAddr::parse("127.0.0.1", 0), 16), uid_.token);
    std::atomic<bool> joined{false};
    std::thread fake([&] {
      try {
        Deadline d = Deadline::after_ms(15000);
        Fd hub_listener;
        JoinHello hello{kJoinMagic, {}, 2, rank, PeerInfo{}};
        std::memcpy(hello.token, uid_.token.data(), 16);
        std::snprintf(hello.info.hostname, sizeof hello.info.hostname, "fake");
        hello.info.pid = static_cast<int32_t>(getpid());
        hello.info.rank = rank;
        if (rank == 0) {
          hub_listener = tcp_listen(NetAddr::parse("127.0.0.1", 0), 4);
          hello.info.hub = socket_local_addr(hub_listener.get());
        }
        Fd root = tcp_connect(uid_.root, d, nullptr, "fake: joining");
        send_all(root.get(), &hello, sizeof hello, d, nullptr, "fake: joining");
        JoinReply reply{};
        PeerInfo table[2];
        recv_all(root.get(), &reply, sizeof reply, d, nullptr, "fake: joining");
        ASSERT_EQ(reply.status, symcommSuccess) << reply.message;
        recv_all(root.get(), table, sizeof table, d, nullptr, "fake: the peer table");
        Fd data, live;
        if (rank == 0) {
          for (int i = 0; i < 2; ++i) {
            Fd c = accept_before(hub_listener.get(), d, nullptr, "fake: hub");
            HubHello h{};
            recv_all(c.get(), &h, sizeof h, d, nullptr, "fake: hub");
            (h.channel == Channel::Data ? data : live) = std::move(c);
          }
        } else {
          for (Channel ch : {Channel::Data, Channel::Liveness}) {
            Fd c = tcp_connect(table[0].hub, d, nullptr, "fake: hub");
            HubHello h{kHubMagic, {}, reply.comm_id, rank, ch};
            std::memcpy(h.token, uid_.token.data(), 16);
            send_all(c.get(), &h, sizeof h, d, nullptr, "fake: hub");
            (ch == Channel::Data ? data : live) = std::move(c);
          }
        }
        play(data.get());
        // Closed only once the real rank is done: else its monitor might see rank 0 lost first.
        while (!joined.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      } catch (const std::exception& e) {
        ADD_FAILURE() << "hand-played rank " << rank << ": " << e.what();
      }
    });
    Failure f = failure_of([&] { Bootstrap::join(uid_, 2, 1 - rank); });
    joined = true;
    fake.join();
    return f;
  }

  static void send_header(int fd, Op op, uint64_t bytes) {
    MsgHeader h{kMsgMagic, op, 1, 0, bytes};  // the join's closing barrier is collective #1
    send_all(fd, &h, sizeof h, Deadline::after_ms(5000), nullptr, "fake: a header");
  }

  UniqueId uid_;
};

TEST_F(BootstrapProtocol, RankZeroRefusesAMessageLargerThanItsCallGives) {
  const int64_t peak = peak_rss();
  for (uint64_t bytes : kAnnounced) {
    std::string answer;
    Failure f = join_with(1, [&](int data) {
      send_header(data, Op::Barrier, bytes);
      // Rank 0 answers with the error (it would reach the other ranks of a larger world), one
      // that ends the host collectives: rank 1's connection is out of step from there on.
      MsgHeader h{};
      recv_all(data, &h, sizeof h, Deadline::after_ms(5000), nullptr, "fake: the answer");
      EXPECT_EQ(h.op, Op::Broken);
      EXPECT_EQ(h.arg, symcommSystemError);
      ASSERT_LT(h.bytes, 4096u);
      answer.resize(h.bytes);
      recv_all(data, answer.data(), answer.size(), Deadline::after_ms(5000), nullptr,
               "fake: the answer");
    });
    EXPECT_EQ(f.code, symcommSystemError) << bytes << ": " << f.message;
    EXPECT_LT(f.seconds, 5.0) << f.message;
    EXPECT_NE(f.message.find("rank 1 announced a message of " + format_bytes(bytes) +
                             " where rank 0 expects 0 bytes"),
              std::string::npos) << f.message;
    EXPECT_NE(answer.find("rank 1 announced"), std::string::npos) << answer;
  }
  EXPECT_LT(peak_rss() - peak, kMaxGrowth);
}

TEST_F(BootstrapProtocol, RanksRefuseAnAnswerLargerThanTheirCallGives) {
  const int64_t peak = peak_rss();
  for (Op op : {Op::Result, Op::Error}) {
    for (uint64_t bytes : kAnnounced) {
      Failure f = join_with(0, [&](int data) {
        MsgHeader h{};
        recv_all(data, &h, sizeof h, Deadline::after_ms(5000), nullptr, "fake: the barrier");
        send_header(data, op, bytes);
      });
      EXPECT_EQ(f.code, symcommSystemError) << bytes << ": " << f.message;
      EXPECT_LT(f.seconds, 5.0) << f.message;
      std::string said = op == Op::Result ? "a result of " + format_bytes(bytes) +
                                                " where this rank expects 0 bytes"
                                          : "an error message of " + format_bytes(bytes) +
                                                " where this rank expects at most " +
                                                format_bytes(kMaxUnexpectedBytes);
      EXPECT_NE(f.message.find("rank 0 announced " + said), std::string::npos) << f.message;
    }
  }
  EXPECT_LT(peak_rss() - peak, kMaxGrowth);
}

}  // namespace
}  // namespace symcomm
