// The symmetric heap: many sizes, interleaved allocation and free, growth across chunks,
// data written by each rank and read by all through symcommPtr, every bad input, a growth
// that fails on one rank, and a failed initialization.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "heap_fixture.h"
#include "mp.h"

namespace {

// Each rank writes its pattern into its own copy of `ptr`; then every rank checks every
// rank's copy: through symcommPtr where it is load/store accessible, else with a get.
void write_and_verify_all(symcommComm_t comm, void* ptr, size_t bytes, uint64_t what) {
  mp::fill(ptr, bytes, mp::rank(), what);
  SC_OK(symcommHostBarrier(comm));
  for (int pe = 0; pe < mp::nranks(); ++pe) {
    int accessible = 0;
    SC_OK(symcommPeerAccessible(comm, pe, &accessible));
    void* remote = symcommPtr(comm, ptr, pe);
    if (accessible) {
      ASSERT_NE(remote, nullptr) << "pe " << pe << ": " << symcommGetLastError();
    } else {
      EXPECT_EQ(remote, nullptr) << "pe " << pe << " is on another node";
    }
    if (pe == mp::rank()) {
      EXPECT_EQ(remote, ptr);
    }
    EXPECT_EQ(mp::count_peer_mismatches(comm, ptr, bytes, pe, pe, what), 0u)
        << bytes << " bytes written by rank " << pe;
  }
  SC_OK(symcommHostBarrier(comm));  // nobody reuses the memory while others still read it
}

// Leaves this process (where `active`) a single free descriptor until it goes out of scope.
class OneFreeDescriptor {
 public:
  explicit OneFreeDescriptor(bool active) : active_(active) {
    if (!active_) return;
    EXPECT_EQ(getrlimit(RLIMIT_NOFILE, &old_), 0);
    const int first = lowest_free(0);
    rlimit limit = old_;
    limit.rlim_cur = static_cast<rlim_t>(lowest_free(first + 1));
    EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  ~OneFreeDescriptor() {
    if (active_) {
      EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &old_), 0);
    }
  }

 private:
  static int lowest_free(int from) {
    while (fcntl(from, F_GETFD) >= 0) ++from;
    return from;
  }
  bool active_;
  rlimit old_{};
};

// Bytes of this process's address space reserved without access (PROT_NONE), as the heap's
// windows are in the host space.
size_t reserved_bytes() {
  std::ifstream maps("/proc/self/maps");
  size_t total = 0;
  for (std::string line; std::getline(maps, line);) {
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    if (std::sscanf(line.c_str(), "%lx-%lx %4s", &start, &end, perms) == 3 &&
        std::strcmp(perms, "---p") == 0)
      total += end - start;
  }
  return total;
}

using heap_test::Heap;

TEST_F(Heap, ManySizes) {
  SC_OK(symcommHeapInfo(comm_, nullptr, nullptr, nullptr));  // every output is optional
  std::vector<size_t> sizes = {1, 3, 255, 256, 257, 4095, 4096, 65537, (1 << 20) + 1};
  // Larger than the first chunk, so the heap grows during the test.
  sizes.push_back(mp::space() == symcommSpaceCuda ? (size_t{600} << 20) : (size_t{80} << 20));
  uint64_t what = 0;
  for (size_t bytes : sizes) {
    void* p = nullptr;
    SC_OK(symcommMalloc(comm_, bytes, &p));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u);
    write_and_verify_all(comm_, p, bytes, ++what);
    SC_OK(symcommFree(comm_, p));
  }
  size_t used = 1, mapped = 0;
  SC_OK(symcommHeapInfo(comm_, &used, &mapped, nullptr));
  EXPECT_EQ(used, 0u);
  EXPECT_GE(mapped, sizes.back());
}

TEST_F(Heap, SameOffsetsOnEveryRank) {
  void *a, *b;
  SC_OK(symcommMalloc(comm_, 1000, &a));
  SC_OK(symcommMalloc(comm_, 5000, &b));
  void* base = symcommPtr(comm_, a, mp::rank());
  uint64_t offsets[2] = {static_cast<uint64_t>(static_cast<char*>(a) - static_cast<char*>(base)),
                         static_cast<uint64_t>(static_cast<char*>(b) - static_cast<char*>(a))};
  std::vector<uint64_t> all(2 * static_cast<size_t>(mp::nranks()));
  SC_OK(symcommHostAllgather(comm_, offsets, all.data(), sizeof offsets));
  for (int r = 0; r < mp::nranks(); ++r) EXPECT_EQ(all[2 * static_cast<size_t>(r) + 1], offsets[1]);
  // Peer pointers of an interior address keep the interior offset.
  for (int pe = 0; pe < mp::nranks(); ++pe) {
    int accessible = 0;
    SC_OK(symcommPeerAccessible(comm_, pe, &accessible));
    if (!accessible) continue;  // on another node: no pointer
    char* whole = static_cast<char*>(symcommPtr(comm_, b, pe));
    char* inner = static_cast<char*>(symcommPtr(comm_, static_cast<char*>(b) + 123, pe));
    EXPECT_EQ(inner - whole, 123);
  }
  SC_OK(symcommFree(comm_, b));
  SC_OK(symcommFree(comm_, a));
}

