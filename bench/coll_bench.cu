// symcomm-bench coll: symcomm's collectives (the automatic choice and every registered
// algorithm) against NCCL in the same run. Every (implementation, size) is first checked
// against a host reference on fresh data, then timed; a wrong result ends the run with
// status 1, naming the operation, implementation and size.
//
// Sizes and bandwidths are nccl-tests', so that its tables compare. `bytes` (BENCH_FORMAT's
// message size per rank) is the larger of a rank's two buffers, in float32 elements, with
// `count` the count argument of the call:
//   alltoall       send and recv: n * count (count to and from each member)
//   alltoallv      the same, as all-to-all-v with host arrays of equal counts (count each)
//   alltoallv_device  the same, with the counts in device memory (recv counts and
//                  displacements written by the call and checked too)
//   allgather      recv: n * count (send: count)
//   reducescatter  send: n * count (recv: count)
//   allreduce      send and recv: count
//   broadcast      send and recv: count
// Nominal sizes that give count 0 are skipped; where n is not a power of two the blocked
// operations round bytes down to a multiple of 4n. algbw = bytes / time; busbw = algbw times
// (n-1)/n (alltoall, allgather, reducescatter), 2(n-1)/n (allreduce) or 1 (broadcast).
// Reductions are float32 sums (dtype "f32"); data movement moves float32 elements too and is
// recorded with dtype "bytes". NCCL has no all-to-all(v): its baseline for the three forms is
// nccl-tests' grouped ncclSend/ncclRecv (for the v forms, with the same host counts: "vs
// nccl" compares with that). NCCL cannot read counts on the device, so alltoallv_device has
// a second NCCL line, "nccl:counts_to_host", which does what its callers do (MoE layers
// built on NCCL): exchange the counts, copy them to the host, synchronise, then send/recv.
//
// barrier (no size: bytes 0, no bandwidth): time per barrier of symcommBarrierOnStream over
// the world team (impl "symcomm:kernel", run when --impls names auto or nothing), against
// NCCL's nearest equivalent, a 1-element float32 all-reduce (impl "nccl:allreduce_1"). The
// check before: every rank puts a word into each peer after a delay that grows with its rank,
// then the barrier, and every peer's word must be there after it.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "bench.h"

namespace bench {

const char* const kCollUsage =
    "  --ops LIST       alltoall,alltoallv,alltoallv_device,allgather,reducescatter,\n"
    "                   allreduce,broadcast,barrier (default: all)\n"
    "  --impls LIST     nccl (NCCL called directly), auto, algorithm names (copy or\n"
    "                   symcomm:copy, symcomm:nccl, ...); default: all of them\n"
    "  --min-bytes B    smallest size per rank (default 8); sizes take K, M, G suffixes\n"
    "  --max-bytes B    largest size per rank (default 1G)\n"
    "  --step F         factor between sizes (default 2; 4 or 8 to save time); the last\n"
    "                   size is always --max-bytes\n"
    "  --also LIST      sizes measured besides the series (64K,1M,16M: the sizes the\n"
    "                   issue's targets name that a series by x4 from 8 skips)\n"
    "  --plain          cudaMalloc buffers (default: symmetric ones, from symcommMalloc)\n"
    "  --root R         root of broadcast (default 0)\n"
    "  --point-ms MS    most timed work per point, which shortens large sizes (default 300)\n"
    "  --check-bytes B  recv checked whole up to this size, sampled above (default 64M)\n"
    "  --graph          each timed batch is one CUDA graph of the batch's calls, captured once\n"
    "                   and replayed (no host launch per call: the GPU's time); the replayed\n"
    "                   graph is checked too; calls that cannot be captured are skipped\n"
    "  bytes per rank is nccl-tests' size: recv of allgather, send of reducescatter, send =\n"
    "  recv of the others; --iters is the most timed batches per point, --warmup in batches.\n";

namespace {

using Clock = std::chrono::steady_clock;

// ---- Operations -------------------------------------------------------------------------

enum class Op { AllToAll, AllToAllv, AllToAllvDevice, AllGather, ReduceScatter, AllReduce, Broadcast, Barrier };

struct OpInfo {
  Op op;
  const char* name;
  bool reduces;         // float32 sums; else data movement
  const char* size_is;  // which buffer `bytes` is
  // The three all-to-all forms (with equal counts, the same data movement).
  bool alltoall() const { return op == Op::AllToAll || op == Op::AllToAllv || op == Op::AllToAllvDevice; }
  // Elements of each rank's buffers; the blocked operations have n blocks of count.
  size_t send_elems(size_t count, int n) const {
    return alltoall() || op == Op::ReduceScatter ? count * static_cast<size_t>(n) : count;
  }
  size_t recv_elems(size_t count, int n) const {
    return alltoall() || op == Op::AllGather ? count * static_cast<size_t>(n) : count;
  }
  bool blocked() const { return alltoall() || op == Op::AllGather || op == Op::ReduceScatter; }
  double bus_factor(int n) const {
    if (op == Op::AllReduce) return 2.0 * (n - 1) / n;
    if (op == Op::Broadcast) return 1.0;
    return static_cast<double>(n - 1) / n;
  }
};

const OpInfo kOps[] = {
    {Op::AllToAll, "alltoall", false, "send = recv (n x count)"},
    {Op::AllToAllv, "alltoallv", false, "send = recv (n x count; host counts, all equal)"},
    {Op::AllToAllvDevice, "alltoallv_device", false,
     "send = recv (n x count; device counts, all equal)"},
    {Op::AllGather, "allgather", false, "recv (n x count; send is count)"},
    {Op::ReduceScatter, "reducescatter", true, "send (n x count; recv is count)"},
    {Op::AllReduce, "allreduce", true, "send = recv (count)"},
    {Op::Broadcast, "broadcast", false, "send = recv (count)"},
    {Op::Barrier, "barrier", false, "0 (time per barrier; no bandwidth)"},
};

// ---- Options ----------------------------------------------------------------------------

[[noreturn]] void bad_option(const char* option, const char* value, const std::string& why) {
  std::fprintf(stderr, "symcomm-bench coll: %s %s: %s (see symcomm-bench coll --help)\n", option,
               value, why.c_str());
  std::exit(2);
}

std::vector<std::string> split(const char* text) {
  std::vector<std::string> out;
  std::string item;
  for (const char* p = text;; ++p) {
    if (*p && *p != ',') {
      item += *p;
      continue;
    }
    if (!item.empty()) out.push_back(item);
    item.clear();
    if (!*p) return out;
  }
}

long to_long(const char* option, const char* text, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end || errno || v < lo || v > hi)
    bad_option(option, text, "expected an integer in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "]");
  return v;
}

size_t to_bytes(const char* option, const char* text) {
  size_t v = 0;
  if (!parse_bytes(text, &v) || v == 0) bad_option(option, text, "expected a size > 0 (4096, 64M, 1G)");
  return v;
}

bool known_algorithm(const std::string& name) {
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i)
    if (const char* a = symcommCollAlgorithmName(i); a && name == a) return true;
  return false;
}

