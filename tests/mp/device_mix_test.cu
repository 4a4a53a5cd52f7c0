// DeviceMix: the random sequences of one-sided operations of rma_mix.h through the device
// API. Each round is one kernel of kBlocks blocks of kWarps warps; each message has an
// actor (a thread, a warp or a block) that moves all its pieces with put / put_warp /
// put_block and signals them by put_signal*, by quiet* then signal_op, or (a thread) by
// fence then signal_op or atomic_fetch_add; receivers wait with signal_wait_until (a
// thread) or signal_wait_until_block. Actors of one block run their steps in the plan's
// order, actors of different warps and blocks at the same time. A barrier round adds a
// kernel whose one block calls barrier_block over the round's team. Every rank simulates
// every rank's memory and checks its own at the end; the same kernels are then captured
// in a CUDA graph and replayed with fresh data.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "device_fixture.cuh"
#include "mix.h"
#include "rma_mix.h"

namespace device_test {
namespace {

using rma_mix::Kind;
using rma_mix::Step;

constexpr int kBlocks = 4, kWarps = 4;

// A step as the round's kernel runs it, its addresses resolved on the host.
struct DevStep {
  Kind kind;
  int scope, warp, pe;
  char* dst;
  const char* src;
  size_t bytes;
  uint64_t* sig;
  uint64_t value;
  symcommSignalOp_t op;
  symcommCmp_t cmp;
  bool atomic;
};

// Block b runs steps [first[b], first[b + 1]) in order; a step's actor is the block, warp
// `warp`, or lane 0 of it. Every lane of every warp goes through every step (the warps
// converge after each), so the warp and block variants are called by all their threads.
__global__ void round_kernel(DeviceComm c, const DevStep* steps, const int* first, int* failed) {
  const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
  for (int i = first[blockIdx.x]; i < first[blockIdx.x + 1]; ++i) {
    const DevStep s = steps[i];
    const int scope = s.scope;
    if (scope == rma_mix::kBlock || (warp == s.warp && (scope == rma_mix::kWarp || lane == 0))) {
      int rc = 0;
      switch (s.kind) {
        case Kind::Put:
          if (scope == rma_mix::kThread) symcomm::put(c, s.dst, s.src, s.bytes, s.pe);
          else if (scope == rma_mix::kWarp) symcomm::put_warp(c, s.dst, s.src, s.bytes, s.pe);
          else symcomm::put_block(c, s.dst, s.src, s.bytes, s.pe);
          break;
        case Kind::PutSignal:
          if (scope == rma_mix::kThread)
            symcomm::put_signal(c, s.dst, s.src, s.bytes, s.sig, s.value, s.op, s.pe);
          else if (scope == rma_mix::kWarp)
            symcomm::put_signal_warp(c, s.dst, s.src, s.bytes, s.sig, s.value, s.op, s.pe);
          else
            symcomm::put_signal_block(c, s.dst, s.src, s.bytes, s.sig, s.value, s.op, s.pe);
          break;
        case Kind::Get:
          if (scope == rma_mix::kThread) symcomm::get(c, s.dst, s.src, s.bytes, s.pe);
          else if (scope == rma_mix::kWarp) symcomm::get_warp(c, s.dst, s.src, s.bytes, s.pe);
          else symcomm::get_block(c, s.dst, s.src, s.bytes, s.pe);
          break;
        case Kind::Quiet:
          if (scope == rma_mix::kThread) symcomm::quiet(c);
          else if (scope == rma_mix::kWarp) symcomm::quiet_warp(c);
          else symcomm::quiet_block(c);
          break;
        case Kind::Fence:
          symcomm::fence(c);
          break;
        case Kind::Signal:
          // (Atomics need the member mapped: to one on another node, the same add by signal.)
          if (s.atomic && symcomm::ptr(c, s.sig, s.pe) != nullptr)
            symcomm::atomic_fetch_add(c, s.sig, s.value, s.pe);
          else symcomm::signal_op(c, s.sig, s.value, s.op, s.pe);
          break;
        case Kind::Wait:
          rc = scope == rma_mix::kBlock ? symcomm::signal_wait_until_block(c, s.sig, s.cmp, s.value)
                                        : symcomm::signal_wait_until(c, s.sig, s.cmp, s.value);
          break;
        default:
          rc = -1;  // not a kernel's step
      }
      if (rc != 0) atomicExch(failed, rc);
    }
    __syncwarp();
  }
}

__global__ void barrier_kernel(DeviceComm team, int* failed) {
  const int rc = symcomm::barrier_block(team);
  if (rc != 0 && threadIdx.x == 0) atomicExch(failed, rc);
}

class DeviceMix : public Device {
 protected:
  void SetUp() override {
    Device::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    teams_.make(comm_);
    for (int k = 0; k < 3; ++k) SC_OK(symcommGetDeviceComm(comm_, teams_.id[k], &team_[k]));
    plan_ = std::make_unique<rma_mix::Plan>(mp::mix_seed(), teams_, true, true, kBlocks, kWarps);
    // Said before anything runs: a plan that hangs (past a long SYMCOMM_WAIT_TIMEOUT) is
    // then known by its seed too, not only one that fails.
    if (me_ == 0)
      std::printf("DeviceMix plan: SYMCOMM_TEST_MIX_SEED=%llu\n",
                  static_cast<unsigned long long>(plan_->seed()));
    sym_ = symmetric<char>(plan_->bytes());
    // SYMCOMM_TEST_MIX_LOCAL_SYMMETRIC=1 puts the plan's plain buffer in the heap too (the
    // same plan, no cudaMalloc memory): tells whether a failure needs non-heap memory.
    const char* local_sym = std::getenv("SYMCOMM_TEST_MIX_LOCAL_SYMMETRIC");
    loc_ = local_sym && *local_sym == '1' ? symmetric<char>(plan_->bytes())
                                          : plain<char>(plan_->bytes());
    sigs_ = symmetric<uint64_t>(static_cast<size_t>(plan_->words()));
    failed_ = plain<int>(1);
    ASSERT_TRUE(sym_ && loc_ && sigs_ && failed_);
    // SYMCOMM_TEST_MIX_PRINT=1: every step of the plan (rank 0), and where each rank's
    // buffers are, to read a failure's addresses and a transport's trace by.
    if (const char* print = std::getenv("SYMCOMM_TEST_MIX_PRINT"); print && *print == '1') {
      std::printf("rank %d: symmetric at %p, signal words at %p\n", me_,
                  static_cast<void*>(sym_), static_cast<void*>(sigs_));
      if (me_ == 0)
        for (const rma_mix::Step& s : plan_->steps())
          std::printf("  %s\n", plan_->describe(s).c_str());
      std::fflush(stdout);
    }
    upload();
    stream_ = mp::new_stream();
  }
  void TearDown() override {
    if (stream_) mp::free_stream(stream_);
    Device::TearDown();
  }

