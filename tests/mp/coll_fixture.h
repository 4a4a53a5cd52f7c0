// What the collective tests share (coll_test.cc and the other coll_*_test.cc files, one
// binary): the Coll fixture, instantiated once per algorithm (and "auto") in coll_test.cc,
// with the calls it checks against the host's reference (coll_reference.h).
#ifndef SYMCOMM_TESTS_MP_COLL_FIXTURE_H_
#define SYMCOMM_TESTS_MP_COLL_FIXTURE_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "coll_caps.h"
#include "coll_reference.h"
#include "mp.h"

// A named namespace: every file of the binary must see the same fixture class.
namespace coll_test {

class Coll : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    n_ = mp::nranks();
    me_ = mp::rank();
    algo_ = GetParam().c_str();
    caps_ = coll_caps::of(algo_, mp::nodes());
    ASSERT_NE(caps_.name, nullptr) << algo_ << " is not registered";
    moves_only_ = !caps_.reduces() && caps_.does(symcommCollAllGather) &&
                  caps_.does(symcommCollAllToAll);
    broadcasts_only_ = !caps_.reduces() && !moves_only_ && caps_.does(symcommCollBroadcast);
    // Where its descriptor says it cannot run on the world here (another memory space, a
    // larger team, a world that spans nodes where it needs load/store reach, or one node
    // where it runs across nodes only), its tests skip before they make a communicator:
    // the same answer on every rank. That the library refuses it there too, with a reason,
    // is CollChoice.AlgorithmInfoAndCanRunFollowTheDescriptors's to check.
    if (!caps_.runs_in(mp::space()) || !caps_.fits(n_) || !caps_.reaches(mp::nodes()))
      GTEST_SKIP() << algo_ << " does not run on the world here, as its descriptor says";
    // A small workspace and the smallest sm rings (4 KiB slots: 32 channels x 4 slots per
    // sender): large sizes go through them in several pieces.
    mp::ScopedEnv ws("SYMCOMM_COLL_WORKSPACE", "64K");
    mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", std::to_string(mp::nranks() * 512) + "K");
    // twoshot's staging areas of 64 KiB: plain buffers go through them in many rounds.
    mp::ScopedEnv stage("SYMCOMM_COLL_TWOSHOT_BYTES", "64K");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    seed_ = mp::test_seed();
    seed_trace_.emplace(__FILE__, __LINE__, mp::seed_note(seed_));  // in every failure
    const symcommCollOp_t op = caps_.first_op();
    // Elsewhere one call of an operation it does, on buffers it takes. The same answer on
    // every rank: the algorithm runs here or not at all. Only an algorithm built on a library
    // loaded at run time may refuse (NCCL missing, ranks that share a GPU): it refuses
    // everything then, and its tests skip; any other refusal is a failure.
    std::string why;
    const symcommResult_t rc = tiny_call(op, caps_.in_place_recv, &why);
    if (rc == symcommNotSupported && caps_.library != nullptr)
      GTEST_SKIP() << algo_ << " (" << caps_.library << "): " << why;
    ASSERT_EQ(rc, symcommSuccess) << why;
  }
  void TearDown() override {
    if (!comm_) return;
    mp::free_stream(stream_);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }
  // A buffer of the space under test: symmetric or plain.
  void* buffer(size_t bytes, bool symmetric) {
    void* p = nullptr;
    if (symmetric) {
      EXPECT_EQ(symcommMalloc(comm_, bytes ? bytes : 1, &p), symcommSuccess) << symcommGetLastError();
    } else {
      p = mp::local_alloc(bytes ? bytes : 1);
    }
    return p;
  }
  void release(void* p, bool symmetric) {
    if (symmetric) {
      EXPECT_EQ(symcommFree(comm_, p), symcommSuccess) << symcommGetLastError();
    } else {
      mp::local_free(p);
    }
  }
  std::vector<uint8_t> fetch(const void* p, size_t bytes) { return mp::fetch(stream_, p, bytes); }
  // One call of `op` on one float (all-to-all-v: one per member) by the algorithm under
  // test, on a plain send and a receive buffer symmetric or not, after which the stream is
  // synchronised: its result code, and in *why the error's message.
  symcommResult_t tiny_call(symcommCollOp_t op, bool symmetric, std::string* why) {
    const size_t b = sizeof(float) * static_cast<size_t>(n_);
    void* send = buffer(b, false);
    void* recv = buffer(b, symmetric);
    const symcommResult_t rc = coll_caps::call_op(comm_, SYMCOMM_TEAM_WORLD, op, send, recv, 1,
                                                  n_, symcommFloat32, algo_, stream_);
    *why = rc == symcommSuccess ? "" : symcommGetLastError();
    mp::sync(stream_);
    release(send, false);
    release(recv, symmetric);
    return rc;
  }
  // `op` on such buffers is refused, with a reason (checked: the descriptor's refusals are
  // the library's).
  void expect_refused(symcommCollOp_t op, bool symmetric) {
    std::string why;
    EXPECT_EQ(tiny_call(op, symmetric, &why), symcommNotSupported) << why;
    const size_t at = why.find(" here: ");
    EXPECT_TRUE(at != std::string::npos && at + 7 < why.size()) << why;
  }
  // Whether its descriptor leaves out any of `ops`: then the first of them is refused, with
  // a reason (checked here), and the caller skips the test.
  bool lacks(std::initializer_list<Op> ops) {
    for (Op op : ops)
      if (!caps_.does(api_op(op))) {
        expect_refused(api_op(op), caps_.in_place_recv);
        return true;
      }
    return false;
  }
  // The algorithm writes receive buffers in place only: a plain one is refused (checked
  // here); true where the caller must skip a plain receive buffer.
  bool plain_recv_refused(bool symmetric) {
    if (symmetric || !caps_.in_place_recv) return false;
    expect_refused(caps_.first_op(), false);
    return true;
  }
  // Whether the algorithm under test refuses `op` by its descriptor (buffers symmetric or
  // not; in a CUDA graph capture or not): an operation it does not do, counts on the device
  // outside the spaces it reads them in, a plain receive buffer where it writes in place, an
  // operation it cannot capture. The tests count any other refusal as a failure.
  bool refuses(Op op, bool symmetric, bool captured = false) const {
    if (op == Op::AllToAllvDevice) return !caps_.device_counts_in(mp::space());
    const symcommCollOp_t o = api_op(op);
    if (!caps_.declares(o, mp::space(), n_, symmetric)) return true;
    return captured && !caps_.captures(o);
  }
  // The algorithm for `op` in tests that chain every operation: the one under test, or copy
  // where it refuses the operation.
  const char* algo_for(Op op, bool symmetric) const {
    return refuses(op, symmetric) ? "copy" : algo_;
  }
  void put(void* p, const std::vector<uint8_t>& v) { mp::store(p, v); }
  void poison(void* p, size_t bytes) { put(p, std::vector<uint8_t>(bytes, 0xAB)); }
  // The largest `v` over the ranks (through the host all-gather).
  symcommResult_t max_over_ranks(size_t& v) {
    std::vector<size_t> all(static_cast<size_t>(n_));
    symcommResult_t rc = symcommHostAllgather(comm_, &v, all.data(), sizeof v);
    v = *std::max_element(all.begin(), all.end());
    return rc;
  }

  // Each operation once, on fresh buffers, checked against the host's reference (plain send
  // buffers; the receive buffer symmetric or not).
  void all_gather_case(const Type& t, size_t count, bool sym) {
    SCOPED_TRACE(std::string(t.name) + (sym ? " symmetric" : " plain") + " count " + std::to_string(count));
    const size_t b = count * t.size;
    void* send = buffer(b, false);
    void* recv = buffer(b * n_, sym);
    put(send, make(t, seed_, me_, 0, count));
    poison(recv, b * n_);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, algo_, stream_));
    EXPECT_EQ(differences(fetch(recv, b * n_), gathered(t, seed_, n_, count), t.size), "");
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    release(recv, sym);
  }
  void all_to_all_case(const Type& t, size_t count, bool sym) {
    SCOPED_TRACE(std::string(t.name) + (sym ? " symmetric" : " plain") + " count " + std::to_string(count));
    const size_t b = count * t.size;
    void* send = buffer(b * n_, false);
    void* recv = buffer(b * n_, sym);
    put(send, make(t, seed_, me_, 0, count * n_));  // block j: elements j*count ..
    poison(recv, b * n_);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, algo_, stream_));
    EXPECT_EQ(differences(fetch(recv, b * n_), exchanged(t, seed_, n_, me_, count), t.size), "");
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    release(recv, sym);
  }
  // Reduce-scatter, then all-reduce in place on the first `count` elements of its send.
  void reductions_case(const Type& t, symcommRedOp_t op, size_t count) {
    SCOPED_TRACE(std::string(t.name) + " op " + std::to_string(op) + " count " + std::to_string(count));
    const size_t b = count * t.size;
    void* send = buffer(b * n_, false);
    void* recv = buffer(b, false);
    put(send, make(t, seed_, me_, 0, count * n_));
    poison(recv, b);
    SC_OK(symcommReduceScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                       algo_, stream_));
    std::vector<uint8_t> want = reduced(t, op, seed_, n_, me_ * count, count);
    EXPECT_EQ(differences(fetch(recv, b), want, t.size), "") << "reduce-scatter";
    SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, send, count, t.id, op,
                                   algo_, stream_));
    want = reduced(t, op, seed_, n_, 0, count);
    EXPECT_EQ(differences(fetch(send, b), want, t.size), "") << "all-reduce in place";
    release(send, false);
    release(recv, false);
  }
  void broadcast_case(const Type& t, int root, size_t count, bool sym) {
    SCOPED_TRACE(std::string(t.name) + (sym ? " symmetric" : " plain") + " root " +
                 std::to_string(root) + " count " + std::to_string(count));
    const size_t b = count * t.size;
    void* send = buffer(b, false);
    void* recv = buffer(b, sym);
    put(send, make(t, seed_, me_, 0, count));
    poison(recv, b);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, root,
                                   algo_, stream_));
    EXPECT_EQ(differences(fetch(recv, b), make(t, seed_, root, 0, count), t.size), "");
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    release(recv, sym);
  }
  // Reduce (by `op`), gather and scatter of `count` elements a member to and from `root`:
  // the root's receive buffer symmetric or not, the others' NULL (scatter: their send NULL);
  // a reduce in place on the root too.
  // Reduce, gather and scatter, those of them the algorithm does (caps_).
  void rooted_case(const Type& t, int root, size_t count, symcommRedOp_t op, bool sym) {
    SCOPED_TRACE(std::string(t.name) + " root " + std::to_string(root) + " count " +
                 std::to_string(count) + " op " + std::to_string(op) + (sym ? " symmetric" : ""));
    const size_t b = count * t.size, nn = static_cast<size_t>(n_);
    const bool is_root = me_ == root;
    void* send = buffer(b * nn, false);
    void* recv = buffer(b * nn, sym);  // (symmetric: allocated by every member)
    void* out = is_root ? recv : nullptr;
    put(send, make(t, seed_, me_, 0, count * nn));
    poison(recv, b * nn);
    if (caps_.does(symcommCollReduce)) {
      SC_OK(symcommReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, out, count, t.id, op, root,
                                  algo_, stream_));
      if (is_root) {
        EXPECT_EQ(differences(fetch(recv, b), reduced(t, op, seed_, n_, 0, count), t.size), "")
            << "reduce";
        put(recv, make(t, seed_, me_, 0, count));
      }
      SC_OK(symcommReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, is_root ? recv : send, out, count,
                                  t.id, op, root, algo_, stream_));
      if (is_root) {
        EXPECT_EQ(differences(fetch(recv, b), reduced(t, op, seed_, n_, 0, count), t.size), "")
            << "reduce in place";
      }
    }
    if (caps_.does(symcommCollGather)) {
      poison(recv, b * nn);
      SC_OK(symcommGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, out, count, t.id, root,
                                  algo_, stream_));
      if (is_root) {
        EXPECT_EQ(differences(fetch(recv, b * nn), gathered(t, seed_, n_, count), t.size), "")
            << "gather";
      }
    }
    if (caps_.does(symcommCollScatter)) {
      poison(recv, b * nn);
      SC_OK(symcommScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, is_root ? send : nullptr, recv,
                                   count, t.id, root, algo_, stream_));
      EXPECT_EQ(differences(fetch(recv, b), make(t, seed_, root, me_ * count, count), t.size),
                "")
          << "scatter";
    }
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    release(recv, sym);
  }
  // All-to-all-v with random counts below max_count (host arrays).
  void all_to_all_v_case(const Type& t, size_t max_count, bool sym) {
    SCOPED_TRACE(std::string(t.name) + (sym ? " symmetric" : " plain") + " max count " +
                 std::to_string(max_count));
    const VLayout v = random_layout(seed_ + max_count, n_, max_count);
    const std::vector<size_t> scounts = v.sends(me_), rcounts = v.receives(me_);
    const std::vector<size_t> sd = v.sdispls(me_), rd = v.rdispls(me_);
    const size_t se = VLayout::extent(sd, scounts) + 1, re = VLayout::extent(rd, rcounts) + 1;
    // The receive extent differs between members; a symmetric buffer has one size.
    size_t re_all = re;
    SC_OK(max_over_ranks(re_all));
    void* send = buffer(se * t.size, false);
    void* recv = buffer(re_all * t.size, sym);
    put(send, make(t, seed_, me_, 0, se));
    poison(recv, re_all * t.size);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, scounts.data(), sd.data(),
                                   recv, rcounts.data(), rd.data(), t.id, algo_, stream_));
    EXPECT_EQ(differences(fetch(recv, re_all * t.size), v.received(t, seed_, me_, re_all), t.size), "");
    SC_OK(symcommHostBarrier(comm_));
    release(send, false);
    release(recv, sym);
  }
  // One all-to-all-v with counts in device memory: its buffers (send, a poisoned recv, and
  // the four count arrays: send counts, send displacements, then recv counts and recv
  // displacements, poisoned) and what it should produce.
  struct DeviceCountsCall {
    VLayout v;
    symcommTeam_t team = SYMCOMM_TEAM_WORLD;
    int n = 0, me = 0;  // the team's size, this rank's team rank
    uint64_t seed = 0;
    size_t capacity = 0;
    void* send = nullptr;
    void* recv = nullptr;
    size_t* counts = nullptr;
  };
  // On `team` (of n members, this rank's team rank me): the world by default.
  DeviceCountsCall device_counts_setup(const Type& t, size_t max_count, uint64_t seed,
                                       symcommTeam_t team = SYMCOMM_TEAM_WORLD, int n = -1,
                                       int me = -1) {
    DeviceCountsCall d;
    d.team = team;
    d.n = n < 0 ? n_ : n;
    d.me = me < 0 ? me_ : me;
    d.v = random_layout(seed + 77 + max_count, d.n, max_count);
    d.seed = seed;
    const size_t nn = static_cast<size_t>(d.n);
    const std::vector<size_t> sc = d.v.sends(d.me), sd = d.v.sdispls(d.me), rc = d.v.receives(d.me);
    size_t total = 0;
    for (size_t c : rc) total += c;
    d.capacity = total - total / 3;  // the last blocks may not fit
    const size_t se = VLayout::extent(sd, sc) + 1;
    d.send = buffer(se * t.size, false);
    d.recv = buffer((d.capacity + 1) * t.size, false);
    d.counts = static_cast<size_t*>(buffer(4 * nn * sizeof(size_t), false));
    std::vector<size_t> host(4 * nn, 12345);
    std::copy(sc.begin(), sc.end(), host.begin());
    std::copy(sd.begin(), sd.end(), host.begin() + static_cast<long>(nn));
    put(d.counts, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(host.data()),
                                       reinterpret_cast<uint8_t*>(host.data() + host.size())));
    put(d.send, make(t, seed, d.me, 0, se));
    poison(d.recv, (d.capacity + 1) * t.size);
    return d;
  }
  symcommResult_t device_counts_run(const DeviceCountsCall& d, const Type& t) {
    const size_t nn = static_cast<size_t>(d.n);
    return symcommAllToAllvDeviceOnStream(comm_, d.team, d.send, d.counts,
                                          d.counts + nn, d.recv, d.capacity, d.counts + 2 * nn,
                                          d.counts + 3 * nn, t.id, algo_, stream_);
  }
  // The blocks arrive packed in team-rank order, blocks beyond the capacity are dropped whole,
  // and the counts and displacements written are the senders'.
  void device_counts_check(const DeviceCountsCall& d, const Type& t) {
    const size_t nn = static_cast<size_t>(d.n), m = static_cast<size_t>(d.me);
    std::vector<uint8_t> raw = fetch(d.counts, 4 * nn * sizeof(size_t));
    const size_t* got_counts = reinterpret_cast<const size_t*>(raw.data()) + 2 * nn;
    const size_t* got_displs = got_counts + nn;
    std::vector<uint8_t> want((d.capacity + 1) * t.size, 0xAB);
    size_t at = 0;
    for (size_t i = 0; i < nn; ++i) {
      const size_t ci = d.v.counts[i][m];
      EXPECT_EQ(got_counts[i], ci) << "count from " << i;
      EXPECT_EQ(got_displs[i], at) << "displacement of " << i;
      if (at + ci <= d.capacity) {
        auto part = make(t, d.seed, static_cast<int>(i), d.v.sdispls(static_cast<int>(i))[m], ci);
        std::copy(part.begin(), part.end(), want.begin() + static_cast<long>(at * t.size));
      }
      at += ci;
    }
    EXPECT_EQ(differences(fetch(d.recv, want.size()), want, t.size), "");
  }
  void device_counts_release(const DeviceCountsCall& d) {
    release(d.send, false);
    release(d.recv, false);
    release(d.counts, false);
  }
  // All-to-all-v with counts in device memory (where the descriptor says the algorithm reads
  // them, and the automatic choice): the counts travel on the device, the blocks arrive
  // packed in team-rank order, and blocks beyond the capacity are dropped whole. Elsewhere
  // it is refused, saying why (checked); false then.
  bool device_counts_case(const Type& t, size_t max_count) {
    SCOPED_TRACE(std::string(t.name) + " max count " + std::to_string(max_count));
    const DeviceCountsCall d = device_counts_setup(t, max_count, seed_);
    EXPECT_EQ(symcommHostBarrier(comm_), symcommSuccess);
    const symcommResult_t rc = device_counts_run(d, t);
    const bool runs = !refuses(Op::AllToAllvDevice, false);
    if (runs) {
      EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
      device_counts_check(d, t);
    } else {  // where its descriptor says it does not read counts on the device: says why
      const std::string why = symcommGetLastError();
      EXPECT_EQ(rc, symcommNotSupported) << why;
      const size_t at = why.find(" here:");  // then the reason, or one line per algorithm
      EXPECT_TRUE(at != std::string::npos && at + 7 < why.size()) << why;
    }
    mp::sync(stream_);
    EXPECT_EQ(symcommHostBarrier(comm_), symcommSuccess);
    device_counts_release(d);
    return runs;
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  int n_ = 0, me_ = 0;
  uint64_t seed_ = 0;
  std::optional<::testing::ScopedTrace> seed_trace_;  // names seed_ until the test ends
  const char* algo_ = nullptr;
  coll_caps::Caps caps_{};  // what algo_ declares it can do ("auto": coll_caps::automatic)
  // From caps_, for the tests that chain calls of the algorithm under test: it does no
  // reductions but all-gather and all-to-all (direct) ...
  bool moves_only_ = false;
  // ... or, of the operations they chain, broadcast alone (relay).
  bool broadcasts_only_ = false;
};
}  // namespace coll_test

#endif  // SYMCOMM_TESTS_MP_COLL_FIXTURE_H_
