#include "memory/allocator.h"

#include <algorithm>

namespace symcomm {

std::optional<size_t> Allocator::allocate(size_t bytes) {
  if (bytes == 0 || bytes > capacity_) return std::nullopt;
  size_t need = round_up(bytes, kAlignment);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    size_t offset = it->first, left = it->second - need;
    free_.erase(it);
    if (left) free_[offset + need] = left;
    live_[offset] = need;
    requested_[offset] = bytes;
    used_ += need;
    return offset;
  }
  return std::nullopt;
}

size_t Allocator::growth_needed(size_t bytes) const {
  size_t need = round_up(bytes, kAlignment);
  size_t tail = 0;
  if (!free_.empty()) {
    auto last = std::prev(free_.end());
    if (last->first + last->second == capacity_) tail = last->second;
  }
  return need > tail ? need - tail : 0;
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
