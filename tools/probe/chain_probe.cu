// Probe (built with -DSYMCOMM_BUILD_PROBES=ON into build/probe/; or by hand on a GPU machine:
//   nvcc -O2 -std=c++17 -arch=sm_90 -o chain tools/probe/chain_probe.cu -lcuda -lnccl
//   NCCL_NVLS_ENABLE=0 ./chain [MiB ...]):
// Can a broadcast done (wholly or in part) as a pipelined chain of copy-engine copies
// (root -> 1 -> 2 -> ..., every GPU receiving from one peer and sending to one, like NCCL's
// ring, but by the copy engines, 390 GB/s per direction) beat NCCL's broadcast? The hybrid
// runs NCCL on the first part of the message and the chain on the rest at the same time,
// to see whether the copy engines add to what NCCL's SM ring moves over the same links.
// One process drives every GPU. The chain's part is cut into chunks; chunk c goes on lane
// c % lanes (a stream of its own on each GPU). On a lane, a GPU waits for its predecessor's
// count of that lane (cuStreamWaitValue64), copies the chunk to its successor
// (cudaMemcpyAsync, peer access) and raises the successor's count (cuStreamWriteValue64,
// whose memory barrier orders the copy before it). A batch of back-to-back broadcasts is
// issued behind a host-mapped gate that every GPU's stream waits for, so that issuing is
// not timed; each GPU times its batch with events, and a broadcast's time is the slowest
// GPU's over the batch. NCCL's broadcast alone is timed the same way in the same run, and
// every batch is checked: the root's bytes are fresh per batch and every other GPU's
// buffer is poisoned before it.
#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "probe_check.h"

constexpr int kMaxLanes = 4;
int n = 0;
size_t kMaxBytes = 0;
std::vector<char*> buf;                // per GPU
std::vector<uint64_t*> sig;            // per GPU: kMaxLanes counts, written by its predecessor
std::vector<cudaStream_t> mainst;      // per GPU
std::vector<std::vector<cudaStream_t>> lanest;
std::vector<cudaEvent_t> ev0, ev1, fork_ev;
std::vector<std::vector<cudaEvent_t>> join_ev;
std::vector<unsigned*> errs;           // per GPU: mismatch count
volatile uint32_t* gate_host = nullptr;
CUdeviceptr gate_dev = 0;
uint32_t gate_value = 0;
ncclComm_t* comms = nullptr;
// A watchdog opens the gate when issuing a run has taken over 5 s (a call that blocks until
// earlier work on its stream is done would otherwise wait for the gate forever); such a run
// is reported as forced and its time means nothing.
std::atomic<long> issue_started_ms{0};
std::atomic<bool> forced{false};
long now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
void watchdog() {
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const long t = issue_started_ms.load();
    if (t && now_ms() - t > 5000) {
      forced = true;
      *gate_host = gate_value;
      issue_started_ms = 0;
    }
  }
}

__global__ void fill(uint32_t* p, size_t words, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = (uint32_t)(i * 2654435761u) ^ seed;
}
__global__ void check(const uint32_t* p, size_t words, uint32_t seed, unsigned* bad) {
  unsigned b = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < words;
       i += (size_t)gridDim.x * blockDim.x)
    b += p[i] != ((uint32_t)(i * 2654435761u) ^ seed);
  if (b) atomicAdd(bad, b);
}

// Each GPU's main stream waits for the gate, then records its start.
void open_gate_wait() {
  ++gate_value;
  issue_started_ms = now_ms();
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    CU(cuStreamWaitValue32(mainst[g], gate_dev, gate_value, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cudaEventRecord(ev0[g], mainst[g]));
  }
}
float release_and_time() {
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaEventRecord(ev1[g], mainst[g]));
  }
  issue_started_ms = 0;
  *gate_host = gate_value;
  float worst = 0;
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaEventSynchronize(ev1[g]));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, ev0[g], ev1[g]));
    worst = std::max(worst, ms);
  }
  return worst * 1000.f;
}

