// The device API's signals from kernels: put_signal ordering data before its signal, signals
// from every peer at once, fence and quiet (every scope) publishing data behind a relaxed
// flag, small put-signals from any memory, a quiet on the stream after a kernel, and every
// comparison with put_signal_warp and at its edges. Outputs are poisoned
// before and checked byte by byte after (the Device fixture is in device_fixture.cuh).
#include <string>
#include <vector>

#include "device_fixture.cuh"

namespace device_test {

// ---------------------------------------------------------------------------------------
// 2. put_signal ordering: a ring of kRing slots to the right neighbour, acknowledged
// ---------------------------------------------------------------------------------------
constexpr int kRing = 4;
struct RingShape {
  size_t chunk;
  int rounds;
  unsigned threads;
  size_t skew;         // source offset: 0 uses 16-byte accesses, 1 single bytes
  uint32_t delay_ns;   // warp w of the sender reaches put_signal_block (w % 8) * delay_ns
                       // late: a signal sent before every warp's data would be caught
};
const RingShape kRingShapes[] = {
    {64 << 10, 200, 512, 0, 0}, {64 << 10, 1000, 1024, 0, 500}, {1 << 20, 50, 1024, 1, 0}};

// Block 0 sends round r from stage + r * chunk into ring slot r % kRing on the right
// neighbour, adding 1 to its data_sig; it reuses a slot only after the neighbour's ack.
// Block 1 waits for round r from the left neighbour, checks it, and acks.
// Of up to 1024 threads: the ring's out-of-line paths need more registers than 64 with the
// kernel's own (docs/transport.md, bounce buffers).
__global__ void __launch_bounds__(1024)
    ring_kernel(DeviceComm c, RingShape shape, char* ring, const char* stage, uint64_t* data_sig,
                uint64_t* ack_sig, uint64_t what, ull* bad, int* rc_out) {
  const size_t chunk = shape.chunk;
  const int rounds = shape.rounds;
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  for (int r = 0; r < rounds; ++r) {
    char* slot = ring + (r % kRing) * chunk;
    if (blockIdx.x == 0) {
      if (r >= kRing) {
        const int rc = symcomm::signal_wait_until_block(c, ack_sig, symcommCmpGe, r - kRing + 1);
        if (rc != 0) {
          if (threadIdx.x == 0) rc_out[0] = rc;
          return;
        }
      }
      const uint64_t until = now_ns() + (threadIdx.x / 32 % 8) * uint64_t{shape.delay_ns};
      while (now_ns() < until) {
      }
      symcomm::put_signal_block(c, slot, stage + r * chunk, chunk, data_sig, 1,
                                symcommSignalAdd, right);
    } else {
      const int rc = symcomm::signal_wait_until_block(c, data_sig, symcommCmpGe, r + 1);
      if (rc != 0) {
        if (threadIdx.x == 0) rc_out[1] = rc;
        return;
      }
      ull mine = 0;
      for (size_t i = threadIdx.x; i < chunk; i += blockDim.x)
        mine += static_cast<uint8_t>(slot[i]) != mp::pattern(left, what + r, i);
      if (mine) atomicAdd(bad, mine);
      __syncthreads();  // every check read the slot before the ack frees it
      if (threadIdx.x == 0) symcomm::signal_op(c, ack_sig, 1, symcommSignalAdd, left);
    }
  }
  // The last ack has no wait of the peer's behind it: complete before the kernel ends (across
  // nodes a signal goes through the proxy after the kernel issued it), so that the host reads
  // every ack once both ranks' kernels ended.
  if (blockIdx.x == 1 && threadIdx.x == 0) symcomm::quiet(c);
}

// ---------------------------------------------------------------------------------------
// 3. Every rank signals every peer at once
// ---------------------------------------------------------------------------------------
constexpr size_t kPeerBytes = 16 << 10;

// Block t (one thread): put_signal of sizes[me][t] bytes into my slot on t with SET nonce,
// then wait for t's signal here and check the whole slot t wrote (data, then poison).
__global__ void all_peers_kernel(DeviceComm c, uint8_t* buf, const uint8_t* src,
                                 uint64_t* sigs, const uint32_t* sizes, uint64_t nonce,
                                 uint64_t what, ull* bad, int* rc_out) {
  const int t = blockIdx.x, me = symcomm::team_rank(c), n = symcomm::team_size(c);
  symcomm::put_signal(c, buf + me * kPeerBytes, src + t * kPeerBytes, sizes[me * n + t],
                      sigs + me, nonce, symcommSignalSet, t);
  const int rc = symcomm::signal_wait_until(c, sigs + t, symcommCmpEq, nonce);
  if (rc != 0) {
    atomicCAS(rc_out, 0, rc);
    return;
  }
  const uint32_t bytes = sizes[t * n + me];
  const uint8_t* got = buf + t * kPeerBytes;
  ull mine = 0;
  for (size_t i = 0; i < kPeerBytes; ++i)
    mine += got[i] != (i < bytes ? mp::pattern(t, what, me * kPeerBytes + i) : kPoison);
  if (mine) atomicAdd(bad, mine);
}

// ---------------------------------------------------------------------------------------
// 8. Publishing data behind a flag that orders nothing itself: fence and quiet
// ---------------------------------------------------------------------------------------
enum Publish { kFence = 0, kQuietThread = 1, kQuietWarp = 2, kQuietBlock = 3 };
const char* const kPublishName[] = {"fence", "quiet", "quiet_warp", "quiet_block"};
constexpr size_t kPieceBytes = 8 << 10;
constexpr int kPieces = 64;

// Block 0 puts piece r (stage + r * kPieceBytes) into slot r of `slots` on the right
// neighbour (by one thread, warp 0 or the whole block, as the mode says), then raises the
// neighbour's `flag` to r + 1 with a write that orders nothing by itself: for kFence, fence()
// then a put of the 8-byte value from `values` (values[r] = r + 1); for the quiets, the
// quiet then a relaxed signal_op. Block 1 waits for the flag from the left to reach r + 1
// and checks slot r. Without the fence or the quiet the flag may overtake the piece.
__global__ void publish_kernel(DeviceComm c, int mode, char* slots, const char* stage,
                               uint64_t* flag, const uint64_t* values, uint64_t what, ull* bad,
                               int* rc_out) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  if (blockIdx.x == 0) {
    if (mode == kQuietWarp ? threadIdx.x >= 32 : mode != kQuietBlock && threadIdx.x != 0) return;
    for (int r = 0; r < kPieces; ++r) {
      char* dst = slots + r * kPieceBytes;
      const char* src = stage + r * kPieceBytes;
      if (mode == kQuietBlock) {
        symcomm::put_block(c, dst, src, kPieceBytes, right);
        symcomm::quiet_block(c);
      } else if (mode == kQuietWarp) {
        symcomm::put_warp(c, dst, src, kPieceBytes, right);
        symcomm::quiet_warp(c);
      } else {
        symcomm::put(c, dst, src, kPieceBytes, right);
        if (mode == kFence) symcomm::fence(c);
        else symcomm::quiet(c);
      }
      if (threadIdx.x != 0) continue;
      if (mode == kFence) symcomm::put(c, flag, values + r, sizeof(uint64_t), right);
      else symcomm::signal_op(c, flag, r + 1, symcommSignalSet, right);
    }
    return;
  }
  for (int r = 0; r < kPieces; ++r) {
    const int rc = symcomm::signal_wait_until_block(c, flag, symcommCmpGe, r + 1);
    if (rc != 0) {
      if (threadIdx.x == 0) rc_out[0] = rc;
      return;
    }
    const char* slot = slots + r * kPieceBytes;
    ull mine = 0;
    for (size_t i = threadIdx.x; i < kPieceBytes; i += blockDim.x)
      mine += static_cast<uint8_t>(slot[i]) != mp::pattern(left, what + r, i);
    if (mine) atomicAdd(bad, mine);
  }
}

