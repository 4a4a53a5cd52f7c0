// A random sequence of collectives that goes through every algorithm, back to back on one
// stream without a host synchronisation: each call's operation, team (the world, this rank's
// row or column of a 2D split), type, size (0 to past the workspace and the rings), buffers
// (symmetric or plain, in place) and algorithm (every registered one in turn, and auto) are
// drawn from a seed all ranks share, and many calls read what an earlier call, by another
// algorithm, wrote. What the per-algorithm tests cannot see: one algorithm's call in flight
// while the next, by another, reuses the workspace, writes peers' memory or reads the
// result, across teams. Every rank computes every rank's expected buffers on the host and
// checks its own after one synchronisation at the end. In the cuda space the same sequence
// is then captured in a CUDA graph and replayed with fresh data.
#include <cstdlib>
#include <map>

#include "coll_fixture.h"
#include "mix.h"

namespace coll_test {
namespace {

using mp::MixTeams;

enum class Role { Input, Output, InPlace };

// A buffer of the sequence; `want` is its expected content on every world rank.
struct MixBuffer {
  size_t bytes = 0;
  bool sym = false;
  Role role = Role::Output;
  const Type* t = nullptr;  // Input and InPlace: make()'s type and seed
  uint64_t seed = 0;
  void* p = nullptr;
  std::vector<std::vector<uint8_t>> want;
};

struct MixCall {
  Op op = Op::AllGather;
  int kind = 0;
  const Type* t = nullptr;
  size_t count = 0;
  symcommRedOp_t redop = symcommSum;
  int root = 0;  // team rank
  std::string algo;
  size_t send = 0, recv = 0;  // buffer indices (equal: all-reduce in place)
  bool chained = false;       // send is what an earlier call wrote or read
  VLayout v;                  // all-to-all-v: counts by team rank
  std::string ran;            // what ran, for messages
};

const char* op_name(Op op) {
  switch (op) {
    case Op::AllGather: return "all-gather";
    case Op::AllToAll: return "all-to-all";
    case Op::AllToAllv: return "all-to-all-v";
    case Op::AllToAllvDevice: return "all-to-all-v (device counts)";
    case Op::ReduceScatter: return "reduce-scatter";
    case Op::AllReduce: return "all-reduce";
    case Op::Broadcast: return "broadcast";
    case Op::Reduce: return "reduce";
    case Op::Gather: return "gather";
    case Op::Scatter: return "scatter";
  }
  return "?";
}

class CollMix : public ::testing::Test {
 protected:
  void SetUp() override {
    // A small workspace and small sm rings and twoshot stages: sizes past them go through
    // several pieces, and the rings wrap around within the sequence.
    mp::ScopedEnv ws("SYMCOMM_COLL_WORKSPACE", "256K");
    mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", std::to_string(mp::nranks() * 512) + "K");
    mp::ScopedEnv stage("SYMCOMM_COLL_TWOSHOT_BYTES", "128K");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    n_ = mp::nranks();
    me_ = mp::rank();
    seed_ = mp::mix_seed();
    teams_.make(comm_);
  }
  void TearDown() override {
    if (!comm_) return;
    mp::sync(stream_);
    if (symcommHostBarrier(comm_) == symcommSuccess) {
      for (MixBuffer& b : buffers_) {
        if (b.sym) {
          EXPECT_EQ(symcommFree(comm_, b.p), symcommSuccess) << symcommGetLastError();
        } else {
          mp::local_free(b.p);
        }
      }
    }
    mp::free_stream(stream_);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }

