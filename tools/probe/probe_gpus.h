// What the single-process all-to-all probes share (ce_a2a.cu, tma_store.cu). One process
// drives every GPU, so a measurement is the host's wall time from issuing work on any GPUs to
// every GPU's completion, the median over several runs after one untimed run.
#ifndef SYMCOMM_TOOLS_PROBE_GPUS_H_
#define SYMCOMM_TOOLS_PROBE_GPUS_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

#include "probe_check.h"

inline double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
// Waits for all work on GPUs 0 .. gpus - 1.
inline void sync_gpus(int gpus) {
  for (int g = 0; g < gpus; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaDeviceSynchronize());
  }
}
// Median time of `issue` (which enqueues work on any of the GPUs) over reps, host-timed.
inline double timed_on(int gpus, const std::function<void()>& issue, int reps = 7) {
  issue();
  sync_gpus(gpus);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_us();
    issue();
    sync_gpus(gpus);
    t.push_back(now_us() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Per GPU g, device arrays of the n - 1 sources and destinations of an all-to-all of B bytes
// per peer, peers in the order g + 1, g + 2, ...: g's block for r is send[g] + r B, and lands
// at recv[r] + g B.
inline void a2a_tables(int n, size_t B, const std::vector<char*>& send,
                       const std::vector<char*>& recv, std::vector<const int4**>& src,
                       std::vector<int4**>& dst) {
  src.assign(n, nullptr);
  dst.assign(n, nullptr);
  for (int g = 0; g < n; ++g) {
    std::vector<const int4*> hs;
    std::vector<int4*> hd;
    for (int d = 1; d < n; ++d) {
      const int r = (g + d) % n;
      hs.push_back(reinterpret_cast<const int4*>(send[g] + (size_t)r * B));
      hd.push_back(reinterpret_cast<int4*>(recv[r] + (size_t)g * B));
    }
    CK(cudaSetDevice(g));
    CK(cudaMalloc(&src[g], sizeof(void*) * n));
    CK(cudaMalloc(&dst[g], sizeof(void*) * n));
    CK(cudaMemcpy(src[g], hs.data(), sizeof(void*) * (n - 1), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dst[g], hd.data(), sizeof(void*) * (n - 1), cudaMemcpyHostToDevice));
  }
}

#endif  // SYMCOMM_TOOLS_PROBE_GPUS_H_
