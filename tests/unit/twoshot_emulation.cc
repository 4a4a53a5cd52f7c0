// The twoshot collectives' protocol run on the host: the library's own twoshot headers
// (plan, shots) with tests/unit/emulation/harness.h, one host thread per CUDA thread (a few
// per block, so that blocks stride over their slices and __syncthreads matters, and several
// blocks per rank). Each rank has its own memory (the flags, counters and stage areas of
// TwoshotState, its buffers); peers load and store it directly, as GPUs do over NVLink.
// Each rank runs its kernels one after the other on its own "stream", with no
// synchronisation between ranks, as back-to-back calls on GPUs do.
//
// It checks all-reduce (in place too) and reduce-scatter, sum, min and max of 8-, 32- and
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
#include "emulation/harness.h"  // first: what the protocol headers expect of CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <memory>
#include <random>
#include <vector>

#include "coll/coll.h"
#include "coll/device/counters.h"
#include "coll/twoshot/plan.h"
#include "coll/twoshot/shots.cuh"
#include "copy/reduce.h"

namespace {

using namespace symcomm;
using namespace symcomm::twoshot;
using emulation::Memory;

const char kPoison = static_cast<char>(0xAB);  // where nothing may be written

// `nranks` ranks' areas (as TwoshotState lays them out: ready, done and seq flags, stage_in,
// stage_out), and kernels run as threads.
class Emulator {
 public:
  struct Launch {
    Plan plan;
    int blocks = 0;  // 0: run() launches nothing
    void (*kernel)(Plan) = nullptr;
  };

  // `threads` per block (at least the team size, as kThreads is); `stage_bytes` and
  // `max_blocks`: SYMCOMM_COLL_TWOSHOT_BYTES and SYMCOMM_COLL_TWOSHOT_BLOCKS.
  Emulator(int nranks, int threads, uint64_t stage_bytes, int max_blocks)
      : threads_(threads), stage_(stage_bytes / 256 * 256), max_blocks_(max_blocks),
        devices_(nranks, flags_bytes(nranks) + 2 * stage_, flags_bytes(nranks)) {}
  int size() const { return devices_.size(); }

  // The launch of team member a.me, as TwoshotAlgorithm::run makes it (make_plan):
  // `send_addr` and `recv_addr` stand for CollContext::addressable, sends[j] and recvs[j]
  // for on(a, ., j).
  Launch launch(const CollArgs& a, bool send_addr, bool recv_addr,
                const std::vector<const char*>& sends, const std::vector<char*>& recvs) {
    Launch l;
    if (a.count * a.elem == 0) return l;
    const int rank = a.team.world_of(a.me);
    // As run(): in place only where every member's buffer is reachable and aligned alike
    // (every member's pointer the same modulo 16, as CollContext::aligned_alike says of
    // symmetric and registered buffers).
    auto alike = [&](const auto& ptrs) {
      for (const auto* q : ptrs)
        if (reinterpret_cast<uintptr_t>(q) % 16 != reinterpret_cast<uintptr_t>(ptrs[0]) % 16)
          return false;
      return true;
    };
    auto on = [&](const void* q, int j) -> char* {
      if (q == a.send) return const_cast<char*>(sends[static_cast<size_t>(j)]);
      if (q == a.recv) return recvs[static_cast<size_t>(j)];
      return devices_.on(rank, q, a.team.world_of(j));
    };
    const uint64_t blocks = make_plan(l.plan, a, devices_.world(rank), devices_.area(rank),
                                      stage_, send_addr && alike(sends),
                                      recv_addr && alike(recvs),
                                      static_cast<uint64_t>(max_blocks_), on);
    l.blocks = static_cast<int>(blocks);
    with_type(a.type, [&](auto zero) { l.kernel = &twoshot_kernel<decltype(zero)>; });
    return l;
  }

