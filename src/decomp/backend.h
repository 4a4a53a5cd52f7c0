// Transpose and halo backends: one small interface, one file per backend (backend_copy.cc,
// ...), which says what the backend needs (DecompDescriptor) and registers it:
//   static const Registered<DecompBackend, CopyBackend> kRegistered(kDescriptor.preference);
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "base/registry.h"
#include "copy/copies.h"
#include "decomp/geometry.h"
#include "decomp/halo.h"
#include "decomp/transpose.h"
#include "memory/heap.h"
#include "memory/registration.h"
#include "rma/rma.h"

namespace symcomm {

class DecompState;
class NcclComms;

// What a decomposition's exchanges handed to the transports on this rank, in bytes
// (symcommDecompGetTraffic): per kind of transport (load/store, or the network) and per
// source (the caller's buffer itself, or the workspace after packing). Counted by the backends
// that send through the transports (backend_transport.cc); the others add nothing.
struct DecompTraffic {
  std::atomic<uint64_t> bytes[2][2] = {};  // [to the network][from the workspace]
  void add(bool network, bool from_workspace, size_t n) {
    bytes[network][from_workspace].fetch_add(n, std::memory_order_relaxed);
  }
};

// What a backend works with: this rank, the heap, the one-sided layer, the local copies, and
// the teams of its row and column of the process grid.
struct DecompContext {
  const Geometry& geometry;
  int rank;
  Heap& heap;
  Rma& rma;
  Copies& copies;
  symcommTeam_t row_team;
  symcommTeam_t col_team;
  // The communicator's NCCL communicators (nccl/nccl_comms.h, shared with its collectives),
  // or nullptr where the decomposition was made without them.
  NcclComms* nccl = nullptr;
  // What the backend's make_state() returned for this decomposition (nullptr: nothing).
  DecompState* state = nullptr;
  // The communicator's registered buffers (symcommRegister), for the staging rule
  // (transport_takes_as_is); nullptr: none are known.
  const Registrations* registrations = nullptr;
  // The decomposition's traffic counts (nullptr: not counted).
  DecompTraffic* traffic = nullptr;
};

struct TransposeCall {
  int from, to;
  const void* input;
  void* output;
  char* workspace;
  size_t elem;
  symcommPencilInfo_t in, out;  // this rank's pencils, with the buffers' halos and padding
  symcommStream_t stream;
};

struct HaloCall {
  int axis, dim;
  void* buffer;
  char* workspace;
  size_t elem;
  const int64_t* halo;
  const int64_t* padding;
  bool periodic;
  symcommStream_t stream;
};

// What a backend keeps per decomposition (a stream and events of its device), made by
// make_state() when the decomposition is created and destroyed with it, or when its
// communicator is finalized. Backends themselves are stateless singletons shared by every
// decomposition.
class DecompState {
 public:
  virtual ~DecompState() = default;
};

// What a backend is and needs, as data. DecompBackend::can_implement checks every need with
// its reason (backend.cc), so a backend states them and writes no check of its own for them;
// symcommDecompGetBackendInfo publishes them.
struct DecompDescriptor {
  const char* name;
  // Its place in the registry (lower first): the order in which "" and the autotuner try them.
  int preference;
  // The memory spaces it runs in: bits 1u << symcommMemorySpace_t (decomp_space_bit).
  unsigned spaces;
  // It loads and stores every rank's heap through the peer mapping: every rank of the
  // communicator must be mapped here (one node; peer access between its GPUs).
  bool load_store_peers;
  // NCCL moves its blocks: the communicator's NCCL communicators (DecompContext::nccl), the
  // library, and rows and columns whose members have a GPU each (NCCL refuses two on one).
  bool nccl;
  // It copies to or from a peer only once that peer has joined the exchange (the barrier and
  // the copies are one launch, each copy waiting for its peer): where a peer never calls, its
  // buffers stay untouched and the call ends at SYMCOMM_WAIT_TIMEOUT.
  bool copies_wait_for_peers;
  // It is meant for ranks out of load/store reach (other nodes). Where every rank is mapped,
  // the automatic choice ("") and the autotuner leave it out, since a load/store backend
  // moves the same blocks there without it; named (as the backend, or by an including entry
  // of autotune_backends or SYMCOMM_DECOMP_AUTOTUNE_BACKENDS) it runs wherever it can.
  bool for_unmapped_ranks = false;
};

constexpr unsigned decomp_space_bit(symcommMemorySpace_t space) { return 1u << space; }
constexpr unsigned kDecompHostAndCuda =
    decomp_space_bit(symcommSpaceHost) | decomp_space_bit(symcommSpaceCuda);

class DecompBackend {
 public:
  explicit DecompBackend(const DecompDescriptor& descriptor) : descriptor_(descriptor) {}
  virtual ~DecompBackend() = default;
  const DecompDescriptor& descriptor() const { return descriptor_; }
  const char* name() const { return descriptor_.name; }
  // Whether the backend can run on this communicator, and why not: every need of its
  // descriptor, then its own_conditions(); the same answer on every rank.
  Verdict can_implement(const DecompContext& ctx) const;
  virtual size_t transpose_workspace(const DecompContext& ctx, size_t elem) const = 0;
  virtual void transpose(const DecompContext& ctx, const TransposeCall& call) = 0;
  virtual size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                                const int64_t* halo, const int64_t* padding) const = 0;
  virtual void halo(const DecompContext& ctx, const HaloCall& call) = 0;
  // Called by Decomp::create on every rank once this backend is chosen (collective over the
  // communicator; the outcome is agreed): sets up what the exchanges need, so that the
  // first one neither pays for it nor synchronises (the NCCL communicators of the row and
  // the column).
  virtual void prepare(const DecompContext&) {}
  // Called by Decomp::create on every rank after prepare() (outcome agreed): what this
  // backend keeps per decomposition, ctx.state in its calls.
  virtual std::unique_ptr<DecompState> make_state(const DecompContext&) { return nullptr; }

