// The cuda space's stream calls across nodes: application memory outside the heap goes
// through a bounce buffer of the call's stream.
//
// Why: the transport's threads copy in a context of their own (copy_context.h), and memory
// that belongs to the application's context is reached there badly or not at all: a copy of
// cudaMallocAsync memory (a pre-multiplied sum's scaled input, across nodes) crashed the
// driver inside cuMemcpyAsync, and a copy of cudaMalloc memory never finished beside the
// application's running kernels (the device API's case, which the device ring's bounce slots
// answer the same way). So the call copies such a buffer on the caller's stream, in the
// application's context, to or from a VmmBuffer, which the copy context reaches; the worker
// moves only that.
//
// A buffer per stream (cudaStreamPerThread: per calling thread, whose stream it names), made
// at its first such call and kept until the transport goes: the stream's order keeps one
// call's use before the next's. A call captured into a graph gets a
// buffer of its capture and stream, which the graph then owns for good: its replays (on any
// stream) never share it with calls outside the graph. The memory is the cost: `bytes()` per
// stream, and per stream of each capture that moves such memory.
//
// A small put-signal's payload in GPU memory takes the same way to pinned host memory of the
// stream's (`message`, at most `message_bytes`): the call copies it there on its stream, so
// that the job finds it in host memory. A copy engine's copy in the stream's order takes a few
// microseconds; the worker's own copy after the stream reached the job (a copy and a wait in
// the copy context) took 9-10 us of an 8-byte put-signal's one way time of 29 us (2 ranks as
// 2 nodes on one H200, SYMCOMM_TRANSPORT_TRACE's "gpu read_message").
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>

#include "symcomm/symcomm.h"
#include "transport/vmm_buffer.h"

namespace symcomm {

class StreamBounce {
 public:
  // [heap_lo, heap_hi): this rank's heap window, which the copy context reaches.
  // `bytes`: each buffer's size (what a call moves at a time).
  // `message_bytes`: each stream's pinned host buffer for small payloads.
  StreamBounce(int device, const char* heap_lo, const char* heap_hi, size_t bytes,
               size_t message_bytes);

  // Whether a call's local buffer `p` must go through it: device memory outside the heap.
  bool needed(const void* p) const;
  // Whether `p` is GPU memory: in the heap, or device memory outside it.
  bool on_gpu(const void* p) const;
  // The buffer of `stream` (of its capture, where it is being captured); made at first use.
  char* buffer(symcommStream_t stream);
  size_t bytes() const { return bytes_; }
  // The pinned host buffer of `stream` (of its capture), `message_bytes` long; made at first
  // use.
  char* message(symcommStream_t stream);
  // `bytes` from `src` to `dst` on `stream`, in the application's context.
  void copy(void* dst, const void* src, size_t bytes, symcommStream_t stream) const;

 private:
  int device_;
  const char* heap_lo_;
  const char* heap_hi_;
  size_t bytes_;
  size_t message_bytes_;
  struct Key {
    symcommStream_t stream;
    unsigned long long capture;  // 0 outside a capture
    std::thread::id thread;      // cudaStreamPerThread is a stream per calling thread
    bool operator<(const Key& o) const {
      return std::tie(stream, capture, thread) < std::tie(o.stream, o.capture, o.thread);
    }
  };
  Key key(symcommStream_t stream) const;
  struct HostFree {
    void operator()(char* p) const;
  };
  std::mutex mutex_;
  std::map<Key, std::unique_ptr<VmmBuffer>> buffers_;
  std::map<Key, std::unique_ptr<char, HostFree>> messages_;
};

}  // namespace symcomm
