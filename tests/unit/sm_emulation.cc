// The sm collectives' protocol run on the host: the library's own sm headers (plans,
// channels, counts on the device) with tests/unit/emulation/harness.h, one thread per block
// (blockDim 1: the protocol's __shared__ variables are then exact). It checks the chunk
// schedule, the channel counters across calls, ring reuse and the plans of every collective
// (all-gather, all-to-all, all-to-all-v, broadcast, reduce-scatter, one- and two-shot
// all-reduce, in place too) on 2 to 4 and 8 ranks, with tiny rings so that every ring wraps.
// The memory-model questions (fences, caches) stay with the GPU tests: C++'s emulation
// cannot answer them.
#include "emulation/harness.h"  // first: what the protocol headers expect of CUDA

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "coll/sm/calls.h"
#include "coll/sm/channels.cuh"
#include "coll/sm/counts.cuh"
#include "coll/sm/plan.h"

namespace {

using namespace symcomm;
using namespace symcomm::sm;

// `n` ranks' areas (4 KiB slots), their world views, and kernels run as threads, on GPUs
// that hold `room` blocks at once.
class Emulator {
 public:
  explicit Emulator(int n, int room = 1 << 30)
      : room_(room), devices_(n, flags_bytes(n) + ring_bytes(n, kSlot)) {}
  // The base of every plan of `a` (buffers, area, team), as SmAlgorithm makes it.
  Plan base(const CollArgs& a) {
    const int rank = a.team.world_of(a.me);
    // Both kinds of schedule (from 64 KiB, SYMCOMM_COLL_SM_LARGE), with small rings.
    return base_plan(a, devices_.world(rank), devices_.area(rank), kSlot, kDefaultBlocks, 96,
                     room_, 64 << 10);
  }
  // The kernels of a moving collective, as SmAlgorithm::run makes them.
  std::vector<Plan> plans(const CollArgs& a) {
    Plan out[2];
    return std::vector<Plan>(out, out + move_plans(base(a), a, out));
  }
  Plan plan(const CollArgs& a) { return plans(a).at(0); }
  // Every rank's kernel at once, as the GPUs would run them.
  // `room`: the most blocks a grid may have (grid_blocks), as the GPU's resident count (0:
  // the emulator's); every grid must fit in it.
  template <typename T = uint8_t>
  void run(std::vector<Plan>& plans, int room = 0) {
    if (room == 0) room = room_;
    std::vector<std::vector<Plan*>> streams;
    for (Plan& p : plans) streams.push_back({&p});
    emulation::run_streams(streams, [room](Plan* p) {
      emulation::run_grid(grid_blocks(*p, room), 1, [p] {
        if (p->dev_send_counts)
          device_counts_block(*p);
        else
          sm_block<T>(*p);
      });
    });
    devices_.expect_no_failed_wait();
    for (const Plan& p : plans) EXPECT_LE(p.blocks, room) << "rank " << p.me << "'s grid";
  }

