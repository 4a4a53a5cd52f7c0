#include "transport/net/stream_bounce.h"

#include <cuda_runtime.h>

#include "base/cuda_runtime_check.h"

namespace symcomm {

StreamBounce::StreamBounce(int device, const char* heap_lo, const char* heap_hi, size_t bytes,
                           size_t message_bytes)
    : device_(device), heap_lo_(heap_lo), heap_hi_(heap_hi), bytes_(bytes),
      message_bytes_(message_bytes) {}

void StreamBounce::HostFree::operator()(char* p) const {
  if (cudaFreeHost(p) != cudaSuccess) static_cast<void>(cudaGetLastError());
}

bool StreamBounce::needed(const void* p) const {
  const auto* c = static_cast<const char*>(p);
  if (c >= heap_lo_ && c < heap_hi_) return false;
  DeviceScope scope(device_);
  RelaxedCapture relaxed;  // the caller may be capturing a graph
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) static_cast<void>(cudaGetLastError());
  return attr.type == cudaMemoryTypeDevice;
}

bool StreamBounce::on_gpu(const void* p) const {
  const auto* c = static_cast<const char*>(p);
  return (c >= heap_lo_ && c < heap_hi_) || needed(p);
}

StreamBounce::Key StreamBounce::key(symcommStream_t stream) const {
  unsigned long long capture = 0;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  {
    DeviceScope scope(device_);
    SYMCOMM_CUDART(cudaStreamGetCaptureInfo(static_cast<cudaStream_t>(stream), &status, &capture));
  }
  if (status != cudaStreamCaptureStatusActive) capture = 0;
  const bool per_thread = static_cast<cudaStream_t>(stream) == cudaStreamPerThread;
  return Key{stream, capture, per_thread ? std::this_thread::get_id() : std::thread::id()};
}

char* StreamBounce::buffer(symcommStream_t stream) {
  const Key k = key(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<VmmBuffer>& b = buffers_[k];
  if (!b) {
    DeviceScope scope(device_);
    RelaxedCapture relaxed;  // this thread's allocation, not the capture's
    b = std::make_unique<VmmBuffer>(device_, bytes_);
  }
  return b->data();
}

char* StreamBounce::message(symcommStream_t stream) {
  const Key k = key(stream);
  std::lock_guard<std::mutex> lock(mutex_);
  std::unique_ptr<char, HostFree>& m = messages_[k];
  if (!m) {
    DeviceScope scope(device_);
    RelaxedCapture relaxed;  // this thread's allocation, not the capture's
    void* p = nullptr;
    SYMCOMM_CUDART(cudaHostAlloc(&p, message_bytes_, cudaHostAllocPortable));
    m.reset(static_cast<char*>(p));
  }
  return m.get();
}

void StreamBounce::copy(void* dst, const void* src, size_t bytes, symcommStream_t stream) const {
  DeviceScope scope(device_);
  SYMCOMM_CUDART(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault,
                                 static_cast<cudaStream_t>(stream)));
}

}  // namespace symcomm
