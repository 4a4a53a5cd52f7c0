// symcomm-bench net: put bandwidth from rank 0 to rank 1 at each size, raw libfabric
// (fi_writes between host buffers with up to --window in flight, as fi_rma_bw posts them: the
// ceiling) against symcomm (symcommPutOnStream, or with --nbi symcommPutNbiOnStream, and a
// symcommQuietOnStream per repetition: in the host space each put completes in its call, an
// nbi put by the quiet at the latest; in the cuda space, GPU memory to GPU memory,
// the calls return at once and the repetition ends when the stream has run them) and, in the
// cuda space, NCCL (ncclSend on rank 0, ncclRecv on rank 1), repetitions alternating. Every
// target is poisoned before the point and checked after it: the pattern over the size, poison
// past it. Then the targets over the sizes measured (Setup::targets).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "net_bench.h"

namespace bench::net {

namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr double kRawTarget = 0.9;   // put bandwidth, 1 to 256 MiB, at least 0.9x raw
constexpr double kNcclTarget = 1.0;  // put bandwidth, 1 MiB and more, at least NCCL's

int puts_per_rep(const Setup& s, size_t bytes) {
  return static_cast<int>(std::clamp<size_t>(s.ctx.opt.net.rep_bytes / bytes, 1, 1000));
}

// One raw repetition: `inner` writes of `bytes`, at most `window` in flight, timed until all
// completed (delivery complete: the data is at the target); then an 8-byte write of the next
// control value, so that rank 1, reading its completion queue meanwhile (the provider's
// progress is manual), knows when the repetition has landed.
double raw_rep(Setup& s, size_t bytes, int inner, size_t window) {
  const uint64_t control = ++s.control;
  if (s.ctx.rank != 0) {
    s.raw.await_word(0, control);
    return 0;
  }
  const double t0 = now_s();
  for (int i = 0; i < inner; ++i) {
    s.raw.drain(window - 1);
    s.raw.write(s.host_src, bytes, kRawData);
  }
  s.raw.drain();
  const double us = (now_s() - t0) * 1e6 / inner;
  s.raw.write(&control, sizeof control, 0);
  s.raw.drain();
  return us;
}

// One symcomm repetition on rank 0, timed until the quiet has completed: the data is at the
// target (ctx.stream is NULL in the host space).
double symcomm_rep(Setup& s, size_t bytes, int inner) {
  const Context& ctx = s.ctx;
  if (ctx.rank != 0) return 0;
  const double t0 = now_s();
  for (int i = 0; i < inner; ++i) {
    if (ctx.opt.net.nbi)
      BENCH_SC(symcommPutNbiOnStream(ctx.comm, s.dst, s.src, bytes, s.peer, symcommEngineAuto,
                                     ctx.stream));
    else
      BENCH_SC(symcommPutOnStream(ctx.comm, s.dst, s.src, bytes, s.peer, symcommEngineAuto,
                                  ctx.stream));
  }
  BENCH_SC(symcommQuietOnStream(ctx.comm, ctx.stream));
  finish(s);
  return (now_s() - t0) * 1e6 / inner;
}

// One NCCL repetition: `inner` sends from rank 0 and as many receives on rank 1, each rank
// timed until its stream ran them; the later of the two (rank 1's receives end with the data
// in its GPU memory, as symcomm's quiet does).
double nccl_rep(Setup& s, size_t bytes, int inner) {
  const Context& ctx = s.ctx;
  const double t0 = now_s();
  for (int i = 0; i < inner; ++i) {
    if (ctx.rank == 0) s.nccl->send(s.src, bytes, ctx.stream);
    else s.nccl->recv(s.nccl->recv_buffer(), bytes, ctx.stream);
  }
  finish(s);
  return max_over_ranks(ctx, (now_s() - t0) * 1e6 / inner);
}

Record bw_record(const Setup& s, const std::string& impl, size_t bytes, double us, int inner,
                 bool verified) {
  Record r = record(s, "put", impl, bytes, us, verified);
  if (us > 0) r.algbw_gbs = static_cast<double>(bytes) / (us * 1e3);
  r.extra.emplace_back("puts_per_rep", std::to_string(inner));
  return r;
}

// The lowest ratio among the sizes in [from, to] and its size (ratio 0: none measured).
struct Lowest {
  double ratio = 0;
  size_t bytes = 0;
  void add(size_t b, double r) {
    if (r > 0 && (bytes == 0 || r < ratio)) ratio = r, bytes = b;
  }
};

// The verdict's line, printed after the latency's (no line where no size was measured).
void add_target(Setup& s, const char* what, const Lowest& l, double target) {
  if (!l.bytes) return;
  char line[160];
  std::snprintf(line, sizeof line, "put bandwidth %s: lowest %.2fx at %zu bytes (target >= "
                "%.1fx: %s)", what, l.ratio, l.bytes, target, l.ratio >= target ? "met" : "MISSED");
  s.targets.push_back(line);
}

}  // namespace

