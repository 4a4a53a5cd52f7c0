// symcomm-bench net --kill-rail DEV: a stream of puts from rank 0 to rank 1 over the rails
// (host space, SYMCOMM_NET_RAILS), with the link DEV set down under it (`ip link set DEV down`
// in rank 0's network namespace: run it under scripts/netns-rails, as root), the issue's "rail
// killed mid-stream". Each put of --stream-bytes goes to a slot of its own in a ring of
// kSlots, with a pattern of its own; the put the link went down under keeps its slot to the
// end. Reported, against the stream's own rates before the kill (the baseline, in the same
// run): the rate before, the survivors' rate (the median over the second half of the time
// after the kill), and how long after the kill the stream was back at that rate: the end of
// the first put after the kill that ran at 0.8x it or faster. Target: back within twice
// SYMCOMM_NET_RAIL_TIMEOUT, every put landed (rank 1 checks every slot's last pattern). The
// link comes back up at the end.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "net_bench.h"

namespace bench::net {

namespace {

constexpr size_t kSlots = 24;
constexpr double kBackAt = 0.8;  // of the survivors' rate

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool set_link(const std::string& dev, bool up) {
  const std::string cmd = "ip link set " + dev + (up ? " up" : " down");
  return std::system(cmd.c_str()) == 0;
}

}  // namespace

int failover(Setup& s) {
  const Context& ctx = s.ctx;
  const NetOptions& o = ctx.opt.net;
  const size_t bytes = o.stream_bytes;
  const char* timeout = std::getenv("SYMCOMM_NET_RAIL_TIMEOUT");
  const double rail_timeout_s = (timeout && *timeout ? std::atof(timeout) : 2000.0) / 1e3;
  char* ring = nullptr;
  BENCH_SC(symcommMalloc(ctx.comm, kSlots * bytes, reinterpret_cast<void**>(&ring)));
  std::vector<char> src(bytes);
  std::vector<uint64_t> last(kSlots, 0);  // each slot's last pattern (0: none)
  std::vector<double> starts, ends;
  double killed_at = -1;
  bool link_ok = true;
  size_t hit = SIZE_MAX;  // the put the link went down under
  barrier(ctx);
  if (ctx.rank == 0) {
    std::atomic<double> at{-1};
    const double t0 = now_s();
    std::thread killer([&] {
      while (now_s() - t0 < o.kill_at_s) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      link_ok = set_link(o.kill_rail, false);
      at.store(now_s() - t0);
    });
    size_t slot = 0;
    for (uint64_t i = 1; now_s() - t0 < o.kill_at_s + o.after_kill_s; ++i) {
      fill(src.data(), bytes, 0, i);
      if (hit != SIZE_MAX && slot == hit % kSlots) slot = (slot + 1) % kSlots;  // kept
      const double start = now_s() - t0;
      BENCH_SC(symcommPutOnStream(ctx.comm, ring + slot * bytes, src.data(), bytes, s.peer,
                                  symcommEngineAuto, nullptr));
      const double end = now_s() - t0;
      const double k = at.load();
      if (hit == SIZE_MAX && k >= 0 && k <= end) hit = starts.size();
      starts.push_back(start);
      ends.push_back(end);
      last[slot] = i;
      slot = (slot + 1) % kSlots;
    }
    killer.join();
    killed_at = at.load();
    BENCH_SC(symcommQuietOnStream(ctx.comm, nullptr));
    set_link(o.kill_rail, true);
  }
  BENCH_SC(symcommHostBroadcast(ctx.comm, last.data(), kSlots * sizeof(uint64_t), 0));
  bool ok = true;
  if (ctx.rank == 1)
    for (size_t k = 0; k < kSlots; ++k)
      if (last[k]) ok = ok && pattern_ok(ring + k * bytes, bytes, 0, last[k]);
  ok = both(ctx, ok && link_ok);
  if (ctx.rank == 0) {
    std::vector<double> before, after;
    const double settled = killed_at + o.after_kill_s / 2;
    for (size_t i = 0; i < starts.size(); ++i) {
      const double gbs = static_cast<double>(bytes) / (ends[i] - starts[i]) / 1e9;
      if (starts[i] > 0.5 && ends[i] < killed_at) before.push_back(gbs);
      if (starts[i] > settled) after.push_back(gbs);
    }
    const double rate_before = median(before), rate_after = median(after);
    double back = -1;  // seconds from the kill until the stream ran at the survivors' rate
    for (size_t i = hit == SIZE_MAX ? starts.size() : hit; i < starts.size(); ++i)
      if (static_cast<double>(bytes) / (ends[i] - starts[i]) / 1e9 >= kBackAt * rate_after) {
        back = ends[i] - killed_at;
        break;
      }
    const bool in_time = back >= 0 && back <= 2 * rail_timeout_s;
    Record r = record(s, "put_stream_rail_killed", "symcomm:net", bytes,
                      rate_after > 0 ? static_cast<double>(bytes) / rate_after / 1e3 : 0, ok);
    r.algbw_gbs = rate_after;
    const char* rails = std::getenv("SYMCOMM_NET_RAILS");
    r.extra.emplace_back("rails", "\"" + std::string(rails ? rails : "") + "\"");
    r.extra.emplace_back("killed_rail", "\"" + o.kill_rail + "\"");
    r.extra.emplace_back("killed_at_s", number(killed_at));
    r.extra.emplace_back("rate_before_gbs", number(rate_before));
    r.extra.emplace_back("rate_after_gbs", number(rate_after));
    r.extra.emplace_back("back_after_s", number(back));
    r.extra.emplace_back("rail_timeout_s", number(rail_timeout_s));
    r.extra.emplace_back("puts", std::to_string(starts.size()));
    r.extra.emplace_back("hit_put_s", hit == SIZE_MAX ? "null" : number(ends[hit] - starts[hit]));
    r.extra.emplace_back("baseline", "\"the same stream's rate before the kill\"");
    report(s, r, 0);
    std::printf("rail %s killed at %.2f s under put %zu of %zu (%s each): before %.3f GB/s, "
                "survivors %.3f GB/s (%.2fx), back at 0.8x the survivors' rate %.2f s after "
                "the kill (target <= %.2f s, twice SYMCOMM_NET_RAIL_TIMEOUT): %s; data %s\n",
                o.kill_rail.c_str(), killed_at, hit, starts.size(),
                std::to_string(bytes >> 20).append(" MiB").c_str(), rate_before, rate_after,
                rate_before > 0 ? rate_after / rate_before : 0, back, 2 * rail_timeout_s,
                in_time ? "met" : "MISSED", ok ? "ok" : "WRONG");
    std::fflush(stdout);
  }
  BENCH_SC(symcommFree(ctx.comm, ring));
  return ok ? 0 : 1;
}

}  // namespace bench::net