 private:
  static constexpr uint64_t kSlot = 4096;
  int room_;
  emulation::Devices devices_;
};

CollArgs args(CollOp op, int n, int me, const char* send, char* recv, size_t count, int root = 0) {
  CollArgs a{};
  a.op = op;
  a.team = Team{0, 1, n};
  a.me = me;
  a.send = send;
  a.recv = recv;
  a.count = count;
  a.elem = 1;
  a.root = root;
  return a;
}

std::vector<char> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

// `calls` moving collectives on `n` ranks, on one set of counters (as in a communicator).
void moving_calls(int n, int calls, std::mt19937_64& rng, int room = 1 << 30) {
  Emulator emu(n, room);
  for (int call = 0; call < calls; ++call) {
    const CollOp op = std::vector<CollOp>{CollOp::AllGather, CollOp::AllToAll,
                                          CollOp::Broadcast, CollOp::AllToAllv}[call % 4];
    const size_t sizes[] = {0, 1, 15, 4096, 8191, 50001, 200004, 300000};
    // (a large broadcast on more than two ranks is a scatter and an all-gather)
    const size_t count = op == CollOp::Broadcast && call % 8 == 2 ? kBroadcastSplitMin + 3 : sizes[rng() % 8];
    const int root = static_cast<int>(rng() % static_cast<uint64_t>(n));
    SCOPED_TRACE(testing::Message() << n << " ranks, call " << call << ", " << coll_op_name(op)
                                    << ", count " << count);
    // All-to-all-v: counts[i][j] from i to j, blocks packed in order on both sides.
    std::vector<std::vector<size_t>> counts(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n)));
    for (auto& row : counts)
      for (size_t& c : row) c = rng() % 3 == 0 ? 0 : rng() % (count + 1);
    std::vector<std::vector<size_t>> sc(static_cast<size_t>(n)), sd(sc), rc(sc), rd(sc);
    std::vector<std::vector<char>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
    std::vector<Plan> plans, second;
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      size_t send_bytes = op == CollOp::AllToAll ? count * static_cast<size_t>(n) : count;
      size_t recv_bytes = op == CollOp::Broadcast ? count : count * static_cast<size_t>(n);
      if (op == CollOp::AllToAllv) {
        send_bytes = recv_bytes = 0;
        for (int j = 0; j < n; ++j) {
          const size_t jj = static_cast<size_t>(j);
          sc[m].push_back(counts[m][jj]);
          sd[m].push_back(send_bytes);
          send_bytes += counts[m][jj];
          rc[m].push_back(counts[jj][m]);
          rd[m].push_back(recv_bytes);
          recv_bytes += counts[jj][m];
        }
      }
      send[m] = random_bytes(rng, send_bytes + 1);
      recv[m].assign(recv_bytes + 1, static_cast<char>(0xAB));
    }
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      CollArgs a = args(op, n, me, send[m].data(), recv[m].data(), count, root);
      a.send_counts = sc[m].data();
      a.send_displs = sd[m].data();
      a.recv_counts = rc[m].data();
      a.recv_displs = rd[m].data();
      const std::vector<Plan> kernels = emu.plans(a);
      plans.push_back(kernels[0]);
      if (kernels.size() == 2) second.push_back(kernels[1]);
      EXPECT_EQ(kernels.size(), op == CollOp::Broadcast && n > 2 && count >= kBroadcastSplitMin ? 2u : 1u);
    }
    emu.run(plans);
    if (!second.empty()) emu.run(second);
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      std::vector<char> want(recv[m].size(), static_cast<char>(0xAB));
      for (int i = 0; i < n; ++i) {
        const size_t ii = static_cast<size_t>(i);
        const char* from = send[ii].data();
        switch (op) {
          case CollOp::AllGather: std::copy(from, from + count, want.begin() + static_cast<long>(ii * count)); break;
          case CollOp::AllToAll: std::copy(from + m * count, from + (m + 1) * count, want.begin() + static_cast<long>(ii * count)); break;
          case CollOp::Broadcast: if (i == root) std::copy(from, from + count, want.begin()); break;
          default: std::copy(from + sd[ii][m], from + sd[ii][m] + sc[ii][m], want.begin() + static_cast<long>(rd[m][ii])); break;
        }
      }
      EXPECT_TRUE(recv[m] == want) << "rank " << me;
    }
    if (testing::Test::HasFailure()) return;
  }
}

TEST(SmEmulation, MovingCollectivesOnTwoToFourRanks) {
  std::mt19937_64 rng(11);
  for (int n = 2; n <= 4; ++n) moving_calls(n, 40, rng);
}

// Eight ranks, the machine the targets are stated on: 5 channels per pair (13 for
// large messages), grids of up to 2 x 7 x 13 + 8 blocks.
TEST(SmEmulation, MovingCollectivesOnEightRanks) {
  std::mt19937_64 rng(17);
  moving_calls(8, 16, rng);
}

