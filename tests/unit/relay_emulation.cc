// The relay broadcast's protocol run on the host: the library's own relay headers (plan,
// lanes) with tests/unit/emulation/harness.h, one host thread per CUDA thread (a few per
// block, so that blocks stride over their chunks and __syncthreads matters, and several
// lanes per rank). Each rank has its own counters and buffers; peers store into them
// directly, as GPUs do over NVLink. Each rank runs its kernels one after the other on its
// own "stream", with no synchronisation between ranks, as back-to-back calls on GPUs do.
//
// It checks broadcasts from every root of teams of 2 to 8, sizes from one byte to many
// chunks per lane (tails that are not whole 16-byte vectors, owners with empty pieces),
// in place on the root and not; the per-(lane, pair) counters across calls, roots and teams
// that share pairs with the world; and that a wait that cannot end records its error and
// ends the kernel. The plans are the library's (relay::make_plan, as RelayAlgorithm::run
// calls it).
//
// What it cannot answer: the memory-model questions (the fence and relaxed store of a
// signal, acquire polls and ld.global.cg over NVLink) stay with the GPU tests
// (tests/mp/coll_test.cc, relay on 4 GPUs). The kernel keeps no shared memory.
#include "emulation/harness.h"  // first: what the protocol headers expect of CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "coll/coll.h"
#include "coll/device/counters.h"
#include "coll/relay/lanes.cuh"
#include "coll/relay/plan.h"

namespace {

using namespace symcomm;
using namespace symcomm::relay;
using emulation::Memory;

const char kPoison = static_cast<char>(0xAB);  // where nothing may be written
constexpr uint64_t kLaneBytes = 8 << 10;       // SYMCOMM_COLL_RELAY_LANE_BYTES's default
constexpr uint64_t kSteps = 8;                 // SYMCOMM_COLL_RELAY_STEPS's
constexpr size_t kGuard = 16;                  // poisoned bytes on each side of a buffer

// `nranks` ranks' counter areas, and kernels run as threads.
class Emulator {
 public:
  struct Launch {
    Plan plan;
    int blocks = 0;  // 0: run() launches nothing
    bool copy_first = false;  // the root's own copy before the kernel (no blocks to spare)
  };

  // `threads` per block (at least the team size, as kThreads is); `max_lanes` and
  // `max_chunk`: SYMCOMM_COLL_RELAY_BLOCKS and SYMCOMM_COLL_RELAY_CHUNK.
  Emulator(int nranks, int threads, int max_lanes, uint64_t max_chunk)
      : threads_(threads), max_lanes_(max_lanes), max_chunk_(max_chunk),
        devices_(nranks, counters_bytes(nranks)) {}
  int size() const { return devices_.size(); }

  // The launch of team member a.me, as RelayAlgorithm::run makes it (make_plan); recvs[j]
  // stands for on(a, a.recv, j).
  Launch launch(const CollArgs& a, const std::vector<char*>& recvs) {
    Launch l;
    if (a.count * a.elem == 0 || a.team.size == 1) return l;
    const int rank = a.team.world_of(a.me);
    auto on = [&](const void* q, int j) -> char* {
      if (q == a.recv) return recvs[static_cast<size_t>(j)];
      return devices_.on(rank, q, a.team.world_of(j));
    };
    l.copy_first = make_plan(l.plan, a, devices_.world(rank), devices_.area(rank),
                             static_cast<uint64_t>(max_lanes_), max_chunk_, kLaneBytes, kSteps,
                             resident_, on);
    l.blocks = l.plan.lanes + l.plan.self_blocks;
    return l;
  }

  void run(const std::vector<std::vector<Launch>>& streams) {
    emulation::run_streams(streams, [this](const Launch& l) {
      if (l.copy_first) std::memcpy(l.plan.recv, l.plan.send, l.plan.len);
      emulation::run_grid(l.blocks, threads_, [&] { relay_kernel(l.plan); });
    });
  }

  emulation::Devices& devices() { return devices_; }
  // The blocks the GPU holds at once (RelayAlgorithm's resident count).
  void set_resident(int blocks) { resident_ = blocks; }
  // Lane b's counter `kind` of `rank` with `peer`.
  uint64_t* word(int rank, Counter kind, int lane, int peer) {
    auto* words = reinterpret_cast<uint64_t*>(devices_.area(rank));
    return protocol::counter_word<kMaxLanes>(words, kind, lane, size(), peer);
  }

