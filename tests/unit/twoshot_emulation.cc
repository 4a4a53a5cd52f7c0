// The twoshot collectives' protocol run on the host: the library's own twoshot headers
// (plan, shots) with tests/unit/emulation/harness.h, one host thread per CUDA thread (a few
// per block, so that blocks stride over their slices and __syncthreads matters, and several
// blocks per rank). Each rank has its own memory (the flags, counters and stage areas of
// TwoshotState, its buffers); peers load and store it directly, as GPUs do over NVLink.
// Each rank runs its kernels one after the other on its own "stream", with no
// synchronisation between ranks, as back-to-back calls on GPUs do.
//
// It checks all-reduce and reduce (in place too; a reduce's non-roots without recv) and
// reduce-scatter, sum, min and max of 8-, 32- and
// 64-bit integers, float, double, f16 and bf16 (16-bit floats bit-identical on every rank:
// combined in team-rank order), against a reduction written here; sizes from nothing to
// many rounds; the direct path (addressable, 16-byte aligned buffers) and the staged one
// (not addressable, or misaligned, either side) with small stage areas; the per-(block, pair)
// counters across calls and teams that share pairs with the world; and that a wait that
// cannot end records its error and ends the kernel. The plans are the library's
// (twoshot::make_plan, as TwoshotAlgorithm::run calls it).
//
// What it cannot answer: the memory-model questions (the fence and relaxed store of a
// signal, acquire polls and ld.global.cg over NVLink, 16-byte stores) stay with the GPU
// tests: C++ atomics on one host are stronger. __shared__ is one object per host thread,
// which is exact here because g0[m] is written and read by thread m alone.
//
// The Emulator and batches of calls: twoshot_emulator.h; the reference: twoshot_reference.h.
#include "twoshot_emulator.h"  // first: the harness, then the protocol headers

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <memory>
#include <random>

#include "twoshot_reference.h"

