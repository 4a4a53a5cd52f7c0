// Collectives against a reference computed on the host from the same inputs, for the
// automatic choice and every registered algorithm (skipped where it cannot run, as "sm" and
// "ce" in the host space): every operation, several types, sizes 0, 1, odd, not a multiple of 16
// bytes, and larger than the workspace and the sm channels' rings (both made small, so that
// sizes go through several pieces and the rings wrap around); symmetric and plain buffers;
// in place; teams; back-to-back calls on one stream; CUDA graphs; bad arguments.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "mp.h"

namespace {

struct Type {
  symcommDataType_t id;
  size_t size;
  bool is_signed;
  const char* name;
};
const Type kTypes[] = {
    {symcommInt8, 1, true, "int8"},       {symcommInt32, 4, true, "int32"},
    {symcommUint64, 8, false, "uint64"},  {symcommInt64, 8, true, "int64"},
    {symcommFloat16, 2, true, "float16"}, {symcommBfloat16, 2, true, "bfloat16"},
    {symcommFloat32, 4, true, "float32"}, {symcommFloat64, 8, true, "float64"}};

// "" where got == want, else which elements of `elem` bytes differ (the first few, in hex).
std::string differences(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                        size_t elem) {
  if (got == want) return "";
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
  std::string out;
  size_t wrong = 0;
  char buf[64];
  for (size_t i = 0; i < got.size() / elem; ++i) {
    if (std::memcmp(&got[i * elem], &want[i * elem], elem) == 0) continue;
    if (++wrong > 4) continue;
    out += "element " + std::to_string(i) + ": got 0x";
    for (size_t k = elem; k-- > 0;) { std::snprintf(buf, sizeof buf, "%02x", got[i * elem + k]); out += buf; }
    out += " want 0x";
    for (size_t k = elem; k-- > 0;) { std::snprintf(buf, sizeof buf, "%02x", want[i * elem + k]); out += buf; }
    out += "; ";
  }
  return out + std::to_string(wrong) + " of " + std::to_string(got.size() / elem) + " differ";
}

// Small integers: exact in every type, and their sums over a few ranks too.
double value(uint64_t seed, int rank, size_t i, bool is_signed) {
  uint64_t x = seed ^ (static_cast<uint64_t>(rank) + 1) * 0x9e3779b97f4a7c15ull ^ i * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 32;
  return is_signed ? static_cast<double>(static_cast<int>(x % 17) - 8) : static_cast<double>(x % 17);
}

void store(const Type& t, uint8_t* p, double v) {
  switch (t.id) {
    case symcommInt8: { int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); break; }
    case symcommInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case symcommUint64: { uint64_t x = static_cast<uint64_t>(v); std::memcpy(p, &x, 8); break; }
    case symcommInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    case symcommFloat16: { __half x = __float2half_rn(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case symcommBfloat16: { __nv_bfloat16 x = __float2bfloat16_rn(static_cast<float>(v)); std::memcpy(p, &x, 2); break; }
    case symcommFloat32: { float x = static_cast<float>(v); std::memcpy(p, &x, 4); break; }
    default: { std::memcpy(p, &v, 8); break; }
  }
}

std::vector<uint8_t> make(const Type& t, uint64_t seed, int rank, size_t first, size_t n) {
  std::vector<uint8_t> out(n * t.size);
  for (size_t i = 0; i < n; ++i) store(t, &out[i * t.size], value(seed, rank, first + i, t.is_signed));
  return out;
}

double combine(symcommRedOp_t op, double a, double b);

// Elements [first, first + n) of make()'s data combined by `op` over ranks 0, step, 2 step,
// ... below `nranks`, in that order.
std::vector<uint8_t> reduced(const Type& t, symcommRedOp_t op, uint64_t seed, int nranks,
                             size_t first, size_t n, int step = 1) {
  std::vector<uint8_t> out(n * t.size);
  for (size_t i = 0; i < n; ++i) {
    double acc = value(seed, 0, first + i, t.is_signed);
    for (int r = step; r < nranks; r += step)
      acc = combine(op, acc, value(seed, r, first + i, t.is_signed));
    store(t, &out[i * t.size], acc);
  }
  return out;
}

double combine(symcommRedOp_t op, double a, double b) {
  return op == symcommSum ? a + b : op == symcommMin ? std::min(a, b) : std::max(a, b);
}

// "auto" (the selection) and every registered algorithm.
std::vector<std::string> algorithms() {
  std::vector<std::string> v = {"auto"};
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) v.push_back(symcommCollAlgorithmName(i));
  return v;
}

class Coll : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    // A small workspace and the smallest sm rings (4 KiB slots: 32 channels x 4 slots per
    // sender): large sizes go through them in several pieces.
    mp::ScopedEnv ws("SYMCOMM_COLL_WORKSPACE", "64K");
    mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", std::to_string(mp::nranks() * 512) + "K");
    // twoshot's staging areas of 64 KiB: plain buffers go through them in many rounds.
    mp::ScopedEnv stage("SYMCOMM_COLL_TWOSHOT_BYTES", "64K");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    n_ = mp::nranks();
    me_ = mp::rank();
    seed_ = mp::agree(std::random_device{}());
    algo_ = GetParam().c_str();
    // The same answer on every rank: the algorithm runs here or not at all.
    float x = 0;
    void* probe = buffer(sizeof x, false);
    symcommResult_t rc = symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, probe, probe, 1,
                                                  symcommFloat32, symcommSum, algo_, stream_);
    std::string why = symcommGetLastError();
    mp::sync(stream_);
    release(probe, false);
    if (rc == symcommNotSupported && why.find("all-gather and broadcast only") != std::string::npos) {
      // direct moves data only, into receive buffers the peers write in place: probe that.
      moves_only_ = true;
      void* send = buffer(sizeof x, false);
      void* recv = buffer(sizeof x * static_cast<size_t>(n_), true);
      rc = symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 1, symcommFloat32,
                                    algo_, stream_);
      why = symcommGetLastError();
      mp::sync(stream_);
      release(send, false);
      release(recv, true);
    }
    if (rc == symcommNotSupported) {
      // sm, ll and ce run wherever every rank has a GPU: a refusal there is a failure, not a
      // skip.
      const bool gpu_only = std::strcmp(algo_, "sm") == 0 || std::strcmp(algo_, "ll") == 0 ||
                            std::strcmp(algo_, "ce") == 0 || std::strcmp(algo_, "twoshot") == 0;
      ASSERT_FALSE(gpu_only && mp::space() == symcommSpaceCuda) << why;
      // In the host space ce says why.
      if (std::strcmp(algo_, "ce") == 0) {
        ASSERT_NE(why.find("it needs the cuda memory space"), std::string::npos) << why;
      }
      GTEST_SKIP() << algo_ << ": " << why;
    }
    ASSERT_EQ(rc, symcommSuccess) << symcommGetLastError();
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
  // twoshot only reduces: it refuses to move data, saying so (checked here), and the tests
  // of data movement skip it.
  bool reduces_only() {
    if (std::strcmp(algo_, "twoshot") != 0) return false;
    void* send = buffer(sizeof(float), false);
    void* recv = buffer(sizeof(float) * static_cast<size_t>(n_), false);
    EXPECT_EQ(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 1, symcommFloat32,
                                       algo_, stream_), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "all-reduce and reduce-scatter only"), nullptr)
        << symcommGetLastError();
    release(send, false);
    release(recv, false);
    return true;
  }
  // direct does no reductions: it refuses them, saying so (checked here), and the tests of
  // reductions skip it.
  bool moves_only() {
    if (!moves_only_) return false;
    void* buf = buffer(sizeof(float), false);
    EXPECT_EQ(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, buf, buf, 1, symcommFloat32,
                                       symcommSum, algo_, stream_), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "all-gather and broadcast only"), nullptr)
        << symcommGetLastError();
    release(buf, false);
    return true;
  }
  // direct writes receive buffers in place only: a plain one is refused, saying so (checked
  // here); true where the caller must skip a plain receive buffer.
  bool plain_recv_refused(bool symmetric) {
    if (symmetric || !moves_only_) return false;
    void* send = buffer(sizeof(float), false);
    void* recv = buffer(sizeof(float) * static_cast<size_t>(n_), false);
    EXPECT_EQ(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 1, symcommFloat32,
                                       algo_, stream_), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "receive buffer must be symmetric"), nullptr)
        << symcommGetLastError();
    release(send, false);
    release(recv, false);
    return true;
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

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  int n_ = 0, me_ = 0;
  uint64_t seed_ = 0;
  const char* algo_ = nullptr;
  bool moves_only_ = false;  // direct: data movement into symmetric or registered buffers
};

