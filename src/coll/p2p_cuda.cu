// The cuda space's sends and receives: the kernel (a block per way of each lane) and its
// launch (coll/p2p_plan.h). Each way runs the host space's protocol (coll/p2p.cc) on its part
// of every message: a sender waits for a free slot in its mailbox at the receiver (`freed`),
// writes a chunk there (the first one after the message's header) and adds 1 to the
// receiver's `filled` word for it; a receiver waits for a filled slot, reads the header of
// a message's first chunk (the message's size decides its part and so how many chunks it
// takes, so a mismatched pair still leaves the mailbox in step), copies the chunk out and
// adds 1 to the sender's `freed` word for it.
#include <cuda_runtime.h>

#include "base/cuda_runtime_check.h"
#include "base/error.h"
#include "base/kernel_load.h"
#include "base/launch.cuh"
#include "coll/p2p_parts.h"
#include "coll/p2p_plan.h"
#include "symcomm/device.cuh"

namespace symcomm {

namespace {

constexpr int kThreads = 512;
constexpr uint64_t kHeader = 64;  // PointToPoint::kHeader

struct Header {  // as the host space's ChunkHeader
  uint64_t total;
  int32_t team;
  int32_t from;
};


// A lane's failed wait (recorded in the handle's error record) ends the lane; its counter is
// left as it was (the communicator has failed).
// (peer, way) as an index of the plan's arrays.
__device__ size_t pair_of(const P2pPlan& p, int rank, int way) {
  return static_cast<size_t>(rank) * static_cast<size_t>(p.ways) + static_cast<size_t>(way);
}

__device__ void send_lane(const DeviceComm& c, const P2pPlan& p, const P2pLane& lane, int way) {
  const int peer = lane.peer, me = c.rank;
  const uint64_t chunk = p.slot_bytes - kHeader, slots = static_cast<uint64_t>(p.slots);
  const size_t to = pair_of(p, peer, way), mine = pair_of(p, me, way);
  uint64_t s = p.sent[to];
  char* header = p.headers + to * kHeader;  // this rank's scratch
  for (int k = 0; k < lane.count; ++k) {
    const P2pCall& call = p.calls[lane.first + k];
    const P2pPart part = p2p_part(call.bytes, lane.ways, way);
    const uint64_t n = p2p_chunks(part.bytes, chunk);
    for (uint64_t j = 0; j < n; ++j, ++s) {
      if (s >= slots &&
          signal_wait_until_block(c, p.freed + to, symcommCmpGe, s - slots + 1) != 0)
        return;
      // The peer's mailbox for this rank's way, slot s: by its symmetric address.
      char* box = p.boxes + (mine * slots + s % slots) * p.slot_bytes;
      const uint64_t at = part.at + j * chunk;
      const uint64_t end = part.at + part.bytes;
      const uint64_t bytes = end > at ? min(chunk, end - at) : 0;
      if (j == 0) {
        if (threadIdx.x == 0) {
          Header* h = reinterpret_cast<Header*>(header);
          h->total = call.bytes;
          h->team = call.team;
          h->from = me;
        }
        __syncthreads();
        put_block(c, box, header, sizeof(Header), peer);
      }
      put_signal_block(c, box + kHeader, call.send + at, bytes, p.filled + mine, 1,
                       symcommSignalAdd, peer);
    }
  }
  if (threadIdx.x == 0) p.sent[to] = s;
}

__device__ void recv_lane(const DeviceComm& c, const P2pPlan& p, const P2pLane& lane, int way) {
  const int peer = lane.peer, me = c.rank;
  const uint64_t chunk = p.slot_bytes - kHeader, slots = static_cast<uint64_t>(p.slots);
  const size_t from = pair_of(p, peer, way), mine = pair_of(p, me, way);
  __shared__ uint64_t total;
  __shared__ int bad;
  uint64_t t = p.taken[from];
  for (int k = 0; k < lane.count; ++k) {
    const P2pCall& call = p.calls[lane.first + k];
    uint64_t n = 1;
    P2pPart part{0, 0};
    for (uint64_t j = 0; j < n; ++j, ++t) {
      if (signal_wait_until_block(c, p.filled + from, symcommCmpGt, t) != 0) return;
      const char* box = p.boxes + (from * slots + t % slots) * p.slot_bytes;
      if (j == 0) {
        if (threadIdx.x == 0) {
          const Header h = *reinterpret_cast<const Header*>(box);
          total = h.total;
          bad = h.total != call.bytes || h.team != call.team;
          if (bad && atomicCAS(p.mismatch_claim, p.mismatch_gen, p.mismatch_gen + 1) ==
                         p.mismatch_gen) {
            p.mismatch->peer = peer;
            p.mismatch->team = h.team;
            p.mismatch->want_team = call.team;
            p.mismatch->total = h.total;
            p.mismatch->want = call.bytes;
            __threadfence_system();
            *static_cast<volatile int32_t*>(&p.mismatch->set) = 1;
          }
        }
        __syncthreads();
        part = p2p_part(total, lane.ways, way);  // the sender's part: its chunks
        n = p2p_chunks(part.bytes, chunk);
      }
      const uint64_t at = part.at + j * chunk;
      const uint64_t end = part.at + part.bytes;
      const uint64_t bytes = end > at ? min(chunk, end - at) : 0;
      if (!bad && bytes)
        detail::copy(call.recv + at, box + kHeader, bytes, threadIdx.x, blockDim.x);
      __syncthreads();  // the slot is read before it is handed back
      if (threadIdx.x == 0) signal_op(c, p.freed + mine, 1, symcommSignalAdd, peer);
    }
  }
  if (threadIdx.x == 0) p.taken[from] = t;
}

__global__ void __launch_bounds__(kThreads, 1)
    p2p_kernel(const __grid_constant__ DeviceComm c, const __grid_constant__ P2pPlan p) {
  pdl_begin();
  int l = 0;  // the lane whose ways hold this block
  while (l + 1 < p.nlanes && p.lanes[l + 1].block <= static_cast<int>(blockIdx.x)) ++l;
  const P2pLane& lane = p.lanes[l];
  const int way = static_cast<int>(blockIdx.x) - lane.block;
  if (lane.send) send_lane(c, p, lane, way);
  else recv_lane(c, p, lane, way);
}

// Loaded when a communicator is made (base/kernel_load.h).
const KernelLibrary kKernels(reinterpret_cast<const void*>(&p2p_kernel));

}  // namespace

P2pCuda::P2pCuda(int device, int pairs) : device_(device), pairs_(pairs) {
  DeviceScope scope(device_);
  try {
    void* p = nullptr;
    const size_t bytes = (2 * static_cast<size_t>(pairs) + 1) * sizeof(uint64_t);
    SYMCOMM_CUDART(cudaMalloc(&p, bytes));
    counters_ = static_cast<uint64_t*>(p);
    SYMCOMM_CUDART(cudaMemset(counters_, 0, bytes));
    SYMCOMM_CUDART(
        cudaHostAlloc(&p, sizeof(P2pMismatch), cudaHostAllocMapped | cudaHostAllocPortable));
    mismatch_ = static_cast<P2pMismatch*>(p);
    *mismatch_ = P2pMismatch{};
    for (void** e : {&last_, &join_}) {
      cudaEvent_t made = nullptr;
      SYMCOMM_CUDART(cudaEventCreateWithFlags(&made, cudaEventDisableTiming));
      *e = made;
    }
    // Every lane waits for its peers' lanes: all of a group's blocks must be resident at once.
    int per_sm = 0, sms = 0;
    SYMCOMM_CUDART(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, p2p_kernel, kThreads, 0));
    SYMCOMM_CUDART(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_));
    max_blocks_ = per_sm * sms;
    SYMCOMM_CUDART(cudaDeviceSynchronize());
  } catch (...) {
    for (void* e : {last_, join_})
      if (e) static_cast<void>(cudaEventDestroy(static_cast<cudaEvent_t>(e)));
    if (counters_) static_cast<void>(cudaFree(counters_));
    if (mismatch_) static_cast<void>(cudaFreeHost(mismatch_));
    throw;
  }
}

