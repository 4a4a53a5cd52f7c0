// The messages between proxies of the net transport: what the target's proxy applies to its
// own memory (signals, eager put-signals, atomics) and the replies it sends back. Every
// message starts with a Header; an eager put-signal's payload follows its header.
#pragma once

#include <cstdint>

namespace symcomm::wire {

enum class Kind : uint8_t {
  Signal = 1,     // apply op to the word at `word`
  PutSignal = 2,  // `bytes` of payload to `offset`, then the signal
  FetchAdd = 3,   // word += a; reply with the value before
  CompareSwap = 4,  // word = (word == a) ? b : word; reply with the value before
  Reply = 5,      // `a`: the value an atomic found; `ticket`: the request's
  Flush = 6,      // reply once everything the sender sent before it is applied
  Stage = 7,      // copy `b` bytes at heap `offset` into the sender's staging slot `a` here
                  // (staging.h), then reply: the sender reads it from there
  Disconnect = 8,  // close this rank's rail `b` connection to the sender's rail `a`, then
                   // reply (1: closed): a stalled lane's far end (rail_transfer.h)
  Hold = 9,        // poll without napping for `a` microseconds: the sender's plain writes or
                   // reads come (they complete nothing here, and tcp moves them only while
                   // this rank's proxy polls)
  Landed = 10,     // the sender's staging slot `a` here holds `b` bytes for heap `offset`:
                   // copy them there, then reply (staging.h, several lanes)
};

// The messages that change the target's memory: numbered where lanes to the target can fail
// over (lane_messages.h), so that one sent again is not applied twice.
inline bool changes_memory(Kind k) {
  return k == Kind::Signal || k == Kind::PutSignal || k == Kind::FetchAdd ||
         k == Kind::CompareSwap || k == Kind::Landed;
}

// The messages the target answers (its proxy replies once applied): fetching atomics,
// flushes, stagings and landings.
inline bool answered(Kind k) {
  return k == Kind::FetchAdd || k == Kind::CompareSwap || k == Kind::Flush || k == Kind::Stage ||
         k == Kind::Landed;
}

// Header::flags.
constexpr uint8_t kNumbered = 1;  // `seq` numbers the message (rails/sequence.h): applied once,
                                  // in order, however many times it arrives
constexpr uint8_t kNext = 2;      // a reply's `b`: the next numbered message its sender's window
                                  // waits for from the requester (all before it applied)
constexpr uint8_t kPeerApplied = 4;  // a one-way message's `ticket`: the same, the next one the
                                     // sender's window waits for from the receiver

struct Header {
  Kind kind;
  uint8_t op;       // symcommSignalOp_t of a signal
  int8_t rail;      // a request's: the sender's rail whose proxy waits for the reply
  uint8_t flags;    // kNumbered, kNext
  int32_t from;     // world rank of the sender
  uint32_t bytes;   // payload bytes (PutSignal)
  uint32_t seq;     // with kNumbered: the message's number among the sender's to this rank
  uint64_t offset;  // heap offset of the payload's destination (PutSignal), of the source (Stage)
  uint64_t word;    // heap offset of the 64-bit word a signal or an atomic updates
  uint64_t a, b;    // signal value; atomic operands; a reply's value (a) and next (b)
  uint64_t ticket;  // an atomic's request, echoed in its reply
};
// 56 bytes, as before the rail and seq fields were added: the messages that fit the provider's
// inject size, and so go from the calling thread (net.cc, send), stay the ones that did.
static_assert(sizeof(Header) == 56, "the wire header's size");

// Receive buffers hold a header and up to this many payload bytes: larger put-signals go as
// a write followed by a Signal.
constexpr uint32_t kEagerMax = 8192;
constexpr size_t kBufferBytes = sizeof(Header) + kEagerMax;

}  // namespace symcomm::wire
