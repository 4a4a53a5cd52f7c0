// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/; or by hand on a GPU machine:
//   nvcc -O2 -arch=sm_90 -o ce_a2a tools/probe/ce_a2a.cu -lcuda && ./ce_a2a [MiB per peer]):
// Why does a copy-engine all-to-all move less per GPU than one copy-engine copy to one peer?
// One process drives every GPU (peer access, cudaMalloc memory) and times, on the host,
// patterns of copies (push: the sender's copy engines write into the peer; pull: the
// receiver's read from it), an SM store kernel, and SM + CE hybrids. Each figure is the median
// of several runs, in GB/s leaving (push) or arriving at (pull) one GPU.
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "probe_check.h"
#include "probe_gpus.h"

constexpr int kMaxStreams = 16;
int n = 0;
size_t B = 0;  // bytes per peer
std::vector<char*> sendb, recvb;
std::vector<std::vector<cudaStream_t>> streams;

void sync_all() { sync_gpus(n); }
double timed(const std::function<void()>& issue, int reps = 7) { return timed_on(n, issue, reps); }
void report(const char* name, double us, double bytes_per_gpu) {
  std::printf("%-58s %10.1f us  %7.1f GB/s per GPU\n", name, us, bytes_per_gpu / us * 1e-3);
  std::fflush(stdout);
}

__global__ void store_kernel(const int4* const* src, int4* const* dst, int peers, size_t n16,
                             size_t lo16, size_t hi16) {
  // Blocks are spread over the peers; each copies [lo16, hi16) of the block per peer.
  const int per = gridDim.x / peers;
  const int p = blockIdx.x / per;
  if (p >= peers) return;
  const int4* s = src[p];
  int4* d = dst[p];
  const size_t len = hi16 - lo16;
  const size_t stride = (size_t)per * blockDim.x;
  for (size_t i = (size_t)(blockIdx.x % per) * blockDim.x + threadIdx.x; i < len; i += stride * 4) {
    int4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < len) v[u] = __ldcs(s + lo16 + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * stride < len) __stcs(d + lo16 + i + u * stride, v[u]);
  }
  (void)n16;
}

// Device arrays of the source and destination pointers per GPU (peer order: g+1, g+2...).
std::vector<const int4**> ksrc;
std::vector<int4**> kdst;

void launch_sm(int g, int blocks, double frac_lo, double frac_hi, cudaStream_t s) {
  const size_t n16 = B / 16;
  const size_t lo = (size_t)(frac_lo * n16), hi = (size_t)(frac_hi * n16);
  if (hi <= lo) return;
  CK(cudaSetDevice(g));
  store_kernel<<<blocks, 512, 0, s>>>(ksrc[g], kdst[g], n - 1, n16, lo, hi);
  CK(cudaGetLastError());
}

// The block of sender g for receiver r: sendb[g] + r*B  ->  recvb[r] + g*B.
void ce_push(int g, int r, size_t off, size_t len, cudaStream_t s) {
  CK(cudaMemcpyAsync(recvb[r] + (size_t)g * B + off, sendb[g] + (size_t)r * B + off, len,
                     cudaMemcpyDeviceToDevice, s));
}

