// The CUDA context in which the net transport's own threads (the proxy, the stream worker)
// copy between GPU memory and the pinned staging, and apply signals: a context of their own
// on the communicator's GPU, not the primary context that the application's streams use.
//
// Why: a stream's work runs on one of the GPU's hardware queues, which several streams of a
// context share (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), in order. The application's
// streams wait for the transport (a put, a signal, a barrier across nodes waits in the stream
// for a word the worker or the proxy writes); a copy of the proxy's that lands behind such a
// wait on a shared queue waits for it in turn, and the wait never ends: on 2 GPUs as 2 nodes
// the proxy's landing copy (cudaStreamSynchronize after cudaMemcpyAsync) hung this way in
// CollMix.RandomSequenceReplayedFromAGraph, and a worker's copy with it. A context has its
// own queues. Its memory accesses reach the heap (mapped with the virtual memory management
// API, which belongs to the device, not to a context), pinned memory allocated portable, and
// the application's device buffers (copies between contexts of one device, by their unified
// addresses).
#pragma once

namespace symcomm {

class CopyContext {
 public:
  explicit CopyContext(int device);  // throws if the driver cannot make one
  ~CopyContext();
  CopyContext(const CopyContext&) = delete;
  CopyContext& operator=(const CopyContext&) = delete;

  void* get() const { return context_; }  // a CUcontext, for ContextScope
  int device() const { return device_; }

 private:
  int device_;
  void* context_ = nullptr;
};

}  // namespace symcomm
