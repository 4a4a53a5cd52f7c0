// symcommCommAbort and symcommCommGetAsyncError, on a communicator of their own (the world's
// stays usable): rank 0 aborts from a second thread while every rank waits on a signal that
// never comes; every wait ends soon after, on rank 0 by the abort and on the others by the
// loss of rank 0; every rank then sees the failure through symcommCommGetAsyncError, its
// calls fail, and it finalizes without waiting for the others. A healthy communicator
// reports no error, also to a thread that polls while another works.
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "mp.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

TEST(Abort, EndsEveryRanksWaitsWithoutBlocking) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  uint64_t* sig = nullptr;
  SC_OK(symcommCalloc(comm, 1, sizeof(uint64_t), reinterpret_cast<void**>(&sig)));
  symcommStream_t stream = mp::new_stream();
  const auto start = Clock::now();
  std::thread aborter;
  double abort_took = -1;
  symcommResult_t aborted = symcommInternalError;
  if (mp::rank() == 0)
    aborter = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const auto t = Clock::now();
      aborted = symcommCommAbort(comm);
      abort_took = seconds_since(t);
    });
  // Nobody sets it: the wait ends by the abort (rank 0) or the loss of rank 0 (the others),
  // long before SYMCOMM_WAIT_TIMEOUT (60 s).
  symcommResult_t waited = symcommSignalWaitOnStream(comm, sig, symcommCmpGe, 1, stream);
  if (waited == symcommSuccess && mp::space() == symcommSpaceCuda) {
    mp::sync(stream);  // a stream wait: the failure comes with the next call
    waited = symcommQuietOnStream(comm, stream);
  }
  const double took = seconds_since(start);
  const std::string said = symcommGetLastError();
  if (aborter.joinable()) aborter.join();
  EXPECT_NE(waited, symcommSuccess);
  EXPECT_LT(took, 30.0) << "the wait outlived the abort by far: " << said;
  if (mp::rank() == 0) {
    EXPECT_EQ(aborted, symcommSuccess) << symcommGetLastError();
    EXPECT_LT(abort_took, 5.0) << "symcommCommAbort blocked";
    EXPECT_EQ(symcommCommAbort(comm), symcommSuccess) << "a second abort";
  }
  symcommResult_t async = symcommSuccess;
  SC_OK(symcommCommGetAsyncError(comm, &async));
  const std::string why = symcommGetLastError();
  if (mp::rank() == 0) {
    EXPECT_EQ(async, symcommInvalidUsage) << why;
    EXPECT_NE(why.find("aborted on rank 0"), std::string::npos) << why;
  } else {
    EXPECT_EQ(async, symcommPeerLost) << why;
    EXPECT_NE(why.find("rank 0"), std::string::npos) << why;
  }
  // Calls fail; queries still answer; finalize frees it without waiting for lost ranks.
  EXPECT_NE(symcommHostBarrier(comm), symcommSuccess);
  int rank = -1;
  SC_OK(symcommCommRank(comm, &rank));
  EXPECT_EQ(rank, mp::rank());
  mp::free_stream(stream);
  const auto fin = Clock::now();
  symcommFinalize(comm);  // reports the failure, frees all the same
  EXPECT_LT(seconds_since(fin), 30.0);
  SC_OK(symcommHostBarrier(mp::world()));  // the world's communicator is untouched
}

TEST(Abort, AHealthyCommunicatorHasNoAsyncError) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  std::atomic<bool> done{false};
  std::atomic<int> errors{0}, polls{0};
  std::thread watchdog([&] {  // as PyTorch's polls, from a thread of its own
    while (!done.load()) {
      symcommResult_t r = symcommInternalError;
      if (symcommCommGetAsyncError(comm, &r) != symcommSuccess || r != symcommSuccess) ++errors;
      ++polls;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  // On a loaded machine the thread may start late: the work begins once it has polled.
  while (polls.load() == 0) std::this_thread::yield();
  void* p = nullptr;
  for (int i = 0; i < 20; ++i) {
    SC_OK(symcommMalloc(comm, 4096, &p));
    SC_OK(symcommHostBarrier(comm));
    SC_OK(symcommFree(comm, p));
  }
  done = true;
  watchdog.join();
  EXPECT_EQ(errors.load(), 0);
  symcommResult_t r = symcommInternalError;
  SC_OK(symcommCommGetAsyncError(comm, &r));
  EXPECT_EQ(r, symcommSuccess);
  EXPECT_EQ(symcommCommGetAsyncError(comm, nullptr), symcommInvalidArgument);
  EXPECT_EQ(symcommCommGetAsyncError(nullptr, &r), symcommInvalidArgument);
  EXPECT_EQ(symcommCommAbort(nullptr), symcommInvalidArgument);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

}  // namespace