TEST_F(Heap, InterleavedAllocAndFree) {
  const uint64_t seed = mp::test_seed();  // the same sequence on every rank
  SCOPED_TRACE(mp::seed_note(seed));
  std::mt19937_64 rng(seed);
  struct Live {
    void* p;
    size_t bytes;
    uint64_t what;
  };
  std::vector<Live> live;
  uint64_t what = 1000;
  for (int step = 0; step < 60; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      size_t i = rng() % live.size();
      EXPECT_EQ(mp::count_mismatches(live[i].p, live[i].bytes, mp::rank(), live[i].what), 0u);
      SC_OK(symcommFree(comm_, live[i].p));
      live.erase(live.begin() + static_cast<long>(i));
      continue;
    }
    size_t bytes = 1 + rng() % (rng() % 4 == 0 ? (3 << 20) : 5000);
    void* p;
    SC_OK(symcommMalloc(comm_, bytes, &p));
    // No overlap with any live allocation.
    for (const Live& l : live) {
      auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(l.p);
      EXPECT_TRUE(a + bytes <= b || b + l.bytes <= a) << "overlap";
    }
    mp::fill(p, bytes, mp::rank(), ++what);
    live.push_back({p, bytes, what});
  }
  SC_OK(symcommHostBarrier(comm_));
  for (const Live& l : live)
    for (int pe = 0; pe < mp::nranks(); ++pe)
      EXPECT_EQ(mp::count_peer_mismatches(comm_, l.p, l.bytes, pe, pe, l.what), 0u);
  SC_OK(symcommHostBarrier(comm_));
  for (const Live& l : live) SC_OK(symcommFree(comm_, l.p));
}

TEST_F(Heap, BadInputLeavesHeapUsable) {
  void* p = reinterpret_cast<void*>(1);
  SC_FAILS(symcommMalloc(comm_, 0, &p), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "symcommMalloc(bytes=0)"), nullptr);
  EXPECT_EQ(p, nullptr);
  SC_FAILS(symcommMalloc(comm_, 100, nullptr), symcommInvalidArgument);
  // Different sizes on different ranks: detected on every rank, nothing allocated.
  SC_FAILS(symcommMalloc(comm_, 4096 + static_cast<size_t>(mp::rank() == 0), &p),
           symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "same size on every rank"), nullptr);
  size_t used = 1;
  SC_OK(symcommHeapInfo(comm_, &used, nullptr, nullptr));
  EXPECT_EQ(used, 0u);

  void *a, *b;
  SC_OK(symcommMalloc(comm_, 1024, &a));
  SC_OK(symcommMalloc(comm_, 1024, &b));
  int local = 0;
  SC_FAILS(symcommFree(comm_, &local), symcommInvalidArgument);  // not from the heap
  EXPECT_NE(std::strstr(symcommGetLastError(), "not in the symmetric heap"), nullptr);
  SC_FAILS(symcommFree(comm_, static_cast<char*>(a) + 8), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "inside an allocation"), nullptr);
  // Ranks freeing different allocations.
  SC_FAILS(symcommFree(comm_, mp::rank() == 0 ? a : b), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "same allocation on every rank"), nullptr);
  SC_OK(symcommFree(comm_, a));
  SC_FAILS(symcommFree(comm_, a), symcommInvalidUsage);  // double free
  EXPECT_NE(std::strstr(symcommGetLastError(), "freed twice"), nullptr);
  SC_OK(symcommFree(comm_, nullptr));
  // Pointers for bad arguments.
  EXPECT_EQ(symcommPtr(comm_, b, mp::nranks()), nullptr);
  EXPECT_NE(std::strstr(symcommGetLastError(), "out of range"), nullptr);
  EXPECT_EQ(symcommPtr(comm_, b, -1), nullptr);
  EXPECT_EQ(symcommPtr(comm_, &local, 0), nullptr);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not in the symmetric heap"), nullptr);
  EXPECT_EQ(symcommPtr(nullptr, b, 0), nullptr);
  // Still fully usable.
  void* c;
  SC_OK(symcommMalloc(comm_, 3000, &c));
  write_and_verify_all(comm_, c, 3000, 77);
  SC_OK(symcommFree(comm_, c));
  SC_OK(symcommFree(comm_, b));
}

