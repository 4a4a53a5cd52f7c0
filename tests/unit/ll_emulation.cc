// The ll collectives' protocol run on the host: the library's own ll headers (plans,
// rounds, coll/device/ll_packet.cuh) with tests/unit/emulation/harness.h, one host thread
// per CUDA thread (a few per block, so that blocks stride over their packets and
// __syncthreads matters) and packets stored and loaded as two separate 8-byte atomics, in
// either order, sometimes with a pause between them: the reader must only trust a packet
// whose two flags are both new, as on the GPU. Each rank runs its kernels one after the
// other on its own "stream", with no synchronisation between ranks, as back-to-back calls on
// GPUs do.
//
// It checks every collective (all-gather in place too, all-to-all, all-to-all-v, broadcast
// from any root, reduce-scatter, all-reduce in place or not, several types and ops), sizes
// from nothing to several rounds, buffers at any byte offset, teams that share pairs with
// the world, the per-block counters across calls, flags that wrap around 2^32 (with the
// refresh of whole slots), and that a wait that cannot end records its error and ends. The
// memory-model questions (volatile accesses over NVLink, the atomicity of 8-byte halves)
// stay with the GPU tests: C++ atomics cannot answer them.
#include "emulation/harness.h"  // first: what the protocol headers expect of CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <type_traits>
#include <vector>

#include "coll/coll.h"
#include "coll/device/counters.h"
#include "coll/ll/plan.h"
#include "coll/ll/rounds.cuh"
#include "copy/reduce.h"

namespace {

using namespace symcomm;
using namespace symcomm::ll;

// `n` ranks' areas (packets, then counters), and kernels run as threads.
class Emulator {
 public:
  struct Launch {
    Plan plan;
    void (*kernel)(const Plan&);
    // A segmented all-reduce instead (plan: its base, for the grid).
    std::shared_ptr<const SegmentedPlan> segmented = nullptr;
    void (*segmented_kernel)(const SegmentedPlan&) = nullptr;
  };

  // `threads` per block; `refresh`: Plan::refresh; `seq0`: where every counter starts.
  Emulator(int n, int threads, uint64_t refresh, uint64_t seq0 = 0)
      : threads_(threads), refresh_(refresh), devices_(n, packets_bytes(n) + seq_bytes(n)) {
    set_seq(seq0);
  }
  int size() const { return devices_.size(); }
  // The plan of world rank a.team.world_of(a.me) for `a`, as LlAlgorithm::run makes it.
  Plan plan(const CollArgs& a) {
    const int rank = a.team.world_of(a.me);
    return plan_of(a, devices_.world(rank), devices_.area(rank), refresh_);
  }
  // The segmented all-reduce `a` (a.segments), as LlAlgorithm::run makes it.
  SegmentedPlan segmented_plan(const CollArgs& a) {
    const int rank = a.team.world_of(a.me);
    return segmented_plan_of(a, devices_.world(rank), devices_.area(rank), refresh_);
  }
  // One kernel: grid_blocks(plan) blocks of threads_ threads.
  void run_kernel(const Launch& l) {
    emulation::run_grid(grid_blocks(l.plan), threads_, [&] {
      if (l.segmented)
        l.segmented_kernel(*l.segmented);
      else
        l.kernel(l.plan);
    });
  }
  // Each rank's kernels in order on its own stream, the ranks at once.
  void run(const std::vector<std::vector<Launch>>& streams) {
    emulation::run_streams(streams, [this](const Launch& l) { run_kernel(l); });
  }
  emulation::Devices& devices() { return devices_; }
  // Every counter of every rank (between calls): a jump ahead, alike on both sides of a pair.
  void set_seq(uint64_t value) {
    for (int r = 0; r < size(); ++r) std::fill_n(seqs(r), size() * kMaxBlocks, value);
  }
  const uint4* area(int rank) { return reinterpret_cast<const uint4*>(devices_.area(rank)); }
  uint64_t seq(int rank, int block, int peer) {
    return *protocol::counter_word<kMaxBlocks>(seqs(rank), 0, block, size(), peer);
  }

