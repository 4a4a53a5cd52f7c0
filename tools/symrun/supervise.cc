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
  start_output_queues();
  try {
    spawn_all(uid);
    loop();
    final_sweep();
    flush_output();
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
  // Pipes still open once the ranks have ended are held by processes of their groups (or
  // that left them): they get the drain period, then SIGTERM and SIGKILL (check_timers), and
  // then kDrainAfterKillSeconds.
  return killed_ && Clock::now() >= drain_until_;
}

int Launcher::poll_timeout_ms() const {
  std::vector<Clock::time_point> deadlines;
  if (running_ > 0 && !stopping_ && opt_.timeout_s > 0) deadlines.push_back(timeout_at_);
  if (stopping_ && !killed_) deadlines.push_back(kill_at_);
  if (killed_ && running_ > 0) deadlines.push_back(killed_at_ + seconds(kReapAfterKillSeconds));
  if (only_stopped_left_ && !stopping_) {
    deadlines.push_back(stopped_since_ + seconds(opt_.peer_timeout_s));
  }
  if (running_ == 0 && (!stopping_ || killed_)) deadlines.push_back(drain_until_);
  // SIGCHLD wakes the loop when a rank ends; polling for exits too means that a lost or
  // blocked SIGCHLD can delay noticing an exit by a second, never forever.
  if (running_ > 0) deadlines.push_back(Clock::now() + std::chrono::milliseconds(kReapIntervalMs));
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
    // A rank whose sink's queue is full is not read (it blocks, as on a full pipe) until the
    // queue has room, except while stopping, when what does not fit is dropped.
    bool full[3] = {false, !stopping_ && output_full(STDOUT_FILENO),
                    !stopping_ && output_full(STDERR_FILENO)};
    for (Rank& rank : ranks_) {
      for (Stream* stream : {&rank.out, &rank.err}) {
        if (stream->fd < 0 || full[stream->sink]) continue;
        fds.push_back(pollfd{stream->fd, POLLIN, 0});
        owners.emplace_back(&rank, stream);
      }
    }
    int timeout_ms = poll_timeout_ms();
    if (full[STDOUT_FILENO] || full[STDERR_FILENO]) {
      timeout_ms = timeout_ms < 0 ? kOutputFullPollMs : std::min(timeout_ms, kOutputFullPollMs);
      // Pipes left unread are not held open by anyone yet: the drain starts once read.
      if (running_ == 0) drain_until_ = std::max(drain_until_, Clock::now() + seconds(opt_.grace_s));
    }
    int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready < 0) {
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
    // Not only on SIGCHLD (which a caller may have blocked or which may be lost): on every
    // timeout, at most every kReapIntervalMs (a full output queue makes short timeouts).
    if (ready == 0 && Clock::now() >= last_reap_ + std::chrono::milliseconds(kReapIntervalMs)) {
      reap();
    }
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
  fatal_signal_ = sig;
}

void Launcher::reap() {
  last_reap_ = Clock::now();
  int was_running = running_;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& rank = ranks_[i];
    if (!rank.running) continue;
    int status = 0;
    // Stops and continues are noted (check_stopped); an end after them is read at once.
    pid_t pid;
    while ((pid = waitpid(rank.pid, &status, WNOHANG | WUNTRACED | WCONTINUED)) > 0 &&
           (WIFSTOPPED(status) || WIFCONTINUED(status))) {
      rank.stop_signal = WIFSTOPPED(status) ? WSTOPSIG(status) : 0;
    }
    if (pid == 0) continue;
    if (pid < 0) {
      say("cannot wait for rank " + std::to_string(i) + ": " + errno_string(errno));
      status = 1 << 8;  // as if it exited with code 1
    }
    rank.running = false;
    --running_;
    on_rank_end(static_cast<int>(i), status);
  }
  if (was_running > 0 && running_ == 0) {
    // After SIGKILL, what still holds the pipes has left the ranks' groups: a short drain.
    drain_until_ = killed_ ? std::max(drain_until_, Clock::now() + seconds(kDrainAfterKillSeconds))
                           : Clock::now() + seconds(opt_.grace_s);
  }
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

// Every rank has ended, but after the drain period processes of their groups (background
// children) still hold the pipes: they are stopped like ranks (SIGTERM, SIGKILL after the grace
// period), without changing the exit code.
void Launcher::stop_leftovers() {
  int groups = 0;
  for (const Rank& rank : ranks_) {
    if (rank.pid >= 0 && rank.group_may_live()) ++groups;
  }
  say("the ranks have ended, but " + std::to_string(groups) +
      " of their process groups still hold their output open: stopping them");
  stopping_ = true;
  kill_at_ = Clock::now() + seconds(opt_.grace_s);
  signal_groups(SIGTERM);
}