TEST(HeapLimits, ExhaustionNamesSizesAndRecovers) {
  mp::ScopedEnv max("SYMCOMM_HEAP_MAX", "8M"), chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  size_t maximum = 0;
  SC_OK(symcommHeapInfo(comm, nullptr, nullptr, &maximum));
  void *a, *b;
  SC_OK(symcommMalloc(comm, 3 << 20, &a));
  SC_FAILS(symcommMalloc(comm, maximum, &b), symcommOutOfMemory);
  std::string msg = symcommGetLastError();
  EXPECT_NE(msg.find("used 3 MiB (3145728 bytes) in 1 allocations"), std::string::npos) << msg;
  EXPECT_NE(msg.find("maximum"), std::string::npos) << msg;
  SC_FAILS(symcommMalloc(comm, SIZE_MAX, &b), symcommOutOfMemory);
  // What still fits, fits; the data of `a` survived.
  mp::fill(a, 3 << 20, mp::rank(), 5);
  // (symcomm keeps internal areas in the heap, so not all of the rest fits.)
  SC_OK(symcommMalloc(comm, maximum / 4, &b));
  write_and_verify_all(comm, b, maximum / 4, 6);
  EXPECT_EQ(mp::count_mismatches(a, 3 << 20, mp::rank(), 5), 0u);
  SC_OK(symcommFree(comm, a));
  SC_OK(symcommFree(comm, b));
  SC_OK(symcommFinalize(comm));
}

// symcomm's own allocations (collective workspace, signal areas) share the heap with the
// application's, below its first allocation, but are not the application's to free.
TEST(HeapLimits, InternalAllocationsCannotBeFreed) {
  mp::ScopedEnv workspace("SYMCOMM_COLL_WORKSPACE", "64K");  // a short walk below
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  char* first = nullptr;
  SC_OK(symcommMalloc(comm, 256, reinterpret_cast<void**>(&first)));
  // Every address below the first allocation, down to the heap's start, is refused: the
  // interior of an internal allocation as such, its start as symcomm's own.
  int internal = 0;
  for (char* q = first - 256; symcommPtr(comm, q, mp::rank()) == q; q -= 256) {
    const symcommResult_t rc = symcommFree(comm, q);
    ASSERT_EQ(rc, symcommInvalidArgument)
        << "symcommFree of " << first - q << " bytes below the first allocation: "
        << symcommGetLastError();
    internal += std::strstr(symcommGetLastError(), "symcomm allocated for its own use") != nullptr;
  }
  EXPECT_GT(internal, 0);
  size_t used = 0;
  SC_OK(symcommHeapInfo(comm, &used, nullptr, nullptr));
  EXPECT_EQ(used, 256u);
  void* next = nullptr;  // and nothing below the first allocation was handed out again
  SC_OK(symcommMalloc(comm, 256, &next));
  EXPECT_GT(next, static_cast<void*>(first));
  SC_OK(symcommFinalize(comm));
}

// A growth that fails on rank 1 after its peers sent it their new chunks' handles (rank 1
// cannot duplicate its own chunk's descriptor) leaves those handles queued at rank 1, for
// chunks that the failure destroyed. The next growth, at the same offset, must map the
// chunks it made, not those.
TEST(HeapLimits, FailedGrowthLeavesNoStaleHandles) {
  if (mp::space() == symcommSpaceCuda)
    GTEST_SKIP() << "the descriptor limit is aimed at the host space's memfd";
  if (mp::local_size() < 2) GTEST_SKIP() << "handles pass between ranks of one node: one here";
  mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  const size_t bytes = 4 << 20;  // more than any free range (< 1 chunk): every call grows
  size_t before = 0, mapped = 0;
  SC_OK(symcommHeapInfo(comm, nullptr, &before, nullptr));
  void* p = nullptr;
  {
    // The other ranks wait for rank 1's handle until the bootstrap timeout: a short one,
    // which rank 1 outwaits in the agreement after.
    mp::ScopedEnv timeout("SYMCOMM_BOOTSTRAP_TIMEOUT", mp::rank() == 1 ? "60" : "5");
    OneFreeDescriptor limit(mp::rank() == 1);  // its chunk's memfd takes the one
    p = &mapped;  // not NULL: the call sets it
    const symcommResult_t rc = symcommMalloc(comm, bytes, &p);
    // Every rank fails with the first failing rank's error (Bootstrap::agree): rank 0's,
    // which waited in vain for rank 1's handle (rank 1's own failure, EMFILE, comes after
    // it in rank order), quoted as "rank 0: " on the other ranks, rank 1 included.
    const std::string said = symcommGetLastError();
    EXPECT_EQ(rc, symcommTimeout) << said;
    EXPECT_NE(said.find("cannot map a new heap chunk of the ranks of this node: " +
                        std::string(mp::rank() == 0 ? "" : "rank 0: ") +
                        "timed out waiting for memory handles from the ranks of this node"),
              std::string::npos) << said;
    EXPECT_EQ(p, nullptr);
  }
  SC_OK(symcommHeapInfo(comm, nullptr, &mapped, nullptr));
  EXPECT_EQ(mapped, before);
  SC_OK(symcommMalloc(comm, bytes, &p));
  SC_OK(symcommHeapInfo(comm, nullptr, &mapped, nullptr));
  EXPECT_GT(mapped, before);
  write_and_verify_all(comm, p, bytes, 41);
  SC_OK(symcommFree(comm, p));
  SC_OK(symcommFinalize(comm));
}

