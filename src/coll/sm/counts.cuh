// All-to-all-v with counts in device memory, on the sm collectives' channels
// (sm/channels.cuh): device_counts_block is sm_counts_kernel's body (sm.cu).
#pragma once

#include "coll/device/env.cuh"
#include "coll/sm/channels.cuh"
#include "coll/sm/plan.h"

namespace symcomm {
namespace sm {

// One kernel, nothing known on the host. A message starts with a header of kHead bytes, the
// count of elements, in its first chunk (on channel 0), so a pair's chunk plan is that of
// kHead + bytes: the sender knows it, and the receiver learns it from the header. Where a
// block lands in recv is the sum of the earlier members' counts, so every receiving block
// (and every block of the own part) reads the headers of members 0 .. j itself, one thread
// each, from the ring: member m's is in the slot of chunk consumed[m][0] of channel 0, once
// posted[m][0] passes it.
//
// Those reads must happen before the block that receives channel 0 from m acknowledges that
// chunk (the sender may then overwrite the slot) and advances consumed[m][0]. So each
// reading block, once it has read, adds 1 to dc_readers, and the last own-part block adds
// kCallWeight minus the number of readers as well: every call raises dc_readers by exactly
// kCallWeight, and a channel-0 receiver that reads dc_readers = v before it adds its own 1
// waits for (v / kCallWeight + 1) x kCallWeight before it acknowledges chunk 0. Nothing is
// reset between calls; a reader reads the slots before it counts itself, and the header
// chunks do not wait for any acknowledgement of this call: no cycle. Like every sm
// collective, these calls must be stream-ordered on each rank.
//
// A block from member j that does not fit in the capacity is dropped whole (its chunks are
// still received and acknowledged, so the counters stay in step).
constexpr uint64_t kHead = 16;
constexpr uint64_t kCallWeight = uint64_t{1} << 20;  // more than any grid's blocks

// Waits for the headers of members 0 .. j (thread m for member m; this rank's own count is
// in its send counts); what member j's block holds and where it lands, and (for `last`,
// the last own-part block) the complement of the call's readers. False if a wait failed.
static __device__ bool read_counts(const Plan& p, int j, bool last, Transfer* t) {
  __shared__ uint64_t count[kMaxTeam];
  int rc = 0;
  for (int m = static_cast<int>(threadIdx.x); m <= j; m += static_cast<int>(blockDim.x)) {
    if (m == p.me) {
      count[m] = p.dev_send_counts[m];
      continue;
    }
    const int w = p.world[m];
    const uint64_t g = p.consumed[index(p, w, 0)];
    rc |= detail::wait_local(p.comm, p.posted + index(p, w, 0), symcommCmpGe, g + 1);
    count[m] = rc == 0 ? *reinterpret_cast<const uint64_t*>(slot_of(p, p.ring, w, 0, g)) : 0;
  }
  if (__syncthreads_or(rc)) return false;  // every read above has returned
  if (threadIdx.x == 0) {
    const uint64_t readers = static_cast<uint64_t>((p.n - 1) * p.channels + p.self_blocks);
    __threadfence();
    atomicAdd(reinterpret_cast<unsigned long long*>(p.dc_readers),
              static_cast<unsigned long long>(last ? 1 + kCallWeight - readers : 1));
  }
  // Where the block lands, and whether it fits. The fit is decided on the same sum with
  // counts past the capacity saturating (the capacity is at most SIZE_MAX / 2 elements), so
  // that counts from the device whose sum wraps around cannot make a block fit.
  const uint64_t past = p.capacity + 1;
  uint64_t at = 0, bound = 0;
  for (int m = 0; m < j; ++m) {
    at += count[m];
    bound = min(bound + min(count[m], past), past);
  }
  const bool fits = count[j] <= p.capacity && bound <= p.capacity - count[j];
  *t = {count[j] * p.elem, at * p.elem, fits, kHead, 0, 0};
  return true;
}

static __device__ void device_counts_block(const Plan& p) {
  const int b = static_cast<int>(blockIdx.x), peers = p.n - 1, ch = p.channels;
  Transfer t{};
  if (b < peers * ch) {  // receiving from member j on channel c
    const int j = (p.me - 1 - b / ch + p.n) % p.n, c = b % ch;
    // Channel 0 holds its acknowledgement of chunk 0 for this call's readers.
    __shared__ uint64_t hold;
    if (c == 0 && threadIdx.x == 0)
      hold = (detail::load_acquire(p.dc_readers) / kCallWeight + 1) * kCallWeight;
    if (!read_counts(p, j, false, &t)) return;
    if (c == 0) {
      t.hold = hold;
      if (threadIdx.x == 0) {
        p.dev_recv_counts[j] = t.len / p.elem;
        p.dev_recv_displs[j] = t.off / p.elem;
      }
    }
    return receive_from(p, t, j, c);
  }
  if (b < 2 * peers * ch) {  // sending to member j on channel c
    const int s = b - peers * ch, j = (p.me + 1 + s / ch) % p.n;
    const uint64_t count = p.dev_send_counts[j];
    return send_to(p, {count * p.elem, p.dev_send_displs[j] * p.elem, true, kHead, count, 0}, j,
                   s % ch);
  }
  const int part = b - 2 * peers * ch;  // this rank's own part
  if (!read_counts(p, p.me, part == p.self_blocks - 1, &t)) return;
  if (part == 0 && threadIdx.x == 0) {
    p.dev_recv_counts[p.me] = t.len / p.elem;
    p.dev_recv_displs[p.me] = t.off / p.elem;
  }
  if (t.keep) copy_own(p, p.dev_send_displs[p.me] * p.elem, t.off, t.len, part);
}

}  // namespace sm
}  // namespace symcomm
