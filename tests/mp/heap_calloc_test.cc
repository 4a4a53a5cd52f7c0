// Symmetric allocations beyond symcommMalloc: symcommMallocAligned (an offset that is a
// multiple of the alignment, the same on every rank, the arguments it refuses, ranks that
// disagree) and symcommCalloc (zeros on every rank where the heap held data before, a peer's
// put right after the call not lost to the clearing, an overflowing count refused everywhere).
#include <cstdint>
#include <cstring>
#include <vector>

#include "heap_fixture.h"
#include "mp.h"

namespace {

using heap_test::Heap;

size_t used(symcommComm_t comm) {
  size_t u = 0;
  EXPECT_EQ(symcommHeapInfo(comm, &u, nullptr, nullptr), symcommSuccess);
  return u;
}

TEST_F(Heap, AlignedAtTheSameOffsetEverywhere) {
  // The heap's granularity: the page size on the host, the CUDA allocation granularity on
  // GPUs (both divide the heap's base); the largest alignment allowed.
  const size_t most = mp::space() == symcommSpaceHost ? 4096 : size_t{2} << 20;
  void* odd = nullptr;
  SC_OK(symcommMalloc(comm_, 300, &odd));  // so that the next free offset is not aligned
  for (size_t alignment : {size_t{1}, size_t{256}, size_t{512}, size_t{4096}, most}) {
    SCOPED_TRACE("alignment " + std::to_string(alignment));
    void* p = nullptr;
    SC_OK(symcommMallocAligned(comm_, alignment, 1000, &p));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignment, 0u);
    const uint64_t offset = static_cast<uint64_t>(static_cast<char*>(p) - static_cast<char*>(odd));
    std::vector<uint64_t> all(static_cast<size_t>(mp::nranks()));
    SC_OK(symcommHostAllgather(comm_, &offset, all.data(), sizeof offset));
    for (uint64_t o : all) EXPECT_EQ(o, offset);
    // Usable as any allocation: each rank's data read back by every rank.
    mp::fill(p, 1000, mp::rank(), alignment);
    SC_OK(symcommHostBarrier(comm_));
    for (int pe = 0; pe < mp::nranks(); ++pe)
      EXPECT_EQ(mp::count_peer_mismatches(comm_, p, 1000, pe, pe, alignment), 0u) << pe;
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommFree(comm_, p));
  }
  SC_OK(symcommFree(comm_, odd));
  // Refused, leaving the heap as it was: not a power of two, zero, beyond the granularity,
  // no pointer, and ranks that disagree.
  void* p = reinterpret_cast<void*>(1);
  for (size_t bad : {size_t{0}, size_t{3}, size_t{768}, most * 2}) {
    SC_FAILS(symcommMallocAligned(comm_, bad, 1000, &p), symcommInvalidArgument);
    EXPECT_EQ(p, nullptr);
    EXPECT_NE(std::strstr(symcommGetLastError(), "power of two"), nullptr) << bad;
  }
  SC_FAILS(symcommMallocAligned(comm_, 256, 1000, nullptr), symcommInvalidArgument);
  SC_FAILS(symcommMallocAligned(comm_, mp::rank() == 0 ? 512 : 1024, 1000, &p),
           symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "same alignment on every rank"), nullptr);
  EXPECT_EQ(used(comm_), 0u);
}

TEST_F(Heap, CallocClearsEveryRanksCopy) {
  constexpr size_t kCount = 3000, kSize = 12, kBytes = kCount * kSize;
  // Data where the allocation will be: the freed range is taken again.
  void* dirty = nullptr;
  SC_OK(symcommMalloc(comm_, kBytes, &dirty));
  mp::fill(dirty, kBytes, mp::rank(), 5);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommFree(comm_, dirty));
  void* p = nullptr;
  SC_OK(symcommCalloc(comm_, kCount, kSize, &p));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, dirty) << "the test wants the freed range taken again";
  // Right away, a put into the right neighbour's first bytes: after every rank's clearing.
  const int right = (mp::rank() + 1) % mp::nranks(), left = (mp::rank() + mp::nranks() - 1) %
                                                               mp::nranks();
  constexpr size_t kPut = 64;
  void* src = mp::local_alloc(kPut);
  mp::fill(src, kPut, mp::rank(), 9);
  symcommStream_t stream = mp::new_stream();
  SC_OK(symcommPutOnStream(comm_, p, src, kPut, right, symcommEngineAuto, stream));
  SC_OK(symcommQuietOnStream(comm_, stream));
  mp::sync(stream);
  SC_OK(symcommHostBarrier(comm_));
  const std::vector<uint8_t> got = mp::fetch(stream, p, kBytes);
  size_t wrong = 0;  // (got is host memory in either space: compared here, not in a kernel)
  for (size_t i = 0; i < kPut; ++i) wrong += got[i] != mp::pattern(left, 9, i);
  EXPECT_EQ(wrong, 0u) << "the left neighbour's put";
  size_t nonzero = 0;
  for (size_t i = kPut; i < kBytes; ++i) nonzero += got[i] != 0;
  EXPECT_EQ(nonzero, 0u) << "bytes of the calloc'd memory not zero";
  SC_OK(symcommHostBarrier(comm_));
  mp::free_stream(stream);
  mp::local_free(src);
  SC_OK(symcommFree(comm_, p));
  // Refused everywhere, nothing allocated: a zero size; a count that overflows (on one rank
  // only, too).
  SC_FAILS(symcommCalloc(comm_, 0, 8, &p), symcommInvalidArgument);
  SC_FAILS(symcommCalloc(comm_, SIZE_MAX / 2 + 1, 2, &p), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "overflow"), nullptr);
  SC_FAILS(symcommCalloc(comm_, mp::rank() == 0 ? SIZE_MAX : 4, 16, &p), symcommInvalidArgument);
  SC_FAILS(symcommCalloc(comm_, 4, 4, nullptr), symcommInvalidArgument);
  EXPECT_EQ(used(comm_), 0u);
}

}  // namespace
