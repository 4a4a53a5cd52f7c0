// The device API's waits that time out: a wait that is recorded and reported once, and a
// barrier that a member misses, recorded with the absent member (the Device fixture is in
// device_fixture.cuh).
#include <chrono>
#include <string>
#include <vector>

#include "device_fixture.cuh"

namespace device_test {

// ---------------------------------------------------------------------------------------
// 6. Waits that time out
// ---------------------------------------------------------------------------------------
__global__ void wait_kernel(DeviceComm c, uint64_t* sig, uint64_t never, int* rc) {
  rc[0] = symcomm::signal_wait_until(c, sig, symcommCmpEq, never);
}

__global__ void wait_block_kernel(DeviceComm c, uint64_t* sig, uint64_t never, int* rc) {
  rc[threadIdx.x] = symcomm::signal_wait_until_block(c, sig, symcommCmpGe, never);
}

__global__ void barrier_once_kernel(DeviceComm c, int* rc) {
  const int r = symcomm::barrier_block(c);
  if (threadIdx.x == 0) rc[0] = r;
}

// The slot as the host sees it (host-mapped memory, written by kernels).
symcomm::DeviceError snapshot(const symcomm::DeviceError* slot) {
  const volatile symcomm::DeviceError* v = slot;
  symcomm::DeviceError e;
  e.code = v->code;
  e.pe = v->pe;
  e.cmp = v->cmp;
  e.block = v->block;
  e.address = v->address;
  e.expected = v->expected;
  e.observed = v->observed;
  return e;
}

TEST_F(Device, WaitTimesOutAndIsReportedOnce) {
  uint64_t* sig = symmetric<uint64_t>(1);
  int* rc = plain<int>(64);
  ASSERT_TRUE(sig && rc);
  ASSERT_NE(h_.error, nullptr);  // host-mapped: the host reads it directly
  CUDA_OK(cudaMemset(sig, 0, sizeof(uint64_t)));
  CUDA_OK(cudaMemset(rc, 0xff, 64 * sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(snapshot(h_.error).code, 0);
  DeviceComm c = h_;  // a plain struct: a copy with a short bound
  c.wait_timeout_ns = 200'000'000;

  // One thread waits for a value nobody writes.
  const uint64_t never = 4'000'000'000'123ull + static_cast<uint64_t>(me_);
  const auto start = std::chrono::steady_clock::now();
  wait_kernel<<<1, 1>>>(c, sig, never, rc);
  LAUNCH_OK();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int rc_host = -1;
  CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
  EXPECT_EQ(rc_host, symcommTimeout);
  EXPECT_GE(seconds, 0.2);
  EXPECT_LT(seconds, 10.0);
  symcomm::DeviceError e = snapshot(h_.error);
  EXPECT_EQ(e.code, symcommTimeout);
  EXPECT_EQ(e.pe, me_);
  EXPECT_EQ(e.cmp, symcommCmpEq);
  EXPECT_EQ(e.block, 0);
  EXPECT_EQ(e.address, reinterpret_cast<uintptr_t>(sig));
  EXPECT_EQ(e.expected, never);
  EXPECT_EQ(e.observed, 0u);
  // The next call on the communicator reports it, naming the value waited for; once.
  SC_FAILS(symcommHostBarrier(comm_), symcommTimeout);
  std::string msg = symcommGetLastError();
  EXPECT_NE(msg.find(std::to_string(never)), std::string::npos) << msg;
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(snapshot(h_.error).code, 0) << "the report clears the slot";

  // The block variant: every thread gets the code; recorded again now that it was cleared.
  CUDA_OK(cudaMemset(rc, 0xff, 64 * sizeof(int)));
  wait_block_kernel<<<1, 64>>>(c, sig, never + 1, rc);
  LAUNCH_OK();
  std::vector<int> rcs(64, -1);
  CUDA_OK(cudaMemcpy(rcs.data(), rc, 64 * sizeof(int), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 64; ++i) EXPECT_EQ(rcs[i], symcommTimeout) << "thread " << i;
  e = snapshot(h_.error);
  EXPECT_EQ(e.code, symcommTimeout);
  EXPECT_EQ(e.cmp, symcommCmpGe);
  EXPECT_EQ(e.expected, never + 1);
  SC_FAILS(symcommHostBarrier(comm_), symcommTimeout);
  SC_OK(symcommHostBarrier(comm_));

  // Still usable: puts and a barrier work as before.
  const size_t total = n_ * kSlot;
  char* sym = symmetric<char>(total);
  char* src = plain<char>(total);
  Case* cases_dev = plain<Case>(n_);
  ASSERT_TRUE(sym && src && cases_dev);
  ASSERT_NO_FATAL_FAILURE(put_round(kBlock, 1, sym, src, cases_dev));
  ASSERT_NO_FATAL_FAILURE(run_barriers(&h_, 64, 10));
}

// A barrier_block that the last rank never enters: the others time out, the record names
// the absent member (its world rank as the pe, its slot as the address), and the host
// reports it so. The team is one of its own (its members' barrier counts now disagree);
// the world's barriers still work.
TEST_F(Device, BarrierThatAMemberMissesRecordsIt) {
  symcommTeam_t team = SYMCOMM_TEAM_INVALID;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 1, n_, &team));
  DeviceComm t{};
  SC_OK(symcommGetDeviceComm(comm_, team, &t));
  t.wait_timeout_ns = 200'000'000;
  int* rc = plain<int>(1);
  ASSERT_NE(rc, nullptr);
  CUDA_OK(cudaMemset(rc, 0xff, sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  const int absent = n_ - 1;
  SC_OK(symcommHostBarrier(comm_));
  if (me_ != absent) {
    barrier_once_kernel<<<1, 64>>>(t, rc);
    LAUNCH_OK();
    int rc_host = -1;
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, symcommTimeout);
    const symcomm::DeviceError e = snapshot(h_.error);
    EXPECT_EQ(e.code, symcommTimeout);
    EXPECT_EQ(e.pe, absent) << "the record names the member that did not arrive";
    EXPECT_EQ(e.address, reinterpret_cast<uintptr_t>(t.barrier_slots + absent));
    EXPECT_EQ(e.cmp, symcommCmpGe);
    EXPECT_EQ(e.expected, 1u);
    EXPECT_EQ(e.observed, 0u);
    SC_FAILS(symcommHostBarrier(comm_), symcommTimeout);
    std::string msg = symcommGetLastError();
    EXPECT_NE(msg.find("waited for rank " + std::to_string(absent) + ", which did not arrive"),
              std::string::npos) << msg;
  } else {
    SC_OK(symcommHostBarrier(comm_));
  }
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommTeamDestroy(comm_, team));
  ASSERT_NO_FATAL_FAILURE(run_barriers(&h_, 64, 10));
}

}  // namespace device_test