// The size of this process's address space (VmSize), in bytes.
size_t address_space_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    unsigned long kib = 0;
    if (std::sscanf(line.c_str(), "VmSize: %lu kB", &kib) == 1) return size_t{kib} << 10;
  }
  return 0;
}

// An initialization that fails once the heap reserved a window (a limit on the address space
// lets one 4 GiB window in, not two) gives it back.
TEST(HeapLimits, FailedInitGivesWindowsBack) {
  if (mp::space() == symcommSpaceCuda)
    GTEST_SKIP() << "the cuda space's windows are not in /proc/self/maps";
  if (mp::local_size() < 2) GTEST_SKIP() << "a window per rank of the node: one rank here";
  mp::ScopedEnv max("SYMCOMM_HEAP_MAX", "4G");  // a window per rank, far above the noise
  const size_t reserved = reserved_bytes();
  symcommUniqueId uid = mp::shared_uid();
  symcommComm_t comm = nullptr;
  symcommConfig_t cfg = mp::config();
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  rlimit limit = old;
  limit.rlim_cur = address_space_bytes() + (size_t{6} << 30);
  ASSERT_TRUE(old.rlim_max == RLIM_INFINITY || old.rlim_max >= limit.rlim_cur);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &limit), 0);
  const symcommResult_t rc = symcommInit(&comm, mp::nranks(), mp::rank(), &uid, &cfg);
  const std::string said = symcommGetLastError();
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  EXPECT_EQ(rc, symcommSystemError) << said;
  EXPECT_NE(said.find("mmap(reserve)"), std::string::npos) << said;
  EXPECT_EQ(comm, nullptr);
  // (Other PROT_NONE regions, such as thread stacks' guards, may come and go.)
  EXPECT_LT(reserved_bytes(), reserved + (size_t{512} << 20));
}

TEST(HeapLimits, GrowthAcrossChunks) {
  size_t chunk_bytes = mp::space() == symcommSpaceCuda ? (size_t{2} << 20) : (size_t{1} << 20);
  mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", std::to_string(chunk_bytes));
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  std::vector<void*> ptrs;
  size_t mapped = 0, last_mapped = 0;
  int growths = 0;
  for (int i = 0; i < 12; ++i) {
    void* p;
    SC_OK(symcommMalloc(comm, chunk_bytes / 3 + 100, &p));  // ends straddle chunk boundaries
    mp::fill(p, chunk_bytes / 3 + 100, mp::rank(), 100 + static_cast<uint64_t>(i));
    ptrs.push_back(p);
    SC_OK(symcommHeapInfo(comm, nullptr, &mapped, nullptr));
    growths += mapped != last_mapped;
    last_mapped = mapped;
  }
  void* big;  // spans several chunks at once
  SC_OK(symcommMalloc(comm, 3 * chunk_bytes + 5, &big));
  write_and_verify_all(comm, big, 3 * chunk_bytes + 5, 99);
  EXPECT_GE(growths, 4);
  for (int pe = 0; pe < mp::nranks(); ++pe)
    for (size_t i = 0; i < ptrs.size(); ++i)
      EXPECT_EQ(mp::count_peer_mismatches(comm, ptrs[i], chunk_bytes / 3 + 100, pe, pe,
                                          100 + i), 0u) << "pe " << pe << " allocation " << i;
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommFinalize(comm));  // frees what is still allocated
}

