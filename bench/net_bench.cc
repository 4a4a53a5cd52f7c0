// symcomm-bench net: the net transport between two ranks on two nodes, in the host or the
// cuda memory space, against raw libfabric on the same provider and domain in the same run
// (fi_write between host buffers: the wire's ceiling) and, in the cuda space, NCCL's own
// network path (net_nccl.h): put bandwidth (net_bandwidth.cc), ping-pong latency and the
// 8-byte put-signal target (net_latency.cc), and the CPU an idle communicator costs (here).
#include "net_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace bench {

const char* const kNetUsage =
    "  --sizes LIST      put bandwidth sizes (default 1K to 256M by x4, in the cuda space 64K,\n"
    "                    1M, 16M, 256M; --max-bytes cuts)\n"
    "  --lat-sizes LIST  ping-pong sizes, multiples of 8 (default 8 to 64K by x2, in the cuda\n"
    "                    space 8 to 32K by x8)\n"
    "  --window N        raw fi_writes in flight (default 64, as fi_rma_bw)\n"
    "  --rounds N        round trips per timed ping-pong repetition (default 200)\n"
    "  --rep-bytes B     bytes put per timed bandwidth repetition (default 64M; at least one\n"
    "                    put, at most 1000)\n"
    "  --idle-s S        seconds over which the idle CPU is measured (default 3; 0: skipped)\n"
    "  --nbi             symcomm's puts by symcommPutNbiOnStream (several in flight until the\n"
    "                    repetition's quiet; impl symcomm:net_nbi)\n"
    "  --kill-rail DEV   instead: a stream of puts over the rails (host space), the link DEV\n"
    "                    set down under it (ip, as root, in rank 0's network namespace:\n"
    "                    scripts/netns-rails); the rates before and after and the time to\n"
    "                    recover (net_failover.cc). --kill-at-s S (default 2) into the stream,\n"
    "                    which goes on --after-kill-s S (4) more; puts of --stream-bytes B (8M)\n"
    "  Run under symrun -n 2 --nodes 2 with SYMCOMM_MEMORY_SPACE=host, or =cuda with one GPU\n"
    "  per rank (symrun --gpus 0,1): GPU buffers, on-stream calls, and NCCL's socket path as a\n"
    "  second baseline (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket\n"
    "  NCCL_SOCKET_IFNAME=lo unless set; skipped where libnccl.so.2 does not load).\n"
    "  SYMCOMM_NET_PROVIDER and SYMCOMM_NET_DOMAIN choose the provider and domain of both the\n"
    "  transport and the raw baseline.\n";

namespace {

[[noreturn]] void bad_option(const char* option, const char* value, const std::string& why) {
  std::fprintf(stderr, "symcomm-bench net: %s %s: %s (see symcomm-bench net --help)\n", option,
               value, why.c_str());
  std::exit(2);
}

std::vector<size_t> size_list(const char* option, const char* text, size_t multiple) {
  std::vector<size_t> out;
  for (const std::string& item : split_list(text)) {
    size_t v = 0;
    if (!parse_bytes(item.c_str(), &v) || v == 0 || v % multiple)
      bad_option(option, text, "'" + item + "' is not a size > 0" +
                                   (multiple > 1 ? " and a multiple of 8" : std::string()));
    out.push_back(v);
  }
  if (out.empty()) bad_option(option, text, "names no size");
  return out;
}

double number_arg(const char* option, const char* text, double lo, double hi) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (end == text || *end || !(v >= lo && v <= hi))
    bad_option(option, text, "expected a number in [" + net::number(lo) + ", " +
                                 net::number(hi) + "]");
  return v;
}

std::vector<size_t> series(size_t from, size_t to, size_t factor) {
  std::vector<size_t> out;
  for (size_t b = from; b <= to; b *= factor) out.push_back(b);
  return out;
}

}  // namespace

