// Collectives against a reference computed on the host from the same inputs, for the
// automatic choice and every registered algorithm (skipped only where its descriptor says it
// cannot run, or its library is missing: coll_fixture.h): every operation it does, every
// type, sizes 0, 1, odd, not a multiple of 16 bytes, and larger than the workspace and the sm
// channels' rings (both made small, so that sizes go through several pieces and the rings
// wrap around); symmetric and plain buffers; in place; random floats; teams; sm's large
// mode; relay's lanes; 1 GiB. The same binary (mp_coll) holds coll_sequence_test.cc (calls
// chained on a stream, graphs), coll_alltoallv_test.cc, coll_limits_test.cc (bad
// arguments), coll_choice_test.cc, coll_refusals_test.cc, coll_timeouts_test.cc and
// coll_ce_streams_test.cc; coll_fixture.h is what they share.
#include <set>

#include "coll_fixture.h"

namespace coll_test {

TEST_P(Coll, AllGather) {
  if (lacks({Op::AllGather})) GTEST_SKIP() << algo_ << " does no all-gather";
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t count : kCounts) {
        if (plain_recv_refused(sym)) continue;
        all_gather_case(t, count, sym);
      }
}

TEST_P(Coll, AllToAll) {
  if (lacks({Op::AllToAll})) GTEST_SKIP() << algo_ << " does no all-to-all";
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t count : kCounts) {
        if (plain_recv_refused(sym)) continue;
        all_to_all_case(t, count, sym);
      }
}

TEST_P(Coll, ReduceScatterAndAllReduce) {
  if (lacks({Op::ReduceScatter, Op::AllReduce})) GTEST_SKIP() << algo_ << " does not do both";
  for (const Type& t : kTypes)
    for (symcommRedOp_t op : {symcommSum, symcommMin, symcommMax, symcommProd, symcommAvg})
      for (size_t count : kCounts)
        if (op <= symcommMax || count <= 50001)  // (the largest once per type is enough)
          reductions_case(t, op, count);
}

// Reduce, gather and scatter: every type and size, the root and the reduction going round,
// the root's receive buffer plain and symmetric; every root once.
TEST_P(Coll, ReduceGatherScatter) {
  // Those of the three the algorithm does; the others refused.
  int does = 0;
  for (Op op : {Op::Reduce, Op::Gather, Op::Scatter})
    if (caps_.does(api_op(op))) ++does;
    else expect_refused(api_op(op), caps_.in_place_recv);
  if (!does) GTEST_SKIP() << algo_ << " does none of them";
  int k = 0;
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t count : kCounts) {
        if (sym && count > 50001) continue;
        rooted_case(t, k % n_, count, static_cast<symcommRedOp_t>(k % symcommNumRedOps), sym);
        ++k;
      }
  for (int root = 0; root < n_; ++root) rooted_case(kTypes[6], root, 1001, symcommSum, false);
}

// Every type and size, the root going round; and every root once.
TEST_P(Coll, BroadcastFromEveryRoot) {
  if (lacks({Op::Broadcast})) GTEST_SKIP() << algo_ << " does no broadcast";
  for (bool sym : {false, true}) {
    if (plain_recv_refused(sym)) continue;
    int root = 0;
    for (const Type& t : kTypes)
      for (size_t count : kCounts) broadcast_case(t, root++ % n_, count, sym);
    for (root = 0; root < n_; ++root) broadcast_case(kTypes[7], root, 3000, sym);
  }
}

