// The NCCL communicators of one symcomm communicator: one per team membership (start,
// stride, size), made on the first use over that team and kept until the communicator is
// finalized. A service of its own, which the communicator owns (capi/comm.h) and hands to
// those that run on NCCL: the "nccl" collective algorithm (through its CollContext) and the
// "nccl" and "nccl_pipelined" decomposition backends (through their DecompContext), so that
// a collective and a transpose over the same members share one NCCL communicator.
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

#include "bootstrap/bootstrap.h"
#include "nccl/nccl_lib.h"
#include "rma/team.h"
#include "topology/topology.h"

#ifdef SYMCOMM_HAVE_NCCL

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

namespace symcomm {

// Why NCCL cannot run over `team` ("" when it can): two members on one GPU (NCCL refuses
// them in ncclCommInitRank).
std::string nccl_team_problem(const Topology& topology, const Team& team);

class NcclComms {
 public:
  // At communicator creation. Loads nothing: NCCL is loaded on first use.
  NcclComms(const Topology& topology, Bootstrap& bootstrap, symcommMemorySpace_t space);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;
  // The communicator lost a peer (called once, from the bootstrap's monitor thread).
  void abort();

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

  const Topology& topology_;
  Bootstrap& bootstrap_;
  const symcommMemorySpace_t space_;
  std::mutex mutex_;      // comms_, and every NCCL call on them
  std::map<Key, ncclComm_t> comms_;
  std::atomic<bool> aborted_{false};
  std::mutex aborter_mutex_;
  std::thread aborter_;
};

}  // namespace symcomm

#else  // !SYMCOMM_HAVE_NCCL

namespace symcomm {

// Built without nccl.h: nothing runs on NCCL (the algorithm and the backends say why), so
// there is nothing to keep; the communicator owns one all the same.
class NcclComms {
 public:
  NcclComms(const Topology&, Bootstrap&, symcommMemorySpace_t) {}
  void abort() {}
};

}  // namespace symcomm

#endif  // SYMCOMM_HAVE_NCCL
