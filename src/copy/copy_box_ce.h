// A box copy on the copy engines (Copies::copy_box_ce on GPUs): one cudaMemcpyAsync,
// cudaMemcpy2DAsync or cudaMemcpy3DAsync after merging the axes along which both layouts are
// one contiguous run.
#pragma once

#include "copy/box.h"

namespace symcomm {

// Copies::copy_box_ce's contract; the caller has made the copy's device current.
bool copy_box_on_copy_engines(void* dst, const BoxLayout& dl, const void* src,
                              const BoxLayout& sl, const int64_t lo[3], const int64_t hi[3],
                              size_t elem, symcommStream_t stream);

}  // namespace symcomm