// ---------------------------------------------------------------------------------------
// 10. Small put-signals from any memory: up to DeviceNetRing::inline_max bytes to a member on
//     another node travel in the ring's descriptor, copied there by the calling thread
// ---------------------------------------------------------------------------------------
constexpr int kSmallRounds = 48;
constexpr size_t kSmallSlot = 256;
enum SmallSource { kSmallFromHeap = 0, kSmallFromPlain = 1, kSmallFromShared = 2 };
const char* const kSmallSourceName[] = {"heap", "cudaMalloc", "shared memory"};

// Round r's size: 1, 7, 8, 13, 56, 64, 65, 200 in turn, at most `max_bytes` (the rest
// skipped, where the source is shared memory and the peer beyond load and store: larger ones
// are refused there).
__host__ __device__ inline uint32_t small_size(int r, uint32_t max_bytes) {
  const uint32_t sizes[8] = {1, 7, 8, 13, 56, 64, 65, 200};
  const uint32_t b = sizes[r % 8];
  return b <= max_bytes ? b : 0;
}

// Block 0, thread 0: round r's bytes from `source` (src + r * kSmallSlot + r % 8, copied to
// shared memory first for kSmallFromShared) into slot r of the right neighbour, adding 1 to
// its signal; the source is poisoned as soon as put_signal returned (it may be reused then).
// Block 1 waits for the signal from the left to reach r + 1 and checks slot r: the payload,
// then poison to the slot's end.
__global__ void small_kernel(DeviceComm c, int source, char* slots, char* src, uint64_t* sig,
                             uint32_t max_bytes, uint64_t what, ull* bad, int* rc_out) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  __shared__ char staged[kSmallSlot + 8];
  if (blockIdx.x == 0) {
    for (int r = 0; r < kSmallRounds; ++r) {
      const uint32_t bytes = small_size(r, max_bytes);
      char* from = src + r * kSmallSlot + r % 8;
      if (source == kSmallFromShared) {
        for (uint32_t i = threadIdx.x; i < bytes; i += blockDim.x) staged[r % 8 + i] = from[i];
        __syncthreads();
        from = staged + r % 8;
      }
      if (threadIdx.x == 0) {
        symcomm::put_signal(c, slots + r * kSmallSlot, from, bytes, sig, 1, symcommSignalAdd,
                            right);
        for (uint32_t i = 0; i < bytes; ++i) from[i] = static_cast<char>(kPoison);
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) symcomm::quiet(c);
    return;
  }
  for (int r = 0; r < kSmallRounds; ++r) {
    const int rc = symcomm::signal_wait_until_block(c, sig, symcommCmpGe, r + 1);
    if (rc != 0) {
      if (threadIdx.x == 0) rc_out[0] = rc;
      return;
    }
    const uint32_t bytes = small_size(r, max_bytes);
    const char* slot = slots + r * kSmallSlot;
    ull mine = 0;
    for (size_t i = threadIdx.x; i < kSmallSlot; i += blockDim.x)
      mine += static_cast<uint8_t>(slot[i]) !=
              (i < bytes ? mp::pattern(left, what + r, i) : kPoison);
    if (mine) atomicAdd(bad, mine);
  }
}

