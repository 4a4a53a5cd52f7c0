// Collectives: the arguments every algorithm receives, the descriptor and small interface
// each algorithm fills (one file each, registering itself), and the choice among them.
//
// Collectives of one communicator share one symmetric workspace of SYMCOMM_COLL_WORKSPACE
// bytes, allocated when the communicator is created (so that a collective over a team never
// needs a communicator-wide allocation); algorithms work through it in pieces. Collectives
// of one communicator must therefore not run concurrently on different streams.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/registry.h"
#include "copy/copies.h"
#include "memory/heap.h"
#include "memory/registration.h"
#include "rma/rma.h"

namespace symcomm {

enum class CollOp {
  AllGather, AllToAll, AllToAllv, ReduceScatter, AllReduce, Broadcast,
  Reduce, Gather, Scatter  // to or from a root: few algorithms do them (kCoreOps)
};
const char* coll_op_name(CollOp op);
size_t type_size(symcommDataType_t type);  // throws for an unknown type

// One call of an all-reduce of several buffers at once (CollArgs::segments).
struct CollSegment {
  const char* send;
  char* recv;  // send itself (in place) or apart from every buffer of the other segments
  size_t bytes;
};

// Where each segment starts in the message that carries them all (an 8-byte boundary after
// the one before), and that message's bytes (a multiple of 8): `at` gets one offset each.
inline size_t segments_layout(const std::vector<CollSegment>& segments, std::vector<size_t>* at) {
  size_t end = 0;
  for (const CollSegment& s : segments) {
    end = (end + 7) / 8 * 8;
    if (at) at->push_back(end);
    end += s.bytes;
  }
  return (end + 7) / 8 * 8;
}

struct CollArgs {
  CollOp op;
  symcommTeam_t team_id;
  Team team;
  int me;                    // this rank's team rank
  const char* send;
  char* recv;
  size_t count;              // as the C API names it for the operation
  symcommDataType_t type;
  size_t elem;               // bytes per element
  symcommRedOp_t redop;
  int root;                  // team rank (broadcast, reduce, gather, scatter)
  // All-to-all-v: arrays of team-size entries, in elements (count is unused), on the host;
  // or, with counts_on_device, in device memory, with recv_counts and recv_displs written by
  // the collective and count the capacity of recv in elements.
  bool counts_on_device = false;
  const size_t* send_counts = nullptr;
  const size_t* send_displs = nullptr;
  const size_t* recv_counts = nullptr;
  const size_t* recv_displs = nullptr;
  symcommStream_t stream;
  // Peers can address send (where this rank reads it) and recv in place: symmetric memory
  // or registered buffers. Picks the selection table's rows for such buffers.
  bool symmetric = false;
  // This rank's buffer extents in bytes, as the C API checked them (send: 0 where the call
  // does not read it, or reads it inside recv).
  size_t send_bytes = 0, recv_bytes = 0;
  // A query (symcommCollAlgorithm, symcommCollAlgorithmCanRun): send and recv are NULL, no
  // run() follows, and can_implement() takes both buffers to be symmetric or not as
  // `symmetric` says.
  bool query = false;
  // An all-reduce of each of these buffers as one call (a group's all-reduces,
  // capi/coll_batch.cc): count is segments_layout()'s bytes in elements, send and recv are
  // the first segment's. Only algorithms whose descriptor takes segments run it.
  const std::vector<CollSegment>* segments = nullptr;
  // The bytes one rank contributes: what the selection table is indexed by.
  size_t bytes_per_rank() const;
};

// An all-to-all-v's parts in bytes, with host counts, into a kernel plan (sm's and ll's
// Plan: send_off/send_len and recv_off/recv_len per member, nothing to or from this rank
// there, and its own part as self_src/self_dst/self_len). Trusts that each receiver's counts
// are its senders' (see symcomm.h).
template <typename Plan>
void alltoallv_parts(Plan& p, const CollArgs& a) {
  for (int j = 0; j < a.team.size; ++j) {
    p.send_off[j] = a.send_displs[j] * a.elem;
    p.send_len[j] = j == a.me ? 0 : a.send_counts[j] * a.elem;
    p.recv_off[j] = a.recv_displs[j] * a.elem;
    p.recv_len[j] = j == a.me ? 0 : a.recv_counts[j] * a.elem;
  }
  p.self_src = a.send_displs[a.me] * a.elem;
  p.self_dst = a.recv_displs[a.me] * a.elem;
  p.self_len = a.send_counts[a.me] * a.elem;
}

class CollAlgorithm;
class NcclComms;

// What an algorithm keeps per communicator (a symmetric area; ce's flags, streams and watchdog),
// made when the communicator is created and destroyed with it. Algorithms themselves are
// stateless singletons shared by every communicator.
class AlgorithmState {
 public:
  virtual ~AlgorithmState() = default;
  // The communicator lost a peer (called once, from the bootstrap's monitor thread): end
  // whatever could otherwise wait for it forever (ce's watchdog releases its waits).
  virtual void abort() {}
};

// The state of an algorithm whose kernels keep counters with their peers in a symmetric
// area of every rank (sm, ll, twoshot): the area, the world's device handle, and how many
// blocks of its kernel the GPU holds at once.
struct CounterState : AlgorithmState {
  char* area = nullptr;
  DeviceComm world{};
  int resident = 0;
};

// What algorithms work with: the heap, the one-sided backend, barriers, the workspace, the
// communicator's NCCL communicators.
class CollContext {
 public:
  // Collective over the communicator: allocates the workspace.
  CollContext(const Topology& topology, Heap& heap, const Registrations& registrations, Rma& rma,
              Copies& copies, NcclComms& nccl, symcommMemorySpace_t space);
  const Topology& topology() const { return topology_; }
  const Registrations& registrations() const { return registrations_; }
  Heap& heap() { return heap_; }
  const Heap& heap() const { return heap_; }
  symcommMemorySpace_t space() const { return space_; }
  Rma& rma() { return rma_; }
  RmaBackend& backend() { return rma_.backend(); }
  Copies& copies() { return copies_; }
  // The communicator's NCCL communicators (nccl/nccl_comms.h), which its decompositions share.
  NcclComms& nccl() { return nccl_; }
  void barrier(const CollArgs& a) { rma_.backend().barrier(rma_.barrier_args(a.team_id), a.stream); }
  char* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Allocates s's area of `bytes` (collective: every rank's state makes one), zeroes its first
  // `clear` bytes and fills its world handle.
  void place_counters(CounterState& s, size_t bytes, size_t clear);
  // Throws symcommTimeout where a device-side wait on this communicator failed in an
  // earlier call (timed out, or the communicator was aborted): `algorithm` keeps counters
  // with its peers, and a kernel of it queued behind the failed wait may have stopped early
  // too, with nothing recorded (the record holds one failure), so that a later call could
  // pass a wait on a peer's stale signal. It refuses every call instead.
  void check_counters(const char* algorithm) const;
  // Every member's copy of `p` (symmetric, or at the same offset of a registered buffer)
  // starts at the same address modulo `alignment` (a power of two up to 256), so that a
  // choice made from this rank's alignment is every member's. False where p is neither.
  bool aligned_alike(const void* p, size_t alignment) const;
  // The workspace cut into `slots` slots, 256-byte aligned: one slot's bytes; throws
  // symcommOutOfMemory naming SYMCOMM_COLL_WORKSPACE where a slot would be under 256 bytes.
  size_t workspace_slot(int slots, int team_size) const;
  // `p` (this rank's symmetric address, or an address in a registered buffer) on team
  // member `member`, as mapped here.
  char* on(const CollArgs& a, const void* p, int member) const;
  // Puts `bytes` from `src` (this rank's memory) to `dst` on team member `member`, through
  // the member's transport; `dst` is this rank's symmetric (or registered) address of the
  // place, as in on().
  void put_to(const CollArgs& a, int member, void* dst, const void* src, size_t bytes,
              symcommEngine_t engine = symcommEngineCe);
  // Gets `bytes` into `dst` (this rank's memory) from `src` on team member `member`, through
  // the member's transport; `src` is this rank's symmetric (or registered) address of the
  // place, as in on().
  void get_from(const CollArgs& a, int member, void* dst, const void* src, size_t bytes,
                symcommEngine_t engine = symcommEngineCe);
  // Every member of the call's team has a transport ("" where so; else the first member
  // without one, and why).
  std::string unconnected_member(const CollArgs& a) const;
  // addressable(p, bytes), and every member's transport reaches p there: the heap, or a
  // registered buffer where every member is reached by a transport that maps those.
  bool writable_in_place(const CollArgs& a, const void* p, size_t bytes) const;
  // Every member of the call's team is load/store accessible from here.
  bool reaches_team(const CollArgs& a) const;
  // Why reaches_team(a) is false: the first member out of reach and why ("" where none is).
  std::string unreachable_member(const CollArgs& a) const;
  // [p, p + bytes) is symmetric memory (mapped heap) or inside a registered buffer: peers
  // can be given its address through on(), and write it in place.
  bool addressable(const void* p, size_t bytes) const;
  // Whether `algorithm`'s make_state() returned a state for this communicator.
  bool has_state(const CollAlgorithm* algorithm) const { return states_.count(algorithm) != 0; }
  // What `algorithm`'s make_state() returned for this communicator.
  template <typename T>
  T& state(const CollAlgorithm* algorithm) {
    return static_cast<T&>(*states_.at(algorithm));
  }
  template <typename T>
  const T& state(const CollAlgorithm* algorithm) const {
    return static_cast<const T&>(*states_.at(algorithm));
  }
  // The fewest of `mine` over the world's ranks (collective: for make_state). Kernels whose
  // blocks must all be resident size their grids from the fewest blocks any member's GPU
  // holds (a GPU shared under MPS, or partitioned, holds fewer), so that every member shapes
  // a call alike and none refuses a call its peers have launched.
  int fewest_across_ranks(int mine);
  // SYMCOMM_COLL_CHECK, as read when the communicator was made (coll/agreement.h).
  bool check_calls() const { return check_calls_; }
  // Counts a checked call on team `team`: its number, from 1 (for the check's message).
  uint64_t count_checked_call(symcommTeam_t team) { return ++checked_calls_[team]; }
  // Why the checks of `team` ended for good ("": they go on), and ending them.
  const std::string& checks_ended(symcommTeam_t team) const {
    static const std::string none;
    auto it = checks_ended_.find(team);
    return it == checks_ended_.end() ? none : it->second;
  }
  void end_checks(symcommTeam_t team, const std::string& why) { checks_ended_[team] = why; }
  // A team id is free again (symcommTeamDestroy): its next team starts its checks afresh.
  void forget_team(symcommTeam_t team) {
    checked_calls_.erase(team);
    checks_ended_.erase(team);
  }
  // The communicator lost a peer: every algorithm state's abort() (any thread).
  void abort() {
    for (auto& [algorithm, s] : states_) s->abort();
  }

