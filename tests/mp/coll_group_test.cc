// Collectives inside a group (symcommGroupStart / symcommGroupEnd, coll/p2p.h): they run when
// the group ends, not when called; ordered by communicator, so that ranks that called two
// communicators' collectives in opposite orders still meet; host count arrays of an
// all-to-all-v are copied when queued; a refused collective is reported by the group's end;
// collectives mix with sends and receives. Both spaces (GPU memory and a stream in the cuda
// space); sums of small integers, exact in any order.
#include <cstring>
#include <string>
#include <vector>

#include "stream_fixture.h"

namespace {

class CollGroup : public StreamTest {
 protected:
  // Rank r's input, element i, for call k.
  static float in(int r, size_t i, int k) { return static_cast<float>((r + 1) * (k + 1) + i % 7); }
  // The sum over ranks of in(r, i, k).
  float sum(size_t i, int k) const {
    float s = 0;
    for (int r = 0; r < n_; ++r) s += in(r, i, k);
    return s;
  }
  std::vector<float> inputs(size_t count, int k) const {
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = in(me_, i, k);
    return v;
  }
};

constexpr float kPoison = -12345.0f;

TEST_F(CollGroup, CollectivesRunWhenTheGroupEnds) {
  const size_t count = 1000;
  float* send = buffer(inputs(count, 0));
  float* recv = buffer(std::vector<float>(count, kPoison));
  SC_OK(symcommGroupStart());
  SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, symcommFloat32,
                                 symcommSum, nullptr, stream_));
  EXPECT_EQ(read(recv, 1)[0], kPoison) << "the all-reduce ran before the group's end";
  SC_OK(symcommGroupEnd());
  const std::vector<float> got = read(recv, count);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], sum(i, 0)) << "element " << i;
}

// Small all-reduces of a group run packed into one (capi/coll_batch.h): sizes that are no
// multiple of anything, one in place, one far larger than a packed call may be (it runs
// alone, between two runs), an average (another run), and a call whose send is an earlier
// call's recv, which must read that call's result, as calls run in turn do.
TEST_F(CollGroup, SmallAllReducesRunPackedAsIfInTurn) {
  const std::vector<size_t> counts = {1, 7, 1000, 3, 4101, 70000, 9, 250, 5};
  const size_t calls = counts.size();
  std::vector<float*> send(calls), recv(calls);
  for (size_t k = 0; k < calls; ++k) {
    send[k] = buffer(inputs(counts[k], static_cast<int>(k)));
    recv[k] = k == 3 ? send[k] : buffer(std::vector<float>(counts[k], kPoison));  // in place
  }
  float* chained = buffer(std::vector<float>(counts[1], kPoison));  // all-reduce of recv[1]
  float* avg = buffer(std::vector<float>(counts[2], kPoison));
  SC_OK(symcommGroupStart());
  for (size_t k = 0; k < calls; ++k) {
    SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send[k], recv[k], counts[k],
                                   symcommFloat32, symcommSum, nullptr, stream_));
    if (k == 1)
      SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, recv[1], chained, counts[1],
                                     symcommFloat32, symcommSum, nullptr, stream_));
    if (k == 6)
      SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send[2], avg, counts[2],
                                     symcommFloat32, symcommAvg, nullptr, stream_));
  }
  SC_OK(symcommGroupEnd());
  for (size_t k = 0; k < calls; ++k) {
    const std::vector<float> got = read(recv[k], counts[k]);
    for (size_t i = 0; i < counts[k]; ++i)
      ASSERT_EQ(got[i], sum(i, static_cast<int>(k))) << "call " << k << ", element " << i;
  }
  const std::vector<float> twice = read(chained, counts[1]), mean = read(avg, counts[2]);
  for (size_t i = 0; i < counts[1]; ++i)
    ASSERT_EQ(twice[i], n_ * sum(i, 1)) << "the chained call, element " << i;
  for (size_t i = 0; i < counts[2]; ++i)
    ASSERT_EQ(mean[i], sum(i, 2) / n_) << "the average, element " << i;
}

