// Put-with-signal over several rails: a signal is applied only once every piece of data sent
// before it has landed, in the order the signals were sent, once each, though pieces go over
// different rails, arrive in any order, and are sent again after a rail fails (replays).
//
// The sender numbers its operations to a peer in epochs. Every piece of data sent to the peer
// carries the current epoch and its index in it (a write's immediate data, ImmData); a
// signal closes the epoch: its message carries the epoch and the number of pieces sent in
// it, and the next epoch begins (EpochSender). The target (EpochTracker, one per source)
// records which pieces of each epoch landed, and applies a closed epoch's signal once all its
// pieces landed and every earlier epoch's signal was applied. A piece or a signal that comes
// twice (a replay of one that had landed) is recognised and dropped. Epochs are 32-bit and
// wrap around: one is before another where their difference, as a signed number, is
// negative (serial number arithmetic), so at most 2^31 epochs may be open at once.
//
// Measured on two shaped rails (../shared/NETWORK.md): a signal sent on one rail right after
// its data on two arrived first in 10 of 256 rounds on equal rails and 254 of 256 with one
// rail slower; counting cost nothing measurable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace symcomm::rails {

// What a piece's immediate data carries: bits 63-32 the epoch, 31-8 the index, 7-0 free for
// the transport (its own flags).
struct ImmData {
  static constexpr uint32_t kMaxIndex = (1u << 24) - 1;
  uint32_t epoch = 0;
  uint32_t index = 0;  // at most kMaxIndex
  uint8_t flags = 0;
  uint64_t encode() const;  // throws symcommInternalError where index > kMaxIndex
  static ImmData decode(uint64_t data);
};

// Whether epoch a comes before epoch b.
inline bool before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

class EpochSender {
 public:
  explicit EpochSender(uint32_t first_epoch = 0) : epoch_(first_epoch) {}
  // The immediate data of the next piece of data to the peer.
  ImmData next_piece();
  // Whether the epoch holds as many pieces as an index can name: the transport then closes
  // it with a signal that applies nothing.
  bool full() const { return pieces_ > ImmData::kMaxIndex; }
  struct Close {
    uint32_t epoch;
    uint32_t pieces;
  };
  // Closes the epoch (a signal goes out with what this returns); the next one begins.
  Close close();
  uint32_t epoch() const { return epoch_; }

 private:
  uint32_t epoch_;
  uint32_t pieces_ = 0;  // sent in epoch_
};

class EpochTracker {
 public:
  explicit EpochTracker(uint32_t first_epoch = 0) : next_(first_epoch) {}
  // A piece landed. False where it was seen before, or its epoch's signal was applied
  // already: a replay, which the transport drops (its data is the same and landed before).
  bool piece(const ImmData& d);
  // The signal closing `epoch`, after `pieces` pieces; `signal` is the transport's token for
  // what to apply. False where that signal came before (a replay).
  bool close(uint32_t epoch, uint32_t pieces, uint64_t signal);
  // The tokens of the signals now due, in epoch order; each is returned once.
  std::vector<uint64_t> due();
  // The first epoch whose signal is not applied yet.
  uint32_t next() const { return next_; }
  // Epochs with pieces or a signal recorded and not yet applied.
  size_t open() const { return open_.size(); }

 private:
  struct Open {
    std::vector<uint64_t> landed;  // bit i: piece i landed
    uint32_t count = 0;            // pieces landed
    bool closed = false;
    uint32_t pieces = 0;           // from the signal
    uint64_t signal = 0;
  };
  Open& at(uint32_t epoch) { return open_[epoch - next_]; }  // keyed by distance from next_
  void rekey(uint32_t old_next);

  uint32_t next_;
  std::map<uint32_t, Open> open_;  // by epoch - next_
};

}  // namespace symcomm::rails
