#include "transport/net/rails/epochs.h"

#include "base/error.h"

namespace symcomm::rails {

uint64_t ImmData::encode() const {
  SYMCOMM_REQUIRE(index <= kMaxIndex, symcommInternalError,
                  "piece %u of an epoch: at most %u fit the immediate data", index, kMaxIndex);
  return (static_cast<uint64_t>(epoch) << 32) | (static_cast<uint64_t>(index) << 8) | flags;
}

ImmData ImmData::decode(uint64_t data) {
  ImmData d;
  d.epoch = static_cast<uint32_t>(data >> 32);
  d.index = static_cast<uint32_t>(data >> 8) & kMaxIndex;
  d.flags = static_cast<uint8_t>(data & 0xff);
  return d;
}

ImmData EpochSender::next_piece() {
  SYMCOMM_REQUIRE(!full(), symcommInternalError,
                  "epoch %u is full (%u pieces): close it before the next piece", epoch_, pieces_);
  ImmData d;
  d.epoch = epoch_;
  d.index = pieces_++;
  return d;
}

EpochSender::Close EpochSender::close() {
  const Close c{epoch_, pieces_};
  ++epoch_;
  pieces_ = 0;
  return c;
}

bool EpochTracker::piece(const ImmData& d) {
  if (before(d.epoch, next_)) return false;  // its signal was applied: a replay
  Open& o = at(d.epoch);
  const size_t word = d.index / 64;
  const uint64_t bit = uint64_t{1} << (d.index % 64);
  if (o.landed.size() <= word) o.landed.resize(word + 1, 0);
  if (o.landed[word] & bit) return false;
  o.landed[word] |= bit;
  ++o.count;
  return true;
}

bool EpochTracker::close(uint32_t epoch, uint32_t pieces, uint64_t signal) {
  if (before(epoch, next_)) return false;
  Open& o = at(epoch);
  if (o.closed) return false;
  o.closed = true;
  o.pieces = pieces;
  o.signal = signal;
  return true;
}

std::vector<uint64_t> EpochTracker::due() {
  std::vector<uint64_t> out;
  const uint32_t old_next = next_;
  for (auto it = open_.begin(); it != open_.end() && it->first == next_ - old_next;) {
    const Open& o = it->second;
    if (!o.closed || o.count < o.pieces) break;
    out.push_back(o.signal);
    it = open_.erase(it);
    ++next_;
  }
  if (next_ != old_next) rekey(old_next);
  return out;
}

void EpochTracker::rekey(uint32_t old_next) {
  // Keys are distances from next_: shift those left by the epochs just applied.
  const uint32_t shift = next_ - old_next;
  std::map<uint32_t, Open> moved;
  for (auto& [key, o] : open_) moved.emplace(key - shift, std::move(o));
  open_.swap(moved);
}

}  // namespace symcomm::rails
