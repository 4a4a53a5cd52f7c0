// A random sequence of one-sided operations on a stream, from a seed all ranks share, in
// rounds that every rank goes through together:
// - signal rounds: each rank sends a message to 1-3 members (itself too), in 1-3 pieces by
//   random engines, the last piece with a SET signal or every piece with an ADD (increasing
//   or, by wrapping around, decreasing the word), and waits for its own messages with a
//   comparison that holds only once the whole message is there (all six are drawn);
// - barrier rounds: puts to members of a team (the world, this rank's row or column), then
//   a barrier over that team;
// - get rounds: gets from members' symmetric memory that a world barrier has published.
// Every message's source is what an earlier round received (or the initial data, in
// symmetric or plain memory), so data goes from engine to engine and rank to rank, and
// nothing is synchronised on the host until the end. Sizes go from 0 bytes past a 2 MiB heap
// chunk, at odd offsets. Every rank simulates every rank's memory on the host and checks its
// own at the end, its signal words too; in the cuda space the same sequence is then captured
// in a CUDA graph and replayed with fresh data. Quiet calls are sprinkled in.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mix.h"
#include "mp.h"

namespace {

using mp::MixTeams;

constexpr int kSlots = 3;  // messages a rank can receive in one round
enum Buf { kSym = 0, kLoc = 1 };
const char* const kBufNames[2] = {"symmetric", "plain"};
const char* const kEngineNames[3] = {"auto", "ce", "sm"};
const char* const kCmpNames[6] = {"==", "!=", ">=", ">", "<=", "<"};

// A byte range of one rank's memory: its symmetric or its plain buffer.
struct Span {
  int buf = kSym;
  size_t off = 0;
};

enum class Kind { Put, PutSignal, Get, Wait, Barrier, Quiet };

struct Step {
  Kind kind = Kind::Put;
  int round = 0;
  int rank = 0;  // the rank that issues it
  int pe = 0;    // the target of a put, the source of a get (world ranks)
  Span src, dst; // in the issuer's memory (put src, get dst) or pe's (put dst, get src)
  size_t bytes = 0;
  symcommEngine_t engine = symcommEngineAuto;
  int sig = -1;  // signal word (put-signal, wait)
  uint64_t value = 0;
  symcommSignalOp_t op = symcommSignalSet;
  symcommCmp_t cmp = symcommCmpEq;
  int team = 0;  // barrier: 0 world, 1 row, 2 column
};

class RmaMix : public ::testing::Test {
 protected:
  void SetUp() override {
    // Small chunks, so that transfers cross chunk boundaries.
    mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    n_ = mp::nranks();
    me_ = mp::rank();
    seed_ = mp::mix_seed();
    teams_.make(comm_);
    gpu_ = mp::space() == symcommSpaceCuda;
    // Slots of an odd size (offsets land anywhere); on GPUs about one large message in four
    // spans a chunk boundary of the symmetric buffer.
    slot_ = gpu_ ? (512 << 10) + 40 : (16 << 10) + 40;
    std::mt19937_64 rng(seed_);
    rounds_ = 10 + static_cast<int>(rng() % 7);
    bytes_ = slot_ * kSlots * static_cast<size_t>(rounds_ + 1);
    SC_OK(symcommMalloc(comm_, bytes_, &mem_[kSym]));
    mem_[kLoc] = mp::local_alloc(bytes_);
    ASSERT_NE(mem_[kLoc], nullptr);
    SC_OK(symcommMalloc(comm_, sizeof(uint64_t) * kSlots * static_cast<size_t>(rounds_),
                        reinterpret_cast<void**>(&sigs_)));
    plan(rng);
  }
  void TearDown() override {
    if (!comm_) return;
    mp::sync(stream_);
    mp::free_stream(stream_);
    if (symcommHostBarrier(comm_) == symcommSuccess) {
      for (void* p : {mem_[kSym], static_cast<void*>(sigs_)})
        if (p) {
          EXPECT_EQ(symcommFree(comm_, p), symcommSuccess) << symcommGetLastError();
        }
    }
    if (mem_[kLoc]) mp::local_free(mem_[kLoc]);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }

  // Area 0 holds the initial data; round r writes area r + 1: slot j of it receives the
  // round's j-th message.
  size_t slot_at(int round, int j) const {
    return (static_cast<size_t>(round + 1) * kSlots + static_cast<size_t>(j)) * slot_;
  }

  // 0 bytes, a few, up to 4 KiB, up to 64 KiB, or up to `most`.
  static size_t draw_bytes(std::mt19937_64& rng, size_t most, bool zero) {
    const size_t kind = rng() % 8;
    const size_t cap = kind == 0 ? (zero ? 0 : 16) : kind == 1 ? 16 : kind < 4 ? 4096
                       : kind < 6 ? 65536 : most;
    return cap == 0 ? 0 : 1 + rng() % std::min(cap, most);
  }

  // A source of `bytes` that rank q may read now: in area 0 (symmetric or plain) or in an
  // area of an earlier round, whose writes are all complete for q. `published`: only
  // symmetric areas a world barrier has published (a peer reads it with a get).
  Span draw_source(std::mt19937_64& rng, int round, size_t bytes, bool published) {
    Span s;
    s.buf = published || rng() % 2 ? kSym : kLoc;
    const int newest = published ? published_ : round - 1;  // the newest area's round
    int area = 0;                                             // 0: the initial data
    if (newest >= 0 && rng() % 4 != 0) {
      // Mostly recent rounds: chains of messages.
      const int back = static_cast<int>(rng() % std::min(newest + 1, 3));
      area = newest - back + 1;
    }
    const size_t start = static_cast<size_t>(area) * kSlots * slot_;
    s.off = start + rng() % (kSlots * slot_ - bytes + 1);
    return s;
  }

  symcommEngine_t draw_engine(std::mt19937_64& rng) {
    return static_cast<symcommEngine_t>(rng() % 3);
  }

  // k distinct shifts in [0, size) (0: a rank's own memory).
  static std::vector<int> draw_shifts(std::mt19937_64& rng, int size, int most) {
    std::vector<int> all(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) all[static_cast<size_t>(i)] = i;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(static_cast<size_t>(1 + static_cast<int>(rng() % static_cast<uint64_t>(std::min(size, most)))));
    return all;
  }

  // One message from rank q into slot j of rank `to`'s area of this round, in 1-3 pieces;
  // in a signal round every piece signals (ADD) or the last one does (SET), and the
  // receiver's wait is appended to `waits`.
  void plan_message(std::mt19937_64& rng, int round, int q, int to, int j, bool signal,
                    std::vector<Step>* waits) {
    const size_t dst_off = rng() % 64;
    const size_t bytes = draw_bytes(rng, slot_ - dst_off, signal);
    const Span src = draw_source(rng, round, bytes, false);
    std::vector<size_t> cuts = {0, bytes};
    const int pieces = 1 + static_cast<int>(rng() % 3);
    for (int i = 1; i < pieces; ++i) cuts.push_back(bytes ? rng() % (bytes + 1) : 0);
    std::sort(cuts.begin(), cuts.end());
    const int sig = round * kSlots + j;
    const int mode = static_cast<int>(rng() % 3);  // SET last; ADD up; ADD down (wrapping)
    // The word's start: 0, or high (SETs to lower values; every decreasing ADD).
    const uint64_t start = mode != 2 && rng() % 2 ? 0 : (1ull << 63) + rng() % (1ull << 40);
    sig_start_[static_cast<size_t>(to * rounds_ * kSlots + sig)] = start;
    uint64_t word = start;
    for (int i = 0; i < pieces; ++i) {
      Step s;
      s.round = round;
      s.rank = q;
      s.pe = to;
      s.src = {src.buf, src.off + cuts[static_cast<size_t>(i)]};
      s.dst = {kSym, slot_at(round, j) + dst_off + cuts[static_cast<size_t>(i)]};
      s.bytes = cuts[static_cast<size_t>(i) + 1] - cuts[static_cast<size_t>(i)];
      s.engine = draw_engine(rng);
      const bool last = i == pieces - 1;
      if (signal && (mode != 0 || last)) {
        s.kind = Kind::PutSignal;
        s.sig = sig;
        if (mode == 0) {
          do s.value = rng() % 2 ? 1 + rng() % 1000000 : rng(); while (s.value == start);
          s.op = symcommSignalSet;
          word = s.value;
        } else {
          const uint64_t by = 1 + rng() % 1000;
          s.value = mode == 1 ? by : ~by + 1;  // -by modulo 2^64
          s.op = symcommSignalAdd;
          word += s.value;
        }
      }
      steps_.push_back(s);
    }
    if (!signal) return;
    // A comparison that holds for the final word and for no value the word takes before.
    Step w;
    w.kind = Kind::Wait;
    w.round = round;
    w.rank = to;
    w.sig = sig;
    const bool up = mode == 1 || (mode == 0 && word > start);
    const symcommCmp_t ups[] = {symcommCmpEq, symcommCmpGe, symcommCmpGt, symcommCmpNe};
    const symcommCmp_t downs[] = {symcommCmpEq, symcommCmpLe, symcommCmpLt, symcommCmpNe};
    // != start only where one signal changes the word.
    w.cmp = (up ? ups : downs)[rng() % (mode == 0 ? 4 : 3)];
    w.value = w.cmp == symcommCmpNe ? start : w.cmp == symcommCmpGt ? word - 1
              : w.cmp == symcommCmpLt ? word + 1 : word;
    waits->push_back(w);
  }