const size_t kCounts[] = {0, 1, 7, 1001, 50001, 300000};

TEST_P(Coll, AllGather) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t count : kCounts) {
        SCOPED_TRACE(std::string(t.name) + (sym ? " symmetric" : " plain") + " count " + std::to_string(count));
        if (plain_recv_refused(sym)) continue;
        const size_t b = count * t.size;
        void* send = buffer(b, false);
        void* recv = buffer(b * n_, sym);
        put(send, make(t, seed_, me_, 0, count));
        poison(recv, b * n_);
        SC_OK(symcommHostBarrier(comm_));
        SC_OK(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, algo_, stream_));
        std::vector<uint8_t> got = fetch(recv, b * n_), want;
        for (int r = 0; r < n_; ++r) {
          auto part = make(t, seed_, r, 0, count);
          want.insert(want.end(), part.begin(), part.end());
        }
        EXPECT_TRUE(got == want);
        SC_OK(symcommHostBarrier(comm_));
        release(send, false);
        release(recv, sym);
      }
}

TEST_P(Coll, AllToAll) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  for (bool sym : {false, true})
    for (size_t count : kCounts) {
      const Type& t = kTypes[6];  // float32
      SCOPED_TRACE(std::string(sym ? "symmetric" : "plain") + " count " + std::to_string(count));
      if (plain_recv_refused(sym)) continue;
      const size_t b = count * t.size;
      void* send = buffer(b * n_, false);
      void* recv = buffer(b * n_, sym);
      put(send, make(t, seed_, me_, 0, count * n_));  // block j: elements j*count ..
      poison(recv, b * n_);
      SC_OK(symcommHostBarrier(comm_));
      SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, algo_, stream_));
      std::vector<uint8_t> got = fetch(recv, b * n_), want;
      for (int r = 0; r < n_; ++r) {
        auto part = make(t, seed_, r, static_cast<size_t>(me_) * count, count);
        want.insert(want.end(), part.begin(), part.end());
      }
      EXPECT_TRUE(got == want);
      SC_OK(symcommHostBarrier(comm_));
      release(send, false);
      release(recv, sym);
    }
}

