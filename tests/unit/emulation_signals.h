// The device helpers that the twoshot and relay emulations share (tests/unit/*_emulation.cc,
// several host threads per block): the system fence, L2 loads, the relaxed signal store, the
// bounded acquire wait and the block's copy, as host code; and 16-byte aligned memory for
// the ranks' buffers. Include it after emulation.h and before the extracted protocol code.
#pragma once

#include <vector_types.h>  // uint4

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "emulation.h"

namespace {

[[maybe_unused]] void __threadfence_system() {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
template <typename W>
W __ldcg(const W* p) { return *p; }

// Bytes at 16-byte aligned addresses (uint4 elements), filled with `fill`.
struct Memory {
  Memory(size_t bytes, char fill) : words((bytes + 15) / 16) {
    std::memset(static_cast<void*>(words.data()), fill, words.size() * 16);
  }
  char* data() { return reinterpret_cast<char*>(words.data()); }
  std::vector<uint4> words;
};

}  // namespace

namespace symcomm {
namespace detail {
// With the fence before it, a release: what the block wrote before the signal is visible to
// the thread whose acquire poll sees it.
inline void store_relaxed(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
// As device_impl.cuh's: acquire polls, the abort flag and the bound looked at now and then.
inline int wait_local(const DeviceComm& c, const uint64_t* word, symcommCmp_t cmp,
                      uint64_t value) {
  const auto start = std::chrono::steady_clock::now();
  for (uint32_t polls = 1;; ++polls) {
    const uint64_t seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (compare(seen, cmp, value)) return 0;
    std::this_thread::yield();
    if (polls % 64 == 0) {
      int code = 0;
      if (c.abort_flag != nullptr && *c.abort_flag != 0)
        code = symcommPeerLost;
      else if (c.wait_timeout_ns != 0 && std::chrono::steady_clock::now() - start >
                                             std::chrono::nanoseconds(c.wait_timeout_ns))
        code = symcommTimeout;
      if (code != 0) {
        record_error(c, code, word, cmp, value, seen);
        return code;
      }
    }
  }
}
inline void copy(void* dst, const void* src, size_t bytes, unsigned tid, unsigned nt) {
  // Thread tid of nt takes every nt-th byte, as the device copy spreads over threads.
  for (size_t i = tid; i < bytes; i += nt)
    static_cast<char*>(dst)[i] = static_cast<const char*>(src)[i];
}
}  // namespace detail
}  // namespace symcomm
