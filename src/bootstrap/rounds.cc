// The host collectives (allgather, broadcast, barrier, agree) as rounds through rank 0, the
// framing of their messages, and the side of a round that ranks other than rank 0 run:
// send their part, then wait for rank 0's answer. Rank 0's side is in hub_round.cc.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/rounds.h"

namespace symcomm {

Deadline answer_deadline() { return Deadline::after_ms(bootstrap_timeout_ms() + 2000); }

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

std::string recv_payload(int fd, const MsgHeader& h, Deadline deadline, const AbortCheck& abort,
                         const char* what) {
  std::string payload(h.bytes, '\0');
  if (h.bytes) recv_all(fd, payload.data(), payload.size(), deadline, abort, what);
  return payload;
}

void skip_payload(int fd, uint64_t bytes, Deadline deadline, const AbortCheck& abort,
                  const char* what) {
  char buf[64 << 10];
  while (bytes > 0) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes, sizeof buf));
    recv_all(fd, buf, n, deadline, abort, what);
    bytes -= n;
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

}  // namespace symcomm
