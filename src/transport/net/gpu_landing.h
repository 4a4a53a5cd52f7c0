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
// was as slow as a plain one; so was a 2D copy of one row. But a 2D copy of 2 rows or more
// runs on a copy engine at any size: 2 rows of 1 byte, of 4 KiB or of 15 KiB, and 16 rows of 1
// KiB, took 7.6-9.8 us beside the spinning kernel (the same as on an idle GPU), against 2380
// us for the same bytes in one row.
//
// So a piece below kCopyEngineMinBytes goes as copies of 2 rows or more (an odd byte count as
// 2 rows and then its last 3 bytes as 3 rows of one), and a piece of up to kMemopMaxBytes of
// whole aligned words as stream memory operations (an 8-byte signal payload: one operation,
// 7.7 us). Each operation carries a memory barrier (the v2 API has no flag to leave it out),
// about 0.8 us a word on 2 H200 as 2 nodes: a 4 KiB put-signal landed by 512 of them took
// 441 us one way. Only a piece of a single byte still goes as a plain copy, which waits for
// the time slice beside a spinning kernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace symcomm {

struct CudaDriver;

// Host-to-device copies of at least this many bytes run on a copy engine.
constexpr size_t kCopyEngineMinBytes = 32 << 10;
// Pieces of at most this many bytes of whole aligned 4-byte words are written by stream
// memory operations.
constexpr size_t kMemopMaxBytes = 16;

// Whether land_on_gpu lands `bytes` on the engine stream alone (all but a single byte).
inline bool lands_on_engine(size_t bytes) { return bytes != 1; }

// The streams a thread of the transport lands with, both of the transport's context (made in
// the one current) and non-blocking. `engine` begins with a copy of kCopyEngineMinBytes to the
// GPU and takes the stream memory operations, the copies on copy engines (of 2 rows or more,
// or of kCopyEngineMinBytes and more) and copies from the GPU; `compute` takes what runs on
// the compute engine (a one-byte landing, kernels). What a stream does first decides, it seems, where the
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

// Writes `bytes` of pinned host memory `src` to GPU memory `dst`, all on `engine`: a copy of
// kCopyEngineMinBytes or more; whole aligned words of up to kMemopMaxBytes by stream memory
// operations; anything else of 2 bytes or more by copies of 2 rows or more. A single byte goes
// as a copy on `compute`. Both are cudaStream_t of the transport's context (current); the
// caller synchronises both.
void land_on_gpu(const CudaDriver& drv, void* dst, const void* src, size_t bytes, void* engine,
                 void* compute);

}  // namespace symcomm
