#include "rma/device_checks.h"

#include <atomic>

#include "base/error.h"

namespace symcomm {

void write_allocation_table(DeviceAllocations& table,
                            const std::vector<std::pair<size_t, size_t>>& live) {
  std::atomic_ref<uint64_t> version(table.version);
  version.fetch_add(1, std::memory_order_acq_rel);  // odd: being rewritten
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool listed = live.size() <= SYMCOMM_DEVICE_MAX_ALLOCATIONS;
  if (listed)
    for (size_t i = 0; i < live.size(); ++i) {
      table.entries[2 * i] = live[i].first;
      table.entries[2 * i + 1] = live[i].second;
    }
  std::atomic_ref<uint64_t>(table.count).store(live.size(), std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  version.fetch_add(1, std::memory_order_acq_rel);  // even: consistent again
}

void throw_refused_device_call(const DeviceError& e) {
  const symcommResult_t code = static_cast<symcommResult_t>(e.code);
  const void* address = reinterpret_cast<void*>(e.address);
  switch (e.cmp) {
    case kRefusedLocalSide:
      SYMCOMM_THROW(code, "a device-side call in block %d to world rank %d, a member on another "
                    "node, gave local address %p (%llu bytes), which is not global memory "
                    "(shared or local memory): the transport that carries it cannot reach it; "
                    "the call did nothing", e.block, e.pe, address,
                    static_cast<unsigned long long>(e.expected));
    case kRefusedAtomic:
      SYMCOMM_THROW(code, "a device-side atomic in block %d on symmetric address %p of world "
                    "rank %d, a member on another node: atomics need the member mapped; the "
                    "call did nothing and returned 0", e.block, address, e.pe);
    case kRefusedNoRing:
      SYMCOMM_THROW(code, "a device-side call in block %d addressed world rank %d, a member on "
                    "another node, with a handle that has no ring to its transport; the call "
                    "did nothing", e.block, e.pe);
    default:
      break;
  }
  SYMCOMM_THROW(symcommInvalidArgument,
                "a device-side call (put, get, signal, wait or atomic; SYMCOMM_DEVICE_CHECKS) "
                "in block %d addressed %llu bytes at symmetric address %p of world rank %d, "
                "which leave their allocation: %llu bytes are left from that address to the "
                "end of its allocation (0: it is in no live allocation); the call did nothing",
                e.block, static_cast<unsigned long long>(e.expected),
                reinterpret_cast<void*>(e.address), e.pe,
                static_cast<unsigned long long>(e.observed));
}

}  // namespace symcomm