bool net_option(Options& opt, int argc, char** argv, int& i) {
  NetOptions& o = opt.net;
  const char* name = argv[i];
  auto arg = [&]() -> const char* {
    if (i + 1 >= argc) bad_option(name, "", "needs a value");
    return argv[++i];
  };
  if (!std::strcmp(name, "--sizes")) o.sizes = size_list(name, arg(), 1);
  else if (!std::strcmp(name, "--lat-sizes")) o.lat_sizes = size_list(name, arg(), 8);
  else if (!std::strcmp(name, "--window")) o.window = static_cast<int>(number_arg(name, arg(), 1, 4096));
  else if (!std::strcmp(name, "--rounds")) o.rounds = static_cast<int>(number_arg(name, arg(), 1, 1e6));
  else if (!std::strcmp(name, "--rep-bytes")) o.rep_bytes = size_list(name, arg(), 1)[0];
  else if (!std::strcmp(name, "--idle-s")) o.idle_s = number_arg(name, arg(), 0, 3600);
  else if (!std::strcmp(name, "--nbi")) o.nbi = true;
  else if (!std::strcmp(name, "--kill-rail")) o.kill_rail = arg();
  else if (!std::strcmp(name, "--kill-at-s")) o.kill_at_s = number_arg(name, arg(), 0.5, 3600);
  else if (!std::strcmp(name, "--after-kill-s")) o.after_kill_s = number_arg(name, arg(), 1, 3600);
  else if (!std::strcmp(name, "--stream-bytes")) o.stream_bytes = size_list(name, arg(), 1)[0];
  else return false;
  return true;
}

namespace net {

bool both(const Context& ctx, bool ok) {
  int mine = ok, all[2];
  BENCH_SC(symcommHostAllgather(ctx.comm, &mine, all, sizeof mine));
  return all[0] && all[1];
}

void barrier(const Context& ctx) { BENCH_SC(symcommHostBarrier(ctx.comm)); }

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Medians alternate(const Context& ctx, const std::function<double()>& raw,
                  const std::function<double()>& symcomm, const std::function<double()>& nccl) {
  std::vector<double> raw_us, symcomm_us, nccl_us;
  for (int rep = 0; rep < ctx.opt.warmup + ctx.opt.iters; ++rep) {
    barrier(ctx);
    const double r = raw();
    barrier(ctx);
    const double m = symcomm();
    double n = 0;
    if (nccl) {
      barrier(ctx);
      n = nccl();
    }
    if (rep < ctx.opt.warmup) continue;
    raw_us.push_back(r);
    symcomm_us.push_back(m);
    nccl_us.push_back(n);
  }
  return {median(raw_us), median(symcomm_us), median(nccl_us)};
}

double ratio(double baseline_us, double symcomm_us) {
  return baseline_us > 0 && symcomm_us > 0 ? baseline_us / symcomm_us : 0;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", v);
  return text;
}

Record record(const Setup& s, const char* op, const std::string& impl, size_t bytes, double us,
              bool verified) {
  Record r;
  r.bench = "net";
  r.op = op;
  r.impl = impl;
  r.bytes = bytes;
  r.ranks = s.ctx.nranks;
  r.time_us = us;
  r.iters = s.ctx.opt.iters;
  r.warmup = s.ctx.opt.warmup;
  const bool raw = impl == kRaw, nccl = impl == kNccl;
  r.extra = {{"provider", "\"" + s.provider + "\""},
             {"domain", "\"" + s.domain + "\""},
             {"space", s.cuda ? "\"cuda\"" : "\"host\""},
             {"buffers", s.cuda && !raw ? "\"gpu\"" : "\"host\""},
             {"verified", verified ? "true" : "false"}};
  if (raw)
    r.extra.emplace_back("baseline", "\"the wire's ceiling: fi_write between registered host "
                                     "buffers, on the transport's provider and domain\"");
  if (nccl) {
    r.extra.emplace_back("baseline", "\"NCCL's network path: ncclSend/ncclRecv between GPU "
                                     "buffers over its socket transport\"");
    if (s.nccl) r.extra.insert(r.extra.end(), s.nccl->fields().begin(), s.nccl->fields().end());
  }
  // The machine's load when the point was recorded: the processes of other users compete
  // with both implementations' threads for the cores.
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    double load = -1;
    if (std::fscanf(f, "%lf", &load) == 1) r.extra.emplace_back("loadavg_1m", number(load));
    std::fclose(f);
  }
  // What SYMCOMM_NET_DOMAIN asked for, where the provider gave another domain.
  const char* asked = std::getenv("SYMCOMM_NET_DOMAIN");
  if (asked && *asked && s.domain != asked)
    r.extra.emplace_back("domain_requested", "\"" + std::string(asked) + "\"");
  return r;
}