// ---------------------------------------------------------------------------------------
// 11. A quiet on the stream after a kernel covers what the kernel handed over and did not
//     wait for (across nodes: signals and small put-signals through the ring)
// ---------------------------------------------------------------------------------------
constexpr int kQuietSignals = 256;

// One thread: kQuietSignals put-signals of 8 bytes adding 1 to sig[0] on the right
// neighbour, each followed by a signal adding 1 to sig[1] there; no quiet of its own.
__global__ void signals_then_end_kernel(DeviceComm c, uint64_t* sig, char* dst,
                                        const char* src) {
  const int right = (symcomm::team_rank(c) + 1) % symcomm::team_size(c);
  for (int i = 0; i < kQuietSignals; ++i) {
    symcomm::put_signal(c, dst, src, 8, sig, 1, symcommSignalAdd, right);
    symcomm::signal_op(c, sig + 1, 1, symcommSignalAdd, right);
  }
}

// ---------------------------------------------------------------------------------------
// 9. Every comparison, with put_signal_warp
// ---------------------------------------------------------------------------------------
struct CmpStep {
  symcommCmp_t cmp;
  uint64_t value, before, after;  // wait for `cmp value`; the word goes from before to after
};
constexpr int kCmpSteps = 6;
constexpr size_t kCmpBytes = 2000 + 3;
struct CmpSteps {
  CmpStep step[kCmpSteps];
};

