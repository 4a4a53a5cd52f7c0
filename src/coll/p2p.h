// Two-sided calls: symcommSendOnStream / symcommRecvOnStream, and the groups that issue several
// of them as one unit (symcommGroupStart / symcommGroupEnd).
//
// Every rank holds, in its heap, a mailbox per sender: kSlots slots of slot_bytes() each (a
// 64-byte header, written by a message's first chunk only, then data), and two words per
// peer: `filled[s]`, the chunks sender s has put into its mailbox here (s adds 1 after each
// chunk's data, by put-signal, one per chunk), and `freed[r]`, the chunks receiver r has copied
// out of this rank's mailbox there (r adds 1 here). A message goes in chunks, each in the next
// slot; the sender waits for a free slot (`freed`), the receiver for a filled one (`filled`).
// Sends and receives between two ranks are matched in the order of their calls, whatever the
// team; the first chunk's header carries the message's size and team, so that a receive whose
// size or team differs from the send's fails, naming both, after taking the whole message out
// of the mailbox (the next pair still matches).
//
// A call outside a group is a group of one. A group makes progress on all its calls at once:
// the first unfinished send to each peer and the first unfinished receive from each peer move
// a chunk whenever they can, so that a ring of sends and receives, or an all-to-all-v written
// with them, cannot deadlock whatever the sizes. A wait with nothing to move is bounded by
// SYMCOMM_WAIT_TIMEOUT and ends when the communicator is aborted or loses a peer.
//
// The host space completes every call in it. The cuda space runs a group (of one
// communicator) as one kernel on the calls' stream (coll/p2p_plan.h): a block per lane, so that
// every lane moves at once; a receive that does not match its send is reported by the
// communicator's next send or receive, and a wait that times out is recorded as a kernel's
// device call's is (the next call on the communicator reports it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "coll/coll.h"
#include "coll/p2p_plan.h"

namespace symcomm {

class PointToPoint {
 public:
  static constexpr int kSlots = 4;
  static constexpr size_t kHeader = 64;

  // Collective over the communicator (made with it, before a barrier that every rank passes
  // before any sends): allocates and clears every rank's mailboxes (the host space only).
  PointToPoint(const Topology& topology, Rma& rma, Heap& heap, symcommMemorySpace_t space);

  // One call of a group: `peer` a world rank, `bytes` the message's size, `team` what the
  // caller named (checked against the sender's).
  struct Call {
    PointToPoint* owner;
    const void* handle;  // the communicator's (symcommComm_t), checked before the calls run
    bool send;
    int peer;
    symcommTeam_t team;
    const char* send_buf;
    char* recv_buf;
    size_t bytes;
    symcommStream_t stream;  // the cuda space's
  };
  // Runs `calls` (of any communicators in the host space; of one in the cuda space) to their
  // end, all at once; in the cuda space, enqueues them.
  static void run(std::vector<Call>& calls);
  // The cuda space: throws the mismatch a kernel recorded since the last call (once).
  void raise_mismatch();

  size_t slot_bytes() const { return slot_bytes_; }
  size_t chunk_bytes() const { return slot_bytes_ - kHeader; }
  symcommMemorySpace_t space() const { return space_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  struct Progress;
  // Moves the next chunk of `c` if it can; true where it did.
  bool step(Call& c, Progress& p);
  static void run_host(std::vector<Call>& calls);
  void run_cuda(const std::vector<Call>& calls);
  char* mailbox(int sender, int slot) const;  // this rank's symmetric address

  Rma& rma_;
  symcommMemorySpace_t space_;
  int rank_, nranks_;
  size_t slot_bytes_;
  // Indexed by peer, in the cuda space by (peer, way) (coll/p2p_plan.h):
  uint64_t* filled_ = nullptr;  // [nranks (x ways)], symmetric
  uint64_t* freed_ = nullptr;   // [nranks (x ways)], symmetric
  char* boxes_ = nullptr;       // [nranks (x ways)][kSlots][slot_bytes_], symmetric
  char* headers_ = nullptr;     // the cuda space's: [nranks x ways][kHeader], symmetric
  std::unique_ptr<P2pCuda> cuda_;
  // The cuda space's ways of a lane to a member of this node (coll/p2p_plan.h), agreed by
  // every rank when the communicator is made: as many as keep a group of a lane to and from
  // every rank within the blocks that every rank's GPU holds at once (the kernel uses
  // 126 registers a thread at 512 threads, one block an SM: 8 ranks under MPS at a quarter of
  // an H200 each hold 33), SYMCOMM_P2P_WAYS at most.
  int lsa_ways_ = 1;
  DeviceComm world_{};  // the cuda space's kernels' handle of the world team
  // The host space's progress: [peer] chunks sent to it, taken from its mailbox.
  std::vector<uint64_t> sent_, taken_;
  std::vector<char> first_;  // a message's first chunk, its header before its data
};

// The calling thread's group: depth of symcommGroupStart calls not yet ended, and the calls
// queued in it: sends and receives, and collectives, which its end runs first, ordered by
// communicator (its agreed id) and, within one, by call, so that ranks that called the
// collectives of several communicators in different orders still run them in one order.
struct Group {
  // An all-reduce that the group's end may run together with the ones next to it, as one
  // all-reduce of their buffers packed (capi/coll_batch.h).
  struct AllReduce {
    symcommComm_t comm;
    symcommTeam_t team;
    const void* send;
    void* recv;
    size_t count;
    symcommDataType_t type;
    symcommRedOp_t op;
    symcommStream_t stream;
  };
  struct Collective {
    uint64_t comm_id;
    std::function<symcommResult_t()> run;  // the call again, outside the group
    std::optional<AllReduce> all_reduce;   // where it is one that may run packed
  };
  int depth = 0;
  std::vector<PointToPoint::Call> calls;
  std::vector<Collective> collectives;
};
Group& this_threads_group();

}  // namespace symcomm
