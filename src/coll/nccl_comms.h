// The NCCL communicators of one symcomm communicator: one per team membership (start,
// stride, size), made on the first use over that team and kept until the communicator is
// finalized. They are the state of the "nccl" collective algorithm (make_state), which the
// "nccl" decomposition backend shares through its DecompContext.
//
// Making one is collective over the team, every member calls (a collective, a transpose, a
// halo exchange or Decomp::create): team rank 0 calls ncclGetUniqueId and sends the 128-byte
// id to every other member over the bootstrap network (Bootstrap::send_to), which reaches
// ranks that are not load/store accessible too (another node, or GPUs without peer access):
// NCCL is the algorithm for teams no other one reaches. Then ncclCommInitRank with the team
// rank, which allocates device memory: the first use over a team cannot be captured in a
// CUDA graph.
//
// Communicators are keyed by membership, not by team id: ids are reused after a team is
// destroyed, and two teams with the same members (a decomposition's row and the world, say)
// share one communicator. A communicator exists on every member of its team or on none, and
// is destroyed in key order on every rank at finalize.
//
// When the symcomm communicator loses a peer, abort() (from the monitor thread) aborts every
// NCCL communicator on a thread of its own with ncclCommAbort, which ends NCCL kernels that
// wait for the lost peer; every later use throws symcommPeerLost.
#pragma once

#ifdef SYMCOMM_HAVE_NCCL

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

#include "coll/coll.h"
#include "coll/nccl_lib.h"

namespace symcomm {

// Why NCCL cannot run over `team` ("" when it can): two members on one GPU (NCCL refuses
// them in ncclCommInitRank).
std::string nccl_team_problem(const Topology& topology, const Team& team);

class NcclComms final : public AlgorithmState {
 public:
  // At communicator creation. Loads nothing: NCCL is loaded on first use.
  explicit NcclComms(CollContext& ctx);
  ~NcclComms() override;
  void abort() override;

  // Calls `enqueue(lib, comm)` with the NCCL communicator of `team` (this rank's team `id`),
  // made first where this is the team's first use (see above: collective over the team),
  // with the communicator's device current and the lock held (abort waits for it).
  using Enqueue = std::function<void(const NcclLib& lib, ncclComm_t comm)>;
  void run(symcommTeam_t id, const Team& team, symcommStream_t stream, const Enqueue& enqueue);
  // Makes the team's communicator now if it does not exist (collective over the team), so
  // that the first run() neither pays for it nor fails inside a graph capture.
  void prepare(symcommTeam_t id, const Team& team, symcommStream_t stream);
  // Whether the team's communicator exists (on every member, or on none).
  bool has(const Team& team);

 private:
  using Key = std::tuple<int, int, int>;  // start, stride, size
  static Key key(const Team& t) { return {t.start, t.stride, t.size}; }
  ncclComm_t make(symcommTeam_t id, const Team& team, symcommStream_t stream);
  void abort_all();  // on the aborter thread

  CollContext& ctx_;
  std::mutex mutex_;      // comms_, and every NCCL call on them
  std::map<Key, ncclComm_t> comms_;
  std::atomic<bool> aborted_{false};
  std::mutex aborter_mutex_;
  std::thread aborter_;
};

// The NCCL communicators of `ctx`'s communicator.
NcclComms& nccl_comms(CollContext& ctx);

// Runs `body` between ncclGroupStart and ncclGroupEnd (the group is ended if it throws).
void nccl_group(const NcclLib& lib, const std::function<void()>& body);

}  // namespace symcomm

#endif  // SYMCOMM_HAVE_NCCL