TEST_P(Coll, ReduceScatterAndAllReduce) {
  if (moves_only()) GTEST_SKIP() << algo_ << " does no reductions";
  for (const Type& t : kTypes)
    for (symcommRedOp_t op : {symcommSum, symcommMin, symcommMax})
      for (size_t count : kCounts) {
        SCOPED_TRACE(std::string(t.name) + " op " + std::to_string(op) + " count " + std::to_string(count));
        const size_t b = count * t.size;
        // Reduce-scatter: my send has n blocks; I receive the reduction of block `me`.
        void* send = buffer(b * n_, false);
        void* recv = buffer(b, false);
        put(send, make(t, seed_, me_, 0, count * n_));
        poison(recv, b);
        SC_OK(symcommReduceScatterOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, op,
                                           algo_, stream_));
        std::vector<uint8_t> want = reduced(t, op, seed_, n_, me_ * count, count);
        EXPECT_EQ(differences(fetch(recv, b), want, t.size), "") << "reduce-scatter";
        // All-reduce in place on the first `count` elements of send.
        SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, send, count, t.id, op,
                                       algo_, stream_));
        want = reduced(t, op, seed_, n_, 0, count);
        EXPECT_EQ(differences(fetch(send, b), want, t.size), "") << "all-reduce in place";
        release(send, false);
        release(recv, false);
      }
}

TEST_P(Coll, BroadcastFromEveryRoot) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  const Type& t = kTypes[7];  // float64
  for (bool sym : {false, true})
    for (int root = 0; root < n_; ++root)
      for (size_t count : {size_t{1}, size_t{3000}, size_t{20000}}) {
        SCOPED_TRACE("root " + std::to_string(root) + " count " + std::to_string(count));
        if (plain_recv_refused(sym)) continue;
        const size_t b = count * t.size;
        void* send = buffer(b, false);
        void* recv = buffer(b, sym);
        put(send, make(t, seed_, me_, 0, count));
        poison(recv, b);
        SC_OK(symcommHostBarrier(comm_));
        SC_OK(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, root,
                                       algo_, stream_));
        EXPECT_TRUE(fetch(recv, b) == make(t, seed_, root, 0, count));
        SC_OK(symcommHostBarrier(comm_));
        release(send, false);
        release(recv, sym);
      }
}

