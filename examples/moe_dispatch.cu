// Expert-parallel token routing (MoE dispatch and combine) with counts that only the GPU
// knows: a router kernel sends each token to the rank of its expert, an all-to-all-v with
// counts on the device (symcommAllToAllvDeviceOnStream) delivers the tokens, each rank's
// "expert" transforms what it received, and a second such all-to-all-v (the receive counts
// and displacements of the first as its send counts and displacements) brings every token
// back to the rank that owns it. The host never reads a count, so one step is captured in a
// CUDA graph once and replayed, with a new routing each step (the step number lives in device
// memory). Every token of every step is checked on the device; the receive buffers of both
// all-to-alls are poisoned (NaN) at the start of each step, so that a token a step fails to
// deliver cannot pass with an earlier step's value (the time per step includes the poisoning).
//
//   symrun -n 4 build/bin/symcomm-moe [--tokens T] [--hidden H] [--steps S]
//
// GPUs only (the sm algorithm): in the host memory space it says so and exits with 77.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "check.h"
#include "symcomm/symcomm.h"

namespace {

constexpr int kMaxRanks = 64;

// The rank whose expert token t of `rank` visits in `step`: a hash, so counts vary (and some
// are zero on small runs).
__device__ int route(uint64_t step, int rank, size_t t, int nranks) {
  uint64_t x = (step * 0x9e3779b97f4a7c15ull) ^ (uint64_t(rank) << 40) ^ t;
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<int>(x % static_cast<uint64_t>(nranks));
}

__device__ float input(int rank, size_t t, size_t h) {
  return static_cast<float>((rank * 131 + t * 7 + h) % 1024);
}

// What expert e makes of a value: exact in float for the inputs above.
__device__ float expert(float x, int e) { return 2 * x + static_cast<float>(e); }

struct State {        // device memory, one per rank
  uint64_t step;      // advanced by the graph itself
  size_t tokens_to[kMaxRanks];  // the router's counts, then cursors
  size_t send_counts[kMaxRanks], send_displs[kMaxRanks];  // in elements (tokens x hidden)
  size_t recv_counts[kMaxRanks], recv_displs[kMaxRanks];  // written by the dispatch
  size_t back_counts[kMaxRanks], back_displs[kMaxRanks];  // written by the combine
  unsigned long long bad;  // wrong values seen, all steps
};

// One block: counts per destination (shared-memory atomics), then their displacements and
// the cursors for the scatter.
__global__ void plan_routes(State* s, int me, int nranks, size_t tokens, size_t hidden) {
  __shared__ unsigned long long count[kMaxRanks];
  for (int j = threadIdx.x; j < nranks; j += blockDim.x) count[j] = 0;
  __syncthreads();
  for (size_t t = threadIdx.x; t < tokens; t += blockDim.x)
    atomicAdd(&count[route(s->step, me, t, nranks)], 1ull);
  __syncthreads();
  if (threadIdx.x == 0) {
    size_t at = 0;
    for (int j = 0; j < nranks; ++j) {
      s->send_counts[j] = count[j] * hidden;
      s->send_displs[j] = at * hidden;
      s->tokens_to[j] = at;  // cursor: the next free token slot of block j
      at += count[j];
    }
  }
}

// Token t to its block (order within a block: whatever the atomics give); pos[t] remembers
// where, so that the combine can be undone.
__global__ void scatter(State* s, const float* x, float* send, size_t* pos, int me, int nranks,
                        size_t tokens, size_t hidden) {
  for (size_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    __shared__ size_t slot;
    if (threadIdx.x == 0) {
      const int j = route(s->step, me, t, nranks);
      slot = atomicAdd(reinterpret_cast<unsigned long long*>(&s->tokens_to[j]), 1ull);
      pos[t] = slot;
    }
    __syncthreads();
    for (size_t h = threadIdx.x; h < hidden; h += blockDim.x) send[slot * hidden + h] = x[t * hidden + h];
    __syncthreads();
  }
}

// The expert of this rank, in place on every element received (their number is only known
// here, on the device).
__global__ void run_expert(const State* s, float* recv, int me, int nranks) {
  const size_t total = s->recv_displs[nranks - 1] + s->recv_counts[nranks - 1];
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < total;
       i += size_t{gridDim.x} * blockDim.x)
    recv[i] = expert(recv[i], me);
}

