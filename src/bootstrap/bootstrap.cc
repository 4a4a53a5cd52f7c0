// Joining a communicator: each rank reports itself to the root, receives the peer table,
// and connects to rank 0 (the hub) over a data and a liveness connection; the parameters of
// the bootstrap timeout and of the peer monitor are read here.
#include "bootstrap/bootstrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/log.h"
#include "base/param.h"
#include "bootstrap/root.h"
#include "bootstrap/rounds.h"

namespace symcomm {

static const SecondsParam kBootstrapTimeout(
    "SYMCOMM_BOOTSTRAP_TIMEOUT", "60",
    "bound on joining a communicator and on every bootstrap collective; 0: no bound; at least "
    "0.1", 0.1);
static const SecondsParam kPeerTimeout(
    "SYMCOMM_PEER_TIMEOUT", "10",
    "a rank silent for this long is declared lost; 0: silence is never a loss (a closed "
    "connection still is); at least 0.1 (two heartbeats of 0.05 s)", 0.1);
static const SecondsParam kHeartbeatInterval(
    "SYMCOMM_HEARTBEAT_INTERVAL", "1",
    "how often ranks tell rank 0 (and it them) they live, at least 0.01; at most half "
    "SYMCOMM_PEER_TIMEOUT (a longer interval is shortened to that, with a warning)", 0.01,
    SecondsParam::Zero::Refused);
static const StringParam kNodeName(
    "SYMCOMM_NODE_NAME", "",
    "overrides the node identity (hostname and boot id): ranks with equal names share a node");

int64_t bootstrap_timeout_ms() {
  const int64_t ms = kBootstrapTimeout.get_ms();
  // No bound: kMaxSeconds, the longest any duration parameter bounds a wait (about 116 days).
  return ms > 0 ? ms : static_cast<int64_t>(SecondsParam::kMaxSeconds * 1000);
}

namespace {

PeerInfo local_info(int rank) {
  PeerInfo info{};
  std::string node = kNodeName.get();
  if (!node.empty()) {
    std::snprintf(info.hostname, sizeof info.hostname, "%s", node.c_str());
    std::snprintf(info.boot_id, sizeof info.boot_id, "override");
  } else {
    SYMCOMM_SYSCHECK(gethostname(info.hostname, sizeof info.hostname - 1));
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(f, id);
    std::snprintf(info.boot_id, sizeof info.boot_id, "%s", id.c_str());
  }
  info.pid = static_cast<int32_t>(getpid());
  info.rank = rank;
  return info;
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::join(const UniqueId& uid, int nranks, int rank) {
  std::unique_ptr<Bootstrap> b(new Bootstrap(rank, nranks));
  // The monitor's parameters, here rather than on its thread, where a bad value has no
  // caller to fail.
  b->peer_timeout_ms_ = kPeerTimeout.get_ms();
  b->heartbeat_ms_ = kHeartbeatInterval.get_ms();
  if (b->peer_timeout_ms_ > 0 && b->heartbeat_ms_ > b->peer_timeout_ms_ / 2) {
    // Heartbeats rarer than the timeout would make every live peer look lost.
    SYMCOMM_WARN("SYMCOMM_HEARTBEAT_INTERVAL (%.3g s) is more than half SYMCOMM_PEER_TIMEOUT "
                 "(%.3g s): heartbeats every %.3g s instead",
                 b->heartbeat_ms_ / 1000.0, b->peer_timeout_ms_ / 1000.0,
                 (b->peer_timeout_ms_ / 2) / 1000.0);
    b->heartbeat_ms_ = b->peer_timeout_ms_ / 2;
  }
  b->token_ = uid.token;
  Deadline deadline = answer_deadline();
  PeerInfo me = local_info(rank);
  Fd hub_listener;
  if (rank == 0 && nranks > 1) {
    hub_listener = tcp_listen(NetAddr::parse(bootstrap_host(), 0), SOMAXCONN);
    me.hub = socket_local_addr(hub_listener.get());
  }
  if (nranks > 1) {
    b->p2p_listener_ = tcp_listen(NetAddr::parse(bootstrap_host(), 0), SOMAXCONN);
    me.p2p = socket_local_addr(b->p2p_listener_.get());
  }
  Fd root;
  try {
    root = tcp_connect_first(uid.root, uid.root_ports, deadline, nullptr,
                             "connecting to the bootstrap root");
  } catch (const Error& e) {
    if (e.code() != symcommTimeout) throw;
    throw Error(symcommTimeout,
                std::string(e.what()) +
                    "; is the root still there? A root serves one join: it stops once that "
                    "is done, or if no rank joined it within SYMCOMM_BOOTSTRAP_TIMEOUT of its "
                    "start (symrun's serves one join after another while symrun runs)");
  }
  JoinHello hello{kJoinMagic, {}, nranks, rank, me};
  std::memcpy(hello.token, uid.token.data(), 16);
  send_all(root.get(), &hello, sizeof hello, deadline, nullptr, "joining through the root");
  JoinReply reply{};
  recv_all(root.get(), &reply, sizeof reply, deadline, nullptr,
           "waiting for all ranks to join (SYMCOMM_BOOTSTRAP_TIMEOUT)");
  reply.message[sizeof reply.message - 1] = '\0';
  if (reply.status != symcommSuccess)
    throw Error(static_cast<symcommResult_t>(reply.status), reply.message);
  b->peers_.resize(static_cast<size_t>(nranks));
  recv_all(root.get(), b->peers_.data(), b->peers_.size() * sizeof(PeerInfo), deadline, nullptr,
           "receiving the peer table");
  b->comm_id_ = reply.comm_id;
  b->connect_hub(uid, std::move(hub_listener), deadline);
  b->start_monitor();
  b->barrier();  // every connection is up before anyone goes on
  SYMCOMM_DEBUG("joined communicator %016llx as rank %d of %d",
                static_cast<unsigned long long>(b->comm_id_), rank, nranks);
  return b;
}

void Bootstrap::connect_hub(const UniqueId& uid, Fd hub_listener, Deadline deadline) {
  if (nranks_ == 1) return;
  if (rank_ != 0) {
    // Two connections to the hub, one memory handle per peer while the communicator is set
    // up, and the point-to-point connections it keeps (p2p.cc): one to and one from a peer.
    ensure_descriptors(nranks_ + 1 + int64_t{2} * (nranks_ - 1), "a rank");
    const NetAddr& hub = peers_[0].hub;
    for (Channel ch : {Channel::Data, Channel::Liveness}) {
      Fd c = tcp_connect(hub, deadline, nullptr, "connecting to rank 0");
      HubHello h{kHubMagic, {}, comm_id_, rank_, ch};
      std::memcpy(h.token, uid.token.data(), 16);
      send_all(c.get(), &h, sizeof h, deadline, nullptr, "greeting rank 0");
      (ch == Channel::Data ? data_ : live_).push_back(std::move(c));
    }
    return;
  }
  data_.resize(static_cast<size_t>(nranks_));
  live_.resize(static_cast<size_t>(nranks_));
  int pending = 2 * (nranks_ - 1);
  // The hub keeps two connections per other rank for the communicator's lifetime, receives
  // one memory handle per peer while the communicator is set up, and keeps point-to-point
  // connections (p2p.cc): one to and one from a peer.
  ensure_descriptors(int64_t{5} * (nranks_ - 1), "rank 0 (the hub of the bootstrap network)");
  while (pending > 0) {
    Fd c = accept_before(hub_listener.get(), deadline, nullptr,
                         "waiting for every rank to connect to rank 0");
    HubHello h{};
    try {
      Deadline d = Deadline::after_ms(std::min<int64_t>(5000, deadline.remaining_ms(5000)));
      recv_all(c.get(), &h, sizeof h, d, nullptr, "reading a greeting");
    } catch (const Error& e) {
      SYMCOMM_WARN("rank 0 dropped a connection that sent no greeting: %s", e.what());
      continue;
    }
    if (h.magic != kHubMagic || !same_token(h.token, token_) ||
        h.comm_id != comm_id_ || h.rank <= 0 || h.rank >= nranks_) {
      SYMCOMM_WARN("rank 0 refused a connection without this communicator's token");
      continue;
    }
    Fd& slot = (h.channel == Channel::Data ? data_ : live_)[static_cast<size_t>(h.rank)];
    if (slot) {
      SYMCOMM_WARN("rank 0 refused a second connection from rank %d", h.rank);
      continue;
    }
    slot = std::move(c);
    --pending;
  }
}

Bootstrap::~Bootstrap() { stop_monitor(); }

}  // namespace symcomm