// ---- Data -------------------------------------------------------------------------------
// Send buffers are filled on the GPU by a counter-based generator of (seed, index), fresh for
// every check (seeded per rank and iteration), so that the host computes what every rank
// sent, and so the reference, without moving the data.

constexpr uint32_t kPoison = 0xffffffffu;  // recv's bytes before each check (a NaN)
constexpr size_t kGuardBytes = 4096;       // after recv's used part: must stay poisoned

__host__ __device__ inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__host__ __device__ inline uint64_t hash64(uint64_t seed, size_t i) {
  return mix64(seed + (static_cast<uint64_t>(i) + 1) * 0x9e3779b97f4a7c15ull);
}
// Reductions: a multiple of 1/4 in [-256, 256), so that sums over ranks are exact in any
// order and every implementation must match the reference bit for bit.
__host__ __device__ inline float value(uint64_t seed, size_t i) {
  return static_cast<float>(static_cast<int>(hash64(seed, i) >> 53) - 1024) * 0.25f;
}
// Data movement: any bit pattern but the poison.
__host__ __device__ inline uint32_t bits(uint64_t seed, size_t i) {
  const uint32_t v = static_cast<uint32_t>(hash64(seed, i) >> 32);
  return v == kPoison ? 0u : v;
}

__global__ void fill_kernel(void* p, size_t n, uint64_t seed, bool reduces) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    if (reduces) static_cast<float*>(p)[i] = value(seed, i);
    else static_cast<uint32_t*>(p)[i] = bits(seed, i);
  }
}

uint64_t seed_of(int rank, uint64_t iteration) {
  return mix64((static_cast<uint64_t>(rank) << 48) ^ iteration ^ 0x636f6c6c62656e63ull);
}

// What recv element p of rank `me` must hold, from what every rank sent.
struct Reference {
  const OpInfo& op;
  int me, n, root;
  size_t count;
  std::vector<uint64_t> seeds;  // of every rank

  uint32_t at(size_t p) const {
    const size_t mine = static_cast<size_t>(me) * count;
    switch (op.op) {
      case Op::AllToAll:
      case Op::AllToAllv:
      case Op::AllToAllvDevice: return bits(seeds[p / count], mine + p % count);
      case Op::AllGather: return bits(seeds[p / count], p % count);
      case Op::Broadcast: return bits(seeds[static_cast<size_t>(root)], p);
      case Op::ReduceScatter:
      case Op::AllReduce: {
        const size_t k = op.op == Op::ReduceScatter ? mine + p : p;
        float sum = 0;
        for (int j = 0; j < n; ++j) sum += value(seeds[static_cast<size_t>(j)], k);
        uint32_t u;
        std::memcpy(&u, &sum, sizeof u);
        return u;
      }
      case Op::Barrier: break;  // checked by check_barrier
    }
    return 0;
  }
  // Sums compare as floats (a +0 and a -0 are both right); moved data bit for bit.
  bool same(uint32_t want, uint32_t got) const {
    if (!op.reduces) return want == got;
    float w, g;
    std::memcpy(&w, &want, sizeof w);
    std::memcpy(&g, &got, sizeof g);
    return w == g;
  }
};

struct Window {
  size_t begin, len;  // elements of recv
};

// The parts of recv compared with the reference: all of it up to --check-bytes; above, the
// first and last 1024 elements of every block and 64 windows of 256 at random places.
std::vector<Window> windows_to_check(size_t count, size_t recv_elems, size_t check_bytes,
                                     uint64_t iteration) {
  if (recv_elems * sizeof(float) <= check_bytes) return {{0, recv_elems}};
  std::vector<Window> w;
  const size_t edge = std::min<size_t>(1024, count);
  for (size_t start = 0; start < recv_elems; start += count) {
    w.push_back({start, edge});
    w.push_back({start + count - edge, edge});
  }
  const size_t len = std::min<size_t>(256, recv_elems);
  uint64_t r = iteration;
  for (int i = 0; i < 64; ++i) {
    r = mix64(r + 0x9e3779b97f4a7c15ull);
    w.push_back({static_cast<size_t>(r % (recv_elems - len + 1)), len});
  }
  return w;
}

// ---- Implementations --------------------------------------------------------------------

