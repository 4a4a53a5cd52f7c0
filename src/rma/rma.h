// One-sided communication of a communicator: the teams, the internal symmetric area that
// barriers use, and the backend of its memory space that moves the bytes: put, get, signal,
// wait, quiet, barrier. Local copies (reduce, box copies) are copy/copies.h.
//
// A backend is one small interface with one implementation per memory space
// (rma_cuda.cu, rma_host.cc); Rma's constructor (rma.cc) picks the one of the communicator's
// memory space (there is no registry: a new space adds a case there). Addresses
// it receives are already translated: `dst`/`src`/`sig` of a peer are that peer's memory as
// mapped in this process.
#pragma once

#include <functional>
#include <memory>

#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "rma/team.h"
#include "symcomm/device_comm.h"
#include "topology/topology.h"
#include "transport/transport.h"

namespace symcomm {

// What a barrier needs: the team, this rank, and the team's slot array on every rank.
struct BarrierArgs {
  symcommTeam_t id;
  Team team;
  int rank;                 // world rank of the caller
  uint64_t* const* slots;   // [nranks]: the team's slot array of rank r as mapped here
                            // (nullptr where rank r is reached by network)
  uint64_t* own;            // this rank's slot array (its symmetric address)
  Transports* transports;   // what reaches the members whose slots are not mapped
};

// The memory space's own operations: it moves bytes between memory mapped here for the lsa
// transport (LoadStoreMover: put, get, signal), and waits, barriers, device handles.
class RmaBackend : public LoadStoreMover {
 public:
  virtual void wait(uint64_t* sig, symcommCmp_t cmp, uint64_t value, symcommStream_t stream) = 0;
  // Adds 1 to *counter (this rank's memory of the space), then waits until each of words[0,
  // n) is at least the counter: the wait of a sync whose members count their arrivals with
  // signals that add 1. The count lives where the stream runs (device memory on GPUs), so the
  // replays of a CUDA graph that captured the call count on, where an epoch counted on the
  // host when the call was captured would be reached already by the first replay.
  virtual void wait_counted(uint64_t* const* words, int n, uint64_t* counter,
                            symcommStream_t stream) = 0;
  virtual void quiet(symcommStream_t stream) = 0;
  // Waits on the host until everything issued on `stream` has completed.
  virtual void synchronize(symcommStream_t stream) = 0;
  // Microseconds that what `work` issues on `stream` takes there (CUDA events on GPUs, the
  // clock on the host, where work completes in its calls); returns once it has completed.
  virtual double time_us(symcommStream_t stream, const std::function<void()>& work) = 0;
  virtual void barrier(const BarrierArgs& args, symcommStream_t stream) = 0;
  // Sets [local, local + bytes) of this rank's memory to zero, synchronously.
  virtual void clear(void* local, size_t bytes) = 0;
  // A team's barrier count starts again from zero (the team id is new).
  virtual void reset_epoch(symcommTeam_t id) = 0;
  // Throws, once, what a device-side wait recorded (timeout, abort), and clears it.
  virtual void raise_recorded_error() = 0;
  // The code of what a device-side wait or a refused device call recorded and no call has
  // raised yet (symcommSuccess: nothing); changes nothing. From any thread.
  virtual symcommResult_t pending_error() const { return symcommSuccess; }
  // Whether a device-side wait failed and was raised, ever: what keeps counters with its
  // peers cannot trust them any more. Any wait, not only those on a collective's own words:
  // the record holds one failure, so a kernel queued behind the one that failed may have
  // failed too with nothing recorded.
  virtual bool any_wait_failed() const { return false; }
  // Whether a barrier's wait failed, ever (on GPUs: as recorded, once raised): the members'
  // barrier counts may disagree from then on, so barriers refuse (Rma::barrier_args).
  virtual bool barrier_failed() const = 0;
  // The communicator lost a peer: waits in progress must end.
  virtual void abort() = 0;
  // Whether abort() was called (a host-side wait of another layer's, polling, ends then).
  virtual bool aborted() const { return false; }
  // What a host-side wait calls as it spins (Transports::progress), where the space's waits
  // run on the host; set once the transports are open.
  virtual void set_progress(std::function<void()>) {}
  virtual void fill_device_comm(DeviceComm& h, symcommTeam_t id, const Team& team) = 0;
  // The heap's allocations changed (symcommMalloc, symcommFree): the table that device
  // handles' checks read (DeviceAllocations), where the space has device handles.
  virtual void publish_allocations(const std::vector<std::pair<size_t, size_t>>&) {}
};

// Sizes shared by the backends.
struct RmaLayout {
  static size_t slots_bytes(int nranks) { return sizeof(uint64_t) * static_cast<size_t>(nranks); }
  static size_t area_bytes(int nranks) { return SYMCOMM_MAX_TEAMS * slots_bytes(nranks); }
};

std::unique_ptr<RmaBackend> make_host_rma(const Topology& topology);
// `windows`: every rank's heap window as mapped here; `area`: the symmetric barrier area.
std::unique_ptr<RmaBackend> make_cuda_rma(const Topology& topology,
                                          const std::vector<char*>& windows, char* area);

class Rma {
 public:
  // Collective: allocates and clears the barrier area, sets up the backend and every peer's
  // transport.
  Rma(Bootstrap& bootstrap, const Topology& topology, Heap& heap,
      const Registrations& registrations, symcommMemorySpace_t space);

  const TeamTable& teams() const { return teams_; }
  // Collective over the communicator. Members of `parent` pass the same arguments
  // (checked); other ranks pass any. Returns the new team's id, or SYMCOMM_TEAM_INVALID
  // where this rank is not a member.
  symcommTeam_t split_strided(symcommTeam_t parent, int start, int stride, int size);
  // Collective like split_strided: this rank's row and column teams.
  std::pair<symcommTeam_t, symcommTeam_t> split_2d(symcommTeam_t parent, int xrange);
  // Local: a member forgets the team (no operation on it may be in flight anywhere).
  void destroy(symcommTeam_t id);
  // The layers above that keep state per team id (the copies' barrier tickets) reset it
  // here: `reset` runs on every rank whenever a team id starts a new team, inside the
  // agreement on its creation. It must stay callable for as long as teams are made.
  void on_team_start(std::function<void(symcommTeam_t)> reset);
  RmaBackend& backend() { return *backend_; }
  Transports& transports() { return *transports_; }
  Bootstrap& bootstrap() { return bootstrap_; }
  const Topology& topology() const { return topology_; }
  BarrierArgs barrier_args(symcommTeam_t id);
  // A device handle of team `id` (of which this rank is a member): the backend's, with the
  // ring of the transport of its first member that kernels do not reach by load and store.
  DeviceComm device_comm(symcommTeam_t id);
  // The team's slot array of this rank (a symmetric address).
  uint64_t* slots(symcommTeam_t id) const;

 private:
  // Agrees with every rank on `count` team ids free everywhere, after checking that the
  // members of the parent passed the same arguments.
  std::vector<symcommTeam_t> agree_ids(bool member, const int32_t args[4], int count);
  void start_team(symcommTeam_t id, const Team& team);

  Bootstrap& bootstrap_;
  const Topology& topology_;
  TeamTable teams_;
  char* area_ = nullptr;  // symmetric: SYMCOMM_MAX_TEAMS slot arrays
  std::vector<std::vector<uint64_t*>> peer_slots_;  // [team][rank]
  std::unique_ptr<RmaBackend> backend_;
  std::unique_ptr<Transports> transports_;
  std::vector<std::function<void(symcommTeam_t)>> team_start_;  // on_team_start
};

}  // namespace symcomm
