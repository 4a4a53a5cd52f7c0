// Point-to-point bootstrap messages (Bootstrap::send_to, recv_from). Each rank keeps one
// connection to each peer it has sent to, made at the first message and kept: messages from
// one rank arrive in the order they were sent. A receiver keeps the connections it accepted
// and reads whichever has a message. Messages that do not present the communicator's token
// are dropped, with their connection, with a warning.
//
// A connection for each message cost a connect and an accept every time: 2 ranks as 2 nodes
// in the host space, where every collective's agreement check goes this way
// (SYMCOMM_COLL_CHECK), took 116-156 us a barrier on the 2-core CPU machine, 30-85 us with
// kept connections and the spin (bench/results/cpu/host_small_nodes2_f2d8abe.txt).
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "base/log.h"
#include "bootstrap/bootstrap.h"

namespace symcomm {

namespace {

constexpr int kSliceMs = 100;  // a wait's longest sleep between looks at the monitor
constexpr auto kSpin = std::chrono::microseconds(200);

}  // namespace

void Bootstrap::send_to(int peer, uint64_t tag, const std::string& payload) {
  SYMCOMM_REQUIRE(peer >= 0 && peer < nranks_, symcommInternalError,
                  "bootstrap message to rank %d of %d", peer, nranks_);
  // The receiver refuses more (a header's size is all it has to go by): fail here, clearly.
  SYMCOMM_REQUIRE(payload.size() <= kMaxUnexpectedBytes, symcommInternalError,
                  "bootstrap message %llu to rank %d has %s, more than the %s a message may carry",
                  static_cast<unsigned long long>(tag), peer, format_bytes(payload.size()).c_str(),
                  format_bytes(kMaxUnexpectedBytes).c_str());
  check_alive();
  if (peer == rank_) {
    std::lock_guard<std::mutex> lock(p2p_mutex_);
    p2p_kept_[{rank_, tag}].push_back(payload);
    return;
  }
  const Deadline deadline = Deadline::after_ms(bootstrap_timeout_ms());
  const std::string what = format("sending bootstrap message %llu to rank %d",
                                  static_cast<unsigned long long>(tag), peer);
  P2pHeader h{kP2pMagic, rank_, {}, comm_id_, tag, payload.size()};
  std::memcpy(h.token, token_.data(), sizeof h.token);
  std::lock_guard<std::mutex> lock(p2p_send_mutex_);
  if (p2p_out_.empty()) p2p_out_.resize(static_cast<size_t>(nranks_));
  Fd& c = p2p_out_[static_cast<size_t>(peer)];
  // A kept connection that broke (reset by the peer's side) is made again, once; a rank
  // the monitor saw die is not retried.
  for (int attempt = 0;; ++attempt) {
    if (!c) c = tcp_connect(peers_[static_cast<size_t>(peer)].p2p, deadline, abort_check(),
                            what.c_str());
    try {
      send_all(c.get(), &h, sizeof h, deadline, abort_check(), what.c_str());
      if (!payload.empty())
        send_all(c.get(), payload.data(), payload.size(), deadline, abort_check(), what.c_str());
      return;
    } catch (const Error& e) {
      c.reset();
      if (e.code() != symcommPeerLost || attempt > 0 || lost_rank_.load() >= 0) throw;
    }
  }
}

std::string Bootstrap::recv_from(int from, uint64_t tag) { return *receive(from, tag, true); }

std::optional<std::string> Bootstrap::try_recv_from(int from, uint64_t tag) {
  return receive(from, tag, false);
}

bool Bootstrap::read_message(const Fd& c, const Deadline& deadline) {
  // A connection closed between messages: the sender is gone or finalized; nothing lost.
  char first;
  const ssize_t n = ::recv(c.get(), &first, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  if (n < 0) return true;  // nothing yet after all: keep the connection
  P2pHeader h{};
  std::string payload;
  bool too_large = false;
  try {
    // The sender writes a whole message at once: a short bound.
    Deadline d = Deadline::after_ms(std::min<int64_t>(5000, deadline.remaining_ms(5000)));
    recv_all(c.get(), &h, sizeof h, d, abort_check(), "reading a bootstrap message");
    if (h.magic != kP2pMagic || !same_token(h.token, token_) || h.comm_id != comm_id_ ||
        h.from < 0 || h.from >= nranks_) {
      SYMCOMM_WARN("rank %d dropped a connection without this communicator's token", rank_);
      return false;
    }
    // Checked before allocating: a header may announce any size.
    too_large = h.bytes > kMaxUnexpectedBytes;
    if (!too_large) {
      payload.resize(h.bytes);
      if (h.bytes) recv_all(c.get(), payload.data(), payload.size(), d, abort_check(),
                            "reading a bootstrap message");
    }
  } catch (const Error& e) {
    if (e.code() == symcommPeerLost && lost_rank_.load() >= 0) throw;
    SYMCOMM_WARN("rank %d dropped a bootstrap message that did not arrive whole: %s", rank_,
                 e.what());
    return false;
  }
  // From a holder of the token, unlike the connections dropped above: a member that breaks
  // the protocol, whose messages (perhaps the one awaited) cannot be trusted to come.
  SYMCOMM_REQUIRE(!too_large, symcommSystemError,
                  "protocol error: rank %d announced bootstrap message %llu of %s, more than "
                  "the %s a message may carry (a corrupt stream, or a process that is not "
                  "this symcomm holding the token)", h.from,
                  static_cast<unsigned long long>(h.tag), format_bytes(h.bytes).c_str(),
                  format_bytes(kMaxUnexpectedBytes).c_str());
  p2p_kept_[{h.from, h.tag}].push_back(std::move(payload));
  return true;
}

std::optional<std::string> Bootstrap::receive(int from, uint64_t tag, bool wait) {
  SYMCOMM_REQUIRE(from >= 0 && from < nranks_, symcommInternalError,
                  "bootstrap message from rank %d of %d", from, nranks_);
  const Deadline deadline = Deadline::after_ms(bootstrap_timeout_ms());
  const std::string what = format("waiting for bootstrap message %llu from rank %d "
                                  "(SYMCOMM_BOOTSTRAP_TIMEOUT)",
                                  static_cast<unsigned long long>(tag), from);
  std::lock_guard<std::mutex> lock(p2p_mutex_);
  std::vector<pollfd> fds;
  while (true) {
    auto kept = p2p_kept_.find({from, tag});
    if (kept != p2p_kept_.end()) {
      std::string payload = std::move(kept->second.front());
      kept->second.pop_front();
      if (kept->second.empty()) p2p_kept_.erase(kept);
      return payload;
    }
    check_alive();
    // The listener (a sender's first message) and every connection accepted so far.
    fds.assign(1, pollfd{p2p_listener_.get(), POLLIN, 0});
    for (const Fd& c : p2p_in_) fds.push_back(pollfd{c.get(), POLLIN, 0});
    int ready = ::poll(fds.data(), fds.size(), 0);
    // A short spin before sleeping: an answer within a collective's round usually comes in
    // microseconds, and a sleeping thread wakes late where other threads hold the cores.
    for (const auto until = std::chrono::steady_clock::now() + kSpin;
         wait && ready == 0 && std::chrono::steady_clock::now() < until;) {
      std::this_thread::yield();
      ready = ::poll(fds.data(), fds.size(), 0);
    }
    if (wait && ready == 0) ready = ::poll(fds.data(), fds.size(), deadline.remaining_ms(kSliceMs));
    if (ready < 0 && errno != EINTR) throw_system_error(__FILE__, __LINE__, "poll", errno);
    if (ready <= 0) {
      if (!wait) return std::nullopt;  // only what has arrived
      if (deadline.expired()) SYMCOMM_THROW(symcommTimeout, "timed out %s", what.c_str());
      continue;
    }
    // Messages first, in connection order; then a new connection (read at the next look).
    for (size_t i = fds.size() - 1; i >= 1; --i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (!read_message(p2p_in_[i - 1], deadline)) p2p_in_.erase(p2p_in_.begin() + (i - 1));
    }
    if (fds[0].revents & POLLIN)
      p2p_in_.push_back(accept_before(p2p_listener_.get(), deadline, abort_check(),
                                      what.c_str()));
  }
}

}  // namespace symcomm