struct Impl {
  std::string name;       // "nccl", "symcomm:auto", "symcomm:<algorithm>"
  const char* algorithm;  // symcomm's argument (NULL: auto)
  bool nccl;
  // All-to-all-v with counts on the device, NCCL as its callers run it: the counts exchanged
  // (grouped send/recv of one count per pair), copied to the host, the stream synchronised,
  // then the blocks. ("nccl" alone is given the counts on the host: its best case.)
  bool counts_to_host = false;
};

struct Buffers {
  char* send = nullptr;
  char* recv = nullptr;
  size_t bytes = 0;  // of each, the guard included
  bool symmetric = true;
  // All-to-all-v: send counts, send displacements, recv counts, recv displacements (n each),
  // on the host and (cudaMalloc'd) on the device, where the call writes the last two.
  std::vector<size_t> v;
  size_t* dev_v = nullptr;
};

// The all-to-all-v arrays of all-to-all with `count`: count to and from each member, blocks
// in rank order. Written to the device too.
void set_counts(Buffers& b, size_t count, int n) {
  const size_t nn = static_cast<size_t>(n);
  b.v.assign(4 * nn, 0);
  for (size_t j = 0; j < nn; ++j) {
    b.v[j] = b.v[2 * nn + j] = count;
    b.v[nn + j] = b.v[3 * nn + j] = j * count;
  }
  BENCH_CUDA(cudaMemcpy(b.dev_v, b.v.data(), b.v.size() * sizeof(size_t), cudaMemcpyHostToDevice));
}

// One call of `impl` on ctx.stream: symcomm's result (NCCL's failures end the run).
symcommResult_t run_once(const Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl,
                         size_t count, int root) {
  cudaStream_t s = ctx.stream;
  const size_t n = static_cast<size_t>(ctx.nranks);
  const size_t *sc = b.v.data(), *sd = sc + n, *rc = sd + n, *rd = rc + n;  // host arrays
  std::vector<size_t> packed;
  if (impl.nccl) {
    ncclComm_t c = ctx.nccl;
    switch (op.op) {
      case Op::AllToAll:
      case Op::AllToAllv:
      case Op::AllToAllvDevice: {  // grouped send/recv; the v forms with the host counts
        const bool v = op.op != Op::AllToAll;
        if (impl.counts_to_host) {
          static size_t* pinned = nullptr;  // the received counts on the host (n <= 1024)
          if (!pinned) BENCH_CUDA(cudaMallocHost(&pinned, 1024 * sizeof(size_t)));
          BENCH_NCCL(ncclGroupStart());
          for (size_t j = 0; j < n; ++j) {
            BENCH_NCCL(ncclSend(b.dev_v + j, sizeof(size_t), ncclUint8, static_cast<int>(j), c, s));
            BENCH_NCCL(ncclRecv(b.dev_v + 2 * n + j, sizeof(size_t), ncclUint8, static_cast<int>(j), c, s));
          }
          BENCH_NCCL(ncclGroupEnd());
          BENCH_CUDA(cudaMemcpyAsync(pinned, b.dev_v + 2 * n, n * sizeof(size_t),
                                     cudaMemcpyDeviceToHost, s));
          BENCH_CUDA(cudaStreamSynchronize(s));
          rc = pinned;
          packed.assign(n, 0);  // blocks packed in rank order, as symcomm's
          for (size_t j = 1; j < n; ++j) packed[j] = packed[j - 1] + rc[j - 1];
          rd = packed.data();
        }
        BENCH_NCCL(ncclGroupStart());
        for (size_t j = 0; j < n; ++j) {
          const int peer = static_cast<int>(j);
          BENCH_NCCL(ncclSend(b.send + (v ? sd[j] : j * count) * sizeof(float), v ? sc[j] : count,
                              ncclFloat, peer, c, s));
          BENCH_NCCL(ncclRecv(b.recv + (v ? rd[j] : j * count) * sizeof(float), v ? rc[j] : count,
                              ncclFloat, peer, c, s));
        }
        BENCH_NCCL(ncclGroupEnd());
        break;
      }
      case Op::AllGather: BENCH_NCCL(ncclAllGather(b.send, b.recv, count, ncclFloat, c, s)); break;
      case Op::ReduceScatter:
        BENCH_NCCL(ncclReduceScatter(b.send, b.recv, count, ncclFloat, ncclSum, c, s));
        break;
      case Op::AllReduce:
        BENCH_NCCL(ncclAllReduce(b.send, b.recv, count, ncclFloat, ncclSum, c, s));
        break;
      case Op::Broadcast:
        BENCH_NCCL(ncclBroadcast(b.send, b.recv, count, ncclFloat, root, c, s));
        break;
      case Op::Barrier:  // NCCL has no barrier: a 1-element all-reduce stands in for one
        BENCH_NCCL(ncclAllReduce(b.send, b.recv, 1, ncclFloat, ncclSum, c, s));
        break;
    }
    return symcommSuccess;
  }
  const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
  const char* a = impl.algorithm;
  const symcommDataType_t f = symcommFloat32;
  switch (op.op) {
    case Op::AllToAll: return symcommAllToAllOnStream(ctx.comm, w, b.send, b.recv, count, f, a, s);
    case Op::AllToAllv:
      return symcommAllToAllvOnStream(ctx.comm, w, b.send, sc, sd, b.recv, rc, rd, f, a, s);
    case Op::AllToAllvDevice: {
      size_t* d = b.dev_v;
      return symcommAllToAllvDeviceOnStream(ctx.comm, w, b.send, d, d + n, b.recv, n * count,
                                            d + 2 * n, d + 3 * n, f, a, s);
    }
    case Op::Barrier: return symcommBarrierOnStream(ctx.comm, w, s);
    case Op::AllGather: return symcommAllGatherOnStream(ctx.comm, w, b.send, b.recv, count, f, a, s);
    case Op::ReduceScatter:
      return symcommReduceScatterOnStream(ctx.comm, w, b.send, b.recv, count, f, symcommSum, a, s);
    case Op::AllReduce:
      return symcommAllReduceOnStream(ctx.comm, w, b.send, b.recv, count, f, symcommSum, a, s);
    case Op::Broadcast:
      return symcommBroadcastOnStream(ctx.comm, w, b.send, b.recv, count, f, root, a, s);
  }
  return symcommInternalError;
}

