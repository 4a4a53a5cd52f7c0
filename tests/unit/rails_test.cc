// The multi-rail logic of the net transport (src/transport/net/rails/) on its own: lanes
// between unequal rail counts, the striping scheduler, epochs that keep a signal behind its
// data, the replay table, and all of them together over fake rails that deliver in a seeded
// random order and fail mid-stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <queue>
#include <random>
#include <set>
#include <vector>

#include "base/error.h"
#include "transport/net/rails/epochs.h"
#include "transport/net/rails/lanes.h"
#include "transport/net/rails/replay.h"
#include "transport/net/rails/stripes.h"

namespace symcomm::rails {
namespace {

TEST(RailLanes, EqualCountsSpreadTheSendersOverTheTargetsRails) {
  // Four senders to one target of 4 rails: each starts on a different rail of it.
  std::set<int> first_remote;
  for (int rank = 0; rank < 4; ++rank) {
    const std::vector<Lane> l = lanes(rank, 4, 4);
    ASSERT_EQ(l.size(), 4u);
    first_remote.insert(l[0].remote_rail);
    std::set<int> local, remote;
    for (const Lane& x : l) local.insert(x.local_rail), remote.insert(x.remote_rail);
    EXPECT_EQ(local.size(), 4u);  // every rail of both sides, once
    EXPECT_EQ(remote.size(), 4u);
  }
  EXPECT_EQ(first_remote.size(), 4u);
}

TEST(RailLanes, UnequalCountsUseEveryRailOfBothSides) {
  for (int rank : {0, 1, 5})
    for (auto [mine, theirs] : {std::pair{2, 3}, std::pair{3, 2}, std::pair{1, 4}}) {
      const std::vector<Lane> l = lanes(rank, mine, theirs);
      ASSERT_EQ(static_cast<int>(l.size()), std::max(mine, theirs));
      std::set<int> local, remote;
      for (const Lane& x : l) {
        EXPECT_GE(x.local_rail, 0);
        EXPECT_LT(x.local_rail, mine);
        EXPECT_GE(x.remote_rail, 0);
        EXPECT_LT(x.remote_rail, theirs);
        local.insert(x.local_rail), remote.insert(x.remote_rail);
      }
      EXPECT_EQ(static_cast<int>(local.size()), mine) << rank << ": " << mine << " vs " << theirs;
      EXPECT_EQ(static_cast<int>(remote.size()), theirs) << rank << ": " << mine << " vs " << theirs;
    }
}

TEST(RailLanes, BadCountsAreRefused) {
  EXPECT_THROW(lanes(0, 0, 2), Error);
  EXPECT_THROW(lanes(0, 2, 0), Error);
  EXPECT_THROW(lanes(-1, 2, 2), Error);
}

// Every byte of [0, bytes) in exactly one piece, pieces on lanes that are up, every piece but
// the last of a striped plan aligned.
void expect_covers(const std::vector<Piece>& pieces, size_t bytes,
                   const std::vector<LaneState>& lanes, size_t align) {
  size_t at = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    const Piece& p = pieces[k];
    EXPECT_EQ(p.offset, at);
    EXPECT_GT(p.bytes, 0u);
    ASSERT_GE(p.lane, 0);
    ASSERT_LT(p.lane, static_cast<int>(lanes.size()));
    EXPECT_TRUE(lanes[static_cast<size_t>(p.lane)].up) << "lane " << p.lane;
    if (k + 1 < pieces.size()) {
      EXPECT_EQ(p.bytes % align, 0u);
    }
    at += p.bytes;
  }
  EXPECT_EQ(at, bytes);
}

TEST(RailStripes, EveryByteOnceOverRandomLanes) {
  std::mt19937_64 rng(7);
  const StripePolicy policy{4096, 128, 4};
  Striper striper(policy);
  for (int round = 0; round < 2000; ++round) {
    std::vector<LaneState> lanes(1 + rng() % 5);
    for (LaneState& l : lanes) {
      l.up = rng() % 4 != 0;
      l.rate = rng() % 3 == 0 ? 0 : 1e6 * static_cast<double>(1 + rng() % 10);
    }
    lanes[rng() % lanes.size()].up = true;
    const size_t bytes = rng() % 2 ? rng() % 8192 : rng() % (size_t{3} << 20);
    const std::vector<Piece> pieces = striper.plan(bytes, lanes);
    SCOPED_TRACE("round " + std::to_string(round) + ", " + std::to_string(bytes) + " bytes");
    expect_covers(pieces, bytes, lanes, policy.align);
    if (bytes > 0 && bytes < policy.threshold) {
      EXPECT_EQ(pieces.size(), 1u);
    }
  }
}

TEST(RailStripes, SmallOperationsTakeTheLanesInTurnSkippingDownOnes) {
  Striper striper(StripePolicy{});
  std::vector<LaneState> lanes(3);
  lanes[1].up = false;
  std::vector<int> used;
  for (int i = 0; i < 6; ++i) used.push_back(striper.plan(100, lanes)[0].lane);
  EXPECT_EQ(used, (std::vector<int>{0, 2, 0, 2, 0, 2}));
  EXPECT_TRUE(striper.plan(0, lanes).empty());
}

TEST(RailStripes, SharesFollowTheRatesAndASlowLaneLeaves) {
  Striper striper(StripePolicy{4096, 128, 4});
  const size_t bytes = size_t{64} << 20;
  // Rates 3:1 (within the factor): shares 3:1, to an alignment.
  std::vector<LaneState> lanes{{true, 3e9}, {true, 1e9}};
  std::vector<Piece> p = striper.plan(bytes, lanes);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(static_cast<double>(p[0].bytes), 0.75 * static_cast<double>(bytes), 256);
  // A lane 5x slower than the fastest leaves the stripe set.
  lanes[1].rate = 0.6e9;
  EXPECT_EQ(striper.stripe_set(lanes), (std::vector<int>{0}));
  p = striper.plan(bytes, lanes);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].lane, 0);
  // Not measured yet: every lane that is up, alike.
  std::vector<LaneState> fresh(4);
  p = striper.plan(bytes, fresh);
  ASSERT_EQ(p.size(), 4u);
  for (const Piece& x : p) EXPECT_EQ(x.bytes, bytes / 4);
}

