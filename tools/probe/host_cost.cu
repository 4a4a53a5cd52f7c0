// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/): where the host time of a
// small collective goes. By hand:
//   nvcc -O2 -std=c++17 -arch=sm_90 -Iinclude tools/probe/host_cost.cu -Lbuild-gpu/lib \
//        -lsymcomm -lnccl -Xlinker -rpath=$PWD/build-gpu/lib -o host_cost
//   build-gpu/bin/symrun -n 2 ./host_cost
// Each line: the median over batches of the host time per call of 100 calls enqueued back to
// back on one stream (the stream synchronised between batches), on rank 0.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include <nccl.h>

#include "symcomm/symcomm.h"

namespace {

struct Small { int x[4]; };
struct Large { char bytes[1408]; };  // about the size of the sm and ll kernels' Plan

__global__ void empty_small(const __grid_constant__ Small s) { if (s.x[0] == 12345) __trap(); }
__global__ void empty_large(const __grid_constant__ Large l) { if (l.bytes[0] == 123) __trap(); }

double per_call_us(cudaStream_t stream, const std::function<void()>& call) {
  constexpr int kInner = 100, kBatches = 30;
  std::vector<double> t;
  for (int b = 0; b < kBatches + 3; ++b) {
    cudaStreamSynchronize(stream);
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kInner; ++i) call();
    auto end = std::chrono::steady_clock::now();
    if (b >= 3) t.push_back(std::chrono::duration<double, std::micro>(end - start).count() / kInner);
  }
  cudaStreamSynchronize(stream);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

template <typename P>
void launch_ex(void (*kernel)(P), const P& p, cudaStream_t stream, bool pdl, int blocks) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(512);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = pdl ? 1 : 0;
  cudaLaunchKernelEx(&config, kernel, p);
}

}  // namespace

int main() {
  symcommComm_t comm = nullptr;
  if (symcommInitFromEnv(&comm, nullptr) != symcommSuccess) {
    std::fprintf(stderr, "init: %s\n", symcommGetLastError());
    return 1;
  }
  int rank = 0, n = 0;
  symcommCommRank(comm, &rank);
  symcommCommSize(comm, &n);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  void* send = nullptr;
  void* recv = nullptr;
  symcommMalloc(comm, 1 << 20, &send);
  symcommMalloc(comm, 1 << 20, &recv);
  Small small{};
  Large large{};
  int device = 0;
  cudaStreamCaptureStatus capture;
  std::vector<std::pair<const char*, std::function<void()>>> cases = {
      {"launch <<<>>> 16 B params", [&] { empty_small<<<1, 512, 0, s>>>(small); }},
      {"launch <<<>>> 1408 B params", [&] { empty_large<<<1, 512, 0, s>>>(large); }},
      {"launch Ex 1408 B, PDL, 1 block", [&] { launch_ex(empty_large, large, s, true, 1); }},
      {"launch Ex 1408 B, PDL, 32 blocks", [&] { launch_ex(empty_large, large, s, true, 32); }},
      {"launch Ex 16 B, PDL", [&] { launch_ex(empty_small, small, s, true, 1); }},
      {"cudaGetDevice + cudaSetDevice", [&] { cudaGetDevice(&device); cudaSetDevice(device); }},
      {"cudaGetLastError", [&] { (void)cudaGetLastError(); }},
      {"cudaStreamIsCapturing", [&] { cudaStreamIsCapturing(s, &capture); }},
  };
  const char* name = nullptr;
  cases.push_back({"symcommCollAlgorithm (no launch)", [&] {
                     symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllToAll, 2,
                                          symcommFloat32, 1, &name);
                   }});
  for (const char* algo : {"sm", "ll", "direct", "nccl"}) {
    cases.push_back({algo, [&, algo] {
                       symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, 2,
                                               symcommFloat32, algo, s);
                     }});
  }
  cases.push_back({"symcommBarrierOnStream", [&] { symcommBarrierOnStream(comm, SYMCOMM_TEAM_WORLD, s); }});
  cases.push_back({"symcommPutOnStream 8 B (CE)", [&] {
                     symcommPutOnStream(comm, recv, send, 8, (rank + 1) % n, symcommEngineCe, s);
                   }});
  // A 1 MiB broadcast by NCCL itself (a communicator of its own) and through symcomm: what
  // symcomm's path adds to NCCL's host time (symcomm-bench's host_us of the same calls).
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  symcommHostBroadcast(comm, &id, sizeof id, 0);
  ncclComm_t nccl = nullptr;
  ncclCommInitRank(&nccl, n, id, rank);
  const size_t floats = (1 << 20) / 4;
  cases.push_back({"raw ncclBroadcast 1 MiB", [&] {
                     ncclBroadcast(send, recv, floats, ncclFloat32, 0, nccl, s);
                   }});
  for (const char* algo : {"nccl", "auto"}) {
    cases.push_back({algo[0] == 'n' ? "symcomm broadcast 1 MiB, nccl" : "symcomm broadcast 1 MiB, auto", [&, algo] {
                       symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, floats,
                                                symcommFloat32, 0, algo, s);
                     }});
  }
  cases.push_back({"symcommCollAlgorithm broadcast 1 MiB", [&] {
                     symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollBroadcast, floats,
                                          symcommFloat32, 1, &name);
                   }});
  for (auto& [what, call] : cases) {
    symcommHostBarrier(comm);
    const double us = per_call_us(s, call);
    if (rank == 0) std::printf("%-40s %7.2f us\n", what, us);
  }
  std::printf("rank %d last error: %s\n", rank, symcommGetLastError());
  ncclCommDestroy(nccl);
  symcommFree(comm, send);
  symcommFree(comm, recv);
  symcommFinalize(comm);
  return 0;
}