// Warp 0 of block 0 put_signal_warps piece i (src + i * kCmpBytes) to the right neighbour,
// setting its words[i] to step[i].after; block 1 waits for words[i] with step i's comparison
// (which fails on step[i].before) and checks piece i from the left.
__global__ void cmp_kernel(DeviceComm c, CmpSteps steps, char* data, const char* src,
                           uint64_t* words, uint64_t what, ull* bad, int* rc_out) {
  const int me = symcomm::team_rank(c), n = symcomm::team_size(c);
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  if (blockIdx.x == 0) {
    if (threadIdx.x >= 32) return;
    for (int i = 0; i < kCmpSteps; ++i)
      symcomm::put_signal_warp(c, data + i * kCmpBytes, src + i * kCmpBytes, kCmpBytes,
                               words + i, steps.step[i].after, symcommSignalSet, right);
    return;
  }
  for (int i = 0; i < kCmpSteps; ++i) {
    const CmpStep& k = steps.step[i];
    const int rc = symcomm::signal_wait_until_block(c, words + i, k.cmp, k.value);
    if (rc != 0) {
      if (threadIdx.x == 0) rc_out[0] = rc;
      return;
    }
    ull mine = 0;
    for (size_t j = threadIdx.x; j < kCmpBytes; j += blockDim.x)
      mine += static_cast<uint8_t>(data[i * kCmpBytes + j]) != mp::pattern(left, what + i, j);
    if (mine) atomicAdd(bad, mine);
  }
}

// Comparisons at their edges on a word nobody changes: thread i waits once for
// `edges.cmp[i] edges.value[i]` and writes what the wait returned to rc[i].
constexpr int kEdges = 12;
struct Edges {
  symcommCmp_t cmp[kEdges];
  uint64_t value[kEdges];
};
__global__ void edges_kernel(DeviceComm c, Edges edges, uint64_t* word, int* rc) {
  const int i = static_cast<int>(threadIdx.x);
  if (i < kEdges) rc[i] = symcomm::signal_wait_until(c, word, edges.cmp[i], edges.value[i]);
}

TEST_F(Device, PutSignalOrdersDataBeforeSignal) {
  for (const RingShape& shape : kRingShapes) {
    SCOPED_TRACE(std::to_string(shape.chunk) + "-byte chunks, skew " +
                 std::to_string(shape.skew));
    char* ring = symmetric<char>(kRing * shape.chunk);
    uint64_t* sigs = symmetric<uint64_t>(2);  // data, ack
    char* stage = plain<char>(shape.rounds * shape.chunk + shape.skew);
    ull* bad = plain<ull>(1);
    int* rc = plain<int>(2);
    ASSERT_TRUE(ring && sigs && stage && bad && rc);
    stage += shape.skew;
    const uint64_t what = rng_();
    for (int r = 0; r < shape.rounds; ++r)
      mp::fill(stage + r * shape.chunk, shape.chunk, me_, what + r);
    CUDA_OK(cudaMemset(ring, kPoison, kRing * shape.chunk));
    CUDA_OK(cudaMemset(sigs, 0, 2 * sizeof(uint64_t)));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, 2 * sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    ring_kernel<<<2, shape.threads>>>(h_, shape, ring, stage, sigs, sigs + 1, what, bad, rc);
    LAUNCH_OK();
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));  // the peer's kernel, and its last ack, ended too
    ull bad_host = 1;
    int rc_host[2] = {-1, -1};
    uint64_t sigs_host[2] = {0, 0};
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(sigs_host, sigs, sizeof sigs_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host[0], 0) << "sender's wait for an ack";
    EXPECT_EQ(rc_host[1], 0) << "receiver's wait for data";
    EXPECT_EQ(bad_host, 0u) << "bytes seen stale or wrong after their signal, seed " << seed_;
    EXPECT_EQ(sigs_host[0], static_cast<uint64_t>(shape.rounds)) << "data signals received";
    EXPECT_EQ(sigs_host[1], static_cast<uint64_t>(shape.rounds)) << "acks received";
  }
}

