// symcomm-bench coll: the data, the calls and the checks. Every implementation's call of
// every operation (run_once), the generator of the send buffers and the host reference of
// what recv must hold, and the checks that run each (implementation, size) on fresh data
// before it is timed (coll_bench.cu). coll_bench.h declares what coll_bench.cu uses.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "coll_bench.h"

namespace bench::coll {
namespace {

// ---- Data -------------------------------------------------------------------------------
// Send buffers are filled on the GPU by a counter-based generator of (seed, index), fresh for
// every check (seeded per rank and iteration), so that the host computes what every rank
// sent, and so the reference, without moving the data.

constexpr uint32_t kPoison = 0xffffffffu;  // recv's bytes before each check (a NaN)

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
      case Op::AllReduce:
      case Op::AllReduceGroup: {
        const size_t k = op.op == Op::ReduceScatter ? mine + p : p;
        float sum = 0;
        for (int j = 0; j < n; ++j) sum += value(seeds[static_cast<size_t>(j)], k);
        uint32_t u;
        std::memcpy(&u, &sum, sizeof u);
        return u;
      }
      case Op::Reduce: {  // the root's recv; the others' is not written
        if (me != root) return kPoison;
        float sum = 0;
        for (int j = 0; j < n; ++j) sum += value(seeds[static_cast<size_t>(j)], p);
        uint32_t u;
        std::memcpy(&u, &sum, sizeof u);
        return u;
      }
      case Op::Gather: return me == root ? bits(seeds[p / count], p % count) : kPoison;
      case Op::Scatter: return bits(seeds[static_cast<size_t>(root)], mine + p);
      case Op::SendRecv: return bits(seeds[static_cast<size_t>((me + n - 1) % n)], p);
      case Op::Barrier: break;  // checked by check_barrier
    }
    return 0;
  }
  // Sums compare as floats (a +0 and a -0 are both right); moved data, and poison where
  // nothing is written, bit for bit.
  bool same(uint32_t want, uint32_t got) const {
    if (!op.reduces || want == kPoison) return want == got;
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

// send's first n elements := the generator's of `seed`, in the communicator's space.
void fill(const Context& ctx, void* p, size_t n, uint64_t seed, bool reduces) {
  if (ctx.host) {
    for (size_t i = 0; i < n; ++i) {
      if (reduces) static_cast<float*>(p)[i] = value(seed, i);
      else static_cast<uint32_t*>(p)[i] = bits(seed, i);
    }
    return;
  }
  const unsigned grid = static_cast<unsigned>(std::min<size_t>((n + 255) / 256, 4096));
  fill_kernel<<<grid, 256, 0, ctx.stream>>>(p, n, seed, reduces);
  BENCH_CUDA(cudaGetLastError());
}

}  // namespace

// ---- Memory of the communicator's space -------------------------------------------------

void* space_alloc(const Context& ctx, size_t bytes) {
  void* p = nullptr;
  if (ctx.host) {
    p = std::malloc(bytes);
    if (!p) die("malloc", "out of memory", __FILE__, __LINE__);
  } else {
    BENCH_CUDA(cudaMalloc(&p, bytes));
  }
  return p;
}

void space_free(const Context& ctx, void* p) {
  if (ctx.host) std::free(p);
  else BENCH_CUDA(cudaFree(p));
}

void space_set(const Context& ctx, void* p, int byte, size_t bytes) {
  if (ctx.host) std::memset(p, byte, bytes);
  else BENCH_CUDA(cudaMemsetAsync(p, byte, bytes, ctx.stream));
}

void copy_in(const Context& ctx, void* dst, const void* host_src, size_t bytes) {
  if (ctx.host) std::memcpy(dst, host_src, bytes);
  else BENCH_CUDA(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, ctx.stream));
}

void copy_out(const Context& ctx, void* host_dst, const void* src, size_t bytes) {
  if (ctx.host) std::memcpy(host_dst, src, bytes);
  else BENCH_CUDA(cudaMemcpy(host_dst, src, bytes, cudaMemcpyDeviceToHost));
}

void sync(const Context& ctx) {
  if (!ctx.host) BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
}

// ---- Implementations --------------------------------------------------------------------

