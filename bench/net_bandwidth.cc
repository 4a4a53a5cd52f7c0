// symcomm-bench net: put bandwidth from rank 0 to rank 1 at each size, raw libfabric
// (fi_writes with up to --window in flight, as fi_rma_bw posts them: the ceiling) against
// symcomm (symcommPutOnStream, each completing in its call in the host space, and a
// symcommQuietOnStream per repetition), repetitions alternating. Both targets are poisoned
// before the point and checked after it: the pattern over the size, poison past it.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "net_bench.h"

namespace bench::net {

namespace {

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
    s.raw.write(s.src, bytes, kRawData);
  }
  s.raw.drain();
  const double us = (now_s() - t0) * 1e6 / inner;
  s.raw.write(&control, sizeof control, 0);
  s.raw.drain();
  return us;
}

double symcomm_rep(Setup& s, size_t bytes, int inner) {
  const Context& ctx = s.ctx;
  if (ctx.rank != 0) return 0;
  const double t0 = now_s();
  for (int i = 0; i < inner; ++i)
    BENCH_SC(symcommPutOnStream(ctx.comm, s.dst, s.src, bytes, s.peer, symcommEngineAuto, nullptr));
  BENCH_SC(symcommQuietOnStream(ctx.comm, nullptr));
  return (now_s() - t0) * 1e6 / inner;
}

Record bw_record(const Setup& s, const std::string& impl, size_t bytes, double us, int inner,
                 bool verified) {
  Record r = record(s, "put", impl, bytes, us, verified);
  if (us > 0) r.algbw_gbs = static_cast<double>(bytes) / (us * 1e3);
  r.extra.emplace_back("puts_per_rep", std::to_string(inner));
  return r;
}

}  // namespace

int bandwidth(Setup& s) {
  const Context& ctx = s.ctx;
  int failed = 0;
  for (size_t bytes : ctx.opt.net.sizes) {
    const uint64_t seed = ++s.point;
    char* raw_landed = s.raw.buffer() + kRawData;
    if (ctx.rank == 0) {
      fill(s.src, bytes, 0, seed);
    } else {
      std::memset(raw_landed, kPoison, bytes + kSlack);
      std::memset(s.dst, kPoison, bytes + kSlack);
    }
    const int inner = puts_per_rep(s, bytes);
    const int window = std::min(ctx.opt.net.window, inner);
    const Medians t = alternate(
        ctx, [&] { return raw_rep(s, bytes, inner, static_cast<size_t>(window)); },
        [&] { return symcomm_rep(s, bytes, inner); });
    const bool raw_ok = both(ctx, ctx.rank == 0 || (pattern_ok(raw_landed, bytes, 0, seed) &&
                                                    poison_ok(raw_landed + bytes, kSlack)));
    const bool ok = both(ctx, ctx.rank == 0 || (pattern_ok(s.dst, bytes, 0, seed) &&
                                                poison_ok(s.dst + bytes, kSlack)));

    Record r = bw_record(s, "libfabric:fi_write", bytes, t.raw_us, inner, raw_ok);
    r.extra.emplace_back("window", std::to_string(window));
    r.extra.emplace_back("completion", "\"delivery\"");
    report(s, r, 0);
    Record m = bw_record(s, "symcomm:net", bytes, t.symcomm_us, inner, ok);
    const char* chunk = std::getenv("SYMCOMM_NET_CHUNK_SIZE");
    m.extra.emplace_back("net_chunk", "\"" + std::string(chunk && *chunk ? chunk : "1M") + "\"");
    report(s, m, t.symcomm_us > 0 ? t.raw_us / t.symcomm_us : 0);
    failed += !raw_ok + !ok;
  }
  return failed;
}

}  // namespace bench::net
