// symrun: the Launcher once the ranks run. The event loop, reaping the ranks and the exit code,
// symrun's signals, the timeout and the stop (SIGTERM, then SIGKILL after the grace period),
// and relaying the ranks' output line by line with a "[rank] " prefix.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "symrun.h"

namespace symrun {
namespace {

// ---------------------------------------------------------------------------------------------
// The launcher
// ---------------------------------------------------------------------------------------------

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

int Launcher::run(const std::string& uid) {
  timeout_at_ = Clock::now() + seconds(opt_.timeout_s);
  drain_until_ = Clock::now();
  try {
    spawn_all(uid);
    loop();
    final_sweep();
  } catch (...) {
    // Never leave ranks behind, whatever went wrong here.
    abort_all();
    throw;
  }
  return exit_code_;
}

bool Launcher::finished() const {
  if (running_ > 0) return false;
  if (open_streams_ == 0) return true;
  // While stopping, what holds the pipes belongs to the ranks' groups: SIGKILL will end it.
  if (stopping_ && !killed_) return false;
  return Clock::now() >= drain_until_;
}

int Launcher::poll_timeout_ms() const {
  std::vector<Clock::time_point> deadlines;
  if (!stopping_ && opt_.timeout_s > 0) deadlines.push_back(timeout_at_);
  if (stopping_ && !killed_) deadlines.push_back(kill_at_);
  if (running_ == 0 && (!stopping_ || killed_)) deadlines.push_back(drain_until_);
  if (deadlines.empty()) return -1;
  auto left = *std::min_element(deadlines.begin(), deadlines.end()) - Clock::now();
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::clamp<long long>(ms, 0, 60000));
}

void Launcher::loop() {
  std::vector<pollfd> fds;
  std::vector<std::pair<Rank*, Stream*>> owners;
  while (!finished()) {
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    owners.assign(1, {nullptr, nullptr});
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0) continue;
        fds.push_back(pollfd{stream->fd, POLLIN, 0});
        owners.emplace_back(&rank, stream);
      }
    }
    if (poll(fds.data(), fds.size(), poll_timeout_ms()) < 0) {
      if (errno == EINTR) continue;
      say("poll: " + errno_string(errno));
      abort_all();
      exit_code_ = 1;
      return;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents != 0) read_stream(*owners[i].first, *owners[i].second);
    }
    if (fds[0].revents != 0) handle_wake_pipe();
    check_timers();
  }
}

void Launcher::handle_wake_pipe() {
  unsigned char bytes[256];
  bool child_exited = false;
  for (;;) {
    ssize_t n = read(wake_fd_, bytes, sizeof bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      say("cannot read the signal pipe: " + errno_string(n < 0 ? errno : EPIPE));
      break;
    }
    for (ssize_t i = 0; i < n; ++i) {
      if (bytes[i] == SIGCHLD) {
        child_exited = true;
      } else {
        on_signal(bytes[i]);
      }
    }
  }
  if (child_exited) reap();
}

void Launcher::on_signal(int sig) {
  if (stopping_) {
    signal_groups(sig);
    return;
  }
  begin_stop(sig, 128 + sig);
}

void Launcher::reap() {
  int was_running = running_;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& rank = ranks_[i];
    if (!rank.running) continue;
    int status = 0;
    pid_t pid = waitpid(rank.pid, &status, WNOHANG);
    if (pid == 0) continue;
    if (pid < 0) {
      say("cannot wait for rank " + std::to_string(i) + ": " + errno_string(errno));
      status = 1 << 8;  // as if it exited with code 1
    }
    rank.running = false;
    --running_;
    on_rank_end(static_cast<int>(i), status);
  }
  if (was_running > 0 && running_ == 0) drain_until_ = Clock::now() + seconds(opt_.grace_s);
}

// Ranks that end once symrun is stopping them are not reported: their ends are expected.
void Launcher::on_rank_end(int rank, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (stopping_) return;
  std::string what = "rank " + std::to_string(rank);
  int code = 1;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    what += " exited with code " + std::to_string(code);
  } else if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    code = 128 + sig;
    what += " was killed by signal " + std::to_string(sig) + " (" + signal_name(sig) + ")";
  }
  say(what);
  if (!failed_) {
    failed_ = true;
    exit_code_ = code;
  }
  if (!opt_.keep_going) begin_stop(SIGTERM, code);
}