// Reductions of random floats, which no type holds exactly and whose sums round: within a
// bound of the sum computed in double ((n + 1) roundings in the type: of each addition, done
// in the type by NCCL, and of the result; the 2^-14 covers float16's subnormals), and
// bit-identical on every rank (gathered through the host). Max is exact.
TEST_P(Coll, ReductionsOfRandomFloats) {
  if (lacks({Op::ReduceScatter, Op::AllReduce})) GTEST_SKIP() << algo_ << " does not do both";
  const size_t count = 20001;
  for (int ti : {4, 5, 6, 7}) {  // float16, bfloat16, float32, float64
    const Type& t = kTypes[ti];
    SCOPED_TRACE(t.name);
    // Unit roundoff of the type.
    const double u = t.size == 2 ? (t.id == symcommFloat16 ? 0x1p-11 : 0x1p-8)
                                 : t.size == 4 ? 0x1p-24 : 0x1p-53;
    auto bound = [&](double abs_sum) { return (n_ + 1) * u * (abs_sum + 0x1p-14); };
    // Every rank's input (the values as the type holds them), elements of [-1, 1) x 2^k.
    std::vector<std::vector<uint8_t>> in(static_cast<size_t>(n_), std::vector<uint8_t>(count * t.size));
    for (int r = 0; r < n_; ++r) {
      std::mt19937_64 rng(seed_ + static_cast<uint64_t>(r) * 7919 + static_cast<uint64_t>(ti));
      std::uniform_real_distribution<double> x(-1, 1);
      for (size_t i = 0; i < count; ++i)
        store(t, &in[static_cast<size_t>(r)][i * t.size], std::ldexp(x(rng), static_cast<int>(rng() % 7) - 3));
    }
    void* send = buffer(count * t.size, false);
    void* recv = buffer(count * t.size, false);
    put(send, in[static_cast<size_t>(me_)]);
    for (symcommRedOp_t op : {symcommSum, symcommMax}) {
      SCOPED_TRACE(op == symcommSum ? "sum" : "max");
      poison(recv, count * t.size);
      SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                     algo_, stream_));
      const std::vector<uint8_t> got = fetch(recv, count * t.size);
      size_t wrong = 0;
      std::string first;
      for (size_t i = 0; i < count; ++i) {
        double ref = load(t, &in[0][i * t.size]), abs_sum = std::fabs(ref);
        for (int r = 1; r < n_; ++r) {
          const double v = load(t, &in[static_cast<size_t>(r)][i * t.size]);
          ref = combine(op, ref, v);
          abs_sum += std::fabs(v);
        }
        const double g = load(t, &got[i * t.size]);
        const double within = op == symcommSum ? bound(abs_sum) : 0;
        if (!(std::fabs(g - ref) <= within) && wrong++ == 0)
          first = "element " + std::to_string(i) + ": got " + std::to_string(g) + ", want " +
                  std::to_string(ref) + " within " + std::to_string(within);
      }
      EXPECT_EQ(wrong, 0u) << first;
      std::vector<uint8_t> all(got.size() * static_cast<size_t>(n_));
      SC_OK(symcommHostAllgather(comm_, got.data(), all.data(), got.size()));
      for (int r = 1; r < n_; ++r)
        EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin() + static_cast<long>(got.size()) * r))
            << "rank " << r << "'s result differs from rank 0's";
    }
    // Reduce-scatter of the same inputs taken as n blocks: block me of the all-reduce's sum.
    const size_t block = count / static_cast<size_t>(n_);
    poison(recv, count * t.size);
    SC_OK(symcommReduceScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, block, t.id,
                                       symcommSum, algo_, stream_));
    const std::vector<uint8_t> got = fetch(recv, block * t.size);
    size_t wrong = 0;
    for (size_t i = 0; i < block; ++i) {
      const size_t at = static_cast<size_t>(me_) * block + i;
      double ref = 0, abs_sum = 0;
      for (int r = 0; r < n_; ++r) {
        const double v = load(t, &in[static_cast<size_t>(r)][at * t.size]);
        ref += v;
        abs_sum += std::fabs(v);
      }
      wrong += !(std::fabs(load(t, &got[i * t.size]) - ref) <= bound(abs_sum));
    }
    EXPECT_EQ(wrong, 0u) << "reduce-scatter";
    release(send, false);
    release(recv, false);
  }
}