  // One kernel: l.blocks blocks of threads_ threads.
  void run_kernel(const Launch& l) {
    emulation::run_grid(l.blocks, threads_, [&] { l.kernel(l.plan); });
  }
  // Each rank's kernels in order on its own stream, the ranks at once.
  void run(const std::vector<std::vector<Launch>>& streams) {
    emulation::run_streams(streams, [this](const Launch& l) { run_kernel(l); });
  }

  emulation::Devices& devices() { return devices_; }
  // Block b's word of `kind` (kReady, kDone: written by `peer`; kSeq: rounds done with it).
  uint64_t* word(int rank, Flag kind, int block, int peer) {
    auto* words = reinterpret_cast<uint64_t*>(devices_.area(rank));
    return protocol::counter_word<kMaxBlocks>(words, kind, block, size(), peer);
  }

 private:
  int threads_;
  uint64_t stage_;
  int max_blocks_;
  emulation::Devices devices_;
};

// --- The reference: 16-bit floats through conversions written here --------------------------

uint16_t f16_from(float f) {  // round to nearest even; |f| < 65520
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);
  const int ulp = std::max(e - 11, -24);  // 11 significant bits, subnormals in units of 2^-24
  const int q = static_cast<int>(std::nearbyint(std::ldexp(a, -ulp)));
  // Normal: (exponent field ulp + 25, then q - 1024); a carry of q into 2048 and the
  // subnormals (ulp -24, q < 1024) come out of the same sum.
  return static_cast<uint16_t>(sign | (((ulp + 25) << 10) + q - 1024));
}
float f16_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const float a = exp == 0 ? std::ldexp(static_cast<float>(man), -24)
                           : std::ldexp(static_cast<float>(man | 0x400), exp - 25);
  return h & 0x8000 ? -a : a;
}
uint16_t bf16_from(float f) {  // round to nearest even; finite f
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
float bf16_value(uint16_t h) {
  const uint32_t x = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

template <typename A>
A apply(symcommRedOp_t op, A a, A b) {
  if (op == symcommSum) return static_cast<A>(a + b);
  return op == symcommMin ? std::min(a, b) : std::max(a, b);
}

// out[i] = op over in[0][i], in[1][i], ... in that order: Stored elements are decoded to A
// (16-bit floats to float) and the result encoded once.
template <typename Stored, typename A, typename Dec, typename Enc>
void fold(symcommRedOp_t op, const std::vector<const char*>& in, size_t count, char* out, Dec dec,
          Enc enc) {
  for (size_t i = 0; i < count; ++i) {
    A acc{};
    for (size_t m = 0; m < in.size(); ++m) {
      Stored x;
      std::memcpy(&x, in[m] + i * sizeof x, sizeof x);
      acc = m == 0 ? dec(x) : apply<A>(op, acc, dec(x));
    }
    const Stored y = enc(acc);
    std::memcpy(out + i * sizeof y, &y, sizeof y);
  }
}

template <typename T>
void fold_plain(symcommRedOp_t op, const std::vector<const char*>& in, size_t count, char* out) {
  auto same = [](T x) { return x; };
  fold<T, T>(op, in, count, out, same, same);
}

void reference(symcommDataType_t type, symcommRedOp_t op, const std::vector<const char*>& in,
               size_t count, char* out) {
  switch (type) {
    case symcommUint8: return fold_plain<uint8_t>(op, in, count, out);
    case symcommInt32: return fold_plain<int32_t>(op, in, count, out);
    case symcommInt64: return fold_plain<int64_t>(op, in, count, out);
    case symcommFloat32: return fold_plain<float>(op, in, count, out);
    case symcommFloat64: return fold_plain<double>(op, in, count, out);
    case symcommFloat16: return fold<uint16_t, float>(op, in, count, out, f16_value, f16_from);
    case symcommBfloat16: return fold<uint16_t, float>(op, in, count, out, bf16_value, bf16_from);
    default: FAIL() << "no reference for type " << type;
  }
}

// Small integers, or sevenths for floating types: their sums round, so that only the
// team-rank order gives the reference's bits.
void fill_input(std::mt19937_64& rng, symcommDataType_t type, char* p, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const int x = static_cast<int>(rng() % 2001) - 1000;
    auto put = [&](auto v) { std::memcpy(p + i * sizeof v, &v, sizeof v); };
    switch (type) {
      case symcommUint8: put(static_cast<uint8_t>(x)); break;
      case symcommInt32: put(static_cast<int32_t>(x)); break;
      case symcommInt64: put(x * (int64_t{1} << 40)); break;  // upper halves too
      case symcommFloat32: put(static_cast<float>(x / 7.0)); break;
      case symcommFloat64: put(x / 7.0); break;
      case symcommFloat16: put(f16_from(static_cast<float>(x / 7.0))); break;
      case symcommBfloat16: put(bf16_from(static_cast<float>(x / 7.0))); break;
      default: FAIL() << "no input for type " << type;
    }
  }
}

// --- Calls ---------------------------------------------------------------------------------

// One collective over a team: how its buffers are placed, and every member's buffers.
struct Call {
  CollOp op = CollOp::AllReduce;
  Team team;
  symcommDataType_t type = symcommInt32;
  symcommRedOp_t redop = symcommSum;
  size_t count = 0;
  bool in_place = false;
  // Alike on every member, as the API asks of symmetric and registered buffers: whether
  // peers may address the buffer, and its offset from a 16-byte boundary.
  bool send_addr = true, recv_addr = true;
  size_t send_off = 0, recv_off = 0;
  // Registered buffers may start at different addresses modulo 16 on different ranks: the
  // offsets then apply to the odd members only.
  bool odd_members_only = false;

  std::vector<std::unique_ptr<Memory>> send_mem, recv_mem;  // 16 guard bytes on each side
  std::vector<const char*> send;
  std::vector<char*> recv;
  std::vector<std::vector<char>> input;

  size_t elem() const { return type_size(type); }
  size_t send_bytes() const {
    return count * elem() * (op == CollOp::ReduceScatter ? static_cast<size_t>(team.size) : 1);
  }
  std::string describe() const {
    char text[200];
    std::snprintf(text, sizeof text,
                  "%s on %d ranks (start %d stride %d), count %zu, type %d, op %d%s, send %s+%zu, "
                  "recv %s+%zu",
                  coll_op_name(op), team.size, team.start, team.stride, count,
                  static_cast<int>(type), static_cast<int>(redop), in_place ? ", in place" : "",
                  send_addr ? "addressable" : "plain", send_off,
                  recv_addr ? "addressable" : "plain", recv_off);
    return text;
  }
};

// Calls run together (each rank's in order on its stream), then checked.
class Batch {
 public:
  Batch(Emulator& emu, std::mt19937_64& rng)
      : emu_(emu), rng_(rng), streams_(static_cast<size_t>(emu.size())) {}

  // Makes the members' buffers (outputs poisoned) and appends their kernels to their streams.
  void add(std::unique_ptr<Call> c) {
    Call& k = *c;
    const size_t nn = static_cast<size_t>(k.team.size), sb = k.send_bytes(),
                 rb = k.count * k.elem();
    if (k.in_place) {
      k.recv_addr = k.send_addr;
      k.recv_off = k.send_off;
    }
    for (size_t m = 0; m < nn; ++m) {
      const bool shifted = !k.odd_members_only || m % 2 == 1;
      const size_t send_off = shifted ? k.send_off : 0, recv_off = shifted ? k.recv_off : 0;
      k.send_mem.push_back(std::make_unique<Memory>(16 + send_off + sb + 16, kPoison));
      char* send = k.send_mem[m]->data() + 16 + send_off;
      fill_input(rng_, k.type, send, sb / k.elem());
      k.input.emplace_back(send, send + sb);
      k.send.push_back(send);
      if (k.in_place) {
        k.recv.push_back(send);
      } else {
        k.recv_mem.push_back(std::make_unique<Memory>(16 + recv_off + rb + 16, kPoison));
        k.recv.push_back(k.recv_mem[m]->data() + 16 + recv_off);
      }
    }
    for (int me = 0; me < k.team.size; ++me) {
      CollArgs a{};
      a.op = k.op;
      a.team = k.team;
      a.me = me;
      a.send = k.send[static_cast<size_t>(me)];
      a.recv = k.recv[static_cast<size_t>(me)];
      a.count = k.count;
      a.type = k.type;
      a.elem = k.elem();
      a.redop = k.redop;
      const Emulator::Launch l = emu_.launch(a, k.send_addr, k.recv_addr, k.send, k.recv);
      if (l.blocks > 0) streams_[static_cast<size_t>(k.team.world_of(me))].push_back(l);
    }
    calls_.push_back(std::move(c));
  }

  void run_and_check() {
    emu_.run(streams_);
    emu_.devices().expect_no_failed_wait();
    for (const auto& c : calls_) check(*c);
    // Both sides of a pair count the same rounds (the next call's flags depend on it).
    for (int a = 0; a < emu_.size(); ++a)
      for (int b = 0; b < emu_.size(); ++b)
        for (int blk = 0; a != b && blk < kMaxBlocks; ++blk)
          ASSERT_EQ(*emu_.word(a, kSeq, blk, b), *emu_.word(b, kSeq, blk, a))
              << "ranks " << a << " and " << b << ", block " << blk;
  }

 private:
  void check(const Call& k) {
    SCOPED_TRACE(k.describe());
    const size_t nn = static_cast<size_t>(k.team.size), rb = k.count * k.elem();
    const bool scatter = k.op == CollOp::ReduceScatter;
    for (size_t m = 0; m < nn; ++m) {
      std::vector<const char*> in;
      for (size_t i = 0; i < nn; ++i) in.push_back(k.input[i].data() + (scatter ? m * rb : 0));
      std::vector<char> want(rb);
      reference(k.type, k.redop, in, k.count, want.data());
      const char* got = k.recv[m];
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < rb; ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << "member " << m << ": " << bad << " bytes of " << rb
                         << " differ, the first at " << first;
      // Nothing written around recv, nor into send (unless in place).
      const Memory& out = k.in_place ? *k.send_mem[m] : *k.recv_mem[m];
      const char* lo = reinterpret_cast<const char*>(out.words.data());
      const char* hi = lo + out.words.size() * 16;
      const size_t out_bytes = k.in_place ? k.send_bytes() : rb;
      EXPECT_TRUE(std::all_of(lo, got, [](char x) { return x == kPoison; }) &&
                  std::all_of(got + out_bytes, hi, [](char x) { return x == kPoison; }))
          << "member " << m << " written outside its buffer";
      if (!k.in_place) {
        EXPECT_TRUE(std::equal(k.input[m].begin(), k.input[m].end(), k.send[m]))
            << "member " << m << ": send changed";
      }
    }
  }

  Emulator& emu_;
  std::mt19937_64& rng_;
  std::vector<std::vector<Emulator::Launch>> streams_;
  std::vector<std::unique_ptr<Call>> calls_;
};

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
  if (op == CollOp::AllReduce && bytes > 1) bytes *= static_cast<size_t>(team.size);
  c->count = std::max<size_t>(bytes / e, bytes ? 1 : 0);
  if (c->count > 1 && rng() % 2) c->count |= 1;
  c->in_place = op == CollOp::AllReduce && rng() % 3 == 0;
  const size_t misaligned = e < 16 ? e * (1 + rng() % (16 / e - 1)) : 0;
  switch (rng() % 5) {
    case 0: c->send_addr = c->recv_addr = false; break;              // staged both ways
    case 1: c->send_off = c->recv_off = misaligned; break;           // addressable, staged
    case 2: c->recv_addr = false; break;                             // direct in, staged out
    case 3: c->send_addr = false; break;                             // staged in, direct out
    default: break;                                                  // direct
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
      const CollOp op = (batch + k) % 2 ? CollOp::ReduceScatter : CollOp::AllReduce;
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