// Several collectives back to back on one stream, no host synchronisation between them.
TEST_P(Coll, BackToBackWithoutSync) {
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
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  const size_t block = 4096 + 24, nb = block * static_cast<size_t>(n_);
  for (bool sym : {false, true}) {
    SCOPED_TRACE(sym ? "symmetric send" : "plain send");
    void* send = buffer(nb, sym);
    void* recv = buffer(nb, true);
    void* data = buffer(nb, false);
    mp::fill(data, nb, me_, seed_);
    // Once before, so that the kernels are loaded (lazy loading can take longer than the
    // delay).
    SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, data, recv, block, symcommUint8,
                                  algo_, stream_));
    mp::sync(stream_);
    poison(send, nb);
    poison(recv, nb);
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    mp::copy_after_early_trigger(stream_, send, data, nb, 1000);
    SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, block, symcommUint8,
                                  algo_, stream_));
    const std::vector<uint8_t> got = fetch(recv, nb);
    size_t wrong = 0;
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < block; ++i)
        wrong += got[static_cast<size_t>(r) * block + i] !=
                 mp::pattern(r, seed_, static_cast<size_t>(me_) * block + i);
    EXPECT_EQ(wrong, 0u) << "bytes of " << nb << " not the sender's (0xab: read before written)";
    SC_OK(symcommHostBarrier(comm_));
    release(data, false);
    release(send, sym);
    release(recv, true);
  }
}

// The count matrix of all-to-all-v tests: member i sends counts[i][j] elements to member j,
// from a send buffer laid out with gaps, into a receive buffer laid out in reverse order.
struct VLayout {
  std::vector<std::vector<size_t>> counts;
  std::vector<size_t> sdispls(int i) const {
    std::vector<size_t> d(counts.size());
    size_t at = 5;
    for (size_t j = 0; j < counts.size(); ++j) { d[j] = at; at += counts[i][j] + 3; }
    return d;
  }
  std::vector<size_t> rdispls(int me) const {
    std::vector<size_t> d(counts.size());
    size_t at = 0;
    for (size_t k = counts.size(); k-- > 0;) { d[k] = at; at += counts[k][static_cast<size_t>(me)] + 1; }
    return d;
  }
  static size_t extent(const std::vector<size_t>& displs, const std::vector<size_t>& n) {
    size_t e = 0;
    for (size_t j = 0; j < n.size(); ++j) e = std::max(e, displs[j] + n[j]);
    return e;
  }
};

VLayout random_layout(uint64_t seed, int n, size_t max_count) {
  std::mt19937_64 rng(seed);
  VLayout v;
  v.counts.assign(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n)));
  for (auto& row : v.counts)
    for (size_t& c : row) c = rng() % 4 == 0 ? 0 : rng() % max_count;
  return v;
}

TEST_P(Coll, AllToAllvRandomCounts) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  if (moves_only_) {  // direct: equal blocks only
    void* send = buffer(sizeof(float), false);
    void* recv = buffer(sizeof(float), true);
    std::vector<size_t> zeros(static_cast<size_t>(n_), 0);
    EXPECT_EQ(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, zeros.data(), zeros.data(),
                                       recv, zeros.data(), zeros.data(), symcommFloat32, algo_,
                                       stream_),
              symcommNotSupported);
    release(send, false);
    release(recv, true);
    GTEST_SKIP() << algo_ << " does not do all-to-all-v";
  }
  const Type& t = kTypes[4];  // float16: 2-byte elements, odd byte offsets of nothing
  for (bool sym : {false, true})
    for (size_t max_count : {size_t{1}, size_t{17}, size_t{3000}, size_t{70000}}) {
      SCOPED_TRACE(std::string(sym ? "symmetric" : "plain") + " max count " + std::to_string(max_count));
      const VLayout v = random_layout(seed_ + max_count, n_, max_count);
      std::vector<size_t> scounts = v.counts[static_cast<size_t>(me_)], rcounts(static_cast<size_t>(n_));
      for (int i = 0; i < n_; ++i) rcounts[static_cast<size_t>(i)] = v.counts[static_cast<size_t>(i)][static_cast<size_t>(me_)];
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
      std::vector<uint8_t> got = fetch(recv, re_all * t.size);
      std::vector<uint8_t> want(re_all * t.size, 0xAB);  // gaps keep the poison
      for (int i = 0; i < n_; ++i) {
        const size_t c = rcounts[static_cast<size_t>(i)];
        const size_t from = v.sdispls(i)[static_cast<size_t>(me_)];
        auto part = make(t, seed_, i, from, c);
        std::copy(part.begin(), part.end(), want.begin() + static_cast<long>(rd[static_cast<size_t>(i)] * t.size));
      }
      EXPECT_TRUE(got == want);
      SC_OK(symcommHostBarrier(comm_));
      release(send, false);
      release(recv, sym);
    }
}

