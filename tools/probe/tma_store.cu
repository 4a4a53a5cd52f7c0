// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/; or by hand on a GPU machine:
//   nvcc -O2 -arch=sm_90a -o tma_store tools/probe/tma_store.cu && ./tma_store [MiB per peer]):
// Do Hopper's bulk copies (TMA: cp.async.bulk global -> shared -> peer global) move more per
// second over NVLink than SM stores? One process drives every GPU (peer access, cudaMalloc
// memory); every GPU sends B bytes to every peer at once (an all-to-all), by
//   sm:  warps loading 16-byte vectors from local memory and storing them into the peer
//        (what the library's copy kernels do), 4 vectors in flight per lane;
//   tma: one thread per block running a ring of `stages` shared-memory buffers of `chunk`
//        bytes: bulk load of chunk j + stages - 1 while chunk j is bulk-stored to the peer.
// Each figure: the median of 7 timings of `k` back-to-back launches on every GPU (host-timed
// from the first launch to the last GPU's completion; k makes at least 64 MiB per GPU), in
// GB/s leaving one GPU. Every byte is checked after the last run (fresh values each run).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "probe_check.h"
#include "probe_gpus.h"

int n = 0;
size_t B = 0;  // bytes per peer
std::vector<char*> sendb, recvb;
std::vector<cudaStream_t> streams;
std::vector<const int4**> ksrc;
std::vector<int4**> kdst;

void sync_all() { sync_gpus(n); }
double timed(const std::function<void()>& issue, int reps = 7) { return timed_on(n, issue, reps); }

__global__ void sm_kernel(const int4* const* src, int4* const* dst, int peers, size_t n16) {
  const int per = gridDim.x / peers;
  const int p = blockIdx.x / per;
  if (p >= peers) return;
  const int4* s = src[p];
  int4* d = dst[p];
  const size_t stride = (size_t)per * blockDim.x;
  for (size_t i = (size_t)(blockIdx.x % per) * blockDim.x + threadIdx.x; i < n16; i += stride * 4) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < n16) v[u] = s[i + u * stride];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < n16) d[i + u * stride] = v[u];
  }
}

