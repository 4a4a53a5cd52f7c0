#include "memory/allocator.h"

#include <algorithm>

namespace symcomm {

std::optional<size_t> Allocator::allocate(size_t bytes, size_t alignment) {
  if (bytes == 0 || bytes > capacity_) return std::nullopt;
  alignment = std::max(alignment, kAlignment);
  size_t need = round_up(bytes, kAlignment);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    // The first aligned offset in the range; the bytes before it stay free.
    const size_t start = it->first, size = it->second;
    const size_t offset = round_up(start, alignment), skip = offset - start;
    if (size < skip || size - skip < need) continue;
    const size_t left = size - skip - need;
    free_.erase(it);
    if (skip) free_[start] = skip;
    if (left) free_[offset + need] = left;
    live_[offset] = need;
    requested_[offset] = bytes;
    used_ += need;
    return offset;
  }
  return std::nullopt;
}

size_t Allocator::growth_needed(size_t bytes, size_t alignment) const {
  alignment = std::max(alignment, kAlignment);
  size_t need = round_up(bytes, kAlignment);
  // The free range at the end, from its first aligned offset (or from the capacity, aligned).
  size_t tail_start = round_up(capacity_, alignment);
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == capacity_) tail_start = round_up(last->first, alignment);
  }
  const size_t end = tail_start + need;
  return end > capacity_ ? end - capacity_ : 0;
}

void Allocator::grow_to(size_t capacity) {
  if (capacity <= capacity_) return;
  size_t start = capacity_, size = capacity - capacity_;
  // Merge with a free range that ends at the old capacity.
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == capacity_) {
      start = last->first;
      size += last->second;
      free_.erase(last);
    }
  }
  free_[start] = size;
  capacity_ = capacity;
}

Allocator::FreeStatus Allocator::check_free(size_t offset) const {
  if (offset >= capacity_) return FreeStatus::NotInHeap;
  const auto live = live_at(offset);
  if (!live) return FreeStatus::NotAllocated;
  return live->first == offset ? FreeStatus::Ok : FreeStatus::Interior;
}

std::optional<std::pair<size_t, size_t>> Allocator::live_at(size_t offset) const {
  auto it = live_.upper_bound(offset);  // the first allocation starting after offset
  if (it == live_.begin()) return std::nullopt;
  --it;
  if (offset - it->first >= it->second) return std::nullopt;  // past its end
  return *it;
}

size_t Allocator::requested(size_t start) const {
  auto it = requested_.find(start);
  return it == requested_.end() ? 0 : it->second;
}

void Allocator::free(size_t offset) {
  auto it = live_.find(offset);
  if (it == live_.end()) return;
  size_t start = offset, size = it->second;
  used_ -= size;
  live_.erase(it);
  requested_.erase(offset);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && start + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

size_t Allocator::largest_free() const {
  size_t best = 0;
  for (const auto& [offset, size] : free_) best = std::max(best, size);
  return best;
}

}  // namespace symcomm