 private:
  uint64_t* seqs(int rank) {
    return reinterpret_cast<uint64_t*>(devices_.area(rank) + packets_bytes(size()));
  }

  int threads_;
  uint64_t refresh_;
  emulation::Devices devices_;
};

// One collective over a team: every member's buffers, arguments and expected results.
struct Call {
  CollOp op;
  Team team;
  size_t count = 0;  // elements (all-to-all-v: see counts)
  int root = 0;
  symcommDataType_t type = symcommUint8;
  symcommRedOp_t redop = symcommSum;
  bool in_place = false;
  std::vector<std::vector<size_t>> counts;  // all-to-all-v: [i][j] from member i to j
  // Per member: storage, the buffers inside it (at odd offsets), their bytes, the input.
  std::vector<std::vector<char>> send_store, recv_store;
  std::vector<char*> send, recv;
  std::vector<size_t> send_bytes, recv_bytes;
  std::vector<std::vector<char>> input;
  std::vector<std::vector<size_t>> sc, sd, rc, rd;
  size_t elem() const { return type_size(type); }
  const char* describe() const {
    static thread_local char text[160];
    std::snprintf(text, sizeof text,
                  "%s on %d ranks (start %d stride %d), count %zu, type %d, op %d%s, root %d",
                  coll_op_name(op), team.size, team.start, team.stride, count,
                  static_cast<int>(type), static_cast<int>(redop), in_place ? ", in place" : "",
                  root);
    return text;
  }
};

const char kPoison = static_cast<char>(0xAB);  // where nothing may be written

// Where byte `i` of `v` is, as an iterator.
std::vector<char>::iterator at(std::vector<char>& v, size_t i) {
  return v.begin() + static_cast<std::ptrdiff_t>(i);
}

// Any bytes for 1-byte types, small integers for the others, sevenths for floating types:
// their sums round, so that only the team-rank order gives the reference's bits.
void fill_input(std::mt19937_64& rng, symcommDataType_t type, char* p, size_t bytes) {
  with_type(type, [&](auto zero) {
    using T = decltype(zero);
    using A = typename Accum<T>::type;
    if (sizeof(T) == 1) {
      for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(rng());
      return;
    }
    for (size_t i = 0; i + sizeof(T) <= bytes; i += sizeof(T)) {
      const int x = static_cast<int>(rng() % 2001) - 1000;
      const T v = narrow<T>(std::is_integral_v<A> ? static_cast<A>(x) : static_cast<A>(x / 7.0));
      std::memcpy(p + i, &v, sizeof(T));
    }
  });
}

// out[i] = op over the members' in[m][i], in team-rank order, with copy/reduce.h's arithmetic.
void reference_reduce(symcommDataType_t type, symcommRedOp_t op, const std::vector<const char*>& in,
                      size_t count, char* out) {
  with_type(type, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < count; ++i) {
      T x;
      std::memcpy(&x, in[0] + i * sizeof(T), sizeof(T));
      typename Accum<T>::type acc = widen(x);
      for (size_t m = 1; m < in.size(); ++m) {
        std::memcpy(&x, in[m] + i * sizeof(T), sizeof(T));
        acc = combine(op, acc, widen(x));
      }
      x = narrow<T>(acc);
      std::memcpy(out + i * sizeof(T), &x, sizeof(T));
    }
  });
}

// Calls run together (each rank's in order on its stream), then checked.
class Batch {
 public:
  Batch(Emulator& emu, std::mt19937_64& rng)
      : emu_(emu), rng_(rng), streams_(static_cast<size_t>(emu.size())) {}