std::string point_name(const OpInfo& op, const Impl& impl, size_t bytes, size_t count) {
  return std::string(op.name) + " " + impl.name + " bytes " + std::to_string(bytes) + " (count " +
         std::to_string(count) + ")";
}

// Every rank's `mine`, in rank order.
std::vector<int> gather_ints(const Context& ctx, int mine) {
  std::vector<int> all(static_cast<size_t>(ctx.nranks));
  BENCH_SC(symcommHostAllgather(ctx.comm, &mine, all.data(), sizeof mine));
  return all;
}

// Calls `impl` once on every rank (the inputs are in place). False if every rank's call
// returned symcommNotSupported (*why says why); ends the run with status 1 if a call failed
// otherwise. Returns after the stream finished the call.
bool call_everywhere(Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl,
                     size_t count, const std::string& where, std::string* why) {
  const symcommResult_t rc = run_once(ctx, b, op, impl, count, ctx.opt.coll.root);
  const std::string msg = rc == symcommSuccess ? "" : symcommGetLastError();
  const std::vector<int> codes = gather_ints(ctx, rc);
  const bool all_ok = std::all_of(codes.begin(), codes.end(), [](int c) { return c == symcommSuccess; });
  if (std::all_of(codes.begin(), codes.end(), [](int c) { return c == symcommNotSupported; })) {
    *why = msg;
    return false;
  }
  if (!all_ok) {
    if (rc != symcommSuccess)
      std::fprintf(stderr, "symcomm-bench coll: rank %d: %s: %s: %s\n", ctx.rank, where.c_str(),
                   symcommGetErrorString(rc), msg.c_str());
    if (ctx.rank == 0) {
      std::string list;
      for (size_t r = 0; r < codes.size(); ++r) list += " " + std::to_string(codes[r]);
      std::fprintf(stderr, "symcomm-bench coll: FAILED: %s: the call failed (result codes by rank:%s)\n",
                   where.c_str(), list.c_str());
    }
    std::exit(1);
  }
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  return true;
}

// Ends the run with status 1, naming the ranks, if any rank's result was wrong.
void require_right_everywhere(Context& ctx, bool wrong, const std::string& where) {
  const std::vector<int> bad = gather_ints(ctx, wrong ? 1 : 0);
  if (std::find(bad.begin(), bad.end(), 1) == bad.end()) return;
  if (ctx.rank == 0) {
    std::string list;
    for (size_t r = 0; r < bad.size(); ++r)
      if (bad[r]) list += " " + std::to_string(r);
    std::fprintf(stderr, "symcomm-bench coll: FAILED: %s: wrong result on ranks%s\n", where.c_str(),
                 list.c_str());
  }
  std::exit(1);
}

// All-to-all-v with device counts writes the recv counts and displacements it saw: with
// every count equal, count and j * count from member j. Returns how many differ.
size_t wrong_device_counts(const Context& ctx, const Buffers& b, size_t count, std::string* first) {
  const size_t n = static_cast<size_t>(ctx.nranks);
  std::vector<size_t> got(2 * n);
  BENCH_CUDA(cudaMemcpy(got.data(), b.dev_v + 2 * n, got.size() * sizeof(size_t),
                        cudaMemcpyDeviceToHost));
  size_t wrong = 0;
  for (size_t j = 0; j < n; ++j)
    if (got[j] != count || got[n + j] != j * count) {
      if (++wrong <= 3)
        *first += (first->empty() ? "" : ", ") + std::string("recv count/displacement of ") +
                  std::to_string(j) + " " + std::to_string(got[j]) + "/" + std::to_string(got[n + j]);
    }
  return wrong;
}

// How a check makes the call on every rank, its inputs in place: call_everywhere, or the
// replay of a captured graph. False where every rank's call was refused (*why says why).
using Caller = std::function<bool(std::string* why)>;

