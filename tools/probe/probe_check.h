// The standalone probes' checks: CK for a CUDA runtime call, CU for a driver call, NC for
// an NCCL call (where nccl.h is included first); each prints the call and exits on failure.
#ifndef SYMCOMM_TOOLS_PROBE_CHECK_H_
#define SYMCOMM_TOOLS_PROBE_CHECK_H_

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
#define CU(x)                                                                  \
  do {                                                                         \
    CUresult r_ = (x);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                  \
      std::fprintf(stderr, "%s:%d %s: %d\n", __FILE__, __LINE__, #x, (int)r_); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
#ifdef NCCL_MAJOR
#define NC(x)                                                                                 \
  do {                                                                                        \
    ncclResult_t r_ = (x);                                                                    \
    if (r_ != ncclSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#endif

#endif  // SYMCOMM_TOOLS_PROBE_CHECK_H_
