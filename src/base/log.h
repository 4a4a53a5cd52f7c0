// Logging to stderr (never stdout), filtered by SYMCOMM_LOG_LEVEL. Each line reads
//   host:pid:rank symcomm WARN message [file.cc:123]
// where rank is the rank of the communicator the calling thread last worked for: every entry
// point that takes a communicator sets it, and symcomm's own threads set theirs ('-' before
// any).
#pragma once

#include <string>

#include "base/error.h"

namespace symcomm {

enum class LogLevel { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };

bool log_enabled(LogLevel level);
void log_message(LogLevel level, const char* file, int line, const std::string& message);

// The rank shown in this thread's log lines from now on.
void set_log_rank(int rank);

// The rank shown in this thread's log lines while the scope lives.
class LogRankScope {
 public:
  explicit LogRankScope(int rank);
  ~LogRankScope();

 private:
  int previous_;
};

}  // namespace symcomm

#define SYMCOMM_LOG(level, ...)                                                   \
  do {                                                                            \
    if (::symcomm::log_enabled(level))                                            \
      ::symcomm::log_message(level, __FILE__, __LINE__, ::symcomm::format(__VA_ARGS__)); \
  } while (0)
#define SYMCOMM_WARN(...) SYMCOMM_LOG(::symcomm::LogLevel::Warn, __VA_ARGS__)
#define SYMCOMM_INFO(...) SYMCOMM_LOG(::symcomm::LogLevel::Info, __VA_ARGS__)
#define SYMCOMM_DEBUG(...) SYMCOMM_LOG(::symcomm::LogLevel::Debug, __VA_ARGS__)
#define SYMCOMM_TRACE(...) SYMCOMM_LOG(::symcomm::LogLevel::Trace, __VA_ARGS__)
