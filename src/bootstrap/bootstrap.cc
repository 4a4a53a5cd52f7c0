#include "bootstrap/bootstrap.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "base/log.h"
#include "base/param.h"
#include "base/thread_guard.h"
#include "bootstrap/root.h"

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

// How long a rank waits for an answer from rank 0 (or the root): a little longer than their
// own bound, so that their explicit error (another rank did not arrive) comes first.
Deadline answer_deadline() { return Deadline::after_ms(bootstrap_timeout_ms() + 2000); }

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

const char* op_name(Op op) {
  switch (op) {
    case Op::Allgather: return "allgather";
    case Op::Broadcast: return "broadcast";
    case Op::Barrier: return "barrier";
    case Op::Result: return "result";
    case Op::Error: return "error";
    case Op::Broken: return "broken";
    case Op::Abandon: return "abandon";
  }
  return "?";
}

void send_msg(int fd, Op op, uint64_t seq, int64_t arg, const std::string& payload,
              Deadline deadline, const AbortCheck& abort, const char* what) {
  MsgHeader h{kMsgMagic, op, seq, arg, payload.size()};
  send_all(fd, &h, sizeof h, deadline, abort, what);
  if (!payload.empty()) send_all(fd, payload.data(), payload.size(), deadline, abort, what);
}

MsgHeader recv_header(int fd, uint64_t seq, Deadline deadline, const AbortCheck& abort,
                      const char* what) {
  MsgHeader h;
  recv_all(fd, &h, sizeof h, deadline, abort, what);
  SYMCOMM_REQUIRE(h.magic == kMsgMagic, symcommInternalError,
                  "corrupt bootstrap message %s (magic 0x%08x)", what, h.magic);
  SYMCOMM_REQUIRE(h.op != Op::Abandon, symcommTimeout,
                  "a rank gave up bootstrap collective #%llu %s: it waited SYMCOMM_BOOTSTRAP_TIMEOUT "
                  "for rank 0's answer, which came later or not at all",
                  static_cast<unsigned long long>(h.seq), what);
  SYMCOMM_REQUIRE(h.seq == seq, symcommInvalidUsage,
                  "ranks are out of step %s: expected collective #%llu, got #%llu (%s); every "
                  "rank must make the same collective calls in the same order",
                  what, static_cast<unsigned long long>(seq),
                  static_cast<unsigned long long>(h.seq), op_name(h.op));
  return h;
}

// Only after the header's size has been checked: the receiver allocates what it announces.
std::string recv_payload(int fd, const MsgHeader& h, Deadline deadline, const AbortCheck& abort,
                         const char* what) {
  std::string payload(h.bytes, '\0');
  if (h.bytes) recv_all(fd, payload.data(), payload.size(), deadline, abort, what);
  return payload;
}

// Reads and drops a payload (at most kMaxUnexpectedBytes) so that the connection stays in step.
void skip_payload(int fd, uint64_t bytes, Deadline deadline, const AbortCheck& abort,
                  const char* what) {
  char buf[64 << 10];
  while (bytes > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, sizeof buf));
    recv_all(fd, buf, n, deadline, abort, what);
    bytes -= n;
  }
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
    root = tcp_connect(uid.root, deadline, nullptr, "connecting to the bootstrap root");
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
    // Two connections to the hub, and one memory handle per peer while the communicator is
    // set up.
    ensure_descriptors(nranks_ + 1, "a rank");
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
  // The hub keeps two connections per other rank for the communicator's lifetime, and
  // receives one memory handle per peer while the communicator is set up.
  ensure_descriptors(int64_t{3} * (nranks_ - 1), "rank 0 (the hub of the bootstrap network)");
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