// The own part's blocks (one per 64 KiB) give way where the grid would not fit the GPU:
// all-to-alls on 3 ranks whose own part has 5 pieces, in grids with room for 1 to 6 of them.
TEST(SmEmulation, OwnPartInFewerBlocksWhereTheGridIsFull) {
  std::mt19937_64 rng(31);
  const int n = 3;
  Emulator emu(n);
  for (int own = 1; own <= 6; ++own) {
    const size_t count = 300000;  // per member: the own part is 5 pieces of 64 KiB
    std::vector<std::vector<char>> send(n), recv(n);
    std::vector<Plan> plans;
    for (int me = 0; me < n; ++me) {
      send[static_cast<size_t>(me)] = random_bytes(rng, count * n);
      recv[static_cast<size_t>(me)].assign(count * n, 0);
      plans.push_back(emu.plan(args(CollOp::AllToAll, n, me, send[static_cast<size_t>(me)].data(),
                                    recv[static_cast<size_t>(me)].data(), count)));
    }
    Plan probe = plans[0];
    const int full = grid_blocks(probe);
    ASSERT_EQ(probe.self_blocks, 5);
    const int room = full - 5 + own;
    emu.run(plans, room);
    for (Plan& p : plans) {
      EXPECT_EQ(grid_blocks(p, room), room < full ? room : full);
      EXPECT_EQ(p.self_blocks, std::min(own, 5));
    }
    for (int me = 0; me < n; ++me)
      for (int i = 0; i < n; ++i)
        ASSERT_TRUE(std::equal(recv[static_cast<size_t>(me)].begin() + static_cast<long>(i * count),
                               recv[static_cast<size_t>(me)].begin() + static_cast<long>((i + 1) * count),
                               send[static_cast<size_t>(i)].begin() + static_cast<long>(me * count)))
            << "own blocks " << own << ", rank " << me << ", block from " << i;
  }
}

// Reduce-scatter and all-reduce (one shot, in place or not, and two shots) of int32 sums,
// exact in any order, interleaved with all-gathers on the same counters.
void reduction_calls(int n, int calls, std::mt19937_64& rng, int room = 1 << 30) {
  Emulator emu(n, room);
  for (int call = 0; call < calls; ++call) {
    const CollOp op = std::vector<CollOp>{CollOp::AllReduce, CollOp::ReduceScatter,
                                          CollOp::AllGather}[call % 3];
    // (call 3, in place, 190000: small enough for one shot on two ranks, but more chunks
    // per channel than a ring holds, which in place must take two shots)
    const size_t counts[] = {1, 7, 1001, 16384, 16385, 50001, 120000, 190000};
    const size_t count = call == 3 ? 190000 : counts[rng() % 8];
    const bool in_place = op == CollOp::AllReduce && (call == 3 || rng() % 2);
    SCOPED_TRACE(testing::Message() << n << " ranks, call " << call << ", " << coll_op_name(op)
                                    << ", count " << count << (in_place ? ", in place" : ""));
    const size_t per = op == CollOp::ReduceScatter ? count * static_cast<size_t>(n) : count;
    const size_t out = op == CollOp::AllGather ? count * static_cast<size_t>(n) : count;
    std::vector<std::vector<int32_t>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
    for (auto& v : send) {
      v.resize(per);
      for (int32_t& x : v) x = static_cast<int32_t>(rng() % 2001) - 1000;
    }
    std::vector<std::vector<int32_t>> input = send;  // before an in-place call overwrites it
    std::vector<Plan> first, second;
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      recv[m].assign(out, -777777);
      CollArgs a = args(op, n, me, reinterpret_cast<const char*>(send[m].data()),
                        reinterpret_cast<char*>(in_place ? send[m].data() : recv[m].data()), count);
      a.elem = sizeof(int32_t);
      a.type = symcommInt32;
      a.redop = symcommSum;
      if (op == CollOp::AllGather) {
        first.push_back(emu.plan(a));
        continue;
      }
      Plan plans[2];
      const int k = reduce_plans(emu.base(a), a, plans);
      ASSERT_GE(k, 1);
      first.push_back(plans[0]);
      if (k == 2) second.push_back(plans[1]);
    }
    emu.run<int32_t>(first);
    if (!second.empty()) emu.run<int32_t>(second);
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      std::vector<int32_t> want(out);
      for (size_t i = 0; i < out; ++i) {
        if (op == CollOp::AllGather) {
          want[i] = input[i / count][i % count];
          continue;
        }
        const size_t at = op == CollOp::ReduceScatter ? m * count + i : i;
        int32_t sum = 0;
        for (int r = 0; r < n; ++r) sum += input[static_cast<size_t>(r)][at];
        want[i] = sum;
      }
      const std::vector<int32_t>& got = in_place ? send[m] : recv[m];
      EXPECT_TRUE(std::vector<int32_t>(got.begin(), got.begin() + static_cast<long>(out)) == want)
          << "rank " << me;
    }
    if (testing::Test::HasFailure()) return;
  }
}