// Min and max of floats whatever rank holds a NaN or a zero of either sign: a NaN is dropped
// unless every rank holds one, -0 is below +0, and the result is the same bits on every rank
// and for every algorithm. Before, the result depended on which rank held the NaN (kept
// from rank 0, dropped from the others), so the same call gave NaN or a number by size.
// NCCL's kernels (2.28.3 on 4 x H200) give the same answers.
TEST_P(Coll, MinMaxWithNaNsAndSignedZeros) {
  if (lacks({Op::AllReduce})) GTEST_SKIP() << algo_ << " does no all-reduce";
  const size_t n = static_cast<size_t>(n_);
  // [0, n): rank i holds a NaN, the others numbers; n: every rank a NaN; [n + 1, 2n + 1):
  // rank i - n - 1 holds -0, the others +0; 2n + 1: rank 0 holds +0, the others -0.
  const size_t count = 2 * n + 2;
  auto input = [&](int r, size_t i) {
    const double nan = std::nan("");
    if (i < n) return i == static_cast<size_t>(r) ? nan : (r + 1.0) * (i % 2 ? 1.0 : -1.0);
    if (i == n) return nan;
    if (i < 2 * n + 1) return i - n - 1 == static_cast<size_t>(r) ? -0.0 : 0.0;
    return r == 0 ? 0.0 : -0.0;
  };
  for (int ti : {4, 5, 6, 7}) {  // float16, bfloat16, float32, float64
    const Type& t = kTypes[ti];
    SCOPED_TRACE(t.name);
    std::vector<uint8_t> mine(count * t.size);
    for (size_t i = 0; i < count; ++i) store(t, &mine[i * t.size], input(me_, i));
    void* send = buffer(count * t.size, false);
    void* recv = buffer(count * t.size, false);
    put(send, mine);
    for (symcommRedOp_t op : {symcommMin, symcommMax}) {
      SCOPED_TRACE(op == symcommMin ? "min" : "max");
      poison(recv, count * t.size);
      SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                     algo_, stream_));
      const std::vector<uint8_t> got = fetch(recv, count * t.size);
      for (size_t i = 0; i < count; ++i) {
        const double g = load(t, &got[i * t.size]);
        if (i == n) {
          EXPECT_TRUE(std::isnan(g)) << "element " << i << " (NaN everywhere): got " << g;
          continue;
        }
        // The reference, from the rules: the non-NaN inputs, -0 below +0.
        double want = 0;
        bool any = false;
        for (int r = 0; r < n_; ++r) {
          const double v = input(r, i);
          if (std::isnan(v)) continue;
          const bool better = op == symcommMin
                                  ? (v < want || (v == want && std::signbit(v)))
                                  : (v > want || (v == want && !std::signbit(v)));
          if (!any || better) want = v;
          any = true;
        }
        EXPECT_EQ(g, want) << "element " << i;
        if (want == 0) {
          EXPECT_EQ(std::signbit(g), std::signbit(want)) << "element " << i << ": got " << g;
        }
      }
      std::vector<uint8_t> all(got.size() * n);
      SC_OK(symcommHostAllgather(comm_, got.data(), all.data(), got.size()));
      for (size_t r = 1; r < n; ++r)
        EXPECT_TRUE(std::equal(got.begin(), got.end(), all.begin() + static_cast<long>(got.size() * r)))
            << "rank " << r << "'s result differs from rank 0's";
    }
    release(send, false);
    release(recv, false);
  }
}

// sm's large mode (SYMCOMM_COLL_SM_BLOCKS_LARGE blocks for messages between two members
// from SYMCOMM_COLL_SM_LARGE bytes, 16 MiB by default) at test sizes, for every operation:
// the threshold lowered to 16 KiB and the normal mode cut to 8 blocks, so that the two modes
// use different numbers of channels on every team size; calls mix both (all-to-all-v's random
// counts; the pieces of a split broadcast or a two-shot all-reduce).
TEST_P(Coll, SmLargeMode) {
  if (std::strcmp(algo_, "sm") != 0) GTEST_SKIP() << "sm's parameters";
  mp::ScopedEnv large("SYMCOMM_COLL_SM_LARGE", "16K");
  mp::ScopedEnv blocks("SYMCOMM_COLL_SM_BLOCKS", "8");
  const Type& t = kTypes[6];  // float32
  for (size_t count : {size_t{7}, size_t{50001}, size_t{300000}}) {
    for (bool sym : {false, true}) {
      all_gather_case(t, count, sym);
      all_to_all_case(t, count, sym);
      broadcast_case(t, n_ - 1, count, sym);
      all_to_all_v_case(t, count / 3, sym);
    }
    reductions_case(t, symcommSum, count);
    EXPECT_TRUE(device_counts_case(t, count / 3));
  }
  broadcast_case(t, 0, (size_t{4} << 20) / t.size + 3, false);  // from 4 MiB: scatter + all-gather
}

