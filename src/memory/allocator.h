// The heap's allocator: offsets in [0, capacity), first fit, 256-byte alignment. Pure logic
// with no memory behind it, so that every rank, running the same calls, computes the same
// offsets (that is what makes the heap symmetric).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <utility>

namespace symcomm {

class Allocator {
 public:
  static constexpr size_t kAlignment = 256;

  // An offset for `bytes` (> 0), a multiple of `alignment` (a power of two; at least
  // kAlignment whatever is asked), or nothing if no free range fits.
  std::optional<size_t> allocate(size_t bytes, size_t alignment = kAlignment);
  // How much capacity must be added so that `bytes` fits at such an offset (the free range at
  // the end counts).
  size_t growth_needed(size_t bytes, size_t alignment = kAlignment) const;
  void grow_to(size_t capacity);

  enum class FreeStatus { Ok, NotInHeap, Interior, NotAllocated };
  // What free(offset) would do, without doing it.
  FreeStatus check_free(size_t offset) const;
  void free(size_t offset);  // requires check_free(offset) == Ok

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  size_t allocations() const { return live_.size(); }
  size_t largest_free() const;
  // The live allocation that holds `offset` (interior offsets too): its offset and size, or
  // nothing where no live allocation holds it.
  std::optional<std::pair<size_t, size_t>> live_at(size_t offset) const;
  // The bytes asked for when the live allocation at `start` (its first offset) was made: its
  // size before rounding up to kAlignment. 0 where no allocation starts there.
  size_t requested(size_t start) const;
  // Every live allocation as (offset, bytes asked for), by offset.
  const std::map<size_t, size_t>& live_requested() const { return requested_; }

  static size_t round_up(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

 private:
  size_t capacity_ = 0;
  size_t used_ = 0;
  std::map<size_t, size_t> free_;  // offset -> size, coalesced
  std::map<size_t, size_t> live_;  // offset -> size
  std::map<size_t, size_t> requested_;  // offset -> the size asked for
};

}  // namespace symcomm
