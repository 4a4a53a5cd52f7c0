// symcomm-bench: benchmarks that always run their baseline in the same run.
//   symrun -n 8 symcomm-bench rma [--json FILE] [--machine NAME] [--iters N] [--max-bytes B]
//   symrun -n 8 symcomm-bench coll [common options] [--ops LIST] [--step F] [--plain] ...
//   symrun -n 8 symcomm-bench decomp [common options] [--sizes LIST] [--max-n N] ...
//   symrun -n 2 --nodes 2 symcomm-bench net [common options] [--sizes LIST] ... (either space)
//   symrun -n 2 symcomm-bench fused [common options] [--shapes LIST] [--llm] ...
#include "bench.h"
#include "net_nccl.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <cerrno>
#include <cstring>

namespace bench {

void die(const char* call, const char* why, const char* file, int line) {
  std::fprintf(stderr, "symcomm-bench: %s failed: %s (%s:%d)\n", call, why, file, line);
  std::exit(1);
}

std::vector<std::string> split_list(const char* text) {
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

bool parse_bytes(const char* text, size_t* bytes) {
  if (!text || *text < '0' || *text > '9') return false;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 0);
  if (errno) return false;
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10; ++end; break;
    case 'm': case 'M': shift = 20; ++end; break;
    case 'g': case 'G': shift = 30; ++end; break;
    default: break;
  }
  if (*end != '\0' || (shift && v > (~0ull >> shift))) return false;
  *bytes = static_cast<size_t>(v << shift);
  return true;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {
std::unique_ptr<StreamHold> g_hold;  // --hold
}  // namespace

void set_hold(bool on) { g_hold = on ? std::make_unique<StreamHold>() : nullptr; }

double time_calls_us(const Context& ctx, int warmup, int reps, int inner,
                     const std::function<void()>& body, double* host_us) {
  if (!ctx.host) return time_stream_us(ctx.stream, warmup, reps, inner, body, host_us);
  for (int i = 0; i < warmup; ++i) body();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) body();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count() / inner);
  }
  if (host_us) *host_us = median(t);
  return median(t);
}

double time_stream_us(cudaStream_t s, int warmup, int reps, int inner,
                      const std::function<void()>& body, double* host_us) {
  for (int i = 0; i < warmup; ++i) body();
  BENCH_CUDA(cudaStreamSynchronize(s));
  cudaEvent_t a, b;
  BENCH_CUDA(cudaEventCreate(&a));
  BENCH_CUDA(cudaEventCreate(&b));
  std::vector<double> t, host;
  bool held = g_hold != nullptr;
  for (int r = 0; r < reps; ++r) {
    if (held) g_hold->hold(s);
    BENCH_CUDA(cudaEventRecord(a, s));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < inner; ++i) body();
    const double enqueue_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / inner;
    BENCH_CUDA(cudaEventRecord(b, s));
    if (held) g_hold->release();
    BENCH_CUDA(cudaEventSynchronize(b));
    if (held && g_hold->gave_up()) {
      // A call waited for the GPU inside the batch: this point is timed without the hold
      // (said once per process).
      static bool said = false;
      if (!said)
        std::fprintf(stderr, "symcomm-bench: --hold: a call waited for the GPU while its batch "
                             "was held; such points are timed without the hold\n");
      said = true;
      held = false;
      --r;
      continue;
    }
    host.push_back(enqueue_us);
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(1000.0 * ms / inner);
  }
  BENCH_CUDA(cudaEventDestroy(a));
  BENCH_CUDA(cudaEventDestroy(b));
  if (host_us) *host_us = median(host);
  return median(t);
}

GraphBatch::GraphBatch(cudaStream_t s, int calls, const std::function<symcommResult_t()>& call)
    : stream_(s) {
  BENCH_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < calls && why_.empty(); ++i)
    if (const symcommResult_t rc = call(); rc != symcommSuccess)
      why_ = std::string(symcommGetErrorString(rc)) + ": " + symcommGetLastError();
  // Ending the capture also ends one that a failed call invalidated.
  const cudaError_t end = cudaStreamEndCapture(s, &graph_);
  if (end != cudaSuccess && why_.empty())
    why_ = std::string("the capture failed: ") + cudaGetErrorString(end);
  if (why_.empty()) {
    const cudaError_t inst = cudaGraphInstantiate(&exec_, graph_, 0);
    if (inst != cudaSuccess) {
      why_ = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(inst);
      exec_ = nullptr;
    }
  }
  if (!why_.empty()) (void)cudaGetLastError();  // the failure is reported through why()
}