// Counts that do not match between a sender and its receiver: "copy" sees the whole matrix
// and every member reports the same pair.
TEST_P(Coll, AllToAllvCountsMustMatch) {
  if (std::string(algo_) != "copy") GTEST_SKIP() << "only copy checks the counts of every pair";
  std::vector<size_t> scounts(static_cast<size_t>(n_), 4), rcounts(static_cast<size_t>(n_), 4),
      sd(static_cast<size_t>(n_)), rd(static_cast<size_t>(n_));
  for (int j = 0; j < n_; ++j) sd[static_cast<size_t>(j)] = rd[static_cast<size_t>(j)] = 8 * static_cast<size_t>(j);
  if (me_ == n_ - 1) rcounts[0] = 5;  // the last member expects 5 from member 0, which sends 4
  void* send = buffer(64 * static_cast<size_t>(n_), false);
  void* recv = buffer(64 * static_cast<size_t>(n_), false);
  SC_FAILS(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, scounts.data(), sd.data(), recv,
                                    rcounts.data(), rd.data(), symcommInt32, algo_, stream_),
           symcommInvalidArgument);
  const std::string want = "member 0 sends 4 elements to member " + std::to_string(n_ - 1) + ", which expects 5";
  EXPECT_NE(std::string(symcommGetLastError()).find(want), std::string::npos) << symcommGetLastError();
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  release(send, false);
  release(recv, false);
}

// All-to-all-v with counts in device memory (sm only): the counts travel on the device, the
// blocks arrive packed in team-rank order, and blocks beyond the capacity are dropped whole.
TEST_P(Coll, AllToAllvWithCountsOnTheDevice) {
  const bool sm = std::string(algo_) == "sm";
  const VLayout v = random_layout(seed_ + 77, n_, 3000);
  const size_t nn = static_cast<size_t>(n_), m = static_cast<size_t>(me_);
  std::vector<size_t> sc = v.counts[m], sd = v.sdispls(me_);
  size_t total = 0;
  for (size_t i = 0; i < nn; ++i) total += v.counts[i][m];
  const size_t capacity = total - total / 3;  // the last blocks may not fit
  const Type& t = kTypes[1];  // int32
  const size_t se = VLayout::extent(sd, sc) + 1;
  void* send = buffer(se * t.size, false);
  void* recv = buffer((capacity + 1) * t.size, false);
  void* counts = buffer(4 * nn * sizeof(size_t), false);  // send counts, displs; recv counts, displs
  std::vector<size_t> host(4 * nn, 12345);
  std::copy(sc.begin(), sc.end(), host.begin());
  std::copy(sd.begin(), sd.end(), host.begin() + static_cast<long>(nn));
  put(counts, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(host.data()),
                                   reinterpret_cast<uint8_t*>(host.data() + host.size())));
  put(send, make(t, seed_, me_, 0, se));
  poison(recv, (capacity + 1) * t.size);
  auto* c = static_cast<size_t*>(counts);
  SC_OK(symcommHostBarrier(comm_));
  symcommResult_t rc = symcommAllToAllvDeviceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, c, c + nn,
                                                      recv, capacity, c + 2 * nn, c + 3 * nn, t.id,
                                                      algo_, stream_);
  if (!sm) {  // copy, nccl and ce need the counts on the host; auto finds none without sm
    if (std::string(algo_) == "auto" && mp::space() == symcommSpaceCuda) {
      EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();  // sm is registered: auto finds it
    } else {
      EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
      if (std::string(algo_) == "ce") {  // says why
        EXPECT_NE(std::strstr(symcommGetLastError(), "counts on the device is sm only"), nullptr)
            << symcommGetLastError();
      }
      mp::sync(stream_);
      SC_OK(symcommHostBarrier(comm_));
      release(send, false);
      release(recv, false);
      release(counts, false);
      return;
    }
  } else {
    ASSERT_EQ(rc, symcommSuccess) << symcommGetLastError();
  }
  std::vector<uint8_t> raw = fetch(counts, 4 * nn * sizeof(size_t));
  const size_t* got_counts = reinterpret_cast<const size_t*>(raw.data()) + 2 * nn;
  const size_t* got_displs = got_counts + nn;
  std::vector<uint8_t> want((capacity + 1) * t.size, 0xAB);
  size_t at = 0;
  for (int i = 0; i < n_; ++i) {
    const size_t ii = static_cast<size_t>(i), ci = v.counts[ii][m];
    EXPECT_EQ(got_counts[ii], ci) << "count from " << i;
    EXPECT_EQ(got_displs[ii], at) << "displacement of " << i;
    if (at + ci <= capacity) {
      auto part = make(t, seed_, i, v.sdispls(i)[m], ci);
      std::copy(part.begin(), part.end(), want.begin() + static_cast<long>(at * t.size));
    }
    at += ci;
  }
  EXPECT_TRUE(fetch(recv, want.size()) == want);
  SC_OK(symcommHostBarrier(comm_));
  release(send, false);
  release(recv, false);
  release(counts, false);
}