  // Makes the members' buffers and plans of `c` and appends its kernels to their streams.
  void add(std::unique_ptr<Call> c) {
    Call& k = *c;
    const int n = k.team.size;
    const size_t nn = static_cast<size_t>(n), e = k.elem(), block = k.count * e;
    for (auto* v : {&k.send_store, &k.recv_store, &k.input}) v->resize(nn);
    for (auto* v : {&k.sc, &k.sd, &k.rc, &k.rd}) v->resize(nn);
    k.send.resize(nn);
    k.recv.resize(nn);
    k.send_bytes.resize(nn);
    k.recv_bytes.resize(nn);
    for (size_t m = 0; m < nn; ++m) {
      size_t sb = block, rb = block;
      if (k.op == CollOp::AllGather) rb = block * nn;
      if (k.op == CollOp::AllToAll) sb = rb = block * nn;
      if (k.op == CollOp::ReduceScatter) sb = block * nn;
      if (k.op == CollOp::AllToAllv) {
        sb = rb = 3;  // gaps between the blocks, on both sides
        for (size_t j = 0; j < nn; ++j) {
          k.sc[m].push_back(k.counts[m][j]);
          k.sd[m].push_back(sb / e);
          sb += (k.counts[m][j] + 2) * e;
        }
        for (size_t j = nn; j-- > 0;) {  // received in reverse order
          k.rc[m].insert(k.rc[m].begin(), k.counts[j][m]);
          k.rd[m].insert(k.rd[m].begin(), rb / e);
          rb += (k.counts[j][m] + 1) * e;
        }
        sb = sb / e * e + e;
        rb = rb / e * e + e;
      }
      // Byte buffers at any offset; typed ones at multiples of the element size.
      const size_t so = (rng_() % 8) / e * e, ro = (rng_() % 8) / e * e;
      k.send_store[m].assign(sb + 16, 0);
      k.recv_store[m].assign(rb + 16, kPoison);
      k.send[m] = k.send_store[m].data() + so;
      k.recv[m] = k.recv_store[m].data() + ro;
      k.send_bytes[m] = sb;
      k.recv_bytes[m] = rb;
      fill_input(rng_, k.type, k.send[m], sb);
      if (k.in_place && k.op == CollOp::AllReduce) k.recv[m] = k.send[m];
      if (k.in_place && k.op == CollOp::AllGather) {  // send is this member's block of recv
        std::memcpy(k.recv[m] + m * block, k.send[m], block);
        k.send[m] = k.recv[m] + m * block;
      }
      k.input[m].assign(k.send[m], k.send[m] + sb);
    }
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      CollArgs a{};
      a.op = k.op;
      a.team = k.team;
      a.me = me;
      a.send = k.send[m];
      a.recv = k.recv[m];
      a.count = k.count;
      a.type = k.type;
      a.elem = e;
      a.redop = k.redop;
      a.root = k.root;
      a.send_counts = k.sc[m].data();
      a.send_displs = k.sd[m].data();
      a.recv_counts = k.rc[m].data();
      a.recv_displs = k.rd[m].data();
      Emulator::Launch l{emu_.plan(a), &ll_block<uint8_t>};
      if (l.plan.reduce)
        with_type(k.type, [&](auto zero) { l.kernel = &ll_block<decltype(zero)>; });
      if (grid_blocks(l.plan) > 0) streams_[static_cast<size_t>(k.team.world_of(me))].push_back(l);
    }
    calls_.push_back(std::move(c));
  }

  // A segmented all-reduce: each member's `sizes.size()` buffers of sizes[k] elements, at
  // offsets of their own, some in place; appended to the members' streams.
  void add_segmented(Team team, symcommDataType_t type, symcommRedOp_t op,
                     const std::vector<size_t>& sizes) {
    auto c = std::make_unique<SegmentedCall>();
    SegmentedCall& k = *c;
    k.team = team;
    k.type = type;
    k.op = op;
    k.sizes = sizes;
    const size_t nn = static_cast<size_t>(team.size), e = type_size(type);
    k.members.resize(nn);
    for (size_t m = 0; m < nn; ++m) {
      SegmentedCall::Member& mm = k.members[m];
      for (size_t count : sizes) {
        const size_t bytes = count * e, so = (rng_() % 8) / e * e, ro = (rng_() % 8) / e * e;
        mm.send_store.emplace_back(bytes + 16, 0);
        mm.recv_store.emplace_back(bytes + 16, kPoison);
        char* send = mm.send_store.back().data() + so;
        char* recv = rng_() % 3 == 0 ? send : mm.recv_store.back().data() + ro;
        fill_input(rng_, type, send, bytes);
        mm.input.emplace_back(send, send + bytes);
        mm.parts.push_back({send, recv, bytes});
      }
    }
    for (int me = 0; me < team.size; ++me) {
      SegmentedCall::Member& mm = k.members[static_cast<size_t>(me)];
      CollArgs a{};
      a.op = CollOp::AllReduce;
      a.team = team;
      a.me = me;
      a.type = type;
      a.elem = e;
      a.redop = op;
      a.segments = &mm.parts;
      a.send = mm.parts.front().send;
      a.recv = mm.parts.front().recv;
      a.count = segments_layout(mm.parts, nullptr) / e;
      auto plan = std::make_shared<SegmentedPlan>(emu_.segmented_plan(a));
      Emulator::Launch l{*plan, nullptr, plan, nullptr};
      with_type(type, [&](auto zero) { l.segmented_kernel = &ll_block<decltype(zero)>; });
      if (grid_blocks(l.plan) > 0) streams_[static_cast<size_t>(team.world_of(me))].push_back(l);
    }
    segmented_.push_back(std::move(c));
  }

  void run_and_check() {
    emu_.run(streams_);
    emu_.devices().expect_no_failed_wait();
    for (const auto& c : calls_) check(*c);
    for (const auto& c : segmented_) check(*c);
  }

 private:
  void check(const Call& k) {
    SCOPED_TRACE(k.describe());
    const size_t nn = static_cast<size_t>(k.team.size), e = k.elem(), block = k.count * e;
    for (size_t m = 0; m < nn; ++m) {
      // What recv (or send, in place) must hold, poison where nothing is written.
      std::vector<char> want(k.recv_bytes[m], kPoison);
      switch (k.op) {
        case CollOp::AllGather:
          for (size_t i = 0; i < nn; ++i)
            std::copy_n(k.input[i].data(), block, at(want, i * block));
          break;
        case CollOp::AllToAll:
          for (size_t i = 0; i < nn; ++i)
            std::copy_n(k.input[i].data() + m * block, block, at(want, i * block));
          break;
        case CollOp::Broadcast:
          std::copy_n(k.input[static_cast<size_t>(k.root)].data(), block, want.begin());
          break;
        case CollOp::AllToAllv:
          for (size_t i = 0; i < nn; ++i)
            std::copy_n(k.input[i].data() + k.sd[i][m] * e, k.rc[m][i] * e,
                        at(want, k.rd[m][i] * e));
          break;
        case CollOp::ReduceScatter:
        case CollOp::AllReduce: {
          std::vector<const char*> in;
          for (size_t i = 0; i < nn; ++i)
            in.push_back(k.input[i].data() + (k.op == CollOp::ReduceScatter ? m * block : 0));
          reference_reduce(k.type, k.redop, in, k.count, want.data());
          break;
        }
        case CollOp::Reduce:  // (ll does none of them)
        case CollOp::Gather:
        case CollOp::Scatter:
          break;
      }
      const char* got = k.recv[m];
      if (k.op == CollOp::AllGather && k.in_place) got = k.send[m] - m * block;
      const size_t bytes = want.size();
      size_t bad = 0, first = 0;
      for (size_t i = 0; i < bytes; ++i)
        if (got[i] != want[i] && bad++ == 0) first = i;
      EXPECT_EQ(bad, 0u) << "member " << m << ": " << bad << " bytes of " << bytes
                         << " differ, the first at " << first;
      // Nothing written past the end.
      const char* end = got + bytes;
      const char* store_end = k.recv_store[m].data() + k.recv_store[m].size();
      if (!(k.in_place && k.op == CollOp::AllReduce)) {
        EXPECT_TRUE(std::all_of(end, store_end, [](char x) { return x == kPoison; }))
            << "member " << m << " written past its buffer";
      }
    }
  }

  struct SegmentedCall {
    Team team;
    symcommDataType_t type;
    symcommRedOp_t op;
    std::vector<size_t> sizes;
    struct Member {
      std::vector<std::vector<char>> send_store, recv_store, input;
      std::vector<CollSegment> parts;
    };
    std::vector<Member> members;
  };

  void check(const SegmentedCall& k) {
    SCOPED_TRACE(testing::Message() << "segmented all-reduce of " << k.sizes.size()
                                    << " buffers on " << k.team.size << " ranks, type "
                                    << k.type << ", op " << k.op);
    const size_t e = type_size(k.type);
    for (size_t m = 0; m < k.members.size(); ++m) {
      const SegmentedCall::Member& mm = k.members[m];
      for (size_t s = 0; s < k.sizes.size(); ++s) {
        const size_t bytes = k.sizes[s] * e;
        std::vector<const char*> in;
        for (const SegmentedCall::Member& other : k.members) in.push_back(other.input[s].data());
        std::vector<char> want(bytes);
        reference_reduce(k.type, k.op, in, k.sizes[s], want.data());
        const char* got = mm.parts[s].recv;
        EXPECT_TRUE(std::equal(want.begin(), want.end(), got))
            << "member " << m << ", buffer " << s << " of " << bytes << " bytes";
        if (got != mm.parts[s].send) {  // nothing else of its storage written
          const std::vector<char>& store = mm.recv_store[s];
          const char* lo = store.data();
          const char* hi = store.data() + store.size();
          EXPECT_TRUE(std::all_of(lo, got, [](char x) { return x == kPoison; }) &&
                      std::all_of(got + bytes, hi, [](char x) { return x == kPoison; }))
              << "member " << m << ", buffer " << s << ": written outside it";
        }
      }
    }
  }

  Emulator& emu_;
  std::mt19937_64& rng_;
  std::vector<std::vector<Emulator::Launch>> streams_;
  std::vector<std::unique_ptr<Call>> calls_;
  std::vector<std::unique_ptr<SegmentedCall>> segmented_;
};