std::string Bootstrap::round(Op op, int64_t arg, const std::string& payload,
                             uint64_t reply_bytes) {
  // Ended for good first: a rank that finalizes after that leaves without the last barrier,
  // and the others may see it go before their own finalize.
  if (!rounds_ended_.empty()) throw Error(rounds_ended_code_, rounds_ended_);
  check_alive();
  ++seq_;
  if (rank_ == 0) return hub_round(op, arg, payload, reply_bytes);
  // Where another rank is late, rank 0's answer (that rank did not arrive) comes first, and
  // every rank fails with it.
  Deadline deadline = answer_deadline();
  std::string what = format("in bootstrap %s #%llu with rank 0", op_name(op),
                            static_cast<unsigned long long>(seq_));
  MsgHeader h;
  try {
    send_msg(data_[0].get(), op, seq_, arg, payload, deadline, abort_check(), what.c_str());
    h = recv_header(data_[0].get(), seq_, deadline, abort_check(), what.c_str());
  } catch (const Error& e) {
    if (e.code() == symcommPeerLost) {
      note_lost_in_round(0, e);
      throw;
    }
    // Rank 0 is late (it skipped this call?) or the ranks are out of step: this rank gives up
    // the round, and says so, so that rank 0 fails this round when it comes to it instead of
    // answering it as if this rank were still waiting.
    const MsgHeader abandon{kMsgMagic, Op::Abandon, seq_, 0, 0};
    ::send(data_[0].get(), &abandon, sizeof abandon, MSG_NOSIGNAL | MSG_DONTWAIT);
    end_rounds(e.code(), e.what());
  }
  // A result has the size this rank's call gives; an error message is bounded.
  const bool error = h.op == Op::Error || h.op == Op::Broken;
  SYMCOMM_REQUIRE(error ? h.bytes <= kMaxUnexpectedBytes : h.bytes == reply_bytes,
                  symcommSystemError,
                  "protocol error %s: rank 0 announced %s of %s where this rank expects %s%s "
                  "(a corrupt stream, or a process that is not this symcomm holding the token)",
                  what.c_str(), error ? "an error message" : "a result",
                  format_bytes(h.bytes).c_str(), error ? "at most " : "",
                  format_bytes(error ? kMaxUnexpectedBytes : reply_bytes).c_str());
  std::string reply = recv_payload(data_[0].get(), h, deadline, abort_check(), what.c_str());
  if (h.op == Op::Broken) end_rounds(static_cast<symcommResult_t>(h.arg), reply);
  if (error) throw Error(static_cast<symcommResult_t>(h.arg), reply);
  return reply;
}

void Bootstrap::end_rounds(symcommResult_t code, const std::string& why) {
  rounds_ended_code_ = code;
  rounds_ended_ = format("%s; the host collectives of this communicator ended there on every "
                         "rank, so that no rank pairs a call with another's different one "
                         "(finalize it)", why.c_str());
  throw Error(code, why);
}