 private:
  const Topology& topology_;
  Heap& heap_;
  const Registrations& registrations_;
  Rma& rma_;
  Copies& copies_;
  NcclComms& nccl_;
  symcommMemorySpace_t space_;
  char* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<const CollAlgorithm*, std::unique_ptr<AlgorithmState>> states_;
  bool check_calls_ = false;
  std::map<symcommTeam_t, uint64_t> checked_calls_;
  std::map<symcommTeam_t, std::string> checks_ended_;
};

// What an algorithm can do, as data: the conditions every call it runs meets, which
// CollAlgorithm::can_implement checks once for all algorithms, each failed one with its reason.
// An algorithm's own further conditions (sm's resident blocks, NCCL's library) are its
// own_conditions(). Published through symcommGetCollAlgorithmInfo (symcomm.h), so that tests,
// symcomm-info and scripts learn each algorithm's reach from the registry, never by name.
enum class CollState {
  None,      // keeps nothing per communicator
  Own,       // make_state(); refuses every call on a communicator it made none for
  Counters,  // ... a CounterState: counters with its peers, which a failed wait ends for good
};
constexpr unsigned op_bit(CollOp op) { return 1u << static_cast<int>(op); }
constexpr unsigned space_bit(symcommMemorySpace_t s) { return 1u << static_cast<int>(s); }
// The operations an algorithm does unless its descriptor says otherwise: every one but
// reduce, gather and scatter, which an algorithm claims one by one.
constexpr unsigned kCoreOps = (1u << 6) - 1;
constexpr unsigned kCudaSpace = 1u << symcommSpaceCuda, kHostSpace = 1u << symcommSpaceHost;

