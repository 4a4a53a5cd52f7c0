// Point-to-point bootstrap messages (Bootstrap::send_to, recv_from): each message is one
// connection from the sender to the receiver's p2p listener, opened, written and closed.
// Connections that do not present the communicator's token are dropped with a warning.
#include <poll.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "bootstrap/bootstrap.h"

namespace symcomm {

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
  Fd c = tcp_connect(peers_[static_cast<size_t>(peer)].p2p, deadline, abort_check(),
                     what.c_str());
  P2pHeader h{kP2pMagic, rank_, {}, comm_id_, tag, payload.size()};
  std::memcpy(h.token, token_.data(), sizeof h.token);
  send_all(c.get(), &h, sizeof h, deadline, abort_check(), what.c_str());
  if (!payload.empty())
    send_all(c.get(), payload.data(), payload.size(), deadline, abort_check(), what.c_str());
}

std::string Bootstrap::recv_from(int from, uint64_t tag) { return *receive(from, tag, true); }

std::optional<std::string> Bootstrap::try_recv_from(int from, uint64_t tag) {
  return receive(from, tag, false);
}

std::optional<std::string> Bootstrap::receive(int from, uint64_t tag, bool wait) {
  SYMCOMM_REQUIRE(from >= 0 && from < nranks_, symcommInternalError,
                  "bootstrap message from rank %d of %d", from, nranks_);
  const Deadline deadline = Deadline::after_ms(bootstrap_timeout_ms());
  const std::string what = format("waiting for bootstrap message %llu from rank %d "
                                  "(SYMCOMM_BOOTSTRAP_TIMEOUT)",
                                  static_cast<unsigned long long>(tag), from);
  std::lock_guard<std::mutex> lock(p2p_mutex_);
  while (true) {
    auto kept = p2p_kept_.find({from, tag});
    if (kept != p2p_kept_.end()) {
      std::string payload = std::move(kept->second.front());
      kept->second.pop_front();
      if (kept->second.empty()) p2p_kept_.erase(kept);
      return payload;
    }
    check_alive();
    if (!wait) {  // only what has arrived: a sender connects, then writes at once
      pollfd p{p2p_listener_.get(), POLLIN, 0};
      if (::poll(&p, 1, 0) != 1) return std::nullopt;
    }
    Fd c = accept_before(p2p_listener_.get(), deadline, abort_check(), what.c_str());
    P2pHeader h{};
    std::string payload;
    bool too_large = false;
    try {
      // The sender writes the whole message as soon as it is connected: a short bound.
      Deadline d = Deadline::after_ms(std::min<int64_t>(5000, deadline.remaining_ms(5000)));
      recv_all(c.get(), &h, sizeof h, d, abort_check(), "reading a bootstrap message");
      if (h.magic != kP2pMagic || !same_token(h.token, token_) || h.comm_id != comm_id_ ||
          h.from < 0 || h.from >= nranks_) {
        SYMCOMM_WARN("rank %d dropped a connection without this communicator's token", rank_);
        continue;
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
      continue;
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
  }
}

}  // namespace symcomm