TEST(SmEmulation, ReductionsOnTwoToFourRanks) {
  std::mt19937_64 rng(5);
  for (int n = 2; n <= 4; ++n) reduction_calls(n, 30, rng);
}

TEST(SmEmulation, ReductionsOnEightRanks) {
  std::mt19937_64 rng(19);
  reduction_calls(8, 12, rng);
}

// Gather, scatter and reduce (int32 sums) to or from a random root, in place or not, with
// NULL for the buffers a non-root does not use, interleaved with all-gathers on the same
// counters; every rank's buffers checked, the ones a rank must not touch included.
void rooted_calls(int n, int calls, std::mt19937_64& rng) {
  Emulator emu(n);
  constexpr int32_t kPoison = -777777;
  for (int call = 0; call < calls; ++call) {
    const CollOp op = std::vector<CollOp>{CollOp::Gather, CollOp::Scatter, CollOp::Reduce,
                                          CollOp::AllGather}[call % 4];
    const size_t counts[] = {1, 7, 1001, 16384, 16385, 50001, 120000};
    const size_t count = counts[rng() % 7];
    const int root = static_cast<int>(rng() % static_cast<size_t>(n));
    const bool in_place = op != CollOp::AllGather && rng() % 3 == 0;
    SCOPED_TRACE(testing::Message() << n << " ranks, call " << call << ", " << coll_op_name(op)
                                    << ", count " << count << ", root " << root
                                    << (in_place ? ", in place" : ""));
    const size_t big = count * static_cast<size_t>(n);
    // The root's (or, all-gather, everyone's) sizes; a non-root's unused buffer is empty.
    auto send_size = [&](int me) {
      return op == CollOp::Scatter ? (me == root ? big : 0) : count;
    };
    auto recv_size = [&](int me) {
      if (op == CollOp::AllGather) return big;
      if (op == CollOp::Scatter) return count;
      return me == root ? (op == CollOp::Gather ? big : count) : size_t{0};
    };
    std::vector<std::vector<int32_t>> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
    for (int me = 0; me < n; ++me) {
      auto& v = send[static_cast<size_t>(me)];
      v.resize(send_size(me));
      for (int32_t& x : v) x = static_cast<int32_t>(rng() % 2001) - 1000;
      recv[static_cast<size_t>(me)].assign(recv_size(me), kPoison);
    }
    // In place at the root: its block of the gather's recv is the send; the scatter's recv
    // is its block of the send; the reduce's recv is its send.
    if (in_place) {
      auto& r = recv[static_cast<size_t>(root)];
      auto& snd = send[static_cast<size_t>(root)];
      if (op == CollOp::Gather) std::copy(snd.begin(), snd.end(), r.begin() + static_cast<long>(root * count));
      if (op == CollOp::Scatter) std::copy(snd.begin() + static_cast<long>(root * count), snd.begin() + static_cast<long>((root + 1) * count), r.begin());
      if (op == CollOp::Reduce) r = snd;
    }
    const std::vector<std::vector<int32_t>> input = send;
    std::vector<Plan> first;
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      int32_t* s = send[m].empty() ? nullptr : send[m].data();
      int32_t* r = recv[m].empty() ? nullptr : recv[m].data();
      if (in_place && me == root) {
        if (op == CollOp::Gather) s = r + root * count;
        if (op == CollOp::Scatter) r = s + root * count;
        if (op == CollOp::Reduce) s = r;
      }
      CollArgs a = args(op, n, me, reinterpret_cast<const char*>(s), reinterpret_cast<char*>(r),
                        count, root);
      a.elem = sizeof(int32_t);
      a.type = symcommInt32;
      a.redop = symcommSum;
      if (op == CollOp::Reduce) {
        Plan plans[2];
        ASSERT_EQ(reduce_plans(emu.base(a), a, plans), 1);
        first.push_back(plans[0]);
      } else {
        first.push_back(emu.plan(a));
      }
    }
    emu.run<int32_t>(first);
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      std::vector<int32_t> want(recv_size(me));
      for (size_t i = 0; i < want.size(); ++i) {
        switch (op) {
          case CollOp::Gather: case CollOp::AllGather:
            want[i] = input[i / count][i % count];
            break;
          case CollOp::Scatter:
            want[i] = input[static_cast<size_t>(root)][m * count + i];
            break;
          default: {
            int32_t sum = 0;
            for (int r = 0; r < n; ++r) sum += input[static_cast<size_t>(r)][i];
            want[i] = sum;
          }
        }
      }
      EXPECT_TRUE(recv[m] == want) << "rank " << me;
      if (!(in_place && me == root && op == CollOp::Reduce)) {
        EXPECT_TRUE(send[m] == input[m]) << "rank " << me << "'s send changed";
      }
    }
    if (testing::Test::HasFailure()) return;
  }
}