// Message sizes around the packet (8 bytes), the slice (4 KiB), the round (64 KiB) and
// several rounds.
const size_t kSizes[] = {0,     1,     7,     8,     9,      511,   4095,  4096,
                         4097,  20000, 65535, 65536, 65537, 140001, 300000};

std::unique_ptr<Call> random_call(std::mt19937_64& rng, Team team, CollOp op) {
  auto c = std::make_unique<Call>();
  c->op = op;
  c->team = team;
  c->root = static_cast<int>(rng() % static_cast<uint64_t>(team.size));
  const bool reduction = op == CollOp::AllReduce || op == CollOp::ReduceScatter;
  if (reduction) {
    const symcommDataType_t types[] = {symcommUint8, symcommInt8, symcommInt32, symcommFloat16,
                                       symcommBfloat16, symcommFloat64, symcommInt64};
    c->type = types[rng() % 7];
    c->redop = static_cast<symcommRedOp_t>(rng() % 4);  // sum, min, max, prod
  } else {
    c->type = rng() % 4 == 0 ? symcommFloat16 : symcommInt8;
  }
  const size_t bytes = kSizes[rng() % (sizeof kSizes / sizeof kSizes[0])];
  c->count = (bytes + type_size(c->type) - 1) / type_size(c->type);
  if (op == CollOp::AllToAll || op == CollOp::ReduceScatter)  // n blocks of about bytes / n
    c->count = c->count / static_cast<size_t>(team.size) + (bytes % 2);
  c->in_place = (op == CollOp::AllReduce || op == CollOp::AllGather) && rng() % 2;
  if (op == CollOp::AllToAllv) {
    const size_t nn = static_cast<size_t>(team.size);
    c->counts.assign(nn, std::vector<size_t>(nn));
    for (auto& row : c->counts)
      for (size_t& x : row) x = rng() % 3 == 0 ? 0 : rng() % (c->count + 1);
  }
  return c;
}

