// The device side of the GPU-to-proxy ring (DeviceNetRing, symcomm/device_comm.h): how the
// device API reaches team members that it cannot load from and store to (ranks on other
// nodes). Included by device_impl.cuh, after the waits; names in symcomm::detail are not
// part of the API.
//
// A put, get or put-signal through the ring returns once the transport carried it out (its
// local side was read or written, its data landed): the caller may reuse the source, and a
// get's destination holds the data. A signal returns once handed over (its value travels in
// the descriptor), and so does a put-signal of up to inline_max bytes (its payload travels
// in the descriptor, copied there by the calling thread). The transport applies a rank's operations in ticket order; messages
// (signals, small put-signals) are delivered but may not be applied yet when their ticket is
// done, so a quiet (and a fence, and a barrier) hands over a quiet of its own where anything
// went through the ring since the last one.
#ifndef SYMCOMM_DETAIL_DEVICE_RING_CUH_
#define SYMCOMM_DETAIL_DEVICE_RING_CUH_

#if defined(__CUDACC__)

namespace symcomm {
SYMCOMM_DEVICE_NS_BEGIN
namespace detail {

__device__ __forceinline__ bool has_ring(const DeviceComm& c) { return c.net.slots != nullptr; }

// What the ring's out-of-line functions take of the handle, through a pointer to a copy the
// caller makes on its slow path. They are out of line so that the callers' registers stay
// as they were (put_signal_block in a ring test kernel of 1024 threads needed 72 registers
// with them inlined, 66 with the arguments passed by value); they do not take the handle's
// address: a kernel whose handle is a plain by-value parameter would copy all of it to local
// memory.
struct RingContext {
  DeviceNetRing net;
  const volatile int32_t* abort_flag;
  DeviceError* error;
  uint64_t wait_timeout_ns;
  int32_t rank;
};

__device__ __forceinline__ RingContext ring_context(const DeviceComm& c) {
  return RingContext{c.net, c.abort_flag, c.error, c.wait_timeout_ns, c.rank};
}

// A handle with what wait_local and record_error read, from a RingContext.
__device__ __forceinline__ DeviceComm as_comm(const RingContext& r) {
  DeviceComm c{};
  c.rank = r.rank;
  c.abort_flag = r.abort_flag;
  c.error = r.error;
  c.wait_timeout_ns = r.wait_timeout_ns;
  c.net = r.net;
  return c;
}

// Waits until `word` >= value (wait_local), out of line, for the ring's paths (which are
// slow anyway): each inlined copy of the unrolled polling loop costs the kernel registers,
// and a comparison known here keeps the loop narrow.
__device__ inline __noinline__ int ring_wait(const RingContext& r, const uint64_t* word,
                                             uint64_t value, int pe) {
  return wait_local(as_comm(r), word, symcommCmpGe, value, pe);
}

// Takes a ticket and waits until its slot is free (bounded, as every wait). Returns the
// ticket, or ~0 where the wait failed (recorded in the error record; the ring is stuck at the
// ticket: the communicator has failed).
__device__ inline uint64_t ring_take(const RingContext& r, int pe) {
  const uint64_t t = atomicAdd(r.net.tail, 1ull);
  if (t >= r.net.capacity && ring_wait(r, r.net.freed, t - r.net.capacity + 1, pe) != 0)
    return ~uint64_t{0};
  return t;
}

// Writes `op` into ticket t's slot, with `kind`, `offset`, `local` and `bytes` in place of its
// own, then the ticket after a system-scope fence (which also publishes what the thread wrote
// before: a put's source, a bounce slot). Field by field from `op`, which keeps it narrow.
__device__ inline void ring_fill(const RingContext& r, uint64_t t, const DeviceNetOp& op,
                                 uint32_t kind, uint64_t offset, uint64_t local,
                                 uint64_t bytes) {
  volatile DeviceNetOp* s = r.net.slots + (t & (r.net.capacity - 1));
  s->kind = kind;
  s->pe = op.pe;
  s->offset = offset;
  s->local = local;
  s->bytes = bytes;
  s->signal = op.signal;
  s->value = op.value;
  s->op = op.op;
  __threadfence_system();
  store_relaxed(const_cast<uint64_t*>(&s->ticket), t + 1);
}

// Hands `op` over (ring_take, ring_fill). Returns the ticket, or ~0 (ring_take).
__device__ inline __noinline__ uint64_t ring_post(const RingContext& r, const DeviceNetOp& op) {
  const uint64_t t = ring_take(r, op.pe);
  if (t != ~uint64_t{0}) ring_fill(r, t, op, op.kind, op.offset, op.local, op.bytes);
  return t;
}

// Hands `op` over and, where `wait`, waits until the transport carried it out (an acquire:
// a get's data is visible). Out of line, as ring_post.
__device__ inline __noinline__ void ring_run(const RingContext& r, const DeviceNetOp& op,
                                             bool wait) {
  const uint64_t t = ring_post(r, op);
  if (wait && t != ~uint64_t{0}) wait_local(as_comm(r), r.net.done, symcommCmpGe, t + 1, op.pe);
}

// Everything handed over through the ring before (by any thread of this rank) is applied at
// its target. Nothing to do where nothing went through since the last quiet.
__device__ inline __noinline__ void ring_quiet_out_of_line(const RingContext& r) {
  const unsigned long long tail = *static_cast<volatile unsigned long long*>(r.net.tail);
  if (tail == *static_cast<volatile unsigned long long*>(r.net.flushed)) return;
  DeviceNetOp op{};
  op.kind = kDeviceNetQuiet;
  op.pe = r.rank;
  const uint64_t t = ring_post(r, op);
  if (t == ~uint64_t{0} || wait_local(as_comm(r), r.net.done, symcommCmpGe, t + 1) != 0) return;
  atomicMax(r.net.flushed, static_cast<unsigned long long>(t + 1));
}

__device__ __forceinline__ void ring_quiet(const DeviceComm& c) {
  const RingContext r = ring_context(c);
  ring_quiet_out_of_line(r);
}

// Whether `local` can be handed to the transport (global memory: its copy engines read and
// write it); where not, records the refusal (code symcommInvalidArgument).
__device__ __forceinline__ bool ring_local_ok(const DeviceComm& c, const void* local,
                                              uint64_t bytes, int world) {
  if (__isGlobal(local)) return true;
  record_error(c, symcommInvalidArgument, local, static_cast<symcommCmp_t>(kRefusedLocalSide),
               bytes, 0, world);
  return false;
}

// Whether the ring exists; where not (a handle of a team that was all mapped when it was
// made), records the refusal (code symcommNotSupported).
__device__ __forceinline__ bool ring_ok(const DeviceComm& c, const void* sym, int world) {
  if (has_ring(c)) return true;
  record_error(c, symcommNotSupported, sym, static_cast<symcommCmp_t>(kRefusedNoRing), 0, 0,
               world);
  return false;
}

// Whether [p, p + bytes) lies in this rank's heap window, which the transport reaches.
__device__ __forceinline__ bool ring_direct(const RingContext& r, const void* p, size_t bytes) {
  const char* q = static_cast<const char*>(p);
  return q >= r.net.heap_lo && q <= r.net.heap_hi &&
         bytes <= static_cast<size_t>(r.net.heap_hi - q);
}

// `bytes` from `src` to `dst`, which share their alignment modulo 16, by one thread: 16
// bytes at a time between single bytes at the ends. Out of line and narrow: a kernel's
// registers are its own live ones at a call plus the callee's, and kernels of 1024 threads
// that reach the ring must keep within 64.
__device__ inline __noinline__ void bounce_copy(char* dst, const char* src, uint64_t bytes) {
  uint64_t i = 0;
  for (; i < bytes && (reinterpret_cast<uintptr_t>(dst + i) & 15) != 0; ++i) dst[i] = src[i];
  for (; i + 16 <= bytes; i += 16)
    *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(src + i);
  for (; i < bytes; ++i) dst[i] = src[i];
}

// The piece of `op` (a put, get or put-signal; its `local` and `bytes` the caller's) that
// starts `done` bytes in, through a bounce slot: up to kDeviceNetBounceBytes - 16 bytes, at
// the slot's offset local % 16 (so that both copies run 16 bytes wide), carried out before it
// returns (a put-signal's signal goes with the last piece). Returns the bytes it moved, or 0
// where a wait failed (recorded; a slot or ticket is then left taken: the communicator has
// failed). One thread.
__device__ __forceinline__ uint64_t ring_bounce_piece(const RingContext& r, const DeviceNetOp& op,
                                                      uint64_t done) {
  constexpr uint64_t kPiece = kDeviceNetBounceBytes - 16;
  const uint64_t n = op.bytes - done < kPiece ? op.bytes - done : kPiece;
  const unsigned long long b = atomicAdd(r.net.bounce_tail, 1ull);
  const uint64_t slot = b % kDeviceNetBounceSlots;
  // The slot's generations only grow, one at a time: >= is this caller's turn.
  if (ring_wait(r, r.net.bounce_gen + slot, b / kDeviceNetBounceSlots, op.pe) != 0) return 0;
  char* local = reinterpret_cast<char*>(static_cast<uintptr_t>(op.local)) + done;
  char* bounce = r.net.bounce + slot * kDeviceNetBounceBytes + (op.local & 15);
  if (op.kind != kDeviceNetGet) bounce_copy(bounce, local, n);
  const uint64_t t = ring_take(r, op.pe);
  if (t == ~uint64_t{0}) return 0;
  const bool signal_now = op.kind != kDeviceNetPutSignal || done + n == op.bytes;
  ring_fill(r, t, op, signal_now ? op.kind : kDeviceNetPut, op.offset + done,
            reinterpret_cast<uintptr_t>(bounce), n);
  if (ring_wait(r, r.net.done, t + 1, op.pe) != 0) return 0;
  if (op.kind == kDeviceNetGet) bounce_copy(local, bounce, n);
  __threadfence();  // the copy out before the slot is handed on
  store_relaxed(r.net.bounce_gen + slot, b / kDeviceNetBounceSlots + 1);
  return n;
}

// `op` through the bounce slots, piece by piece (ring_bounce_piece).
__device__ inline __noinline__ void ring_bounced(const RingContext& r, const DeviceNetOp& op) {
  for (uint64_t done = 0, n = 1; done < op.bytes && n != 0; done += n)
    n = ring_bounce_piece(r, op, done);
}

// Hands `op` over and waits until it is carried out: directly where its local side is in the
// heap, through the bounce buffers where not.
__device__ __forceinline__ void ring_carry_out(const RingContext& r, const DeviceNetOp& op) {
  if (ring_direct(r, reinterpret_cast<const void*>(static_cast<uintptr_t>(op.local)), op.bytes))
    return ring_run(r, op, true);
  ring_bounced(r, op);
}

// A put (kDeviceNetPut) or get (kDeviceNetGet) of `bytes` between the symmetric `sym` on
// team rank pe and `local`, carried out when it returns. One thread calls.
__device__ __forceinline__ void ring_transfer(const DeviceComm& c, uint32_t kind,
                                              const void* sym, const void* local, size_t bytes,
                                              int pe) {
  const int world = world_rank(c, pe);
  if (bytes == 0 || !ring_ok(c, sym, world) || !ring_local_ok(c, local, bytes, world)) return;
  DeviceNetOp op{};
  op.kind = kind;
  op.pe = world;
  op.offset = static_cast<uint64_t>(static_cast<const char*>(sym) - c.base);
  op.local = reinterpret_cast<uintptr_t>(local);
  op.bytes = bytes;
  const RingContext r = ring_context(c);
  ring_carry_out(r, op);
}

// Hands over `op`, a put-signal of up to inline_max bytes, with its payload copied from `src`
// (any memory the thread reads) into the descriptor, as 8-byte words (the slot is host
// memory: a PCIe write each). Returns once handed over. Out of line, as ring_post.
__device__ inline __noinline__ void ring_post_inline(const RingContext& r, const DeviceNetOp& op,
                                                     const void* src) {
  const uint64_t t = ring_take(r, op.pe);
  if (t == ~uint64_t{0}) return;
  volatile uint64_t* data = reinterpret_cast<volatile uint64_t*>(
      const_cast<uint8_t*>((r.net.slots + (t & (r.net.capacity - 1)))->data));
  const unsigned char* from = static_cast<const unsigned char*>(src);
  for (uint64_t w = 0; w * 8 < op.bytes; ++w) {
    uint64_t v = 0;
    for (uint64_t b = 0; b < 8 && w * 8 + b < op.bytes; ++b)
      v |= static_cast<uint64_t>(from[w * 8 + b]) << (8 * b);
    data[w] = v;
  }
  ring_fill(r, t, op, kDeviceNetPutSignalInline, op.offset, 0, op.bytes);
}

// A signal (bytes == 0) or a put-signal: the signal is applied after the data. Returns once
// handed over (a signal, a put-signal of up to inline_max bytes) or carried out (a larger
// put-signal's source has been read). One thread.
__device__ __forceinline__ void ring_signal(const DeviceComm& c, const void* dst,
                                            const void* src, size_t bytes, const uint64_t* sig,
                                            uint64_t value, symcommSignalOp_t op, int pe) {
  const int world = world_rank(c, pe);
  const bool inline_payload = bytes != 0 && bytes <= c.net.inline_max;
  if (!ring_ok(c, sig, world) ||
      (bytes && !inline_payload && !ring_local_ok(c, src, bytes, world)))
    return;
  DeviceNetOp d{};
  d.kind = bytes ? kDeviceNetPutSignal : kDeviceNetSignal;
  d.pe = world;
  d.offset = bytes ? static_cast<uint64_t>(static_cast<const char*>(dst) - c.base) : 0;
  d.local = reinterpret_cast<uintptr_t>(src);
  d.bytes = bytes;
  d.signal = static_cast<uint64_t>(reinterpret_cast<const char*>(sig) - c.base);
  d.value = value;
  d.op = static_cast<uint32_t>(op);
  const RingContext r = ring_context(c);
  if (bytes == 0) return ring_run(r, d, false);
  if (inline_payload) return ring_post_inline(r, d, src);
  ring_carry_out(r, d);
}

}  // namespace detail
SYMCOMM_DEVICE_NS_END
}  // namespace symcomm

#endif  // __CUDACC__
#endif  // SYMCOMM_DETAIL_DEVICE_RING_CUH_
