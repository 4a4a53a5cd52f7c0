// The symmetric heap of one communicator. Every rank reserves one address window of
// SYMCOMM_HEAP_MAX bytes per accessible peer (itself included); the heap grows by chunks
// appended at the same offset on every rank, each mapped into this rank's own window and
// into the windows of its local peers. A symmetric address is window[rank] + offset; the
// same object on peer pe is window[pe] + offset.
//
// malloc and free are collective and check that all ranks agree before changing anything,
// so a failed call leaves the heap exactly as it was on every rank.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "memory/allocator.h"
#include "memory/fd_exchange.h"
#include "memory/space.h"

namespace symcomm {

class Heap {
 public:
  // Collective.
  Heap(Bootstrap& bootstrap, const Topology& topology, Space& space);
  ~Heap();

  // Collective; at an offset that is a multiple of `alignment` (a power of two up to the
  // space's granularity; the heap's base is aligned to that).
  void* malloc(size_t bytes, size_t alignment = 256);
  // Collective like malloc, for symcomm's own use: not counted in used().
  void* malloc_internal(size_t bytes);
  void free(void* ptr);        // collective
  // The address of `ptr`'s object on `pe`, or nullptr if `pe` is not accessible.
  void* peer_ptr(const void* ptr, int pe) const;
  bool contains(const void* ptr) const;
  size_t offset_of(const void* ptr) const { return static_cast<const char*>(ptr) - base(); }
  // Bytes from `ptr` to the end of the live allocation that holds it (the size it was asked
  // for), or 0 where none does: outside the heap, freed, or in an allocation's padding.
  size_t bytes_left(const void* ptr) const;
  // Throws symcommInvalidArgument, naming `what`, unless [ptr, ptr + bytes) lies inside the
  // heap and inside one live allocation (bytes == 0: ptr in the heap is enough). A transfer
  // that ran past its allocation would land in the next one, which belongs to other code.
  void require_in_allocation(const void* ptr, size_t bytes, const char* what) const;
  char* base() const { return windows_[static_cast<size_t>(topology_.rank)]; }
  // The application's live allocations (symcomm's own left out) as (offset, bytes asked
  // for), by offset: what the device API's checks may address (rma's allocation table).
  std::vector<std::pair<size_t, size_t>> user_allocations() const;

  // Called on every rank whenever the heap grows, after the new range [offset, offset +
  // bytes) (at `base`, this rank's address of the offset) is mapped everywhere and before any
  // rank's malloc returns: collective, in the order hooks were added; a hook may use the
  // bootstrap's collectives. A hook that throws fails the growth (and the malloc) everywhere.
  using GrowHook = std::function<void(char* base, size_t offset, size_t bytes)>;
  void on_grow(GrowHook hook) { grow_hooks_.push_back(std::move(hook)); }

  size_t used() const { return allocator_.used() - internal_bytes_; }
  // Every rank's window as mapped here (nullptr where not accessible).
  const std::vector<char*>& windows() const { return windows_; }
  size_t mapped() const { return allocator_.capacity(); }
  size_t max_bytes() const { return max_; }
  const Space& space() const { return space_; }

 private:
  struct Chunk {
    size_t offset;
    size_t bytes;
    uint64_t handle;
  };
  void grow(size_t bytes);
  void map_peers(const Chunk& chunk, uint64_t attempt, std::vector<int>& mapped);
  void unmap_chunk(const Chunk& chunk, const std::vector<int>& peers);

  Bootstrap& bootstrap_;
  const Topology& topology_;
  Space& space_;
  size_t max_ = 0;
  size_t chunk_ = 0;
  std::vector<char*> windows_;  // per rank; nullptr where not accessible
  std::vector<Chunk> chunks_;
  Allocator allocator_;
  std::unique_ptr<FdExchange> fds_;
  size_t internal_bytes_ = 0;
  // Where malloc_internal's allocations start (never freed): symcommFree refuses them.
  std::set<size_t> internal_;
  // Growth attempts so far, failed ones included: the same on every rank, since every rank
  // attempts every growth. Tags each attempt's handle exchange.
  uint64_t growths_ = 0;
  std::vector<GrowHook> grow_hooks_;
};

}  // namespace symcomm
