#include "memory/fd_exchange.h"

#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

namespace symcomm {

namespace {
struct Header {
  uint64_t comm_id;
  uint64_t tag;
  int32_t rank;
};
}  // namespace

FdExchange::FdExchange(const Bootstrap& bootstrap, const Topology& topology)
    : bootstrap_(bootstrap), topology_(topology),
      listener_(unix_listen(name_of(topology.rank), SOMAXCONN)) {}

std::string FdExchange::name_of(int rank) const {
  return format("symcomm-%u-%016llx-%d", geteuid(),
                static_cast<unsigned long long>(bootstrap_.comm_id()), rank);
}

std::vector<Fd> FdExchange::exchange(int fd, uint64_t tag) {
  const int64_t timeout = bootstrap_timeout_ms();
  AbortCheck abort = [this] { bootstrap_.check_alive(); };
  Header mine{bootstrap_.comm_id(), tag, topology_.rank};
  // Sending never blocks for long: the message is tiny and the peer's listen backlog holds
  // the connection until it accepts, so every rank can send first and receive after.
  for (int peer : topology_.local_ranks) {
    if (peer == topology_.rank) continue;
    Fd c = unix_connect(name_of(peer), Deadline::after_ms(timeout), abort);
    send_fd(c.get(), &mine, sizeof mine, fd);
  }
  std::vector<Fd> got(static_cast<size_t>(topology_.nranks));
  int pending = topology_.local_size - 1;
  for (auto it = early_.begin(); it != early_.end();) {
    if (it->first.first < tag) {  // of an exchange that failed: closed unused
      it = early_.erase(it);
      continue;
    }
    if (it->first.first != tag) { ++it; continue; }
    got[static_cast<size_t>(it->first.second)] = std::move(it->second);
    it = early_.erase(it);
    --pending;
  }
  Deadline deadline = Deadline::after_ms(timeout);
  while (pending > 0) {
    Fd c = accept_same_user(listener_.get(), deadline, abort,
                            "waiting for memory handles from the ranks of this node");
    Header h{};
    Fd received;
    try {
      received = recv_fd(c.get(), &h, sizeof h, deadline, abort);
    } catch (const Error& e) {
      // Only this user's processes get here (accept_same_user), but a connection that ends
      // early or carries no descriptor is no peer's handle: drop it and keep waiting. A
      // peer that died meanwhile is caught by `abort`; running out of time is not ignored.
      if (e.code() != symcommPeerLost && e.code() != symcommSystemError) throw;
      SYMCOMM_WARN("ignored a malformed memory-handle message: %s", e.what());
      continue;
    }
    if (h.comm_id != bootstrap_.comm_id() || h.rank < 0 || h.rank >= topology_.nranks ||
        !topology_.same_node(h.rank) || h.rank == topology_.rank) {
      SYMCOMM_WARN("ignored a memory handle from outside this communicator (rank %d)", h.rank);
      continue;
    }
    if (h.tag < tag) {
      // Sent for an exchange that failed before this rank accepted it: it names a chunk that
      // its sender has since destroyed, and must not pass for this exchange's. `received`
      // closes it.
      SYMCOMM_DEBUG("dropped rank %d's memory handle of failed exchange #%llu", h.rank,
                    static_cast<unsigned long long>(h.tag));
      continue;
    }
    if (h.tag != tag) {
      early_[{h.tag, h.rank}] = std::move(received);
      continue;
    }
    Fd& slot = got[static_cast<size_t>(h.rank)];
    SYMCOMM_REQUIRE(!slot, symcommInternalError, "rank %d sent handle #%llu twice", h.rank,
                    static_cast<unsigned long long>(tag));
    slot = std::move(received);
    --pending;
  }
  return got;
}

}  // namespace symcomm