// Makes the call (`call`) once on fresh data and compares recv with the reference on every
// rank. False if every rank's call returned symcommNotSupported (*why says why). Ends the run
// with status 1 if a call failed otherwise, or if any rank's result is wrong.
bool check(Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl, size_t count,
           size_t bytes, uint64_t iteration, const Caller& call, std::string* why) {
  const int n = ctx.nranks, root = ctx.opt.coll.root;
  const size_t send_elems = op.send_elems(count, n), recv_elems = op.recv_elems(count, n);
  const std::string where = point_name(op, impl, bytes, count);
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((send_elems + 255) / 256, 4096));
  fill_kernel<<<grid, 256, 0, ctx.stream>>>(b.send, send_elems, seed_of(ctx.rank, iteration),
                                            op.reduces);
  BENCH_CUDA(cudaGetLastError());
  BENCH_CUDA(cudaMemsetAsync(b.recv, 0xff, recv_elems * sizeof(float) + kGuardBytes, ctx.stream));
  const bool device_counts = op.op == Op::AllToAllvDevice && !impl.nccl;
  const size_t nn = static_cast<size_t>(n);
  if (device_counts)  // the recv counts and displacements the call writes
    BENCH_CUDA(cudaMemsetAsync(b.dev_v + 2 * nn, 0xff, 2 * nn * sizeof(size_t), ctx.stream));
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  // No rank's collective may write into a peer's recv before that peer has poisoned it.
  BENCH_SC(symcommHostBarrier(ctx.comm));
  if (!call(why)) return false;

  Reference ref{op, ctx.rank, n, root, count, {}};
  for (int r = 0; r < n; ++r) ref.seeds.push_back(seed_of(r, iteration));
  size_t checked = 0, wrong = 0;
  std::string first;
  std::vector<uint32_t> got;
  for (const Window& w : windows_to_check(count, recv_elems, ctx.opt.coll.check_bytes, iteration)) {
    got.resize(w.len);
    BENCH_CUDA(cudaMemcpy(got.data(), b.recv + w.begin * sizeof(float), w.len * sizeof(float),
                          cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < w.len; ++i) {
      const uint32_t want = ref.at(w.begin + i);
      if (ref.same(want, got[i])) continue;
      if (++wrong <= 3) {
        char buf[128];
        std::snprintf(buf, sizeof buf, "%s[%zu] want 0x%08x got 0x%08x", first.empty() ? "" : ", ",
                      w.begin + i, want, got[i]);
        first += buf;
      }
    }
    checked += w.len;
  }
  if (device_counts) wrong += wrong_device_counts(ctx, b, count, &first);
  got.assign(kGuardBytes / sizeof(uint32_t), 0);
  BENCH_CUDA(cudaMemcpy(got.data(), b.recv + recv_elems * sizeof(float), kGuardBytes,
                        cudaMemcpyDeviceToHost));
  const size_t past = static_cast<size_t>(std::count_if(got.begin(), got.end(),
                                                        [](uint32_t v) { return v != kPoison; }));
  if (wrong || past)
    std::fprintf(stderr, "symcomm-bench coll: rank %d: WRONG RESULT: %s: %zu of %zu checked "
                 "elements differ (%s); %zu words written past the end of recv\n",
                 ctx.rank, where.c_str(), wrong, checked, first.c_str(), past);
  require_right_everywhere(ctx, wrong || past, where);
  return true;
}

// Spins one thread for `ns` nanoseconds of the GPU's global timer.
__global__ void delay_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

