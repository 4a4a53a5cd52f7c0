// The liveness of a communicator: the peer monitor thread, which exchanges heartbeats with
// rank 0 (the hub) and notices a rank that dies or goes silent, the record of a lost rank or
// of a failure (fail()), and the checks that report it on the next call.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cstring>

#include "base/log.h"
#include "base/thread_guard.h"
#include "bootstrap/bootstrap.h"

namespace symcomm {

void Bootstrap::check_alive() const {
  if (lost_rank_.load() < 0 && !failed_.load()) return;
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (failed_.load())
      throw Error(failure_code_, failure_ + "; this communicator can only be finalized");
  }
  SYMCOMM_THROW(symcommPeerLost, "%s; this communicator can only be finalized",
                lost_summary().c_str());
}

symcommResult_t Bootstrap::failure(std::string* why) const {
  try {
    check_alive();
  } catch (const Error& e) {
    *why = e.what();
    return e.code();
  }
  return symcommSuccess;
}

std::string Bootstrap::lost_summary() const {
  const int lost = lost_rank_.load();
  if (lost < 0) return "";
  std::lock_guard<std::mutex> lock(lost_mutex_);
  const PeerInfo& p = peers_[static_cast<size_t>(lost)];
  return format("rank %d (pid %d on %s) was lost: %s", lost, p.pid, p.hostname,
                lost_reason_.c_str());
}

void Bootstrap::on_lost(std::function<void()> callback) {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  on_lost_ = std::move(callback);
  if (on_lost_ && broken_) on_lost_();
}

void Bootstrap::fail(symcommResult_t code, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (broken_) {
      // A lost rank or an earlier failure is what the next call reports.
      SYMCOMM_WARN("%s (after the communicator broke)", why.c_str());
      return;
    }
    failure_code_ = code;
    failure_ = why;
    failed_.store(true);
    if (on_lost_) on_lost_();
    broken_ = true;
  }
  SYMCOMM_WARN("%s", why.c_str());
  // Shut, not closed: the monitor may still poll them. The peers read the end of the
  // connection and lose this rank at once, whatever SYMCOMM_PEER_TIMEOUT is.
  for (const Fd& fd : live_)
    if (fd) ::shutdown(fd.get(), SHUT_RDWR);
}

void Bootstrap::note_lost_in_round(int rank, const Error& e) {
  // A connection that closed under a round is its rank gone, whatever the monitor has seen
  // so far (a finalizing rank leaves only after the last round).
  if (!finalizing_.load() && std::string(e.what()).find("connection") != std::string::npos)
    mark_lost(rank, format("its connection closed under a host collective (%s)", e.what()));
}

void Bootstrap::mark_lost(int rank, const std::string& why) {
  int expected = -1;
  if (!lost_rank_.compare_exchange_strong(expected, rank)) return;
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    lost_reason_ = why;
    if (on_lost_ && !broken_) on_lost_();
    broken_ = true;
  }
  SYMCOMM_WARN("rank %d was lost: %s", rank, why.c_str());
  if (rank_ != 0) return;
  char msg[5] = {kPeerLost};
  int32_t r = rank;
  std::memcpy(msg + 1, &r, 4);
  for (int p = 1; p < nranks_; ++p)
    if (p != rank && live_[static_cast<size_t>(p)])
      ::send(live_[static_cast<size_t>(p)].get(), msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Bootstrap::begin_finalize() {
  if (finalizing_.exchange(true) || rank_ == 0 || live_.empty() || !live_[0]) return;
  ::send(live_[0].get(), &kLeaving, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void Bootstrap::start_monitor() {
  if (nranks_ == 1) return;
  int fds[2];
  SYMCOMM_SYSCHECK(::pipe2(fds, O_CLOEXEC));
  wake_read_.reset(fds[0]);
  wake_write_.reset(fds[1]);
  monitor_ = std::thread([this] {
    LogRankScope log_rank(rank_);
    run_guarded([this] { monitor_loop(); }, [this](symcommResult_t code, const std::string& why) {
      fail(code, format("the peer monitor of rank %d failed: %s", rank_, why.c_str()));
    });
  });
}

void Bootstrap::stop_monitor() {
  if (!monitor_.joinable()) return;
  char c = 'x';
  ssize_t n;
  do n = ::write(wake_write_.get(), &c, 1); while (n < 0 && errno == EINTR);
  monitor_.join();
}

void Bootstrap::monitor_loop() {
  const int64_t timeout_ms = peer_timeout_ms_, interval_ms = heartbeat_ms_;
  const auto interval = std::chrono::milliseconds(interval_ms);
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  // Peers this rank watches: all others on the hub, only the hub elsewhere.
  std::vector<int> watched;
  for (int r = 0; r < nranks_; ++r)
    if (r != rank_ && (rank_ == 0 || r == 0)) watched.push_back(r);
  auto sock = [&](int r) { return live_[rank_ == 0 ? static_cast<size_t>(r) : 0].get(); };
  std::vector<Clock::time_point> last_seen(static_cast<size_t>(nranks_), Clock::now());
  std::vector<std::string> pending(static_cast<size_t>(nranks_));
  std::vector<bool> leaving(static_cast<size_t>(nranks_), false);
  auto next_beat = Clock::now();
  while (true) {
    thread_fault_point("peer monitor");
    std::vector<pollfd> fds{{wake_read_.get(), POLLIN, 0}};
    for (int r : watched) fds.push_back({sock(r), POLLIN, 0});
    int rc = ::poll(fds.data(), fds.size(), monitor_wake_ms(interval_ms));
    if (rc < 0 && errno != EINTR) {
      mark_lost(rank_ == 0 ? watched.front() : 0, format("poll failed: %s", strerror(errno)));
      return;
    }
    if (fds[0].revents) return;
    auto now = Clock::now();
    std::vector<int> gone;
    for (size_t i = 1; i < fds.size(); ++i) {
      int r = watched[i - 1];
      if (!fds[i].revents) continue;
      char buf[256];
      ssize_t n = ::recv(fds[i].fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        last_seen[static_cast<size_t>(r)] = now;
        std::string& p = pending[static_cast<size_t>(r)];
        p.append(buf, static_cast<size_t>(n));
        size_t pos = 0;
        while (pos < p.size()) {
          if (p[pos] == kHeartbeat) { ++pos; continue; }
          if (p[pos] == kLeaving) { leaving[static_cast<size_t>(r)] = true; ++pos; continue; }
          if (p[pos] != kPeerLost || p.size() - pos < 5) break;
          int32_t lost;
          std::memcpy(&lost, p.data() + pos + 1, 4);
          if (lost >= 0 && lost < nranks_) mark_lost(lost, "reported lost by rank 0");
          pos += 5;
        }
        p.erase(0, pos);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (!finalizing_.load() && !leaving[static_cast<size_t>(r)])
        mark_lost(r, n == 0 ? "its connection closed (the process exited or was killed)"
                            : format("its connection failed: %s", strerror(errno)));
      gone.push_back(r);
    }
    for (int r : watched)
      if (timeout_ms > 0 && !finalizing_.load() && !leaving[static_cast<size_t>(r)] &&
          now - last_seen[static_cast<size_t>(r)] > timeout) {
        mark_lost(r, format("no heartbeat for %.3g s (SYMCOMM_PEER_TIMEOUT)",
                            timeout_ms / 1000.0));
        gone.push_back(r);
      }
    for (int r : gone) std::erase(watched, r);
    if (now >= next_beat) {
      for (int r : watched) ::send(sock(r), &kHeartbeat, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      next_beat = now + interval;
    }
  }
}

}  // namespace symcomm