  // The sequence, the same on every rank: `calls` calls whose buffers hold at most
  // `max_bytes` each; `for_capture`: only calls that some algorithm can capture here.
  void plan(int calls, size_t max_bytes, bool for_capture) {
    std::mt19937_64 rng(seed_);
    // SYMCOMM_TEST_MIX_ALGOS (comma-separated): draw from those only. compute-sanitizer runs
    // leave out nccl, whose LL kernels load 4 bytes from a 2-byte float16 buffer (an exact
    // cudaMalloc of one element), which memcheck reports as out of bounds.
    std::vector<std::string> algos = algorithms();
    if (const char* only = std::getenv("SYMCOMM_TEST_MIX_ALGOS")) {
      const std::string list = std::string(",") + only + ",";
      algos.erase(std::remove_if(algos.begin(), algos.end(),
                                 [&](const std::string& a) {
                                   return list.find("," + a + ",") == std::string::npos;
                                 }),
                  algos.end());
      ASSERT_FALSE(algos.empty()) << "SYMCOMM_TEST_MIX_ALGOS=" << only << " names no algorithm";
    }
    const int bits = static_cast<int>(std::log2(static_cast<double>(max_bytes)));
    for (int k = 0; k < calls; ++k) {
      MixCall c;
      c.algo = algos[static_cast<size_t>(k) % algos.size()];
      if (k % algos.size() == 0) std::shuffle(algos.begin(), algos.end(), rng);
      // An operation the algorithm does (its descriptor; "auto" does every one).
      const coll_caps::Caps caps = coll_caps::of(c.algo);
      std::vector<Op> ops;
      for (Op op : {Op::AllGather, Op::AllToAll, Op::AllToAllv, Op::ReduceScatter,
                    Op::AllReduce, Op::Broadcast})
        if (caps.does(api_op(op))) ops.push_back(op);
      c.op = ops[rng() % ops.size()];
      c.kind = static_cast<int>(rng() % 3);
      // In a capture an all-to-all-v across nodes runs on NCCL only (hier and copy read the
      // counts back on the host): where NCCL cannot serve the team (GPUs shared under MPS, or
      // no NCCL), another operation.
      if (for_capture && c.op == Op::AllToAllv && teams_.nodes(c.kind) > 1 &&
          symcommCollAlgorithmCanRun(comm_, teams_.id[c.kind], symcommCollAllToAllv, 1,
                                     symcommInt32, 0, "nccl") != symcommSuccess) {
        ops.erase(std::remove(ops.begin(), ops.end(), Op::AllToAllv), ops.end());
        if (ops.empty()) c.algo = "auto", ops.push_back(Op::AllReduce);
        c.op = ops[rng() % ops.size()];
      }
      c.t = &kTypes[rng() % (sizeof kTypes / sizeof kTypes[0])];
      const size_t ts = static_cast<size_t>(teams_.size(c.kind)), e = c.t->size;
      const bool per_member = c.op == Op::AllGather || c.op == Op::AllToAll ||
                              c.op == Op::ReduceScatter || c.op == Op::AllToAllv;
      const size_t cap = max_bytes / e / (per_member ? ts : 1) / (c.op == Op::AllToAllv ? 2 : 1);
      // Log-uniform sizes: as many calls of a few bytes as of megabytes; 0 now and then.
      const int b = static_cast<int>(rng() % static_cast<uint64_t>(bits + 1));
      const size_t lo = b == 0 ? 0 : size_t{1} << (b - 1);
      c.count = std::min(cap, (lo + (b == 0 ? 0 : rng() % lo)) / e);
      if (rng() % 16 == 0) c.count = 0;
      c.redop = static_cast<symcommRedOp_t>(rng() % 3);  // sum, min, max
      c.root = static_cast<int>(rng() % ts);
      if (c.op == Op::AllToAllv) c.v = random_layout(rng(), static_cast<int>(ts), c.count + 1);
      // Buffer sizes: the largest over the ranks (a symmetric buffer has one size).
      size_t send_elems = 0, recv_elems = 0;
      switch (c.op) {
        case Op::AllGather: send_elems = c.count; recv_elems = ts * c.count; break;
        case Op::AllToAll: send_elems = recv_elems = ts * c.count; break;
        case Op::ReduceScatter: send_elems = ts * c.count; recv_elems = c.count; break;
        case Op::AllReduce: case Op::Broadcast: send_elems = recv_elems = c.count; break;
        default:
          for (int m = 0; m < static_cast<int>(ts); ++m) {
            send_elems = std::max(send_elems, VLayout::extent(c.v.sdispls(m), c.v.sends(m)) + 1);
            recv_elems = std::max(recv_elems, VLayout::extent(c.v.rdispls(m), c.v.receives(m)) + 1);
          }
      }
      const bool needs_sym = caps.in_place_recv != 0;  // written in place: symmetric recv
      const bool moves = c.op != Op::ReduceScatter && c.op != Op::AllReduce;
      // The send: what an earlier call wrote or read (data moves, byte for byte), or fresh.
      std::vector<size_t> earlier;
      for (size_t i = 0; i < buffers_.size(); ++i)
        if (buffers_[i].bytes >= send_elems * e && buffers_[i].bytes > 0) earlier.push_back(i);
      if (moves && !earlier.empty() && rng() % 2 == 0) {
        c.send = earlier[rng() % earlier.size()];
        c.chained = true;
      } else {
        c.send = add(send_elems * e, rng() % 4 == 0, Role::Input, c.t, rng());
      }
      if (c.op == Op::AllReduce && rng() % 3 == 0) {
        buffers_[c.send].role = Role::InPlace;
        c.recv = c.send;
      } else {
        c.recv = add(recv_elems * e, needs_sym || rng() % 2 == 0, Role::Output, c.t, 0);
      }
      calls_.push_back(c);
    }
  }