  // Every round's steps of this rank, grouped by block in the plan's order, with their
  // addresses, in device memory; the barriers' teams by round (-1: none).
  void upload() {
    const int rounds = plan_->rounds();
    std::vector<std::vector<std::vector<DevStep>>> by(
        static_cast<size_t>(rounds), std::vector<std::vector<DevStep>>(kBlocks));
    barrier_.assign(static_cast<size_t>(rounds), -1);
    char* mine[2] = {sym_, loc_};
    for (const Step& s : plan_->steps()) {
      if (s.rank != me_) continue;
      if (s.kind == Kind::Barrier) {
        barrier_[static_cast<size_t>(s.round)] = s.team;
        continue;
      }
      const bool get = s.kind == Kind::Get;
      DevStep d{s.kind, s.actor.scope, s.actor.warp, s.pe,
                get ? mine[s.dst.buf] + s.dst.off : sym_ + s.dst.off,
                get ? sym_ + s.src.off : mine[s.src.buf] + s.src.off, s.bytes,
                s.sig >= 0 ? sigs_ + s.sig : nullptr, s.value, s.op, s.cmp, s.atomic};
      by[static_cast<size_t>(s.round)][static_cast<size_t>(s.actor.block)].push_back(d);
    }
    std::vector<DevStep> flat;
    std::vector<int> first;
    for (const auto& round : by) {
      for (const auto& block : round) {
        first.push_back(static_cast<int>(flat.size()));
        flat.insert(flat.end(), block.begin(), block.end());
      }
      first.push_back(static_cast<int>(flat.size()));  // the round's end
    }
    steps_ = plain<DevStep>(std::max<size_t>(flat.size(), 1));
    first_ = plain<int>(first.size());
    ASSERT_TRUE(steps_ && first_);
    CUDA_OK(cudaMemcpy(steps_, flat.data(), flat.size() * sizeof(DevStep), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(first_, first.data(), first.size() * sizeof(int), cudaMemcpyHostToDevice));
  }

  // The round kernels (and barrier kernels) on the stream.
  void launch() {
    cudaStream_t st = static_cast<cudaStream_t>(stream_);
    for (int r = 0; r < plan_->rounds(); ++r) {
      round_kernel<<<kBlocks, 32 * kWarps, 0, st>>>(h_, steps_, first_ + r * (kBlocks + 1),
                                                    failed_);
      CUDA_OK(cudaGetLastError());
      const int team = barrier_[static_cast<size_t>(r)];
      if (team >= 0) {
        barrier_kernel<<<1, 64, 0, st>>>(team_[team], failed_);
        CUDA_OK(cudaGetLastError());
      }
    }
  }

  std::vector<std::vector<uint8_t>> initial(int run) {
    std::vector<std::vector<uint8_t>> mem = plan_->initial(run);
    plan_->store(mem, me_, sym_, loc_, sigs_);
    EXPECT_EQ(cudaMemset(failed_, 0, sizeof(int)), cudaSuccess);
    return mem;
  }

  void check(std::vector<std::vector<uint8_t>> mem, const std::string& when) {
    CUDA_OK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
    int failed = 0;
    CUDA_OK(cudaMemcpy(&failed, failed_, sizeof failed, cudaMemcpyDeviceToHost));
    EXPECT_EQ(failed, 0) << when << ": a wait or barrier in a kernel failed"
                         << " (SYMCOMM_TEST_MIX_SEED=" << plan_->seed() << ")";
    // A wait that timed out records it; the next call reports it.
    EXPECT_EQ(symcommQuietOnStream(comm_, stream_), symcommSuccess)
        << when << ": " << symcommGetLastError();
    plan_->check(std::move(mem), me_, sym_, loc_, sigs_, stream_, when);
  }

  mp::MixTeams teams_;
  DeviceComm team_[3] = {};
  std::unique_ptr<rma_mix::Plan> plan_;
  char* sym_ = nullptr;
  char* loc_ = nullptr;
  uint64_t* sigs_ = nullptr;
  int* failed_ = nullptr;
  DevStep* steps_ = nullptr;
  int* first_ = nullptr;
  std::vector<int> barrier_;
  symcommStream_t stream_ = nullptr;
};

TEST_F(DeviceMix, RandomSequenceInKernels) {
  std::vector<std::vector<uint8_t>> mem = initial(0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_NO_FATAL_FAILURE(launch());
  check(std::move(mem), "eager");
}

TEST_F(DeviceMix, RandomSequenceInKernelsReplayedFromAGraph) {
  std::vector<std::vector<uint8_t>> mem = initial(0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_NO_FATAL_FAILURE(launch());
  check(std::move(mem), "eager");
  mp::capture_and_replay(
      comm_, stream_,
      [&] {
        launch();
        return !HasFailure();
      },
      [&](int run) { return initial(run); },
      [&](std::vector<std::vector<uint8_t>> m, const std::string& when) {
        check(std::move(m), when);
      });
}

}  // namespace
}  // namespace device_test
