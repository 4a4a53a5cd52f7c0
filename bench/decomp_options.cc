// symcomm-bench decomp: its usage and its options, parsed before the communicator exists (so
// --help and mistakes need no GPU); a bad value exits with status 2.
#include <algorithm>
#include <cstring>
#include <iterator>

#include "decomp_bench.h"

namespace bench {

using decomp::kTimedOps;
using decomp::TimedOp;

const char* const kDecompUsage =
    "  --sizes LIST     grid sizes n (n^3 points; default 256,512,1024)\n"
    "  --max-n N        skip sizes above N\n"
    "  --dtypes LIST    c32,r64 (default both)\n"
    "  --grids LIST     process grids such as 1x8,2x4 (default: every pr x pc = ranks)\n"
    "  --backends LIST  decomposition backends (default: every registered one)\n"
    "  --local-buffers  cudaMalloc'd pencils (default: symmetric ones, from symcommMalloc)\n"
    "  --contiguous     axis-contiguous pencils (default: x fastest in every pencil)\n"
    "  --ops LIST       transposes timed: xy,yz,zy,yx (default all four; the round-trip check\n"
    "                   runs all four regardless)\n"
    "  --no-autotune    skip the check after each size and type (default: autotune grid and\n"
    "                   backend among those measured, compare the pick with the best measured)\n"
    "  --graph          each timed batch is one CUDA graph of the batch's transposes, captured\n"
    "                   once per rank and replayed (the GPU's time, without a host launch per\n"
    "                   call); the replay is checked on fresh data first; transposes that some\n"
    "                   rank cannot capture are skipped with a note; no autotune check\n"
    "  --iters and --warmup count repetitions of a batch of transposes (256 MiB of pencils\n"
    "  per rank per batch, 4 to 50 calls).\n";

namespace {

[[noreturn]] void bad_option(const char* option, const char* value, const std::string& why) {
  std::fprintf(stderr, "symcomm-bench decomp: %s %s: %s\n", option, value, why.c_str());
  std::exit(2);
}

int64_t to_int(const char* option, const std::string& text, int64_t lo, int64_t hi) {
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    bad_option(option, text.c_str(), "expected an integer in [" + std::to_string(lo) + ", " +
                                         std::to_string(hi) + "]");
  return v;
}

bool registered(const std::string& name) {
  for (int i = 0; i < symcommDecompBackendCount(); ++i)
    if (name == symcommDecompBackendName(i)) return true;
  return false;
}

}  // namespace

bool decomp_option(Options& opt, int argc, char** argv, int& i) {
  DecompOptions& o = opt.decomp;
  const char* name = argv[i];
  auto arg = [&]() -> const char* {
    if (i + 1 >= argc) bad_option(name, "", "needs a value");
    return argv[++i];
  };
  if (!std::strcmp(name, "--sizes")) {
    const char* v = arg();
    o.sizes.clear();
    for (const std::string& s : split_list(v)) o.sizes.push_back(to_int(name, s, 1, 1 << 16));
    if (o.sizes.empty()) bad_option(name, v, "names no size");
  } else if (!std::strcmp(name, "--max-n")) {
    o.max_n = to_int(name, arg(), 1, 1 << 16);
  } else if (!std::strcmp(name, "--dtypes")) {
    const char* v = arg();
    o.dtypes = split_list(v);
    for (const std::string& t : o.dtypes)
      if (t != "c32" && t != "r64") bad_option(name, v, "'" + t + "' is not c32 or r64");
    if (o.dtypes.empty()) bad_option(name, v, "names no type");
  } else if (!std::strcmp(name, "--grids")) {
    const char* v = arg();
    o.grids = split_list(v);
    for (const std::string& g : o.grids) {
      const size_t x = g.find('x');
      if (x == std::string::npos) bad_option(name, v, "'" + g + "' is not PRxPC");
      to_int(name, g.substr(0, x), 1, 1 << 20);
      to_int(name, g.substr(x + 1), 1, 1 << 20);
    }
  } else if (!std::strcmp(name, "--backends")) {
    const char* v = arg();
    o.backends = split_list(v);
    for (std::string& b : o.backends) {
      if (b.rfind("symcomm:", 0) == 0) b = b.substr(8);
      if (!registered(b)) bad_option(name, v, "'" + b + "' is not a registered backend");
    }
  } else if (!std::strcmp(name, "--local-buffers")) {
    o.local = true;
  } else if (!std::strcmp(name, "--contiguous")) {
    o.contiguous = true;
  } else if (!std::strcmp(name, "--ops")) {
    const char* v = arg();
    o.ops = split_list(v);
    for (const std::string& k : o.ops)
      if (std::none_of(std::begin(kTimedOps), std::end(kTimedOps),
                       [&](const TimedOp& op) { return k == op.key; }))
        bad_option(name, v, "'" + k + "' is not xy, yz, zy or yx");
    if (o.ops.empty()) bad_option(name, v, "names no transpose");
  } else if (!std::strcmp(name, "--no-autotune")) {
    o.autotune = false;
  } else if (!std::strcmp(name, "--graph")) {
    o.graph = true;
  } else {
    return false;
  }
  return true;
}

}  // namespace bench