P2pCuda::~P2pCuda() {
  DeviceScope scope(device_);
  for (cudaError_t e : {cudaEventDestroy(static_cast<cudaEvent_t>(last_)),
                        cudaEventDestroy(static_cast<cudaEvent_t>(join_)), cudaFree(counters_),
                        cudaFreeHost(mismatch_)})
    if (e != cudaSuccess) static_cast<void>(cudaGetLastError());
}

void P2pCuda::fill(P2pPlan& plan) const {
  plan.sent = counters_;
  plan.taken = counters_ + pairs_;
  plan.mismatch = mismatch_;
  plan.mismatch_claim = reinterpret_cast<unsigned long long*>(counters_ + 2 * pairs_);
  plan.mismatch_gen = mismatch_gen_;
}

bool P2pCuda::take_mismatch(P2pMismatch* out) {
  if (__atomic_load_n(&mismatch_->set, __ATOMIC_ACQUIRE) != 1) return false;
  *out = *mismatch_;
  *mismatch_ = P2pMismatch{};
  ++mismatch_gen_;  // the next record goes to the next generation's first mismatch
  return true;
}

void P2pCuda::launch(const DeviceComm& c, const P2pPlan& plan, void* stream,
                     const void* const* others, int nothers) {
  SYMCOMM_REQUIRE(plan.nblocks <= max_blocks_, symcommNotSupported,
                  "a group of sends and receives with %d (peer, direction) pairs, %d blocks: "
                  "the GPU holds %d of its blocks at once, and every block must run beside "
                  "the others", plan.nlanes, plan.nblocks, max_blocks_);
  DeviceScope scope(device_);
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaEvent_t last = static_cast<cudaEvent_t>(last_);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  SYMCOMM_CUDART(cudaStreamIsCapturing(s, &capture));
  const bool capturing = capture != cudaStreamCaptureStatusNone;
  // After the previous group's kernel (an event recorded outside a capture cannot be
  // waited for inside one: a captured group is ordered by its graph's own dependencies).
  if (!capturing) SYMCOMM_CUDART(cudaStreamWaitEvent(s, last, 0));
  // The group's other streams: their work before the group first, their work after it last
  // (one event serves every fork and join: each wait takes the record before it).
  cudaEvent_t join = static_cast<cudaEvent_t>(join_);
  for (int i = 0; i < nothers; ++i) {
    cudaStream_t o = static_cast<cudaStream_t>(const_cast<void*>(others[i]));
    SYMCOMM_CUDART(cudaEventRecord(join, o));
    SYMCOMM_CUDART(cudaStreamWaitEvent(s, join, 0));
  }
  launch_kernel(p2p_kernel, plan.nblocks, kThreads, s, c, plan);
  SYMCOMM_CUDART(cudaGetLastError());
  if (!capturing) SYMCOMM_CUDART(cudaEventRecord(last, s));
  if (nothers == 0) return;
  SYMCOMM_CUDART(cudaEventRecord(join, s));
  for (int i = 0; i < nothers; ++i)
    SYMCOMM_CUDART(
        cudaStreamWaitEvent(static_cast<cudaStream_t>(const_cast<void*>(others[i])), join, 0));
}

void p2p_clear_device(int device, void* p, size_t bytes) {
  DeviceScope scope(device);
  SYMCOMM_CUDART(cudaMemset(p, 0, bytes));
  SYMCOMM_CUDART(cudaDeviceSynchronize());
}

}  // namespace symcomm
