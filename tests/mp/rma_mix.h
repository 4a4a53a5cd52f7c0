// The random sequences of one-sided operations that RmaMix (host API on a stream,
// rma_mix_test.cc) and DeviceMix (device API in kernels, device_mix_test.cu) run: a plan
// drawn from a seed all ranks share, every rank's memory simulated on the host from it, and
// the check of this rank's memory against the simulation.
//
// A plan is rounds that every rank goes through together:
// - signal rounds: each rank sends a message to 1-3 members (itself too), in 1-3 pieces,
//   the last piece with a SET signal or every piece with an ADD (increasing the word or, by
//   wrapping around, decreasing it), and waits for its own messages with a comparison that
//   holds only once the whole message is there (all six are drawn);
// - barrier rounds: puts to members of a team (the world, this rank's row or column), then
//   a barrier over that team;
// - get rounds: gets from members' symmetric memory that a world barrier has published.
// Every message's source is what an earlier round received (or the initial data, in
// symmetric or plain memory), so data goes from rank to rank and from one way of moving it
// to another. Sizes go from 0 bytes to a slot (512 KiB + 40 on GPUs) at odd offsets.
// For the host API each data step has an engine; for the device API each message has an
// actor (a thread, a warp or a block of the round's kernel) that moves all its pieces and
// signals it by put_signal, by quiet then signal_op, or (one thread) by fence then
// signal_op or atomic_fetch_add.
#ifndef SYMCOMM_TESTS_MP_RMA_MIX_H_
#define SYMCOMM_TESTS_MP_RMA_MIX_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "mix.h"
#include "mp.h"

namespace rma_mix {

constexpr int kSlots = 3;  // messages a rank can receive in one round
enum Buf { kSym = 0, kLoc = 1 };
inline const char* const kBufNames[2] = {"symmetric", "plain"};
enum Scope { kThread = 0, kWarp = 1, kBlock = 2 };

// A byte offset into one rank's symmetric or plain buffer.
struct Span {
  int buf = kSym;
  size_t off = 0;
};

// Signal: signal_op (or atomic_fetch_add) alone; Fence: fence(). Both only in device plans.
enum class Kind { Put, PutSignal, Get, Wait, Barrier, Quiet, Signal, Fence };

// Who runs a step of a device plan: a thread (lane 0 of `warp`), a warp, or the block.
struct Actor {
  int block = 0, warp = 0, scope = kThread;
};

struct Step {
  Kind kind = Kind::Put;
  int round = 0;
  int rank = 0;  // the rank that issues it
  int pe = 0;    // the target of a put or signal, the source of a get (world ranks)
  Span src, dst; // in the issuer's memory (put src, get dst) or pe's (put dst, get src)
  size_t bytes = 0;
  symcommEngine_t engine = symcommEngineAuto;  // host plans
  Actor actor;                                 // device plans
  bool atomic = false;  // a Signal by atomic_fetch_add instead of signal_op
  int sig = -1;         // signal word (put-signal, signal, wait)
  uint64_t value = 0;
  symcommSignalOp_t op = symcommSignalSet;
  symcommCmp_t cmp = symcommCmpEq;
  int team = 0;  // barrier: 0 world, 1 row, 2 column
};

class Plan {
 public:
  // A device plan gives actors among `blocks` blocks of `warps` warps.
  Plan(uint64_t seed, const mp::MixTeams& teams, bool gpu, bool device, int blocks = 0,
       int warps = 0)
      : seed_(seed), teams_(teams), n_(teams.n), device_(device), blocks_(blocks), warps_(warps) {
    // Slots of an odd size (offsets land anywhere); on GPUs about one large message in four
    // spans a 2 MiB heap chunk boundary.
    slot_ = gpu ? (512 << 10) + 40 : (16 << 10) + 40;
    std::mt19937_64 rng(seed);
    rounds_ = 10 + static_cast<int>(rng() % 7);
    bytes_ = slot_ * kSlots * static_cast<size_t>(rounds_ + 1);
    plan(rng);
  }

  uint64_t seed() const { return seed_; }
  int rounds() const { return rounds_; }
  int words() const { return rounds_ * kSlots; }  // signal words per rank
  size_t bytes() const { return bytes_; }         // of each buffer
  const std::vector<Step>& steps() const { return steps_; }
  uint64_t start_of(int rank, int word) const {
    return sig_start_[static_cast<size_t>(rank * words() + word)];
  }