TEST(SmEmulation, RootedCollectivesOnTwoToFourRanks) {
  std::mt19937_64 rng(23);
  for (int n = 2; n <= 4; ++n) rooted_calls(n, 24, rng);
}

TEST(SmEmulation, RootedCollectivesOnEightRanks) {
  std::mt19937_64 rng(29);
  rooted_calls(8, 12, rng);
}

// One all-to-all-v with counts in device memory (here: host memory) on `team` of the
// emulator's ranks, random counts below one of a few bounds (zeros included), half the time
// with a capacity too small for every block: blocks packed in team-rank order, those beyond
// the capacity dropped whole, the counts and displacements written.
void device_counts_call(Emulator& emu, Team team, std::mt19937_64& rng) {
  const int n = team.size;
  const size_t most = std::vector<size_t>{0, 3, 5000, 70000}[rng() % 4];
  SCOPED_TRACE(testing::Message() << "team of " << n << " from " << team.start << " by "
                                  << team.stride << ", counts up to " << most);
  const size_t nn = static_cast<size_t>(n);
  std::vector<std::vector<size_t>> counts(nn, std::vector<size_t>(nn));
  for (auto& row : counts)
    for (size_t& c : row) c = rng() % 4 == 0 ? 0 : rng() % (most + 1);
  std::vector<std::vector<size_t>> sc(nn), sd(nn), rc(nn, std::vector<size_t>(nn, 99)),
      rd(nn, std::vector<size_t>(nn, 99));
  std::vector<std::vector<char>> send(nn), recv(nn);
  std::vector<size_t> capacity(nn);
  std::vector<Plan> calls;
  for (size_t m = 0; m < nn; ++m) {
    size_t at = 7;  // gaps between the send blocks
    for (size_t j = 0; j < nn; ++j) {
      sc[m].push_back(counts[m][j]);
      sd[m].push_back(at);
      at += counts[m][j] + 5;
    }
    send[m] = random_bytes(rng, at);
    size_t total = 0;
    for (size_t i = 0; i < nn; ++i) total += counts[i][m];
    capacity[m] = rng() % 2 ? total : total / 2;  // half the time, some blocks are dropped
    recv[m].assign(capacity[m] + 1, static_cast<char>(0xAB));
  }
  for (int me = 0; me < n; ++me) {
    const size_t m = static_cast<size_t>(me);
    CollArgs a = args(CollOp::AllToAllv, n, me, send[m].data(), recv[m].data(), capacity[m]);
    a.team = team;
    a.counts_on_device = true;
    a.send_counts = sc[m].data();
    a.send_displs = sd[m].data();
    a.recv_counts = rc[m].data();
    a.recv_displs = rd[m].data();
    calls.push_back(device_counts_plan(emu.base(a), a));
  }
  emu.run(calls);
  for (size_t m = 0; m < nn; ++m) {
    std::vector<char> want(recv[m].size(), static_cast<char>(0xAB));
    size_t at = 0;
    for (size_t i = 0; i < nn; ++i) {
      EXPECT_EQ(rc[m][i], counts[i][m]) << "member " << m << ", count from " << i;
      EXPECT_EQ(rd[m][i], at) << "member " << m << ", displacement of " << i;
      if (at + counts[i][m] <= capacity[m])
        std::copy(send[i].begin() + static_cast<long>(sd[i][m]),
                  send[i].begin() + static_cast<long>(sd[i][m] + counts[i][m]),
                  want.begin() + static_cast<long>(at));
      at += counts[i][m];
    }
    EXPECT_TRUE(recv[m] == want) << "member " << m;
  }
}