std::string Bootstrap::hub_round(Op op, int64_t arg, const std::string& payload,
                                 uint64_t reply_bytes) {
  Deadline deadline = Deadline::after_ms(bootstrap_timeout_ms());
  std::vector<std::string> parts(static_cast<size_t>(nranks_));
  std::vector<uint64_t> sizes(static_cast<size_t>(nranks_), payload.size());
  std::vector<int64_t> args(static_cast<size_t>(nranks_), arg);
  parts[0] = payload;
  std::string problem;
  symcommResult_t code = symcommInvalidUsage;
  // A rank that is late, out of step or gone ends the round, and the host collectives with it:
  // every rank is answered with the error (the late one when it comes to this round).
  bool broken = false;
  for (int r = 1; r < nranks_ && !broken; ++r) {
    std::string what = format("in bootstrap %s #%llu waiting for rank %d", op_name(op),
                              static_cast<unsigned long long>(seq_), r);
    const int fd = data_[static_cast<size_t>(r)].get();
    MsgHeader h;
    try {
      h = recv_header(fd, seq_, deadline, abort_check(), what.c_str());
    } catch (const Error& e) {
      if (e.code() == symcommPeerLost) {
        // The others learn it from this round's answer, ahead of anything else on their
        // connections (rank 0's, closing as it finalizes, could otherwise pass for the loss).
        note_lost_in_round(r, e);
        const std::string lost = lost_summary();
        for (int q = 1; q < nranks_; ++q) {
          if (q == r) continue;
          try {
            send_msg(data_[static_cast<size_t>(q)].get(), Op::Error, seq_, symcommPeerLost,
                     lost.empty() ? std::string(e.what()) : lost,
                     Deadline::after_ms(1000), nullptr, "answering with the loss");
          } catch (const Error&) {
          }
        }
        throw;
      }
      broken = true;
      code = e.code();
      problem = e.code() == symcommTimeout && std::string(e.what()).find("gave up") ==
                                                  std::string::npos
                    ? format("rank %d did not arrive at bootstrap %s #%llu within "
                             "SYMCOMM_BOOTSTRAP_TIMEOUT (%.3g s): %s", r, op_name(op),
                             static_cast<unsigned long long>(seq_),
                             bootstrap_timeout_ms() / 1000.0, e.what())
                    : e.what();
      break;
    }
    args[static_cast<size_t>(r)] = h.arg;
    sizes[static_cast<size_t>(r)] = h.bytes;
    if (h.op != op && problem.empty())
      problem = format("ranks are out of step: rank 0 called %s, rank %d called %s",
                       op_name(op), r, op_name(h.op));
    // What rank r sends if its call matches rank 0's: only that much is allocated. Another
    // size means that the calls disagree, which is reported below from the headers: the
    // payload is read and dropped, up to kMaxUnexpectedBytes; a larger one is a protocol
    // error, left unread.
    const uint64_t expected =
        op == Op::Broadcast ? 8 + (r == arg ? reply_bytes : 0) : payload.size();
    if (h.bytes == expected) {
      parts[static_cast<size_t>(r)] = recv_payload(fd, h, deadline, abort_check(), what.c_str());
    } else if (h.bytes <= kMaxUnexpectedBytes) {
      skip_payload(fd, h.bytes, deadline, abort_check(), what.c_str());
    } else if (code != symcommSystemError) {
      // Rank r's connection is out of step from here on; the other ranks still get the error.
      code = symcommSystemError;
      broken = true;
      problem = format("protocol error in bootstrap %s #%llu: rank %d announced a message of "
                       "%s where rank 0 expects %s (the most it reads of a message that does "
                       "not match its call is %s): the ranks' calls disagree, or a process "
                       "that is not this symcomm holds the token", op_name(op),
                       static_cast<unsigned long long>(seq_), r, format_bytes(h.bytes).c_str(),
                       format_bytes(expected).c_str(), format_bytes(kMaxUnexpectedBytes).c_str());
    }
  }
  // A rank that gave up this round after sending its part (rank 0 came late) has told so
  // behind it: the round fails on every rank rather than answering one that left.
  for (int r = 1; r < nranks_ && !broken; ++r) {
    const int fd = data_[static_cast<size_t>(r)].get();
    pollfd p{fd, POLLIN, 0};
    MsgHeader next{};
    if (::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) &&
        ::recv(fd, &next, sizeof next, MSG_PEEK | MSG_DONTWAIT) == sizeof next &&
        next.magic == kMsgMagic && next.op == Op::Abandon && next.seq == seq_) {
      broken = true;
      code = symcommTimeout;
      problem = format("rank %d gave up bootstrap %s #%llu: it waited SYMCOMM_BOOTSTRAP_TIMEOUT "
                       "for rank 0, which came later (did rank 0 skip a collective?)", r,
                       op_name(op), static_cast<unsigned long long>(seq_));
    }
  }
  std::string reply;
  if (op == Op::Broadcast && problem.empty())
    for (int r = 0; r < nranks_ && problem.empty(); ++r)
      if (args[static_cast<size_t>(r)] < 0 || args[static_cast<size_t>(r)] >= nranks_)
        problem = format("rank %d passes broadcast root %lld, out of range [0, %d)", r,
                         static_cast<long long>(args[static_cast<size_t>(r)]), nranks_);
  for (int r = 1; r < nranks_ && problem.empty(); ++r) {
    const std::string& p = parts[static_cast<size_t>(r)];  // empty if dropped
    if (op == Op::Allgather && sizes[static_cast<size_t>(r)] != payload.size())
      problem = format("ranks disagree on the allgather size: rank 0 gives %zu bytes, rank %d "
                       "gives %llu", payload.size(), r,
                       static_cast<unsigned long long>(sizes[static_cast<size_t>(r)]));
    if (op == Op::Broadcast && (args[static_cast<size_t>(r)] != arg || p.substr(0, 8) !=
                                payload.substr(0, 8)))
      problem = format("ranks disagree on the broadcast: rank 0 passes root %lld, rank %d "
                       "passes root %lld, or their sizes differ",
                       static_cast<long long>(arg), r,
                       static_cast<long long>(args[static_cast<size_t>(r)]));
  }
  // Ranks out of step pair different calls from here on: that ends the rounds too.
  broken |= problem.rfind("ranks are out of step", 0) == 0;
  if (problem.empty()) {
    if (op == Op::Allgather)
      for (const std::string& p : parts) reply += p;
    if (op == Op::Broadcast) reply = parts[static_cast<size_t>(arg)].substr(8);
  }
  Op answer = problem.empty() ? Op::Result : broken ? Op::Broken : Op::Error;
  const std::string& out = problem.empty() ? reply : problem;
  for (int r = 1; r < nranks_; ++r) {
    std::string what = format("answering rank %d", r);
    if (!broken) {
      send_msg(data_[static_cast<size_t>(r)].get(), answer, seq_, problem.empty() ? 0 : code,
               out, deadline, abort_check(), what.c_str());
      continue;
    }
    // Best effort: a rank that is gone, or whose connection is full, learns it otherwise.
    try {
      send_msg(data_[static_cast<size_t>(r)].get(), answer, seq_, code, out,
               Deadline::after_ms(std::min<int64_t>(1000, bootstrap_timeout_ms())), nullptr,
               what.c_str());
    } catch (const Error&) {
    }
  }
  if (broken) end_rounds(code, problem);
  if (!problem.empty()) throw Error(code, problem);
  return reply;
}

