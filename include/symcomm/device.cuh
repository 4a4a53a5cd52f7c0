/*
 * symcomm device API: one-sided communication from inside CUDA kernels, through the
 * symmetric heap of a team. Header-only; no relocatable device code, no device globals.
 *
 *   __global__ void k(const __grid_constant__ symcomm::DeviceComm c, float* sym,
 *                     const float* mine, size_t n) {
 *     int right = (symcomm::team_rank(c) + 1) % symcomm::team_size(c);
 *     symcomm::put_block(c, sym, mine, n * sizeof(float), right);
 *     symcomm::barrier_block(c);  // every put of every member is visible after it
 *   }
 *
 * Get the handle on the host with symcommGetDeviceComm (symcomm/device_comm.h) and pass it
 * by value, as a `const __grid_constant__` parameter: the windows of team members 0..7 are
 * then read from the parameter space (constant cache), which a wait's acquire does not
 * empty; a plain by-value parameter is copied to local memory when indexed.
 *
 * Every function takes the handle first. `pe` is always a rank of the handle's
 * TEAM (0 .. team_size - 1), never a world rank.
 *
 * Members on other nodes. A member that is not load/store accessible (ptr(c, p, pe) ==
 * nullptr: a rank on another node, reached by the net transport) is reached through the
 * rank's GPU-to-proxy ring (DeviceNetRing in symcomm/device_comm.h): one thread of the group
 * hands the operation to the transport's thread, which carries it out. put, get, the
 * signals, put_signal, fence, quiet and barrier_block work so, with the same guarantees;
 * such a put, get or put_signal returns once carried out (microseconds to milliseconds:
 * for fine-grained traffic to such members, gather it into larger calls), except a
 * put_signal of up to c.net.inline_max bytes (64 by default), whose payload the calling
 * thread copies into the ring's descriptor: it returns once handed over, and its source may
 * be any memory, shared memory too. Otherwise their local side (a put's source, a get's
 * destination) must be global memory (cudaMalloc, symmetric, cudaHostAlloc mapped), not
 * shared or local memory: such a call does nothing and is recorded (code
 * symcommInvalidArgument). Atomics to such a member are refused and recorded
 * (symcommNotSupported), returning 0. A handle of a team whose members were all mapped has
 * no ring.
 *
 * A symmetric address is an address of THIS rank's heap (as symcommMalloc returned it,
 * anywhere inside an allocation); the function finds the peer's copy. The local side of a
 * put or get (its source or destination) may be any memory the thread can address: global
 * memory (cudaMalloc, symmetric or not) or shared memory. Pointers and sizes need no
 * alignment: 16-byte vector accesses are used when source and destination agree modulo 16,
 * otherwise the widest access that both allow.
 *
 * Scopes: `put`/`get` are called by one thread on its own; `_warp` variants by all 32
 * lanes of a warp, `_block` variants by all threads of a block, with identical arguments,
 * and they synchronise the group (__syncwarp / __syncthreads) before returning.
 *
 * Waits (signal_wait_until*, barrier_block) are bounded: they return 0, or
 * symcommTimeout (6) once c.wait_timeout_ns has passed (0, from SYMCOMM_WAIT_TIMEOUT=0,
 * means no time bound), or symcommPeerLost (7) once the communicator is aborted. A failure
 * is recorded in c.error (a later failure leaves an earlier record alone: DeviceError::pe is
 * the waiting rank for a signal wait, the member that did not arrive for barrier_block) and
 * the next host call on the communicator that checks it reports it (see symcomm.h at
 * symcommSignalWaitOnStream for which calls do).
 * Nothing here traps or exits the kernel: check the code and return.
 *
 * Bounds: the symmetric range of a call ([dst, dst + bytes) of a put, [src, src + bytes) of
 * a get, the 8 bytes of a signal word or an atomic's word) must lie inside one live
 * allocation, as the host calls check (a range past its end lands in the next allocation,
 * which belongs to other code). The device functions trust this unless SYMCOMM_DEVICE_CHECKS
 * is defined before this header is included (a debug mode): then each call looks its range
 * up in the heap's table of allocations (host-mapped: tens of microseconds a call), and a
 * call whose range leaves its allocation does nothing, is recorded in c.error (code
 * symcommInvalidArgument; see DeviceError), and the communicator's next host call reports
 * it; a refused wait returns symcommInvalidArgument, a refused atomic returns 0. With more
 * than SYMCOMM_DEVICE_MAX_ALLOCATIONS live allocations nothing is checked. Translation units
 * with and without the checks may be linked together.
 *
 * Memory model (what is guaranteed, at system scope; docs/memory-model.md expands):
 *  - put/get alone order nothing. On return the group's loads and stores are issued: the
 *    source may be reused, and a get's destination holds the data for the group.
 *  - fence(c): this thread's puts, stores and atomics to any peer issued before it are
 *    observed before those issued after it, by any thread that observes the later one.
 *  - quiet(c): this thread's earlier puts, stores and atomics are complete: visible to any
 *    thread in the system that reads after synchronising with us (even through a relaxed
 *    signal_op issued after the quiet). quiet_warp / quiet_block: the same for every thread
 *    of the warp / block.
 *  - put_signal*: the data (of all threads of the group), then a fence, then the signal
 *    update. signal_op alone is a relaxed system-scope update, like NVSHMEM's: it orders
 *    nothing before it (call fence() first, or use put_signal, to publish data with it).
 *  - signal_wait_until*: an acquire. Once a wait observes a value written by a signal, the
 *    waiting thread (the whole block, for the _block variant) sees everything the signaller
 *    wrote before the signal, put_signal's data included. Signals from different senders
 *    to one word are not ordered with each other; ADD from several senders counts exactly.
 *  - barrier_block: when it returns 0, every member's block has entered it, and everything
 *    any thread of any member's calling block wrote before entering (puts, stores,
 *    atomics) is visible to every thread of every member's block after it. Writes from
 *    other blocks of a grid are covered only if they are ordered before the caller's entry.
 *  - atomic_fetch_add / atomic_compare_swap are relaxed system-scope read-modify-writes:
 *    exact under contention from every rank, ordered by nothing (add a fence); atomic_fetch
 *    is an acquire load.
 */