  size_t add(size_t bytes, bool sym, Role role, const Type* t, uint64_t seed) {
    MixBuffer b;
    b.bytes = bytes;
    b.sym = sym;
    b.role = role;
    b.t = t;
    b.seed = seed;
    buffers_.push_back(b);
    return buffers_.size() - 1;
  }

  // Allocates the buffers (symmetric ones collectively, in the plan's order).
  void allocate() {
    for (MixBuffer& b : buffers_) {
      const size_t bytes = b.bytes ? b.bytes : 1;
      if (b.sym) {
        SC_OK(symcommMalloc(comm_, bytes, &b.p));
      } else {
        b.p = mp::local_alloc(bytes);
      }
    }
  }

  // Every rank's expected buffers for inputs made from seed + `fresh`, in call order.
  void expect(uint64_t fresh) {
    for (MixBuffer& b : buffers_) {
      b.want.assign(static_cast<size_t>(n_), std::vector<uint8_t>());
      for (int q = 0; q < n_; ++q)
        b.want[static_cast<size_t>(q)] =
            b.role == Role::Output ? std::vector<uint8_t>(b.bytes, 0xAB)
                                   : make(*b.t, b.seed + fresh, q, 0, b.bytes / b.t->size);
    }
    for (const MixCall& c : calls_) {
      const size_t e = c.t->size, b = c.count * e;
      MixBuffer& in = buffers_[c.send];
      // Reductions read fresh data only: their inputs are make()'s, element by element.
      const uint64_t in_seed = in.seed + fresh;
      std::vector<std::vector<uint8_t>> out = buffers_[c.recv].want;
      for (int q = 0; q < n_; ++q) {
        const std::vector<int> m = teams_.members(c.kind, q);
        const size_t me = static_cast<size_t>(teams_.rank_in(c.kind, q));
        std::vector<uint8_t>& o = out[static_cast<size_t>(q)];
        auto from = [&](size_t i) -> const std::vector<uint8_t>& {
          return in.want[static_cast<size_t>(m[i])];
        };
        auto reduce = [&](size_t first) {
          for (size_t i = 0; i < c.count; ++i) {
            double acc = value(in_seed, m[0], first + i, *c.t);
            for (size_t j = 1; j < m.size(); ++j)
              acc = combine(c.redop, acc, value(in_seed, m[j], first + i, *c.t));
            store(*c.t, &o[i * e], acc);
          }
        };
        switch (c.op) {
          case Op::AllGather:
            for (size_t i = 0; i < m.size(); ++i) std::copy_n(from(i).begin(), b, o.begin() + i * b);
            break;
          case Op::AllToAll:
            for (size_t i = 0; i < m.size(); ++i)
              std::copy_n(from(i).begin() + me * b, b, o.begin() + i * b);
            break;
          case Op::Broadcast:
            std::copy_n(from(static_cast<size_t>(c.root)).begin(), b, o.begin());
            break;
          case Op::ReduceScatter: reduce(me * c.count); break;
          case Op::AllReduce: reduce(0); break;
          default: {
            const std::vector<size_t> rd = c.v.rdispls(static_cast<int>(me));
            for (size_t i = 0; i < m.size(); ++i) {
              const size_t at = c.v.sdispls(static_cast<int>(i))[me] * e;
              std::copy_n(from(i).begin() + at, c.v.counts[i][me] * e, o.begin() + rd[i] * e);
            }
          }
        }
      }
      buffers_[c.recv].want = std::move(out);
    }
  }

  // Writes this rank's inputs made from seed + `fresh` and poisons its outputs.
  void refill(uint64_t fresh) {
    for (const MixBuffer& b : buffers_) {
      if (!b.bytes) continue;
      mp::store(b.p, b.role == Role::Output ? std::vector<uint8_t>(b.bytes, 0xAB)
                                            : make(*b.t, b.seed + fresh, me_, 0, b.bytes / b.t->size));
    }
    mp::sync(stream_);
  }