struct CollDescriptor {
  const char* name;
  const char* summary;             // how it works, in a few words
  unsigned ops = kCoreOps;         // op_bit of each operation it does
  unsigned spaces = kCudaSpace;    // space_bit of each memory space it runs in
  unsigned device_counts = 0;      // ... in which it runs all-to-all-v with counts on the device
  bool in_place_recv = false;      // receive buffers must be symmetric or registered
  int max_team = 0;                // the largest team it runs on (0: any)
  bool load_store = true;          // every member must be load/store accessible from here
  // The team must span two or more nodes with as many members on each (coll/team_nodes.h),
  // the members of this rank's node load/store accessible from here and every member reached
  // by a transport (load_store false): a hierarchical algorithm, which leaves teams of one
  // node to the node's algorithms.
  bool across_nodes = false;
  int max_segments = 0;            // the most CollArgs::segments of an all-reduce (0: none)
  CollState state = CollState::None;
  unsigned uncapturable_ops = 0;   // op_bit of each it cannot run on a stream being captured
  const char* why_uncapturable = nullptr;  // why, completing "its <op> "
  const char* library = nullptr;   // a library loaded at run time, without which it runs nothing
};

class CollAlgorithm {
 public:
  explicit CollAlgorithm(const CollDescriptor& descriptor) : descriptor_(descriptor) {}
  virtual ~CollAlgorithm() = default;
  const CollDescriptor& descriptor() const { return descriptor_; }
  const char* name() const { return descriptor_.name; }
  // Whether the algorithm can run the call here, and if not why (every refusal has a reason:
  // tests/mp/coll_refusals_test.cc checks that each algorithm gives one wherever it refuses).
  // The descriptor's conditions, in order (space, operation, counts on the device, team size,
  // state, reach, receive buffer), then own_conditions(). The same answer on every member.
  Verdict can_implement(const CollArgs& args, const CollContext& ctx) const;
  // Whether the call can be made now on a stream being captured into a CUDA graph (the
  // automatic choice passes over it where not; asked for by name, it refuses with the
  // reason before anything is enqueued): the descriptor's uncapturable_ops, then
  // own_capture_conditions(). The same answer on every member.
  Verdict capturable(const CollArgs& args, CollContext& ctx) const;
  // Why the automatic choice passes this algorithm over for the call (ok: it would not).
  Verdict refusal(const CollArgs& args, CollContext& ctx) const {
    if (Verdict v = can_implement(args, ctx); !v) return v;
    return capturable(args, ctx);
  }
  virtual void run(const CollArgs& args, CollContext& ctx) = 0;
  // Called for every registered algorithm when a communicator is created (collectively over
  // it, so it may allocate from the heap); the result is ctx.state<T>(this) in run().
  virtual std::unique_ptr<AlgorithmState> make_state(CollContext&) { return nullptr; }