__device__ __forceinline__ uint32_t smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread per block. Block b of peer p copies chunks b, b + per, b + 2 per, ... of the
// B bytes for p.
__global__ void tma_kernel(const char* const* src, char* const* dst, int peers, size_t bytes,
                           uint32_t chunk, int stages) {
  extern __shared__ __align__(128) char buf[];
  __shared__ __align__(8) uint64_t bar[8];
  if (threadIdx.x != 0) return;
  const int per = gridDim.x / peers;
  const int p = blockIdx.x / per;
  if (p >= peers) return;
  const char* s = src[p];
  char* d = dst[p];
  const size_t chunks = (bytes + chunk - 1) / chunk;
  const size_t first = blockIdx.x % per;
  const size_t mine = first < chunks ? (chunks - first + per - 1) / per : 0;
  for (int i = 0; i < stages; ++i)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&bar[i])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  auto at = [&](size_t j) { return (first + j * per) * chunk; };
  auto len = [&](size_t j) { return static_cast<uint32_t>(min((size_t)chunk, bytes - at(j))); };
  auto load = [&](size_t j) {
    const int st = static_cast<int>(j % stages);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 ::"r"(smem(&bar[st])), "r"(len(j)) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        ::"r"(smem(buf + (size_t)st * chunk)), "l"(s + at(j)), "r"(len(j)), "r"(smem(&bar[st]))
        : "memory");
  };
  for (size_t j = 0; j + 1 < (size_t)stages && j < mine; ++j) load(j);
  for (size_t j = 0; j < mine; ++j) {
    if (j + stages - 1 < mine) {
      // Its buffer was chunk j - 1's: that store must have read it.
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      load(j + stages - 1);
    }
    const int st = static_cast<int>(j % stages);
    const uint32_t parity = static_cast<uint32_t>((j / stages) & 1);
    asm volatile(
        "{\n .reg .pred done;\n"
        "WAIT%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        " @!done bra WAIT%=;\n}" ::"r"(smem(&bar[st])), "r"(parity) : "memory");
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(d + at(j)), "r"(smem(buf + (size_t)st * chunk)), "r"(len(j)) : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

__global__ void fill_kernel(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = static_cast<uint32_t>(i * 2654435761u) ^ seed;
}

// Fresh values in every send buffer, zeros in every receive buffer; then after `issue`,
// every received block must be its sender's.
bool check(const std::function<void()>& issue, uint32_t seed) {
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    fill_kernel<<<264, 256>>>(reinterpret_cast<uint32_t*>(sendb[g]), B * n / 4, seed + g);
    CK(cudaGetLastError());
    CK(cudaMemset(recvb[g], 0, B * n));
  }
  sync_all();
  issue();
  sync_all();
  std::vector<uint32_t> want(B / 4), got(B / 4);
  for (int g = 0; g < n; ++g)
    for (int d = 1; d < n; ++d) {
      const int r = (g + d) % n;
      CK(cudaMemcpy(want.data(), sendb[g] + (size_t)r * B, B, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(got.data(), recvb[r] + (size_t)g * B, B, cudaMemcpyDeviceToHost));
      if (want != got) {
        std::printf("MISMATCH: GPU %d -> GPU %d\n", g, r);
        return false;
      }
    }
  return true;
}

int main(int argc, char** argv) {
  CK(cudaGetDeviceCount(&n));
  B = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  const int k = static_cast<int>(std::max<size_t>(1, (size_t{64} << 20) / (B * (n - 1))));
  std::printf("%d GPUs, %zu MiB per peer, %d launches per timing\n", n, B >> 20, k);
  sendb.resize(n);
  recvb.resize(n);
  streams.resize(n);
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    for (int p = 0; p < n; ++p)
      if (p != g) CK(cudaDeviceEnablePeerAccess(p, 0));
    CK(cudaMalloc(&sendb[g], B * n));
    CK(cudaMalloc(&recvb[g], B * n));
    CK(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking));
    CK(cudaFuncSetAttribute(tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  }
  a2a_tables(n, B, sendb, recvb, ksrc, kdst);
  sync_all();
  const double out = static_cast<double>(B) * (n - 1) * k;
  uint32_t seed = 1;
  auto row = [&](const char* name, const std::function<void(int)>& launch) {
    auto issue = [&](int times) {
      for (int t = 0; t < times; ++t)
        for (int g = 0; g < n; ++g) {
          CK(cudaSetDevice(g));
          launch(g);
          CK(cudaGetLastError());
        }
    };
    const double us = timed([&] { issue(k); });
    const bool ok = check([&] { issue(1); }, seed += 17);
    std::printf("%-52s %10.1f us  %7.1f GB/s per GPU  %s\n", name, us / k, out / us * 1e-3,
                ok ? "checked" : "WRONG");
    std::fflush(stdout);
  };
  const int peers = n - 1;
  char name[128];
  for (int blocks : {132, 264, 528}) {
    const int b = blocks / peers * peers;
    std::snprintf(name, sizeof name, "sm: %d blocks x 512 threads", b);
    row(name, [&](int g) { sm_kernel<<<b, 512, 0, streams[g]>>>(ksrc[g], kdst[g], peers, B / 16); });
  }
  struct {
    uint32_t chunk;
    int stages, per_sm;
  } tma[] = {{8 << 10, 4, 4}, {16 << 10, 4, 2}, {16 << 10, 4, 3}, {32 << 10, 3, 2},
             {32 << 10, 2, 3}, {64 << 10, 3, 1}, {4 << 10, 8, 6}};
  for (const auto& t : tma) {
    const int b = 132 * t.per_sm / peers * peers;
    const size_t sm_bytes = (size_t)t.chunk * t.stages;
    std::snprintf(name, sizeof name, "tma: %d blocks, %u KiB x %d stages", b, t.chunk >> 10, t.stages);
    row(name, [&](int g) {
      tma_kernel<<<b, 32, sm_bytes, streams[g]>>>(reinterpret_cast<const char* const*>(ksrc[g]),
                                                  reinterpret_cast<char* const*>(kdst[g]), peers,
                                                  B, t.chunk, t.stages);
    });
  }
  return 0;
}