  symcommResult_t issue(const MixCall& c, const char* algo) {
    const symcommTeam_t team = teams_.id[c.kind];
    const void* send = buffers_[c.send].p;
    void* recv = buffers_[c.recv].p;
    const symcommDataType_t type = c.t->id;
    switch (c.op) {
      case Op::AllGather:
        return symcommAllGatherOnStream(comm_, team, send, recv, c.count, type, algo, stream_);
      case Op::AllToAll:
        return symcommAllToAllOnStream(comm_, team, send, recv, c.count, type, algo, stream_);
      case Op::ReduceScatter:
        return symcommReduceScatterOnStream(comm_, team, send, recv, c.count, type, c.redop, algo,
                                            stream_);
      case Op::AllReduce:
        return symcommAllReduceOnStream(comm_, team, send, recv, c.count, type, c.redop, algo,
                                        stream_);
      case Op::Broadcast:
        return symcommBroadcastOnStream(comm_, team, send, recv, c.count, type, c.root, algo,
                                        stream_);
      default: {
        const int me = teams_.rank_in(c.kind, me_);
        const std::vector<size_t> sc = c.v.sends(me), sd = c.v.sdispls(me),
                                  rc = c.v.receives(me), rd = c.v.rdispls(me);
        return symcommAllToAllvOnStream(comm_, team, send, sc.data(), sd.data(), recv, rc.data(),
                                        rd.data(), type, algo, stream_);
      }
    }
  }

  // Plans `calls` calls on buffers of at most `max_bytes`, runs them once eagerly and checks
  // every output; `fell_back` says which calls ran with auto instead.
  void run_eagerly(int calls, size_t max_bytes, std::vector<uint8_t>& fell_back,
                   bool for_capture = false) {
    plan(calls, max_bytes, for_capture);
    allocate();
    expect(0);
    refill(0);
    SC_OK(symcommHostBarrier(comm_));
    const bool issued = run_sequence(false, fell_back);
    mp::sync(stream_);
    ASSERT_TRUE(issued);
    check(fell_back, "eager");
  }

  // Whether `algo`'s refusal of a call is one by design. plan() draws for each algorithm
  // only the operations and receive buffers its descriptor takes, so what is left: an
  // algorithm whose descriptor leaves out this memory space, team size or the nodes the
  // team spans, and one built on a
  // library loaded at run time, which may be missing (as the Coll tests accept). Any other
  // refusal would hide that algorithm from the sequence, the calls running on auto instead:
  // a failure.
  bool refusal_expected(const MixCall& c) const {
    const coll_caps::Caps caps = coll_caps::of(c.algo, teams_.nodes(c.kind));
    return caps.library != nullptr || !caps.runs_in(mp::space()) ||
           !caps.fits(teams_.size(c.kind)) || !caps.reaches(teams_.nodes(c.kind));
  }

  // Issues the whole sequence on the stream, no synchronisation between calls. A call whose
  // algorithm refuses it by design (refusal_expected; copy's all-to-all-v in a capture, not
  // issued) runs with the automatic choice instead; `fell_back` says which did, for the check
  // that every rank refused the same calls. Any other refusal fails the test (the call still
  // runs on auto, so that the rest of the sequence is checked). False after a call failed
  // otherwise.
  bool run_sequence(bool capturing, std::vector<uint8_t>& fell_back) {
    fell_back.assign(calls_.size(), 0);
    for (size_t k = 0; k < calls_.size(); ++k) {
      MixCall& c = calls_[k];
      // An operation its descriptor cannot capture (copy's all-to-all-v reads the counts on
      // the host) is not issued in a capture.
      const bool named =
          !(capturing && !coll_caps::of(c.algo, teams_.nodes(c.kind)).captures(api_op(c.op)));
      symcommResult_t rc = named ? issue(c, c.algo.c_str()) : symcommNotSupported;
      if (rc == symcommNotSupported) {
        const std::string why = named ? symcommGetLastError() : "";
        if (named && !refusal_expected(c))
          ADD_FAILURE() << "call " << k << " (" << describe(c) << "): " << c.algo
                        << " refused a call it should run: " << why
                        << " (SYMCOMM_TEST_MIX_SEED=" << seed_ << ")";
        fell_back[k] = 1;
        c.ran = c.algo + " refused, " + auto_choice(c);
        rc = issue(c, "auto");
      } else {
        c.ran = c.algo == "auto" ? auto_choice(c) : c.algo;
      }
      if (rc != symcommSuccess) {
        ADD_FAILURE() << "call " << k << " (" << describe(c) << "): " << symcommGetLastError()
                      << " (SYMCOMM_TEST_MIX_SEED=" << seed_ << ")";
        return false;
      }
    }
    return true;
  }

  // "auto (name)": what the automatic choice picks for c (outside a capture).
  std::string auto_choice(const MixCall& c) const {
    const char* chosen = nullptr;
    if (symcommCollAlgorithm(comm_, teams_.id[c.kind], api_op(c.op), c.count, c.t->id,
                             buffers_[c.recv].sym, &chosen) != symcommSuccess)
      chosen = "?";
    return std::string("auto (") + chosen + ")";
  }

