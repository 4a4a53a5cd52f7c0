// One measured point as a JSON Lines record of BENCH_FORMAT.md (bench, op, impl, dtype,
// bytes, shape, ranks, time_us, bandwidths, tflops, iters, warmup, machine, commit, date).
// Header-only and free of CUDA, NCCL and symcomm, so that the examples (symcomm-fft3d) write
// the same records as symcomm-bench without linking it.
#pragma once

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace bench {

// One measured point. time_us is the median over repetitions; a negative bandwidth or
// tflops is left out of the record.
struct Record {
  std::string bench = "rma";
  std::string op, impl, dtype = "bytes", shape;
  size_t bytes = 0;
  int ranks = 0;
  double time_us = 0, algbw_gbs = -1, busbw_gbs = -1, tflops = -1;
  int iters = 0, warmup = 0;
  std::vector<std::pair<std::string, std::string>> extra;  // more fields: name, JSON value
};

inline std::string utc_now() {
  const time_t now = time(nullptr);
  struct tm t;
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &t));
  return buf;
}

// The record's `machine` where none is given: "host" without a GPU (device_name null), else
// the GPU model and the rank count, "h200x8" for "NVIDIA H200" on 8 ranks (the first word
// with a digit, lower case, up to a '-').
inline std::string machine_name(const char* device_name, int ranks) {
  if (!device_name) return "host";
  std::string model, word;
  for (const char* p = device_name;; ++p) {
    if (*p && *p != ' ') {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(*p)));
      continue;
    }
    if (model.empty() && word.find_first_of("0123456789") != std::string::npos) model = word;
    word.clear();
    if (!*p) break;
  }
  model = model.substr(0, model.find('-'));
  return (model.empty() ? "gpu" : model) + "x" + std::to_string(ranks);
}

// Appends r to the file `path` as one line, with machine, commit (SYMCOMM_BENCH_COMMIT, else
// "unknown") and the UTC date. False if the file cannot be opened or written.
inline bool append_record(const std::string& path, const std::string& machine, const Record& r) {
  FILE* f = std::fopen(path.c_str(), "a");
  if (!f) return false;
  std::fprintf(f, "{\"bench\": \"%s\", \"op\": \"%s\", \"impl\": \"%s\", \"dtype\": \"%s\", "
               "\"bytes\": %zu, \"ranks\": %d, \"time_us\": %.3f", r.bench.c_str(), r.op.c_str(),
               r.impl.c_str(), r.dtype.c_str(), r.bytes, r.ranks, r.time_us);
  if (r.algbw_gbs >= 0) std::fprintf(f, ", \"algbw_gbs\": %.2f", r.algbw_gbs);
  if (r.busbw_gbs >= 0) std::fprintf(f, ", \"busbw_gbs\": %.2f", r.busbw_gbs);
  if (r.tflops >= 0) std::fprintf(f, ", \"tflops\": %.4f", r.tflops);
  if (!r.shape.empty()) std::fprintf(f, ", \"shape\": \"%s\"", r.shape.c_str());
  for (const auto& [name, value] : r.extra)
    std::fprintf(f, ", \"%s\": %s", name.c_str(), value.c_str());
  const char* commit = std::getenv("SYMCOMM_BENCH_COMMIT");
  std::fprintf(f, ", \"iters\": %d, \"warmup\": %d, \"machine\": \"%s\", \"commit\": \"%s\", "
               "\"date\": \"%s\"}\n", r.iters, r.warmup, machine.c_str(),
               commit && *commit ? commit : "unknown", utc_now().c_str());
  const bool written = !std::ferror(f);
  return std::fclose(f) == 0 && written;
}

}  // namespace bench
