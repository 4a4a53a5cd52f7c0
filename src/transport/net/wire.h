// The messages between proxies of the net transport: what the target's proxy applies to its
// own memory (signals, eager put-signals, atomics) and the replies it sends back. Every
// message starts with a Header; an eager put-signal's payload follows its header.
#pragma once

#include <cstdint>

namespace symcomm::wire {

enum class Kind : uint32_t {
  Signal = 1,     // apply op to the word at `word`
  PutSignal = 2,  // `bytes` of payload to `offset`, then the signal
  FetchAdd = 3,   // word += a; reply with the value before
  CompareSwap = 4,  // word = (word == a) ? b : word; reply with the value before
  Reply = 5,      // `a`: the value an atomic found; `ticket`: the request's
  Flush = 6,      // reply once everything the sender sent before it is applied
  Stage = 7,      // copy `bytes` at heap `offset` into the sender's staging slot `a` here
                  // (staging.h), then reply: the sender reads it from there
  Disconnect = 8,  // close this rank's rail `b` connection to the sender's rail `a`, then
                   // reply (1: closed): a stalled lane's far end (rail_transfer.h)
};

struct Header {
  Kind kind;
  int32_t from;     // world rank of the sender
  uint16_t op;      // symcommSignalOp_t of a signal
  int16_t rail;     // a request's: the sender's rail whose proxy waits for the reply
  uint32_t bytes;   // payload bytes (PutSignal); bytes to stage (Stage)
  uint64_t offset;  // heap offset of the payload's destination (PutSignal), of the source (Stage)
  uint64_t word;    // heap offset of the 64-bit word a signal or an atomic updates
  uint64_t a, b;    // signal value; atomic operands; a reply's value
  uint64_t ticket;  // an atomic's request, echoed in its reply
};
// 56 bytes, as before the rail field was added: the messages that fit the provider's inject
// size, and so go from the calling thread (net.cc, send), stay the ones that did.
static_assert(sizeof(Header) == 56, "the wire header's size");

// Receive buffers hold a header and up to this many payload bytes: larger put-signals go as
// a write followed by a Signal.
constexpr uint32_t kEagerMax = 8192;
constexpr size_t kBufferBytes = sizeof(Header) + kEagerMax;

}  // namespace symcomm::wire