TEST_F(CollGroup, OverlappingAllReducesRunAsIfInTurn) {
  // A reads x and writes y; B writes x (A's input: A must have read it first); C and D both
  // write w (D's result must be what stays). Each pair may not run in one kernel at once.
  const size_t count = 3001;
  float* x = buffer(inputs(count, 4));
  float* y = buffer(std::vector<float>(count, kPoison));
  float* z = buffer(inputs(count, 5));
  float* p = buffer(inputs(count, 6));
  float* q = buffer(inputs(count, 7));
  float* w = buffer(std::vector<float>(count, kPoison));
  auto all_reduce = [&](const float* send, float* recv) {
    SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, symcommFloat32,
                                   symcommSum, nullptr, stream_));
  };
  SC_OK(symcommGroupStart());
  all_reduce(x, y);  // A
  all_reduce(z, x);  // B
  all_reduce(p, w);  // C
  all_reduce(q, w);  // D
  SC_OK(symcommGroupEnd());
  const std::vector<float> a = read(y, count), b = read(x, count), d = read(w, count);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(a[i], sum(i, 4)) << "A, element " << i;
    ASSERT_EQ(b[i], sum(i, 5)) << "B, element " << i;
    ASSERT_EQ(d[i], sum(i, 7)) << "D, element " << i;
  }
}

TEST_F(CollGroup, SmallAllReducesReplayFromAGraph) {
  // The cuda space: a group of small all-reduces (one ll kernel on their own buffers, or
  // packed) captured into a CUDA graph, replayed three times with fresh data.
  if (!cuda()) GTEST_SKIP() << "CUDA graphs: the cuda space";
  const std::vector<size_t> counts = {5, 300, 1, 2000};
  std::vector<float*> send, recv;
  for (size_t c : counts) {
    send.push_back(buffer(std::vector<float>(c, 0.0f)));
    recv.push_back(buffer(std::vector<float>(c, kPoison)));
  }
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  SC_OK(symcommGroupStart());
  for (size_t k = 0; k < counts.size(); ++k)
    SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send[k], recv[k], counts[k],
                                   symcommFloat32, symcommSum, nullptr, stream_));
  SC_OK(symcommGroupEnd());
  void* exec = mp::end_capture(stream_);
  ASSERT_NE(exec, nullptr);
  for (int replay = 0; replay < 3; ++replay) {
    for (size_t k = 0; k < counts.size(); ++k) {
      const std::vector<float> v = inputs(counts[k], static_cast<int>(k) + 10 * replay);
      mp::copy_from_host(send[k], v.data(), v.size() * sizeof(float));
      const std::vector<float> poison(counts[k], kPoison);
      mp::copy_from_host(recv[k], poison.data(), poison.size() * sizeof(float));
    }
    SC_OK(symcommHostBarrier(comm_));  // every rank's new data is in place
    ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    for (size_t k = 0; k < counts.size(); ++k) {
      const std::vector<float> got = read(recv[k], counts[k]);
      for (size_t i = 0; i < counts[k]; ++i)
        ASSERT_EQ(got[i], sum(i, static_cast<int>(k) + 10 * replay))
            << "replay " << replay << ", call " << k << ", element " << i;
    }
    SC_OK(symcommHostBarrier(comm_));  // every rank read its results before the next replay
  }
  mp::destroy_graph(exec);
}

TEST_F(CollGroup, TwoCommunicatorsInOppositeOrdersMeet) {
  // Even ranks call the all-reduce of A, then B's; odd ranks B's, then A's. Run as called,
  // the ranks would each wait in a different communicator.
  symcommComm_t b_comm = mp::new_comm();
  ASSERT_NE(b_comm, nullptr);
  const size_t count = 4096;
  float* sa = buffer(inputs(count, 1));
  float* sb = buffer(inputs(count, 2));
  float* ra = buffer(std::vector<float>(count, kPoison));
  float* rb = buffer(std::vector<float>(count, kPoison));
  auto on_a = [&] {
    return symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, sa, ra, count, symcommFloat32,
                                    symcommSum, nullptr, stream_);
  };
  auto on_b = [&] {
    return symcommAllReduceOnStream(b_comm, SYMCOMM_TEAM_WORLD, sb, rb, count, symcommFloat32,
                                    symcommSum, nullptr, stream_);
  };
  SC_OK(symcommGroupStart());
  if (me_ % 2 == 0) {
    SC_OK(on_a());
    SC_OK(on_b());
  } else {
    SC_OK(on_b());
    SC_OK(on_a());
  }
  SC_OK(symcommGroupEnd());
  const std::vector<float> a = read(ra, count), b = read(rb, count);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(a[i], sum(i, 1)) << "A, element " << i;
    ASSERT_EQ(b[i], sum(i, 2)) << "B, element " << i;
  }
  EXPECT_EQ(symcommFinalize(b_comm), symcommSuccess) << symcommGetLastError();
}

