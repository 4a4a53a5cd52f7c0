// Stresses of one-sided communication (host API): every rank put-signals into every rank at
// once, round after round; thousands of calls on one stream with no synchronization between.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "rma_fixture.h"

namespace rma_test {

// Stress: many rounds in which every rank put-signals a piece of random size (0 included)
// and offsets, on a random engine, into its slot on every rank (itself included) at once.
// Each receiver checks every piece, and the poison around it, when it observes the piece's
// signal, poisons the slot again and acknowledges; a sender reuses a slot only after that.
TEST_F(Rma, StressEveryPeerAtOnce) {
  const int n = mp::nranks(), me = mp::rank();
  const int rounds = mp::space() == symcommSpaceHost ? 120 : 60;
  const size_t kMax = 24 << 10, kSlot = kMax + 128;
  char* buf;
  uint64_t* sigs;  // [s]: round of sender s's piece here; [n + r]: acks from receiver r
  SC_OK(symcommMalloc(comm_, kSlot * n, reinterpret_cast<void**>(&buf)));
  SC_OK(symcommMalloc(comm_, 16 * n, reinterpret_cast<void**>(&sigs)));
  char* src = static_cast<char*>(mp::local_alloc(kSlot * n));
  for (int i = 0; i < 2 * n; ++i) mp::write_u64(&sigs[i], 0);
  const auto poison = [](uint64_t k) { return 1000000 + k; };
  const auto what = [&](uint64_t k, int to) { return k * 64 + static_cast<uint64_t>(to); };
  for (int s = 0; s < n; ++s) mp::fill(buf + s * kSlot, kSlot, me, poison(1));  // each slot
  struct Piece {
    size_t bytes, src_off, dst_off;
    symcommEngine_t engine;
  };
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  std::mt19937_64 rng(seed);
  std::vector<Piece> pieces(static_cast<size_t>(n) * n);  // [sender * n + receiver]
  SC_OK(symcommHostBarrier(comm_));
  size_t bad = 0;
  std::string first_bad;
  for (uint64_t k = 1; k <= static_cast<uint64_t>(rounds); ++k) {  // all, even after a failure
    for (Piece& p : pieces) {
      const uint64_t r = rng();
      p.bytes = r % 8 == 0 ? 0 : r % 3 == 0 ? 1 + rng() % 64 : 1 + rng() % kMax;
      p.src_off = rng() % 64;
      p.dst_off = rng() % 64;
      p.engine = kEngines[rng() % 3];
    }
    for (int t = 0; t < n; ++t) {  // send to every rank, once it acknowledged round k - 1
      const Piece& p = pieces[static_cast<size_t>(me * n + t)];
      SC_OK(symcommSignalWaitOnStream(comm_, &sigs[n + t], symcommCmpGe, k - 1, stream_));
      mp::sync(stream_);  // and this rank's previous put from the source is done
      mp::fill(src + t * kSlot + p.src_off, p.bytes, me, what(k, t));
      SC_OK(symcommPutSignalOnStream(comm_, buf + me * kSlot + p.dst_off,
                                     src + t * kSlot + p.src_off, p.bytes, &sigs[me], k,
                                     symcommSignalSet, t, p.engine, stream_));
    }
    for (int s = 0; s < n; ++s) {  // receive from every rank, check, poison again, ack
      const Piece& p = pieces[static_cast<size_t>(s * n + me)];
      SC_OK(symcommSignalWaitOnStream(comm_, &sigs[s], symcommCmpEq, k, stream_));
      mp::sync(stream_);
      char* slot = buf + s * kSlot;
      const size_t end = p.dst_off + p.bytes;
      const size_t wrong = mismatches(slot + p.dst_off, p.bytes, s, what(k, me)) +
                           mismatches(slot, p.dst_off, me, poison(k)) +
                           mismatches(slot + end, kSlot - end, me, poison(k), end);
      if (wrong != 0 && bad == 0)
        first_bad = "round " + std::to_string(k) + " from rank " + std::to_string(s) + ": " +
                    std::to_string(p.bytes) + " bytes at " + std::to_string(p.dst_off) +
                    ", engine " + std::to_string(p.engine);
      bad += wrong;
      mp::fill(slot, kSlot, me, poison(k + 1));
      SC_OK(symcommPutSignalOnStream(comm_, nullptr, nullptr, 0, &sigs[n + me], 1,
                                     symcommSignalAdd, s, symcommEngineAuto, stream_));
    }
  }
  mp::sync(stream_);
  EXPECT_EQ(bad, 0u) << first_bad;
  SC_OK(symcommHostBarrier(comm_));
  mp::local_free(src);
  SC_OK(symcommFree(comm_, sigs));
  SC_OK(symcommFree(comm_, buf));
}

// More calls on one stream than it queues work for, and than the net transport's ring of
// stream jobs holds (4096), with no synchronization between them: each of 6000 puts of 8
// bytes lands at its own place on the right-hand rank. In the cuda space the calls run ahead
// of the GPU until its queue fills; the calling thread then waits in the enqueue for the GPU,
// while the GPU waits for the net transport's worker (this deadlocked once: the caller held
// the worker's lock through the enqueue).
TEST_F(Rma, ThousandsOfCallsOnOneStreamWithoutASync) {
  constexpr size_t kCalls = 6000;
  uint64_t* inbox;
  SC_OK(symcommMalloc(comm_, kCalls * 8, reinterpret_cast<void**>(&inbox)));
  auto* src = static_cast<uint64_t*>(mp::local_alloc(kCalls * 8));
  std::vector<uint64_t> mine(kCalls), got(kCalls, 0);
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  std::mt19937_64 rng(seed + static_cast<uint64_t>(mp::rank()));
  for (uint64_t& v : mine) v = rng();
  mp::copy_from_host(src, mine.data(), kCalls * 8);
  mp::copy_from_host(inbox, got.data(), kCalls * 8);  // zero
  SC_OK(symcommHostBarrier(comm_));
  for (size_t i = 0; i < kCalls; ++i)
    SC_OK(symcommPutOnStream(comm_, &inbox[i], &src[i], 8, right(), symcommEngineAuto, stream_));
  SC_OK(symcommQuietOnStream(comm_, stream_));
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  std::mt19937_64 theirs(seed + static_cast<uint64_t>(left()));
  mp::copy_to_host(got.data(), inbox, kCalls * 8);
  size_t bad = 0;
  for (size_t i = 0; i < kCalls; ++i) bad += got[i] != theirs();
  EXPECT_EQ(bad, 0u) << "of " << kCalls << " puts from rank " << left();
  SC_OK(symcommHostBarrier(comm_));
  mp::local_free(src);
  SC_OK(symcommFree(comm_, inbox));
}

}  // namespace rma_test