GraphBatch::~GraphBatch() {
  if (exec_) (void)cudaGraphExecDestroy(exec_);
  if (graph_) (void)cudaGraphDestroy(graph_);
}

void GraphBatch::launch() const { BENCH_CUDA(cudaGraphLaunch(exec_, stream_)); }

double max_over_ranks(const Context& ctx, double v) {
  std::vector<double> all(static_cast<size_t>(ctx.nranks));
  BENCH_SC(symcommHostAllgather(ctx.comm, &v, all.data(), sizeof v));
  return *std::max_element(all.begin(), all.end());
}

void print_header(const Context& ctx, const char* title) {
  if (ctx.rank != 0) return;
  std::printf("\n%s\n%-10s %-22s %14s %12s %12s\n", title, "op", "impl", "bytes", "time us",
              "GB/s");
}

void emit(const Context& ctx, const Record& r) {
  if (ctx.rank != 0) return;
  if (r.algbw_gbs >= 0)
    std::printf("%-10s %-22s %14zu %12.2f %12.1f\n", r.op.c_str(), r.impl.c_str(), r.bytes,
                r.time_us, r.algbw_gbs);
  else
    std::printf("%-10s %-22s %14zu %12.2f %12s\n", r.op.c_str(), r.impl.c_str(), r.bytes,
                r.time_us, "-");
  std::fflush(stdout);
  write_json(ctx, r);
}

void write_json(const Context& ctx, const Record& r) {
  if (ctx.rank != 0 || ctx.opt.json.empty()) return;
  Record held = r;
  if (ctx.opt.hold) held.extra.emplace_back("hold", "true");  // timed behind a StreamHold
  if (!append_record(ctx.opt.json, ctx.opt.machine, held))
    die("writing", ctx.opt.json.c_str(), __FILE__, __LINE__);
}

ncclComm_t make_nccl(const Context& ctx) {
  ncclUniqueId id;
  if (ctx.rank == 0) BENCH_NCCL(ncclGetUniqueId(&id));
  BENCH_SC(symcommHostBroadcast(ctx.comm, &id, sizeof id, 0));
  ncclComm_t nccl;
  BENCH_NCCL(ncclCommInitRank(&nccl, ctx.nranks, id, ctx.rank));
  return nccl;
}

}  // namespace bench

namespace {

// The subcommands. Their own options are parsed before the communicator exists, so that
// --help and mistakes need neither symrun nor a GPU.
struct Subcommand {
  const char* name;
  const char* usage;  // its own options, a line each ("" if none)
  bool (*option)(bench::Options&, int argc, char** argv, int& i);  // null if none
  int (*run)(bench::Context&);
  // The memory spaces it measures (1u << space each); in another it says why not and exits 77.
  unsigned spaces = 1u << symcommSpaceCuda;
  const char* elsewhere = "symcomm-bench measures GPUs; this communicator is in the host space";
  // Called before symcommInit, while this process has no other thread: environment that the
  // subcommand's baselines read when they start (null if none).
  void (*before_init)() = nullptr;
};
const Subcommand kSubcommands[] = {
    {"rma", "", nullptr, bench::run_rma},
    {"coll", bench::kCollUsage, bench::coll_option, bench::run_coll,
     (1u << symcommSpaceCuda) | (1u << symcommSpaceHost)},
    {"decomp", bench::kDecompUsage, bench::decomp_option, bench::run_decomp},
    {"net", bench::kNetUsage, bench::net_option, bench::run_net,
     (1u << symcommSpaceCuda) | (1u << symcommSpaceHost), "", bench::net::set_nccl_environment},
    {"fused", bench::kFusedUsage, bench::fused_option, bench::run_fused},
};

void usage(FILE* f, const Subcommand* only) {
  std::fprintf(f, "usage: symrun -n N symcomm-bench SUBCOMMAND [options]\n"
               "common options: [--json FILE] [--machine NAME] [--iters N] [--warmup N] "
               "[--max-bytes B] [--hold]\n"
               "  --hold: each timed batch waits behind a kernel until all of it is enqueued "
               "(the GPU's time only; default: the batch's first call's enqueueing counts)\n");
  for (const Subcommand& s : kSubcommands)
    if (!only || only == &s) std::fprintf(f, "symcomm-bench %s%s\n%s", s.name, *s.usage ? ":" : "", s.usage);
}

}  // namespace

