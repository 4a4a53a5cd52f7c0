// The threads of the bootstrap layer (the peer monitor, the root) and the parameters they
// need. Ranks are threads of this process. A failure inside a thread's body becomes an error
// of the communicator's next call (one that left the thread would end the process:
// std::terminate, SIGABRT); the parameters a thread needs are read by the thread that starts
// it, so that a bad value fails that call (read on the monitor's thread,
// SYMCOMM_PEER_TIMEOUT=abc would abort the process).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "base/thread_guard.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/root.h"
#include "scoped_env.h"

namespace symcomm {
namespace {

struct Failure {
  symcommResult_t code = symcommSuccess;
  std::string message;
};
Failure failure_of(const std::function<void()>& call) {
  Failure f;
  try {
    call();
  } catch (const Error& e) {
    f.code = e.code();
    f.message = e.what();
  }
  return f;
}

// Polls `done` until it holds or `seconds` pass (a generous bound, not a timing).
bool eventually(const std::function<bool()>& done, double seconds = 60) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

constexpr int kRanks = 2;

// Joins kRanks ranks, a thread each; returns what each join threw (code kSuccess: joined).
std::vector<Failure> join_all(std::unique_ptr<Bootstrap> (&ranks)[kRanks],
                              std::function<void(int)> before = nullptr) {
  UniqueId uid;
  uid.token = random_token();
  uid.root = start_bootstrap_root(tcp_listen(NetAddr::parse("127.0.0.1", 0), 16), uid.token);
  std::vector<Failure> failures(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      if (before) before(r);
      failures[static_cast<size_t>(r)] =
          failure_of([&] { ranks[r] = Bootstrap::join(uid, kRanks, r); });
    });
  for (std::thread& t : threads) t.join();
  return failures;
}

class BootstrapThreads : public ::testing::Test {
 protected:
  ScopedEnv addr_{"SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1"};
};

// The monitor's body throws (a test hook): the rank whose monitor it is fails its next call
// with that error, and its peer loses it at once (its liveness connection is shut; silence
// alone is no loss here).
TEST_F(BootstrapThreads, AFailureInsideThePeerMonitorFailsTheNextCall) {
  ScopedEnv silence("SYMCOMM_PEER_TIMEOUT", "0");
  std::unique_ptr<Bootstrap> ranks[kRanks];
  for (const Failure& f : join_all(ranks)) ASSERT_EQ(f.code, symcommSuccess) << f.message;
  inject_thread_fault("peer monitor");
  int failed = -1;
  ASSERT_TRUE(eventually([&] {
    for (int r = 0; r < kRanks; ++r)
      if (failure_of([&] { ranks[r]->check_alive(); }).code == symcommInternalError) failed = r;
    return failed >= 0;
  })) << "no monitor took the fault";
  const std::string says = "the peer monitor of rank " + std::to_string(failed) +
                           " failed: a fault injected into the peer monitor thread";
  Failure f = failure_of([&] { ranks[failed]->barrier(); });
  EXPECT_EQ(f.code, symcommInternalError);
  EXPECT_NE(f.message.find(says), std::string::npos) << f.message;
  EXPECT_NE(f.message.find("can only be finalized"), std::string::npos) << f.message;
  const int other = 1 - failed;
  Failure lost;
  EXPECT_TRUE(eventually([&] {
    lost = failure_of([&] { ranks[other]->check_alive(); });
    return lost.code != symcommSuccess;
  })) << "rank " << other << " did not lose rank " << failed;
  EXPECT_EQ(lost.code, symcommPeerLost) << lost.message;
  EXPECT_NE(lost.message.find("connection closed"), std::string::npos) << lost.message;
}

// A bad SYMCOMM_PEER_TIMEOUT or SYMCOMM_HEARTBEAT_INTERVAL fails the join on every rank,
// naming the parameter and the value; the process goes on.
TEST_F(BootstrapThreads, TheMonitorsParametersFailTheJoin) {
  for (const char* name : {"SYMCOMM_PEER_TIMEOUT", "SYMCOMM_HEARTBEAT_INTERVAL"})
    for (const char* value : {"abc", "-1", "nan", "1e-9"}) {
      ScopedEnv bad(name, value);
      std::unique_ptr<Bootstrap> ranks[kRanks];
      for (const Failure& f : join_all(ranks)) {
        EXPECT_EQ(f.code, symcommInvalidArgument) << name << "=" << value << ": " << f.message;
        EXPECT_NE(f.message.find(std::string(name) + "='" + value + "'"), std::string::npos)
            << f.message;
      }
    }
}

// The root reads SYMCOMM_BOOTSTRAP_TIMEOUT before its thread starts: a bad value fails the
// call that makes the id (read on the root's thread, it would stop that thread, leaving an
// id that no rank could join).
TEST_F(BootstrapThreads, ABadBootstrapTimeoutFailsTheRootsStart) {
  ScopedEnv bad("SYMCOMM_BOOTSTRAP_TIMEOUT", "abc");
  symcommUniqueId uid;
  EXPECT_EQ(symcommGetUniqueId(&uid), symcommInvalidArgument);
  EXPECT_NE(std::string(symcommGetLastError()).find("SYMCOMM_BOOTSTRAP_TIMEOUT='abc'"),
            std::string::npos) << symcommGetLastError();
}

// SYMCOMM_BOOTSTRAP_TIMEOUT=0 is no bound, as 0 is for every other timeout: a rank that joins
// late is waited for, and the bootstrap collectives work (read as a bound, 0 fails every
// join at once).
TEST_F(BootstrapThreads, BootstrapTimeoutZeroMeansNoBound) {
  ScopedEnv unbounded("SYMCOMM_BOOTSTRAP_TIMEOUT", "0");
  std::unique_ptr<Bootstrap> ranks[kRanks];
  auto late = [](int r) {
    if (r == 1) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  };
  for (const Failure& f : join_all(ranks, late)) ASSERT_EQ(f.code, symcommSuccess) << f.message;
  std::vector<std::thread> threads;
  std::vector<Failure> barriers(kRanks);
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      barriers[static_cast<size_t>(r)] = failure_of([&] {
        ranks[r]->barrier();
        ranks[r]->begin_finalize();
        ranks[r]->barrier();
      });
    });
  for (std::thread& t : threads) t.join();
  for (const Failure& f : barriers) EXPECT_EQ(f.code, symcommSuccess) << f.message;
}

}  // namespace
}  // namespace symcomm

// The monitor looks at least once per heartbeat interval, so beats go out on time however
// short the interval: a monitor that sleeps 100 ms whatever the interval loses every live
// peer to a 50 ms timeout (25 ms beats). Checked here rather than by timing live peers, which
// a loaded machine's scheduling would decide (tests/mp/init_test.cc has the live case with
// room to spare).
TEST(PeerMonitor, WakesAtLeastOncePerHeartbeat) {
  EXPECT_EQ(symcomm::Bootstrap::monitor_wake_ms(10), 10);
  EXPECT_EQ(symcomm::Bootstrap::monitor_wake_ms(25), 25);
  EXPECT_EQ(symcomm::Bootstrap::monitor_wake_ms(100), 100);
  EXPECT_EQ(symcomm::Bootstrap::monitor_wake_ms(1000), 100);  // and every 100 ms for the timeouts
  EXPECT_EQ(symcomm::Bootstrap::monitor_wake_ms(0), 1);
}