const CollOp kOps[] = {CollOp::AllGather, CollOp::AllToAll, CollOp::AllToAllv, CollOp::Broadcast,
                       CollOp::ReduceScatter, CollOp::AllReduce};

// Every operation on 2 to 5 and 8 ranks, four calls per batch back to back on each rank's
// stream, the counters carried from batch to batch.
TEST(LlEmulation, EveryCollectiveBackToBack) {
  std::mt19937_64 rng(17);
  for (int n : {2, 3, 4, 5, 8}) {
    Emulator emu(n, n == 4 ? 4 : 3, 8);
    for (int batch = 0; batch < (n == 8 ? 6 : 12); ++batch) {
      Batch b(emu, rng);
      for (int k = 0; k < 4; ++k) b.add(random_call(rng, Team{0, 1, n}, kOps[(batch * 4 + k) % 6]));
      b.run_and_check();
      if (testing::Test::HasFailure()) return;
    }
  }
}

// Segmented all-reduces (a group's all-reduces as one, capi/coll_batch.cc) between other
// calls on each rank's stream: 1 to 64 buffers of sizes around the packet, the slice and the
// round (so that segments share packets' slices and rounds, and a message takes several
// rounds), at any element offset, some in place, every reduction type and op.
TEST(LlEmulation, SegmentedAllReducesBetweenOtherCalls) {
  std::mt19937_64 rng(37);
  const size_t counts[] = {0, 1, 3, 7, 9, 100, 511, 4097, 20001, 70001};
  const symcommDataType_t types[] = {symcommUint8, symcommInt32, symcommFloat16,
                                     symcommBfloat16, symcommFloat32, symcommFloat64};
  for (int n : {2, 3, 5}) {
    Emulator emu(n, n == 3 ? 4 : 3, 8);
    for (int batch = 0; batch < 5; ++batch) {
      Batch b(emu, rng);
      b.add(random_call(rng, Team{0, 1, n}, kOps[rng() % 6]));
      std::vector<size_t> sizes(batch == 0 ? 64 : 1 + rng() % 12);
      for (size_t& c : sizes) c = counts[rng() % (batch == 0 ? 6 : 10)];
      b.add_segmented(Team{0, 1, n}, types[rng() % 6], static_cast<symcommRedOp_t>(rng() % 4),
                      sizes);
      b.add(random_call(rng, Team{0, 1, n}, CollOp::AllReduce));
      b.run_and_check();
      if (testing::Test::HasFailure()) return;
    }
  }
}