TEST_F(Device, EveryRankSignalsEveryPeer) {
  uint8_t* buf = symmetric<uint8_t>(n_ * kPeerBytes);
  uint64_t* sigs = symmetric<uint64_t>(n_);
  uint8_t* src = plain<uint8_t>(n_ * kPeerBytes);
  uint32_t* sizes_dev = plain<uint32_t>(static_cast<size_t>(n_) * n_);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(buf && sigs && src && sizes_dev && bad && rc);
  CUDA_OK(cudaMemset(sigs, 0, n_ * sizeof(uint64_t)));
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round) + " seed " + std::to_string(seed_));
    std::vector<uint32_t> sizes(static_cast<size_t>(n_) * n_);
    for (uint32_t& s : sizes) s = static_cast<uint32_t>(rng_() % (kPeerBytes + 1));  // 0 too
    const uint64_t what = rng_(), nonce = rng_() | 1;
    mp::fill(src, n_ * kPeerBytes, me_, what);
    CUDA_OK(cudaMemset(buf, kPoison, n_ * kPeerBytes));
    CUDA_OK(cudaMemcpy(sizes_dev, sizes.data(), sizes.size() * sizeof(uint32_t),
                       cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    all_peers_kernel<<<n_, 1>>>(h_, buf, src, sigs, sizes_dev, nonce, what, bad, rc);
    LAUNCH_OK();
    SC_OK(symcommHostBarrier(comm_));  // nobody poisons a buffer a peer still writes
    ull bad_host = 1;
    int rc_host = -1;
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, 0);
    EXPECT_EQ(bad_host, 0u);
  }
}

TEST_F(Device, FenceAndQuietPublishData) {
  char* slots = symmetric<char>(kPieces * kPieceBytes);
  uint64_t* flag = symmetric<uint64_t>(1);
  char* stage = plain<char>(kPieces * kPieceBytes);
  uint64_t* values = plain<uint64_t>(kPieces);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(slots && flag && stage && values && bad && rc);
  std::vector<uint64_t> v(kPieces);
  for (int r = 0; r < kPieces; ++r) v[r] = static_cast<uint64_t>(r + 1);
  CUDA_OK(cudaMemcpy(values, v.data(), kPieces * sizeof(uint64_t), cudaMemcpyHostToDevice));
  for (int mode : {kFence, kQuietThread, kQuietWarp, kQuietBlock}) {
    SCOPED_TRACE(std::string(kPublishName[mode]) + " seed " + std::to_string(seed_));
    const uint64_t what = rng_();
    for (int r = 0; r < kPieces; ++r) mp::fill(stage + r * kPieceBytes, kPieceBytes, me_, what + r);
    CUDA_OK(cudaMemset(slots, kPoison, kPieces * kPieceBytes));
    CUDA_OK(cudaMemset(flag, 0, sizeof(uint64_t)));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    publish_kernel<<<2, 256>>>(h_, mode, slots, stage, flag, values, what, bad, rc);
    LAUNCH_OK();
    SC_OK(symcommHostBarrier(comm_));
    ull bad_host = 1;
    int rc_host = -1;
    uint64_t flag_host = 0;
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&flag_host, flag, sizeof flag_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, 0);
    EXPECT_EQ(bad_host, 0u) << "bytes of a piece not there when its flag was";
    EXPECT_EQ(flag_host, static_cast<uint64_t>(kPieces));
  }
}