// relay with its most lanes (SYMCOMM_COLL_RELAY_BLOCKS=128) and 16 KiB of a piece per lane:
// the root's grid would exceed what an H200 holds (132 blocks) with its 32 own-copy blocks,
// so they take what is left beside the lanes. Every root, several chunks per lane, not in
// place (the root copies its send) and in place.
TEST_P(Coll, RelayWithEveryLane) {
  if (std::strcmp(algo_, "relay") != 0) GTEST_SKIP() << "relay's parameters";
  mp::ScopedEnv lanes("SYMCOMM_COLL_RELAY_BLOCKS", "128");
  mp::ScopedEnv lane_bytes("SYMCOMM_COLL_RELAY_LANE_BYTES", "16K");
  mp::ScopedEnv steps("SYMCOMM_COLL_RELAY_STEPS", "3");
  const Type& t = kTypes[6];  // float32
  const size_t count = (size_t{12} << 20) / t.size + 5;
  for (int root = 0; root < n_; ++root) broadcast_case(t, root, count, true);
  void* buf = buffer(count * t.size, true);
  const int root = n_ - 1;
  if (me_ == root) put(buf, make(t, seed_, root, 0, count));
  else poison(buf, count * t.size);
  SC_OK(symcommHostBarrier(comm_));
  SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, buf, buf, count, t.id, root, algo_,
                                 stream_));
  EXPECT_EQ(differences(fetch(buf, count * t.size), make(t, seed_, root, 0, count), t.size), "");
  SC_OK(symcommHostBarrier(comm_));
  release(buf, true);
}

// ce's broadcast into symmetric buffers on teams of 3 or more is a chain of chunks
// (SYMCOMM_COLL_CE_CHAIN_CHUNKS): 7 chunks with a short last one, then 193 of 64 KiB, from
// every root, in place and not; then calls back to back on the stream without a host
// synchronisation, alternating two receive buffers and cycling the roots, each root sending
// from a buffer of its own, so that a chunk of one call landing in the next would show.
TEST_P(Coll, CeChainWithManyChunks) {
  if (std::strcmp(algo_, "ce") != 0) GTEST_SKIP() << "ce's chain";
  if (n_ < 3) GTEST_SKIP() << "the chain runs on teams of 3 or more";
  const Type& t = kTypes[6];  // float32
  const size_t count = (size_t{12} << 20) / t.size + 5;
  for (const char* chunks : {"7", "1024"}) {
    SCOPED_TRACE(chunks);
    mp::ScopedEnv env("SYMCOMM_COLL_CE_CHAIN_CHUNKS", chunks);
    for (int root = 0; root < n_; ++root) broadcast_case(t, root, count, true);
    const size_t bytes = count * t.size;
    void* send = buffer(bytes, false);
    void* recv[2] = {buffer(bytes, true), buffer(bytes, true)};
    put(send, make(t, seed_, me_, 0, count));
    poison(recv[0], bytes);
    poison(recv[1], bytes);
    SC_OK(symcommHostBarrier(comm_));
    const int calls = 2 * n_ + 1;
    int last_root[2] = {-1, -1};
    for (int k = 0; k < calls; ++k) {
      const int root = (k * 2 + 1) % n_;
      SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv[k % 2], count, t.id,
                                     root, algo_, stream_));
      last_root[k % 2] = root;
    }
    for (int b = 0; b < 2; ++b)
      EXPECT_EQ(differences(fetch(recv[b], bytes), make(t, seed_, last_root[b], 0, count), t.size),
                "") << "receive buffer " << b;
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    release(recv[0], true);
    release(recv[1], true);
  }
}