#ifndef SYMCOMM_DEVICE_CUH_
#define SYMCOMM_DEVICE_CUH_

#include "symcomm/device_comm.h"

#if defined(__CUDACC__)

#include <cstddef>
#include <cstdint>

/* Functions compiled with SYMCOMM_DEVICE_CHECKS live in an inline namespace of their own, so
 * that the checked and the plain definitions never meet at link time. */
#ifdef SYMCOMM_DEVICE_CHECKS
#define SYMCOMM_DEVICE_NS_BEGIN inline namespace checked {
#define SYMCOMM_DEVICE_NS_END }
#else
#define SYMCOMM_DEVICE_NS_BEGIN
#define SYMCOMM_DEVICE_NS_END
#endif

namespace symcomm {
SYMCOMM_DEVICE_NS_BEGIN

/* --- The team and addresses ------------------------------------------------------------ */
__device__ __forceinline__ int team_rank(const DeviceComm& c);
__device__ __forceinline__ int team_size(const DeviceComm& c);
/* World rank of team rank `team_pe`: team_start + team_pe * team_stride. */
__device__ __forceinline__ int world_rank(const DeviceComm& c, int team_pe);
/* The other way: the team rank of world rank `world`, or -1 if it is not a member. */
__device__ __forceinline__ int team_rank_of(const DeviceComm& c, int world);
/* symcommTeamTranslate on the device: the team rank in dst's team of team rank `src_pe` of
 * src's team (handles of two teams of one communicator), or -1 where that rank is not a
 * member of dst's team or src_pe is not in [0, team_size(src)). */
__device__ __forceinline__ int team_translate(const DeviceComm& src, int src_pe,
                                              const DeviceComm& dst);
/* The copy on team rank `pe` of the symmetric object `p`, for direct loads and stores;
 * nullptr if `pe` is not load/store accessible. ptr(c, p, team_rank(c)) == p. */
template <typename T>
__device__ __forceinline__ T* ptr(const DeviceComm& c, T* p, int pe);

/* --- Data movement: `dst` (put) / `src` (get) are symmetric; the other side is local ---- */
__device__ __forceinline__ void put(const DeviceComm& c, void* dst, const void* src,
                                    size_t bytes, int pe);
__device__ __forceinline__ void put_warp(const DeviceComm& c, void* dst, const void* src,
                                         size_t bytes, int pe);
__device__ __forceinline__ void put_block(const DeviceComm& c, void* dst, const void* src,
                                          size_t bytes, int pe);
__device__ __forceinline__ void get(const DeviceComm& c, void* dst, const void* src,
                                    size_t bytes, int pe);
__device__ __forceinline__ void get_warp(const DeviceComm& c, void* dst, const void* src,
                                         size_t bytes, int pe);
__device__ __forceinline__ void get_block(const DeviceComm& c, void* dst, const void* src,
                                          size_t bytes, int pe);

/* --- Signals: 64-bit symmetric words, 8-byte aligned ------------------------------------ */
/* Sets `sig` on pe to `value` (symcommSignalSet) or adds `value` (symcommSignalAdd): a
 * relaxed system-scope update that orders nothing before it (see fence and put_signal).
 * Other op values update nothing. */
__device__ __forceinline__ void signal_op(const DeviceComm& c, uint64_t* sig, uint64_t value,
                                          symcommSignalOp_t op, int pe);
/* put, fence, signal_op: a peer that sees the signal sees the data. `bytes` may be 0. In
 * the warp and block variants one thread updates the signal once, after every thread's
 * data. */
__device__ __forceinline__ void put_signal(const DeviceComm& c, void* dst, const void* src,
                                           size_t bytes, uint64_t* sig, uint64_t value,
                                           symcommSignalOp_t op, int pe);
__device__ __forceinline__ void put_signal_warp(const DeviceComm& c, void* dst, const void* src,
                                                size_t bytes, uint64_t* sig, uint64_t value,
                                                symcommSignalOp_t op, int pe);
__device__ __forceinline__ void put_signal_block(const DeviceComm& c, void* dst,
                                                 const void* src, size_t bytes, uint64_t* sig,
                                                 uint64_t value, symcommSignalOp_t op, int pe);
/* Waits until THIS rank's word `sig` compares to `value` as `cmp` says (acquire). Returns
 * 0, symcommTimeout or symcommPeerLost (see the top of this file). */
__device__ __forceinline__ int signal_wait_until(const DeviceComm& c, uint64_t* sig,
                                                 symcommCmp_t cmp, uint64_t value);
/* All threads of the block call; thread 0 waits; every thread gets the same result. */
__device__ __forceinline__ int signal_wait_until_block(const DeviceComm& c, uint64_t* sig,
                                                       symcommCmp_t cmp, uint64_t value);

/* --- Ordering and completion ------------------------------------------------------------ */
__device__ __forceinline__ void fence(const DeviceComm& c);
__device__ __forceinline__ void quiet(const DeviceComm& c);
/* All 32 lanes of the warp call. */
__device__ __forceinline__ void quiet_warp(const DeviceComm& c);
/* All threads of the block call. */
__device__ __forceinline__ void quiet_block(const DeviceComm& c);

/* --- Barrier ----------------------------------------------------------------------------- */
/* All threads of ONE block per member call it; at most one block per rank may be in a
 * barrier of a given team at a time (the team's slots and epoch are shared), and every
 * member calls barriers of the team in the same order (host stream barriers included).
 * Returns 0, symcommTimeout, symcommPeerLost, or symcommNotSupported without waiting if a
 * member is neither load/store accessible nor reached through the ring. Members on other
 * nodes get this rank's arrival as a signal through the ring (after a quiet there). Any
 * number of threads per block works. A failed
 * wait records the world rank of a member that did not arrive in c.error->pe. After a
 * failure the members' barrier counts may disagree (a member that never arrived did not
 * count it): the team's barriers cannot be trusted any more (destroy it, split a new one). */
__device__ __forceinline__ int barrier_block(const DeviceComm& c);

/* --- Atomics on 64-bit symmetric words (8-byte aligned) at team rank pe ------------------ */
/* pe must be load/store accessible: to a member on another node they are refused (above). */
/* Returns the previous value. */
__device__ __forceinline__ uint64_t atomic_fetch_add(const DeviceComm& c, uint64_t* p,
                                                     uint64_t value, int pe);
/* Stores `desired` if the word equals `expected`; returns the previous value. */
__device__ __forceinline__ uint64_t atomic_compare_swap(const DeviceComm& c, uint64_t* p,
                                                        uint64_t expected, uint64_t desired,
                                                        int pe);
/* Acquire load. */
__device__ __forceinline__ uint64_t atomic_fetch(const DeviceComm& c, const uint64_t* p, int pe);

SYMCOMM_DEVICE_NS_END
}  // namespace symcomm

#include "symcomm/detail/device_impl.cuh"

#endif /* __CUDACC__ */
#endif /* SYMCOMM_DEVICE_CUH_ */