// Where a segmented all-reduce's bytes lie: segments at 8-byte boundaries (empty ones take
// no room and own no packet), and each packet's offset mapped to its buffer, clipped at the
// buffer's end (the rest of the packet is padding).
TEST(LlEmulation, SegmentLayoutAndLookup) {
  char a[13], b[8], c[3];
  const std::vector<CollSegment> parts = {
      {a, a, 13}, {nullptr, nullptr, 0}, {b, b, 8}, {c, c, 3}, {nullptr, nullptr, 0}};
  std::vector<size_t> at;
  EXPECT_EQ(segments_layout(parts, &at), 32u);  // 0..13 | 16 (empty) | 16..24 | 24..27 | 32
  EXPECT_EQ(at, (std::vector<size_t>{0, 16, 16, 24, 32}));
  CollArgs args{};
  args.op = CollOp::AllReduce;
  args.team = Team{0, 1, 2};
  args.elem = 1;
  args.count = 32;
  args.segments = &parts;
  const SegmentedPlan p = segmented_plan_of(args, DeviceComm{}, nullptr, kRefresh);
  EXPECT_EQ(p.nseg, 5);
  EXPECT_EQ(p.red_len, 32u);
  struct Case {
    uint64_t off, nb;
    const char* where;
    uint64_t clipped;
  };
  for (const Case& k : {Case{0, 8, a, 8}, Case{8, 8, a + 8, 5}, Case{16, 8, b, 8},
                        Case{24, 8, c, 3}, Case{24, 2, c, 2}}) {
    uint64_t nb = k.nb;
    const char* got = input_at(p, k.off, &nb);
    EXPECT_EQ(nb, k.clipped) << "offset " << k.off;
    if (k.clipped) EXPECT_EQ(got, k.where) << "offset " << k.off;
    uint64_t out = k.nb;
    output_at(p, k.off, &out);
    EXPECT_EQ(out, k.clipped) << "offset " << k.off;
  }
}

