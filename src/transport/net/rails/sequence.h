// Messages to a peer over lanes that may fail, applied exactly once and in the order they were
// sent: the signals, eager put-signals and atomics of a multi-rail net transport.
//
// The sender numbers every message that changes the target's memory (32-bit numbers that wrap
// around: one comes before another where their difference, as a signed number, is negative)
// and keeps it (MessageLog) until the target reports it applied: each answer of the target
// carries the number of the next message it waits for from this sender. When a lane fails
// under the messages, what the log holds goes again, in order, on a lane that is up; some of
// it may have been applied already.
//
// The target keeps a window per sender (MessageWindow): a message with the number it waits
// for is applied; one with an earlier number came before (a replay) and is dropped, a
// fetching atomic's answered again with the value it had; one with a later number (only where
// lanes overtook each other) waits until those before it were applied. So nothing is lost
// (the log holds it until applied) and nothing is applied twice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace symcomm::rails {

// Whether message number a comes before b (serial number arithmetic).
inline bool seq_before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

// The sender's side, one per peer.
class MessageLog {
 public:
  explicit MessageLog(uint32_t first = 0) : next_(first) {}
  // The number the next message gets.
  uint32_t next() const { return next_; }
  // Keeps `message` (which carries number next()) until applied; returns its number.
  uint32_t add(std::vector<uint8_t> message);
  // The target applied every message before `next` (its window's next()): they leave. An
  // answer older than what is known already changes nothing.
  void applied(uint32_t next);
  struct Entry {
    uint32_t seq;
    std::vector<uint8_t> message;
  };
  // Not known to be applied, oldest first: what goes again after a lane failed.
  const std::deque<Entry>& pending() const { return pending_; }
  size_t size() const { return pending_.size(); }

 private:
  uint32_t next_;
  std::deque<Entry> pending_;
};

// The target's side, one per sender.
class MessageWindow {
 public:
  // Messages held while they wait for earlier ones, at most; beyond, one is dropped (the
  // sender's log still holds it, and sends it again if its lane fails).
  static constexpr size_t kMaxEarly = 4096;
  // Fetching atomics' values remembered for the answers to their replays.
  static constexpr size_t kAnswers = 64;

  explicit MessageWindow(uint32_t first = 0) : next_(first) {}
  enum class Fate {
    Apply,      // the one waited for: apply it now (it counts as applied)
    Duplicate,  // applied before: drop it (answer a fetching atomic with answer())
    Early,      // held until those before it are applied (due() returns it then); one held
                // already is held as it came this time (a replay's reply goes to its sender)
    Dropped,    // early, and the window is full
  };
  // Message `seq` (its `bytes` bytes at `message`, kept where it comes early) arrived.
  Fate arrive(uint32_t seq, const uint8_t* message, size_t bytes);
  // After an Apply: the held messages now due, in order, each counted as applied as it is
  // returned. Apply each before calling again.
  bool due(std::vector<uint8_t>* message);
  // Message `seq` was applied with the result `value` (a fetching atomic).
  void answered(uint32_t seq, uint64_t value);
  // The result of applying message `seq`, where still remembered.
  bool answer(uint32_t seq, uint64_t* value) const;
  // The number of the next message to apply: every one before it was applied.
  uint32_t next() const { return next_; }
  size_t early() const { return early_.size(); }

 private:
  uint32_t next_;
  std::map<uint32_t, std::vector<uint8_t>> early_;  // by number
  std::deque<std::pair<uint32_t, uint64_t>> answers_;
};

}  // namespace symcomm::rails
