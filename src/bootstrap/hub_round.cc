// Rank 0's side of a round (Bootstrap::hub_round): it collects every rank's part, checks
// that the ranks' calls agree, and answers each rank with the result or with the error that
// every rank throws; a late, out-of-step or lost rank ends the host collectives for good.
#include <poll.h>

#include <algorithm>

#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/rounds.h"

namespace symcomm {

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

}  // namespace symcomm
