// Collectives in sequence: back to back on one stream with no host synchronisation between
// (buffer reuse races), after a kernel that triggers the call's launch early, chained through
// the same buffers, and captured in a CUDA graph and replayed; every algorithm (coll_test.cc
// instantiates the Coll fixture of coll_fixture.h).
#include "coll_fixture.h"

namespace coll_test {

// Several collectives back to back on one stream, no host synchronisation between them.
TEST_P(Coll, BackToBackWithoutSync) {
  if (broadcasts_only_) {
    // relay: six broadcasts from member k % n into one symmetric buffer, each read by an
    // all-gather (copy) into a buffer of its own before the next broadcast writes the shared
    // one again, all on one stream without a host synchronisation. 400 KB: several lanes and
    // chunks. A member that wrote into a peer's buffer before the peer had read the previous
    // result would show as a wrong block.
    const Type& t = kTypes[1];  // int32
    const size_t count = 100000, b = count * t.size, nb = b * static_cast<size_t>(n_);
    void* shared = buffer(b, true);
    std::vector<void*> sends, outs;
    for (uint64_t k = 0; k < 6; ++k) {
      sends.push_back(buffer(b, false));
      put(sends.back(), make(t, seed_ + k, me_, 0, count));
      outs.push_back(buffer(nb, false));
      poison(outs.back(), nb);
    }
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    for (size_t k = 0; k < 6; ++k) {
      SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, sends[k], shared, count, t.id,
                                     static_cast<int>(k) % n_, algo_, stream_));
      SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, shared, outs[k], count, t.id,
                                     "copy", stream_));
    }
    for (uint64_t k = 0; k < 6; ++k) {
      const std::vector<uint8_t> one = make(t, seed_ + k, static_cast<int>(k) % n_, 0, count);
      std::vector<uint8_t> want;
      for (int r = 0; r < n_; ++r) want.insert(want.end(), one.begin(), one.end());
      EXPECT_EQ(differences(fetch(outs[static_cast<size_t>(k)], nb), want, t.size), "")
          << "call " << k;
    }
    SC_OK(symcommHostBarrier(comm_));
    for (void* p : sends) release(p, false);
    for (void* p : outs) release(p, false);
    release(shared, true);
    return;
  }
  if (moves_only_) {
    // direct: six all-gathers into one symmetric buffer, each read by an all-to-all (its send)
    // into a buffer of its own before the next all-gather writes the shared one again, all
    // on one stream without a host synchronisation. A member that wrote into a peer's buffer
    // before the peer had read the previous result would show as a wrong block.
    const Type& t = kTypes[1];  // int32
    const size_t count = 3000, b = count * t.size, nb = b * static_cast<size_t>(n_);
    void* shared = buffer(nb, true);
    std::vector<void*> sends, outs;
    for (uint64_t k = 0; k < 6; ++k) {
      sends.push_back(buffer(b, false));
      put(sends.back(), make(t, seed_ + k, me_, 0, count));
      outs.push_back(buffer(nb, true));
      poison(outs.back(), nb);
    }
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    for (size_t k = 0; k < 6; ++k) {
      SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, sends[k], shared, count, t.id,
                                     algo_, stream_));
      // Every member sends block j of its copy of `shared` (member j's data) back to member j.
      SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, shared, outs[k], count, t.id,
                                    algo_, stream_));
    }
    for (uint64_t k = 0; k < 6; ++k) {
      // outs[k] on this rank: block r is member r's copy of block `me` of call k's all-gather,
      // this rank's own call-k data.
      const std::vector<uint8_t> mine = make(t, seed_ + k, me_, 0, count);
      std::vector<uint8_t> want;
      for (int r = 0; r < n_; ++r) want.insert(want.end(), mine.begin(), mine.end());
      EXPECT_TRUE(fetch(outs[static_cast<size_t>(k)], nb) == want) << "call " << k;
    }
    SC_OK(symcommHostBarrier(comm_));
    for (void* p : sends) release(p, false);
    for (void* p : outs) release(p, true);
    release(shared, true);
    return;
  }
  if (lacks({Op::AllReduce})) GTEST_SKIP() << algo_ << " does none of the chained operations";
  const Type& t = kTypes[1];  // int32
  const size_t count = 30000, b = count * t.size;
  std::vector<void*> bufs;
  for (int k = 0; k < 6; ++k) {
    void* p = buffer(b, false);
    put(p, make(t, seed_ + static_cast<uint64_t>(k), me_, 0, count));
    bufs.push_back(p);
  }
  mp::sync(stream_);
  for (void* p : bufs)
    SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, p, p, count, t.id, symcommSum,
                                   algo_, stream_));
  for (int k = 0; k < 6; ++k) {
    std::vector<uint8_t> want =
        reduced(t, symcommSum, seed_ + static_cast<uint64_t>(k), n_, 0, count);
    EXPECT_TRUE(fetch(bufs[static_cast<size_t>(k)], b) == want) << "call " << k;
  }
  for (void* p : bufs) release(p, false);
}