// The all-to-all-v arrays of all-to-all with `count`: count to and from each member, blocks
// in rank order. Written to the device too (in the host space, to host memory).
void set_counts(const Context& ctx, Buffers& b, size_t count, int n) {
  const size_t nn = static_cast<size_t>(n);
  b.v.assign(4 * nn, 0);
  for (size_t j = 0; j < nn; ++j) {
    b.v[j] = b.v[2 * nn + j] = count;
    b.v[nn + j] = b.v[3 * nn + j] = j * count;
  }
  copy_in(ctx, b.dev_v, b.v.data(), b.v.size() * sizeof(size_t));
  sync(ctx);
}

// Part j of kGroupCalls of `count` elements (AllReduceGroup): its first element and its size;
// the last part takes the remainder.
static std::pair<size_t, size_t> group_part(size_t count, int j) {
  const size_t part = count / kGroupCalls, at = part * static_cast<size_t>(j);
  return {at, j == kGroupCalls - 1 ? count - at : part};
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
      case Op::AllReduceGroup:
        BENCH_NCCL(ncclGroupStart());
        for (int j = 0; j < kGroupCalls; ++j) {
          const auto [at, part] = group_part(count, j);
          BENCH_NCCL(ncclAllReduce(b.send + at * sizeof(float), b.recv + at * sizeof(float), part,
                                   ncclFloat, ncclSum, c, s));
        }
        BENCH_NCCL(ncclGroupEnd());
        break;
      case Op::Broadcast:
        BENCH_NCCL(ncclBroadcast(b.send, b.recv, count, ncclFloat, root, c, s));
        break;
      case Op::Barrier:  // NCCL has no barrier: a 1-element all-reduce stands in for one
        BENCH_NCCL(ncclAllReduce(b.send, b.recv, 1, ncclFloat, ncclSum, c, s));
        break;
      case Op::Reduce:
        BENCH_NCCL(ncclReduce(b.send, b.recv, count, ncclFloat, ncclSum, root, c, s));
        break;
      case Op::SendRecv: {
        const int next = (ctx.rank + 1) % ctx.nranks;
        const int prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
        BENCH_NCCL(ncclGroupStart());
        BENCH_NCCL(ncclSend(b.send, count, ncclFloat, next, c, s));
        BENCH_NCCL(ncclRecv(b.recv, count, ncclFloat, prev, c, s));
        BENCH_NCCL(ncclGroupEnd());
        break;
      }
      case Op::Gather:  // NCCL has neither: grouped sends and receives, as its users write them
      case Op::Scatter: {
        const bool gather = op.op == Op::Gather;
        BENCH_NCCL(ncclGroupStart());
        if (ctx.rank == root)
          for (size_t j = 0; j < n; ++j) {
            char* block = (gather ? b.recv : b.send) + j * count * sizeof(float);
            if (gather)
              BENCH_NCCL(ncclRecv(block, count, ncclFloat, static_cast<int>(j), c, s));
            else
              BENCH_NCCL(ncclSend(block, count, ncclFloat, static_cast<int>(j), c, s));
          }
        if (gather) BENCH_NCCL(ncclSend(b.send, count, ncclFloat, root, c, s));
        else BENCH_NCCL(ncclRecv(b.recv, count, ncclFloat, root, c, s));
        BENCH_NCCL(ncclGroupEnd());
        break;
      }
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
    case Op::AllReduceGroup: {
      symcommResult_t rc = symcommGroupStart();
      if (rc != symcommSuccess) return rc;
      symcommResult_t first = symcommSuccess;
      for (int j = 0; j < kGroupCalls; ++j) {
        const auto [at, part] = group_part(count, j);
        const symcommResult_t r =
            symcommAllReduceOnStream(ctx.comm, w, b.send + at * sizeof(float),
                                     b.recv + at * sizeof(float), part, f, symcommSum, a, s);
        if (first == symcommSuccess) first = r;
      }
      rc = symcommGroupEnd();
      return first != symcommSuccess ? first : rc;
    }
    case Op::Broadcast:
      return symcommBroadcastOnStream(ctx.comm, w, b.send, b.recv, count, f, root, a, s);
    case Op::Reduce:
      return symcommReduceOnStream(ctx.comm, w, b.send, b.recv, count, f, symcommSum, root, a, s);
    case Op::Gather: return symcommGatherOnStream(ctx.comm, w, b.send, b.recv, count, f, root, a, s);
    case Op::Scatter:
      return symcommScatterOnStream(ctx.comm, w, b.send, b.recv, count, f, root, a, s);
    case Op::SendRecv: {
      const int next = (ctx.rank + 1) % ctx.nranks;
      const int prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
      symcommResult_t rc = symcommGroupStart();
      if (rc != symcommSuccess) return rc;
      const symcommResult_t r1 = symcommSendOnStream(ctx.comm, w, b.send, count, f, next, s);
      const symcommResult_t r2 = symcommRecvOnStream(ctx.comm, w, b.recv, count, f, prev, s);
      rc = symcommGroupEnd();
      return r1 != symcommSuccess ? r1 : r2 != symcommSuccess ? r2 : rc;
    }
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
  sync(ctx);
  return true;
}