// One all-to-all of 1 GiB per rank and one all-gather into 1 GiB, by the automatic choice
// with the default settings, on plain and symmetric receive buffers (the table's largest
// rows), checked on the GPU against the test pattern. Needs 16 GiB free on every GPU.
TEST(CollLarge, OneGiBAllToAllAndAllGather) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "1 GiB per rank: GPUs only";
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (!mp::all_ok(free_bytes >= (size_t{16} << 30))) GTEST_SKIP() << "a GPU has less than 16 GiB free";
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t s = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const size_t all = size_t{1} << 30, block = all / static_cast<size_t>(n);
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  char* send = static_cast<char*>(mp::local_alloc(all));
  for (int j = 0; j < n; ++j)  // block j: pattern(me, seed + j)
    mp::fill(send + static_cast<size_t>(j) * block, block, me, seed + static_cast<uint64_t>(j));
  for (bool sym : {false, true}) {
    void* p = nullptr;
    if (sym) {
      SC_OK(symcommMalloc(comm, all, &p));
    } else {
      p = mp::local_alloc(all);
    }
    char* recv = static_cast<char*>(p);
    const char* algo[2] = {};
    SC_OK(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllToAll, block, symcommUint8, sym, &algo[0]));
    SC_OK(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllGather, block, symcommUint8, sym, &algo[1]));
    SCOPED_TRACE(std::string(sym ? "symmetric" : "plain") + ": all-to-all by " + algo[0] +
                 ", all-gather by " + algo[1]);
    mp::fill(recv, all, n, 1);  // poison: no member's pattern
    SC_OK(symcommHostBarrier(comm));
    SC_OK(symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, block, symcommUint8, nullptr, s));
    mp::sync(s);
    for (int r = 0; r < n; ++r)  // block r: block `me` of member r's send
      EXPECT_EQ(mp::count_mismatches(recv + static_cast<size_t>(r) * block, block, r,
                                     seed + static_cast<uint64_t>(me)), 0u) << "all-to-all from " << r;
    SC_OK(symcommHostBarrier(comm));
    mp::fill(recv, all, n, 1);
    SC_OK(symcommHostBarrier(comm));
    SC_OK(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, block, symcommUint8, nullptr, s));
    mp::sync(s);
    for (int r = 0; r < n; ++r)  // block r: block 0 of member r's send
      EXPECT_EQ(mp::count_mismatches(recv + static_cast<size_t>(r) * block, block, r, seed), 0u)
          << "all-gather from " << r;
    SC_OK(symcommHostBarrier(comm));
    if (sym) {
      SC_OK(symcommFree(comm, p));
    } else {
      mp::local_free(p);
    }
  }
  mp::local_free(send);
  mp::free_stream(s);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// A team of the even ranks: an all-gather, then all-reduces on the team and on the world
// interleaved (algorithms that keep per-pair counters must stay in step across teams).
TEST_P(Coll, OnATeam) {
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n_ + 1) / 2, &even));
  // An algorithm that runs across nodes only does not run on a team of one node (2 ranks as
  // 2 nodes: the even team is rank 0 alone): the team's calls are left out, the world's stay.
  int node = 0, nodes = 0;
  SC_OK(symcommCommNode(comm_, &node, &nodes));
  std::vector<int> node_of(static_cast<size_t>(n_));
  SC_OK(symcommHostAllgather(comm_, &node, node_of.data(), sizeof node));
  std::set<int> even_nodes;
  for (int r = 0; r < n_; r += 2) even_nodes.insert(node_of[static_cast<size_t>(r)]);
  if (!caps_.reaches(static_cast<int>(even_nodes.size())) && even != SYMCOMM_TEAM_INVALID) {
    SC_OK(symcommTeamDestroy(comm_, even));
    even = SYMCOMM_TEAM_INVALID;
  }
  const Type& t = kTypes[6];
  const size_t count = 5000, b = count * t.size;
  const bool moves = caps_.does(symcommCollAllGather), reduces = caps_.does(symcommCollAllReduce);
  const int size = (n_ + 1) / 2;
  if (!moves && !reduces) {
    if (lacks({Op::Broadcast})) GTEST_SKIP() << algo_ << " does none of the team's operations";
    // relay: broadcasts on the team and on the world, interleaved, into symmetric buffers
    // (allocated by every rank: a collective call); per-pair counters must stay in step.
    std::vector<void*> recvs;
    for (int k = 0; k < 4; ++k) recvs.push_back(buffer(b, true));
    void* send = buffer(b, false);
    for (int k = 0; k < 4; ++k) {
      const bool on_even = k % 2 == 0;
      SCOPED_TRACE((on_even ? "even team, call " : "world, call ") + std::to_string(k));
      if (on_even && even == SYMCOMM_TEAM_INVALID) continue;
      const int root = on_even ? k / 2 % size : (k + 1) % n_;  // team ranks
      const int root_world = on_even ? 2 * root : root;
      put(send, make(t, seed_ + static_cast<uint64_t>(k), me_, 0, count));
      poison(recvs[static_cast<size_t>(k)], b);
      SC_OK(symcommBroadcastOnStream(comm_, on_even ? even : SYMCOMM_TEAM_WORLD, send,
                                     recvs[static_cast<size_t>(k)], count, t.id, root, algo_,
                                     stream_));
      mp::sync(stream_);  // send is written again for the next call
      EXPECT_EQ(differences(fetch(recvs[static_cast<size_t>(k)], b),
                            make(t, seed_ + static_cast<uint64_t>(k), root_world, 0, count), t.size),
                "");
    }
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    for (void* p : recvs) release(p, true);
    if (even != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, even));
    return;
  }
  // Symmetric where the algorithm writes receive buffers in place only (allocated by every
  // rank: a collective call).
  void* recv = moves ? buffer(b * static_cast<size_t>(size), caps_.in_place_recv) : nullptr;
  if (even != SYMCOMM_TEAM_INVALID && moves) {
    void* send = buffer(b, false);
    put(send, make(t, seed_, me_, 0, count));
    poison(recv, b * size);
    SC_OK(symcommAllGatherOnStream(comm_, even, send, recv, count, t.id, algo_, stream_));
    std::vector<uint8_t> want;
    for (int k = 0; k < size; ++k) {
      auto part = make(t, seed_, 2 * k, 0, count);
      want.insert(want.end(), part.begin(), part.end());
    }
    EXPECT_TRUE(fetch(recv, b * size) == want);
    release(send, false);
  }
  if (moves) {
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));  // the team's writes into recv are done everywhere
    release(recv, caps_.in_place_recv);
  }
  for (int k = 0; k < 4 && reduces; ++k) {
    const bool on_even = k % 2 == 0;
    SCOPED_TRACE((on_even ? "even team, call " : "world, call ") + std::to_string(k));
    if (on_even && even == SYMCOMM_TEAM_INVALID) continue;
    void* buf = buffer(b, false);
    put(buf, make(t, seed_ + static_cast<uint64_t>(k), me_, 0, count));
    SC_OK(symcommAllReduceOnStream(comm_, on_even ? even : SYMCOMM_TEAM_WORLD, buf, buf, count,
                                   t.id, symcommSum, algo_, stream_));
    std::vector<uint8_t> want = reduced(t, symcommSum, seed_ + static_cast<uint64_t>(k), n_, 0,
                                        count, on_even ? 2 : 1);
    EXPECT_TRUE(fetch(buf, b) == want);
    release(buf, false);
  }
  if (even != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, even));
}

