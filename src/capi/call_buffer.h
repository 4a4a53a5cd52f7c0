// Memory of one collective call's own, in its memory space: on GPUs stream-ordered device
// memory (cudaMallocAsync on the call's stream, freed on it when the call returns, after the
// work queued there), on the host plain memory, aligned for every type. What a
// pre-multiplied sum's scaled input and a group's packed all-reduces are made in.
#pragma once

#include <cstdint>
#include <memory>

#include "capi/comm.h"

namespace symcomm::capi {

class CallBuffer {
 public:
  CallBuffer(symcommComm& c, symcommStream_t stream, const char* what)
      : c_(c), stream_(stream), what_(what) {}
  ~CallBuffer();
  CallBuffer(const CallBuffer&) = delete;
  CallBuffer& operator=(const CallBuffer&) = delete;
  // `bytes` of it, made at the first call (a later call gets the same memory).
  char* get(size_t bytes);

 private:
  symcommComm& c_;
  symcommStream_t stream_;
  const char* what_;  // for the warning of a failed free
  void* device_ = nullptr;
  std::unique_ptr<uint64_t[]> host_;
};

}  // namespace symcomm::capi
