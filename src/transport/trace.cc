#include "transport/trace.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/param.h"

namespace symcomm::trace {

namespace {

const BoolParam kTrace("SYMCOMM_TRANSPORT_TRACE", "0",
                       "time the phases of the transports' threads (landings, signals, stream "
                       "jobs) and print their percentiles to stderr at exit");

struct Registry {
  std::mutex mutex;
  std::map<std::string, std::vector<float>> phases;
  std::map<std::string, double> marks;
  ~Registry() {
    for (auto& [name, v] : phases) {
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      auto at = [&](double q) {
        return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
      };
      std::fprintf(stderr,
                   "symcomm trace pid %d: %-28s n %7zu  p50 %9.1f  p90 %9.1f  p99 %9.1f  "
                   "max %9.1f us\n",
                   static_cast<int>(getpid()), name.c_str(), v.size(), at(0.5), at(0.9),
                   at(0.99), v.back());
    }
  }
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

bool enabled() {
  static const bool on = kTrace.get();
  return on;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void add(const char* phase, double us) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.phases[phase].push_back(static_cast<float>(us));
}

void mark(const char* event) {
  if (!enabled()) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.marks[event] = now_us();
}

double since(const char* event) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.marks.find(event);
  if (it == r.marks.end()) return -1;
  const double d = now_us() - it->second;
  r.marks.erase(it);
  return d;
}

}  // namespace symcomm::trace