  std::string describe(const Step& s) const {
    static const char* const kinds[] = {"put",     "put-signal", "get",    "wait",
                                        "barrier", "quiet",      "signal", "fence"};
    static const char* const engines[] = {"auto", "ce", "sm"};
    static const char* const scopes[] = {"thread", "warp", "block"};
    static const char* const cmps[] = {"==", "!=", ">=", ">", "<=", "<"};
    std::string d = std::string(kinds[static_cast<int>(s.kind)]) + " of round " +
                    std::to_string(s.round) + " by rank " + std::to_string(s.rank);
    if (device_ && s.kind != Kind::Barrier)
      d += std::string(", ") + scopes[s.actor.scope] + " scope (block " +
           std::to_string(s.actor.block) + ", warp " + std::to_string(s.actor.warp) + ")";
    if (s.kind == Kind::Put || s.kind == Kind::PutSignal || s.kind == Kind::Get)
      d += (s.kind == Kind::Get ? " from rank " : " to rank ") + std::to_string(s.pe) + ", " +
           std::to_string(s.bytes) + " bytes from " + kBufNames[s.src.buf] + " +" +
           std::to_string(s.src.off) + " to " + kBufNames[s.dst.buf] + " +" +
           std::to_string(s.dst.off) + (device_ ? "" : std::string(" by ") + engines[s.engine]);
    if (s.kind == Kind::PutSignal || s.kind == Kind::Signal)
      d += std::string(", signal ") + (s.atomic ? "by atomic_fetch_add " : "") +
           (s.op == symcommSignalSet ? "set " : "add ") + std::to_string(s.value) + " on rank " +
           std::to_string(s.pe);
    if (s.kind == Kind::Wait)
      d += ", word " + std::to_string(s.sig) + " " + cmps[s.cmp] + " " + std::to_string(s.value);
    if (s.kind == Kind::Barrier) d += std::string(" over the ") + mp::MixTeams::kNames[s.team];
    return d + " (SYMCOMM_TEST_MIX_SEED=" + std::to_string(seed_) + ")";
  }

  // Run `run`'s initial memory of every rank: [2 q] and [2 q + 1] are rank q's symmetric
  // and plain buffers, each a pattern of its own.
  std::vector<std::vector<uint8_t>> initial(int run) const {
    std::vector<std::vector<uint8_t>> all(static_cast<size_t>(2 * n_));
    for (int q = 0; q < n_; ++q)
      for (int b = 0; b < 2; ++b) {
        std::vector<uint8_t>& v = all[static_cast<size_t>(2 * q + b)];
        v.resize(bytes_);
        const uint64_t what = 1000u * static_cast<uint64_t>(run) + static_cast<uint64_t>(b);
        for (size_t i = 0; i < bytes_; ++i) v[i] = mp::pattern(q, what, i);
      }
    return all;
  }

  // Writes rank me's part of `mem` (from initial()) and its signal words' start values.
  void store(const std::vector<std::vector<uint8_t>>& mem, int me, void* sym, void* loc,
             uint64_t* sigs) const {
    mp::store(sym, mem[static_cast<size_t>(2 * me)]);
    mp::store(loc, mem[static_cast<size_t>(2 * me + 1)]);
    for (int i = 0; i < words(); ++i) mp::write_u64(&sigs[i], start_of(me, i));
  }

  // Applies every step to `mem`, and checks rank me's buffers and signal words (once
  // everything before on `stream` is done) against it.
  void check(std::vector<std::vector<uint8_t>> mem, int me, const void* sym, const void* loc,
             const uint64_t* sigs, symcommStream_t stream, const std::string& when) const {
    std::vector<uint64_t> want_words(static_cast<size_t>(words()));
    for (int i = 0; i < words(); ++i) want_words[static_cast<size_t>(i)] = start_of(me, i);
    const size_t slots = bytes_ / slot_;
    std::vector<const Step*> writer(2 * slots, nullptr);  // the last step into a slot of me
    for (const Step& s : steps_) {
      if (s.kind == Kind::Put || s.kind == Kind::PutSignal || s.kind == Kind::Get) {
        const bool get = s.kind == Kind::Get;
        const int from = get ? s.pe : s.rank, to = get ? s.rank : s.pe;
        const uint8_t* src = mem[static_cast<size_t>(2 * from + s.src.buf)].data() + s.src.off;
        uint8_t* dst = mem[static_cast<size_t>(2 * to + s.dst.buf)].data() + s.dst.off;
        std::memmove(dst, src, s.bytes);
        if (to == me && s.bytes)
          writer[static_cast<size_t>(s.dst.buf) * slots + s.dst.off / slot_] = &s;
      }
      if ((s.kind == Kind::PutSignal || s.kind == Kind::Signal) && s.pe == me) {
        uint64_t& w = want_words[static_cast<size_t>(s.sig)];
        w = s.op == symcommSignalSet ? s.value : w + s.value;
      }
    }
    const void* mine[2] = {sym, loc};
    for (int b = 0; b < 2; ++b) {
      const std::vector<uint8_t> got = mp::fetch(stream, mine[b], bytes_);
      const std::vector<uint8_t>& want = mem[static_cast<size_t>(2 * me + b)];
      int reported = 0;
      for (size_t slot = 0; slot < slots; ++slot) {
        size_t bad = 0, first = 0;
        for (size_t i = slot * slot_; i < (slot + 1) * slot_; ++i)
          if (got[i] != want[i] && bad++ == 0) first = i;
        if (bad && reported++ < 5) {
          const Step* w = writer[static_cast<size_t>(b) * slots + slot];
          ADD_FAILURE() << when << ", rank " << me << "'s " << kBufNames[b] << " buffer: " << bad
                        << " wrong bytes in slot " << slot << " from +" << first
                        << "; last written by "
                        << (w ? describe(*w) : "no step (initial data, seed " +
                                                   std::to_string(seed_) + ")");
        }
      }
    }
    for (int i = 0; i < words(); ++i)
      EXPECT_EQ(mp::read_u64(&sigs[i]), want_words[static_cast<size_t>(i)])
          << when << ": signal word " << i << " (SYMCOMM_TEST_MIX_SEED=" << seed_ << ")";
  }

