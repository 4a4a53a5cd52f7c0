#include "copy/copy_box_ce.h"

#include <cuda_runtime.h>

#include <utility>

#include "base/cuda_runtime_check.h"

namespace symcomm {

bool copy_box_on_copy_engines(void* dst, const BoxLayout& dl, const void* src,
                              const BoxLayout& sl, const int64_t lo[3], const int64_t hi[3],
                              size_t elem, symcommStream_t stream) {
  // The axes the box extends along (extent > 1), by the source's strides.
  int axes[3], m = 0;
  int64_t n[3];
  for (int a = 0; a < 3; ++a) {
    n[a] = hi[a] - lo[a];
    if (n[a] <= 0) return true;  // nothing to copy
    if (n[a] > 1) axes[m++] = a;
  }
  for (int i = 1; i < m; ++i)  // an insertion sort: three axes at most
    for (int k = i; k > 0 && sl.stride[axes[k]] < sl.stride[axes[k - 1]]; --k)
      std::swap(axes[k], axes[k - 1]);
  for (int i = 1; i < m; ++i)
    if (dl.stride[axes[i]] <= dl.stride[axes[i - 1]]) return false;  // another order
  if (m > 0 && (sl.stride[axes[0]] != 1 || dl.stride[axes[0]] != 1)) return false;
  // The run along the first axis grows by every next axis that both layouts reach exactly
  // at its end: a box that is one contiguous run on both sides is one linear copy.
  int64_t run = m > 0 ? n[axes[0]] : 1;
  int j = 1;
  while (j < m && sl.stride[axes[j]] == run && dl.stride[axes[j]] == run) run *= n[axes[j++]];
  const auto e = static_cast<int64_t>(elem);
  char* d = static_cast<char*>(dst) + dl.offset(lo[0], lo[1], lo[2]) * e;
  const char* s = static_cast<const char*>(src) + sl.offset(lo[0], lo[1], lo[2]) * e;
  const auto width = static_cast<size_t>(run * e);
  if (j >= m) {
    SYMCOMM_CUDART(cudaMemcpyAsync(d, s, width, cudaMemcpyDefault, stream));
    return true;
  }
  const int a1 = axes[j];
  const auto dpitch = static_cast<size_t>(dl.stride[a1] * e);
  const auto spitch = static_cast<size_t>(sl.stride[a1] * e);
  if (dpitch < width || spitch < width) return false;
  if (j + 1 == m) {
    SYMCOMM_CUDART(cudaMemcpy2DAsync(d, dpitch, s, spitch, width, static_cast<size_t>(n[a1]),
                                     cudaMemcpyDefault, stream));
    return true;
  }
  // A 3D copy describes a slice as rows of the pitch: the slice pitch must be whole rows,
  // enough of them for the box.
  const int a2 = axes[j + 1];
  if (dl.stride[a2] % dl.stride[a1] != 0 || sl.stride[a2] % sl.stride[a1] != 0) return false;
  const int64_t drows = dl.stride[a2] / dl.stride[a1], srows = sl.stride[a2] / sl.stride[a1];
  if (drows < n[a1] || srows < n[a1]) return false;
  cudaMemcpy3DParms p{};
  p.srcPtr = make_cudaPitchedPtr(const_cast<char*>(s), spitch, width, static_cast<size_t>(srows));
  p.dstPtr = make_cudaPitchedPtr(d, dpitch, width, static_cast<size_t>(drows));
  p.extent = make_cudaExtent(width, static_cast<size_t>(n[a1]), static_cast<size_t>(n[a2]));
  p.kind = cudaMemcpyDefault;
  SYMCOMM_CUDART(cudaMemcpy3DAsync(&p, stream));
  return true;
}

}  // namespace symcomm
