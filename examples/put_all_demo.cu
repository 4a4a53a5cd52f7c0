// The symcomm demo: every rank writes into every peer's symmetric buffer through the
// pointer symcommPtr gives (plain stores from a kernel on GPUs, from the CPU in the host
// space), then checks what every peer wrote into its own buffer, and rank 0 prints a table.
//
//   symrun -n 4 build/bin/symcomm-demo [--mib-per-peer N] [--json FILE] [--machine NAME]
//
// Times are per rank: "cuda init" is the CUDA driver and context start-up, done first
// through the runtime so that "symcomm init" shows what joining costs on its own.
//
// --json FILE appends (rank 0) one record per step of symcomm-bench's format (bench/record.h,
// BENCH_FORMAT.md): bench "demo", op cuda_init / init / malloc / put_all, impl
// "symcomm:<space>", bytes each rank's buffer, time_us the median over ranks (max_time_us the
// slowest), verified true, iters 1, warmup 0, machine from --machine (default: GPU model x
// ranks, or "host"), commit from SYMCOMM_BENCH_COMMIT. Only a run whose check passed is
// written.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/record.h"
#include "check.h"
#include "symcomm/symcomm.h"

namespace {

using Clock = std::chrono::steady_clock;

// The 8-byte word that rank `src` writes at index i of its slot on rank `dst`.
__host__ __device__ uint64_t word(int src, int dst, size_t i) {
  uint64_t x = (uint64_t(src) << 48) ^ (uint64_t(dst) << 40) ^ i;
  return x * 0x9e3779b97f4a7c15ull + 1;
}

// One block row per peer: blockIdx.y picks the destination rank.
__global__ void put_all(uint64_t* const* peers, int me, size_t words) {
  uint64_t* dst = peers[blockIdx.y] + static_cast<size_t>(me) * words;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < words;
       i += size_t{gridDim.x} * blockDim.x)
    dst[i] = word(me, blockIdx.y, i);
}

__global__ void count_bad(const uint64_t* buf, int me, int nranks, size_t words,
                          unsigned long long* bad) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < words * nranks;
       i += size_t{gridDim.x} * blockDim.x)
    mine += buf[i] != word(static_cast<int>(i / words), me, i % words);
  if (mine) atomicAdd(bad, mine);
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

struct Row {
  int rank, node, device, space;
  double cuda_ms, init_ms, alloc_ms, put_ms;
  unsigned long long bad;
};

// Starts CUDA on the device symcomm will pick (local rank modulo the device count) and
// returns how long that took, or 0 where there is no GPU.
double start_cuda() {
  auto t = Clock::now();
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // no GPU: the host space will be used
    return 0;
  }
  const char* local = std::getenv("SYMCOMM_LOCAL_RANK");
  CHECK_CUDA(cudaSetDevice((local ? std::atoi(local) : 0) % count));
  CHECK_CUDA(cudaFree(nullptr));
  return ms_since(t);
}

