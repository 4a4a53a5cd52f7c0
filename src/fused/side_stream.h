// The stream beside a caller's on which the fused implementations move data while the
// caller's stream computes (pipelined.cc, fused_impl.cu), and the flags their moves set.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>

namespace symcomm {

struct FusedShape;

// The side stream of a device and the event that hands work between it and a caller's
// stream, made once per device; runs on one device take turns (hold `mutex`: the event is
// reused).
struct Side {
  cudaStream_t stream = nullptr;
  cudaEvent_t event = nullptr;
  std::mutex mutex;
};
Side& side_of(int device);

// `to` waits for what was issued on `from` so far.
void follow(Side& side, cudaStream_t from, cudaStream_t to);

// Bytes of a member's flags at the head of a workspace: one word per team member and one
// more (a counter of the fused implementation's pushes), rounded up to 256 bytes so that
// what follows stays aligned.
size_t flags_bytes(const FusedShape& s);

}  // namespace symcomm