TEST(RailStripes, RatesAreMeasuredFromTransfersOfAtLeast64KiB) {
  LaneState lane;
  observe_rate(lane, kRateSampleMin - 1, 1e-3);  // latency, not rate: ignored
  EXPECT_EQ(lane.rate, 0);
  observe_rate(lane, kRateSampleMin, 0);  // no time: ignored
  EXPECT_EQ(lane.rate, 0);
  observe_rate(lane, 1 << 20, 1e-3);  // the first sets it
  EXPECT_DOUBLE_EQ(lane.rate, (1 << 20) / 1e-3);
  observe_rate(lane, 1 << 20, 2e-3);  // then a quarter of each
  EXPECT_DOUBLE_EQ(lane.rate, 0.75 * (1 << 20) / 1e-3 + 0.25 * (1 << 20) / 2e-3);
}

// Lanes of true rates `truth` (bytes per second), each piece taking its bytes over its lane's
// rate: after `rounds` striped operations of `bytes`, measured as the transport does, how
// long the last took against the ideal (every lane busy until the same moment).
double striped_time_over_ideal(const std::vector<double>& truth, int rounds, size_t bytes,
                               std::vector<LaneState>* lanes_out) {
  Striper striper(StripePolicy{4096, 128, 4});
  std::vector<LaneState> lanes(truth.size());
  double last = 0;
  for (int r = 0; r < rounds; ++r) {
    last = 0;
    for (const Piece& p : striper.plan(bytes, lanes)) {
      const double t = static_cast<double>(p.bytes) / truth[static_cast<size_t>(p.lane)];
      observe_rate(lanes[static_cast<size_t>(p.lane)], p.bytes, t);
      last = std::max(last, t);
    }
  }
  *lanes_out = lanes;
  const double sum = std::accumulate(truth.begin(), truth.end(), 0.0);
  return last / (static_cast<double>(bytes) / sum);
}