 private:
  int threads_, max_lanes_;
  uint64_t max_chunk_;
  int resident_ = 1 << 20;
  emulation::Devices devices_;
};

// One broadcast over a team, and every member's buffers (recv poisoned, with guards).
struct Call {
  Team team;
  int root = 0;
  size_t len = 0;      // bytes (type uint8)
  bool in_place = false;
  std::vector<std::unique_ptr<Memory>> mem;  // recv of each member, and the root's send
  std::vector<char*> recv;
  const char* send = nullptr;
  std::vector<char> input;

  std::string describe() const {
    char text[160];
    std::snprintf(text, sizeof text,
                  "broadcast on %d ranks (start %d stride %d) from %d, %zu bytes%s", team.size,
                  team.start, team.stride, root, len, in_place ? ", in place" : "");
    return text;
  }
};

// Calls run together (each rank's in order on its stream), then checked.
class Batch {
 public:
  Batch(Emulator& emu, std::mt19937_64& rng)
      : emu_(emu), rng_(rng), streams_(static_cast<size_t>(emu.size())) {}

  void add(Team team, int root, size_t len, bool in_place) {
    auto c = std::make_unique<Call>();
    Call& k = *c;
    k.team = team;
    k.root = root;
    k.len = len;
    k.in_place = in_place;
    k.input.resize(len);
    for (char& x : k.input) x = static_cast<char>(rng_());
    for (int m = 0; m < team.size; ++m) {
      k.mem.push_back(std::make_unique<Memory>(2 * kGuard + len, kPoison));
      k.recv.push_back(k.mem.back()->data() + kGuard);
    }
    if (in_place) {
      std::memcpy(k.recv[static_cast<size_t>(root)], k.input.data(), len);
      k.send = k.recv[static_cast<size_t>(root)];
    } else {
      k.mem.push_back(std::make_unique<Memory>(2 * kGuard + len, kPoison));
      char* send = k.mem.back()->data() + kGuard;
      std::memcpy(send, k.input.data(), len);
      k.send = send;
    }
    for (int me = 0; me < team.size; ++me) {
      CollArgs a{};
      a.op = CollOp::Broadcast;
      a.team = team;
      a.me = me;
      a.root = root;
      a.send = me == root ? k.send : nullptr;
      a.recv = k.recv[static_cast<size_t>(me)];
      a.count = len;
      a.type = symcommUint8;
      a.elem = 1;
      const Emulator::Launch l = emu_.launch(a, k.recv);
      if (l.blocks > 0) streams_[static_cast<size_t>(team.world_of(me))].push_back(l);
    }
    calls_.push_back(std::move(c));
  }

  void run_and_check() {
    emu_.run(streams_);
    emu_.devices().expect_no_failed_wait();
    for (const auto& c : calls_) check(*c);
    // Both sides of a pair count the same calls, and the chunks one stored the other got
    // (the next call's waits depend on it).
    for (int a = 0; a < emu_.size(); ++a)
      for (int b = 0; b < emu_.size(); ++b)
        for (int lane = 0; a != b && lane < kMaxLanes; ++lane) {
          ASSERT_EQ(*emu_.word(a, kCalls, lane, b), *emu_.word(b, kCalls, lane, a))
              << "ranks " << a << " and " << b << ", lane " << lane;
          ASSERT_EQ(*emu_.word(a, kPut, lane, b), *emu_.word(b, kGot, lane, a))
              << "ranks " << a << " and " << b << ", lane " << lane;
          ASSERT_EQ(*emu_.word(b, kData, lane, a), *emu_.word(a, kPut, lane, b))
              << "ranks " << a << " and " << b << ", lane " << lane;
        }
  }