// Collectives captured once in a CUDA graph and replayed with new inputs each time.
TEST_P(Coll, CapturedInAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  const Type& t = kTypes[6];  // float32
  const size_t count = 20000, b = count * t.size;
  void* send = buffer(b * n_, false);
  void* gathered = buffer(b * n_, moves_only_);  // direct writes symmetric buffers only
  void* summed = buffer(b, false);
  put(send, make(t, seed_, me_, 0, count * n_));
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  const bool moves = !reduces_only(), reduces = !moves_only();
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  if (moves)
    SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, send, gathered, count, t.id, algo_,
                                  stream_));
  if (reduces)
    SC_OK(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, send, summed, count, t.id,
                                   symcommSum, algo_, stream_));
  void* exec = mp::end_capture(stream_);
  ASSERT_NE(exec, nullptr);
  for (uint64_t k = 1; k <= 4; ++k) {
    SCOPED_TRACE("replay " + std::to_string(k));
    put(send, make(t, seed_ + k, me_, 0, count * n_));
    poison(gathered, b * n_);
    poison(summed, b);
    SC_OK(symcommHostBarrier(comm_));  // every rank's input is in place
    ASSERT_EQ(mp::launch_graph(exec, stream_), 0);
    std::vector<uint8_t> want;
    for (int r = 0; r < n_; ++r) {
      auto part = make(t, seed_ + k, r, static_cast<size_t>(me_) * count, count);
      want.insert(want.end(), part.begin(), part.end());
    }
    if (moves) {
      EXPECT_TRUE(fetch(gathered, b * n_) == want) << "all-to-all";
    }
    if (reduces) {
      std::vector<uint8_t> sum = reduced(t, symcommSum, seed_ + k, n_, 0, count);
      EXPECT_TRUE(fetch(summed, b) == sum) << "all-reduce";
    }
    SC_OK(symcommHostBarrier(comm_));  // everyone read before the next replay writes
  }
  mp::destroy_graph(exec);
  release(send, false);
  release(gathered, moves_only_);
  release(summed, false);
}

// A team of the even ranks: an all-gather, then all-reduces on the team and on the world
// interleaved (algorithms that keep per-pair counters must stay in step across teams).
TEST_P(Coll, OnATeam) {
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n_ + 1) / 2, &even));
  const Type& t = kTypes[6];
  const size_t count = 5000, b = count * t.size;
  const bool moves = !reduces_only(), reduces = !moves_only();
  const int size = (n_ + 1) / 2;
  // direct writes symmetric buffers only (allocated by every rank: a collective call).
  void* recv = moves ? buffer(b * static_cast<size_t>(size), moves_only_) : nullptr;
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
    release(recv, moves_only_);
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
  if (moves_only()) GTEST_SKIP() << algo_ << " does no reductions";
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

