// One-sided communication of a communicator: the teams, the internal symmetric area that
// barriers use, and the backend of its memory space that moves the bytes.
//
// A backend is one small interface with one implementation per memory space
// (rma_cuda.cu, rma_host.cc) and one registry line (make_backend in rma.cc). Addresses it
// receives are already translated: `dst`/`src`/`sig` of a peer are that peer's memory as
// mapped in this process.
#pragma once

#include <functional>
#include <memory>

#include "bootstrap/bootstrap.h"
#include "memory/heap.h"
#include "rma/team.h"
#include "symcomm/device_comm.h"
#include "topology/topology.h"

namespace symcomm {

// What a barrier needs: the team, this rank, and the team's slot array on every rank.
struct BarrierArgs {
  symcommTeam_t id;
  Team team;
  int rank;                 // world rank of the caller
  uint64_t* const* slots;   // [nranks]: the team's slot array of rank r as mapped here
};

// Where the elements of a local 3D array sit: element (x, y, z) (global indices) is at
// sum over axes of (index - origin) * stride, in elements.
struct BoxLayout {
  int64_t stride[3];
  int64_t origin[3];
  SYMCOMM_HOST_DEVICE int64_t offset(int64_t x, int64_t y, int64_t z) const {
    return (x - origin[0]) * stride[0] + (y - origin[1]) * stride[1] + (z - origin[2]) * stride[2];
  }
};

// One box copy of a batch (RmaBackend::copy_boxes): the elements of [lo, hi) from src to dst.
struct BoxCopy {
  void* dst;
  BoxLayout dl;
  const void* src;
  BoxLayout sl;
  int64_t lo[3], hi[3];
  // For copy_boxes_between_barriers: the world rank whose memory this copy reads or writes
  // (its peer), or -1 where it touches only this rank's memory.
  int peer = -1;
};

// A linear copy of `elements` elements of `elem` bytes as box copies that the batched copy
// kernels spread over many warps: rows of `row` elements (0: linear_row(elements, elem)),
// then the rest (appended to `out`, with `peer` as BoxCopy::peer).
constexpr int64_t kLinearRow = 2048;   // the longest row, in elements
constexpr int64_t kLinearRows = 2048;  // rows wanted: a warp each in 256 blocks of 8 warps
constexpr int64_t kLinearRowBytes = 2048;  // the shortest row: one pass of a warp's 16-byte
                                           // vectors, four per lane
// kLinearRow, halved while the run would give fewer than kLinearRows rows, down to
// kLinearRowBytes (or kLinearRow where elements are larger): a copy kernel gives a block to
// 8 rows, so a 512 KiB run in rows of 2048 8-byte elements kept 4 blocks busy: 4.1 us on an
// H200 in a CUDA graph, 1.7 in rows of 256, where the copy engines take 1.1
// (bench/results/h200x4/rows_ab_1d8eb4f.txt).
int64_t linear_row(int64_t elements, size_t elem);
void append_linear_copy(std::vector<BoxCopy>& out, void* dst, const void* src, int64_t elements,
                        size_t elem, int peer, int64_t row = 0);

class RmaBackend {
 public:
  virtual ~RmaBackend() = default;
  virtual void put(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                   symcommStream_t stream) = 0;
  virtual void get(void* dst, const void* src, size_t bytes, symcommEngine_t engine,
                   symcommStream_t stream) = 0;
  // `sig` is the target's word as mapped here; ordered after everything before it on stream.
  virtual void signal(uint64_t* sig, uint64_t value, symcommSignalOp_t op,
                      symcommStream_t stream) = 0;
  virtual void wait(uint64_t* sig, symcommCmp_t cmp, uint64_t value, symcommStream_t stream) = 0;
  virtual void quiet(symcommStream_t stream) = 0;
  // Waits on the host until everything issued on `stream` has completed.
  virtual void synchronize(symcommStream_t stream) = 0;
  // Microseconds that what `work` issues on `stream` takes there (CUDA events on GPUs, the
  // clock on the host, where work completes in its calls); returns once it has completed.
  virtual double time_us(symcommStream_t stream, const std::function<void()>& work) = 0;
  // Local: dst[i] = op over k < n of element i of the block at src + k * stride, i < count
  // (rma/reduce.h says how), in stream order.
  virtual void reduce(void* dst, const void* src, size_t stride, int n, size_t count,
                      symcommDataType_t type, symcommRedOp_t op, symcommStream_t stream) = 0;
  // Local: the elements of the box [lo, hi) (global indices) from src to dst, each array
  // described by its layout; `elem` bytes per element; in stream order.
  virtual void copy_box(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                        const int64_t lo[3], const int64_t hi[3], size_t elem,
                        symcommStream_t stream) = 0;
  // The same box copy on the copy engines (one cudaMemcpy2D/3D), where dst may also be a
  // peer's memory mapped here. Only where both layouts walk the box's axes in the same
  // order, the first with stride 1 and each slice pitch a whole number of rows; returns
  // false, having issued nothing, where not. The host space copies as copy_box does.
  virtual bool copy_box_ce(void* dst, const BoxLayout& dl, const void* src, const BoxLayout& sl,
                           const int64_t lo[3], const int64_t hi[3], size_t elem,
                           symcommStream_t stream) = 0;
  // Every copy of `copies` (disjoint destinations), in stream order, at once where the
  // backend can: one launch on GPUs, so that copies from several peers share the links.
  virtual void copy_boxes(const std::vector<BoxCopy>& copies, size_t elem, symcommStream_t stream) {
    for (const BoxCopy& c : copies) copy_box(c.dst, c.dl, c.src, c.sl, c.lo, c.hi, elem, stream);
  }
  virtual void barrier(const BarrierArgs& args, symcommStream_t stream) = 0;
  // barrier(args); copy_boxes(copies); barrier(args), where each copy needs no more of the
  // first barrier than its peer's arrival (the peer's memory is ready: its owner has passed
  // the barrier). GPUs run all three in one launch where the copies fit one (the barriers'
  // halves inside the copy kernel: two kernel launches and a wait for the slowest member
  // less); the default runs them apart. Like barrier(), not for two calls on one team at
  // once.
  virtual void copy_boxes_between_barriers(const BarrierArgs& args,
                                           const std::vector<BoxCopy>& copies, size_t elem,
                                           symcommStream_t stream) {
    barrier(args, stream);
    copy_boxes(copies, elem, stream);
    barrier(args, stream);
  }
  // Sets [local, local + bytes) of this rank's memory to zero, synchronously.
  virtual void clear(void* local, size_t bytes) = 0;
  // A team's barrier count starts again from zero (the team id is new).
  virtual void reset_epoch(symcommTeam_t id) = 0;
  // Throws, once, what a device-side wait recorded (timeout, abort), and clears it.
  virtual void raise_recorded_error() = 0;
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
  // Collective: allocates and clears the barrier area, sets up the backend.
  Rma(Bootstrap& bootstrap, const Topology& topology, Heap& heap, symcommMemorySpace_t space);

  const TeamTable& teams() const { return teams_; }
  // Collective over the communicator. Members of `parent` pass the same arguments
  // (checked); other ranks pass any. Returns the new team's id, or SYMCOMM_TEAM_INVALID
  // where this rank is not a member.
  symcommTeam_t split_strided(symcommTeam_t parent, int start, int stride, int size);
  // Collective like split_strided: this rank's row and column teams.
  std::pair<symcommTeam_t, symcommTeam_t> split_2d(symcommTeam_t parent, int xrange);
  // Local: a member forgets the team (no operation on it may be in flight anywhere).
  void destroy(symcommTeam_t id);
  RmaBackend& backend() { return *backend_; }
  Bootstrap& bootstrap() { return bootstrap_; }
  const Topology& topology() const { return topology_; }
  BarrierArgs barrier_args(symcommTeam_t id);
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
};

}  // namespace symcomm