// Appends the records of a run whose check passed; false if the file cannot be written.
bool write_json(const char* path, const char* machine, const std::vector<Row>& rows, int nranks,
                size_t bytes, bool gpu, int device) {
  std::string name = machine ? machine : "";
  if (name.empty()) {
    cudaDeviceProp prop{};
    if (gpu) CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    name = bench::machine_name(gpu ? prop.name : nullptr, nranks);
  }
  auto median = [&](double Row::*field) {
    std::vector<double> v;
    for (const Row& r : rows) v.push_back(r.*field);
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto max_of = [&](double Row::*field) {
    double m = 0;
    for (const Row& r : rows) m = std::max(m, r.*field);
    return m;
  };
  const struct {
    const char* op;
    double Row::*field;
  } ops[] = {{"cuda_init", &Row::cuda_ms}, {"init", &Row::init_ms}, {"malloc", &Row::alloc_ms},
             {"put_all", &Row::put_ms}};
  for (const auto& o : ops) {
    bench::Record r;
    r.bench = "demo";
    r.op = o.op;
    r.impl = gpu ? "symcomm:cuda" : "symcomm:host";
    r.bytes = bytes;
    r.ranks = nranks;
    r.time_us = 1000 * median(o.field);
    r.iters = 1;  // each step once
    r.warmup = 0;
    char slowest[32];
    std::snprintf(slowest, sizeof slowest, "%.1f", 1000 * max_of(o.field));
    r.extra = {{"max_time_us", slowest}, {"verified", "true"}};
    if (!bench::append_record(path, name, r)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  long mib = -1;
  const char* json = nullptr;
  const char* machine = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--mib-per-peer") == 0 && i + 1 < argc) {
      mib = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else if (std::strcmp(argv[i], "--machine") == 0 && i + 1 < argc) {
      machine = argv[++i];
    } else {
      std::fprintf(stderr, "usage: symrun -n N symcomm-demo [--mib-per-peer N] [--json FILE] [--machine NAME]\n");
      return 2;
    }
  }
  Row row{};
  row.cuda_ms = start_cuda();
  auto t0 = Clock::now();
  symcommComm_t comm;
  CHECK_SC(symcommInitFromEnv(&comm, nullptr));
  row.init_ms = ms_since(t0);
  int nranks, node, nnodes;
  symcommMemorySpace_t space;
  CHECK_SC(symcommCommRank(comm, &row.rank));
  CHECK_SC(symcommCommSize(comm, &nranks));
  CHECK_SC(symcommCommNode(comm, &node, &nnodes));
  CHECK_SC(symcommCommDevice(comm, &row.device));
  CHECK_SC(symcommCommMemorySpace(comm, &space));
  row.node = node;
  row.space = space;
  const bool gpu = space == symcommSpaceCuda;
  if (mib < 0) mib = gpu ? 256 : 8;
  const size_t words = static_cast<size_t>(mib) << 17;  // MiB of 8-byte words
  const size_t bytes = words * 8 * static_cast<size_t>(nranks);

  auto t1 = Clock::now();
  uint64_t* buf;
  CHECK_SC(symcommMalloc(comm, bytes, reinterpret_cast<void**>(&buf)));
  row.alloc_ms = ms_since(t1);
  std::vector<uint64_t*> peers(static_cast<size_t>(nranks));
  for (int pe = 0; pe < nranks; ++pe) {
    peers[static_cast<size_t>(pe)] = static_cast<uint64_t*>(symcommPtr(comm, buf, pe));
    if (!peers[static_cast<size_t>(pe)]) {
      std::fprintf(stderr, "rank %d cannot reach rank %d by load/store: %s\n", row.rank, pe,
                   symcommGetLastError());
      return 1;
    }
  }
  // Poison our own buffer so that a missing write cannot pass the check.
  if (gpu) {
    CHECK_CUDA(cudaMemset(buf, 0xff, bytes));
    CHECK_CUDA(cudaDeviceSynchronize());
  } else {
    std::memset(buf, 0xff, bytes);
  }
  CHECK_SC(symcommHostBarrier(comm));

  auto t2 = Clock::now();
  uint64_t** dpeers = nullptr;
  if (gpu) {
    CHECK_CUDA(cudaMalloc(&dpeers, sizeof(uint64_t*) * peers.size()));
    CHECK_CUDA(cudaMemcpy(dpeers, peers.data(), sizeof(uint64_t*) * peers.size(),
                          cudaMemcpyHostToDevice));
    t2 = Clock::now();
    put_all<<<dim3(132, static_cast<unsigned>(nranks)), 512>>>(dpeers, row.rank, words);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
  } else {
    for (int pe = 0; pe < nranks; ++pe) {
      uint64_t* dst = peers[static_cast<size_t>(pe)] + static_cast<size_t>(row.rank) * words;
      for (size_t i = 0; i < words; ++i) dst[i] = word(row.rank, pe, i);
    }
  }
  row.put_ms = ms_since(t2);
  CHECK_SC(symcommHostBarrier(comm));  // every peer's writes are done

  if (gpu) {
    unsigned long long* bad;
    CHECK_CUDA(cudaMalloc(&bad, sizeof *bad));
    CHECK_CUDA(cudaMemset(bad, 0, sizeof *bad));
    count_bad<<<264, 512>>>(buf, row.rank, nranks, words, bad);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaMemcpy(&row.bad, bad, sizeof row.bad, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaFree(bad));
    CHECK_CUDA(cudaFree(dpeers));
  } else {
    for (size_t i = 0; i < words * static_cast<size_t>(nranks); ++i)
      row.bad += buf[i] != word(static_cast<int>(i / words), row.rank, i % words);
  }

  std::vector<Row> rows(static_cast<size_t>(nranks));
  CHECK_SC(symcommHostAllgather(comm, &row, rows.data(), sizeof row));
  bool ok = true;
  if (row.rank == 0) {
    std::printf("symcomm demo: %d ranks on %d node(s), %s space, each rank writes %ld MiB into "
                "every rank's symmetric buffer\n\n", nranks, nnodes, gpu ? "cuda" : "host", mib);
    std::printf("%4s %4s %6s %14s %16s %10s %10s %12s %8s\n", "rank", "node", "device",
                "cuda init ms", "symcomm init ms", "alloc ms", "write ms", "write GB/s", "check");
    for (const Row& r : rows) {
      double gbs = static_cast<double>(bytes) / (r.put_ms * 1e6);
      std::printf("%4d %4d %6d %14.1f %16.1f %10.2f %10.2f %12.1f %8s\n", r.rank, r.node,
                  r.device, r.cuda_ms, r.init_ms, r.alloc_ms, r.put_ms, gbs,
                  r.bad ? "FAILED" : "ok");
      if (r.bad) {
        std::printf("     rank %d found %llu wrong words\n", r.rank, r.bad);
        ok = false;
      }
    }
    std::printf("\n%s: every rank read what every peer wrote (%zu bytes per rank verified)\n",
                ok ? "PASSED" : "FAILED", bytes);
  }
  for (const Row& r : rows) ok = ok && r.bad == 0;
  if (json && row.rank == 0) {
    if (!ok) {
      std::fprintf(stderr, "symcomm-demo: the check failed: nothing written to %s\n", json);
    } else if (!write_json(json, machine, rows, nranks, bytes, gpu, row.device)) {
      std::fprintf(stderr, "symcomm-demo: cannot write %s\n", json);
      ok = false;
    }
  }
  CHECK_SC(symcommFree(comm, buf));
  CHECK_SC(symcommFinalize(comm));
  return ok ? 0 : 1;
}