// Fresh data on the root (GPU 0), poison elsewhere, zero counts; synchronised.
uint32_t prepare(size_t bytes, uint32_t seed) {
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    if (g == 0)
      fill<<<264, 512, 0, mainst[g]>>>(reinterpret_cast<uint32_t*>(buf[g]), bytes / 4, seed);
    else
      CK(cudaMemsetAsync(buf[g], 0xEE, bytes, mainst[g]));
    CK(cudaGetLastError());
    CK(cudaMemsetAsync(sig[g], 0, sizeof(uint64_t) * kMaxLanes, mainst[g]));
    CK(cudaMemsetAsync(errs[g], 0, sizeof(unsigned), mainst[g]));
    CK(cudaStreamSynchronize(mainst[g]));
  }
  return seed;
}
unsigned verify(size_t bytes, uint32_t seed) {
  unsigned total = 0;
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    check<<<264, 512, 0, mainst[g]>>>(reinterpret_cast<uint32_t*>(buf[g]), bytes / 4, seed,
                                      errs[g]);
    CK(cudaGetLastError());
    unsigned b = 0;
    CK(cudaMemcpyAsync(&b, errs[g], sizeof b, cudaMemcpyDeviceToHost, mainst[g]));
    CK(cudaStreamSynchronize(mainst[g]));
    total += b;
  }
  return total;
}