 private:
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
      const int back = static_cast<int>(rng() % static_cast<uint64_t>(std::min(newest + 1, 3)));
      area = newest - back + 1;
    }
    const size_t start = static_cast<size_t>(area) * kSlots * slot_;
    s.off = start + rng() % (kSlots * slot_ - bytes + 1);
    return s;
  }

  // k distinct shifts in [0, size) (0: a rank's own memory), 1 <= k <= most.
  static std::vector<int> draw_shifts(std::mt19937_64& rng, int size, int most) {
    std::vector<int> all(static_cast<size_t>(size));
    for (int i = 0; i < size; ++i) all[static_cast<size_t>(i)] = i;
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(1 + rng() % static_cast<uint64_t>(std::min(size, most)));
    return all;
  }

  // The engine (host) or actor (device) of a data step; waits take a thread or a block.
  void draw_mover(std::mt19937_64& rng, Step* s, bool wait = false) {
    if (!device_) {
      s->engine = static_cast<symcommEngine_t>(rng() % 3);
      return;
    }
    s->actor.block = static_cast<int>(rng() % static_cast<uint64_t>(blocks_));
    s->actor.warp = static_cast<int>(rng() % static_cast<uint64_t>(warps_));
    s->actor.scope = wait ? (rng() % 2 ? kThread : kBlock) : static_cast<int>(rng() % 3);
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
    sig_start_[static_cast<size_t>(to * words() + sig)] = start;
    // Device: one actor moves every piece (a signal orders only its own data before it),
    // and publishes each signal by put_signal, by quiet then signal_op, or (a thread) by
    // fence then signal_op or atomic_fetch_add.
    Step mover;
    draw_mover(rng, &mover);
    int publish = device_ ? static_cast<int>(rng() % 3) : 0;
    if (publish == 2 && mover.actor.scope != kThread) publish = 1;
    uint64_t word = start;
    for (int i = 0; i < pieces; ++i) {
      Step s = mover;
      s.round = round;
      s.rank = q;
      s.pe = to;
      s.src = {src.buf, src.off + cuts[static_cast<size_t>(i)]};
      s.dst = {kSym, slot_at(round, j) + dst_off + cuts[static_cast<size_t>(i)]};
      s.bytes = cuts[static_cast<size_t>(i) + 1] - cuts[static_cast<size_t>(i)];
      if (!signal || (mode == 0 && i < pieces - 1)) {
        steps_.push_back(s);
        continue;
      }
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
      if (publish == 0) {
        s.kind = Kind::PutSignal;
        steps_.push_back(s);
        continue;
      }
      Step data = s, order = s, flag = s;
      data.kind = Kind::Put;
      order.kind = publish == 1 ? Kind::Quiet : Kind::Fence;
      flag.kind = Kind::Signal;
      flag.actor.scope = kThread;  // one thread: lane 0 of the actor's warp
      flag.atomic = publish == 2 && s.op == symcommSignalAdd && rng() % 2;
      steps_.insert(steps_.end(), {data, order, flag});
    }
    if (!signal) return;
    // A comparison that holds for the final word and for no value the word takes before.
    Step w;
    w.kind = Kind::Wait;
    w.round = round;
    w.rank = to;
    w.sig = sig;
    draw_mover(rng, &w, true);
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
    sig_start_.assign(static_cast<size_t>(n_ * words()), 0);
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
            draw_mover(rng, &g);
            steps_.push_back(g);
          }
      }
      if (device_) continue;  // device plans quiet where they publish
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

  uint64_t seed_;
  mp::MixTeams teams_;
  int n_;
  bool device_;
  int blocks_, warps_;
  size_t slot_ = 0, bytes_ = 0;
  int rounds_ = 0;
  int published_ = -1;  // the round of the latest world barrier while planning
  std::vector<uint64_t> sig_start_;  // by rank, then word
  std::vector<Step> steps_;
};

}  // namespace rma_mix

#endif  // SYMCOMM_TESTS_MP_RMA_MIX_H_
