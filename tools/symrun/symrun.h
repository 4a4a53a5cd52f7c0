// What the files of symrun share: its constants, Options, the Launcher class (its methods are
// defined in spawn.cc and supervise.cc), and the helpers that main.cc, output.cc and spawn.cc
// define for the other files.
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
// Bytes that may wait in the queue of stdout or stderr before symrun stops reading the ranks'
// pipes (or, once it stops the ranks, drops their output).
constexpr size_t kMaxQueuedOutput = size_t{4} * 1024 * 1024;
// While a queue is full, how often the loop looks whether it has room again.
constexpr int kOutputFullPollMs = 20;
// How long symrun, stopped by a signal or the timeout, still writes out queued output.
constexpr double kFlushAfterStopSeconds = 1;
// Bounds the last read of pipes that processes outside symrun's control may keep writing to.
constexpr int kFinalSweepChunks = 16;
// How long pipes may stay open after SIGKILL (held only by processes that left their group).
constexpr double kDrainAfterKillSeconds = 1;
// How long symrun waits for ranks to be reaped after SIGKILL (a process stuck in the kernel
// may take longer, or forever) before it leaves them and exits.
constexpr double kReapAfterKillSeconds = 5;
// While ranks run, symrun looks for exited ones at least this often, even without SIGCHLD.
constexpr int kReapIntervalMs = 1000;

struct Options {
  int nranks = 0;
  // --nodes / --ranks-per-node: ranks form nodes of this many consecutive ranks, each node
  // named by SYMCOMM_NODE_NAME (0: one node, the caller's SYMCOMM_NODE_NAME left alone).
  int nodes = 0;
  int ranks_per_node = 0;
  std::vector<int> gpus;
  // --netns: node i's ranks join network namespace netns[i] (/run/netns/NAME, as `ip netns
  // add` makes it) before they start; one name a node.
  std::vector<std::string> netns;
  bool keep_going = false;
  double timeout_s = 0;
  std::string timeout_text = "0";
  double grace_s = 5;
  std::string output_dir;  // --output: each rank's stdout and stderr go to files there
  // SYMCOMM_PEER_TIMEOUT: how long ranks that stay stopped once the others have ended are
  // waited for (0: for ever).
  double peer_timeout_s = 10;
  std::string peer_timeout_text = "10";
  // MASTER_ADDR and MASTER_PORT for the ranks, where the caller has not set them ("": keep).
  std::string master_addr;
  std::string master_port;
  char** program_argv = nullptr;  // PROGRAM and ARGS, NULL-terminated (a tail of main's argv)
};

// Defined in main.cc.
bool write_all(int fd, const char* data, size_t len);
bool write_all(int fd, std::string_view text);
std::string errno_string(int err);
void say(std::string_view message);
const char* child_errno_text(int err);
std::string signal_name(int sig);

// Defined in output.cc. From start_output_queues on, say() and the ranks' output are queued
// and written by a thread per sink (a reader that stalls cannot block the event loop).
void start_output_queues();
// Queues `text` for fd (STDOUT_FILENO or STDERR_FILENO), or writes it at once before
// start_output_queues. With may_drop, text that finds the queue full is dropped and counted.
void queue_output(int fd, std::string_view text, bool may_drop);
bool output_full(int fd);
bool output_idle();        // every queue written out (or its sink failed)
bool output_idle(int fd);  // fd's queue (which may be stdout's too: 2>&1)
size_t output_dropped();

// Defined in spawn.cc.
int install_signals();
void raise_fd_limit(int nranks);

// Defined in setup.cc: what symrun settles before it starts the ranks. Each returns "" or
// what went wrong.
std::string read_peer_timeout(Options* opt);  // through libsymcomm's parameter registry
std::string choose_master(Options* opt);      // a free local port, unless the caller set them
std::string make_output_dir(const std::string& dir);
// Opens DIR/rank.N.out and DIR/rank.N.err (close-on-exec) into fds[0] and fds[1].
std::string open_rank_files(const std::string& dir, int rank, int (&fds)[2]);

struct Stream {
  int fd = -1;
  int sink = STDOUT_FILENO;
  std::string pending;  // a partial line
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int stop_signal = 0;  // the signal that stopped it while it stays stopped, else 0
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
  // The signal that made symrun stop the ranks (symrun then dies by it), or 0.
  int fatal_signal() const { return fatal_signal_; }

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
  void stop_leftovers();
  void abandon_unreaped();
  void signal_groups(int sig);
  void check_timers();
  void check_stopped(Clock::time_point now);
  bool read_stream(Rank& rank, Stream& stream);
  void relay(const Rank& rank, Stream& stream, const char* data, size_t len);
  void emit(int sink, const std::string& text);
  void close_stream(Rank& rank, Stream& stream);
  void final_sweep();
  void flush_output();
  void abort_all();

  const Options& opt_;
  int wake_fd_;
  std::vector<Rank> ranks_;
  std::vector<int> netns_fds_;  // --netns: the namespaces, open while ranks are started
  std::vector<char> buffer_ = std::vector<char>(kReadChunk);
  int running_ = 0;
  int open_streams_ = 0;
  int exit_code_ = 0;
  bool failed_ = false;
  bool stopping_ = false;
  bool killed_ = false;
  int fatal_signal_ = 0;
  bool timed_out_ = false;
  // Every rank still running is stopped and another has ended, since stopped_since_.
  bool only_stopped_left_ = false;
  Clock::time_point stopped_since_;
  Clock::time_point timeout_at_;
  Clock::time_point kill_at_;
  Clock::time_point killed_at_;
  Clock::time_point last_reap_;
  Clock::time_point drain_until_;
};

}  // namespace symrun