TEST_P(Coll, BadArguments) {
  void* a = buffer(4096, false);
  void* b = buffer(4096 * n_, false);
  const symcommTeam_t w = SYMCOMM_TEAM_WORLD;
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, static_cast<symcommDataType_t>(77),
                                    symcommSum, nullptr, stream_), symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32,
                                    static_cast<symcommRedOp_t>(9), nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommBroadcastOnStream(comm_, w, a, b, 10, symcommFloat32, n_, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommAllGatherOnStream(comm_, 33, a, b, 10, symcommFloat32, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, static_cast<char*>(a) + 4, 10, symcommFloat32,
                                    symcommSum, nullptr, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "overlap"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommAllToAllOnStream(comm_, w, b, b, 10, symcommFloat32, nullptr, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, nullptr, b, 10, symcommFloat32, symcommSum,
                                    nullptr, stream_), symcommInvalidArgument);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum,
                                    "no-such-algorithm", stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "no-such-algorithm"), nullptr);
  {
    mp::ScopedEnv algo("SYMCOMM_COLL_ALGO", "allreduce=nope");
    SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, nullptr,
                                      stream_), symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_ALGO"), nullptr);
  }
  if (std::strcmp(algo_, "sm") == 0) {
    mp::ScopedEnv blocks("SYMCOMM_COLL_SM_BLOCKS", "0");
    SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, algo_,
                                      stream_), symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_SM_BLOCKS"), nullptr)
        << symcommGetLastError();
  }
  if (std::strcmp(algo_, "twoshot") == 0) {
    mp::ScopedEnv blocks("SYMCOMM_COLL_TWOSHOT_BLOCKS", "0");
    SC_FAILS(symcommAllReduceOnStream(comm_, w, a, b, 10, symcommFloat32, symcommSum, algo_,
                                      stream_), symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_COLL_TWOSHOT_BLOCKS"), nullptr)
        << symcommGetLastError();
  }
  const size_t counts[64] = {}, displs[64] = {};
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, nullptr, displs, b, counts, displs,
                                    symcommFloat32, algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sendcounts"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, counts, displs, b, counts, nullptr,
                                    symcommFloat32, algo_, stream_), symcommInvalidArgument);
  ASSERT_GE(symcommCollAlgorithmCount(), 2);
  EXPECT_STREQ(symcommCollAlgorithmName(0), "sm");
  EXPECT_STREQ(symcommCollAlgorithmName(1), "copy");
  // ce is last until measured: the automatic choice never reaches it by the registry order.
  EXPECT_STREQ(symcommCollAlgorithmName(symcommCollAlgorithmCount() - 1), "ce");
  EXPECT_EQ(symcommCollAlgorithmName(symcommCollAlgorithmCount()), nullptr);
  mp::sync(stream_);
  release(a, false);
  release(b, false);
}

// sm keeps its rings within 1/16 of the heap (or SYMCOMM_COLL_SM_BYTES): where 4 KiB slots do
// not fit, asking for it by name names the reason, and the automatic choice runs another.
TEST(CollLimits, SmNeedsRoomForItsRings) {
  mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", "256K");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks();
  const size_t count = 1000;
  void* send = mp::local_alloc(count * 4);
  void* recv = mp::local_alloc(count * 4 * static_cast<size_t>(n));
  std::vector<uint8_t> mine(count * 4);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint8_t>(i * 7 + mp::rank());
  mp::store(send, mine);
  if (mp::space() == symcommSpaceCuda) {
    SC_FAILS(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      "sm", stream), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "1/16 of SYMCOMM_HEAP_MAX"), nullptr)
        << symcommGetLastError();
  }
  mp::store(recv, std::vector<uint8_t>(count * 4 * static_cast<size_t>(n), 0xAB));
  SC_OK(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                 nullptr, stream));
  std::vector<uint8_t> got = mp::fetch(stream, recv, count * 4 * static_cast<size_t>(n));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < mine.size(); ++i)
      ASSERT_EQ(got[static_cast<size_t>(r) * mine.size() + i], static_cast<uint8_t>(i * 7 + r))
          << "rank " << r << " byte " << i;
  mp::free_stream(stream);
  mp::local_free(send);
  mp::local_free(recv);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// ce's waits are stream memory operations, bounded by its watchdog: a rank that calls a
// collective alone is let go after SYMCOMM_WAIT_TIMEOUT, the next call reports the timeout
// like a failed wait kernel, and ce refuses to run on the communicator from then on.
TEST(CollLimits, CeWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const int n = mp::nranks();
  const size_t count = 1000;
  void* send = mp::local_alloc(count * 4);
  void* recv = mp::local_alloc(count * 4 * static_cast<size_t>(n));
  if (mp::rank() == 0) {  // the others never call: rank 0 waits for their ready signals
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count,
                                       symcommInt32, "ce", stream), symcommSuccess)
        << symcommGetLastError();
    mp::sync(stream);  // returns once the watchdog released the wait
    const double took =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GT(took, 0.9);
    EXPECT_LT(took, 10.0);
    SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "SYMCOMM_WAIT_TIMEOUT"), nullptr)
        << symcommGetLastError();
    SC_FAILS(symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                      "ce", stream), symcommTimeout);
    EXPECT_NE(std::strstr(symcommGetLastError(), "released"), nullptr) << symcommGetLastError();
    mp::sync(stream);
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  mp::free_stream(stream);
  mp::local_free(send);
  mp::local_free(recv);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// The algorithms that keep counters with their peers (sm, ll, twoshot): a wait of theirs