TEST(RailStripes, MeasuredRatesBalanceTheStripes) {
  std::vector<LaneState> lanes;
  // 4 lanes, one half as fast: after a few operations every lane finishes together.
  EXPECT_LT(striped_time_over_ideal({1e8, 1e8, 1e8, 5e7}, 8, size_t{16} << 20, &lanes), 1.02);
  // One 5x slower than the others (beyond the factor 4): it leaves the set, the others share
  // alike; against the sum of all four rates, the time is 3.2 / 3.
  const double t = striped_time_over_ideal({1e8, 1e8, 1e8, 2e7}, 8, size_t{16} << 20, &lanes);
  EXPECT_NEAR(t, 3.2 / 3.0, 0.01);
  Striper striper(StripePolicy{4096, 128, 4});
  EXPECT_EQ(striper.stripe_set(lanes), (std::vector<int>{0, 1, 2}));
}

TEST(RailStripes, NoLaneUpFailsWithPeerLost) {
  Striper striper(StripePolicy{});
  std::vector<LaneState> lanes(2);
  lanes[0].up = lanes[1].up = false;
  try {
    striper.plan(1, lanes);
    ADD_FAILURE() << "planned over lanes that are all down";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommPeerLost);
  }
  EXPECT_THROW(Striper(StripePolicy{4096, 0, 4}), Error);
  EXPECT_THROW(Striper(StripePolicy{4096, 128, 0.5}), Error);
}

TEST(RailEpochs, ImmediateDataRoundTrips) {
  for (uint32_t epoch : {0u, 1u, 0x7fffffffu, 0xffffffffu})
    for (uint32_t index : {0u, 1u, ImmData::kMaxIndex}) {
      ImmData d;
      d.epoch = epoch, d.index = index, d.flags = 0x5a;
      const ImmData back = ImmData::decode(d.encode());
      EXPECT_EQ(back.epoch, epoch);
      EXPECT_EQ(back.index, index);
      EXPECT_EQ(back.flags, 0x5a);
    }
  ImmData d;
  d.index = ImmData::kMaxIndex + 1;
  EXPECT_THROW(d.encode(), Error);
}

TEST(RailEpochs, ASignalWaitsForItsPiecesAndForEarlierSignals) {
  EpochTracker t(10);
  EXPECT_TRUE(t.close(11, 1, 111));   // epoch 11's signal first, its piece not yet
  EXPECT_TRUE(t.due().empty());
  EXPECT_TRUE(t.piece(ImmData{11, 0, 0}));
  EXPECT_TRUE(t.due().empty());       // epoch 10 is not applied yet
  EXPECT_TRUE(t.piece(ImmData{10, 1, 0}));
  EXPECT_TRUE(t.close(10, 2, 110));
  EXPECT_TRUE(t.due().empty());       // piece 0 of epoch 10 missing
  EXPECT_FALSE(t.piece(ImmData{10, 1, 0}));  // the same piece again: dropped
  EXPECT_TRUE(t.piece(ImmData{10, 0, 0}));
  EXPECT_EQ(t.due(), (std::vector<uint64_t>{110, 111}));
  EXPECT_EQ(t.next(), 12u);
  EXPECT_EQ(t.open(), 0u);
  // Replays of what was applied: dropped.
  EXPECT_FALSE(t.piece(ImmData{10, 0, 0}));
  EXPECT_FALSE(t.close(11, 1, 111));
  EXPECT_TRUE(t.due().empty());
  // A signal with no data is due at once.
  EXPECT_TRUE(t.close(12, 0, 112));
  EXPECT_EQ(t.due(), (std::vector<uint64_t>{112}));
}

TEST(RailEpochs, EpochsWrapAround) {
  EpochSender s(0xfffffff0u);
  EpochTracker t(0xfffffff0u);
  std::vector<uint64_t> applied;
  for (uint64_t k = 0; k < 40; ++k) {
    const ImmData a = s.next_piece(), b = s.next_piece();
    const EpochSender::Close c = s.close();
    // The signal and the second piece before the first.
    EXPECT_TRUE(t.close(c.epoch, c.pieces, k));
    EXPECT_TRUE(t.piece(b));
    EXPECT_TRUE(t.due().empty()) << k;
    EXPECT_TRUE(t.piece(a));
    for (uint64_t v : t.due()) applied.push_back(v);
  }
  std::vector<uint64_t> want(40);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(applied, want);
  EXPECT_EQ(t.next(), 0xfffffff0u + 40u);
}

