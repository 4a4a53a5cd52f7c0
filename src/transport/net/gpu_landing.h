// How the net transport's own threads write small pieces into GPU memory: with work the GPU
// does not time-slice against the application's kernels.
//
// The proxy and the stream worker work in a CUDA context of their own (copy_context.h). The GPU
// runs one context's compute work at a time and switches contexts by time slices, so while a
// kernel of the application's spins (an on-stream signal wait, a barrier, a user kernel that
// polls), work of the transport's context that needs the compute engine waits for the slice to
// end: about 2.4 ms on an H200. Measured (tools/probe/ctx_slices.cu, H200, driver 580): a
// host-to-device copy below 32 KiB, a device-to-device copy, a memset and a kernel all took
// 2377 us there against 6-11 us on an idle GPU; copies of 32 KiB and more (copy engines),
// device-to-host copies, and stream memory operations (cuStreamWriteValue32/64) took 7-28 us
// either way. A copy through cuMemcpyBatchAsync with CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE
// was as slow as a plain one. So a small piece goes as stream memory operations that write its
// words; only the bytes of a piece that do not fill an aligned 4-byte word go as a copy.
//
// Each operation carries a memory barrier (the v2 API has no flag to leave it out): on 2 H200
// as 2 nodes an 8-byte put-signal took 45 us one way, a 64-byte one 57 us and a 4 KiB one
// 441 us (about 0.8 us a word), against 2.1-2.3 ms before. A piece of up to kMemopMaxBytes
// goes as operations; a larger one, below kCopyEngineMinBytes, as a copy: 8-12 us on an idle
// GPU, a time slice beside a spinning kernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace symcomm {

struct CudaDriver;

// Host-to-device copies of at least this many bytes run on a copy engine.
constexpr size_t kCopyEngineMinBytes = 32 << 10;
// Pieces of at most this many bytes are written by stream memory operations.
constexpr size_t kMemopMaxBytes = 4 << 10;

// The streams a thread of the transport lands with, both of the transport's context (made in
// the one current) and non-blocking. `engine` begins with a copy of kCopyEngineMinBytes to the
// GPU and takes the stream memory operations, the copies of kCopyEngineMinBytes and more, and
// copies from the GPU; `compute` takes what runs on the compute engine (host-to-device copies
// below kCopyEngineMinBytes, kernels). What a stream does first decides, it seems, where the
// driver runs its later work: on 2 H200 as 2 nodes, the rank whose proxy stream first read 8
// bytes from the GPU and then wrote by stream memory operations took 2046 us a landing and 2100
// us a signal beside a spinning wait kernel (an 8-byte put-signal: 2.1 ms one way), while the
// rank whose stream began with a large landing took 12.7 and 7.0 us. And it is not only the
// first: with one stream for everything, 8-byte put-signals after a series of 16 KiB ones
// (copies below kCopyEngineMinBytes) took 3.2 ms one way against 36-40 us before them
// (symcomm-bench net, SYMCOMM_TRANSPORT_TRACE=1: landings and signals at 2.1 ms, p90). So the
// two kinds of work never share a stream.
class LandingStreams {
 public:
  LandingStreams();  // throws where the streams cannot be made or started
  ~LandingStreams();
  LandingStreams(const LandingStreams&) = delete;
  LandingStreams& operator=(const LandingStreams&) = delete;

  void* engine() const { return engine_; }    // a cudaStream_t
  void* compute() const { return compute_; }  // a cudaStream_t
  // Writes `bytes` of pinned host memory `src` to GPU memory `dst` (land_on_gpu). Words written
  // by stream memory operations take their values when this is called. The caller syncs.
  void land(const CudaDriver& drv, void* dst, const void* src, size_t bytes);
  // Waits for both streams, `timeout_ms` at most (0: no bound; sync_within).
  void sync(int64_t timeout_ms);

 private:
  void* engine_ = nullptr;
  void* compute_ = nullptr;
};

// Waits for `stream` (a cudaStream_t) to finish its work, `timeout_ms` at most (0: no bound),
// else throws symcommTimeout: where the GPU does not run the transport's copies (a landing
// beside an application kernel that spins held both ranks' stream workers in
// cudaStreamSynchronize for over a minute, 2 H200 as 2 nodes, DeviceMix), the caller fails
// with an error instead of hanging.
void sync_within(void* stream, int64_t timeout_ms);

// Writes `bytes` of pinned host memory `src` to GPU memory `dst`: words by stream memory
// operations on `engine` (pieces of up to kMemopMaxBytes), a copy of kCopyEngineMinBytes or more
// on `engine`, smaller copies (a mid-sized piece, the bytes that do not fill an aligned 4-byte
// word) on `compute`. Both are cudaStream_t of the transport's context (current); the caller
// synchronises both.
void land_on_gpu(const CudaDriver& drv, void* dst, const void* src, size_t bytes, void* engine,
                 void* compute);

}  // namespace symcomm