// Across nodes the sizes up to inline_max go in the ring's descriptor (the source read by the
// calling thread, so shared memory and cudaMalloc memory work, and put_signal returns once it
// handed the descriptor over), the larger ones the transport's way; either way the source may
// be overwritten when put_signal returns, and the data is there when the signal is. Within a
// node every case is a load/store copy.
TEST_F(Device, SmallPutSignalsFromAnyMemory) {
  char* slots = symmetric<char>(kSmallRounds * kSmallSlot);
  uint64_t* sig = symmetric<uint64_t>(1);
  char* heap_src = symmetric<char>(kSmallRounds * kSmallSlot + 8);
  char* plain_src = plain<char>(kSmallRounds * kSmallSlot + 8);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(slots && sig && heap_src && plain_src && bad && rc);
  const bool ring = h_.net.slots != nullptr;  // a member on another node
  for (int source : {kSmallFromHeap, kSmallFromPlain, kSmallFromShared}) {
    SCOPED_TRACE(std::string("from ") + kSmallSourceName[source]);
    // Shared memory reaches a member on another node in a descriptor only.
    const uint32_t max_bytes = source == kSmallFromShared && ring
                                   ? static_cast<uint32_t>(h_.net.inline_max)
                                   : static_cast<uint32_t>(kSmallSlot);
    char* src = source == kSmallFromHeap ? heap_src : plain_src;
    const uint64_t what = rng_();
    for (int r = 0; r < kSmallRounds; ++r)
      mp::fill(src + r * kSmallSlot + r % 8, small_size(r, max_bytes), me_, what + r);
    CUDA_OK(cudaMemset(slots, kPoison, kSmallRounds * kSmallSlot));
    CUDA_OK(cudaMemset(sig, 0, sizeof(uint64_t)));
    CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
    CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    small_kernel<<<2, 128>>>(h_, source, slots, src, sig, max_bytes, what, bad, rc);
    LAUNCH_OK();
    SC_OK(symcommQuietOnStream(comm_, nullptr));
    SC_OK(symcommHostBarrier(comm_));
    ull bad_host = 1;
    int rc_host = -1;
    uint64_t sig_host = 0;
    CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&sig_host, sig, sizeof sig_host, cudaMemcpyDeviceToHost));
    EXPECT_EQ(rc_host, 0) << "a wait for a signal failed";
    EXPECT_EQ(bad_host, 0u) << "bytes wrong or missing when their signal was there, seed " << seed_;
    EXPECT_EQ(sig_host, static_cast<uint64_t>(kSmallRounds)) << "signals received";
  }
}