  std::string describe(const MixCall& c) const {
    return std::string(op_name(c.op)) + " on the " + MixTeams::kNames[c.kind] + " team, " +
           c.t->name + " x " + std::to_string(c.count) + ", " +
           (buffers_[c.recv].sym ? "symmetric" : "plain") + " recv" +
           (c.send == c.recv ? ", in place" : "") + (c.chained ? ", send from an earlier call" : "") +
           ", " + (c.ran.empty() ? c.algo : c.ran);
  }

  // Every rank fell back on the same calls; this rank's buffers hold what they should.
  void check(const std::vector<uint8_t>& fell_back, const std::string& when) {
    std::vector<uint8_t> all(fell_back.size() * static_cast<size_t>(n_));
    SC_OK(symcommHostAllgather(comm_, fell_back.data(), all.data(), fell_back.size()));
    for (int q = 0; q < n_; ++q)
      EXPECT_TRUE(std::equal(fell_back.begin(), fell_back.end(),
                             all.begin() + static_cast<long>(q * fell_back.size())))
          << "rank " << q << " refused other calls than rank " << me_;
    for (size_t k = 0; k < calls_.size(); ++k) {
      const MixCall& c = calls_[k];
      const MixBuffer& b = buffers_[c.recv];
      EXPECT_EQ(differences(mp::fetch(stream_, b.p, b.bytes), b.want[static_cast<size_t>(me_)],
                            c.t->size), "")
          << when << ", call " << k << ": " << describe(c) << " (SYMCOMM_TEST_MIX_SEED=" << seed_
          << ")";
    }
    // Inputs are read only (all-reduce in place apart).
    for (const MixBuffer& b : buffers_) {
      if (b.role != Role::Input) continue;
      EXPECT_TRUE(mp::fetch(stream_, b.p, b.bytes) == b.want[static_cast<size_t>(me_)])
          << when << ": an input was written";
    }
  }

  // Algorithms used, for the log: "sm 6, ll 5, ...".
  std::string tally() const {
    std::map<std::string, int> count;
    for (const MixCall& c : calls_) ++count[c.ran];
    std::string out;
    for (const auto& [name, k] : count) out += (out.empty() ? "" : "; ") + name + " " + std::to_string(k);
    return out;
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  int n_ = 0, me_ = 0;
  uint64_t seed_ = 0;
  MixTeams teams_;
  std::vector<MixBuffer> buffers_;
  std::vector<MixCall> calls_;
};

// Sizes to 4 MiB per buffer on GPUs (past every selection threshold below NCCL's large
// rows); 64 KiB in the host space (CI).
size_t mix_max_bytes() { return mp::space() == symcommSpaceCuda ? (size_t{4} << 20) : (64 << 10); }

// SYMCOMM_TEST_MIX_CALLS: a shorter sequence (under compute-sanitizer).
int mix_calls(int fallback) {
  const char* v = std::getenv("SYMCOMM_TEST_MIX_CALLS");
  return v ? std::atoi(v) : fallback;
}

TEST_F(CollMix, RandomSequenceAcrossAlgorithmsAndTeams) {
  std::vector<uint8_t> fell_back;
  ASSERT_NO_FATAL_FAILURE(
      run_eagerly(mix_calls(mp::space() == symcommSpaceCuda ? 96 : 48), mix_max_bytes(), fell_back));
  if (me_ == 0) std::printf("[ mix ] seed %llu: %s\n", static_cast<unsigned long long>(seed_), tally().c_str());
}

// The same kind of sequence captured once in a CUDA graph and replayed with fresh inputs:
// the calls run eagerly first (NCCL makes its communicators outside the capture).
TEST_F(CollMix, RandomSequenceReplayedFromAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  std::vector<uint8_t> fell_back;
  ASSERT_NO_FATAL_FAILURE(run_eagerly(mix_calls(48), mix_max_bytes(), fell_back, true));
  mp::capture_and_replay(
      comm_, stream_, [&] { return run_sequence(true, fell_back); },
      [&](int run) {
        const uint64_t fresh = static_cast<uint64_t>(run) * 1000003;
        expect(fresh);
        refill(fresh);
        return fresh;
      },
      [&](uint64_t, const std::string& when) {
        mp::sync(stream_);
        check(fell_back, when);
      });
  if (me_ == 0) std::printf("[ mix ] graph, seed %llu: %s\n", static_cast<unsigned long long>(seed_), tally().c_str());
}

}  // namespace
}  // namespace coll_test