  void plan(std::mt19937_64& rng) {
    sig_start_.assign(static_cast<size_t>(n_ * rounds_ * kSlots), 0);
    for (int r = 0; r < rounds_; ++r) {
      const int kind = static_cast<int>(rng() % 3);  // signals, a team barrier, gets
      if (kind == 0) {
        const std::vector<int> shifts = draw_shifts(rng, n_, kSlots);
        std::vector<Step> waits;
        for (int q = 0; q < n_; ++q)
          for (size_t j = 0; j < shifts.size(); ++j)
            plan_message(rng, r, q, (q + shifts[j]) % n_, static_cast<int>(j), true, &waits);
        std::shuffle(waits.begin(), waits.end(), rng);  // each rank's in a random order
        steps_.insert(steps_.end(), waits.begin(), waits.end());
      } else if (kind == 1) {
        const int team = static_cast<int>(rng() % 3);
        const int size = teams_.size(team);
        const std::vector<int> shifts = draw_shifts(rng, size, kSlots);
        for (int q = 0; q < n_; ++q) {
          const std::vector<int> m = teams_.members(team, q);
          const int tr = teams_.rank_in(team, q);
          for (size_t j = 0; j < shifts.size(); ++j)
            plan_message(rng, r, q, m[static_cast<size_t>((tr + shifts[j]) % size)],
                         static_cast<int>(j), false, nullptr);
        }
        for (int q = 0; q < n_; ++q) {
          Step b;
          b.kind = Kind::Barrier;
          b.round = r;
          b.rank = q;
          b.team = team;
          steps_.push_back(b);
        }
        if (team == 0) published_ = r;
      } else {
        const std::vector<int> shifts = draw_shifts(rng, n_, kSlots);
        for (int q = 0; q < n_; ++q)
          for (size_t j = 0; j < shifts.size(); ++j) {
            Step g;
            g.kind = Kind::Get;
            g.round = r;
            g.rank = q;
            g.pe = (q + shifts[j]) % n_;
            const size_t dst_off = rng() % 64;
            g.bytes = draw_bytes(rng, slot_ - dst_off, true);
            g.src = draw_source(rng, r, g.bytes, true);
            g.dst = {rng() % 2 ? kSym : kLoc, slot_at(r, static_cast<int>(j)) + dst_off};
            g.engine = draw_engine(rng);
            steps_.push_back(g);
          }
      }
      for (int q = 0; q < n_; ++q)
        if (rng() % 4 == 0) {
          Step s;
          s.kind = Kind::Quiet;
          s.round = r;
          s.rank = q;
          steps_.push_back(s);
        }
    }
  }

