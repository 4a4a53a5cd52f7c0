#include "fused/side_stream.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "base/cuda_runtime_check.h"
#include "fused/fused.h"

namespace symcomm {

Side& side_of(int device) {
  static std::mutex mutex;
  static std::map<int, Side> sides;
  std::lock_guard<std::mutex> lock(mutex);
  Side& side = sides[device];
  if (!side.stream) {
    SYMCOMM_CUDART(cudaStreamCreateWithFlags(&side.stream, cudaStreamNonBlocking));
    SYMCOMM_CUDART(cudaEventCreateWithFlags(&side.event, cudaEventDisableTiming));
  }
  return side;
}

void follow(Side& side, cudaStream_t from, cudaStream_t to) {
  SYMCOMM_CUDART(cudaEventRecord(side.event, from));
  SYMCOMM_CUDART(cudaStreamWaitEvent(to, side.event, 0));
}

size_t flags_bytes(const FusedShape& s) {
  constexpr size_t kAlign = 256;
  const size_t n = std::max(s.rows.size(), s.cols.size()) + 1;
  return (n * sizeof(uint64_t) + kAlign - 1) / kAlign * kAlign;
}

}  // namespace symcomm