// Reductions on symmetric buffers, which twoshot reads and writes in place, also at an
// offset of one element (not 16-aligned: staged instead) and in place.
TEST_P(Coll, ReductionsOnSymmetricBuffers) {
  if (lacks({Op::ReduceScatter, Op::AllReduce})) GTEST_SKIP() << algo_ << " does not do both";
  for (bool shifted : {false, true})
    for (int ti : {0, 5, 6, 7})  // int8, bfloat16, float32, float64
      for (size_t count : {size_t{1}, size_t{7}, size_t{1001}, size_t{50001}, size_t{300000}}) {
        const Type& t = kTypes[ti];
        const size_t shift = shifted ? t.size : 0;  // elements stay aligned
        const symcommRedOp_t op = ti == 0 ? symcommMax : symcommSum;
        SCOPED_TRACE(std::string(t.name) + " count " + std::to_string(count) + " shift " +
                     std::to_string(shift));
        const size_t b = count * t.size;
        char* send = static_cast<char*>(buffer(b * n_ + shift, true)) + shift;
        char* recv = static_cast<char*>(buffer(b + shift, true)) + shift;
        put(send, make(t, seed_, me_, 0, count * n_));
        poison(recv, b);
        SC_OK(symcommHostBarrier(comm_));
        SC_OK(symcommReduceScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                           algo_, stream_));
        std::vector<uint8_t> want = reduced(t, op, seed_, n_, me_ * count, count);
        EXPECT_EQ(differences(fetch(recv, b), want, t.size), "") << "reduce-scatter";
        poison(recv, b);
        SC_OK(symcommHostBarrier(comm_));
        SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send + b, recv, count, t.id, op,
                                       algo_, stream_));
        want = reduced(t, op, seed_, n_, count, count);
        EXPECT_EQ(differences(fetch(recv, b), want, t.size), "") << "all-reduce";
        SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, send, count, t.id, op,
                                       algo_, stream_));
        want = reduced(t, op, seed_, n_, 0, count);
        EXPECT_EQ(differences(fetch(send, b), want, t.size), "") << "all-reduce in place";
        SC_OK(symcommHostBarrier(comm_));  // every peer is done with the buffers
        release(send - shift, true);
        release(recv - shift, true);
      }
}

// The Coll tests of every file of the binary, once per algorithm.
INSTANTIATE_TEST_SUITE_P(Algorithms, Coll, ::testing::ValuesIn(algorithms()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace coll_test