// Teams that share pairs with the world and with each other (counters are per pair of world
// ranks), a team of one, segmented all-reduces among the calls, and one thread per block.
TEST(LlEmulation, TeamsShareThePairCounters) {
  std::mt19937_64 rng(23);
  Emulator emu(4, 1, 8);
  const Team teams[] = {Team{0, 1, 4}, Team{1, 2, 2}, Team{0, 1, 3}, Team{2, 1, 1}, Team{1, 1, 3}};
  for (int batch = 0; batch < 6; ++batch) {
    Batch b(emu, rng);
    for (int k = 0; k < 5; ++k) b.add(random_call(rng, teams[(batch + k) % 5], kOps[rng() % 6]));
    const Team& t = teams[batch % 5];  // and a segmented all-reduce on a team of 2 or more
    if (t.size >= 2) b.add_segmented(t, symcommFloat32, symcommSum, {5, 700, 3, 9000});
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
}

// Rounds through the wrap of the 32-bit flags. Cleared memory holds flag 0, the flag of
// round 2^32 - 1: with a small refresh period, the counters start 10 rounds before the wrap
// and block 0 carries one packet per call until its round 2^32 - 1, which carries 512: its
// packets 1..511 would pass for new ones had no refresh written them. With kRefresh, a
// first call of several rounds on every block starts a refresh period, then the counters
// jump ahead (alike on every rank) to 10 rounds before the wrap, as if the rounds between
// had carried nothing larger, and the same calls follow.
TEST(LlEmulation, FlagsWrapAround) {
  const uint64_t wrap = uint64_t{1} << 32;
  for (uint64_t refresh : {uint64_t{4}, kRefresh}) {
    SCOPED_TRACE(testing::Message() << "refresh every " << refresh << " rounds");
    std::mt19937_64 rng(29);
    const bool jump = refresh == kRefresh;
    Emulator emu(3, 2, refresh, jump ? wrap - kRefresh : wrap - 10);
    auto call = [&](CollOp op, symcommDataType_t type, size_t count) {
      Batch b(emu, rng);
      auto c = random_call(rng, Team{0, 1, 3}, op);
      c->type = type;
      c->count = count;
      c->in_place = false;
      b.add(std::move(c));
      b.run_and_check();
    };
    if (jump) {
      call(CollOp::AllGather, symcommInt8, 140001);  // 3 rounds: every block refreshes
      emu.set_seq(wrap - 10);
    }
    for (int k = 0; k < 9; ++k)  // rounds 2^32 - 10 .. - 2 of block 0: one packet each
      call(k % 2 ? CollOp::AllReduce : CollOp::AllGather, symcommInt32, 1);
    EXPECT_EQ(emu.seq(0, 0, 1), wrap - 1);
    call(CollOp::AllGather, symcommInt8, 60000);  // round 2^32 - 1: flag 0, 15 blocks
    call(CollOp::AllReduce, symcommFloat16, 70000);  // several rounds, flags 1, 2, ...
    call(CollOp::AllGather, symcommInt8, 300000);
    call(CollOp::AllReduce, symcommInt64, 3);
    if (testing::Test::HasFailure()) return;
    EXPECT_GT(emu.seq(0, 0, 1), wrap) << "the flags did not wrap";
  }
}

// The production refresh period from zeroed counters, and only after several calls the
// largest sizes, on four ranks with one thread per block.
TEST(LlEmulation, ProductionRefreshFromZero) {
  std::mt19937_64 rng(31);
  Emulator emu(4, 1, kRefresh);
  for (int batch = 0; batch < 4; ++batch) {
    Batch b(emu, rng);
    for (int k = 0; k < 3; ++k) b.add(random_call(rng, Team{0, 1, 4}, kOps[(batch + k) % 6]));
    b.run_and_check();
    if (testing::Test::HasFailure()) return;
  }
}

// A rank whose peer never calls: its polls end after the timeout, the error names the flag
// it waited for and the packet, and the counters are left alone. Then the abort flag.
TEST(LlEmulation, AFailedWaitIsRecordedAndEndsTheKernel) {
  for (bool abort : {false, true}) {
    SCOPED_TRACE(abort ? "aborted" : "timed out");
    Emulator emu(2, 2, kRefresh);
    if (abort) {
      emu.devices().set_timeout_ns(0);  // no bound: only the abort ends it
      emu.devices().set_abort();
    } else {
      emu.devices().set_timeout_ns(50 * 1000 * 1000);
    }
    std::vector<char> send(10000, 1), recv(20000, 0);
    CollArgs a{};
    a.op = CollOp::AllGather;
    a.team = Team{0, 1, 2};
    a.me = 0;
    a.send = send.data();
    a.recv = recv.data();
    a.count = send.size();
    a.elem = 1;
    emu.run_kernel({emu.plan(a), &ll_block<uint8_t>});
    // It returned: the error's code says what ended the waits (no wall-clock bound, which a
    // loaded machine can exceed; a kernel that never ended would meet ctest's timeout).
    const DeviceError& e = emu.devices().error(0);
    EXPECT_EQ(e.code, abort ? symcommPeerLost : symcommTimeout);
    EXPECT_EQ(e.expected, 1u);  // round 0's flag
    EXPECT_EQ(e.observed, 0u);
    EXPECT_EQ(e.cmp, symcommCmpEq);
    const uint4* slots = emu.area(0) + 2 * kMaxBlocks * kThreads;  // from world rank 1
    const auto* at = reinterpret_cast<const uint4*>(e.address);
    EXPECT_TRUE(at >= slots && at < slots + 2 * kMaxBlocks * kThreads)
        << "not a packet from rank 1";
    for (int b = 0; b < kMaxBlocks; ++b) EXPECT_EQ(emu.seq(0, b, 1), 0u) << "block " << b;
  }
}

// The shapes both sides derive: blocks and rounds cover every byte once.
TEST(LlEmulation, PairShapes) {
  for (uint64_t out : {0ull, 1ull, 4096ull, 4097ull, 65536ull, 65537ull, 1000000ull})
    for (uint64_t in : {0ull, 8ull, 65536ull, 300000ull}) {
      const Shape s = pair_shape(out, in), t = pair_shape(in, out);
      EXPECT_EQ(s.rounds, t.rounds);
      EXPECT_EQ(s.blocks, t.blocks);
      const uint64_t len = std::max(out, in);
      uint64_t covered = 0;
      for (uint64_t r = 0; r < s.rounds; ++r)
        for (int b = 0; b < s.blocks; ++b) covered += slice_bytes(len, r, b);
      EXPECT_EQ(covered, len) << out << " / " << in;
      EXPECT_LE(s.blocks, kMaxBlocks);
      if (len) {
        EXPECT_GT(slice_bytes(len, s.rounds - 1, 0), 0u);  // no empty last round
      }
    }
}

}  // namespace
