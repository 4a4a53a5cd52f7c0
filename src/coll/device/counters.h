// The counters of the collectives' kernels (ll, twoshot, relay; sm keeps its own per
// channel: sm/plan.h), for host and device code. Each rank's area holds, per kind of
// counter, one word per block (or lane) of the grid and per world rank: kind k, block b, rank
// w at words[(k * kSlots + b) * nranks + w], kSlots the most blocks of a grid. Kinds written
// by a peer (a signal: "round g is ready") are indexed by the writer's world rank; kinds this
// rank keeps for itself (rounds done with w, ever) by the peer's. Blocks of one index across
// a team form an independent group, so no ordering between blocks is needed. (The twoshot
// and relay kernels write counter_word's arithmetic out; their emulations check that both
// name the same words.)
//
// The counters only grow: a kernel reads this rank's own ones when it starts, derives every
// value it signals and waits for from them (both sides of a pair derive the same amounts
// from the call alone) and adds what it did when it ends. Nothing is reset between calls, so
// back-to-back calls on a stream need no host synchronisation and a CUDA graph replays
// correctly (the kernel reads the counters when it runs, not when it was captured). Counters
// are per pair of world ranks, shared by every team: calls that involve the same two ranks
// must be made in the same order on both.
#pragma once

#include "symcomm/device_comm.h"

namespace symcomm {
namespace protocol {

// Forced inline on the device, as the kernels' own index functions are.
#if defined(__CUDACC__)
#define SYMCOMM_COUNTER_WORD __host__ __device__ __forceinline__
#else
#define SYMCOMM_COUNTER_WORD inline
#endif
template <int kSlots, typename Kind>  // Kind: an algorithm's enum of kinds, or int
SYMCOMM_COUNTER_WORD uint64_t* counter_word(uint64_t* words, Kind kind, int slot, int nranks,
                                            int w) {
  return words + (static_cast<uint64_t>(kind) * kSlots + static_cast<uint64_t>(slot)) *
                     static_cast<uint64_t>(nranks) +
         static_cast<uint64_t>(w);
}

}  // namespace protocol
}  // namespace symcomm