// Each token back in its place, checked.
__global__ void check_tokens(State* s, const float* back, const size_t* pos, int me,
                                  int nranks, size_t tokens, size_t hidden) {
  unsigned long long bad = 0;
  for (size_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int e = route(s->step, me, t, nranks);
    for (size_t h = threadIdx.x; h < hidden; h += blockDim.x)
      bad += back[pos[t] * hidden + h] != expert(input(me, t, h), e);
  }
  if (bad) atomicAdd(&s->bad, bad);
}

__global__ void advance(State* s) { ++s->step; }

__global__ void fill_input(float* x, int me, size_t tokens, size_t hidden) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < tokens * hidden;
       i += size_t{gridDim.x} * blockDim.x)
    x[i] = input(me, i / hidden, i % hidden);
}

}  // namespace

int main(int argc, char** argv) {
  size_t tokens = 4096, hidden = 1024;
  int steps = 20;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      tokens = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--hidden") == 0 && i + 1 < argc) {
      hidden = std::strtoull(argv[++i], nullptr, 10);
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: symrun -n N symcomm-moe [--tokens T] [--hidden H] [--steps S]\n");
      return 2;
    }
  }
  if (tokens == 0 || hidden == 0 || steps < 1) {
    std::fprintf(stderr, "symcomm-moe: --tokens, --hidden and --steps must be positive\n");
    return 2;
  }
  symcommComm_t comm;
  CHECK_SC(symcommInitFromEnv(&comm, nullptr));
  int me, nranks;
  symcommMemorySpace_t space;
  CHECK_SC(symcommCommRank(comm, &me));
  CHECK_SC(symcommCommSize(comm, &nranks));
  CHECK_SC(symcommCommMemorySpace(comm, &space));
  if (space != symcommSpaceCuda || nranks > kMaxRanks) {
    if (me == 0)
      std::printf("symcomm-moe: needs the cuda memory space and at most %d ranks (counts on the "
                  "device are the sm algorithm's); skipped\n", kMaxRanks);
    std::fflush(stdout);
    CHECK_SC(symcommHostBarrier(comm));  // printed before any rank exits
    CHECK_SC(symcommFinalize(comm));
    return 77;
  }
  const size_t n = static_cast<size_t>(nranks), elems = tokens * hidden;
  float *x, *send, *recv, *back;
  size_t* pos;
  State* s;
  CHECK_CUDA(cudaMalloc(&x, elems * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&send, elems * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&recv, n * elems * sizeof(float)));  // every token may come here
  CHECK_CUDA(cudaMalloc(&back, elems * sizeof(float)));
  CHECK_CUDA(cudaMalloc(&pos, tokens * sizeof(size_t)));
  CHECK_CUDA(cudaMalloc(&s, sizeof(State)));
  CHECK_CUDA(cudaMemset(s, 0, sizeof(State)));
  fill_input<<<256, 256>>>(x, me, tokens, hidden);
  CHECK_CUDA(cudaGetLastError());
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  CHECK_CUDA(cudaDeviceSynchronize());

  // The count arrays inside the device's State.
  auto field = [&](size_t offset) {
    return reinterpret_cast<size_t*>(reinterpret_cast<char*>(s) + offset);
  };
  size_t* const send_counts = field(offsetof(State, send_counts));
  size_t* const send_displs = field(offsetof(State, send_displs));
  size_t* const recv_counts = field(offsetof(State, recv_counts));
  size_t* const recv_displs = field(offsetof(State, recv_displs));
  size_t* const back_counts = field(offsetof(State, back_counts));
  size_t* const back_displs = field(offsetof(State, back_displs));
  // One step, enqueued on `stream`: poison, route, dispatch, expert, combine, check, next
  // step. (Stream-ordered before the all-to-alls, which deliver into recv and back only once
  // this rank has reached them.)
  auto step = [&] {
    CHECK_CUDA(cudaMemsetAsync(recv, 0xff, n * elems * sizeof(float), stream));
    CHECK_CUDA(cudaMemsetAsync(back, 0xff, elems * sizeof(float), stream));
    plan_routes<<<1, 1024, 0, stream>>>(s, me, nranks, tokens, hidden);
    scatter<<<512, 256, 0, stream>>>(s, x, send, pos, me, nranks, tokens, hidden);
    CHECK_SC(symcommAllToAllvDeviceOnStream(comm, SYMCOMM_TEAM_WORLD, send, send_counts,
                                            send_displs, recv, n * elems, recv_counts,
                                            recv_displs, symcommFloat32, nullptr, stream));
    run_expert<<<512, 256, 0, stream>>>(s, recv, me, nranks);
    CHECK_SC(symcommAllToAllvDeviceOnStream(comm, SYMCOMM_TEAM_WORLD, recv, recv_counts,
                                            recv_displs, back, elems, back_counts, back_displs,
                                            symcommFloat32, nullptr, stream));
    check_tokens<<<512, 256, 0, stream>>>(s, back, pos, me, nranks, tokens, hidden);
    advance<<<1, 1, 0, stream>>>(s);
    CHECK_CUDA(cudaGetLastError());
  };
  // A first step outside the graph (it loads the kernels and makes the collectives' state).
  step();
  CHECK_CUDA(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  step();
  CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_SC(symcommHostBarrier(comm));
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  CHECK_CUDA(cudaEventRecord(start, stream));
  for (int k = 0; k < steps; ++k) CHECK_CUDA(cudaGraphLaunch(exec, stream));
  CHECK_CUDA(cudaEventRecord(stop, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  State host{};
  CHECK_CUDA(cudaMemcpy(&host, s, sizeof host, cudaMemcpyDeviceToHost));
  CHECK_SC(symcommHostBarrier(comm));

  // Rank 0 prints every rank's line, all-gathered.
  struct Line {
    double us;
    unsigned long long bad, steps;
    size_t received;  // elements received in the last step
  };
  Line *line, *lines;
  CHECK_CUDA(cudaMalloc(&line, sizeof(Line)));
  CHECK_CUDA(cudaMalloc(&lines, n * sizeof(Line)));
  const Line mine{1000.0 * ms / steps, host.bad, host.step,
                  host.recv_displs[n - 1] + host.recv_counts[n - 1]};
  CHECK_CUDA(cudaMemcpy(line, &mine, sizeof mine, cudaMemcpyHostToDevice));
  CHECK_SC(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, line, lines, sizeof(Line),
                                    symcommUint8, nullptr, stream));
  CHECK_CUDA(cudaStreamSynchronize(stream));
  unsigned long long bad_total = 0;
  if (me == 0) {
    std::vector<Line> all(n);
    CHECK_CUDA(cudaMemcpy(all.data(), lines, n * sizeof(Line), cudaMemcpyDeviceToHost));
    std::printf("symcomm-moe: %d ranks, %zu tokens of %zu floats per rank, %d steps in a CUDA "
                "graph (plus one before)\n\n", nranks, tokens, hidden, steps);
    std::printf("%5s %14s %16s %10s\n", "rank", "us per step", "tokens received", "wrong");
    for (size_t r = 0; r < n; ++r) {
      std::printf("%5zu %14.1f %16zu %10llu\n", r, all[r].us, all[r].received / hidden, all[r].bad);
      bad_total += all[r].bad + (all[r].steps != static_cast<unsigned long long>(steps) + 1);
    }
    std::printf("\n%s\n", bad_total == 0 ? "PASSED: every token came back from its expert, every step"
                                         : "FAILED: wrong values (or steps) above");
  }
  for (void* p : {static_cast<void*>(line), static_cast<void*>(lines), static_cast<void*>(x),
                  static_cast<void*>(send), static_cast<void*>(recv), static_cast<void*>(back),
                  static_cast<void*>(pos), static_cast<void*>(s)})
    CHECK_CUDA(cudaFree(p));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  CHECK_CUDA(cudaStreamDestroy(stream));
  CHECK_CUDA(cudaGraphExecDestroy(exec));
  CHECK_CUDA(cudaGraphDestroy(graph));
  CHECK_SC(symcommFinalize(comm));
  const bool ok = bad_total == 0 && host.bad == 0 &&
                  host.step == static_cast<unsigned long long>(steps) + 1;
  return ok ? 0 : 1;
}