void report(const Setup& s, Record r, double vs_raw, double vs_nccl) {
  if (vs_raw > 0) r.extra.emplace_back("vs_raw", number(vs_raw));
  if (vs_nccl > 0) r.extra.emplace_back("vs_nccl", number(vs_nccl));
  if (s.ctx.rank == 0) {
    const std::string bw = r.algbw_gbs >= 0 ? number(r.algbw_gbs) : "-";
    const std::string vs = vs_raw > 0 ? number(vs_raw) : "-";
    const std::string vn = vs_nccl > 0 ? number(vs_nccl) : "-";
    bool verified = true;
    for (const auto& [name, value] : r.extra)
      if (name == "verified") verified = value == "true";
    std::printf("%-14s %-20s %12zu %12.2f %10s %8s %8s %s\n", r.op.c_str(), r.impl.c_str(),
                r.bytes, r.time_us, bw.c_str(), vs.c_str(), vn.c_str(),
                verified ? "ok" : "WRONG DATA");
    std::fflush(stdout);
  }
  write_json(s.ctx, r);
}

namespace {

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Both ranks sleep with the communicator made; each measures its own process's CPU time
// (every thread: the caller's, the transport's proxy, the provider's) over that time.
void idle_cpu(Setup& s) {
  const double seconds = s.ctx.opt.net.idle_s;
  barrier(s.ctx);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the proxy's spin
  const double c0 = cpu_seconds(), t0 = now_s();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double percent = 100 * (cpu_seconds() - c0) / (now_s() - t0);
  double all[2];
  BENCH_SC(symcommHostAllgather(s.ctx.comm, &percent, all, sizeof percent));
  const double most = std::max(all[0], all[1]);
  Record r = record(s, "idle_cpu", "symcomm:net", 0, seconds * 1e6, true);
  r.iters = 1;
  r.warmup = 0;
  r.extra.emplace_back("cpu_percent", number(most));
  r.extra.emplace_back("rank_cpu_percent", "[" + number(all[0]) + ", " + number(all[1]) + "]");
  r.extra.emplace_back("target_percent", "2");
  r.extra.emplace_back("meets_target", most < 2 ? "true" : "false");
  if (s.ctx.rank == 0) {
    std::printf("\nidle CPU over %.1f s (one core = 100%%): rank 0 %.3f%%, rank 1 %.3f%% "
                "(target < 2%%: %s)\n", seconds, all[0], all[1], most < 2 ? "met" : "MISSED");
    std::fflush(stdout);
  }
  write_json(s.ctx, r);
}

const char* env_or(const char* name, const char* otherwise) {
  const char* v = std::getenv(name);
  return v ? v : otherwise;
}

// Why this communicator cannot be measured ("" where it can): two ranks, each on a node of
// its own, so that the peer is reached by the net transport.
std::string unsuitable(const Context& ctx) {
  int node = 0, nnodes = 0, accessible = 1;
  BENCH_SC(symcommCommNode(ctx.comm, &node, &nnodes));
  if (ctx.nranks != 2 || nnodes != 2)
    return "needs 2 ranks on 2 nodes (symrun -n 2 --nodes 2); this run has " +
           std::to_string(ctx.nranks) + " ranks on " + std::to_string(nnodes) + " nodes";
  BENCH_SC(symcommPeerAccessible(ctx.comm, 1 - ctx.rank, &accessible));
  if (accessible) return "the peer is reached by load/store, not by the net transport";
  return "";
}

}  // namespace

}  // namespace net

