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
//
// In the host memory space (SYMCOMM_MEMORY_SPACE=host: CPUs, the ranks on one node or, with
// symrun --nodes, on several, the others reached by the net transport) the same points are
// checked and timed, by the clock around each batch (a call has completed when it returns),
// without NCCL and without --graph: the algorithms compare with each other, copy's flat puts
// the baseline.
//
// This file: the options, the run loop, timing and output. coll_check.cu has the data, the
// calls and the checks; coll_bench.h what the two share.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>

#include "bench.h"
#include "coll_bench.h"
#include "net_nccl.h"  // --nccl-socket

namespace bench {

const char* const kCollUsage =
    "  --ops LIST       alltoall,alltoallv,alltoallv_device,allgather,reducescatter,\n"
    "                   allreduce,broadcast,reduce,gather,scatter,barrier,sendrecv,\n"
    "                   allreduce_group\n"
    "                   (default: all)\n"
    "  --impls LIST     nccl (NCCL called directly), auto, algorithm names (copy or\n"
    "                   symcomm:copy, symcomm:nccl, ...); default: all of them\n"
    "  --min-bytes B    smallest size per rank (default 8); sizes take K, M, G suffixes\n"
    "  --max-bytes B    largest size per rank (default 1G)\n"
    "  --step F         factor between sizes (default 2; 4 or 8 to save time); the last\n"
    "                   size is always --max-bytes\n"
    "  --also LIST      sizes measured besides the series (64K,1M,16M: the sizes the\n"
    "                   issue's targets name that a series by x4 from 8 skips)\n"
    "  --plain          cudaMalloc (host space: malloc) buffers (default: symmetric ones,\n"
    "                   from symcommMalloc)\n"
    "  --root R         root of broadcast, reduce, gather and scatter (default 0)\n"
    "  --point-ms MS    most timed work per point, which shortens large sizes (default 300)\n"
    "  --check-bytes B  recv checked whole up to this size, sampled above (default 64M)\n"
    "  --graph          each timed batch is one CUDA graph of the batch's calls, captured once\n"
    "                   and replayed (no host launch per call: the GPU's time); the replayed\n"
    "                   graph is checked too; calls that cannot be captured are skipped\n"
    "  --nccl-last      at each size, time NCCL's lines after the others (default: first);\n"
    "                   the table still lists NCCL first\n"
    "  --nccl-socket    NCCL over its socket network only (NCCL_P2P_DISABLE=1\n"
    "                   NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo unless set),\n"
    "                   the baseline for ranks run as several nodes (symrun --nodes) on one\n"
    "                   machine, whose symcomm paths cross the net transport\n"
    "  bytes per rank is nccl-tests' size: recv of allgather, send of reducescatter, send =\n"
    "  recv of the others; --iters is the most timed batches per point, --warmup in batches.\n";

using namespace coll;  // Op, OpInfo, Impl, Buffers and the calls and checks (coll_bench.h)

namespace {

using Clock = std::chrono::steady_clock;

// ---- Operations -------------------------------------------------------------------------

const OpInfo kOps[] = {
    {Op::AllToAll, "alltoall", false, "send = recv (n x count)"},
    {Op::AllToAllv, "alltoallv", false, "send = recv (n x count; host counts, all equal)"},
    {Op::AllToAllvDevice, "alltoallv_device", false,
     "send = recv (n x count; device counts, all equal)"},
    {Op::AllGather, "allgather", false, "recv (n x count; send is count)"},
    {Op::ReduceScatter, "reducescatter", true, "send (n x count; recv is count)"},
    {Op::AllReduce, "allreduce", true, "send = recv (count)"},
    {Op::Broadcast, "broadcast", false, "send = recv (count)"},
    {Op::Reduce, "reduce", true, "send = recv (count; recv on the root)"},
    {Op::Gather, "gather", false, "the root's recv (n x count; send is count)"},
    {Op::Scatter, "scatter", false, "the root's send (n x count; recv is count)"},
    {Op::Barrier, "barrier", false, "0 (time per barrier; no bandwidth)"},
    {Op::AllReduceGroup, "allreduce_group", true,
     "send = recv (count, as 8 all-reduces of count / 8 in one group)"},
    {Op::SendRecv, "sendrecv", false,
     "send = recv (count; a ring: a group of a send to the next rank and a receive from the "
     "previous)"},
};

// ---- Options ----------------------------------------------------------------------------

[[noreturn]] void bad_option(const char* option, const char* value, const std::string& why) {
  std::fprintf(stderr, "symcomm-bench coll: %s %s: %s (see symcomm-bench coll --help)\n", option,
               value, why.c_str());
  std::exit(2);
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
  double one = std::max(0.5, max_over_ranks(ctx, time_calls_us(ctx, 1, 1, 1, body)));
  if (one < kBatchUs) {
    // A single call also holds the ranks' skew: small sizes are measured again over a batch.
    const int k = static_cast<int>(std::clamp(std::ceil(kBatchUs / one), 1.0, double{kMaxInner}));
    one = std::max(0.5, max_over_ranks(ctx, time_calls_us(ctx, 0, 1, k, body)));
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
  t.us = max_over_ranks(ctx, time_calls_us(ctx, t.warmup, t.reps, t.inner, body, &host));
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
  if (op.rooted()) r.extra.emplace_back("root", std::to_string(ctx.opt.coll.root));
  if (ctx.opt.coll.nccl_socket) r.extra.emplace_back("nccl_env", net::nccl_environment_json());
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
    c.ops = split_list(v);
    if (c.ops.empty()) bad_option(name, v, "names no operation");
    for (const std::string& o : c.ops)
      if (std::none_of(std::begin(kOps), std::end(kOps), [&](const OpInfo& k) { return o == k.name; }))
        bad_option(name, v, "unknown operation '" + o + "'");
  } else if (!std::strcmp(name, "--impls")) {
    const char* v = arg();
    c.impls = split_list(v);
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
    for (const std::string& size : split_list(v)) c.also.push_back(to_bytes(name, size.c_str()));
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
  } else if (!std::strcmp(name, "--nccl-last")) {
    c.nccl_last = true;
  } else if (!std::strcmp(name, "--nccl-socket")) {
    // Set while the options are read: before symcommInit starts a thread and NCCL reads it.
    c.nccl_socket = true;
    net::set_nccl_environment();
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
  if (ctx.host && c.graph) {
    if (ctx.rank == 0)
      std::fprintf(stderr, "symcomm-bench coll: --graph needs the cuda space (CUDA graphs)\n");
    return 2;
  }
  // NCCL first, so that every symcomm line can say how it compares (GPUs only: in the host
  // space the algorithms compare with each other, copy the flat baseline).
  const bool nccl = !ctx.host && wanted(c.impls, "nccl");
  std::vector<Impl> impls;
  if (nccl) impls.push_back({"nccl", nullptr, true});
  if (nccl) impls.push_back({"nccl:counts_to_host", nullptr, true, true});
  if (wanted(c.impls, "symcomm:auto")) impls.push_back({"symcomm:auto", nullptr, false});
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i)
    if (const char* a = symcommCollAlgorithmName(i); a && wanted(c.impls, std::string("symcomm:") + a))
      impls.push_back({std::string("symcomm:") + a, a, false});
  // The barrier has no algorithms: symcomm's one call (with auto) and NCCL's stand-in.
  std::vector<Impl> barrier_impls;
  if (nccl) barrier_impls.push_back({"nccl:allreduce_1", nullptr, true});
  if (wanted(c.impls, "symcomm:auto")) barrier_impls.push_back({"symcomm:kernel", nullptr, false});
  if (nccl && !ctx.nccl) ctx.nccl = make_nccl(ctx);

  Buffers b;
  b.symmetric = !c.plain;
  b.bytes = ctx.opt.max_bytes + kGuardBytes;
  if (b.symmetric) {
    BENCH_SC(symcommMalloc(ctx.comm, b.bytes, reinterpret_cast<void**>(&b.send)));
    BENCH_SC(symcommMalloc(ctx.comm, b.bytes, reinterpret_cast<void**>(&b.recv)));
  } else {
    b.send = static_cast<char*>(space_alloc(ctx, b.bytes));
    b.recv = static_cast<char*>(space_alloc(ctx, b.bytes));
  }
  b.dev_v = static_cast<size_t*>(space_alloc(ctx, 4 * static_cast<size_t>(n) * sizeof(size_t)));
  set_counts(ctx, b, 0, n);  // sized now: run_once points into the arrays for every operation
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
      if (op.alltoall()) set_counts(ctx, b, count, n);
      // Every implementation is measured, then reported in the list's order (NCCL's line
      // first, with each symcomm line's ratio to it); --nccl-last measures NCCL's lines after
      // the others, to show what the order of measurement does.
      std::vector<const Impl*> order;
      for (const Impl& impl : barrier ? barrier_impls : impls) order.push_back(&impl);
      if (c.nccl_last)
        std::stable_partition(order.begin(), order.end(), [](const Impl* i) { return !i->nccl; });
      std::vector<std::pair<const Impl*, Timing>> measured;
      for (const Impl* ip : order) {
        const Impl& impl = *ip;
        if (impl.counts_to_host && op.op != Op::AllToAllvDevice) continue;
        // Sends and receives have no algorithms to choose: symcomm's line is auto's alone.
        if (op.op == Op::SendRecv && !impl.nccl && impl.algorithm) continue;
        if (op.op == Op::AllReduceGroup && count < static_cast<size_t>(kGroupCalls)) continue;
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
        measured.emplace_back(ip, *t);
      }
      double nccl_us = -1;  // the reference: NCCL's line
      for (const auto& [impl, t] : measured)
        if (impl->nccl && !impl->counts_to_host) nccl_us = t.us;
      for (const Impl& impl : barrier ? barrier_impls : impls)
        for (const auto& [done, t] : measured)
          if (done == &impl) {
            report(ctx, op, impl, b, bytes, barrier && impl.nccl ? 1 : count, t, nccl_us);
            ++points;
          }
    }
    if (ctx.rank == 0) std::printf("# %s: %.1f s\n", op.name, seconds_since(op_t0));
  }

  BENCH_SC(symcommFree(ctx.comm, words));
  space_free(ctx, b.dev_v);
  if (b.symmetric) {
    BENCH_SC(symcommFree(ctx.comm, b.recv));
    BENCH_SC(symcommFree(ctx.comm, b.send));
  } else {
    space_free(ctx, b.recv);
    space_free(ctx, b.send);
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