// The 8 x H200 check of the foundation issue: SYMCOMM_TEST_BIG_GIB GiB per rank in 1 GiB
// calls, written by each rank, read back by every rank from every other rank.
TEST(HeapLimits, BigAllocationsVerifiedByAll) {
  const char* big = std::getenv("SYMCOMM_TEST_BIG_GIB");
  if (!big) GTEST_SKIP() << "set SYMCOMM_TEST_BIG_GIB to run (scripts/gpu-check does)";
  const int gib = std::atoi(big);
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  std::vector<void*> ptrs;
  double alloc_ms = 0;
  for (int i = 0; i < gib; ++i) {
    void* p;
    auto t = std::chrono::steady_clock::now();
    SC_OK(symcommMalloc(comm, size_t{1} << 30, &p));
    alloc_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
                    .count();
    mp::fill(p, size_t{1} << 30, mp::rank(), 500 + static_cast<uint64_t>(i));
    ptrs.push_back(p);
  }
  SC_OK(symcommHostBarrier(comm));
  auto t = std::chrono::steady_clock::now();
  for (int pe = 0; pe < mp::nranks(); ++pe)
    for (int i = 0; i < gib; ++i)
      ASSERT_EQ(mp::count_peer_mismatches(comm, ptrs[static_cast<size_t>(i)], size_t{1} << 30,
                                          pe, pe, 500 + static_cast<uint64_t>(i)), 0u)
          << "GiB " << i << " of rank " << pe;
  double verify_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  std::printf("rank %d: %d GiB in %d calls, %.1f ms per GiB to allocate; verified %d GiB from "
              "%d ranks in %.2f s\n", mp::rank(), gib, gib, alloc_ms / gib, gib, mp::nranks(),
              verify_s);
  SC_OK(symcommHostBarrier(comm));
  for (void* p : ptrs) SC_OK(symcommFree(comm, p));
  SC_OK(symcommFinalize(comm));
}

TEST(HeapLimits, RanksDisagreeOnHeapSize) {
  mp::ScopedEnv max("SYMCOMM_HEAP_MAX", mp::rank() == 0 ? "64M" : "32M");
  symcommUniqueId uid = mp::shared_uid();
  symcommComm_t comm = nullptr;
  symcommConfig_t cfg = mp::config();
  symcommResult_t rc = symcommInit(&comm, mp::nranks(), mp::rank(), &uid, &cfg);
  EXPECT_EQ(rc, symcommInvalidUsage) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "disagree on the heap"), nullptr)
      << symcommGetLastError();
}

TEST(HeapLimits, PeersOnOtherNodesHaveNoPointer) {
  if (mp::space() == symcommSpaceCuda) GTEST_SKIP() << "node names are faked in the host space only";
  // Ranks of even and odd number claim two different nodes.
  symcommComm_t comm = mp::new_two_node_comm();
  ASSERT_NE(comm, nullptr);
  int local = -1, local_size = -1, node_index = -1, nnodes = -1;
  SC_OK(symcommCommLocalRank(comm, &local));
  SC_OK(symcommCommLocalSize(comm, &local_size));
  SC_OK(symcommCommNode(comm, &node_index, &nnodes));
  EXPECT_EQ(nnodes, 2);
  EXPECT_EQ(node_index, mp::rank() % 2);
  EXPECT_EQ(local, mp::rank() / 2);
  EXPECT_EQ(local_size, (mp::nranks() + 1 - mp::rank() % 2) / 2);
  void* p;
  SC_OK(symcommMalloc(comm, 4096, &p));
  mp::fill(p, 4096, mp::rank(), 1);
  SC_OK(symcommHostBarrier(comm));
  for (int pe = 0; pe < mp::nranks(); ++pe) {
    int accessible = -1;
    SC_OK(symcommPeerAccessible(comm, pe, &accessible));
    void* remote = symcommPtr(comm, p, pe);
    if (pe % 2 == mp::rank() % 2) {
      EXPECT_EQ(accessible, 1);
      ASSERT_NE(remote, nullptr);
      EXPECT_EQ(mp::count_mismatches(remote, 4096, pe, 1), 0u);
    } else {
      EXPECT_EQ(accessible, 0);
      EXPECT_EQ(remote, nullptr);
      // The last error says why: the header promises it.
      const std::string why = symcommGetLastError();
      EXPECT_NE(why.find("rank " + std::to_string(pe) + " is on node " + std::to_string(pe % 2)),
                std::string::npos) << why;
      EXPECT_NE(why.find("not load/store accessible"), std::string::npos) << why;
    }
  }
  SC_OK(symcommHostBarrier(comm));
  SC_OK(symcommFree(comm, p));
  SC_OK(symcommFinalize(comm));
}

}  // namespace