// All-to-all-v with counts on the device on the world, between all-to-alls on the same
// counters: one kernel per call, whose channel and readers' counters carry over.
void device_counts_calls(int n, int calls, std::mt19937_64& rng, int room = 1 << 30) {
  Emulator emu(n, room);
  for (int call = 0; call < calls; ++call) {
    SCOPED_TRACE(testing::Message() << n << " ranks, call " << call);
    device_counts_call(emu, Team{0, 1, n}, rng);
    const size_t nn = static_cast<size_t>(n);
    if (testing::Test::HasFailure()) return;
    // An all-to-all on the same counters between the calls.
    std::vector<Plan> plans;
    std::vector<std::vector<char>> s2(nn), r2(nn);
    for (int me = 0; me < n; ++me) {
      const size_t m = static_cast<size_t>(me);
      s2[m] = random_bytes(rng, 3000 * nn);
      r2[m].assign(3000 * nn, 0);
      plans.push_back(emu.plan(args(CollOp::AllToAll, n, me, s2[m].data(), r2[m].data(), 3000)));
    }
    emu.run(plans);
    for (size_t m = 0; m < nn; ++m)
      for (size_t i = 0; i < nn; ++i)
        EXPECT_TRUE(std::equal(r2[m].begin() + static_cast<long>(i * 3000),
                               r2[m].begin() + static_cast<long>((i + 1) * 3000),
                               s2[i].begin() + static_cast<long>(m * 3000)));
  }
}

TEST(SmEmulation, AllToAllvWithCountsOnTheDevice) {
  std::mt19937_64 rng(9);
  for (int n = 2; n <= 4; ++n) device_counts_calls(n, 24, rng);
}

TEST(SmEmulation, AllToAllvWithCountsOnTheDeviceOnEightRanks) {
  std::mt19937_64 rng(23);
  device_counts_calls(8, 10, rng);
}

// The same on teams whose ranks are not world ranks, in turn with the world and each other
// on one set of counters (5 emulated ranks): the members' headers are found by world rank,
// and ranks that sit a call out keep their counters in step.
TEST(SmEmulation, AllToAllvWithCountsOnTheDeviceOnTeams) {
  std::mt19937_64 rng(13);
  Emulator emu(5);
  // (The last, in reverse order, which no split makes: the kernels know members only through
  // their world ranks.)
  const Team teams[] = {{0, 2, 3}, {1, 2, 2}, {0, 1, 5}, {1, 1, 4}, {4, 1, 1}, {3, -1, 3}};
  for (int call = 0; call < 30; ++call) {
    SCOPED_TRACE(testing::Message() << "call " << call);
    device_counts_call(emu, teams[rng() % std::size(teams)], rng);
    if (HasFailure()) return;
  }
}

// A GPU that holds fewer blocks at once (shared under MPS, or partitioned): channels per pair
// are capped so that every grid fits. 40 blocks on 8 ranks: 2 channels per pair where the
// parameters ask for 6 and 14.
TEST(SmEmulation, EightRanksOnGpusThatHoldFortyBlocks) {
  std::mt19937_64 rng(23);
  moving_calls(8, 12, rng, 40);
  reduction_calls(8, 9, rng, 40);
  device_counts_calls(8, 3, rng, 40);
}

}  // namespace