int bandwidth(Setup& s) {
  const Context& ctx = s.ctx;
  int failed = 0;
  Lowest vs_raw, vs_nccl;
  for (size_t bytes : ctx.opt.net.sizes) {
    const uint64_t seed = ++s.point;
    char* raw_landed = s.raw.buffer() + kRawData;
    if (ctx.rank == 0) {
      set_pattern(s, s.src, bytes, 0, seed);
      if (s.host_src != s.src) fill(s.host_src, bytes, 0, seed);
    } else {
      std::memset(raw_landed, kPoison, bytes + kSlack);
      set_poison(s, s.dst, bytes + kSlack);
      if (s.nccl) set_poison(s, s.nccl->recv_buffer(), bytes + kSlack);
    }
    const int inner = puts_per_rep(s, bytes);
    const int window = std::min(ctx.opt.net.window, inner);
    std::function<double()> nccl;
    if (s.nccl) nccl = [&] { return nccl_rep(s, bytes, inner); };
    const Medians t = alternate(
        ctx, [&] { return raw_rep(s, bytes, inner, static_cast<size_t>(window)); },
        [&] { return symcomm_rep(s, bytes, inner); }, nccl);
    barrier(ctx);  // rank 0's last repetition has landed
    const bool raw_ok = both(ctx, ctx.rank == 0 || (pattern_ok(raw_landed, bytes, 0, seed) &&
                                                    poison_ok(raw_landed + bytes, kSlack)));
    const bool ok = both(ctx, ctx.rank == 0 || landed_ok(s, s.dst, bytes, 0, seed));
    const bool nccl_ok =
        s.nccl && both(ctx, ctx.rank == 0 || landed_ok(s, s.nccl->recv_buffer(), bytes, 0, seed));

    Record r = bw_record(s, kRaw, bytes, t.raw_us, inner, raw_ok);
    r.extra.emplace_back("window", std::to_string(window));
    r.extra.emplace_back("completion", "\"delivery\"");
    report(s, r, 0);
    if (s.nccl) report(s, bw_record(s, kNccl, bytes, t.nccl_us, inner, nccl_ok), 0);
    Record m = bw_record(s, ctx.opt.net.nbi ? "symcomm:net_nbi" : "symcomm:net", bytes,
                         t.symcomm_us, inner, ok);
    const char* chunk = std::getenv("SYMCOMM_NET_CHUNK_SIZE");
    m.extra.emplace_back("net_chunk", "\"" + std::string(chunk && *chunk ? chunk : "1M") + "\"");
    const double raw_ratio = ratio(t.raw_us, t.symcomm_us);
    const double nccl_ratio = s.nccl ? ratio(t.nccl_us, t.symcomm_us) : 0;
    report(s, m, raw_ratio, nccl_ratio);
    if (ok && raw_ok && bytes >= kMiB && bytes <= 256 * kMiB) vs_raw.add(bytes, raw_ratio);
    if (ok && nccl_ok && bytes >= kMiB) vs_nccl.add(bytes, nccl_ratio);
    failed += !raw_ok + !ok + (s.nccl && !nccl_ok);
  }
  add_target(s, "1 to 256 MiB vs raw fi_write", vs_raw, kRawTarget);
  add_target(s, ">= 1 MiB vs NCCL", vs_nccl, kNcclTarget);
  return failed;
}

}  // namespace bench::net