// The kernel's operations to a member on another node are handed over, not done, when it
// ends (a ring of 1024 descriptors takes all 512 at once while the transport's worker sends
// them one by one); the quiet enqueued right behind it on the stream must still wait for
// every one of them to be applied at its target.
TEST_F(Device, QuietOnStreamCoversAKernelsSignals) {
  uint64_t* sig = symmetric<uint64_t>(2);
  char* dst = symmetric<char>(8);
  char* src = plain<char>(8);
  ASSERT_TRUE(sig && dst && src);
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    CUDA_OK(cudaMemset(sig, 0, 2 * sizeof(uint64_t)));
    CUDA_OK(cudaMemset(src, round + 1, 8));
    CUDA_OK(cudaDeviceSynchronize());
    SC_OK(symcommHostBarrier(comm_));
    signals_then_end_kernel<<<1, 1, 0, stream>>>(h_, sig, dst, src);
    CUDA_OK(cudaGetLastError());
    SC_OK(symcommQuietOnStream(comm_, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    SC_OK(symcommHostBarrier(comm_));  // every rank's quiet returned
    uint64_t got[2] = {0, 0};
    CUDA_OK(cudaMemcpy(got, sig, sizeof got, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got[0], static_cast<uint64_t>(kQuietSignals)) << "put-signals applied";
    EXPECT_EQ(got[1], static_cast<uint64_t>(kQuietSignals)) << "signals applied";
    SC_OK(symcommHostBarrier(comm_));  // read before the next round clears it
  }
  CUDA_OK(cudaStreamDestroy(stream));
}

TEST_F(Device, EveryComparisonWithPutSignalWarp) {
  const CmpSteps steps{{{symcommCmpNe, 7, 7, 8},    {symcommCmpLe, 50, 100, 50},
                        {symcommCmpLt, 5, 10, 4},   {symcommCmpGt, 9, 9, 10},
                        {symcommCmpGe, 30, 29, 30}, {symcommCmpEq, 77, 76, 77}}};
  char* data = symmetric<char>(kCmpSteps * kCmpBytes);
  uint64_t* words = symmetric<uint64_t>(kCmpSteps);
  char* src = plain<char>(kCmpSteps * kCmpBytes + 1);
  ull* bad = plain<ull>(1);
  int* rc = plain<int>(1);
  ASSERT_TRUE(data && words && src && bad && rc);
  src += 1;  // the source unaligned against the destination: byte accesses too
  const uint64_t what = rng_();
  for (int i = 0; i < kCmpSteps; ++i) mp::fill(src + i * kCmpBytes, kCmpBytes, me_, what + i);
  uint64_t before[kCmpSteps];
  for (int i = 0; i < kCmpSteps; ++i) before[i] = steps.step[i].before;
  CUDA_OK(cudaMemcpy(words, before, sizeof before, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(data, kPoison, kCmpSteps * kCmpBytes));
  CUDA_OK(cudaMemset(bad, 0, sizeof(ull)));
  CUDA_OK(cudaMemset(rc, 0, sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  SC_OK(symcommHostBarrier(comm_));
  DeviceComm c = h_;
  c.wait_timeout_ns = 10'000'000'000ull;  // a comparison that never holds fails in 10 s
  cmp_kernel<<<2, 128>>>(c, steps, data, src, words, what, bad, rc);
  LAUNCH_OK();
  SC_OK(symcommHostBarrier(comm_));
  ull bad_host = 1;
  int rc_host = -1;
  uint64_t after[kCmpSteps];
  CUDA_OK(cudaMemcpy(&bad_host, bad, sizeof bad_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(&rc_host, rc, sizeof rc_host, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(after, words, sizeof after, cudaMemcpyDeviceToHost));
  EXPECT_EQ(rc_host, 0);
  EXPECT_EQ(bad_host, 0u) << "a wait passed before its data arrived, seed " << seed_;
  for (int i = 0; i < kCmpSteps; ++i) EXPECT_EQ(after[i], steps.step[i].after) << "step " << i;
}

// The same comparisons at their edges as Rma.EveryComparisonAtItsEdges, on the device: on a
// word that holds 50, the six one step past the edge time out (a bound of 50 ms) and the six
// at the edge hold. EveryComparisonWithPutSignalWarp cannot tell an off-by-one comparison:
// its words mostly hold their new values before the waits start. The kernel's handle records
// no failure (error slot cleared): these refusals are expected, not for the communicator to
// report, and its next call succeeds.
TEST_F(Device, EveryComparisonAtItsEdges) {
  const Edges edges{{symcommCmpLt, symcommCmpGt, symcommCmpNe, symcommCmpEq, symcommCmpLe,
                     symcommCmpGe, symcommCmpLe, symcommCmpGe, symcommCmpEq, symcommCmpLt,
                     symcommCmpGt, symcommCmpNe},
                    {50, 50, 50, 49, 49, 51, 50, 50, 50, 51, 49, 49}};
  const int want[kEdges] = {symcommTimeout, symcommTimeout, symcommTimeout, symcommTimeout,
                            symcommTimeout, symcommTimeout, 0, 0, 0, 0, 0, 0};
  uint64_t* word = symmetric<uint64_t>(1);
  int* rc = plain<int>(kEdges);
  ASSERT_TRUE(word && rc);
  const uint64_t fifty = 50;
  CUDA_OK(cudaMemcpy(word, &fifty, sizeof fifty, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(rc, 0xff, kEdges * sizeof(int)));
  CUDA_OK(cudaDeviceSynchronize());
  DeviceComm c = h_;
  c.wait_timeout_ns = 50'000'000;
  c.error = nullptr;
  edges_kernel<<<1, 32>>>(c, edges, word, rc);
  LAUNCH_OK();
  int got[kEdges];
  CUDA_OK(cudaMemcpy(got, rc, sizeof got, cudaMemcpyDeviceToHost));
  const char* names[] = {"==", "!=", ">=", ">", "<=", "<"};
  for (int i = 0; i < kEdges; ++i)
    EXPECT_EQ(got[i], want[i]) << "word 50, wait for " << names[edges.cmp[i]] << " "
                               << edges.value[i] << (want[i] ? ": passed" : ": did not hold");
  SC_OK(symcommHostBarrier(comm_));  // nothing recorded for the communicator
}

}  // namespace device_test
