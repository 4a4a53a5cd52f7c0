// What the files of symrun share: its constants, Options, the Launcher class (its methods are
// defined in spawn.cc and supervise.cc), and the helpers that main.cc and spawn.cc define for
// the other files.
#pragma once

#include <stddef.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace symrun {

using Clock = std::chrono::steady_clock;

constexpr int kMaxRanks = 1024;
constexpr int kUsageExit = 2;
constexpr int kExecFailedExit = 127;
constexpr int kTimeoutExit = 124;
constexpr double kMaxSeconds = 1e8;
constexpr size_t kReadChunk = size_t{64} * 1024;
// Longer lines are cut so that one rank that never writes a newline cannot exhaust memory.
constexpr size_t kMaxLine = size_t{1024} * 1024;
// Bounds the last read of pipes that processes outside symrun's control may keep writing to.
constexpr int kFinalSweepChunks = 16;
// How long pipes may stay open after SIGKILL (held only by processes that left their group).
constexpr double kDrainAfterKillSeconds = 1;

struct Options {
  int nranks = 0;
  std::vector<int> gpus;
  bool keep_going = false;
  double timeout_s = 0;
  std::string timeout_text = "0";
  double grace_s = 5;
  char** program_argv = nullptr;  // PROGRAM and ARGS, NULL-terminated (a tail of main's argv)
};

// Defined in main.cc.
bool write_all(int fd, const char* data, size_t len);
bool write_all(int fd, std::string_view text);
std::string errno_string(int err);
void say(std::string_view message);
const char* child_errno_text(int err);
std::string signal_name(int sig);

// Defined in spawn.cc.
int install_signals();
void raise_fd_limit(int nranks);

struct Stream {
  int fd = -1;
  int sink = STDOUT_FILENO;
  std::string pending;  // a partial line
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  std::string prefix;
  Stream out;
  Stream err;

  // An exited rank's group lives on while a member (a background child) holds its pipes.
  bool group_may_live() const { return running || out.fd >= 0 || err.fd >= 0; }
};

class Launcher {
 public:
  Launcher(const Options& opt, int wake_fd) : opt_(opt), wake_fd_(wake_fd) {}
  int run(const std::string& uid);

 private:
  void spawn_all(const std::string& uid);
  std::string spawn(int rank, const std::string& uid, const std::vector<std::string>& inherited,
                    int null_fd);
  void loop();
  bool finished() const;
  int poll_timeout_ms() const;
  void handle_wake_pipe();
  void on_signal(int sig);
  void reap();
  void on_rank_end(int rank, int status);
  void begin_stop(int sig, int exit_code);
  void signal_groups(int sig);
  void check_timers();
  bool read_stream(Rank& rank, Stream& stream);
  void relay(const Rank& rank, Stream& stream, const char* data, size_t len);
  void emit(int sink, const std::string& text);
  void close_stream(Rank& rank, Stream& stream);
  void final_sweep();
  void abort_all();

  const Options& opt_;
  int wake_fd_;
  std::vector<Rank> ranks_;
  std::vector<char> buffer_ = std::vector<char>(kReadChunk);
  int running_ = 0;
  int open_streams_ = 0;
  int exit_code_ = 0;
  bool failed_ = false;
  bool stopping_ = false;
  bool killed_ = false;
  bool sink_broken_[3] = {};
  Clock::time_point timeout_at_;
  Clock::time_point kill_at_;
  Clock::time_point drain_until_;
};

}  // namespace symrun