// cuMemCreate memory on GPU g, mapped once with read/write access for every GPU (as the
// symmetric heap's chunks are, 512 MiB each).
char* vmm_alloc(int g, size_t bytes) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = g;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  size_t gran = 0;
  CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  const size_t chunk = size_t{512} << 20;
  bytes = (bytes + chunk - 1) / chunk * chunk;
  CUdeviceptr p = 0;
  CU(cuMemAddressReserve(&p, bytes, gran, 0, 0));
  for (size_t off = 0; off < bytes; off += chunk) {
    CUmemGenericAllocationHandle h;
    CU(cuMemCreate(&h, chunk, &prop, 0));
    CU(cuMemMap(p + off, chunk, 0, h, 0));
    CU(cuMemRelease(h));
  }
  std::vector<CUmemAccessDesc> acc(n);
  for (int d = 0; d < n; ++d) {
    acc[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc[d].location.id = d;
    acc[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  CU(cuMemSetAccess(p, bytes, acc.data(), n));
  return reinterpret_cast<char*>(p);
}

int main(int argc, char** argv) {
  CK(cudaGetDeviceCount(&n));
  B = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256) << 20;
  const bool vmm = argc > 2 && std::string(argv[2]) == "vmm";
  std::printf("%d GPUs, %zu MiB per peer, %s memory\n", n, B >> 20,
              vmm ? "cuMemCreate" : "cudaMalloc");
  sendb.resize(n);
  recvb.resize(n);
  streams.assign(n, std::vector<cudaStream_t>(kMaxStreams));
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    for (int p = 0; p < n; ++p)
      if (p != g) CK(cudaDeviceEnablePeerAccess(p, 0));
    if (vmm) {
      sendb[g] = vmm_alloc(g, B * n);
      recvb[g] = vmm_alloc(g, B * n);
    } else {
      CK(cudaMalloc(&sendb[g], B * n));
      CK(cudaMalloc(&recvb[g], B * n));
    }
    CK(cudaMemset(sendb[g], g + 1, B * n));
    for (auto& s : streams[g]) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  a2a_tables(n, B, sendb, recvb, ksrc, kdst);
  sync_all();
  const double out = (double)B * (n - 1);
  char name[128];

  report("uni: GPU0 -> GPU1, one copy", timed([&] {
           CK(cudaSetDevice(0));
           ce_push(0, 1, 0, B, streams[0][0]);
         }), (double)B);
  report("uni pull: GPU1 reads GPU0's block, one copy", timed([&] {
           CK(cudaSetDevice(1));
           ce_push(0, 1, 0, B, streams[1][0]);
         }), (double)B);
  report("bidirectional pair: GPU0 <-> GPU1", timed([&] {
           CK(cudaSetDevice(0));
           ce_push(0, 1, 0, B, streams[0][0]);
           CK(cudaSetDevice(1));
           ce_push(1, 0, 0, B, streams[1][0]);
         }), (double)B);
  report("one-to-all: GPU0 -> every peer, a stream each", timed([&] {
           CK(cudaSetDevice(0));
           for (int d = 1; d < n; ++d) ce_push(0, d, 0, B, streams[0][d - 1]);
         }), out);
  report("all-to-one: every peer -> GPU0 (GB/s into GPU0)", timed([&] {
           for (int d = 1; d < n; ++d) {
             CK(cudaSetDevice(d));
             ce_push(d, 0, 0, B, streams[d][0]);
           }
         }), out);
  report("one-to-all, one stream, one peer after another", timed([&] {
           CK(cudaSetDevice(0));
           for (int d = 1; d < n; ++d) ce_push(0, d, 0, B, streams[0][0]);
         }), out);
  for (int k : {1, 2, 4, 7, 16}) {
    if (k > 1 && k > n - 1 && k != 16) continue;
    std::snprintf(name, sizeof name, "a2a push, peers over %d stream(s) per GPU", k);
    report(name, timed([&] {
             for (int g = 0; g < n; ++g) {
               CK(cudaSetDevice(g));
               for (int d = 1; d < n; ++d) ce_push(g, (g + d) % n, 0, B, streams[g][(d - 1) % k]);
             }
           }), out);
  }
  report("a2a push + own block copied locally on a 4th stream", timed([&] {
           for (int g = 0; g < n; ++g) {
             CK(cudaSetDevice(g));
             for (int d = 1; d < n; ++d) ce_push(g, (g + d) % n, 0, B, streams[g][d - 1]);
             ce_push(g, g, 0, B, streams[g][n - 1]);
           }
         }), out);
  report("a2a push, then own block locally on the same stream", timed([&] {
           for (int g = 0; g < n; ++g) {
             CK(cudaSetDevice(g));
             for (int d = 1; d < n; ++d) ce_push(g, (g + d) % n, 0, B, streams[g][0]);
             ce_push(g, g, 0, B, streams[g][0]);
           }
         }), out);
  report("own block alone, copied locally by a CE", timed([&] {
           for (int g = 0; g < n; ++g) {
             CK(cudaSetDevice(g));
             ce_push(g, g, 0, B, streams[g][0]);
           }
         }), (double)B);
  if (std::getenv("PROBE_SHORT")) return 0;
  for (size_t chunk_mib : {2, 8, 32}) {
    const size_t c = chunk_mib << 20;
    if (c >= B) continue;
    std::snprintf(name, sizeof name, "a2a push, %zu MiB chunks interleaved, a stream per peer",
                  chunk_mib);
    report(name, timed([&] {
             for (int g = 0; g < n; ++g) {
               CK(cudaSetDevice(g));
               for (size_t off = 0; off < B; off += c)
                 for (int d = 1; d < n; ++d)
                   ce_push(g, (g + d) % n, off, std::min(c, B - off), streams[g][d - 1]);
             }
           }), out);
    std::snprintf(name, sizeof name, "a2a push, %zu MiB chunks interleaved, one stream",
                  chunk_mib);
    report(name, timed([&] {
             for (int g = 0; g < n; ++g) {
               CK(cudaSetDevice(g));
               for (size_t off = 0; off < B; off += c)
                 for (int d = 1; d < n; ++d)
                   ce_push(g, (g + d) % n, off, std::min(c, B - off), streams[g][0]);
             }
           }), out);
  }
  report("a2a pull (receiver's CEs read), a stream per peer", timed([&] {
           for (int r = 0; r < n; ++r) {
             CK(cudaSetDevice(r));
             for (int d = 1; d < n; ++d) ce_push((r + d) % n, r, 0, B, streams[r][d - 1]);
           }
         }), out);
  report("a2a half push, half pull, a stream each", timed([&] {
           for (int g = 0; g < n; ++g) {
             CK(cudaSetDevice(g));
             for (int d = 1; d < n; ++d) {
               ce_push(g, (g + d) % n, 0, B / 2, streams[g][d - 1]);
               ce_push((g + d) % n, g, B / 2, B - B / 2, streams[g][n - 1 + d - 1]);
             }
           }
         }), out);
  for (int blocks : {32, 64, 128, 132 * 2}) {
    const int b = blocks / (n - 1) * (n - 1);
    std::snprintf(name, sizeof name, "a2a SM stores, %d blocks x 512 threads", b);
    report(name, timed([&] {
             for (int g = 0; g < n; ++g) launch_sm(g, b, 0.0, 1.0, streams[g][0]);
           }), out);
  }
  for (double f : {0.25, 0.4, 0.5}) {
    for (int blocks : {32, 64}) {
      const int b = blocks / (n - 1) * (n - 1);
      std::snprintf(name, sizeof name, "hybrid: SM %d blocks %.0f%%, CE push rest", b, f * 100);
      report(name, timed([&] {
               for (int g = 0; g < n; ++g) {
                 launch_sm(g, b, 0.0, f, streams[g][0]);
                 const size_t lo = (size_t)(f * (B / 16)) * 16;
                 for (int d = 1; d < n; ++d)
                   ce_push(g, (g + d) % n, lo, B - lo, streams[g][d]);
               }
             }), out);
    }
  }
  // Latency of a stream memory-operation ping-pong GPU0 <-> GPU1 (one way), and of a fork
  // and join over 4 side streams with nothing in them.
  {
    uint64_t *f0, *f1;
    CK(cudaSetDevice(0));
    CK(cudaMalloc(&f0, 64));
    CK(cudaMemset(f0, 0, 64));
    CK(cudaSetDevice(1));
    CK(cudaMalloc(&f1, 64));
    CK(cudaMemset(f1, 0, 64));
    sync_all();
    const int iters = 1000;
    uint64_t v = 0;
    double us = timed([&] {
      for (int i = 0; i < iters; ++i) {
        ++v;
        CK(cudaSetDevice(0));
        CU(cuStreamWriteValue64(streams[0][0], (CUdeviceptr)f1, v, CU_STREAM_WRITE_VALUE_DEFAULT));
        CU(cuStreamWaitValue64(streams[0][0], (CUdeviceptr)f0, v, CU_STREAM_WAIT_VALUE_GEQ));
        CK(cudaSetDevice(1));
        CU(cuStreamWaitValue64(streams[1][0], (CUdeviceptr)f1, v, CU_STREAM_WAIT_VALUE_GEQ));
        CU(cuStreamWriteValue64(streams[1][0], (CUdeviceptr)f0, v, CU_STREAM_WRITE_VALUE_DEFAULT));
      }
    }, 3);
    std::printf("memop ping-pong GPU0 <-> GPU1: %.2f us one way\n", us / iters / 2);
    cudaEvent_t fork, join[4];
    CK(cudaSetDevice(0));
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (auto& e : join) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    us = timed([&] {
      for (int i = 0; i < iters; ++i) {
        CK(cudaEventRecord(fork, streams[0][0]));
        for (int q = 1; q <= 4; ++q) {
          CK(cudaStreamWaitEvent(streams[0][q], fork, 0));
          CK(cudaEventRecord(join[q - 1], streams[0][q]));
          CK(cudaStreamWaitEvent(streams[0][0], join[q - 1], 0));
        }
      }
    }, 3);
    std::printf("fork + join over 4 empty side streams: %.2f us\n", us / iters);
    us = timed([&] {
      for (int i = 0; i < iters; ++i) {
        CK(cudaEventRecord(fork, streams[0][0]));
        for (int q = 1; q <= 4; ++q) {
          CK(cudaStreamWaitEvent(streams[0][q], fork, 0));
          CK(cudaMemcpyAsync(recvb[1] + q * 64, sendb[0], 64, cudaMemcpyDeviceToDevice,
                             streams[0][q]));
          CK(cudaEventRecord(join[q - 1], streams[0][q]));
          CK(cudaStreamWaitEvent(streams[0][0], join[q - 1], 0));
        }
      }
    }, 3);
    std::printf("fork + 64 B peer copy + join over 4 side streams: %.2f us\n", us / iters);
    us = timed([&] {
      for (int i = 0; i < iters; ++i)
        CK(cudaMemcpyAsync(recvb[1], sendb[0], 64, cudaMemcpyDeviceToDevice, streams[0][0]));
    }, 3);
    std::printf("64 B peer copy, back to back on one stream: %.2f us\n", us / iters);
    us = timed([&] {
      for (int i = 0; i < iters; ++i)
        CU(cuStreamWriteValue32(streams[0][0], (CUdeviceptr)f1, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    }, 3);
    std::printf("32-bit memop write to a peer, back to back: %.2f us\n", us / iters);
  }
  return 0;
}