// Each rank's send buffer is written by a kernel just before the call on the same stream, one
// that lets the next kernel launch at once and writes only 1 ms later (a kernel written for
// programmatic dependent launch). The collective's kernels start early then (they are
// launched with PDL): they must still read the data, not what was there before.
TEST_P(Coll, ReadsWhatAnEarlyTriggeringKernelWrote) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "a kernel before the call: GPUs only";
  // An all-to-all, or where the algorithm does none a broadcast (of nb bytes from the last
  // rank).
  const bool bcast = !caps_.does(symcommCollAllToAll);
  if (lacks({bcast ? Op::Broadcast : Op::AllToAll})) GTEST_SKIP() << algo_ << " does neither";
  const size_t block = 4096 + 24, nb = block * static_cast<size_t>(n_);
  for (bool sym : {false, true}) {
    SCOPED_TRACE(sym ? "symmetric send" : "plain send");
    void* send = buffer(nb, sym);
    void* recv = buffer(nb, true);
    void* data = buffer(nb, false);
    mp::fill(data, nb, me_, seed_);
    const int root = n_ - 1;
    auto call = [&](const void* from) {
      return bcast
                 ? symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, from, recv, nb,
                                            symcommUint8, root, algo_, stream_)
                 : symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, from, recv, block,
                                           symcommUint8, algo_, stream_);
    };
    // Once before, so that the kernels are loaded (lazy loading can take longer than the
    // delay).
    SC_OK(call(data));
    mp::sync(stream_);
    poison(send, nb);
    poison(recv, nb);
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    mp::copy_after_early_trigger(stream_, send, data, nb, 1000);
    SC_OK(call(send));
    const std::vector<uint8_t> got = fetch(recv, nb);
    size_t wrong = 0;
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < block; ++i)
        wrong += got[static_cast<size_t>(r) * block + i] !=
                 (bcast
                      ? mp::pattern(root, seed_, static_cast<size_t>(r) * block + i)
                      : mp::pattern(r, seed_, static_cast<size_t>(me_) * block + i));
    EXPECT_EQ(wrong, 0u) << "bytes of " << nb << " not the sender's (0xab: read before written)";
    SC_OK(symcommHostBarrier(comm_));
    release(data, false);
    release(send, sym);
    release(recv, true);
  }
}