// Ranks that SIGKILL has not ended within kReapAfterKillSeconds (stuck in the kernel) are
// left behind rather than waited for forever.
void Launcher::abandon_unreaped() {
  reap();
  for (size_t i = 0; i < ranks_.size(); ++i) {
    Rank& rank = ranks_[i];
    if (!rank.running) continue;
    say("rank " + std::to_string(i) + " (pid " + std::to_string(rank.pid) + ") has not ended " +
        std::to_string(static_cast<int>(kReapAfterKillSeconds)) +
        " s after SIGKILL; leaving it behind");
    rank.running = false;
    --running_;
  }
  drain_until_ = std::min(drain_until_, Clock::now());
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

// Once every other rank has ended, ranks that stay stopped (by SIGSTOP or another stop
// signal) would keep symrun waiting for ever without --timeout. The peer timeout bounds that
// wait as it bounds the other ranks' wait for them: they are killed, each named.
void Launcher::check_stopped(Clock::time_point now) {
  bool only_stopped = !stopping_ && opt_.peer_timeout_s > 0 && running_ > 0 &&
                      running_ < static_cast<int>(ranks_.size());
  for (const Rank& rank : ranks_) {
    if (rank.running && rank.stop_signal == 0) only_stopped = false;
  }
  if (!only_stopped) {
    only_stopped_left_ = false;
    return;
  }
  if (!only_stopped_left_) {
    only_stopped_left_ = true;
    stopped_since_ = now;
  }
  if (now < stopped_since_ + seconds(opt_.peer_timeout_s)) return;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!ranks_[i].running) continue;
    say("rank " + std::to_string(i) + " is stopped (" + signal_name(ranks_[i].stop_signal) +
        ") and the other ranks have ended: killing it after " + opt_.peer_timeout_text +
        " s (SYMCOMM_PEER_TIMEOUT)");
  }
  begin_stop(SIGKILL, 128 + SIGKILL);
}

void Launcher::check_timers() {
  Clock::time_point now = Clock::now();
  check_stopped(now);
  if (!stopping_ && opt_.timeout_s > 0 && running_ > 0 && now >= timeout_at_) {
    say("timeout after " + opt_.timeout_text + " s, stopping " + std::to_string(running_) +
        " rank(s)");
    begin_stop(SIGTERM, kTimeoutExit);
    timed_out_ = true;
  }
  if (!stopping_ && running_ == 0 && open_streams_ > 0 && now >= drain_until_) stop_leftovers();
  if (stopping_ && !killed_ && now >= kill_at_) {
    killed_ = true;
    killed_at_ = now;
    signal_groups(SIGKILL);
    drain_until_ = std::max(drain_until_, now + seconds(kDrainAfterKillSeconds));
  }
  if (killed_ && running_ > 0 && now >= killed_at_ + seconds(kReapAfterKillSeconds)) {
    abandon_unreaped();
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
  queue_output(sink, text, stopping_);
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

// Waits until the queued output is written: for as long as it takes after a normal end (a
// slow reader gets everything), but within --timeout (or kFlushAfterStopSeconds, if longer),
// at most kFlushAfterStopSeconds once symrun stopped the ranks for a signal or the timeout,
// and no longer once a signal arrives.
void Launcher::flush_output() {
  Clock::time_point until = Clock::now() + seconds(kFlushAfterStopSeconds);
  if (fatal_signal_ == 0 && !timed_out_) {
    until = opt_.timeout_s > 0 ? std::max(until, timeout_at_) : Clock::time_point::max();
  }
  unsigned char bytes[256];
  while (!output_idle()) {
    Clock::time_point now = Clock::now();
    if (now >= until) break;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd p{wake_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::clamp<long long>(left, 0, 100))) <= 0) continue;
    ssize_t n = read(wake_fd_, bytes, sizeof bytes);
    for (ssize_t i = 0; i < n; ++i) {
      if (bytes[i] == SIGCHLD || fatal_signal_ != 0) continue;
      // The ranks have ended: symrun ends now, by that signal.
      fatal_signal_ = bytes[i];
      exit_code_ = 128 + bytes[i];
      until = Clock::now();
    }
  }
  if (output_idle()) {
    size_t dropped = output_dropped();
    if (dropped > 0) {
      say("dropped " + std::to_string(dropped) +
          " bytes of the ranks' output that arrived while stopping them (stdout or stderr was "
          "not read fast enough)");
    }
    return;
  }
  if (fatal_signal_ != 0) return;
  if (timed_out_) {
    say("stdout or stderr is not read: the ranks' output still queued is dropped");
  } else {
    if (exit_code_ == 0) exit_code_ = kTimeoutExit;
    say("timeout after " + opt_.timeout_text +
        " s while writing the ranks' output (stdout or stderr is not read): the rest is "
        "dropped");
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