TEST(RailReplay, TakesALanesOutstandingOldestFirst) {
  ReplayTable r;
  r.posted(5, 0);
  r.posted(3, 1);
  r.posted(9, 0);
  r.posted(1, 0);
  EXPECT_TRUE(r.completed(9));
  EXPECT_FALSE(r.completed(9));
  EXPECT_EQ(r.outstanding(0), 2u);
  EXPECT_EQ(r.take(0), (std::vector<uint64_t>{5, 1}));
  EXPECT_EQ(r.outstanding(), 1u);
  EXPECT_FALSE(r.completed(5));  // taken: its completion (if one still comes) is stale
  r.posted(5, 1);
  EXPECT_THROW(r.posted(5, 1), Error);
  EXPECT_EQ(r.take(1), (std::vector<uint64_t>{3, 5}));
}

// Everything together over fake rails. A sender sends operations (puts of random size, some
// followed by a signal, and signals alone) to one target over `lanes` lanes: each piece and
// signal is delivered after a random delay (so out of order, within and across lanes) and
// completes (acknowledged) a little later. One lane fails mid-stream: what it had not
// delivered is lost, and what it delivered without the completion coming back is replayed
// too (and lands twice). The target must land every byte once, apply every signal once, in
// order, and only after all data sent before it.
struct Sim {
  struct Post {
    bool signal = false;
    size_t op = 0;  // the operation's index
    size_t offset = 0, bytes = 0;
    ImmData imm;
    EpochSender::Close close{};
  };
  struct Event {
    double time;
    int kind;  // 0 lands, 1 completes, 2 the lane fails
    uint64_t id;
    int lane;
    bool operator>(const Event& o) const { return time > o.time; }
  };

  std::mt19937_64 rng;
  std::vector<LaneState> lanes;
  std::vector<double> delay;  // per lane
  Striper striper{StripePolicy{4096, 128, 4}};
  EpochSender sender{0xfffffffau};  // wraps around during the run
  EpochTracker target{0xfffffffau};
  ReplayTable replay;
  std::vector<Post> posts;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  double now = 0;
  std::vector<std::vector<uint8_t>> landed;  // [op][byte]: times landed
  std::vector<size_t> missing;               // [op]: bytes not landed yet
  std::vector<uint64_t> applied;             // signals in the order applied
  size_t late = 0;                           // signals applied before their data
  size_t dropped = 0;                        // pieces and signals that came again
  size_t replayed = 0;                       // posts sent again after the failure
  size_t next_lane = 0;

  void post(uint64_t id, int lane) {
    replay.posted(id, lane);
    const double land = now + delay[static_cast<size_t>(lane)] * (0.2 + 1.6 * u());
    events.push(Event{land, 0, id, lane});
    events.push(Event{land + delay[static_cast<size_t>(lane)] * u(), 1, id, lane});
  }
  double u() { return std::uniform_real_distribution<double>(0, 1)(rng); }
  int some_lane_up() {
    for (size_t k = 0; k < lanes.size(); ++k) {
      const size_t l = (next_lane + k) % lanes.size();
      if (lanes[l].up) return next_lane = l + 1, static_cast<int>(l);
    }
    return -1;
  }
  void send(size_t op, size_t bytes, bool with_signal) {
    for (const Piece& p : striper.plan(bytes, lanes)) {
      Post x;
      x.op = op, x.offset = p.offset, x.bytes = p.bytes, x.imm = sender.next_piece();
      posts.push_back(x);
      post(posts.size() - 1, p.lane);
    }
    if (!with_signal) return;
    Post s;
    s.signal = true, s.op = op, s.close = sender.close();
    posts.push_back(s);
    post(posts.size() - 1, some_lane_up());
  }
  void deliver(const Post& x) {
    if (!x.signal) {
      if (!target.piece(x.imm)) {  // a replay of a piece that landed
        ++dropped;
        return;
      }
      for (size_t i = 0; i < x.bytes; ++i)
        if (landed[x.op][x.offset + i]++ == 0) --missing[x.op];
    } else {
      if (!target.close(x.close.epoch, x.close.pieces, x.op)) ++dropped;
    }
    for (uint64_t op : target.due()) {
      // Every operation up to this one has all its bytes.
      for (size_t o = 0; o <= op; ++o) late += missing[o] != 0;
      applied.push_back(op);
    }
  }
};