// Every operation chained on one stream without host synchronisation, each reading what the
// previous one wrote: all-gather, all-to-all, reduce-scatter, broadcast and all-to-all-v,
// twice, between two receive buffers X and Y (each operation reads one and receives into the
// other), so that a buffer is received into again while a slower member may still be
// reading it as the previous operation's input. A member that wrote into a peer's buffer too
// early shows in the final X or Y, compared with a model of every member's buffers. The
// algorithm under test runs every operation it does, copy the others.
TEST_P(Coll, ChainedThroughTheSameBuffers) {
  const Type& t = kTypes[1];  // int32
  const size_t c = 3001, nn = static_cast<size_t>(n_), nc = c * nn, bytes = nc * t.size;
  using Buf = std::vector<int32_t>;
  auto as_bytes = [](const Buf& v) {
    return std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                reinterpret_cast<const uint8_t*>(v.data() + v.size()));
  };
  auto as_ints = [](const std::vector<uint8_t>& v) {
    Buf out(v.size() / 4);
    std::memcpy(out.data(), v.data(), v.size());
    return out;
  };
  // Elements member i sends member j in the all-to-all-v of round `round` (some 0).
  auto vcount = [&](size_t i, size_t j, int round) { return (3 * i + 5 * j + static_cast<size_t>(round) * 7) % (c + 1); };
  for (bool sym : {false, true}) {
    SCOPED_TRACE(sym ? "symmetric" : "plain");
    // The model: every member's input [0], X [1] and Y [2].
    std::vector<std::array<Buf, 3>> model(nn);
    for (size_t r = 0; r < nn; ++r)
      model[r] = {as_ints(make(t, seed_, static_cast<int>(r), 0, c)), Buf(nc, static_cast<int32_t>(0xABABABABu)),
                  Buf(nc, static_cast<int32_t>(0xABABABABu))};
    void* bufs[3] = {buffer(c * t.size, false), buffer(bytes, sym), buffer(bytes, sym)};
    put(bufs[0], as_bytes(model[static_cast<size_t>(me_)][0]));
    poison(bufs[1], bytes);
    poison(bufs[2], bytes);
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    int from = 0, to = 1;
    for (int round = 0; round < 2; ++round)
      for (Op op : {Op::AllGather, Op::AllToAll, Op::ReduceScatter, Op::Broadcast, Op::AllToAllv}) {
        SCOPED_TRACE("round " + std::to_string(round) + " op " + std::to_string(static_cast<int>(op)));
        const char* algo = algo_for(op, sym);
        const void* src = bufs[from];
        void* dst = bufs[to];
        std::vector<Buf> in(nn);  // every member's input, before the operation
        for (size_t r = 0; r < nn; ++r) in[r] = model[r][static_cast<size_t>(from)];
        auto out = [&](size_t r) -> Buf& { return model[r][static_cast<size_t>(to)]; };
        const int root = (round + 1) % n_;
        switch (op) {
          case Op::AllGather:
            SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, src, dst, c, t.id, algo, stream_));
            for (size_t r = 0; r < nn; ++r)
              for (size_t j = 0; j < nn; ++j) std::copy_n(in[j].begin(), c, out(r).begin() + static_cast<long>(j * c));
            break;
          case Op::AllToAll:
            SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, src, dst, c, t.id, algo, stream_));
            for (size_t r = 0; r < nn; ++r)
              for (size_t j = 0; j < nn; ++j)
                std::copy_n(in[j].begin() + static_cast<long>(r * c), c, out(r).begin() + static_cast<long>(j * c));
            break;
          case Op::ReduceScatter:
            SC_OK(symcommReduceScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, src, dst, c, t.id,
                                               symcommSum, algo, stream_));
            for (size_t r = 0; r < nn; ++r)
              for (size_t i = 0; i < c; ++i) {
                int32_t sum = 0;
                for (size_t j = 0; j < nn; ++j) sum += in[j][r * c + i];
                out(r)[i] = sum;
              }
            break;
          case Op::Broadcast:
            SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, src, dst, c, t.id, root,
                                           algo, stream_));
            for (size_t r = 0; r < nn; ++r) std::copy_n(in[static_cast<size_t>(root)].begin(), c, out(r).begin());
            break;
          default: {  // all-to-all-v: block j of the input to member j, packed in reverse order
            std::vector<size_t> sc(nn), sd(nn), rc(nn), rd(nn);
            auto receive_displs = [&](size_t r, std::vector<size_t>& d) {
              size_t at = 0;
              for (size_t i = nn; i-- > 0;) { d[i] = at; at += vcount(i, r, round); }
            };
            const size_t m = static_cast<size_t>(me_);
            for (size_t j = 0; j < nn; ++j) {
              sc[j] = vcount(m, j, round);
              sd[j] = j * c;
              rc[j] = vcount(j, m, round);
            }
            receive_displs(m, rd);
            SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, src, sc.data(), sd.data(), dst,
                                           rc.data(), rd.data(), t.id, algo, stream_));
            for (size_t r = 0; r < nn; ++r) {
              std::vector<size_t> d(nn);
              receive_displs(r, d);
              for (size_t i = 0; i < nn; ++i)
                std::copy_n(in[i].begin() + static_cast<long>(r * c), vcount(i, r, round),
                            out(r).begin() + static_cast<long>(d[i]));
            }
          }
        }
        from = to;
        to = to == 1 ? 2 : 1;
      }
    const auto& mine = model[static_cast<size_t>(me_)];
    EXPECT_EQ(differences(fetch(bufs[1], bytes), as_bytes(mine[1]), t.size), "") << "X";
    EXPECT_EQ(differences(fetch(bufs[2], bytes), as_bytes(mine[2]), t.size), "") << "Y";
    SC_OK(symcommHostBarrier(comm_));
    release(bufs[0], false);
    release(bufs[1], sym);
    release(bufs[2], sym);
  }
}