namespace {

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
  copy_out(ctx, got.data(), b.dev_v + 2 * n, got.size() * sizeof(size_t));
  size_t wrong = 0;
  for (size_t j = 0; j < n; ++j)
    if (got[j] != count || got[n + j] != j * count) {
      if (++wrong <= 3)
        *first += (first->empty() ? "" : ", ") + std::string("recv count/displacement of ") +
                  std::to_string(j) + " " + std::to_string(got[j]) + "/" + std::to_string(got[n + j]);
    }
  return wrong;
}

}  // namespace

// Makes the call (`call`) once on fresh data and compares recv with the reference on every
// rank. False if every rank's call returned symcommNotSupported (*why says why). Ends the run
// with status 1 if a call failed otherwise, or if any rank's result is wrong.
bool check(Context& ctx, const Buffers& b, const OpInfo& op, const Impl& impl, size_t count,
           size_t bytes, uint64_t iteration, const Caller& call, std::string* why) {
  const int n = ctx.nranks, root = ctx.opt.coll.root;
  const size_t send_elems = op.send_elems(count, n), recv_elems = op.recv_elems(count, n);
  const std::string where = point_name(op, impl, bytes, count);
  fill(ctx, b.send, send_elems, seed_of(ctx.rank, iteration), op.reduces);
  space_set(ctx, b.recv, 0xff, recv_elems * sizeof(float) + kGuardBytes);
  const bool device_counts = op.op == Op::AllToAllvDevice && !impl.nccl;
  const size_t nn = static_cast<size_t>(n);
  if (device_counts)  // the recv counts and displacements the call writes
    space_set(ctx, b.dev_v + 2 * nn, 0xff, 2 * nn * sizeof(size_t));
  sync(ctx);
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
    copy_out(ctx, got.data(), b.recv + w.begin * sizeof(float), w.len * sizeof(float));
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
  copy_out(ctx, got.data(), b.recv + recv_elems * sizeof(float), kGuardBytes);
  const size_t past = static_cast<size_t>(std::count_if(got.begin(), got.end(),
                                                        [](uint32_t v) { return v != kPoison; }));
  if (wrong || past)
    std::fprintf(stderr, "symcomm-bench coll: rank %d: WRONG RESULT: %s: %zu of %zu checked "
                 "elements differ (%s); %zu words written past the end of recv\n",
                 ctx.rank, where.c_str(), wrong, checked, first.c_str(), past);
  require_right_everywhere(ctx, wrong || past, where);
  return true;
}

namespace {

// Spins one thread for `ns` nanoseconds of the GPU's global timer.
__global__ void delay_kernel(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < ns);
}

}  // namespace

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
  space_set(ctx, words, 0xff, nn * sizeof(uint64_t));
  copy_in(ctx, words + nn, &mine, sizeof mine);
  sync(ctx);
  BENCH_SC(symcommHostBarrier(ctx.comm));  // every slot poisoned before any put
  if (ctx.host) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 * me));
  } else {
    delay_kernel<<<1, 1, 0, ctx.stream>>>(200000ull * me);
    BENCH_CUDA(cudaGetLastError());
  }
  for (int j = 0; j < n; ++j)
    if (j != ctx.rank)
      BENCH_SC(symcommPutOnStream(ctx.comm, words + me, words + nn, sizeof mine, j,
                                  symcommEngineAuto, ctx.stream));
  if (!call(why)) return false;
  std::vector<uint64_t> got(nn);
  copy_out(ctx, got.data(), words, nn * sizeof(uint64_t));
  size_t missing = 0;
  for (int j = 0; j < n; ++j) missing += j != ctx.rank && got[static_cast<size_t>(j)] != tag(j);
  if (missing)
    std::fprintf(stderr, "symcomm-bench coll: rank %d: WRONG RESULT: %s: %zu peers' words put "
                 "before the barrier missing after it\n", ctx.rank, where.c_str(), missing);
  require_right_everywhere(ctx, missing != 0, where);
  return true;
}

}  // namespace bench::coll
