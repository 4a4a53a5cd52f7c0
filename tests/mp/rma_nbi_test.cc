// symcommPutNbiOnStream / symcommGetNbiOnStream: many in flight at once (more than the net
// transport keeps: the oldest are finished to make room), complete after symcommQuietOnStream;
// a signal after them is applied only after their data (the signal completes them first); a
// get's destination holds the peer's data after the quiet, and so does a put's target. Every space and layout the mp suites
// run (one node: load/store, where they are plain puts; across nodes: the net transport).
#include "rma_fixture.h"

namespace rma_test {

TEST_F(Rma, NbiPutsAndGetsCompleteByQuiet) {
  const int n = mp::nranks(), me = mp::rank();
  constexpr int kPieces = 100;  // more than LaneTransfers::kMostBegun
  // Large enough that the last of them is still on its way long after it was started.
  const size_t piece = (256 << 10) + 8;
  char* dst;
  char* from;  // what every rank's gets read
  uint64_t* word;
  SC_OK(symcommMalloc(comm_, piece * kPieces, reinterpret_cast<void**>(&dst)));
  SC_OK(symcommMalloc(comm_, piece * kPieces, reinterpret_cast<void**>(&from)));
  SC_OK(symcommMalloc(comm_, 8, reinterpret_cast<void**>(&word)));
  mp::write_u64(word, 0);
  for (int k = 0; k < kPieces; ++k) mp::fill(from + k * piece, piece, me, 2000 + k);
  char* src = static_cast<char*>(mp::local_alloc(piece * kPieces));
  char* got = static_cast<char*>(mp::local_alloc(piece * kPieces));
  for (int k = 0; k < kPieces; ++k) mp::fill(src + k * piece, piece, me, 1000 + k);
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  // Puts to the right neighbour, then a signal that says they landed.
  for (int k = 0; k < kPieces; ++k)
    SC_OK(symcommPutNbiOnStream(comm_, dst + k * piece, src + k * piece, piece, right(),
                                symcommEngineAuto, stream_));
  SC_OK(symcommPutSignalOnStream(comm_, nullptr, nullptr, 0, word, 1, symcommSignalSet, right(),
                                 symcommEngineAuto, stream_));
  SC_OK(symcommSignalWaitOnStream(comm_, word, symcommCmpEq, 1, stream_));
  mp::sync(stream_);
  size_t bad = 0;
  for (int k = 0; k < kPieces; ++k)
    bad += mp::count_mismatches(dst + k * piece, piece, left(), 1000 + k);
  EXPECT_EQ(bad, 0u) << "puts not landed when the signal after them was seen";
  // Gets from the left neighbour, complete after the quiet.
  mp::fill(got, piece * kPieces, n + 1, 5);  // poison: another writer's pattern
  mp::sync(stream_);
  for (int k = 0; k < kPieces; ++k)
    SC_OK(symcommGetNbiOnStream(comm_, got + k * piece, from + k * piece, piece, left(),
                                symcommEngineAuto, stream_));
  SC_OK(symcommQuietOnStream(comm_, stream_));
  mp::sync(stream_);
  // The last one first: the one most likely still in flight had the quiet not waited for it.
  bad = 0;
  for (int k = kPieces - 1; k >= 0; --k)
    bad += mp::count_mismatches(got + k * piece, piece, left(), 2000 + k);
  EXPECT_EQ(bad, 0u) << "gets not complete after the quiet";
  // Puts again, completed by the quiet alone: their data is at the target once every rank's
  // quiet returned (the last ones are the most likely still in flight).
  for (int k = 0; k < kPieces; ++k) mp::fill(src + k * piece, piece, me, 3000 + k);
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));  // every rank read the first puts' data
  for (int k = 0; k < kPieces; ++k)
    SC_OK(symcommPutNbiOnStream(comm_, dst + k * piece, src + k * piece, piece, right(),
                                symcommEngineAuto, stream_));
  SC_OK(symcommQuietOnStream(comm_, stream_));
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  bad = 0;
  for (int k = kPieces - 1; k >= 0; --k)
    bad += mp::count_mismatches(dst + k * piece, piece, left(), 3000 + k);
  EXPECT_EQ(bad, 0u) << "puts not landed when the quiet had returned";
  // Zero bytes, and the checks of symcommPutOnStream.
  SC_OK(symcommPutNbiOnStream(comm_, dst, src, 0, right(), symcommEngineAuto, stream_));
  SC_FAILS(symcommPutNbiOnStream(comm_, dst, src, piece * kPieces + 1, right(),
                                 symcommEngineAuto, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommGetNbiOnStream(comm_, got, from, piece, n, symcommEngineAuto, stream_),
           symcommInvalidArgument);
  SC_OK(symcommHostBarrier(comm_));
  mp::local_free(src);
  mp::local_free(got);
  SC_OK(symcommFree(comm_, word));
  SC_OK(symcommFree(comm_, from));
  SC_OK(symcommFree(comm_, dst));
}

}  // namespace rma_test