void Bootstrap::allgather(const void* mine, size_t bytes, void* all) {
  std::string reply = round(Op::Allgather, 0, std::string(static_cast<const char*>(mine), bytes),
                            bytes * static_cast<size_t>(nranks_));
  SYMCOMM_REQUIRE(reply.size() == bytes * static_cast<size_t>(nranks_), symcommInternalError,
                  "allgather returned %zu bytes, expected %zu", reply.size(),
                  bytes * static_cast<size_t>(nranks_));
  if (!reply.empty()) std::memcpy(all, reply.data(), reply.size());
}

void Bootstrap::broadcast(void* buf, size_t bytes, int root) {
  // Every rank sends the size so that the hub can check that all agree; the root its data.
  uint64_t size = bytes;
  std::string payload(reinterpret_cast<const char*>(&size), 8);
  if (rank_ == root) payload.append(static_cast<const char*>(buf), bytes);
  std::string reply = round(Op::Broadcast, root, payload, bytes);
  SYMCOMM_REQUIRE(reply.size() == bytes, symcommInternalError,
                  "broadcast returned %zu bytes, expected %zu", reply.size(), bytes);
  if (rank_ != root && bytes) std::memcpy(buf, reply.data(), bytes);
}

void Bootstrap::barrier() { round(Op::Barrier, 0, "", 0); }

void Bootstrap::agree(symcommResult_t mine, const std::string& message) {
  // The codes first (4 bytes a rank); then, only where a rank failed, the first failing
  // rank's message, whole (a list of reasons may run to kilobytes).
  int32_t code = mine;
  std::vector<int32_t> codes(static_cast<size_t>(nranks_));
  allgather(&code, sizeof code, codes.data());
  int first = 0;
  while (first < nranks_ && codes[static_cast<size_t>(first)] == symcommSuccess) ++first;
  if (first == nranks_) return;
  const std::string mine_text = message.substr(0, size_t{64} << 10);
  uint64_t bytes = rank_ == first ? mine_text.size() : 0;
  broadcast(&bytes, sizeof bytes, first);
  std::string text = rank_ == first ? mine_text : std::string(bytes, '\0');
  broadcast(text.data(), bytes, first);
  const auto failed = static_cast<symcommResult_t>(codes[static_cast<size_t>(first)]);
  if (first == rank_) throw Error(failed, message);
  throw Error(failed, format("rank %d: %s", first, text.c_str()));
}

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

Bootstrap::~Bootstrap() { stop_monitor(); }

}  // namespace symcomm
