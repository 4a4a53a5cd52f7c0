// A stress of one-sided communication (host API): every rank put-signals into every rank at
// once, round after round.
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

}  // namespace rma_test
