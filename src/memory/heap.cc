#include "memory/heap.h"

#include <cstring>

#include "base/log.h"
#include "base/param.h"

namespace symcomm {

// At most 64T: a rank reserves an address window of the heap's maximum for every peer it
// reaches, in the 128 TiB of a process's address space.
constexpr size_t kMaxHeapBytes = size_t{64} << 40;
static const SizeParam kHeapMax(
    "SYMCOMM_HEAP_MAX", "0",
    "largest the symmetric heap may grow, per rank (0: the GPU's memory, or 16G on the host); "
    "at most 64T", 0, kMaxHeapBytes);
static const SizeParam kHeapChunk(
    "SYMCOMM_HEAP_CHUNK_SIZE", "0",
    "the heap grows by at least this much at a time (0: 512M on GPUs, 64M on the host); at "
    "most 64T", 0, kMaxHeapBytes);

Heap::Heap(Bootstrap& bootstrap, const Topology& topology, Space& space)
    : bootstrap_(bootstrap), topology_(topology), space_(space) {
  const size_t g = space.granularity();
  struct Sizes {
    uint64_t max, chunk;
  } mine{};
  bootstrap_.agree_on([&] {
    size_t max = kHeapMax.get(), chunk = kHeapChunk.get();
    max_ = Allocator::round_up(max ? max : space.default_max_bytes(), g);
    chunk_ = Allocator::round_up(chunk ? chunk : space.default_chunk_bytes(), g);
    SYMCOMM_REQUIRE(max_ > 0, symcommInvalidArgument, "SYMCOMM_HEAP_MAX is 0 after rounding");
    mine = {max_, chunk_};
  });
  std::vector<Sizes> all(static_cast<size_t>(topology.nranks));
  bootstrap_.allgather(&mine, sizeof mine, all.data());
  for (int r = 0; r < topology.nranks; ++r)
    SYMCOMM_REQUIRE(all[static_cast<size_t>(r)].max == max_ &&
                        all[static_cast<size_t>(r)].chunk == chunk_,
                    symcommInvalidUsage,
                    "ranks disagree on the heap's sizes: rank %d has maximum %s and chunk %s, "
                    "rank %d has %s and %s (set SYMCOMM_HEAP_MAX and SYMCOMM_HEAP_CHUNK_SIZE "
                    "alike everywhere)",
                    topology.rank, format_bytes(max_).c_str(), format_bytes(chunk_).c_str(), r,
                    format_bytes(all[static_cast<size_t>(r)].max).c_str(),
                    format_bytes(all[static_cast<size_t>(r)].chunk).c_str());
  windows_.assign(static_cast<size_t>(topology.nranks), nullptr);
  try {
    bootstrap_.agree_on([&] {
      for (int pe = 0; pe < topology.nranks; ++pe)
        if (topology.accessible[static_cast<size_t>(pe)])
          windows_[static_cast<size_t>(pe)] = static_cast<char*>(space.reserve(max_));
      if (!space.handles_are_bytes()) fds_ = std::make_unique<FdExchange>(bootstrap, topology);
    });
    bootstrap_.barrier();  // every rank's handle socket exists before the first exchange
  } catch (...) {
    // No destructor runs for a constructor that throws: give the windows back here.
    for (char* w : windows_)
      if (w) space_.unreserve(w, max_);
    throw;
  }
}

Heap::~Heap() {
  for (auto it = chunks_.rbegin(); it != chunks_.rend(); ++it) {
    std::vector<int> all;
    for (int pe = 0; pe < topology_.nranks; ++pe)
      if (pe != topology_.rank && windows_[static_cast<size_t>(pe)]) all.push_back(pe);
    try {
      unmap_chunk(*it, all);
    } catch (const Error& e) {
      SYMCOMM_WARN("while freeing the heap: %s", e.what());
    }
  }
  for (char* w : windows_)
    if (w) space_.unreserve(w, max_);
}

void* Heap::malloc(size_t bytes, size_t alignment) {
  struct Ask {
    uint64_t bytes, alignment;
  } mine{bytes, alignment};
  std::vector<Ask> all(static_cast<size_t>(topology_.nranks));
  bootstrap_.allgather(&mine, sizeof mine, all.data());
  for (int r = 0; r < topology_.nranks; ++r) {
    const Ask& a = all[static_cast<size_t>(r)];
    SYMCOMM_REQUIRE(a.bytes == mine.bytes, symcommInvalidUsage,
                    "symcommMalloc is collective and needs the same size on every rank: rank %d "
                    "asked for %llu bytes, rank %d for %llu",
                    topology_.rank, static_cast<unsigned long long>(mine.bytes), r,
                    static_cast<unsigned long long>(a.bytes));
    SYMCOMM_REQUIRE(a.alignment == mine.alignment, symcommInvalidUsage,
                    "a symmetric allocation needs the same alignment on every rank: rank %d "
                    "asked for %llu, rank %d for %llu", topology_.rank,
                    static_cast<unsigned long long>(mine.alignment), r,
                    static_cast<unsigned long long>(a.alignment));
  }
  SYMCOMM_REQUIRE(bytes > 0, symcommInvalidArgument, "bytes is 0");
  SYMCOMM_REQUIRE(alignment > 0 && (alignment & (alignment - 1)) == 0 &&
                      alignment <= space_.granularity(),
                  symcommInvalidArgument,
                  "alignment %zu: a power of two up to the heap's granularity (%zu here)",
                  alignment, space_.granularity());
  auto out_of_memory = [&] {
    SYMCOMM_THROW(symcommOutOfMemory,
                  "the symmetric heap cannot fit %s: used %s in %zu allocations, mapped %s, "
                  "maximum %s (SYMCOMM_HEAP_MAX), largest free range %s",
                  format_bytes(bytes).c_str(), format_bytes(used()).c_str(),
                  allocator_.allocations() - internal_.size(), format_bytes(mapped()).c_str(),
                  format_bytes(max_).c_str(), format_bytes(allocator_.largest_free()).c_str());
  };
  if (bytes > max_) out_of_memory();
  std::optional<size_t> offset = allocator_.allocate(bytes, alignment);
  if (!offset) {
    size_t g = space_.granularity();
    size_t least = Allocator::round_up(allocator_.growth_needed(bytes, alignment), g);
    if (least > max_ - mapped()) out_of_memory();
    grow(std::min(std::max(least, chunk_), max_ - mapped()));
    offset = allocator_.allocate(bytes, alignment);
    SYMCOMM_REQUIRE(offset, symcommInternalError, "no fit for %zu bytes after growing", bytes);
  }
  SYMCOMM_DEBUG("symcommMalloc(%zu) = offset %zu", bytes, *offset);
  return base() + *offset;
}

void* Heap::malloc_internal(size_t bytes) {
  void* p = malloc(bytes);
  internal_bytes_ += Allocator::round_up(bytes, Allocator::kAlignment);
  internal_.insert(offset_of(p));
  return p;
}

void Heap::grow(size_t bytes) {
  // Counted before anything can fail: a failed attempt can leave its handles queued at a rank
  // that never accepted them, and the next attempt, at the same offset, must not take them
  // for its own.
  const uint64_t attempt = growths_++;
  Chunk chunk{mapped(), bytes, 0};
  bool created = false, mapped_here = false;
  auto undo_local = [&] {
    if (mapped_here) space_.unmap(base() + chunk.offset, bytes);
    if (created) space_.destroy(chunk.handle);
  };
  try {
    bootstrap_.agree_on([&] {
      chunk.handle = space_.create(bytes);
      created = true;
      space_.map(base() + chunk.offset, bytes, chunk.handle);
      mapped_here = true;
    });
  } catch (const Error& e) {
    undo_local();
    SYMCOMM_THROW(e.code(), "cannot grow the symmetric heap by %s: %s",
                  format_bytes(bytes).c_str(), e.what());
  }
  std::vector<int> peers;
  try {
    bootstrap_.agree_on([&] { map_peers(chunk, attempt, peers); });
  } catch (const Error& e) {
    unmap_chunk(chunk, peers);
    SYMCOMM_THROW(e.code(), "cannot map a new heap chunk of the ranks of this node: %s",
                  e.what());
  }
  try {
    for (const GrowHook& hook : grow_hooks_) hook(base() + chunk.offset, chunk.offset, bytes);
  } catch (const Error& e) {
    unmap_chunk(chunk, peers);
    SYMCOMM_THROW(e.code(), "cannot register a new heap chunk with the transports: %s",
                  e.what());
  }
  chunks_.push_back(chunk);
  allocator_.grow_to(chunk.offset + bytes);
  SYMCOMM_DEBUG("heap grew by %s to %s", format_bytes(bytes).c_str(),
                format_bytes(mapped()).c_str());
}

void Heap::map_peers(const Chunk& chunk, uint64_t attempt, std::vector<int>& mapped) {
  SharedHandle mine = space_.share(chunk.handle);
  std::vector<SharedHandle> theirs(static_cast<size_t>(topology_.nranks));
  if (space_.handles_are_bytes()) {
    std::vector<std::array<uint8_t, 64>> all(static_cast<size_t>(topology_.nranks));
    bootstrap_.allgather(mine.bytes.data(), 64, all.data());
    for (int pe = 0; pe < topology_.nranks; ++pe) theirs[static_cast<size_t>(pe)].bytes = all[static_cast<size_t>(pe)];
  } else {
    std::vector<Fd> fds = fds_->exchange(mine.fd.get(), attempt);
    for (int pe = 0; pe < topology_.nranks; ++pe)
      theirs[static_cast<size_t>(pe)].fd = std::move(fds[static_cast<size_t>(pe)]);
  }
  for (int pe = 0; pe < topology_.nranks; ++pe) {
    char* w = windows_[static_cast<size_t>(pe)];
    if (pe == topology_.rank || !w) continue;
    try {
      space_.map_peer(w + chunk.offset, chunk.bytes, theirs[static_cast<size_t>(pe)]);
    } catch (const Error& e) {
      SYMCOMM_THROW(e.code(), "cannot map rank %d's heap chunk here: %s", pe, e.what());
    }
    mapped.push_back(pe);
  }
}

void Heap::unmap_chunk(const Chunk& chunk, const std::vector<int>& peers) {
  for (int pe : peers) space_.unmap(windows_[static_cast<size_t>(pe)] + chunk.offset, chunk.bytes);
  space_.unmap(base() + chunk.offset, chunk.bytes);
  space_.destroy(chunk.handle);
}

void Heap::free(void* ptr) {
  // Request::status: an Allocator::FreeStatus, or one of these.
  constexpr int32_t kNull = -1;
  constexpr int32_t kInternal = -2;  // the start of one of malloc_internal's allocations
  struct Request {
    uint64_t offset;
    int32_t status;
  } mine{0, kNull};
  if (ptr) {
    if (!contains(ptr)) {
      mine.status = static_cast<int32_t>(Allocator::FreeStatus::NotInHeap);
    } else {
      mine.offset = offset_of(ptr);
      mine.status = internal_.count(mine.offset)
                        ? kInternal
                        : static_cast<int32_t>(allocator_.check_free(mine.offset));
    }
  }
  std::vector<Request> all(static_cast<size_t>(topology_.nranks));
  bootstrap_.allgather(&mine, sizeof mine, all.data());
  for (int r = 0; r < topology_.nranks; ++r) {
    const Request& q = all[static_cast<size_t>(r)];
    const char* who = r == topology_.rank ? "this rank" : "another rank";
    if (q.status == kInternal)
      SYMCOMM_THROW(symcommInvalidArgument,
                    "symcommFree: rank %d (%s) passed offset %llu, which symcomm allocated for "
                    "its own use (a collective workspace or signal area), not symcommMalloc",
                    r, who, static_cast<unsigned long long>(q.offset));
    switch (static_cast<Allocator::FreeStatus>(q.status)) {
      case Allocator::FreeStatus::Ok: break;
      case Allocator::FreeStatus::NotInHeap:
        SYMCOMM_THROW(symcommInvalidArgument,
                      "symcommFree: rank %d (%s) passed a pointer that is not in the symmetric "
                      "heap", r, who);
      case Allocator::FreeStatus::Interior:
        SYMCOMM_THROW(symcommInvalidArgument,
                      "symcommFree: rank %d (%s) passed a pointer inside an allocation (offset "
                      "%llu), not its start", r, who, static_cast<unsigned long long>(q.offset));
      case Allocator::FreeStatus::NotAllocated:
        SYMCOMM_THROW(symcommInvalidUsage,
                      "symcommFree: rank %d (%s) passed offset %llu, which is not allocated "
                      "(freed twice?)", r, who, static_cast<unsigned long long>(q.offset));
      default:
        break;  // NULL
    }
    if (q.status != all[0].status || q.offset != all[0].offset)
      SYMCOMM_THROW(symcommInvalidUsage,
                    "symcommFree is collective and needs the same allocation on every rank: "
                    "rank 0 frees %s%llu, rank %d frees %s%llu",
                    all[0].status == kNull ? "NULL " : "offset ",
                    static_cast<unsigned long long>(all[0].offset), r,
                    q.status == kNull ? "NULL " : "offset ",
                    static_cast<unsigned long long>(q.offset));
  }
  if (mine.status == kNull) return;
  allocator_.free(mine.offset);
}

bool Heap::contains(const void* ptr) const {
  auto* p = static_cast<const char*>(ptr);
  return p >= base() && p < base() + mapped();
}

size_t Heap::bytes_left(const void* ptr) const {
  if (!ptr || !contains(ptr)) return 0;
  const size_t offset = offset_of(ptr);
  const auto live = allocator_.live_at(offset);
  if (!live) return 0;
  const size_t end = live->first + allocator_.requested(live->first);
  return offset < end ? end - offset : 0;
}

std::vector<std::pair<size_t, size_t>> Heap::user_allocations() const {
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto& [offset, bytes] : allocator_.live_requested())
    if (!internal_.count(offset)) out.emplace_back(offset, bytes);
  return out;
}

