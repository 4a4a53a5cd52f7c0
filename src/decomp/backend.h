// Transpose and halo backends: one small interface, one file per backend
// (backend_copy.cc, ...), one registry line in decomp.cc.
#pragma once

#include <vector>

#include "decomp/geometry.h"
#include "memory/heap.h"
#include "rma/rma.h"

namespace symcomm {

// What a backend works with: this rank, the heap, the one-sided layer, and the teams of its
// row and column of the process grid.
struct DecompContext {
  const Geometry& geometry;
  int rank;
  Heap& heap;
  Rma& rma;
  symcommTeam_t row_team;
  symcommTeam_t col_team;
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

class DecompBackend {
 public:
  virtual ~DecompBackend() = default;
  virtual const char* name() const = 0;
  virtual bool supports(const DecompContext& ctx) const = 0;
  virtual size_t transpose_workspace(const DecompContext& ctx, size_t elem) const = 0;
  virtual void transpose(const DecompContext& ctx, const TransposeCall& call) = 0;
  virtual size_t halo_workspace(const DecompContext& ctx, int axis, int dim, size_t elem,
                                const int64_t* halo, const int64_t* padding) const = 0;
  virtual void halo(const DecompContext& ctx, const HaloCall& call) = 0;
};

// The registry: every backend, preferred first.
const std::vector<DecompBackend*>& decomp_backends();
DecompBackend* make_copy_backend();

}  // namespace symcomm