  std::string describe(const Step& s) const {
    const char* kinds[] = {"put", "put-signal", "get", "wait", "barrier", "quiet"};
    std::string d = std::string(kinds[static_cast<int>(s.kind)]) + " of round " +
                    std::to_string(s.round) + " by rank " + std::to_string(s.rank);
    if (s.kind == Kind::Put || s.kind == Kind::PutSignal || s.kind == Kind::Get)
      d += (s.kind == Kind::Get ? " from rank " : " to rank ") + std::to_string(s.pe) + ", " +
           std::to_string(s.bytes) + " bytes from " + kBufNames[s.src.buf] + " +" +
           std::to_string(s.src.off) + " to " + kBufNames[s.dst.buf] + " +" +
           std::to_string(s.dst.off) + " by " + kEngineNames[s.engine];
    if (s.kind == Kind::PutSignal)
      d += std::string(", signal ") + (s.op == symcommSignalSet ? "set " : "add ") +
           std::to_string(s.value);
    if (s.kind == Kind::Wait)
      d += ", word " + std::to_string(s.sig) + " " + kCmpNames[s.cmp] + " " +
           std::to_string(s.value);
    if (s.kind == Kind::Barrier) d += std::string(" over the ") + MixTeams::kNames[s.team];
    return d + " (SYMCOMM_TEST_MIX_SEED=" + std::to_string(seed_) + ")";
  }

  // Run `run`'s initial memory: every rank's buffers a pattern of their own, the signal words
  // at their start values. This rank's is written; all of them are returned.
  std::vector<std::vector<uint8_t>> initial(int run) {
    std::vector<std::vector<uint8_t>> all(static_cast<size_t>(2 * n_));
    for (int q = 0; q < n_; ++q)
      for (int b = 0; b < 2; ++b) {
        std::vector<uint8_t>& v = all[static_cast<size_t>(2 * q + b)];
        v.resize(bytes_);
        const uint64_t what = 1000u * static_cast<uint64_t>(run) + static_cast<uint64_t>(b);
        for (size_t i = 0; i < bytes_; ++i) v[i] = mp::pattern(q, what, i);
      }
    for (int b = 0; b < 2; ++b) mp::store(mem_[b], all[static_cast<size_t>(2 * me_ + b)]);
    for (int i = 0; i < rounds_ * kSlots; ++i) mp::write_u64(&sigs_[i], start_of(me_, i));
    return all;
  }

  // Issues this rank's steps; false (with the failure recorded) where a call failed.
  bool issue() {
    for (const Step& s : steps_) {
      if (s.rank != me_) continue;
      char* sym = static_cast<char*>(mem_[kSym]);
      char* own_src = static_cast<char*>(mem_[s.src.buf]) + s.src.off;
      symcommResult_t rc = symcommSuccess;
      switch (s.kind) {
        case Kind::Put:
          rc = symcommPutOnStream(comm_, sym + s.dst.off, own_src, s.bytes, s.pe, s.engine,
                                  stream_);
          break;
        case Kind::PutSignal:
          rc = symcommPutSignalOnStream(comm_, sym + s.dst.off, own_src, s.bytes,
                                        &sigs_[s.sig], s.value, s.op, s.pe, s.engine, stream_);
          break;
        case Kind::Get:
          rc = symcommGetOnStream(comm_, static_cast<char*>(mem_[s.dst.buf]) + s.dst.off,
                                  sym + s.src.off, s.bytes, s.pe, s.engine, stream_);
          break;
        case Kind::Wait:
          rc = symcommSignalWaitOnStream(comm_, &sigs_[s.sig], s.cmp, s.value, stream_);
          break;
        case Kind::Barrier:
          rc = symcommBarrierOnStream(comm_, teams_.id[s.team], stream_);
          break;
        case Kind::Quiet:
          rc = symcommQuietOnStream(comm_, stream_);
          break;
      }
      if (rc != symcommSuccess) {
        ADD_FAILURE() << describe(s) << ": " << symcommGetLastError();
        return false;
      }
    }
    return true;
  }