// that never ends (only rank 0 calls) is cut at SYMCOMM_WAIT_TIMEOUT and reported at the
// next call; after it the algorithm refuses every call on that communicator, rather than
// run with counters that no longer agree with the peers' (a later wait could pass on a
// stale signal). Other algorithms, and a fresh communicator, still run.
TEST(CollLimits, CounterAlgorithmsRefuseCallsAfterAFailedWait) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "sm, ll and twoshot run in the cuda space";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  const size_t count = 1000;
  for (const char* algo : {"sm", "ll", "twoshot"}) {
    SCOPED_TRACE(algo);
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    symcommStream_t stream = mp::new_stream();
    void* buf = nullptr;
    SC_OK(symcommMalloc(comm, count * 4, &buf));
    if (mp::rank() == 0) {  // the others never call: rank 0's waits time out
      SC_OK(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                     symcommSum, algo, stream));
      mp::sync(stream);
      SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
      SC_FAILS(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                        symcommSum, algo, stream),
               symcommTimeout);
      EXPECT_NE(std::strstr(symcommGetLastError(), "cannot run on this communicator any more"),
                nullptr)
          << symcommGetLastError();
      mp::sync(stream);
    }
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
    // Every rank: the other algorithms still run on this communicator.
    SC_OK(symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count, symcommInt32,
                                   symcommSum, "copy", stream));
    mp::sync(stream);
    SC_OK(symcommFree(comm, buf));
    mp::free_stream(stream);
    EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  }
}

// SYMCOMM_COLL_CE_STREAMS (read when a communicator is created): 1 (the default) issues the
// copies to peers on the caller's stream, 2 spreads them over side streams; a value out of
// range leaves the communicator without ce, which says why.
TEST(CollLimits, CeStreams) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "ce runs in the cuda space only";
  const int n = mp::nranks();
  const size_t count = 3001, b = count * 4;
  void* send = mp::local_alloc(b * static_cast<size_t>(n));
  void* recv = mp::local_alloc(b * static_cast<size_t>(n));
  std::vector<uint8_t> mine(b * static_cast<size_t>(n));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint8_t>(i * 13 + mp::rank());
  mp::store(send, mine);
  for (const char* streams : {"1", "2", "0"}) {
    SCOPED_TRACE(std::string("SYMCOMM_COLL_CE_STREAMS=") + streams);
    mp::ScopedEnv env("SYMCOMM_COLL_CE_STREAMS", streams);
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    symcommStream_t stream = mp::new_stream();
    mp::store(recv, std::vector<uint8_t>(b * static_cast<size_t>(n), 0xAB));
    const symcommResult_t rc = symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv,
                                                       count, symcommInt32, "ce", stream);
    if (std::strcmp(streams, "0") == 0) {
      EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
      // Rank 0 names the value; the others name rank 0.
      const char* why = symcommGetLastError();
      EXPECT_NE(std::strstr(why, mp::rank() == 0 ? "SYMCOMM_COLL_CE_STREAMS=0 is not in [1, 16]"
                                                 : "rank 0's SYMCOMM_COLL_CE_STREAMS is not in"),
                nullptr) << why;
    } else {
      EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
      // Block r of recv is block `me` of rank r's send.
      std::vector<uint8_t> got = mp::fetch(stream, recv, b * static_cast<size_t>(n));
      size_t wrong = 0;
      for (int r = 0; r < n; ++r)
        for (size_t i = 0; i < b; ++i) {
          const size_t at = static_cast<size_t>(mp::rank()) * b + i;
          wrong += got[static_cast<size_t>(r) * b + i] != static_cast<uint8_t>(at * 13 + r);
        }
      EXPECT_EQ(wrong, 0u);
    }
    mp::sync(stream);
    mp::free_stream(stream);
    EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  }
  mp::local_free(send);
  mp::local_free(recv);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Algorithms, Coll, ::testing::ValuesIn(algorithms()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });
