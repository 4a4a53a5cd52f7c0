// Internal to the bootstrap: the framing of messages on the data connections, shared by the
// ranks' side of a round (rounds.cc), rank 0's (hub_round.cc) and the join (bootstrap.cc).
#pragma once

#include <cstdint>
#include <string>

#include "bootstrap/protocol.h"
#include "bootstrap/socket.h"

namespace symcomm {

// How long a rank waits for an answer from rank 0 (or the root): a little longer than their
// own bound, so that their explicit error (another rank did not arrive) comes first.
Deadline answer_deadline();

const char* op_name(Op op);

void send_msg(int fd, Op op, uint64_t seq, int64_t arg, const std::string& payload,
              Deadline deadline, const AbortCheck& abort, const char* what);

// Reads a header and checks it: the magic, a rank that gave up the round (Op::Abandon), the
// collective's sequence number `seq`.
MsgHeader recv_header(int fd, uint64_t seq, Deadline deadline, const AbortCheck& abort,
                      const char* what);

// Only after the header's size has been checked: the receiver allocates what it announces.
std::string recv_payload(int fd, const MsgHeader& h, Deadline deadline, const AbortCheck& abort,
                         const char* what);

// Reads and drops a payload (at most kMaxUnexpectedBytes) so that the connection stays in step.
void skip_payload(int fd, uint64_t bytes, Deadline deadline, const AbortCheck& abort,
                  const char* what);

}  // namespace symcomm