 protected:
  // What the backend needs beyond its descriptor (asked once the descriptor's needs are
  // met), the same on every rank.
  virtual Verdict own_conditions(const DecompContext&) const { return Verdict::yes(); }

 private:
  const DecompDescriptor descriptor_;
};

// The registry: every backend, preferred first.
inline const std::vector<DecompBackend*>& decomp_backends() {
  return Registry<DecompBackend>::instance().all();
}

// Whether the automatic choice and the autotuner consider `b` without being asked for it by
// name, on a communicator whose heap is `heap`: not where every rank is mapped and `b` is
// meant for ranks out of load/store reach (DecompDescriptor::for_unmapped_ranks).
bool chosen_unasked(const DecompBackend& b, const Heap& heap);

// Backends whose pieces another one runs: ce runs ce_pipelined's halo exchanges,
// nccl_pipelined the nccl backend's set-up, workspaces and halo exchanges.
DecompBackend& ce_pipelined_backend();  // backend_ce_pipelined.cc
DecompBackend& nccl_backend();          // backend_nccl.cc

// --- Pieces the backends share (backend_shared.cc) ---------------------------------------
//
// Contract of the direct paths (sm and ce write into peers' outputs, fused reads peers'
// inputs, sm and fused halo exchanges reach peers' buffers; docs/decomp.md): a buffer that
// is symmetric (inside the heap) is taken to be the same symmetric object, with the same
// halo and padding, on every rank of the exchange, as the workspace is; every rank passes
// symmetric buffers or none does. The choice between a direct and a staged path is made on
// each rank from its own arguments, so ranks that broke this rule would disagree. It is not
// checked per call (that takes a host round trip); SYMCOMM_DECOMP_CHECK=1 checks it at the C
// API (capi/decomp.cc). Every path keeps the invariant that makes this safe: a rank's
// non-symmetric buffers are touched only by its own kernels and copy engines, a peer's
// memory only inside the heap; the C API has checked that the buffers are memory this rank's
// device can access (Space::check_device_accessible) and that symmetric ones and the
// workspace are large enough within their allocations.

// Why not every rank's heap window is mapped here (what the load/store backends need): the
// first rank out of reach and why; "" where all are mapped.
std::string unmapped_peer(const DecompContext& ctx);
// The staging rule (docs/decomp.md, "The staging rule"): whether `transport` may be handed
// [p, p + bytes) of this rank's memory as the source of a put as it is. A load/store
// transport takes whatever this rank's device reaches (the C API checked the buffers); any
// other takes only memory it registered: the symmetric heap, and registered buffers where it
// reaches those (Transport::registered_buffers). A user buffer it cannot take (it would need
// a registration per call, and GPU memory a provider with FI_HMEM) is staged through the
// workspace instead.
bool transport_takes_as_is(const DecompContext& ctx, const Transport& transport, const void* p,
                           size_t bytes);