void run_sim(uint64_t seed, int nlanes, bool fail) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(nlanes) + " lanes");
  Sim s;
  s.rng.seed(seed);
  s.lanes.resize(static_cast<size_t>(nlanes));
  for (int l = 0; l < nlanes; ++l) {
    s.delay.push_back(l == 1 ? 50.0 : 10.0);  // lane 1 slower
    s.lanes[static_cast<size_t>(l)].rate = l == 1 ? 1e8 : 3e8;
  }
  const size_t ops = 300;
  s.landed.resize(ops);
  s.missing.resize(ops);
  const double fail_at = fail ? 150 : -1;
  const int failing = nlanes - 1;
  bool failed = false;
  std::vector<size_t> want;
  for (size_t op = 0; op < ops; ++op) {
    // Sends one operation per time unit, handling what happened meanwhile.
    while (!s.events.empty() && s.events.top().time <= static_cast<double>(op)) {
      const Sim::Event e = s.events.top();
      s.events.pop();
      s.now = e.time;
      const bool lost = failed && e.lane == failing;
      if (e.kind == 0 && !(lost || (fail_at >= 0 && e.lane == failing && e.time > fail_at)))
        s.deliver(s.posts[e.id]);
      if (e.kind == 1 && !lost && !(fail_at >= 0 && e.lane == failing && e.time > fail_at))
        s.replay.completed(e.id);
    }
    s.now = static_cast<double>(op);
    if (fail && !failed && s.now >= fail_at) {
      // The lane is found down: what it had outstanding goes again on the others.
      failed = true;
      s.lanes[static_cast<size_t>(failing)].up = false;
      for (uint64_t id : s.replay.take(failing)) {
        s.post(id, s.some_lane_up());
        ++s.replayed;
      }
    }
    const uint64_t r = s.rng();
    const size_t bytes = r % 5 == 0 ? 0 : r % 3 == 0 ? s.rng() % 300 : s.rng() % (size_t{96} << 10);
    const bool with_signal = bytes == 0 || r % 2 == 0;
    s.landed[op].assign(bytes, 0);
    s.missing[op] = bytes;
    if (with_signal) want.push_back(op);
    s.send(op, bytes, with_signal);
  }
  // The last signal, after everything.
  s.send(ops - 1, 0, true);
  want.push_back(ops - 1);
  while (!s.events.empty()) {
    const Sim::Event e = s.events.top();
    s.events.pop();
    s.now = e.time;
    const bool lost = failed && e.lane == failing;
    if (e.kind == 0 && !lost) s.deliver(s.posts[e.id]);
    if (e.kind == 1 && !lost) s.replay.completed(e.id);
  }
  size_t wrong = 0;
  for (size_t op = 0; op < ops; ++op)
    for (uint8_t times : s.landed[op]) wrong += times != 1;
  EXPECT_EQ(wrong, 0u) << "bytes not landed exactly once";
  EXPECT_EQ(s.late, 0u) << "signals applied before their data";
  EXPECT_EQ(s.applied, want);
  EXPECT_EQ(s.target.open(), 0u);
  EXPECT_EQ(s.replay.outstanding(), 0u);
  if (fail) {  // the failure took work to replay, some of which had landed already
    EXPECT_GT(s.replayed, 0u);
    EXPECT_GT(s.dropped, 0u);
  }
}

TEST(RailSim, EveryByteOnceAndEverySignalAfterItsData) {
  for (uint64_t seed : {1, 2, 3})
    for (int lanes : {1, 2, 4}) run_sim(seed, lanes, false);
}

TEST(RailSim, ALaneFailsMidStream) {
  for (uint64_t seed : {4, 5, 6})
    for (int lanes : {2, 3, 4}) run_sim(seed, lanes, true);
}

}  // namespace
}  // namespace symcomm::rails
