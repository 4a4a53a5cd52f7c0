// Local copies of a communicator: element-wise reduce, box copies (one, a batch, or a batch
// between two barriers of a team) and their copy-engine form. What the collectives and the
// decomposition backends move bytes with besides one-sided puts and gets (rma/rma.h): the
// copies read and write memory mapped here, this rank's or, where an address was translated
// (memory/peer_address.h), a peer's.
//
// One small interface with one implementation per memory space (copies_host.cc,
// copies_cuda.cu, its kernels in box_copy.cuh); make_copies (copies.cc), called when the
// communicator is made (capi/init.cc), picks the one of its memory space (there is no
// registry: a new space adds a case there). The copies sit on the one-sided layer: the
// barriers of copy_boxes_between_barriers are its team barriers.
#pragma once

#include <memory>
#include <vector>

#include "copy/box.h"
#include "memory/heap.h"
#include "rma/rma.h"

namespace symcomm {

class Copies {
 public:
  virtual ~Copies() = default;
  // dst[i] = op over k < n of element i of the block at src + k * stride, i < count
  // (copy/reduce.h says how), in stream order.
  virtual void reduce(void* dst, const void* src, size_t stride, int n, size_t count,
                      symcommDataType_t type, symcommRedOp_t op, symcommStream_t stream) = 0;
  // v[i] /= n for i < count (copy/reduce.h's divide_one: symcommAvg's last step), in stream
  // order.
  virtual void divide(void* v, size_t count, symcommDataType_t type, int n,
                      symcommStream_t stream) = 0;
  // dst[i] = src[i] * factor for i < count (copy/reduce.h's scale_one: a pre-multiplied sum's
  // first step), in stream order. The factor is `*factor_device` where that is not NULL
  // (memory of the space, read when the stream gets there), else the element whose bytes
  // `factor` holds.
  virtual void scale(void* dst, const void* src, size_t count, symcommDataType_t type,
                     uint64_t factor, const void* factor_device, symcommStream_t stream) = 0;
  // The elements of the box [lo, hi) (global indices) from src to dst, each array described
  // by its layout; `elem` bytes per element; in stream order.
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
  // space can: one launch on GPUs, so that copies from several peers share the links.
  virtual void copy_boxes(const std::vector<BoxCopy>& copies, size_t elem, symcommStream_t stream) {
    for (const BoxCopy& c : copies) copy_box(c.dst, c.dl, c.src, c.sl, c.lo, c.hi, elem, stream);
  }
  // barrier(args); copy_boxes(copies); barrier(args) (RmaBackend::barrier), where each copy
  // needs no more of the first barrier than its peer's arrival (the peer's memory is ready:
  // its owner has passed the barrier). GPUs run all three in one launch where the copies fit
  // one (the barriers' halves inside the copy kernel: two kernel launches and a wait for the
  // slowest member less); the host runs them apart. Like a barrier, not for two calls on one
  // team at once.
  virtual void copy_boxes_between_barriers(const BarrierArgs& args,
                                           const std::vector<BoxCopy>& copies, size_t elem,
                                           symcommStream_t stream) = 0;
  // Team id `id` starts a new team: what the copies keep per team id starts again (called
  // on every rank inside the team's creation, Rma::on_team_start).
  virtual void reset_team(symcommTeam_t id) { (void)id; }
};

// `rma`: the backend whose barriers copy_boxes_between_barriers runs (and, on GPUs, whose
// device handles its kernel's barrier halves use); it outlives the copies.
std::unique_ptr<Copies> make_host_copies(RmaBackend& rma);
// `windows`: every rank's heap window as mapped here (nullptr where not accessible).
std::unique_ptr<Copies> make_cuda_copies(const Topology& topology, RmaBackend& rma,
                                         const std::vector<char*>& windows);

// The copies of a communicator's memory space, reset with its teams (Rma::on_team_start).
// Collective like the Rma it is made on; `rma` and `heap` outlive the result.
std::unique_ptr<Copies> make_copies(symcommMemorySpace_t space, const Topology& topology, Rma& rma,
                                    const Heap& heap);

}  // namespace symcomm