TEST_F(CollGroup, AllToAllvCountsAreCopiedWhenQueued) {
  const size_t count = 33, nn = static_cast<size_t>(n_);
  std::vector<float> mine(count * nn);
  for (size_t j = 0; j < nn; ++j)
    for (size_t i = 0; i < count; ++i) mine[j * count + i] = in(me_, j * 1000 + i, 3);
  float* send = buffer(mine);
  float* recv = buffer(std::vector<float>(count * nn, kPoison));
  std::vector<size_t> counts(nn, count), displs(nn);
  for (size_t j = 0; j < nn; ++j) displs[j] = j * count;
  std::vector<size_t> sc = counts, sd = displs, rc = counts, rd = displs;
  SC_OK(symcommGroupStart());
  SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(), recv,
                                 rc.data(), rd.data(), symcommFloat32, nullptr, stream_));
  // The caller's arrays change before the group ends: the queued call keeps its own.
  for (std::vector<size_t>* v : {&sc, &sd, &rc, &rd}) v->assign(nn, ~size_t{0});
  SC_OK(symcommGroupEnd());
  const std::vector<float> got = read(recv, count * nn);
  const size_t me = static_cast<size_t>(me_);
  for (size_t j = 0; j < nn; ++j)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[j * count + i], in(static_cast<int>(j), me * 1000 + i, 3))
          << "from rank " << j << ", element " << i;
}

TEST_F(CollGroup, ARefusedCollectiveIsReportedByTheGroupsEnd) {
  float* send = buffer(inputs(8, 4));
  float* recv = buffer(std::vector<float>(8, kPoison));
  SC_OK(symcommGroupStart());
  SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 8,
                                 static_cast<symcommDataType_t>(99), symcommSum, nullptr,
                                 stream_));  // queued: checked when it runs
  SC_FAILS_SAYING(symcommGroupEnd(), symcommInvalidArgument, "a collective of the group");
  // A bad communicator is refused at once, not queued.
  SC_OK(symcommGroupStart());
  SC_FAILS(symcommAllReduceOnStream(nullptr, SYMCOMM_TEAM_WORLD, send, recv, 8, symcommFloat32,
                                    symcommSum, nullptr, stream_),
           symcommInvalidArgument);
  SC_OK(symcommGroupEnd());
  // The communicator still works.
  SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 8, symcommFloat32,
                                 symcommSum, nullptr, stream_));
  const std::vector<float> got = read(recv, 8);
  for (size_t i = 0; i < 8; ++i) ASSERT_EQ(got[i], sum(i, 4));
}

TEST_F(CollGroup, CollectivesMixWithSendsAndReceives) {
  // A ring of sends and receives and a broadcast from rank 0 in one group, the broadcast
  // called last on even ranks and first on odd ones.
  const int right = (me_ + 1) % n_, left = (me_ + n_ - 1) % n_;
  const size_t count = 70000;  // more than 4 slots of the mailbox: both lanes must move
  float* out = buffer(inputs(count, 5));
  float* got_ring = buffer(std::vector<float>(count, kPoison));
  float* bsrc = buffer(inputs(count, 6));
  float* bdst = buffer(std::vector<float>(count, kPoison));
  auto bcast = [&] {
    return symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, bsrc, bdst, count, symcommFloat32,
                                    0, nullptr, stream_);
  };
  SC_OK(symcommGroupStart());
  if (me_ % 2 == 1) SC_OK(bcast());
  SC_OK(symcommSendOnStream(comm_, SYMCOMM_TEAM_WORLD, out, count, symcommFloat32, right,
                            stream_));
  SC_OK(symcommRecvOnStream(comm_, SYMCOMM_TEAM_WORLD, got_ring, count, symcommFloat32, left,
                            stream_));
  if (me_ % 2 == 0) SC_OK(bcast());
  SC_OK(symcommGroupEnd());
  const std::vector<float> ring = read(got_ring, count), b = read(bdst, count);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_EQ(ring[i], in(left, i, 5)) << "ring, element " << i;
    ASSERT_EQ(b[i], in(0, i, 6)) << "broadcast, element " << i;
  }
}

}  // namespace
