#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "base/param.h"

namespace symcomm {

static const EnumParam kLogLevel("SYMCOMM_LOG_LEVEL", "warn", "error|warn|info|debug|trace",
                                 "verbosity of the messages symcomm writes to stderr");

namespace {
thread_local int t_rank = -1;
const char* kLevelNames[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

int level_from_param() {
  std::string v;
  try {
    v = kLogLevel.get();
  } catch (const Error&) {
    std::fprintf(stderr, "symcomm WARN SYMCOMM_LOG_LEVEL='%s' is not one of %s; using warn\n",
                 kLogLevel.text().c_str(), kLogLevel.choices());
    return static_cast<int>(LogLevel::Warn);
  }
  for (int i = 0; i < 5; ++i)
    if (strcasecmp(v.c_str(), kLevelNames[i]) == 0) return i;
  return static_cast<int>(LogLevel::Warn);
}

int current_level() {
  static const int level = level_from_param();
  return level;
}
}  // namespace

bool log_enabled(LogLevel level) { return static_cast<int>(level) <= current_level(); }

void log_message(LogLevel level, const char* file, int line, const std::string& message) {
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank[16] = "-";
  if (t_rank >= 0) std::snprintf(rank, sizeof rank, "%d", t_rank);
  // One fprintf per line so lines from several threads do not interleave.
  std::fprintf(stderr, "%s:%d:%s symcomm %s %s [%s:%d]\n", host, static_cast<int>(getpid()),
               rank, kLevelNames[static_cast<int>(level)], message.c_str(), base, line);
}

void set_log_rank(int rank) { t_rank = rank; }

LogRankScope::LogRankScope(int rank) : previous_(t_rank) { t_rank = rank; }
LogRankScope::~LogRankScope() { t_rank = previous_; }

}  // namespace symcomm