 protected:
  // The algorithm's conditions beyond its descriptor's, asked once those hold.
  virtual Verdict own_conditions(const CollArgs&, const CollContext&) const {
    return Verdict::yes();
  }
  // Why make_state() made no state on this communicator (descriptor state None excepted).
  virtual std::string why_no_state(const CollContext&) const;
  // Its conditions for a stream being captured beyond uncapturable_ops, asked only while
  // the call's stream is being captured.
  virtual Verdict own_capture_conditions(const CollArgs&, CollContext&) const {
    return Verdict::yes();
  }

 private:
  CollDescriptor descriptor_;
};

// Whether the call's stream is being captured into a CUDA graph (never in the host space).
bool stream_capturing(const CollArgs& args, const CollContext& ctx);

// The registry (base/registry.h): every algorithm, in the order the selection prefers them.
// Each registers itself from its own file with
//   static const Registered<CollAlgorithm, XAlgorithm> kRegistered(<preference>);
const std::vector<CollAlgorithm*>& coll_algorithms();
// The registered algorithm named `name`, or nullptr.
CollAlgorithm* find_coll_algorithm(const char* name);
// `requested` (a name, or NULL/"auto" for SYMCOMM_COLL_ALGO and then the selection table).
CollAlgorithm& choose_algorithm(const CollArgs& args, CollContext& ctx, const char* requested);

}  // namespace symcomm
