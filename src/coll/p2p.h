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
// The host memory space only, so far: every call completes in it (the cuda space refuses with
// symcommNotSupported).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "coll/coll.h"

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
  };
  // Runs `calls` (of any communicators) to their end, all at once.
  static void run(std::vector<Call>& calls);

  size_t slot_bytes() const { return slot_bytes_; }
  size_t chunk_bytes() const { return slot_bytes_ - kHeader; }
  symcommMemorySpace_t space() const { return space_; }
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

 private:
  struct Progress;
  // Moves the next chunk of `c` if it can; true where it did.
  bool step(Call& c, Progress& p);
  char* mailbox(int sender, int slot) const;  // this rank's symmetric address

  Rma& rma_;
  symcommMemorySpace_t space_;
  int rank_, nranks_;
  size_t slot_bytes_;
  uint64_t* filled_ = nullptr;  // [nranks], symmetric
  uint64_t* freed_ = nullptr;   // [nranks], symmetric
  char* boxes_ = nullptr;       // [nranks][kSlots][slot_bytes_], symmetric
  std::vector<uint64_t> sent_, taken_;  // [peer]: chunks sent to it, taken from its mailbox
  std::vector<char> first_;  // a message's first chunk, its header before its data
};

// The calling thread's group: depth of symcommGroupStart calls not yet ended, and the calls
// queued in it.
struct Group {
  int depth = 0;
  std::vector<PointToPoint::Call> calls;
};
Group& this_threads_group();

}  // namespace symcomm