void Heap::require_in_allocation(const void* ptr, size_t bytes, const char* what) const {
  SYMCOMM_REQUIRE(ptr != nullptr, symcommInvalidArgument, "%s is NULL", what);
  // As `bytes <= mapped - offset`: offset + bytes would wrap for a huge `bytes`.
  SYMCOMM_REQUIRE(contains(ptr) && bytes <= mapped() - offset_of(ptr), symcommInvalidArgument,
                  "%s %p (+%zu bytes) is not inside the symmetric heap [%p, %p): pass a "
                  "symmetric address from symcommMalloc", what, ptr, bytes,
                  static_cast<const void*>(base()), static_cast<const void*>(base() + mapped()));
  if (bytes == 0) return;
  const size_t offset = offset_of(ptr);
  const auto live = allocator_.live_at(offset);
  SYMCOMM_REQUIRE(live, symcommInvalidArgument,
                  "%s %p is in the symmetric heap but in no live allocation (freed, or never "
                  "allocated)", what, ptr);
  // (Two lookups of the allocator's maps: this check runs for every buffer of every call.)
  const size_t asked = allocator_.requested(live->first);
  const size_t end = live->first + asked;
  const size_t left = offset < end ? end - offset : 0;
  SYMCOMM_REQUIRE(bytes <= left, symcommInvalidArgument,
                  "%s %p (+%zu bytes) runs past the end of its allocation: the allocation at %p "
                  "has %zu bytes, %zu of them from %p on", what, ptr, bytes,
                  static_cast<const void*>(base() + live->first), asked, left, ptr);
}

void* Heap::peer_ptr(const void* ptr, int pe) const {
  SYMCOMM_REQUIRE(pe >= 0 && pe < topology_.nranks, symcommInvalidArgument,
                  "pe %d is out of range [0, %d)", pe, topology_.nranks);
  SYMCOMM_REQUIRE(ptr && contains(ptr), symcommInvalidArgument,
                  "ptr %p is not in the symmetric heap [%p, %p)", ptr,
                  static_cast<const void*>(base()), static_cast<const void*>(base() + mapped()));
  char* w = windows_[static_cast<size_t>(pe)];
  return w ? w + offset_of(ptr) : nullptr;
}

}  // namespace symcomm
