// The device side of the GPU-to-proxy ring (DeviceNetRing, symcomm/device_comm.h): how the
// device API reaches team members that it cannot load from and store to (ranks on other
// nodes). Included by device_impl.cuh, after the waits; names in symcomm::detail are not
// part of the API.
//
// A put, get or put-signal through the ring returns once the transport carried it out (its
// local side was read or written, its data landed): the caller may reuse the source, and a
// get's destination holds the data. A signal returns once handed over (its value travels in
// the descriptor). The transport applies a rank's operations in ticket order; messages
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

// Hands `op` over: takes a ticket, waits until its slot is free (bounded, as every wait),
// writes the descriptor, then its ticket after a system-scope fence (which also publishes
// what the thread wrote before: a put's source). Returns the ticket, or ~0 where the wait
// failed (recorded in the error record; the operation is not carried out, and the ring is
// stuck at its ticket: the communicator has failed).
__device__ inline __noinline__ uint64_t ring_post(const RingContext& r, const DeviceNetOp& op) {
  const DeviceComm c = as_comm(r);
  const uint64_t t = atomicAdd(r.net.tail, 1ull);
  if (t >= r.net.capacity &&
      wait_local(c, r.net.freed, symcommCmpGe, t - r.net.capacity + 1, op.pe) != 0)
    return ~uint64_t{0};
  volatile DeviceNetOp* s = r.net.slots + (t & (r.net.capacity - 1));
  s->kind = op.kind;
  s->pe = op.pe;
  s->offset = op.offset;
  s->local = op.local;
  s->bytes = op.bytes;
  s->signal = op.signal;
  s->value = op.value;
  s->op = op.op;
  __threadfence_system();
  store_relaxed(const_cast<uint64_t*>(&s->ticket), t + 1);
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
  ring_run(r, op, true);
}

// A signal (bytes == 0) or a put-signal: the signal is applied after the data. Returns once
// handed over (a signal) or carried out (a put-signal's source has been read). One thread.
__device__ __forceinline__ void ring_signal(const DeviceComm& c, const void* dst,
                                            const void* src, size_t bytes, const uint64_t* sig,
                                            uint64_t value, symcommSignalOp_t op, int pe) {
  const int world = world_rank(c, pe);
  if (!ring_ok(c, sig, world) || (bytes && !ring_local_ok(c, src, bytes, world))) return;
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
  ring_run(r, d, bytes != 0);
}

}  // namespace detail
SYMCOMM_DEVICE_NS_END
}  // namespace symcomm

#endif  // __CUDACC__
#endif  // SYMCOMM_DETAIL_DEVICE_RING_CUH_