// Every operation captured once in a CUDA graph, on plain and on symmetric receive buffers,
// and replayed with new inputs each time (all-to-all-v with counts on the device: new counts
// too, which its kernels read when they run). An operation the algorithm refuses by design
// (Coll::refuses, in a capture) is refused in the capture too, which stays usable.
TEST_P(Coll, CapturedInAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  const Type& t = kTypes[6];  // float32
  const size_t count = 20000, nn = static_cast<size_t>(n_), b = count * t.size, vmax = 3000;
  const int root = n_ - 1;
  // All-to-all-v: extents that hold any layout of counts below vmax.
  const size_t vse = nn * (vmax + 3) + 6, vre = nn * (vmax + 1) + 1;
  const VLayout fixed = random_layout(seed_ + 5, n_, vmax);  // host counts: captured as they are
  const std::vector<size_t> sc = fixed.sends(me_), sd = fixed.sdispls(me_),
                            rc = fixed.receives(me_), rd = fixed.rdispls(me_);
  for (bool sym : {false, true}) {
    SCOPED_TRACE(sym ? "symmetric" : "plain");
    void* send = buffer(b * nn, false);
    void* vsend = buffer(vse * t.size, false);
    auto* counts = static_cast<size_t*>(buffer(4 * nn * sizeof(size_t), false));
    struct Out {
      Op op;
      const char* name;
      size_t bytes;
      void* p;
      bool captured;
    };
    std::vector<Out> outs = {
        {Op::AllGather, "all-gather", b * nn, nullptr, false},
        {Op::AllToAll, "all-to-all", b * nn, nullptr, false},
        {Op::ReduceScatter, "reduce-scatter", b, nullptr, false},
        {Op::AllReduce, "all-reduce", b, nullptr, false},
        {Op::Broadcast, "broadcast", b, nullptr, false},
        {Op::Reduce, "reduce", b, nullptr, false},
        {Op::Gather, "gather", b * nn, nullptr, false},
        {Op::Scatter, "scatter", b, nullptr, false},
        {Op::AllToAllv, "all-to-all-v", vre * t.size, nullptr, false},
        {Op::AllToAllvDevice, "all-to-all-v, device counts", vre * t.size, nullptr, false}};
    for (Out& o : outs) o.p = buffer(o.bytes, sym);
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    ASSERT_EQ(mp::begin_capture(stream_), 0);
    for (Out& o : outs) {
      const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
      symcommResult_t rc_ = symcommSuccess;
      switch (o.op) {
        case Op::AllGather: rc_ = symcommAllGatherOnStream(comm_, w, send, o.p, count, t.id, algo_, stream_); break;
        case Op::AllToAll: rc_ = symcommAllToAllOnStream(comm_, w, send, o.p, count, t.id, algo_, stream_); break;
        case Op::ReduceScatter:
          rc_ = symcommReduceScatterOnStream(comm_, w, send, o.p, count, t.id, symcommSum, algo_, stream_);
          break;
        case Op::AllReduce:
          rc_ = symcommAllReduceOnStream(comm_, w, send, o.p, count, t.id, symcommSum, algo_, stream_);
          break;
        case Op::Broadcast: rc_ = symcommBroadcastOnStream(comm_, w, send, o.p, count, t.id, root, algo_, stream_); break;
        case Op::Reduce:  // (the others' recv is not written: it stays poisoned)
          rc_ = symcommReduceOnStream(comm_, w, send, o.p, count, t.id, symcommSum, root, algo_,
                                      stream_);
          break;
        case Op::Gather: rc_ = symcommGatherOnStream(comm_, w, send, o.p, count, t.id, root, algo_, stream_); break;
        case Op::Scatter: rc_ = symcommScatterOnStream(comm_, w, send, o.p, count, t.id, root, algo_, stream_); break;
        case Op::AllToAllv:
          rc_ = symcommAllToAllvOnStream(comm_, w, vsend, sc.data(), sd.data(), o.p, rc.data(),
                                         rd.data(), t.id, algo_, stream_);
          break;
        case Op::AllToAllvDevice:
          rc_ = symcommAllToAllvDeviceOnStream(comm_, w, vsend, counts, counts + nn, o.p, vre,
                                               counts + 2 * nn, counts + 3 * nn, t.id, algo_, stream_);
          break;
      }
      o.captured = rc_ == symcommSuccess;
      EXPECT_EQ(rc_, refuses(o.op, sym, true) ? symcommNotSupported : symcommSuccess)
          << o.name << ": " << symcommGetLastError();
    }
    void* exec = mp::end_capture(stream_);
    const bool any = std::any_of(outs.begin(), outs.end(), [](const Out& o) { return o.captured; });
    if (any) {
      ASSERT_NE(exec, nullptr);  // (an empty graph need not instantiate)
    }
    for (uint64_t k = 1; k <= 3 && any; ++k) {
      SCOPED_TRACE("replay " + std::to_string(k));
      const uint64_t seed = seed_ + k;
      put(send, make(t, seed, me_, 0, count * nn));
      put(vsend, make(t, seed, me_, 0, vse));
      const VLayout fresh = random_layout(seed + 1000, n_, vmax);
      std::vector<size_t> host(4 * nn, 12345);
      const std::vector<size_t> fs = fresh.sends(me_), fd = fresh.sdispls(me_);
      std::copy(fs.begin(), fs.end(), host.begin());
      std::copy(fd.begin(), fd.end(), host.begin() + static_cast<long>(nn));
      put(counts, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(host.data()),
                                       reinterpret_cast<uint8_t*>(host.data() + host.size())));
      for (Out& o : outs) poison(o.p, o.bytes);
      SC_OK(symcommHostBarrier(comm_));  // every rank's input is in place
      ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
      for (const Out& o : outs) {
        if (!o.captured) continue;
        std::vector<uint8_t> want;
        switch (o.op) {
          case Op::AllGather: want = gathered(t, seed, n_, count); break;
          case Op::AllToAll: want = exchanged(t, seed, n_, me_, count); break;
          case Op::ReduceScatter: want = reduced(t, symcommSum, seed, n_, me_ * count, count); break;
          case Op::AllReduce: want = reduced(t, symcommSum, seed, n_, 0, count); break;
          case Op::Broadcast: want = make(t, seed, root, 0, count); break;
          case Op::Reduce:
            want = me_ == root ? reduced(t, symcommSum, seed, n_, 0, count)
                               : std::vector<uint8_t>(b, 0xAB);
            break;
          case Op::Gather:
            want = me_ == root ? gathered(t, seed, n_, count) : std::vector<uint8_t>(b * nn, 0xAB);
            break;
          case Op::Scatter: want = make(t, seed, root, static_cast<size_t>(me_) * count, count); break;
          case Op::AllToAllv: want = fixed.received(t, seed, me_, vre); break;
          case Op::AllToAllvDevice: {  // packed in team-rank order; this replay's counts
            want.assign(vre * t.size, 0xAB);
            size_t at = 0;
            for (int i = 0; i < n_; ++i) {
              const size_t ci = fresh.counts[static_cast<size_t>(i)][static_cast<size_t>(me_)];
              auto part = make(t, seed, i, fresh.sdispls(i)[static_cast<size_t>(me_)], ci);
              std::copy(part.begin(), part.end(), want.begin() + static_cast<long>(at * t.size));
              at += ci;
            }
            std::vector<uint8_t> raw = fetch(counts + 2 * nn, nn * sizeof(size_t));
            EXPECT_TRUE(std::memcmp(raw.data(), fresh.receives(me_).data(), raw.size()) == 0)
                << "the counts received";
            break;
          }
        }
        EXPECT_EQ(differences(fetch(o.p, o.bytes), want, t.size), "") << o.name;
      }
      SC_OK(symcommHostBarrier(comm_));  // everyone read before the next replay writes
    }
    if (exec) mp::destroy_graph(exec);
    for (Out& o : outs) release(o.p, sym);
    release(send, false);
    release(vsend, false);
    release(counts, false);
  }
}

}  // namespace coll_test