// The chain broadcast from GPU 0 of [off, off + bytes), on the lane streams (forked from
// and joined to the main streams by the caller). `rep`: how many earlier runs of the same
// chain the counts already passed (runs follow each other without resetting them).
void issue_chain(size_t off0, size_t bytes, size_t chunk, int lanes, uint64_t rep) {
  const size_t chunks = (bytes + chunk - 1) / chunk;
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    const int next = g + 1 < n ? g + 1 : -1;
    for (size_t c = 0; c < chunks; ++c) {
      const int l = (int)(c % lanes);
      const uint64_t per_lane = (chunks + lanes - 1 - l) / lanes;
      const uint64_t j = rep * per_lane + c / lanes + 1;  // this chunk's count on its lane
      cudaStream_t s = lanest[g][l];
      if (g > 0 && next >= 0)
        CU(cuStreamWaitValue64(s, (CUdeviceptr)(sig[g] + l), j, CU_STREAM_WAIT_VALUE_GEQ));
      if (next >= 0) {
        const size_t off = off0 + c * chunk, len = std::min(chunk, off0 + bytes - off);
        CK(cudaMemcpyAsync(buf[next] + off, buf[g] + off, len, cudaMemcpyDeviceToDevice, s));
        CU(cuStreamWriteValue64(s, (CUdeviceptr)(sig[next] + l), j,
                                CU_STREAM_WRITE_VALUE_DEFAULT));
      }
    }
    if (next < 0) {  // the last GPU only waits for every lane's final count
      for (int l = 0; l < lanes; ++l) {
        const uint64_t per_lane = (chunks + lanes - 1 - l) / lanes;
        if (per_lane)
          CU(cuStreamWaitValue64(lanest[g][l], (CUdeviceptr)(sig[g] + l),
                                 (rep + 1) * per_lane, CU_STREAM_WAIT_VALUE_GEQ));
      }
    }
  }
}
void fork_lanes(int lanes) {
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaEventRecord(fork_ev[g], mainst[g]));
    for (int l = 0; l < lanes; ++l) CK(cudaStreamWaitEvent(lanest[g][l], fork_ev[g], 0));
  }
}
void join_lanes(int lanes) {
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    for (int l = 0; l < lanes; ++l) {
      CK(cudaEventRecord(join_ev[g][l], lanest[g][l]));
      CK(cudaStreamWaitEvent(mainst[g], join_ev[g][l], 0));
    }
  }
}
void issue_nccl(size_t off, size_t bytes) {
  NC(ncclGroupStart());
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    NC(ncclBroadcast(buf[g] + off, buf[g] + off, bytes, ncclChar, 0, comms[g], mainst[g]));
  }
  NC(ncclGroupEnd());
}
// A broadcast of `bytes`: the first (1 - frac) by NCCL on the main streams, at the same
// time the rest by the copy-engine chain on the lanes (frac 1: the chain alone; 0: NCCL).
void issue_hybrid(size_t bytes, double frac, int chunks, int lanes, uint64_t rep) {
  size_t ce = static_cast<size_t>(bytes * frac) / 4096 * 4096;
  if (frac >= 1) ce = bytes;
  const size_t nccl = bytes - ce;
  if (ce) fork_lanes(lanes);
  if (nccl) issue_nccl(0, nccl);
  if (ce) {
    issue_chain(nccl, ce, (ce + chunks - 1) / chunks, lanes, rep);
    join_lanes(lanes);
  }
}
// A batch of `runs` back-to-back broadcasts behind the gate (fresh data, poisoned
// receivers, counts at zero before it); time per broadcast, the slowest GPU's; the median
// of `batches` batches. Every batch is checked after it ends.
double timed(size_t bytes, int runs, const std::function<void(uint64_t)>& issue,
             unsigned* bad, int batches = 3) {
  std::vector<double> t;
  *bad = 0;
  for (int b = 0; b < batches; ++b) {
    const uint32_t seed = prepare(bytes, 0x9e3779b9u * (gate_value + 7));
    open_gate_wait();
    for (int r = 0; r < runs; ++r) issue(r);
    t.push_back(release_and_time() / runs);
    *bad += verify(bytes, seed);
  }
  std::sort(t.begin(), t.end());
  if (forced.exchange(false)) std::printf("(forced: the gate opened before issuing ended)\n");
  return t[t.size() / 2];
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CK(cudaGetDeviceCount(&n));
  std::vector<size_t> sizes;
  for (int a = 1; a < argc; ++a) sizes.push_back(std::strtoull(argv[a], nullptr, 10) << 20);
  if (sizes.empty()) sizes = {size_t{16} << 20, size_t{128} << 20, size_t{1} << 30};
  for (size_t s : sizes) kMaxBytes = std::max(kMaxBytes, s);
  std::printf("%d GPUs, chain 0 -> 1 -> ... -> %d\n", n, n - 1);
  buf.resize(n);
  sig.resize(n);
  errs.resize(n);
  mainst.resize(n);
  lanest.assign(n, std::vector<cudaStream_t>(kMaxLanes));
  ev0.resize(n);
  ev1.resize(n);
  fork_ev.resize(n);
  join_ev.assign(n, std::vector<cudaEvent_t>(kMaxLanes));
  CK(cudaSetDevice(0));
  uint32_t* gh = nullptr;
  CK(cudaHostAlloc(&gh, 4096, cudaHostAllocMapped | cudaHostAllocPortable));
  *gh = 0;
  gate_host = gh;
  CU(cuMemHostGetDevicePointer(&gate_dev, gh, 0));
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    for (int p = 0; p < n; ++p)
      if (p != g) CK(cudaDeviceEnablePeerAccess(p, 0));
    CK(cudaMalloc(&buf[g], kMaxBytes));
    CK(cudaMalloc(&sig[g], sizeof(uint64_t) * kMaxLanes));
    CK(cudaMalloc(&errs[g], sizeof(unsigned)));
    CK(cudaStreamCreateWithFlags(&mainst[g], cudaStreamNonBlocking));
    for (auto& s : lanest[g]) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaEventCreate(&ev0[g]));
    CK(cudaEventCreate(&ev1[g]));
    CK(cudaEventCreateWithFlags(&fork_ev[g], cudaEventDisableTiming));
    for (auto& e : join_ev[g]) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }
  comms = new ncclComm_t[n];
  NC(ncclCommInitAll(comms, n, nullptr));
  std::thread(watchdog).detach();
  // NCCL's first call sets up its connections and may wait on the stream: not behind a gate.
  issue_nccl(0, kMaxBytes);
  for (int g = 0; g < n; ++g) {
    CK(cudaSetDevice(g));
    CK(cudaStreamSynchronize(mainst[g]));
  }
  std::printf("nccl warmed up\n");
  std::fflush(stdout);

  for (size_t bytes : sizes) {
    unsigned bad = 0;
    const int runs = bytes >= (size_t{512} << 20) ? 4 : 16;
    auto nccl_only = [&] { return timed(bytes, runs, [&](uint64_t r) { issue_hybrid(bytes, 0, 1, 1, r); }, &bad); };
    const double tn = nccl_only();
    std::printf("%6zu MiB  nccl                                %9.1f us  %6.1f GB/s  bad %u\n",
                bytes >> 20, tn, bytes / tn * 1e-3, bad);
    for (double frac : {1.0, 0.05, 0.1, 0.15, 0.2, 0.3}) {
      for (int chunks : {2, 4, 8, 16}) {
        for (int lanes : {1, 2}) {
          if (lanes > chunks) continue;
          if (frac >= 1 && chunks < 8) continue;
          if ((chunks + lanes - 1) / lanes * 3 * runs > 600) continue;
          const double tc = timed(bytes, runs, [&](uint64_t r) { issue_hybrid(bytes, frac, chunks, lanes, r); }, &bad);
          std::printf("%6zu MiB  ce %4.2f chunks %2d lanes %d          %9.1f us  %6.1f GB/s  bad %u  %.3fx nccl\n",
                      bytes >> 20, frac, chunks, lanes, tc, bytes / tc * 1e-3, bad, tn / tc);
        }
      }
    }
    const double tn2 = nccl_only();
    std::printf("%6zu MiB  nccl again                          %9.1f us  %6.1f GB/s  bad %u\n",
                bytes >> 20, tn2, bytes / tn2 * 1e-3, bad);
  }
  for (int g = 0; g < n; ++g) ncclCommDestroy(comms[g]);
  return 0;
}