  // Applies every rank's steps to `mem` (from initial()), and checks this rank's buffers and
  // signal words against it once the stream is done.
  void check(std::vector<std::vector<uint8_t>> mem, const std::string& when) {
    std::vector<uint64_t> words(static_cast<size_t>(rounds_ * kSlots));
    for (int i = 0; i < rounds_ * kSlots; ++i) words[static_cast<size_t>(i)] = start_of(me_, i);
    // Which step last wrote each slot of this rank (for messages).
    std::vector<const Step*> writer(2 * static_cast<size_t>(rounds_ + 1) * kSlots, nullptr);
    for (const Step& s : steps_) {
      if (s.kind == Kind::Put || s.kind == Kind::PutSignal || s.kind == Kind::Get) {
        const bool get = s.kind == Kind::Get;
        const int from = get ? s.pe : s.rank, to = get ? s.rank : s.pe;
        const uint8_t* src = mem[static_cast<size_t>(2 * from + s.src.buf)].data() + s.src.off;
        uint8_t* dst = mem[static_cast<size_t>(2 * to + s.dst.buf)].data() + s.dst.off;
        std::memmove(dst, src, s.bytes);
        if (to == me_ && s.bytes) writer[s.dst.buf * (rounds_ + 1) * kSlots + s.dst.off / slot_] = &s;
      }
      if (s.kind == Kind::PutSignal && s.pe == me_) {
        uint64_t& w = words[static_cast<size_t>(s.sig)];
        w = s.op == symcommSignalSet ? s.value : w + s.value;
      }
    }
    mp::sync(stream_);
    // A wait that timed out on the device is reported at the next call.
    EXPECT_EQ(symcommQuietOnStream(comm_, stream_), symcommSuccess)
        << when << ": " << symcommGetLastError() << " (SYMCOMM_TEST_MIX_SEED=" << seed_ << ")";
    for (int b = 0; b < 2; ++b) {
      const std::vector<uint8_t> got = mp::fetch(stream_, mem_[b], bytes_);
      const std::vector<uint8_t>& want = mem[static_cast<size_t>(2 * me_ + b)];
      int reported = 0;
      for (size_t slot = 0; slot < bytes_ / slot_; ++slot) {
        size_t bad = 0, first = 0;
        for (size_t i = slot * slot_; i < (slot + 1) * slot_; ++i)
          if (got[i] != want[i] && bad++ == 0) first = i;
        if (bad && reported++ < 5) {
          const Step* w = writer[static_cast<size_t>(b) * (rounds_ + 1) * kSlots + slot];
          ADD_FAILURE() << when << ", rank " << me_ << "'s " << kBufNames[b] << " buffer: "
                        << bad << " wrong bytes in slot " << slot << " from +" << first
                        << "; last written by " << (w ? describe(*w) : "no step (initial data)");
        }
      }
    }
    for (size_t i = 0; i < words.size(); ++i)
      EXPECT_EQ(mp::read_u64(&sigs_[i]), words[i]) << when << ": signal word " << i
                                                  << " (SYMCOMM_TEST_MIX_SEED=" << seed_ << ")";
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  int n_ = 0, me_ = 0, rounds_ = 0;
  bool gpu_ = false;
  uint64_t seed_ = 0;
  MixTeams teams_;
  size_t slot_ = 0, bytes_ = 0;
  void* mem_[2] = {nullptr, nullptr};
  uint64_t* sigs_ = nullptr;
  std::vector<uint64_t> sig_start_;  // by rank, then word
  uint64_t start_of(int rank, int word) const {
    return sig_start_[static_cast<size_t>(rank * rounds_ * kSlots + word)];
  }
  int published_ = -1;  // the round of the latest world barrier while planning
  std::vector<Step> steps_;
};

TEST_F(RmaMix, RandomSequence) {
  std::vector<std::vector<uint8_t>> mem = initial(0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_TRUE(issue());
  check(std::move(mem), "eager");
}

TEST_F(RmaMix, RandomSequenceReplayedFromAGraph) {
  if (!gpu_) GTEST_SKIP() << "CUDA graphs need the cuda memory space";
  std::vector<std::vector<uint8_t>> mem = initial(0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_TRUE(issue());
  check(std::move(mem), "eager");
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  const bool issued = issue();
  void* graph = mp::end_capture(stream_);
  ASSERT_TRUE(issued);
  ASSERT_NE(graph, nullptr);
  for (int run = 1; run <= 3; ++run) {
    mem = initial(run);
    SC_OK(symcommHostBarrier(comm_));
    ASSERT_EQ(mp::launch_graph(graph, stream_), 0);
    check(std::move(mem), "replay " + std::to_string(run));
    SC_OK(symcommHostBarrier(comm_));  // every rank checked before the next replay writes
    if (!mp::all_ok(!HasFailure())) break;
  }
  mp::destroy_graph(graph);
}

}  // namespace