int main(int argc, char** argv) {
  // NVLink multicast is forbidden on the shared machines: keep NCCL off it whatever the
  // caller's environment says.
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const Subcommand* cmd = nullptr;
  for (const Subcommand& s : kSubcommands)
    if (argc >= 2 && std::strcmp(argv[1], s.name) == 0) cmd = &s;
  if (!cmd) {
    const bool help = argc >= 2 && (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h"));
    usage(help ? stdout : stderr, nullptr);
    return help ? 0 : 2;
  }
  bench::Context ctx{};
  for (int i = 2; i < argc; ++i) {
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) bench::die("arguments", "an option needs a value", __FILE__, __LINE__);
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      usage(stdout, cmd);
      return 0;
    }
    if (!std::strcmp(argv[i], "--json")) ctx.opt.json = next();
    else if (!std::strcmp(argv[i], "--machine")) ctx.opt.machine = next();
    else if (!std::strcmp(argv[i], "--iters")) ctx.opt.iters = std::atoi(next());
    else if (!std::strcmp(argv[i], "--warmup")) ctx.opt.warmup = std::atoi(next());
    else if (!std::strcmp(argv[i], "--hold")) ctx.opt.hold = true;
    else if (!std::strcmp(argv[i], "--max-bytes")) {
      if (!bench::parse_bytes(next(), &ctx.opt.max_bytes)) {
        std::fprintf(stderr, "symcomm-bench: --max-bytes %s is not a size (4096, 64M, 1G)\n", argv[i]);
        return 2;
      }
    } else if (cmd->option && cmd->option(ctx.opt, argc, argv, i)) continue;
    else {
      std::fprintf(stderr, "symcomm-bench %s: unknown option %s\n", cmd->name, argv[i]);
      usage(stderr, cmd);
      return 2;
    }
  }
  if (ctx.opt.iters < 1 || ctx.opt.warmup < 0) {
    std::fprintf(stderr, "symcomm-bench: --iters must be at least 1 and --warmup at least 0\n");
    return 2;
  }
  if (cmd->before_init) cmd->before_init();
  BENCH_SC(symcommInitFromEnv(&ctx.comm, nullptr));
  BENCH_SC(symcommCommRank(ctx.comm, &ctx.rank));
  BENCH_SC(symcommCommSize(ctx.comm, &ctx.nranks));
  symcommMemorySpace_t space;
  BENCH_SC(symcommCommMemorySpace(ctx.comm, &space));
  if (!(cmd->spaces & (1u << space))) {
    std::fprintf(stderr, "%s\n", cmd->elsewhere);
    symcommFinalize(ctx.comm);
    return 77;
  }
  if (space == symcommSpaceHost) {  // no GPU, no stream: the subcommand runs on the CPU
    ctx.host = true;
    ctx.stream = nullptr;
    if (ctx.opt.machine.empty()) ctx.opt.machine = bench::machine_name(nullptr, ctx.nranks);
    const int rc = cmd->run(ctx);
    BENCH_SC(symcommFinalize(ctx.comm));
    return rc;
  }
  if (ctx.opt.machine.empty()) {
    int device = 0;
    cudaDeviceProp prop;
    BENCH_CUDA(cudaGetDevice(&device));
    BENCH_CUDA(cudaGetDeviceProperties(&prop, device));
    // The machine is its GPUs, not its ranks: ranks that share GPUs (MPS) count them once
    // (a GPU: its host and PCI address).
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const long long bus = static_cast<long long>(std::hash<std::string>{}(host) << 24) ^
                          ((static_cast<long long>(prop.pciDomainID) << 16) |
                           (prop.pciBusID << 8) | prop.pciDeviceID);
    std::vector<long long> buses(static_cast<size_t>(ctx.nranks));
    BENCH_SC(symcommHostAllgather(ctx.comm, &bus, buses.data(), sizeof bus));
    std::sort(buses.begin(), buses.end());
    const int gpus = static_cast<int>(std::unique(buses.begin(), buses.end()) - buses.begin());
    ctx.opt.machine = bench::machine_name(prop.name, gpus);
  }
  BENCH_CUDA(cudaStreamCreateWithFlags(&ctx.stream, cudaStreamNonBlocking));
  bench::set_hold(ctx.opt.hold);
  int rc = cmd->run(ctx);
  bench::set_hold(false);
  BENCH_CUDA(cudaStreamDestroy(ctx.stream));
  if (ctx.nccl) ncclCommDestroy(ctx.nccl);
  BENCH_SC(symcommFinalize(ctx.comm));
  return rc;
}