// The signal words at the start of a workspace, `count` of them, rounded up to 256 bytes (so
// that the staging areas after them stay aligned for any element size); and the larger of a
// row and a column of the grid (one word per member of either).
size_t signal_words_bytes(int count);
int largest_team(const Geometry& g);
// `p` (a symmetric address of this rank) on `rank`, as mapped here; throws
// symcommNotSupported where `rank` is not load/store accessible.
char* peer_address(const DecompContext& ctx, const void* p, int rank);
// [a, a + a_bytes) and [b, b + b_bytes) share a byte (an in-place transpose).
bool overlaps(const void* a, size_t a_bytes, const void* b, size_t b_bytes);
// The box, walked x fastest, is one contiguous run of `layout` (so packing or unpacking it
// is a plain copy starting at layout.offset(box.lo)).
bool packed_run(const Box& box, const BoxLayout& layout);
// `layout` moved by `delta` along `dim`: the result's offset of point p is layout's offset of
// p - delta (a slab read through it lands `delta` further along dim).
BoxLayout translated(BoxLayout layout, int dim, int64_t delta);
// Copies the box from src to dst (each with its layout): one linear put on `engine` where the
// box is a contiguous run of both (no pack or unpack kernel), else copy_box.
void move_box(const DecompContext& ctx, void* dst, const BoxLayout& dl, const void* src,
              const BoxLayout& sl, const Box& box, size_t elem, symcommEngine_t engine,
              symcommStream_t stream);
// What every transpose works out first: its plan, the element size (in bytes, and signed,
// to scale offsets), the layouts of its buffers, and whether it runs in place (input and
// output share a byte: the input must be read completely before the output is written).
// Backends take it apart: const auto& [plan, e, se, in_layout, out_layout, in_place] = ...
struct TransposeFrame {
  TransposeFrame(const DecompContext& ctx, const TransposeCall& t);
  ExchangePlan plan;
  size_t e;
  int64_t se;
  BoxLayout in_layout, out_layout;
  bool in_place;
};
// Whether the transpose runs in place on any member of its exchange, not only here: what a
// path that writes into the members' outputs must ask (sm and ce's direct paths), since a
// member whose output overlaps its input is still reading that input. Symmetric input and
// output are the same objects on every member (the contract above), at the same offsets, but
// with uneven splits the members' pencils differ in size: the same two addresses can overlap
// on one member and not on another. Every member works out the same answer.
bool in_place_on_any_member(const DecompContext& ctx, const TransposeCall& t,
                            const ExchangePlan& plan);
// What every halo exchange works out first: its plan, the element size, the size of one slab
// slot in bytes (the largest slab of any rank), and the layout of this rank's buffer.
// Backends take it apart: const auto& [plan, e, slot, layout] = HaloFrame(ctx, h);
struct HaloFrame {
  HaloFrame(const DecompContext& ctx, const HaloCall& h);
  HaloPlan plan;
  size_t e;
  size_t slot;
  BoxLayout layout;
};
// Box copies gathered to run together (Copies::copy_boxes: one launch on GPUs, every
// source read at once): what a step does for all members, instead of a launch per member.
// A box that is one contiguous run of both layouts is cut into rows of a few thousand
// elements, so that many warps share it.
class BoxCopies {
 public:
  explicit BoxCopies(size_t elem) : elem_(elem) {}
  // `peer`: the world rank whose memory the copy reads or writes (-1: this rank's only), for
  // run_between_barriers.
  void add(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl, const Box& box,
           int peer = -1);
  // Issues every copy added on `stream`, and forgets them.
  void run(const DecompContext& ctx, symcommStream_t stream);
  // The same between two barriers of the team (Copies::copy_boxes_between_barriers: one
  // launch on GPUs, each copy waiting for its peer only).
  void run_between_barriers(const DecompContext& ctx, const BarrierArgs& barrier,
                            symcommStream_t stream);

 private:
  size_t elem_;
  std::vector<BoxCopy> copies_;
};
// Every block of `plan` this rank received, from its packed place in `recv` to the output,
// in one batch.
void unpack_all(const DecompContext& ctx, const ExchangePlan& plan, const TransposeCall& t,
                const char* recv);
// The largest halo slab of any rank for these arguments (0: no halo along dim).
size_t largest_halo_slab(const DecompContext& ctx, int axis, int dim, const int64_t* halo,
                         const int64_t* padding);
// The team whose barrier orders a transpose from -> to (the column for X<->Y, else the row),
// and the one of a halo exchange along a dimension split over the rows (else the columns).
symcommTeam_t transpose_team(const DecompContext& ctx, int from, int to);
symcommTeam_t halo_team(const DecompContext& ctx, bool over_rows);
// The index of world rank `rank` in `team` (its NCCL rank); throws symcommInternalError where
// it is not a member.
int member_index(const Team& team, int rank);
// A halo exchange along a dimension that is not split: the far slabs of this rank's own
// buffer fill its halos, one translated copy per side; no workspace, no barrier.
void halo_from_self(const DecompContext& ctx, const HaloCall& h, const HaloPlan& plan);

}  // namespace symcomm
