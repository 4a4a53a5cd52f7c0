// Signals and waits between the blocks of the collectives' kernels on different GPUs (sm,
// twoshot, relay; ll's data carries its own flags: ll_packet.cuh).
//
// A signal publishes what the block did before it: the block's __syncthreads (the caller's),
// then the signalling thread's fence.sc.sys and a relaxed system-scope store, the pattern of
// cooperative groups' grid barrier, which the device API's put_signal_block uses too. An
// acknowledgement that a peer may overwrite what this block read (a write after the block's
// reads, not data to publish) is the relaxed store alone: every read has returned its value
// before the barrier, and the store follows it (as NCCL's receivers post their steps; a
// fence.sys there costs some 0.6 us a time). A wait is an acquire poll by one thread, bounded
// (SYMCOMM_WAIT_TIMEOUT, abort: a failure is recorded in the DeviceComm's error slot), then a
// __syncthreads that tells the block how it ended. Data other GPUs wrote is then loaded
// through L2 (load_shared).
#pragma once

#include <type_traits>

#include "coll/device/env.cuh"

namespace symcomm {
namespace protocol {

// One thread: `value` into `word` (usually a peer's), after everything the block did before
// the caller's __syncthreads. `word` is the address, or a callable that returns it: then the
// address is computed after the fence, the order the twoshot and relay kernels were tuned
// with (the compiler keeps it; computed before, their code comes out otherwise).
template <typename Word>
__device__ __forceinline__ void signal_release(Word word, uint64_t value) {
  __threadfence_system();
  if constexpr (std::is_pointer<Word>::value)
    detail::store_relaxed(word, value);
  else
    detail::store_relaxed(word(), value);
}

// The thread where `waiter` holds polls `word` (this rank's) until it is at least `value`;
// then a barrier of the block (every thread calls it). Nonzero, in every thread, where the
// wait failed.
__device__ __forceinline__ int block_wait(const DeviceComm& c, bool waiter, const uint64_t* word,
                                          uint64_t value) {
  int rc = 0;
  if (waiter) rc = detail::wait_local(c, word, symcommCmpGe, value);
  return __syncthreads_or(rc);
}

// Loads of data that other GPUs wrote (after the acquire of their signal) bypass L1
// (ld.global.cg): nothing is read twice, and no line cached by an earlier round or call can
// be hit. W: uint4 or an unsigned integer type.
template <typename W>
__device__ __forceinline__ W load_shared(const void* at) {
  return __ldcg(static_cast<const W*>(at));
}

}  // namespace protocol
}  // namespace symcomm
