// The cuda space's sends and receives (coll/p2p.h): one kernel per group and communicator,
// blocks per lane (the calls between this rank and one peer in one direction, in their
// order), over mailboxes like the host space's, through the device API (load and store to
// members of this node, the GPU-to-proxy ring to the others). Its plan travels as the
// kernel's parameters, which bounds a group's calls (P2pPlan::kMaxCalls, kMaxLanes).
//
// A lane to a member of this node runs several blocks, its ways (as many as the ranks
// agreed, coll/p2p.h; at most SYMCOMM_P2P_WAYS): each message is cut into that many parts of equal size
// (coll/p2p_parts.h: whole 256-byte units, the last part shorter, parts past the end empty),
// and way w carries part w through its own ring of slots and its own counters, as a lane of
// one way carries a whole message. Every way sends at least one chunk per message, with the
// message's header, so both ends count the same chunks on each way whatever the sizes (a
// mismatched pair included). One block moved 12-14 GB/s between 2 H200 over NVLink,
// 8 ways 85-96 GB/s, 32 ways of 256 KiB slots 309 GB/s (symcomm-bench coll --ops sendrecv,
// 8 to 64 MiB: bench/results/h200x2/coll_p2p_group_rooted_940b25a.jsonl,
// coll_sendrecv_ways_1c280bd.jsonl, coll_sendrecv_w32_s256K_0ce7bfb.jsonl); a lane to
// another node keeps one way (its puts are the proxy's).
#pragma once

#include <cstdint>

#include "symcomm/device_comm.h"

namespace symcomm {

struct P2pCall {
  const char* send;  // a send's buffer (nullptr for a receive)
  char* recv;        // a receive's buffer
  uint64_t bytes;
  int32_t team;  // what the caller named, carried in the first chunk's header and checked
  int32_t pad;
};

// The most ways of a lane to a member of this node (above; SYMCOMM_P2P_WAYS picks fewer).
constexpr int kP2pWays = 32;

struct P2pLane {
  int32_t peer;   // world rank
  int16_t first;  // its calls: calls[first, first + count)
  int16_t count;
  int16_t block;  // its first block; its ways are blocks [block, block + ways)
  int8_t send;    // 1: sends to peer, 0: receives from it
  int8_t ways;    // to a member of this node the communicator's ways, else 1
};

// The first receive whose send did not match it, in mapped host memory (the kernel writes
// it; the communicator's next send or receive reports and clears it).
struct P2pMismatch {
  int32_t set;
  int32_t peer;       // the sender
  int32_t team;       // the sender's team
  int32_t want_team;  // the receiver's
  uint64_t total;     // the sender's bytes
  uint64_t want;      // the receiver's
};

struct P2pPlan {
  static constexpr int kMaxLanes = 64;
  static constexpr int kMaxCalls = 72;
  // Indexed by (peer, way) as peer * ways + way (a lane of one way uses way 0):
  char* boxes;        // symmetric: [nranks][ways][slots][slot_bytes], this rank's mailboxes
  uint64_t* filled;   // symmetric: [nranks][ways]
  uint64_t* freed;    // symmetric: [nranks][ways]
  char* headers;      // symmetric: [nranks][ways][64], a send's header before it goes out
  uint64_t* sent;     // device memory: [nranks][ways], chunks sent so far
  uint64_t* taken;    // device memory: [nranks][ways], chunks taken from the mailbox
  P2pMismatch* mismatch;
  // The lane that swaps *mismatch_claim (device memory) from mismatch_gen to mismatch_gen + 1
  // writes the record; the host moves to the next generation once it reported one.
  unsigned long long* mismatch_claim;
  uint64_t mismatch_gen;
  uint64_t slot_bytes;
  int32_t slots;
  int32_t ways;     // the ways of a lane to a member of this node, as the ranks agreed
  int32_t nlanes;
  int32_t nblocks;  // the lanes' ways, all together
  P2pLane lanes[kMaxLanes];
  P2pCall calls[kMaxCalls];
};
// The kernel's parameters fit the 4 KiB that every launch takes.
static_assert(sizeof(P2pPlan) + sizeof(DeviceComm) <= 4000, "the plan fits a launch");

// The cuda space's state of a communicator's sends and receives (p2p_cuda.cu): the counters
// in device memory, the mismatch record, an event that orders one group's kernel after the
// previous one (they share the counters), except while a stream is being captured, and one
// that joins a group's other streams to its kernel.
class P2pCuda {
 public:
  // `pairs`: the most (peer, way) pairs, nranks * kP2pWays. Throws where the memory cannot
  // be had.
  P2pCuda(int device, int pairs);
  ~P2pCuda();
  P2pCuda(const P2pCuda&) = delete;
  P2pCuda& operator=(const P2pCuda&) = delete;

  // Sets the plan's counters and mismatch record.
  void fill(P2pPlan& plan) const;
  // The kernel's blocks that the GPU (or this MPS client's share) holds at once: every block
  // of a group must run beside the others.
  int max_blocks() const { return max_blocks_; }
  // The recorded mismatch, cleared: false where none.
  bool take_mismatch(P2pMismatch* out);
  // Launches the plan's kernel on `stream` (a cudaStream_t of the device), after the
  // previous group's and after the work before it on `others` (the group's other streams),
  // which then wait for it.
  void launch(const DeviceComm& c, const P2pPlan& plan, void* stream, const void* const* others,
              int nothers);

 private:
  int device_;
  uint64_t* counters_ = nullptr;  // [2 pairs + 1]: sent, taken, the mismatch claim
  uint64_t mismatch_gen_ = 0;
  P2pMismatch* mismatch_ = nullptr;
  void* last_ = nullptr;  // a cudaEvent_t: the previous group's kernel
  void* join_ = nullptr;  // a cudaEvent_t: a group's other streams' fork and join
  int pairs_;           // (peer, way) pairs
  int max_blocks_ = 0;  // the kernel's blocks that the GPU (or this MPS client's share) holds
};

// Zeroes `bytes` of this GPU's memory at `p` and waits (the mailboxes' words at creation).
void p2p_clear_device(int device, void* p, size_t bytes);

}  // namespace symcomm