int run_net(Context& ctx) {
  using namespace net;
  if (const std::string why = unsuitable(ctx); !why.empty()) {
    if (ctx.rank == 0) std::fprintf(stderr, "symcomm-bench net: %s\n", why.c_str());
    return 77;
  }
  symcommMemorySpace_t space;
  BENCH_SC(symcommCommMemorySpace(ctx.comm, &space));
  const bool cuda = space == symcommSpaceCuda;
  NetOptions& o = ctx.opt.net;
  // The cuda space's defaults are fewer: each GPU point also runs NCCL, and the whole run
  // stays within about a minute on two GPUs.
  if (o.sizes.empty()) o.sizes = cuda ? series(64 * 1024, size_t{256} << 20, 16)
                                      : series(1024, size_t{256} << 20, 4);
  if (o.lat_sizes.empty()) o.lat_sizes = cuda ? series(8, 32 * 1024, 8) : series(8, 64 * 1024, 2);
  o.sizes.erase(std::remove_if(o.sizes.begin(), o.sizes.end(),
                               [&](size_t b) { return b > ctx.opt.max_bytes; }),
                o.sizes.end());
  size_t largest = 8;
  for (size_t b : o.sizes) largest = std::max(largest, b);
  for (size_t b : o.lat_sizes) largest = std::max(largest, b);
  const size_t capacity = largest + kSlack;

  void* dst = nullptr;
  void* sig = nullptr;
  BENCH_SC(symcommMalloc(ctx.comm, capacity, &dst));
  BENCH_SC(symcommMalloc(ctx.comm, 256, &sig));
  const size_t rounded = (capacity + 4095) / 4096 * 4096;
  auto host_buffer = [&] {
    char* p = static_cast<char*>(std::aligned_alloc(4096, rounded));
    if (!p) die("aligned_alloc", "out of memory", __FILE__, __LINE__);
    return p;
  };
  char* host_src = host_buffer();
  char* raw_src = host_buffer();
  char* src = host_src;
  char* host_copy = nullptr;
  if (cuda) {
    BENCH_CUDA(cudaMalloc(&src, capacity));
    host_copy = host_buffer();
    BENCH_CUDA(cudaMemsetAsync(sig, 0, sizeof(uint64_t), ctx.stream));
    BENCH_CUDA(cudaStreamSynchronize(ctx.stream));
  } else {
    *static_cast<uint64_t*>(sig) = 0;
  }
  auto raw = std::make_unique<RawFabric>(ctx, kRawData + capacity, o.window);
  std::unique_ptr<NcclPeer> nccl;
  std::string no_nccl;
  if (cuda) nccl = NcclPeer::open(ctx, capacity, &no_nccl);
  Setup s{ctx, 1 - ctx.rank, cuda, static_cast<char*>(dst), static_cast<uint64_t*>(sig), src,
          host_src, raw_src, host_copy, capacity, *raw, nccl.get(), raw->provider(),
          raw->domain()};
  barrier(ctx);
  if (ctx.rank == 0) {
    std::printf("symcomm-bench net: rank 0 to rank 1 on another node, provider %s, domain %s "
                "(raw libfabric on the same, between host buffers), %s memory space\n",
                raw->provider().c_str(), raw->domain().c_str(), cuda ? "cuda" : "host");
    if (cuda && nccl) {
      const std::string ifname = env_or("NCCL_SOCKET_IFNAME", "(unset)");
      std::printf("NCCL %s over its socket transport (NCCL_NET=%s, NCCL_SOCKET_IFNAME=%s)\n",
                  nccl->version().c_str(), env_or("NCCL_NET", "(unset)"), ifname.c_str());
      if (ifname != raw->domain())
        std::printf("note: NCCL's interface (%s) is not the transport's domain (%s): set "
                    "NCCL_SOCKET_IFNAME to compare the same network\n", ifname.c_str(),
                    raw->domain().c_str());
    } else if (cuda) {
      std::printf("NCCL's rows are skipped: %s\n", no_nccl.c_str());
    }
    std::printf("%-14s %-20s %12s %12s %10s %8s %8s %s\n", "op", "impl", "bytes", "time us",
                "GB/s", "vs_raw", "vs_nccl", "data");
    std::fflush(stdout);
  }
  if (!o.kill_rail.empty()) {
    const int failed = failover(s);
    BENCH_SC(symcommFree(ctx.comm, sig));
    BENCH_SC(symcommFree(ctx.comm, dst));
    std::free(host_src);
    std::free(raw_src);
    return failed;
  }
  int failed = bandwidth(s);
  failed += latency(s);
  if (ctx.rank == 0) {
    for (const std::string& line : s.targets) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  // The baselines' endpoint and communicator are not part of the idle cost.
  raw.reset();
  nccl.reset();
  s.nccl = nullptr;
  if (o.idle_s > 0) idle_cpu(s);
  BENCH_SC(symcommFree(ctx.comm, sig));
  BENCH_SC(symcommFree(ctx.comm, dst));
  if (cuda) BENCH_CUDA(cudaFree(src));
  std::free(host_src);
  std::free(raw_src);
  std::free(host_copy);
  if (failed && ctx.rank == 0)
    std::fprintf(stderr, "symcomm-bench net: %d points received wrong data\n", failed);
  return failed ? 1 : 0;
}

}  // namespace bench