 private:
  static void check(const Call& k) {
    SCOPED_TRACE(k.describe());
    for (int m = 0; m < k.team.size; ++m) {
      const char* got = k.recv[static_cast<size_t>(m)];
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < k.len; ++i)
        if (got[i] != k.input[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << "member " << m << ": " << bad << " bytes of " << k.len
                         << " differ, the first at " << first;
      auto poisoned = [](const char* lo, const char* hi) {
        return std::all_of(lo, hi, [](char x) { return x == kPoison; });
      };
      EXPECT_TRUE(poisoned(got - kGuard, got) && poisoned(got + k.len, got + k.len + kGuard))
          << "member " << m << " written outside its buffer";
    }
    if (!k.in_place) {
      EXPECT_TRUE(std::equal(k.input.begin(), k.input.end(), k.send))
          << "the root's send changed";
    }
  }

  Emulator& emu_;
  std::mt19937_64& rng_;
  std::vector<std::vector<Emulator::Launch>> streams_;
  std::vector<std::unique_ptr<Call>> calls_;
};

// One byte, a tail alone, around a vector, a few chunks, owners with empty pieces (fewer
// than 16 bytes per owner), and pieces past 64 KiB: several lanes.
const size_t kLens[] = {1,    15,   16,   17,    33,    100,   1000,   4099,
                        9000, 20000, 65537, 140000, 200003, 300000};

// Random roots, sizes and placements on `n` ranks, five calls per batch back to back on
// each rank's stream, the counters carried from batch to batch. Chunks of at most 2 KiB and
// 3 lanes: many rounds per lane at the larger sizes.
void back_to_back(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Emulator emu(n, n + 1, 3, 2048);
  for (int batch = 0; batch < 8; ++batch) {
    Batch b(emu, rng);
    for (int k = 0; k < 5; ++k)
      b.add(Team{0, 1, n}, static_cast<int>(rng() % static_cast<uint64_t>(n)),
            kLens[rng() % std::size(kLens)], rng() % 3 == 0);
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
}

TEST(RelayEmulation, BackToBackOnTwoRanks) { back_to_back(2, 41); }
TEST(RelayEmulation, BackToBackOnThreeRanks) { back_to_back(3, 43); }
TEST(RelayEmulation, BackToBackOnFourRanks) { back_to_back(4, 47); }
TEST(RelayEmulation, BackToBackOnFiveRanks) { back_to_back(5, 53); }
TEST(RelayEmulation, BackToBackOnEightRanks) { back_to_back(8, 59); }

// How the root (team rank `root` of 4) launches a broadcast of 300000 bytes: only the
// shape is looked at, so the buffers are stand-ins.
Emulator::Launch root_launch(Emulator& emu, int root) {
  CollArgs a{};
  a.op = CollOp::Broadcast;
  a.team = Team{0, 1, 4};
  a.root = a.me = root;
  static char send[16], recv[16];
  a.send = send;
  a.recv = recv;
  a.count = 300000;
  a.elem = 1;
  return emu.launch(a, {recv, recv, recv, recv});
}

// A GPU that holds few blocks beside the lanes: the root's own copy gets what is left (one
// block, or none: the copy before the kernel), and the grid never exceeds what it holds.
TEST(RelayEmulation, TheRootsOwnCopyFitsBesideTheLanes) {
  std::mt19937_64 rng(71);
  for (int spare : {0, 1, 2}) {
    SCOPED_TRACE(testing::Message() << spare << " blocks beside 3 lanes");
    Emulator emu(4, 5, 3, 2048);
    emu.set_resident(3 + spare);
    Batch b(emu, rng);
    for (int root = 0; root < 4; ++root) b.add(Team{0, 1, 4}, root, 300000, false);
    b.add(Team{0, 1, 4}, 1, 200003, true);
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
  Emulator emu(4, 5, 3, 2048);
  emu.set_resident(4);
  const Emulator::Launch l = root_launch(emu, 2);
  EXPECT_EQ(l.plan.lanes, 3);
  EXPECT_EQ(l.blocks, 4);
  EXPECT_FALSE(l.copy_first);
}

// A GPU that holds fewer blocks than the lanes asked for (shared under MPS, or partitioned):
// fewer lanes, the same on every member, and the root's own copy before the kernel.
TEST(RelayEmulation, NoMoreLanesThanTheGpuHolds) {
  std::mt19937_64 rng(73);
  Emulator emu(4, 5, 3, 2048);
  emu.set_resident(2);
  Batch b(emu, rng);
  for (int root = 0; root < 4; ++root) b.add(Team{0, 1, 4}, root, 300000, false);
  b.run_and_check();
  const Emulator::Launch l = root_launch(emu, 1);
  EXPECT_EQ(l.plan.lanes, 2);
  EXPECT_EQ(l.blocks, 2);
  EXPECT_TRUE(l.copy_first);
}

// Every root in turn with large chunks (one per lane and piece) and with 16-byte ones.
TEST(RelayEmulation, EveryRootWithLargeAndTinyChunks) {
  std::mt19937_64 rng(61);
  for (uint64_t chunk : {uint64_t{1} << 20, uint64_t{16}}) {
    SCOPED_TRACE(testing::Message() << "chunks of at most " << chunk << " bytes");
    Emulator emu(4, 4, 2, chunk);
    Batch b(emu, rng);
    for (int root = 0; root < 4; ++root)
      b.add(Team{0, 1, 4}, root, chunk > 16 ? 150001 : 3001, false);
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
}

// Teams of even and odd ranks and pairs between world calls: counters are per pair of world
// ranks and lane, and the calls of one pair come in the same order on both sides.
TEST(RelayEmulation, TeamsInterleaveWithTheWorld) {
  std::mt19937_64 rng(67);
  for (int n : {4, 8}) {
    SCOPED_TRACE(testing::Message() << n << " ranks");
    Emulator emu(n, n + 1, 3, 4096);
    const Team teams[] = {Team{0, 1, n}, Team{0, 2, n / 2}, Team{1, 2, n / 2}, Team{1, 1, 2},
                          Team{0, 1, n}, Team{0, n - 1, 2}};
    for (int batch = 0; batch < 5; ++batch) {
      Batch b(emu, rng);
      for (int k = 0; k < 6; ++k) {
        const Team t = teams[(batch + k) % 6];
        b.add(t, static_cast<int>(rng() % static_cast<uint64_t>(t.size)),
              kLens[rng() % std::size(kLens)], rng() % 4 == 0);
      }
      b.run_and_check();
      if (testing::Test::HasFailure()) return;
    }
  }
}

// The shape every member derives: pieces cover the message in 16-byte multiples, chunks are
// multiples of 16 within the bound, lanes within theirs, and a lane has chunks of piece 0.
TEST(RelayEmulation, ShapeOfACall) {
  std::mt19937_64 rng(71);
  for (int k = 0; k < 20000; ++k) {
    Plan p{};
    p.n = 2 + static_cast<int>(rng() % 31);
    p.len = 1 + rng() % (uint64_t{1} << (rng() % 34));
    const uint64_t max_lanes = 1 + rng() % kMaxLanes;
    const uint64_t max_chunk = 16 + rng() % (uint64_t{1} << 20);
    const int resident = 1 + static_cast<int>(rng() % 160);
    shape_call(p, max_lanes, max_chunk, 1 + rng() % (uint64_t{1} << 17), 1 + rng() % 16, resident);
    ASSERT_EQ(p.piece % 16, 0u);
    ASSERT_GE(p.piece * static_cast<uint64_t>(p.n - 1), p.len);
    ASSERT_LT((p.piece - 16) * static_cast<uint64_t>(p.n - 1), p.len) << "pieces longer than needed";
    ASSERT_EQ(p.chunk % 16, 0u);
    ASSERT_GE(p.chunk, 16u);
    ASSERT_LE(p.chunk, std::max<uint64_t>(16, max_chunk));
    ASSERT_GE(p.lanes, 1);
    ASSERT_LE(static_cast<uint64_t>(p.lanes), max_lanes);
    ASSERT_LE(p.lanes, resident) << "more lanes than the GPU holds";
    ASSERT_GE(lane_chunks(p, 0, p.lanes - 1), 1u) << "a lane with nothing to move";
  }
}

// Where a lane's share of the piece is under kMinChunk, the share is one chunk: the lanes
// lane_bytes asks for all run (a 1 MiB broadcast on 4 ranks with 4 KiB per lane: 86 lanes of
// one chunk each, not the 11 that 32 KiB chunks would leave); larger shares keep chunks of at
// least kMinChunk.
TEST(RelayEmulation, SmallSharesSpreadOverTheLanes) {
  Plan p{};
  p.n = 4;
  p.len = 1 << 20;
  shape_call(p, 96, 256 << 10, 4 << 10, 8, 132);
  EXPECT_EQ(p.piece, 349536u);
  EXPECT_EQ(p.lanes, 86);
  EXPECT_EQ(p.chunk, 4080u);  // 349536 / 86 = 4064.4, up to 16 bytes
  for (int k = 0; k < p.n - 1; ++k)
    for (int b = 0; b < p.lanes; ++b) ASSERT_EQ(lane_chunks(p, k, b), 1u) << k << " " << b;
  Plan q{};
  q.n = 4;
  q.len = 64 << 20;  // 21.3 MiB pieces over 96 lanes: 8 chunks of 28.4 KiB would be under 32 KiB
  shape_call(q, 96, 256 << 10, 4 << 10, 8, 132);
  EXPECT_EQ(q.lanes, 96);
  EXPECT_EQ(q.chunk, kMinChunk);
  // Pieces over kEagerPiece: lanes of 32 KiB at least, whatever lane_bytes asks (4 MiB on 4
  // ranks: 43 lanes of one chunk, not 96 of 14 KiB).
  Plan e{};
  e.n = 4;
  e.len = 4 << 20;
  shape_call(e, 96, 256 << 10, 4 << 10, 8, 132);
  EXPECT_EQ(e.lanes, 43);
  for (int b = 0; b < e.lanes; ++b) ASSERT_EQ(lane_chunks(e, 0, b), 1u) << b;
}

// Rank 0 as an owner whose peers never start: its first wait (the other owner's ready, the
// calls counter + 1) ends after the timeout in every lane and records the word it waited
// for; nothing is stored, and the counters stay as the first call left them. Then the same
// with the abort flag and no time bound.
TEST(RelayEmulation, AFailedWaitIsRecordedAndEndsTheKernel) {
  for (bool abort : {false, true}) {
    SCOPED_TRACE(abort ? "aborted" : "timed out");
    std::mt19937_64 rng(73);
    Emulator emu(3, 4, 4, 4096);
    Batch first(emu, rng);
    first.add(Team{0, 1, 3}, 1, 200000, false);
    first.run_and_check();
    const uint64_t calls = *emu.word(0, kCalls, 0, 2);
    ASSERT_EQ(calls, 1u);
    std::vector<uint64_t> before;  // rank 0's counters with ranks 1 and 2 in every lane
    for (Counter c : {kCalls, kGot, kPut})
      for (int lane = 0; lane < 4; ++lane)
        for (int peer : {1, 2}) before.push_back(*emu.word(0, c, lane, peer));
    if (abort) {
      emu.devices().set_timeout_ns(0);  // no bound: only the abort ends it
      emu.devices().set_abort();
    } else {
      emu.devices().set_timeout_ns(50 * 1000 * 1000);
    }
    std::vector<std::unique_ptr<Memory>> recv;
    std::vector<char*> recvs;
    for (int m = 0; m < 3; ++m) {
      recv.push_back(std::make_unique<Memory>(200000, kPoison));
      recvs.push_back(recv.back()->data());
    }
    CollArgs a{};
    a.op = CollOp::Broadcast;
    a.team = Team{0, 1, 3};
    a.root = 1;
    a.recv = recvs[0];
    a.count = 200000;
    a.type = symcommUint8;
    a.elem = 1;
    const Emulator::Launch l = emu.launch(a, recvs);
    ASSERT_EQ(l.blocks, 4);  // 100000-byte pieces: 4 lanes (of 32 KiB or more; at most 4)
    emu.run({{l}, {}, {}});
    // It returned: the error's code says what ended the waits (no wall-clock bound, which a
    // loaded machine can exceed; a kernel that never ended would meet ctest's timeout).
    const DeviceError& e = emu.devices().error(0);
    EXPECT_EQ(e.code, abort ? symcommPeerLost : symcommTimeout);
    EXPECT_EQ(e.expected, calls + 1);
    EXPECT_EQ(e.observed, calls);
    EXPECT_EQ(e.cmp, symcommCmpGe);
    EXPECT_EQ(e.address, reinterpret_cast<uintptr_t>(emu.word(0, kReady, e.block, 2)));
    for (const auto& m : recv)
      EXPECT_TRUE(std::all_of(m->data(), m->data() + 200000, [](char x) { return x == kPoison; }))
          << "a store after the failed wait";
    std::vector<uint64_t> after;
    for (Counter c : {kCalls, kGot, kPut})
      for (int lane = 0; lane < 4; ++lane)
        for (int peer : {1, 2}) after.push_back(*emu.word(0, c, lane, peer));
    EXPECT_EQ(after, before) << "counters advanced by a kernel that failed";
  }
}

}  // namespace
