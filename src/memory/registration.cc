#include "memory/registration.h"

#include <algorithm>
#include <cstring>

#include "base/log.h"

namespace symcomm {

namespace {

using HandleBytes = std::array<uint8_t, 64>;

// Without computing an end, which can wrap for huge sizes; an empty range overlaps nothing.
bool overlap(const char* a, size_t an, const char* b, size_t bn) {
  if (an == 0 || bn == 0) return false;
  return a < b ? static_cast<size_t>(b - a) < an : static_cast<size_t>(a - b) < bn;
}

}  // namespace

Registrations::Registrations(Bootstrap& bootstrap, const Topology& topology, Space& space,
                             const Heap& heap)
    : bootstrap_(bootstrap), topology_(topology), space_(space), heap_(heap) {}

Registrations::~Registrations() {
  for (auto& [key, o] : opened_) space_.close_buffer(o.base);
}

const Registration* Registrations::add(void* ptr, size_t bytes) {
  const int n = topology_.nranks, me = topology_.rank;
  // The sizes first: a rank with a different one names itself in every rank's error.
  std::vector<uint64_t> sizes(static_cast<size_t>(n));
  const uint64_t mine_bytes = bytes;
  bootstrap_.allgather(&mine_bytes, sizeof mine_bytes, sizes.data());
  for (int r = 0; r < n; ++r)
    SYMCOMM_REQUIRE(sizes[static_cast<size_t>(r)] == mine_bytes, symcommInvalidUsage,
                    "symcommRegister is collective and needs the same size on every rank: rank "
                    "%d registers %llu bytes, rank %d %llu",
                    me, static_cast<unsigned long long>(mine_bytes), r,
                    static_cast<unsigned long long>(sizes[static_cast<size_t>(r)]));
  struct Shared {
    HandleBytes handle;
    uint64_t offset;
    uint64_t start;  // the buffer's address modulo 256
  } mine{};
  char* p = static_cast<char*>(ptr);
  bootstrap_.agree_on([&] {
    SYMCOMM_REQUIRE(p != nullptr, symcommInvalidArgument, "ptr is NULL");
    SYMCOMM_REQUIRE(bytes > 0, symcommInvalidArgument, "bytes is 0");
    SYMCOMM_REQUIRE(!heap_.contains(p), symcommInvalidArgument,
                    "%p is in the symmetric heap: peers reach it without registration", ptr);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (const auto& r : live_)
        SYMCOMM_REQUIRE(!overlap(p, bytes, r->ptr, r->bytes), symcommInvalidArgument,
                        "[%p, +%zu) overlaps the registered buffer [%p, +%zu)", ptr, bytes,
                        static_cast<void*>(r->ptr), r->bytes);
    }
    size_t offset = 0;
    mine.handle = space_.share_buffer(p, bytes, &offset).bytes;
    mine.offset = offset;
    mine.start = reinterpret_cast<uintptr_t>(p) % 256;
  });
  std::vector<Shared> all(static_cast<size_t>(n));
  bootstrap_.allgather(&mine, sizeof mine, all.data());

  auto reg = std::make_unique<Registration>(Registration{p, bytes, std::vector<char*>(static_cast<size_t>(n))});
  for (const Shared& s : all)
    while (reg->alike > 1 && s.start % reg->alike != mine.start % reg->alike) reg->alike /= 2;
  std::vector<std::pair<int, HandleBytes>> used;
  try {
    bootstrap_.agree_on([&] {
      for (int pe = 0; pe < n; ++pe) {
        const Shared& s = all[static_cast<size_t>(pe)];
        if (pe == me) {
          reg->peers[static_cast<size_t>(pe)] = p;
        } else if (topology_.accessible[static_cast<size_t>(pe)]) {
          SharedHandle h;
          h.bytes = s.handle;
          char* base = open(pe, h);
          used.emplace_back(pe, s.handle);
          reg->peers[static_cast<size_t>(pe)] = base + s.offset;
        }
      }
    });
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [pe, handle] : used) close(pe, handle);
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  reg->serial = made_++;
  uses_[reg.get()] = std::move(used);
  live_.push_back(std::move(reg));
  SYMCOMM_DEBUG("registered [%p, +%zu)", ptr, bytes);
  return live_.back().get();
}

void Registrations::remove(const Registration* registration) {
  // Every rank names the same registration: its index, which the ranks agree on since they
  // register in the same order.
  int64_t index = -1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < live_.size(); ++i)
      if (live_[i].get() == registration) index = static_cast<int64_t>(i);
  }
  std::vector<int64_t> all(static_cast<size_t>(topology_.nranks));
  bootstrap_.allgather(&index, sizeof index, all.data());
  for (int r = 0; r < topology_.nranks; ++r) {
    const int64_t other = all[static_cast<size_t>(r)];
    SYMCOMM_REQUIRE(other >= 0, symcommInvalidArgument,
                    "symcommDeregister: rank %d passed a handle that is not a live registration "
                    "of this communicator", r);
    SYMCOMM_REQUIRE(other == index, symcommInvalidUsage,
                    "symcommDeregister is collective over one registration: rank %d names "
                    "registration %lld, rank %d registration %lld",
                    topology_.rank, static_cast<long long>(index), r, static_cast<long long>(other));
  }
  // Nothing of this rank still writes into a peer's buffer, on any rank, before any closes.
  bootstrap_.agree_on([&] { space_.synchronize(); });
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [pe, handle] : uses_[registration]) close(pe, handle);
  uses_.erase(registration);
  live_.erase(live_.begin() + index);
}

const Registration* Registrations::find(const void* p, size_t bytes) const {
  const char* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& r : live_) {
    if (c < r->ptr) continue;
    const auto at = static_cast<size_t>(c - r->ptr);  // c + bytes could wrap; this cannot
    if (at < r->bytes && bytes <= r->bytes - at) return r.get();
  }
  return nullptr;
}

char* Registrations::peer_ptr(const void* p, int pe) const {
  const Registration* r = find(p, 0);
  if (!r || pe < 0 || pe >= topology_.nranks) return nullptr;
  char* base = r->peers[static_cast<size_t>(pe)];
  return base ? base + (static_cast<const char*>(p) - r->ptr) : nullptr;
}

char* Registrations::open(int pe, const SharedHandle& handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto key = std::make_pair(pe, handle.bytes);
  auto it = opened_.find(key);
  if (it != opened_.end()) {
    ++it->second.references;
    return it->second.base;
  }
  char* base = space_.open_buffer(handle);
  opened_[key] = Opened{base, 1};
  return base;
}

// Called with mutex_ held or before the registration is published.
void Registrations::close(int pe, const HandleBytes& handle) {
  auto it = opened_.find(std::make_pair(pe, handle));
  if (it == opened_.end()) return;
  if (--it->second.references == 0) {
    space_.close_buffer(it->second.base);
    opened_.erase(it);
  }
}

}  // namespace symcomm
