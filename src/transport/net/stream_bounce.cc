#include "transport/net/stream_bounce.h"

#include <cuda_runtime.h>

#include "base/cuda_runtime_check.h"

namespace symcomm {

StreamBounce::StreamBounce(int device, const char* heap_lo, const char* heap_hi, size_t bytes)
    : device_(device), heap_lo_(heap_lo), heap_hi_(heap_hi), bytes_(bytes) {}

bool StreamBounce::needed(const void* p) const {
  const auto* c = static_cast<const char*>(p);
  if (c >= heap_lo_ && c < heap_hi_) return false;
  DeviceScope scope(device_);
  RelaxedCapture relaxed;  // the caller may be capturing a graph
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) static_cast<void>(cudaGetLastError());
  return attr.type == cudaMemoryTypeDevice;
}

char* StreamBounce::buffer(symcommStream_t stream) {
  unsigned long long capture = 0;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  {
    DeviceScope scope(device_);
    SYMCOMM_CUDART(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, &capture));
  }
  if (status != cudaStreamCaptureStatusActive) capture = 0;
  const bool per_thread = static_cast<cudaStream_t>(stream) == cudaStreamPerThread;
  const Key key{stream, capture, per_thread ? std::this_thread::get_id() : std::thread::id()};
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<VmmBuffer>& b = buffers_[key];
  if (!b) {
    DeviceScope scope(device_);
    RelaxedCapture relaxed;  // this thread's allocation, not the capture's
    b = std::make_unique<VmmBuffer>(device_, bytes_);
  }
  return b->data();
}

void StreamBounce::copy(void* dst, const void* src, size_t bytes, symcommStream_t stream) const {
  DeviceScope scope(device_);
  SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice,
                                 static_cast<cudaStream_t>(stream)));
}

}  // namespace symcomm