namespace symcomm::twoshot::test {
namespace {

const symcommDataType_t kTypes[] = {symcommInt32,   symcommFloat32,  symcommFloat64, symcommFloat16,
                                    symcommBfloat16, symcommUint8, symcommInt64};

// A call of `op` over `team` with a random type, operation and placement, and about `bytes`
// bytes per segment (1: one element in all; odd counts half the time).
std::unique_ptr<Call> random_call(std::mt19937_64& rng, Team team, CollOp op, size_t bytes) {
  auto c = std::make_unique<Call>();
  c->op = op;
  c->team = team;
  c->type = kTypes[rng() % std::size(kTypes)];
  c->redop = static_cast<symcommRedOp_t>(rng() % 3);
  const size_t e = c->elem();
  const bool whole = op == CollOp::AllReduce || op == CollOp::Reduce;  // one buffer, segmented
  if (whole && bytes > 1) bytes *= static_cast<size_t>(team.size);
  c->count = std::max<size_t>(bytes / e, bytes ? 1 : 0);
  if (c->count > 1 && rng() % 2) c->count |= 1;
  c->in_place = whole && rng() % 3 == 0;
  c->root = static_cast<int>(rng() % static_cast<uint64_t>(team.size));
  const size_t misaligned = e < 16 ? e * (1 + rng() % (16 / e - 1)) : 0;
  switch (rng() % 5) {
    case 0: c->send_addr = c->recv_addr = false; break;              // staged both ways
    case 1: c->send_off = c->recv_off = misaligned; break;           // addressable, staged
    case 2: c->recv_addr = false; break;                             // direct in, staged out
    case 3: c->send_addr = false; break;                             // staged in, direct out
    default: break;                                                  // direct
  }
  if (op == CollOp::Reduce && c->in_place && rng() % 2) {  // the root's object differs
    c->root_addr_differs = true;
    c->send_addr = false;
  }
  return c;
}

// Stage areas of 16640 bytes per member: rounds of 1040 vectors per segment, in 3 blocks of
// 347 vectors, the last one cut short by the end of the round.
constexpr uint64_t kStagePerMember = 16640;

// Per segment: nothing, one element in all, a tail alone, around a 16-byte vector, slices of
// several vectors, and up to 4 rounds of the stage areas.
const size_t kBytes[] = {0,    1,     2,     5,     15,    16,    17,   100,
                         1000, 12288, 16641, 20000, 30000, 40001, 60000};

// Every placement, type and op on `n` ranks, five calls per batch back to back on each
// rank's stream, the counters carried from batch to batch.
void back_to_back(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Emulator emu(n, n + 1, kStagePerMember * static_cast<uint64_t>(n), 4);
  for (int batch = 0; batch < 16; ++batch) {
    Batch b(emu, rng);
    for (int k = 0; k < 5; ++k) {
      const CollOp op = std::vector<CollOp>{CollOp::AllReduce, CollOp::ReduceScatter,
                                            CollOp::Reduce}[static_cast<size_t>(batch + k) % 3];
      b.add(random_call(rng, Team{0, 1, n}, op, kBytes[rng() % std::size(kBytes)]));
    }
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
}

TEST(TwoshotEmulation, BackToBackOnTwoRanks) { back_to_back(2, 11); }

// Addressable buffers aligned differently on different ranks (registered buffers at other
// offsets from 16 bytes): every member must take the staged path, as the aligned one does
// on its own (a rank that went direct would read its peer's misaligned send in 16-byte
// vectors and count other rounds).
TEST(TwoshotEmulation, BuffersAlignedDifferentlyOnDifferentRanks) {
  std::mt19937_64 rng(31);
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(testing::Message() << n << " ranks");
    Emulator emu(n, n + 1, kStagePerMember * static_cast<uint64_t>(n), 4);
    for (int batch = 0; batch < 3; ++batch) {
      Batch b(emu, rng);
      for (int k = 0; k < 4; ++k) {
        auto c = random_call(rng, Team{0, 1, n}, k % 2 ? CollOp::ReduceScatter : CollOp::AllReduce,
                             kBytes[5 + rng() % 10]);
        c->type = symcommInt32;
        c->send_addr = c->recv_addr = true;
        c->send_off = c->recv_off = 8;
        c->odd_members_only = true;
        b.add(std::move(c));
      }
      b.run_and_check();
      if (testing::Test::HasFailure()) return;
    }
  }
}
TEST(TwoshotEmulation, BackToBackOnThreeRanks) { back_to_back(3, 13); }
TEST(TwoshotEmulation, BackToBackOnFourRanks) { back_to_back(4, 17); }
TEST(TwoshotEmulation, BackToBackOnEightRanks) { back_to_back(8, 19); }

// A stage area of 256 bytes: rounds of 32 to 128 bytes per segment, so that many rounds
// go by in one call and round boundaries fall inside the vectors' tails; one thread per
// member, as few as the exchange needs.
TEST(TwoshotEmulation, ManyRoundsThroughATinyStage) {
  std::mt19937_64 rng(23);
  for (int n : {2, 3, 8}) {
    SCOPED_TRACE(testing::Message() << n << " ranks");
    Emulator emu(n, n, 256, 128);
    Batch b(emu, rng);
    for (int k = 0; k < 4; ++k) {
      auto c = random_call(rng, Team{0, 1, n}, k % 2 ? CollOp::ReduceScatter : CollOp::AllReduce,
                           k < 2 ? 700 : 3);
      c->send_addr = false;
      b.add(std::move(c));
    }
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
}

// Teams of even and odd ranks and pairs between world calls: counters are per pair of world
// ranks and block, and the calls of one pair come in the same order on both sides.
TEST(TwoshotEmulation, TeamsInterleaveWithTheWorld) {
  std::mt19937_64 rng(29);
  for (int n : {4, 8}) {
    SCOPED_TRACE(testing::Message() << n << " ranks");
    Emulator emu(n, n + 1, kStagePerMember * static_cast<uint64_t>(n), 3);
    const Team teams[] = {Team{0, 1, n}, Team{0, 2, n / 2}, Team{1, 2, n / 2}, Team{1, 1, 2},
                          Team{0, 1, n}, Team{0, n - 1, 2}};
    for (int batch = 0; batch < 5; ++batch) {
      Batch b(emu, rng);
      for (int k = 0; k < 6; ++k) {
        const CollOp op = rng() % 2 ? CollOp::ReduceScatter : CollOp::AllReduce;
        b.add(random_call(rng, teams[(batch + k) % 6], op, kBytes[3 + rng() % 12]));
      }
      b.run_and_check();
      if (testing::Test::HasFailure()) return;
    }
  }
}

// A rank whose peer stops after one call: its next call's first wait (READY of round 0,
// counter + 1) ends after the timeout, in every block, and records the flag it waited for;
// no block writes a result, and the counters stay as the first call left them. Then the same
// with the abort flag and no time bound.
TEST(TwoshotEmulation, AFailedWaitIsRecordedAndEndsTheKernel) {
  for (bool abort : {false, true}) {
    SCOPED_TRACE(abort ? "aborted" : "timed out");
    std::mt19937_64 rng(31);
    Emulator emu(2, 3, 4096, 4);
    auto call = std::make_unique<Call>();
    call->team = Team{0, 1, 2};
    call->count = 10000;  // direct: one round of 20000 bytes per segment, 3 blocks
    Batch first(emu, rng);
    first.add(std::move(call));
    first.run_and_check();
    const uint64_t done = *emu.word(0, kSeq, 0, 1);
    ASSERT_EQ(done, 1u);
    if (abort) {
      emu.devices().set_timeout_ns(0);  // no bound: only the abort ends it
      emu.devices().set_abort();
    } else {
      emu.devices().set_timeout_ns(50 * 1000 * 1000);
    }
    Memory send0(40000, 1), send1(40000, 1), recv0(40000, kPoison), recv1(40000, kPoison);
    CollArgs a{};
    a.op = CollOp::AllReduce;
    a.team = Team{0, 1, 2};
    a.send = send0.data();
    a.recv = recv0.data();
    a.count = 10000;
    a.type = symcommInt32;
    a.elem = 4;
    const Emulator::Launch l =
        emu.launch(a, true, true, {send0.data(), send1.data()}, {recv0.data(), recv1.data()});
    ASSERT_EQ(l.blocks, 3);
    emu.run({{l}, {}});
    // It returned: the error's code says what ended the waits (no wall-clock bound, which a
    // loaded machine can exceed; a kernel that never ended would meet ctest's timeout).
    const DeviceError& e = emu.devices().error(0);
    EXPECT_EQ(e.code, abort ? symcommPeerLost : symcommTimeout);
    EXPECT_EQ(e.expected, done + 1);
    EXPECT_EQ(e.observed, done);
    EXPECT_EQ(e.cmp, symcommCmpGe);
    EXPECT_EQ(e.address, reinterpret_cast<uintptr_t>(emu.word(0, kReady, e.block, 1)));
    for (Memory* m : {&recv0, &recv1})
      EXPECT_TRUE(std::all_of(m->data(), m->data() + 40000, [](char x) { return x == kPoison; }))
          << "a result written after the failed wait";
    for (int b = 0; b < kMaxBlocks; ++b)
      EXPECT_EQ(*emu.word(0, kSeq, b, 1), b < l.blocks ? done : 0) << "block " << b;
  }
}

// The test's own 16-bit conversions against CUDA's: from float on the inputs' sevenths and on
// random floats of every exponent the results can have (and subnormal halves), back to
// float on every finite 16-bit pattern.
TEST(TwoshotEmulation, ReferenceConversions) {
  std::mt19937_64 rng(37);
  std::uniform_real_distribution<float> unit(-1, 1);
  for (int k = 0; k < 200000; ++k) {
    const float f = k <= 16000 ? static_cast<float>((k - 8000) / 7.0)
                               : std::ldexp(unit(rng), static_cast<int>(rng() % 40) - 24);
    ASSERT_EQ(f16_from(f), __half_as_ushort(__float2half_rn(f))) << f;
    ASSERT_EQ(bf16_from(f), __bfloat16_as_ushort(__float2bfloat16_rn(f))) << f;
  }
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // infinities and NaNs: never made here
    const uint16_t u = static_cast<uint16_t>(h);
    ASSERT_EQ(f16_value(u), __half2float(__ushort_as_half(u))) << h;
    ASSERT_EQ(bf16_value(u), __bfloat162float(__ushort_as_bfloat16(u))) << h;
  }
}

}  // namespace
}  // namespace symcomm::twoshot::test
