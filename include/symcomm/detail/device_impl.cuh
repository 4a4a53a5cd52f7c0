// Bodies of the functions declared in symcomm/device.cuh, which includes this file: do not
// include it directly. Names in symcomm::detail are not part of the API.
#ifndef SYMCOMM_DETAIL_DEVICE_IMPL_CUH_
#define SYMCOMM_DETAIL_DEVICE_IMPL_CUH_

#if defined(__CUDACC__)

namespace symcomm {
SYMCOMM_DEVICE_NS_BEGIN
namespace detail {

// --- Memory operations at system scope -----------------------------------------------------

__device__ __forceinline__ uint64_t load_acquire(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// A relaxed system-scope store, no fence of its own (a fence.sys costs over half a
// microsecond): signals use it after the fence that orders their data, where one is needed.
__device__ __forceinline__ void store_relaxed(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.u64 [%0], %1;" : : "l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t global_time_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// --- Threads of a group ----------------------------------------------------------------------

__device__ __forceinline__ unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

__device__ __forceinline__ unsigned block_thread() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

__device__ __forceinline__ unsigned block_threads() {
  return blockDim.x * blockDim.y * blockDim.z;
}

// --- Copies ------------------------------------------------------------------------------------

// Elements [0, n) of V, thread `tid` of `nt` taking every nt-th one. Each thread loads
// kUnroll elements before storing them, to keep several loads in flight.
template <typename V>
__device__ __forceinline__ void copy_elements(V* dst, const V* src, size_t n, unsigned tid,
                                              unsigned nt) {
  constexpr unsigned kUnroll = 4;
  size_t i = tid;
  for (; i + (kUnroll - 1) * size_t{nt} < n; i += kUnroll * size_t{nt}) {
    V v[kUnroll];
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) v[u] = src[i + u * size_t{nt}];
#pragma unroll
    for (unsigned u = 0; u < kUnroll; ++u) dst[i + u * size_t{nt}] = v[u];
  }
  for (; i < n; i += nt) dst[i] = src[i];
}

// `bytes` bytes with accesses of W bytes (V) on the middle section where dst is W-aligned
// (src is then W-aligned too), single bytes at the head and the tail.
template <typename V>
__device__ __forceinline__ void copy_width(char* dst, const char* src, size_t bytes,
                                           unsigned tid, unsigned nt) {
  constexpr size_t W = sizeof(V);
  size_t head = (W - reinterpret_cast<uintptr_t>(dst) % W) % W;
  if (head > bytes) head = bytes;
  const size_t n = (bytes - head) / W;
  const size_t edges = bytes - n * W;  // head + tail bytes
  for (size_t k = tid; k < edges; k += nt) {
    const size_t j = k < head ? k : k + n * W;
    dst[j] = src[j];
  }
  copy_elements(reinterpret_cast<V*>(dst + head), reinterpret_cast<const V*>(src + head), n, tid,
                nt);
}

// The widest access width that dst and src share modulo 16.
__device__ __forceinline__ void copy(void* dst, const void* src, size_t bytes, unsigned tid,
                                     unsigned nt) {
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const unsigned diff = static_cast<unsigned>(reinterpret_cast<uintptr_t>(d) ^
                                              reinterpret_cast<uintptr_t>(s)) & 15u;
  if (diff == 0) copy_width<uint4>(d, s, bytes, tid, nt);
  else if (diff % 8 == 0) copy_width<uint2>(d, s, bytes, tid, nt);
  else if (diff % 4 == 0) copy_width<uint32_t>(d, s, bytes, tid, nt);
  else if (diff % 2 == 0) copy_width<uint16_t>(d, s, bytes, tid, nt);
  else copy_width<uint8_t>(d, s, bytes, tid, nt);
}

// --- Signals and waits ------------------------------------------------------------------------

// The update itself; the caller has ordered the data before it.
__device__ __forceinline__ void signal_update(uint64_t* remote, uint64_t value,
                                              symcommSignalOp_t op) {
  if (op == symcommSignalSet)
    store_relaxed(remote, value);
  else if (op == symcommSignalAdd)
    atomicAdd_system(reinterpret_cast<unsigned long long*>(remote),
                     static_cast<unsigned long long>(value));
}

// Records a failed wait in the host-mapped slot. Host memory takes no system-scope atomics
// over PCIe, so there is no compare-and-swap: a writer that sees a code already set leaves
// the record alone, the fields are written before the code (with a system fence between),
// and two failures at the same instant may mix their fields (the record is diagnostic).
// `pe`: DeviceError::pe where it is not this rank (a barrier's member that did not arrive).
__device__ __forceinline__ void record_error(const DeviceComm& c, int code, const void* word,
                                             symcommCmp_t cmp, uint64_t expected,
                                             uint64_t observed, int pe = -1) {
  volatile DeviceError* v = c.error;
  if (v == nullptr || v->code != 0) return;
  v->pe = pe < 0 ? c.rank : pe;
  v->cmp = static_cast<int32_t>(cmp);
  v->block = static_cast<int32_t>(blockIdx.x);
  v->address = reinterpret_cast<uintptr_t>(word);
  v->expected = expected;
  v->observed = observed;
  __threadfence_system();
  v->code = code;
  __threadfence_system();
}

// Polls this rank's `word` with acquire loads until the comparison holds: what follows is
// ordered after the observed write. (Measured on H200: an ld.acquire.sys poll costs 0.64 us
// one way in a ping-pong, a relaxed poll plus fence.acq_rel.sys after it 1.21 us.) Looks at
// the clock and the abort flag (host memory, slow to read) once every kCheckEvery polls, out
// of an unrolled inner loop that is nothing but load, compare and branch: a counter test in
// every poll cost 7.5 ns one way in a ping-pong on one 2 x H200 host, nothing measurable on a
// 4 x H200 host whose polls are slower (tools/probe/pingpong_probe.cu, wait_ab.sh). Short
// waits never read the clock; the bound is late by at most kCheckEvery polls.
// SYMCOMM_WAIT_UNROLL (8; 1 puts the counter test back in every poll) is for A/B runs.
// `pe`: what a failure records as DeviceError::pe (-1: this rank; see record_error).
#ifndef SYMCOMM_WAIT_UNROLL
#define SYMCOMM_WAIT_UNROLL 8
#endif
__device__ __forceinline__ int wait_local(const DeviceComm& c, const uint64_t* word,
                                          symcommCmp_t cmp, uint64_t value, int pe = -1) {
  constexpr uint32_t kCheckEvery = 1024;
  constexpr int kUnroll = SYMCOMM_WAIT_UNROLL;
  uint64_t seen = 0, start = 0;
  for (;;) {
#pragma unroll kUnroll
    for (uint32_t i = 0; i < kCheckEvery; ++i) {
      seen = load_acquire(word);
      if (compare(seen, cmp, value)) return 0;
    }
    int code = 0;
    const uint64_t now = global_time_ns();
    if (start == 0) start = now;
    if (c.abort_flag != nullptr && *c.abort_flag != 0)
      code = symcommPeerLost;
    else if (c.wait_timeout_ns != 0 && now - start > c.wait_timeout_ns)
      code = symcommTimeout;
    if (code != 0) {
      record_error(c, code, word, cmp, value, seen, pe);
      return code;
    }
  }
}

// --- Bounds (SYMCOMM_DEVICE_CHECKS) ---------------------------------------------------------

// Bytes from the symmetric address p to the end of the live allocation that holds it (0:
// none holds it), or ~0 where the table cannot say (too many allocations to list; the host
// rewriting it every time it was read). Reads the host-mapped table under its version: an
// odd version, or one that changed during the search, means a rewrite, and the search
// starts again.
__device__ inline uint64_t bytes_left(const DeviceComm& c, const void* p) {
  const DeviceAllocations* t = c.allocations;
  if (t == nullptr) return ~uint64_t{0};
  const uint64_t off = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(c.base);
  const volatile uint64_t* entries = t->entries;
  for (int attempt = 0; attempt < 64; ++attempt) {
    const uint64_t version = load_acquire(&t->version);
    if (version & 1) continue;
    const uint64_t n = *static_cast<const volatile uint64_t*>(&t->count);
    if (n > SYMCOMM_DEVICE_MAX_ALLOCATIONS) return ~uint64_t{0};
    uint64_t lo = 0, hi = n;  // the first entry that starts after off
    while (lo < hi) {
      const uint64_t mid = (lo + hi) / 2;
      if (entries[2 * mid] <= off) lo = mid + 1;
      else hi = mid;
    }
    uint64_t left = 0;
    if (lo > 0) {
      const uint64_t start = entries[2 * (lo - 1)], bytes = entries[2 * (lo - 1) + 1];
      left = off - start < bytes ? start + bytes - off : 0;
    }
    if (load_acquire(&t->version) == version) return left;
  }
  return ~uint64_t{0};
}

// Whether the call may address [p, p + bytes) on team rank pe; where it may not (with
// SYMCOMM_DEVICE_CHECKS only), records it. Every thread of a group computes the same answer.
__device__ __forceinline__ bool allowed(const DeviceComm& c, const void* p, uint64_t bytes,
                                        int pe) {
#ifdef SYMCOMM_DEVICE_CHECKS
  if (bytes == 0) return true;
  const uint64_t left = bytes_left(c, p);
  if (bytes <= left) return true;
  record_error(c, symcommInvalidArgument, p, static_cast<symcommCmp_t>(kRefusedBounds), bytes, left,
               c.team_start + pe * c.team_stride);
  return false;
#else
  (void)c, (void)p, (void)bytes, (void)pe;
  return true;
#endif
}

}  // namespace detail
SYMCOMM_DEVICE_NS_END
}  // namespace symcomm

#include "symcomm/detail/device_ring.cuh"

namespace symcomm {
SYMCOMM_DEVICE_NS_BEGIN

// --- The team and addresses -------------------------------------------------------------------

__device__ __forceinline__ int team_rank(const DeviceComm& c) { return c.team_rank; }
__device__ __forceinline__ int team_size(const DeviceComm& c) { return c.team_size; }

__device__ __forceinline__ int world_rank(const DeviceComm& c, int team_pe) {
  return c.team_start + team_pe * c.team_stride;
}

__device__ __forceinline__ int team_rank_of(const DeviceComm& c, int world) {
  const int d = world - c.team_start;
  if (d < 0 || c.team_stride <= 0 || d % c.team_stride != 0) return -1;
  const int i = d / c.team_stride;
  return i < c.team_size ? i : -1;
}

__device__ __forceinline__ int team_translate(const DeviceComm& src, int src_pe,
                                              const DeviceComm& dst) {
  if (src_pe < 0 || src_pe >= src.team_size) return -1;
  return team_rank_of(dst, world_rank(src, src_pe));
}

namespace detail {

// Team member pe's window as mapped here (nullptr where not load/store accessible). The
// near_base read does not wait for the test of pe (5 ns less one way in a ping-pong than a
// branch to either read, tools/probe/pingpong_probe.cu).
__device__ __forceinline__ char* window(const DeviceComm& c, int pe) {
  static_assert((SYMCOMM_DEVICE_COMM_NEAR & (SYMCOMM_DEVICE_COMM_NEAR - 1)) == 0, "a power of 2");
  char* w = c.near_base[pe & (SYMCOMM_DEVICE_COMM_NEAR - 1)];
  if (pe >= SYMCOMM_DEVICE_COMM_NEAR) w = c.peer_base[world_rank(c, pe)];
  return w;
}

// ptr() without the null check, for a pe known to be accessible. Peer windows are global
// memory: saying so lets the compiler use global loads and stores (LDG/STG) rather than
// generic ones (LD/ST).
template <typename T>
__device__ __forceinline__ T* remote(const DeviceComm& c, T* p, int pe) {
  const uintptr_t offset = reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(c.base);
  char* r = window(c, pe) + offset;
  __builtin_assume(__isGlobal(r));
  return reinterpret_cast<T*>(r);
}

}  // namespace detail

template <typename T>
__device__ __forceinline__ T* ptr(const DeviceComm& c, T* p, int pe) {
  if (detail::window(c, pe) == nullptr) return nullptr;
  return detail::remote(c, p, pe);
}

// --- Data movement ----------------------------------------------------------------------------

// A member that is not mapped here (another node) is reached through the ring
// (detail/device_ring.cuh): one thread of the group hands the operation over, after the
// group's synchronisation (the group's writes to a put's source precede it) and before the
// group's last one (a get's data is there for the group).
__device__ __forceinline__ void put(const DeviceComm& c, void* dst, const void* src,
                                    size_t bytes, int pe) {
  if (!detail::allowed(c, dst, bytes, pe)) return;
  if (detail::window(c, pe) == nullptr)
    return detail::ring_transfer(c, kDeviceNetPut, dst, src, bytes, pe);
  detail::copy(detail::remote(c, dst, pe), src, bytes, 0, 1);
}

__device__ __forceinline__ void put_warp(const DeviceComm& c, void* dst, const void* src,
                                         size_t bytes, int pe) {
  if (detail::allowed(c, dst, bytes, pe)) {
    if (detail::window(c, pe) == nullptr) {
      __syncwarp();
      if (detail::lane_id() == 0) detail::ring_transfer(c, kDeviceNetPut, dst, src, bytes, pe);
    } else {
      detail::copy(detail::remote(c, dst, pe), src, bytes, detail::lane_id(), 32);
    }
  }
  __syncwarp();
}

__device__ __forceinline__ void put_block(const DeviceComm& c, void* dst, const void* src,
                                          size_t bytes, int pe) {
  if (detail::allowed(c, dst, bytes, pe)) {
    if (detail::window(c, pe) == nullptr) {
      __syncthreads();
      if (detail::block_thread() == 0)
        detail::ring_transfer(c, kDeviceNetPut, dst, src, bytes, pe);
    } else {
      detail::copy(detail::remote(c, dst, pe), src, bytes, detail::block_thread(),
                   detail::block_threads());
    }
  }
  __syncthreads();
}

__device__ __forceinline__ void get(const DeviceComm& c, void* dst, const void* src,
                                    size_t bytes, int pe) {
  if (!detail::allowed(c, src, bytes, pe)) return;
  if (detail::window(c, pe) == nullptr)
    return detail::ring_transfer(c, kDeviceNetGet, src, dst, bytes, pe);
  detail::copy(dst, detail::remote(c, src, pe), bytes, 0, 1);
}

__device__ __forceinline__ void get_warp(const DeviceComm& c, void* dst, const void* src,
                                         size_t bytes, int pe) {
  if (detail::allowed(c, src, bytes, pe)) {
    if (detail::window(c, pe) == nullptr) {
      if (detail::lane_id() == 0) detail::ring_transfer(c, kDeviceNetGet, src, dst, bytes, pe);
    } else {
      detail::copy(dst, detail::remote(c, src, pe), bytes, detail::lane_id(), 32);
    }
  }
  __syncwarp();
}

__device__ __forceinline__ void get_block(const DeviceComm& c, void* dst, const void* src,
                                          size_t bytes, int pe) {
  if (detail::allowed(c, src, bytes, pe)) {
    if (detail::window(c, pe) == nullptr) {
      if (detail::block_thread() == 0)
        detail::ring_transfer(c, kDeviceNetGet, src, dst, bytes, pe);
    } else {
      detail::copy(dst, detail::remote(c, src, pe), bytes, detail::block_thread(),
                   detail::block_threads());
    }
  }
  __syncthreads();
}

// --- Signals ----------------------------------------------------------------------------------

__device__ __forceinline__ void signal_op(const DeviceComm& c, uint64_t* sig, uint64_t value,
                                          symcommSignalOp_t op, int pe) {
  if (!detail::allowed(c, sig, 8, pe)) return;
  if (detail::window(c, pe) == nullptr)
    return detail::ring_signal(c, nullptr, nullptr, 0, sig, value, op, pe);
  detail::signal_update(detail::remote(c, sig, pe), value, op);
}

__device__ __forceinline__ void put_signal(const DeviceComm& c, void* dst, const void* src,
                                           size_t bytes, uint64_t* sig, uint64_t value,
                                           symcommSignalOp_t op, int pe) {
  if (!detail::allowed(c, dst, bytes, pe) || !detail::allowed(c, sig, 8, pe)) return;
  if (detail::window(c, pe) == nullptr)
    return detail::ring_signal(c, dst, src, bytes, sig, value, op, pe);
  detail::copy(detail::remote(c, dst, pe), src, bytes, 0, 1);
  __threadfence_system();
  detail::signal_update(detail::remote(c, sig, pe), value, op);
}

__device__ __forceinline__ void put_signal_warp(const DeviceComm& c, void* dst, const void* src,
                                                size_t bytes, uint64_t* sig, uint64_t value,
                                                symcommSignalOp_t op, int pe) {
  const unsigned lane = detail::lane_id();
  const bool ok = detail::allowed(c, dst, bytes, pe) && detail::allowed(c, sig, 8, pe);
  if (ok && detail::window(c, pe) == nullptr) {
    __syncwarp();  // every lane's writes to the source precede lane 0's hand-over
    if (lane == 0) detail::ring_signal(c, dst, src, bytes, sig, value, op, pe);
    __syncwarp();
    return;
  }
  if (ok) detail::copy(detail::remote(c, dst, pe), src, bytes, lane, 32);
  __syncwarp();  // every lane's stores happen before lane 0's fence
  if (ok && lane == 0) {
    __threadfence_system();
    detail::signal_update(detail::remote(c, sig, pe), value, op);
  }
  __syncwarp();
}

__device__ __forceinline__ void put_signal_block(const DeviceComm& c, void* dst,
                                                 const void* src, size_t bytes, uint64_t* sig,
                                                 uint64_t value, symcommSignalOp_t op, int pe) {
  const unsigned tid = detail::block_thread();
  const bool ok = detail::allowed(c, dst, bytes, pe) && detail::allowed(c, sig, 8, pe);
  if (ok && detail::window(c, pe) == nullptr) {
    __syncthreads();  // every thread's writes to the source precede thread 0's hand-over
    if (tid == 0) detail::ring_signal(c, dst, src, bytes, sig, value, op, pe);
    __syncthreads();
    return;
  }
  if (ok) detail::copy(detail::remote(c, dst, pe), src, bytes, tid, detail::block_threads());
  __syncthreads();  // every thread's stores happen before thread 0's fence
  if (ok && tid == 0) {
    __threadfence_system();
    detail::signal_update(detail::remote(c, sig, pe), value, op);
  }
  __syncthreads();
}

__device__ __forceinline__ int signal_wait_until(const DeviceComm& c, uint64_t* sig,
                                                 symcommCmp_t cmp, uint64_t value) {
  if (!detail::allowed(c, sig, 8, c.team_rank)) return symcommInvalidArgument;
  return detail::wait_local(c, sig, cmp, value);
}

__device__ __forceinline__ int signal_wait_until_block(const DeviceComm& c, uint64_t* sig,
                                                       symcommCmp_t cmp, uint64_t value) {
  __shared__ int result;
  __syncthreads();  // nobody still reads `result` from the previous call
  if (detail::block_thread() == 0)
    result = detail::allowed(c, sig, 8, c.team_rank) ? detail::wait_local(c, sig, cmp, value)
                                                     : symcommInvalidArgument;
  __syncthreads();  // thread 0's acquire covers the block from here
  return result;
}

// --- Ordering and completion ------------------------------------------------------------------

// With members through the ring, a fence is a quiet there: its messages are applied before
// anything after the fence goes out, by either path.
__device__ __forceinline__ void fence(const DeviceComm& c) {
  __threadfence_system();
  if (detail::has_ring(c)) detail::ring_quiet(c);
}
__device__ __forceinline__ void quiet(const DeviceComm& c) {
  __threadfence_system();
  if (detail::has_ring(c)) detail::ring_quiet(c);
}

// As quiet_block, at warp scope: __syncwarp also orders memory among the lanes.
__device__ __forceinline__ void quiet_warp(const DeviceComm& c) {
  __syncwarp();
  if (detail::lane_id() == 0) quiet(c);
  __syncwarp();
}

__device__ __forceinline__ void quiet_block(const DeviceComm& c) {
  __syncthreads();
  if (detail::block_thread() == 0) quiet(c);
  __syncthreads();
}

// --- Barrier ----------------------------------------------------------------------------------

// Each member t has an array of slots, one per world rank. Entering barrier number `epoch`,
// this rank writes `epoch` into its own slot (index c.rank) on every member, then waits
// until every member has written at least `epoch` into the slots here.
__device__ __forceinline__ int barrier_block(const DeviceComm& c) {
  __shared__ uint64_t epoch;
  __shared__ int result;
  const unsigned tid = detail::block_thread(), nt = detail::block_threads();
  const int n = c.team_size;
  // Thread 0 counts this barrier while the others look up the members' windows, so the two
  // memory reads overlap. (Every thread read `epoch` before the previous call's last bar.sync.)
  if (tid == 0) epoch = ++*c.barrier_epoch;  // only this thread of this rank touches it
  char* mine = nullptr;  // member tid's window, kept for the store below
  int missing = 0;  // a member neither mapped nor reached through the ring
  const bool ring = detail::has_ring(c);
  for (int t = static_cast<int>(tid); t < n; t += static_cast<int>(nt)) {
    char* w = detail::window(c, t);
    missing |= w == nullptr && !ring;
    if (t == static_cast<int>(tid)) mine = w;
  }
  // Also the entry barrier: nobody reads `result` from the previous call any more.
  if (__syncthreads_or(missing)) {
    if (tid == 0) --*c.barrier_epoch;  // this barrier did not happen
    return symcommNotSupported;
  }
  // Members through the ring: what the block handed over before is applied first (after
  // the bar.sync above, every thread's hand-overs are in), and the arrivals go as signals
  // that set the slot.
  if (tid == 0) {
    result = 0;
    if (ring) detail::ring_quiet(c);
  }
  // The block's earlier writes precede, through this bar.sync, the fence of each signalling
  // thread (bar.sync then fence.sc.sys then the store: cooperative groups' grid-barrier
  // pattern). With up to 32 members they are all in warp 0, whose fences run together.
  __syncthreads();
  const uint64_t e = epoch;
  const size_t slot = reinterpret_cast<char*>(c.barrier_slots + c.rank) - c.base;
  if (static_cast<int>(tid) < n) __threadfence_system();
  for (int t = static_cast<int>(tid); t < n; t += static_cast<int>(nt)) {
    char* w = t == static_cast<int>(tid) ? mine : detail::window(c, t);
    if (w == nullptr)
      detail::ring_signal(c, nullptr, nullptr, 0, c.barrier_slots + c.rank, e, symcommSignalSet, t);
    else
      detail::store_relaxed(reinterpret_cast<uint64_t*>(w + slot), e);
  }
  for (int t = static_cast<int>(tid); t < n; t += static_cast<int>(nt)) {
    // Member t's slot shows its arrival: a failure records t's world rank as the pe.
    const int w = world_rank(c, t);
    const int rc = detail::wait_local(c, c.barrier_slots + w, symcommCmpGe, e, w);
    if (rc != 0) atomicCAS(&result, 0, rc);
  }
  __syncthreads();
  // The barrier failed here: take the arrival back (every epoch is at least 1), so that a
  // member that comes late waits until its own bound instead of passing on it.
  if (result != 0)
    for (int t = static_cast<int>(tid); t < n; t += static_cast<int>(nt)) {
      if (char* w = detail::window(c, t))
        detail::store_relaxed(reinterpret_cast<uint64_t*>(w + slot), 0);
      else
        detail::ring_signal(c, nullptr, nullptr, 0, c.barrier_slots + c.rank, 0,
                            symcommSignalSet, t);
    }
  return result;
}

// --- Atomics ----------------------------------------------------------------------------------

namespace detail {
// Atomics need the member mapped (atomic with its GPU's own); elsewhere the call is refused
// and recorded (code symcommNotSupported).
__device__ __forceinline__ bool atomic_reach(const DeviceComm& c, const void* p, int pe) {
  if (window(c, pe) != nullptr) return true;
  record_error(c, symcommNotSupported, p, static_cast<symcommCmp_t>(kRefusedAtomic), 8, 0,
               world_rank(c, pe));
  return false;
}
}  // namespace detail

__device__ __forceinline__ uint64_t atomic_fetch_add(const DeviceComm& c, uint64_t* p,
                                                     uint64_t value, int pe) {
  if (!detail::allowed(c, p, 8, pe) || !detail::atomic_reach(c, p, pe)) return 0;
  return atomicAdd_system(reinterpret_cast<unsigned long long*>(detail::remote(c, p, pe)),
                          static_cast<unsigned long long>(value));
}

__device__ __forceinline__ uint64_t atomic_compare_swap(const DeviceComm& c, uint64_t* p,
                                                        uint64_t expected, uint64_t desired,
                                                        int pe) {
  if (!detail::allowed(c, p, 8, pe) || !detail::atomic_reach(c, p, pe)) return 0;
  return atomicCAS_system(reinterpret_cast<unsigned long long*>(detail::remote(c, p, pe)),
                          static_cast<unsigned long long>(expected),
                          static_cast<unsigned long long>(desired));
}

__device__ __forceinline__ uint64_t atomic_fetch(const DeviceComm& c, const uint64_t* p, int pe) {
  if (!detail::allowed(c, p, 8, pe) || !detail::atomic_reach(c, p, pe)) return 0;
  return detail::load_acquire(detail::remote(c, p, pe));
}

SYMCOMM_DEVICE_NS_END
}  // namespace symcomm

#endif  // __CUDACC__
#endif  // SYMCOMM_DETAIL_DEVICE_IMPL_CUH_