// The barrier's check. symcomm: after a delay of 200 us times its rank, every rank puts a
// word tagged with the iteration into its slot of every peer's `words` (symmetric, n slots
// and the source word), then the barrier; every peer's slot must hold that peer's word after
// it (without a barrier the late ranks' words would be missing). The NCCL stand-in: its
// all-reduce of rank + 1 must give n (n + 1) / 2. False where symcomm cannot run it.
bool check_barrier(Context& ctx, const Buffers& b, uint64_t* words, const OpInfo& op,
                   const Impl& impl, uint64_t iteration, const Caller& call, std::string* why) {
  const int n = ctx.nranks;
  const std::string where = point_name(op, impl, 0, 0);
  // Poison (all ones) first; the inputs are written on the stream, which is then drained.
  auto tag = [&](int r) { return mix64(seed_of(r, iteration)) & ~uint64_t{1}; };  // not the poison
  if (impl.nccl) {
    const float mine = static_cast<float>(ctx.rank + 1), want = 0.5f * n * (n + 1);
    float got = -1;
    BENCH_CUDA(cudaMemcpyAsync(b.send, &mine, sizeof mine, cudaMemcpyHostToDevice, ctx.stream));
    BENCH_CUDA(cudaMemsetAsync(b.recv, 0xff, sizeof got, ctx.stream));
    BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
    if (!call(why)) return false;
    BENCH_CUDA(cudaMemcpy(&got, b.recv, sizeof got, cudaMemcpyDeviceToHost));
    if (got != want)
      std::fprintf(stderr, "symcomm-bench coll: rank %d: WRONG RESULT: %s: sum %g, want %g\n",
                   ctx.rank, where.c_str(), got, want);
    require_right_everywhere(ctx, got != want, where);
    return true;
  }
  const size_t nn = static_cast<size_t>(n), me = static_cast<size_t>(ctx.rank);
  const uint64_t mine = tag(ctx.rank);
  BENCH_CUDA(cudaMemsetAsync(words, 0xff, nn * sizeof(uint64_t), ctx.stream));
  BENCH_CUDA(cudaMemcpyAsync(words + nn, &mine, sizeof mine, cudaMemcpyHostToDevice, ctx.stream));
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  BENCH_SC(symcommHostBarrier(ctx.comm));  // every slot poisoned before any put
  delay_kernel<<<1, 1, 0, ctx.stream>>>(200000ull * me);
  BENCH_CUDA(cudaGetLastError());
  for (int j = 0; j < n; ++j)
    if (j != ctx.rank)
      BENCH_SC(symcommPutOnStream(ctx.comm, words + me, words + nn, sizeof mine, j,
                                  symcommEngineAuto, ctx.stream));
  if (!call(why)) return false;
  std::vector<uint64_t> got(nn);
  BENCH_CUDA(cudaMemcpy(got.data(), words, nn * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  size_t missing = 0;
  for (int j = 0; j < n; ++j) missing += j != ctx.rank && got[static_cast<size_t>(j)] != tag(j);
  if (missing)
    std::fprintf(stderr, "symcomm-bench coll: rank %d: WRONG RESULT: %s: %zu peers' words put "
                 "before the barrier missing after it\n", ctx.rank, where.c_str(), missing);
  require_right_everywhere(ctx, missing != 0, where);
  return true;
}

// ---- Timing -----------------------------------------------------------------------------

struct Timing {
  double us;               // median per call, the largest over ranks
  double host_us;          // median host time to enqueue a call, the largest over ranks
  int reps, inner, warmup;  // batches, calls per batch, untimed calls
  bool graph = false;       // each batch was one replayed CUDA graph (--graph)
};

// The shape of a point's timing: batches of `inner` back-to-back calls between two events,
// no host synchronisation inside a batch. Counts are derived from a short calibration of
// eager calls agreed over ranks (every rank must make the same calls): batches of about a
// millisecond, at most --iters batches, and no more than --point-ms of timed work (but at
// least 3 batches), which shortens the large sizes.
Timing calibrate(Context& ctx, const std::function<void()>& body) {
  constexpr double kBatchUs = 1000;
  constexpr int kMaxInner = 100, kMinReps = 3;
  BENCH_SC(symcommHostBarrier(ctx.comm));
  double one = std::max(0.5, max_over_ranks(ctx, time_stream_us(ctx.stream, 1, 1, 1, body)));
  if (one < kBatchUs) {
    // A single call also holds the ranks' skew: small sizes are measured again over a batch.
    const int k = static_cast<int>(std::clamp(std::ceil(kBatchUs / one), 1.0, double{kMaxInner}));
    one = std::max(0.5, max_over_ranks(ctx, time_stream_us(ctx.stream, 0, 1, k, body)));
  }
  Timing t;
  t.inner = static_cast<int>(std::clamp(std::ceil(kBatchUs / one), 1.0, double{kMaxInner}));
  const double budget_us = ctx.opt.coll.point_ms * 1000;
  const double most = static_cast<double>(std::max(ctx.opt.iters, kMinReps));
  t.reps = static_cast<int>(std::clamp(std::floor(budget_us / (t.inner * one)), double{kMinReps}, most));
  // Large sizes (one call per batch) were just warmed up by the calibration.
  t.warmup = t.inner > 1 ? ctx.opt.warmup * t.inner : std::min(ctx.opt.warmup, 1);
  t.us = t.host_us = 0;
  return t;
}

// Eager calls: every call launched from the host, as an application makes them.
Timing measure(Context& ctx, const std::function<void()>& body) {
  Timing t = calibrate(ctx, body);
  BENCH_SC(symcommHostBarrier(ctx.comm));
  double host = 0;
  t.us = max_over_ranks(ctx, time_stream_us(ctx.stream, t.warmup, t.reps, t.inner, body, &host));
  t.host_us = max_over_ranks(ctx, host);
  t.us = std::max(t.us, 1e-3);  // keeps the bandwidths finite
  return t;
}

// --graph: calibrated like measure(), then each rank captures a batch of `inner` calls into
// one CUDA graph, the replayed graph is checked on fresh data like an eager call (`verify`
// with the replay as the call), and the replays are timed: per call, a batch's time over its
// calls. Empty, with *why, where some rank could not capture the call: every rank then skips
// the point (a graph with a collective that some peer does not run would wait for it).
std::optional<Timing> measure_graph(Context& ctx, const std::function<symcommResult_t()>& call,
                                    const std::function<bool(const Caller&, std::string*)>& verify,
                                    const std::string& where, std::string* why) {
  Timing t = calibrate(ctx, [&] {
    if (call() != symcommSuccess) die(where.c_str(), symcommGetLastError(), __FILE__, __LINE__);
  });
  BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  const GraphBatch g(ctx.stream, t.inner, call);
  const std::vector<int> captured = gather_ints(ctx, g.ok() ? 1 : 0);
  if (std::find(captured.begin(), captured.end(), 0) != captured.end()) {
    std::string ranks;
    for (size_t r = 0; r < captured.size(); ++r)
      if (!captured[r]) ranks += " " + std::to_string(r);
    *why = "no CUDA graph of it on rank(s)" + ranks + (g.ok() ? "" : ": " + g.why());
    return std::nullopt;
  }
  const Caller replay = [&](std::string*) {
    g.launch();
    BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
    return true;
  };
  verify(replay, why);  // ends the run if a replay's result is wrong
  const int graphs = std::max(2, t.warmup / t.inner);  // the first replay uploads the graph
  BENCH_SC(symcommHostBarrier(ctx.comm));
  double host = 0;
  const double batch = time_stream_us(ctx.stream, graphs, t.reps, 1, [&] { g.launch(); }, &host);
  t.us = std::max(max_over_ranks(ctx, batch) / t.inner, 1e-3);
  t.host_us = max_over_ranks(ctx, host) / t.inner;
  t.warmup = graphs * t.inner;
  t.graph = true;
  return t;
}

// ---- Output -----------------------------------------------------------------------------

void print_op_header(const Context& ctx, const OpInfo& op, const Buffers& b) {
  if (ctx.rank != 0) return;
  std::printf("\n# %s: %d ranks, %s, %s buffers%s; bytes per rank = %s\n", op.name, ctx.nranks,
              op.reduces ? "f32 sum" : "f32 elements (dtype bytes)",
              b.symmetric ? "symmetric" : "plain",
              ctx.opt.coll.graph ? ", each batch one replayed CUDA graph" : "", op.size_is);
  std::printf("# %12s %12s  %-20s %12s %11s %11s %8s %8s\n", "bytes", "count", "impl", "time us",
              "algbw GB/s", "busbw GB/s", "vs nccl", "host us");
  std::fflush(stdout);
}

void report(const Context& ctx, const OpInfo& op, const Impl& impl, const Buffers& b,
            size_t bytes, size_t count, const Timing& t, double nccl_us) {
  Record r;
  r.bench = "coll";
  r.op = op.name;
  r.impl = impl.name;
  r.dtype = op.reduces ? "f32" : "bytes";
  r.bytes = bytes;
  r.ranks = ctx.nranks;
  r.time_us = t.us;
  if (op.op != Op::Barrier) {  // a barrier moves no data: no bandwidth
    r.algbw_gbs = static_cast<double>(bytes) / (t.us * 1e3);
    r.busbw_gbs = r.algbw_gbs * op.bus_factor(ctx.nranks);
  }
  r.iters = t.reps * t.inner;
  r.warmup = t.warmup;
  char host[32];
  std::snprintf(host, sizeof host, "%.3f", t.host_us);
  r.extra = {{"count", std::to_string(count)},
             {"batches", std::to_string(t.reps)},
             {"host_us", host},
             {"buffers", b.symmetric ? "\"symmetric\"" : "\"plain\""},
             {"launch", t.graph ? "\"graph\"" : "\"eager\""}};
  char vs[32] = "-";
  if (nccl_us > 0) {
    std::snprintf(vs, sizeof vs, "%.3f", nccl_us / t.us);
    r.extra.emplace_back("vs_nccl", vs);
  }
  if (op.op == Op::Broadcast) r.extra.emplace_back("root", std::to_string(ctx.opt.coll.root));
  if (ctx.rank == 0) {
    char bw[2][32] = {"-", "-"};
    if (r.algbw_gbs >= 0) {
      std::snprintf(bw[0], sizeof bw[0], "%.2f", r.algbw_gbs);
      std::snprintf(bw[1], sizeof bw[1], "%.2f", r.busbw_gbs);
    }
    std::printf("  %12zu %12zu  %-20s %12.2f %11s %11s %8s %8.2f\n", bytes, count,
                impl.name.c_str(), t.us, bw[0], bw[1], vs, t.host_us);
    std::fflush(stdout);
  }
  write_json(ctx, r);
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

bool coll_option(Options& opt, int argc, char** argv, int& i) {
  CollOptions& c = opt.coll;
  const char* name = argv[i];
  auto arg = [&]() -> const char* {
    if (i + 1 >= argc) bad_option(name, "", "needs a value");
    return argv[++i];
  };
  if (!std::strcmp(name, "--ops")) {
    const char* v = arg();
    c.ops = split(v);
    if (c.ops.empty()) bad_option(name, v, "names no operation");
    for (const std::string& o : c.ops)
      if (std::none_of(std::begin(kOps), std::end(kOps), [&](const OpInfo& k) { return o == k.name; }))
        bad_option(name, v, "unknown operation '" + o + "'");
  } else if (!std::strcmp(name, "--impls")) {
    const char* v = arg();
    c.impls = split(v);
    if (c.impls.empty()) bad_option(name, v, "names no implementation");
    // Kept as implementation names: "nccl" (direct), "symcomm:auto", "symcomm:<algorithm>"
    // (symcomm's own "nccl" algorithm is "symcomm:nccl").
    for (std::string& s : c.impls) {
      if (s == "nccl") continue;
      const std::string bare = s.rfind("symcomm:", 0) == 0 ? s.substr(8) : s;
      if (bare != "auto" && !known_algorithm(bare))
        bad_option(name, v, "'" + s + "' is not nccl, auto or a registered algorithm");
      s = "symcomm:" + bare;
    }
  } else if (!std::strcmp(name, "--min-bytes")) {
    const char* v = arg();
    c.min_bytes = to_bytes(name, v);
  } else if (!std::strcmp(name, "--step")) {
    const char* v = arg();
    c.step = static_cast<int>(to_long(name, v, 2, 1024));
  } else if (!std::strcmp(name, "--also")) {
    const char* v = arg();
    for (const std::string& size : split(v)) c.also.push_back(to_bytes(name, size.c_str()));
    if (c.also.empty()) bad_option(name, v, "names no size");
  } else if (!std::strcmp(name, "--plain")) {
    c.plain = true;
  } else if (!std::strcmp(name, "--root")) {
    const char* v = arg();
    c.root = static_cast<int>(to_long(name, v, 0, 1 << 20));
  } else if (!std::strcmp(name, "--point-ms")) {
    const char* v = arg();
    c.point_ms = static_cast<double>(to_long(name, v, 1, 3600 * 1000));
  } else if (!std::strcmp(name, "--check-bytes")) {
    const char* v = arg();
    c.check_bytes = to_bytes(name, v);
  } else if (!std::strcmp(name, "--graph")) {
    c.graph = true;
  } else {
    return false;
  }
  return true;
}

int run_coll(Context& ctx) {
  const Clock::time_point t0 = Clock::now();
  const CollOptions& c = ctx.opt.coll;
  const int n = ctx.nranks;
  if (c.root >= n) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "symcomm-bench coll: --root %d is not a rank of %d\n", c.root, n);
    return 2;
  }
  auto wanted = [](const std::vector<std::string>& list, const std::string& s) {
    return list.empty() || std::find(list.begin(), list.end(), s) != list.end();
  };
  // NCCL first, so that every symcomm line can say how it compares.
  std::vector<Impl> impls;
  if (wanted(c.impls, "nccl")) impls.push_back({"nccl", nullptr, true});
  if (wanted(c.impls, "nccl"))
    impls.push_back({"nccl:counts_to_host", nullptr, true, true});
  if (wanted(c.impls, "symcomm:auto")) impls.push_back({"symcomm:auto", nullptr, false});
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i)
    if (const char* a = symcommCollAlgorithmName(i); a && wanted(c.impls, std::string("symcomm:") + a))
      impls.push_back({std::string("symcomm:") + a, a, false});
  // The barrier has no algorithms: symcomm's one call (with auto) and NCCL's stand-in.
  std::vector<Impl> barrier_impls;
  if (wanted(c.impls, "nccl")) barrier_impls.push_back({"nccl:allreduce_1", nullptr, true});
  if (wanted(c.impls, "symcomm:auto")) barrier_impls.push_back({"symcomm:kernel", nullptr, false});
  if (wanted(c.impls, "nccl") && !ctx.nccl) ctx.nccl = make_nccl(ctx);

  Buffers b;
  b.symmetric = !c.plain;
  b.bytes = ctx.opt.max_bytes + kGuardBytes;
  if (b.symmetric) {
    BENCH_SC(symcommMalloc(ctx.comm, b.bytes, reinterpret_cast<void**>(&b.send)));
    BENCH_SC(symcommMalloc(ctx.comm, b.bytes, reinterpret_cast<void**>(&b.recv)));
  } else {
    BENCH_CUDA(cudaMalloc(&b.send, b.bytes));
    BENCH_CUDA(cudaMalloc(&b.recv, b.bytes));
  }
  BENCH_CUDA(cudaMalloc(&b.dev_v, 4 * static_cast<size_t>(n) * sizeof(size_t)));
  set_counts(b, 0, n);  // sized now: run_once points into the arrays for every operation
  uint64_t* words = nullptr;  // the barrier's check: a slot per rank and the source word
  BENCH_SC(symcommMalloc(ctx.comm, (static_cast<size_t>(n) + 1) * sizeof(uint64_t),
                         reinterpret_cast<void**>(&words)));

  std::vector<size_t> sizes;
  for (size_t s = c.min_bytes; s <= ctx.opt.max_bytes; s *= static_cast<size_t>(c.step)) {
    sizes.push_back(s);
    if (s > ctx.opt.max_bytes / static_cast<size_t>(c.step)) break;
  }
  if (!sizes.empty() && sizes.back() != ctx.opt.max_bytes) sizes.push_back(ctx.opt.max_bytes);
  for (size_t s : c.also)
    if (s <= ctx.opt.max_bytes) sizes.push_back(s);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (ctx.rank == 0) {
    const char* forced = std::getenv("SYMCOMM_COLL_ALGO");
    std::printf("# symcomm-bench coll: %d ranks, %s buffers, %zu to %zu bytes per rank by x%d, "
                "impls:", n, b.symmetric ? "symmetric" : "plain", c.min_bytes, ctx.opt.max_bytes,
                c.step);
    for (const Impl& im : impls) std::printf(" %s", im.name.c_str());
    std::printf("\n# symcomm:auto follows SYMCOMM_COLL_ALGO=%s; vs nccl = NCCL time / this time "
                "(> 1: faster than NCCL)\n", forced ? forced : "(unset)");
  }

  std::set<std::string> noted;  // (impl, op) pairs already reported as unsupported
  uint64_t iteration = 0;
  int points = 0;
  for (const OpInfo& op : kOps) {
    if (!wanted(c.ops, op.name)) continue;
    const Clock::time_point op_t0 = Clock::now();
    print_op_header(ctx, op, b);
    const bool barrier = op.op == Op::Barrier;  // one point of no size
    for (size_t nominal : barrier ? std::vector<size_t>{0} : sizes) {
      const size_t per = sizeof(float) * (op.blocked() ? static_cast<size_t>(n) : 1);
      const size_t count = nominal / per, bytes = count * per;
      if (count == 0 && !barrier) continue;
      if (op.alltoall()) set_counts(b, count, n);
      double nccl_us = -1;
      for (const Impl& impl : barrier ? barrier_impls : impls) {
        if (impl.counts_to_host && op.op != Op::AllToAllvDevice) continue;
        const std::string where = point_name(op, impl, bytes, count);
        auto skip = [&](const std::string& why) {
          if (ctx.rank == 0 && noted.insert(impl.name + " " + op.name).second)
            std::printf("# note: %s cannot run %s here (%zu bytes; said once, such points are "
                        "skipped): %s\n", impl.name.c_str(), op.name, bytes, why.c_str());
        };
        if (c.graph && impl.counts_to_host) {
          skip("it synchronises the stream inside the call, which a CUDA graph cannot hold");
          continue;
        }
        // The point's check, with `call` making the call on every rank.
        auto verify = [&](const Caller& call, std::string* why) {
          return barrier ? check_barrier(ctx, b, words, op, impl, ++iteration, call, why)
                         : check(ctx, b, op, impl, count, bytes, ++iteration, call, why);
        };
        std::string why;
        if (!verify([&](std::string* w) { return call_everywhere(ctx, b, op, impl, count, where, w); },
                    &why)) {
          skip(why);
          continue;
        }
        auto call = [&] { return run_once(ctx, b, op, impl, count, c.root); };
        const std::optional<Timing> t =
            c.graph ? measure_graph(ctx, call, verify, where, &why) : measure(ctx, [&] {
              if (call() != symcommSuccess) die(where.c_str(), symcommGetLastError(), __FILE__, __LINE__);
            });
        if (!t) {
          skip(why);
          continue;
        }
        if (impl.nccl && !impl.counts_to_host) nccl_us = t->us;  // the reference: NCCL's best
        report(ctx, op, impl, b, bytes, barrier && impl.nccl ? 1 : count, *t, nccl_us);
        ++points;
      }
    }
    if (ctx.rank == 0) std::printf("# %s: %.1f s\n", op.name, seconds_since(op_t0));
  }

  BENCH_SC(symcommFree(ctx.comm, words));
  BENCH_CUDA(cudaFree(b.dev_v));
  if (b.symmetric) {
    BENCH_SC(symcommFree(ctx.comm, b.recv));
    BENCH_SC(symcommFree(ctx.comm, b.send));
  } else {
    BENCH_CUDA(cudaFree(b.recv));
    BENCH_CUDA(cudaFree(b.send));
  }
  if (ctx.rank == 0) {
    std::printf("\n# coll: %d points checked and timed in %.1f s\n", points, seconds_since(t0));
    std::fflush(stdout);
  }
  if (points == 0) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "symcomm-bench coll: nothing was measured (sizes %zu to %zu, impls and "
                   "ops as chosen)\n", c.min_bytes, ctx.opt.max_bytes);
    return 1;
  }
  return 0;
}

}  // namespace bench