// The event that starts the stop (a failure, a signal, the timeout) decides the exit code, even
// over an earlier failure under --keep-going.
void Launcher::begin_stop(int sig, int exit_code) {
  if (stopping_) return;
  stopping_ = true;
  exit_code_ = exit_code;
  kill_at_ = Clock::now() + seconds(opt_.grace_s);
  signal_groups(sig);
}

void Launcher::signal_groups(int sig) {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    const Rank& rank = ranks_[i];
    if (rank.pid < 0 || !rank.group_may_live()) continue;
    if (kill(-rank.pid, sig) != 0 && errno != ESRCH) {
      say("cannot signal rank " + std::to_string(i) + ": " + errno_string(errno));
    }
  }
}

void Launcher::check_timers() {
  Clock::time_point now = Clock::now();
  if (!stopping_ && opt_.timeout_s > 0 && running_ > 0 && now >= timeout_at_) {
    say("timeout after " + opt_.timeout_text + " s, stopping " + std::to_string(running_) +
        " rank(s)");
    begin_stop(SIGTERM, kTimeoutExit);
  }
  if (stopping_ && !killed_ && now >= kill_at_) {
    killed_ = true;
    signal_groups(SIGKILL);
    drain_until_ = std::max(drain_until_, now + seconds(kDrainAfterKillSeconds));
  }
}

// Returns false when the stream has nothing more to read now (would block, or closed).
bool Launcher::read_stream(Rank& rank, Stream& stream) {
  ssize_t n = read(stream.fd, buffer_.data(), buffer_.size());
  if (n > 0) {
    relay(rank, stream, buffer_.data(), static_cast<size_t>(n));
    return true;
  }
  if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  if (n < 0) say("cannot read the output of a rank: " + errno_string(errno));
  close_stream(rank, stream);
  return false;
}

void Launcher::relay(const Rank& rank, Stream& stream, const char* data, size_t len) {
  std::string text;
  size_t start = 0;
  while (start < len) {
    const void* newline = memchr(data + start, '\n', len - start);
    if (newline == nullptr) break;
    size_t end = static_cast<size_t>(static_cast<const char*>(newline) - data) + 1;
    text += rank.prefix;
    text += stream.pending;
    text.append(data + start, end - start);
    stream.pending.clear();
    start = end;
  }
  stream.pending.append(data + start, len - start);
  if (stream.pending.size() > kMaxLine) {
    text += rank.prefix + stream.pending + "\n";
    stream.pending.clear();
  }
  emit(stream.sink, text);
}

void Launcher::emit(int sink, const std::string& text) {
  if (text.empty() || sink_broken_[sink]) return;
  if (write_all(sink, text)) return;
  // Keep the ranks running and their pipes drained; only the copying stops.
  sink_broken_[sink] = true;
  if (sink != STDERR_FILENO) say("cannot write to stdout: " + errno_string(errno));
}

void Launcher::close_stream(Rank& rank, Stream& stream) {
  if (!stream.pending.empty()) {
    emit(stream.sink, rank.prefix + stream.pending + "\n");
    stream.pending.clear();
  }
  if (close(stream.fd) != 0) say("cannot close a pipe: " + errno_string(errno));
  stream.fd = -1;
  --open_streams_;
}

// Copies what is already in the pipes that outlived the drain period (processes that escaped
// the ranks' groups may hold them), then closes them.
void Launcher::final_sweep() {
  for (Rank& rank : ranks_) {
    for (Stream* stream : {&rank.out, &rank.err}) {
      for (int i = 0; i < kFinalSweepChunks && stream->fd >= 0; ++i) {
        if (!read_stream(rank, *stream)) break;
      }
      if (stream->fd >= 0) close_stream(rank, *stream);
    }
  }
}

// Last resort: must not allocate, as it also runs when memory has run out.
void Launcher::abort_all() {
  for (Rank& rank : ranks_) {
    if (!rank.running) continue;
    if (kill(-rank.pid, SIGKILL) != 0 && errno != ESRCH) continue;
    int status = 0;
    while (waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
    }
    rank.running = false;
    --running_;
  }
}

}  // namespace symrun
