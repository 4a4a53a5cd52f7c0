// Collectives against a reference computed on the host from the same inputs, for the
// automatic choice and every registered algorithm (skipped only where it cannot run: "sm",
// "ll", "twoshot" and "ce" in the host space, "nccl" without NCCL): every operation, every
// type, sizes 0, 1, odd, not a multiple of 16 bytes, and larger than the workspace and the sm
// channels' rings (both made small, so that sizes go through several pieces and the rings
// wrap around); symmetric and plain buffers; in place; random floats; teams; chains of calls
// on one stream; CUDA graphs; sm's large mode; 1 GiB; the choice of algorithm; bad arguments.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <cmath>
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

// Element i of a buffer of type t, as a double.
double load(const Type& t, const uint8_t* p) {
  switch (t.id) {
    case symcommFloat16: { __half x; std::memcpy(&x, p, 2); return __half2float(x); }
    case symcommBfloat16: { __nv_bfloat16 x; std::memcpy(&x, p, 2); return __bfloat162float(x); }
    case symcommFloat32: { float x; std::memcpy(&x, p, 4); return x; }
    case symcommFloat64: { double x; std::memcpy(&x, p, 8); return x; }
    default: ADD_FAILURE() << "load() reads floating-point types only"; return 0;
  }
}

const size_t kCounts[] = {0, 1, 7, 1001, 50001, 300000};

// What this rank receives from make()'s data of `seed`: an all-gather of `count` elements,
// and (as member `me`) an all-to-all of blocks of `count`.
std::vector<uint8_t> gathered(const Type& t, uint64_t seed, int n, size_t count) {
  std::vector<uint8_t> want;
  for (int r = 0; r < n; ++r) {
    auto part = make(t, seed, r, 0, count);
    want.insert(want.end(), part.begin(), part.end());
  }
  return want;
}

std::vector<uint8_t> exchanged(const Type& t, uint64_t seed, int n, int me, size_t count) {
  std::vector<uint8_t> want;
  for (int r = 0; r < n; ++r) {
    auto part = make(t, seed, r, static_cast<size_t>(me) * count, count);
    want.insert(want.end(), part.begin(), part.end());
  }
  return want;
}

// The count matrix of all-to-all-v tests: member i sends counts[i][j] elements to member j,
// from a send buffer laid out with gaps, into a receive buffer laid out in reverse order.
struct VLayout {
  std::vector<std::vector<size_t>> counts;
  std::vector<size_t> sends(int me) const { return counts[static_cast<size_t>(me)]; }
  std::vector<size_t> receives(int me) const {
    std::vector<size_t> r(counts.size());
    for (size_t i = 0; i < counts.size(); ++i) r[i] = counts[i][static_cast<size_t>(me)];
    return r;
  }
  std::vector<size_t> sdispls(int i) const {
    std::vector<size_t> d(counts.size());
    size_t at = 5;
    for (size_t j = 0; j < counts.size(); ++j) { d[j] = at; at += counts[static_cast<size_t>(i)][j] + 3; }
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
  // What member `me` receives from make()'s data of `seed` into a receive buffer of `elems`
  // elements poisoned with 0xAB (the gaps keep the poison).
  std::vector<uint8_t> received(const Type& t, uint64_t seed, int me, size_t elems) const {
    std::vector<uint8_t> want(elems * t.size, 0xAB);
    const std::vector<size_t> rd = rdispls(me);
    for (size_t i = 0; i < counts.size(); ++i) {
      const int sender = static_cast<int>(i);
      auto part = make(t, seed, sender, sdispls(sender)[static_cast<size_t>(me)],
                       counts[i][static_cast<size_t>(me)]);
      std::copy(part.begin(), part.end(), want.begin() + static_cast<long>(rd[i] * t.size));
    }
    return want;
  }
};

VLayout random_layout(uint64_t seed, int n, size_t max_count) {
  std::mt19937_64 rng(seed);
  VLayout v;
  v.counts.assign(static_cast<size_t>(n), std::vector<size_t>(static_cast<size_t>(n)));
  for (auto& row : v.counts)
    for (size_t& c : row) c = max_count == 0 || rng() % 4 == 0 ? 0 : rng() % max_count;
  return v;
}

// The operations, as the tests name them: all-to-all-v with counts on the host or device.
enum class Op { AllGather, AllToAll, AllToAllv, AllToAllvDevice, ReduceScatter, AllReduce, Broadcast };

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
    if (rc == symcommNotSupported && why.find("broadcast only") != std::string::npos &&
        why.find("all-gather") == std::string::npos) {
      // relay broadcasts only, into receive buffers the peers write in place: probe that.
      broadcasts_only_ = true;
      void* send = buffer(sizeof x, false);
      void* recv = buffer(sizeof x, true);
      rc = symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 1, symcommFloat32, 0,
                                    algo_, stream_);
      why = symcommGetLastError();
      mp::sync(stream_);
      release(send, false);
      release(recv, true);
    }
    if (rc == symcommNotSupported) {
      // Only NCCL may be missing (no libnccl; the host space). Every other algorithm runs in
      // the cuda space, and the GPU-only ones (sm, ll, twoshot, ce, relay) say why not in the
      // host space; copy, direct and the automatic choice run in both.
      if (std::strcmp(algo_, "nccl") == 0) {
        ASSERT_TRUE(mp::nccl_missing(why)) << why;
        GTEST_SKIP() << algo_ << ": " << why;
      }
      ASSERT_NE(mp::space(), symcommSpaceCuda) << algo_ << " refused in the cuda space: " << why;
      const bool gpu_only = std::strcmp(algo_, "sm") == 0 || std::strcmp(algo_, "ll") == 0 ||
                            std::strcmp(algo_, "ce") == 0 || std::strcmp(algo_, "twoshot") == 0 ||
                            std::strcmp(algo_, "relay") == 0;
      ASSERT_TRUE(gpu_only) << algo_ << " refused in the host space: " << why;
      ASSERT_NE(why.find("it needs the cuda memory space"), std::string::npos) << why;
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
  // direct and relay do no reductions: they refuse them, saying so (checked here), and the
  // tests of reductions skip them.
  bool moves_only() {
    if (!moves_only_ && !broadcasts_only_) return false;
    void* buf = buffer(sizeof(float), false);
    EXPECT_EQ(symcommAllReduceOnStream(comm_, SYMCOMM_TEAM_WORLD, buf, buf, 1, symcommFloat32,
                                       symcommSum, algo_, stream_), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), broadcasts_only_ ? "it does broadcast only"
                                                                  : "all-gather and broadcast only"),
              nullptr) << symcommGetLastError();
    release(buf, false);
    return true;
  }
  // relay does nothing but broadcast: it refuses the other operations that move data, saying
  // so (checked here), and their tests skip it.
  bool broadcasts_only() {
    if (!broadcasts_only_) return false;
    void* send = buffer(sizeof(float), false);
    void* recv = buffer(sizeof(float) * static_cast<size_t>(n_), true);
    EXPECT_EQ(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 1, symcommFloat32,
                                       algo_, stream_), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "it does broadcast only"), nullptr)
        << symcommGetLastError();
    release(send, false);
    release(recv, true);
    return true;
  }
  // direct and relay write receive buffers in place only: a plain one is refused, saying so
  // (checked here); true where the caller must skip a plain receive buffer.
  bool plain_recv_refused(bool symmetric) {
    if (symmetric || !(moves_only_ || broadcasts_only_)) return false;
    void* send = buffer(sizeof(float), false);
    void* recv = buffer(sizeof(float), false);
    EXPECT_EQ(symcommBroadcastOnStream(comm_, SYMCOMM_TEAM_WORLD, send, recv, 1, symcommFloat32,
                                       0, algo_, stream_), symcommNotSupported);
    EXPECT_NE(std::strstr(symcommGetLastError(), "receive buffer must be symmetric"), nullptr)
        << symcommGetLastError();
    release(send, false);
    release(recv, false);
    return true;
  }
  // Whether the algorithm under test refuses `op` by design (buffers symmetric or not; in a
  // CUDA graph capture or not): twoshot only reduces; direct only moves data, into symmetric
  // receive buffers, and does no all-to-all-v; relay only broadcasts, into symmetric receive
  // buffers; only sm reads counts on the device; copy's all-to-all-v cannot be captured. The
  // tests count any other refusal as a failure.
  bool refuses(Op op, bool symmetric, bool captured = false) const {
    const std::string a = algo_;
    const bool reduction = op == Op::ReduceScatter || op == Op::AllReduce;
    if (op == Op::AllToAllvDevice)  // sm on GPUs, copy in the host space
      return !(a == "auto" || a == (mp::space() == symcommSpaceCuda ? "sm" : "copy"));
    if (a == "twoshot") return !reduction;
    if (broadcasts_only_) return op != Op::Broadcast || !symmetric;
    if (moves_only_) return reduction || op == Op::AllToAllv || !symmetric;
    return a == "copy" && captured && op == Op::AllToAllv;
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
  // All-to-all-v with counts in device memory (sm, and the automatic choice on GPUs): the
  // counts travel on the device, the blocks arrive packed in team-rank order, and blocks
  // beyond the capacity are dropped whole. Elsewhere it is refused (checked); false then.
  bool device_counts_case(const Type& t, size_t max_count) {
    SCOPED_TRACE(std::string(t.name) + " max count " + std::to_string(max_count));
    const DeviceCountsCall d = device_counts_setup(t, max_count, seed_);
    EXPECT_EQ(symcommHostBarrier(comm_), symcommSuccess);
    const symcommResult_t rc = device_counts_run(d, t);
    const bool runs = !refuses(Op::AllToAllvDevice, false);
    if (runs) {
      EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
      device_counts_check(d, t);
    } else {  // sm on GPUs and copy in the host space only
      EXPECT_EQ(rc, symcommNotSupported) << symcommGetLastError();
      if (std::string(algo_) == "ce" || std::string(algo_) == "copy") {  // says why
        EXPECT_NE(std::strstr(symcommGetLastError(), "counts on the device is sm's on GPUs"),
                  nullptr) << symcommGetLastError();
      }
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
  const char* algo_ = nullptr;
  bool moves_only_ = false;  // direct: data movement into symmetric or registered buffers
  bool broadcasts_only_ = false;  // relay: broadcast into symmetric or registered buffers
};

TEST_P(Coll, AllGather) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  if (broadcasts_only()) GTEST_SKIP() << algo_ << " does broadcast only";
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t count : kCounts) {
        if (plain_recv_refused(sym)) continue;
        all_gather_case(t, count, sym);
      }
}

TEST_P(Coll, AllToAll) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  if (broadcasts_only()) GTEST_SKIP() << algo_ << " does broadcast only";
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t count : kCounts) {
        if (plain_recv_refused(sym)) continue;
        all_to_all_case(t, count, sym);
      }
}

TEST_P(Coll, ReduceScatterAndAllReduce) {
  if (moves_only()) GTEST_SKIP() << algo_ << " does no reductions";
  for (const Type& t : kTypes)
    for (symcommRedOp_t op : {symcommSum, symcommMin, symcommMax})
      for (size_t count : kCounts) reductions_case(t, op, count);
}

// Every type and size, the root going round; and every root once.
TEST_P(Coll, BroadcastFromEveryRoot) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
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
  if (moves_only()) GTEST_SKIP() << algo_ << " does no reductions";
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
    // An all-to-all (relay: a broadcast of nb bytes from the last rank).
    const int root = n_ - 1;
    auto call = [&](const void* from) {
      return broadcasts_only_
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
                 (broadcasts_only_
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
  const uint64_t seed = mp::agree(std::random_device{}());
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

TEST_P(Coll, AllToAllvRandomCounts) {
  if (reduces_only()) GTEST_SKIP() << algo_ << " does reductions only";
  if (broadcasts_only()) GTEST_SKIP() << algo_ << " does broadcast only";
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
  // Counts below each of kCounts (as the largest count to a member), every type.
  for (bool sym : {false, true})
    for (const Type& t : kTypes)
      for (size_t max_count : kCounts) all_to_all_v_case(t, max_count, sym);
}

// A member that receives nothing may pass recv = NULL while the others' receive buffers are
// symmetric: every member must still take the same path (copy then stages on all of them,
// through the same barriers, where it used to write in place on some and time out). Twice,
// so that a barrier too many or too few on one member shows.
TEST_P(Coll, AllToAllvIntoNullOnAMemberThatReceivesNothing) {
  if (refuses(Op::AllToAllv, true)) GTEST_SKIP() << algo_ << " does not do all-to-all-v";
  const Type& t = kTypes[6];  // float32
  const size_t nn = static_cast<size_t>(n_), last = nn - 1;
  VLayout v;
  v.counts.assign(nn, std::vector<size_t>(nn));
  for (size_t i = 0; i < nn; ++i)
    for (size_t j = 0; j < nn; ++j) v.counts[i][j] = j == last ? 0 : 10000 + 7 * i + j;
  const std::vector<size_t> sc = v.sends(me_), sd = v.sdispls(me_), rc = v.receives(me_), rd = v.rdispls(me_);
  const size_t se = VLayout::extent(sd, sc) + 1, re = nn * (10000 + 8 * nn) + 1;
  void* send = buffer(se * t.size, false);
  void* recv = buffer(re * t.size, true);  // every member allocates (collective); the last passes NULL
  const bool receives = static_cast<size_t>(me_) != last;
  for (uint64_t k = 0; k < 2; ++k) {
    SCOPED_TRACE("call " + std::to_string(k));
    put(send, make(t, seed_ + k, me_, 0, se));
    poison(recv, re * t.size);
    SC_OK(symcommHostBarrier(comm_));
    SC_OK(symcommAllToAllvOnStream(comm_, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(),
                                   receives ? recv : nullptr, rc.data(), rd.data(), t.id, algo_,
                                   stream_));
    const std::vector<uint8_t> want =
        receives ? v.received(t, seed_ + k, me_, re) : std::vector<uint8_t>(re * t.size, 0xAB);
    EXPECT_EQ(differences(fetch(recv, re * t.size), want, t.size), "");
    SC_OK(symcommHostBarrier(comm_));
  }
  release(send, false);
  release(recv, true);
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


// All-to-all-v with counts in device memory, every type, the counts below each of kCounts.
TEST_P(Coll, AllToAllvWithCountsOnTheDevice) {
  for (const Type& t : kTypes)
    for (size_t max_count : kCounts)
      if (!device_counts_case(t, max_count)) return;  // refused (checked): once is enough
}

// Six all-to-all-vs with counts on the device, each with counts, sizes and data of its own,
// and an all-to-all between each two, back to back on one stream without a host
// synchronisation: each call must take its counts, not a neighbour's (the table of counts
// in the sm area and its epoch), and the data of its own send buffer.
TEST_P(Coll, AllToAllvWithCountsOnTheDeviceBackToBack) {
  if (refuses(Op::AllToAllvDevice, false)) GTEST_SKIP() << algo_ << " refuses counts on the device";
  const Type& t = kTypes[1];  // int32
  const size_t nb = 3000 * t.size * static_cast<size_t>(n_);
  std::vector<DeviceCountsCall> calls;
  std::vector<void*> a2a_send, a2a_recv;
  for (uint64_t k = 0; k < 6; ++k) {
    calls.push_back(device_counts_setup(t, std::vector<size_t>{0, 9, 5000, 70000, 1, 300}[k], seed_ + 100 * k));
    a2a_send.push_back(buffer(nb, false));
    put(a2a_send.back(), make(t, seed_ + k, me_, 0, nb / t.size));
    a2a_recv.push_back(buffer(nb, true));
    poison(a2a_recv.back(), nb);
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  for (size_t k = 0; k < 6; ++k) {
    SC_OK(device_counts_run(calls[k], t));
    SC_OK(symcommAllToAllOnStream(comm_, SYMCOMM_TEAM_WORLD, a2a_send[k], a2a_recv[k], 3000,
                                  t.id, algo_, stream_));
  }
  for (size_t k = 0; k < 6; ++k) {
    SCOPED_TRACE("call " + std::to_string(k));
    device_counts_check(calls[k], t);
    const std::vector<uint8_t> got = fetch(a2a_recv[k], nb);
    for (int i = 0; i < n_; ++i) {
      const std::vector<uint8_t> want = make(t, seed_ + k, i, 3000 * static_cast<size_t>(me_), 3000);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin() + static_cast<long>(static_cast<size_t>(i) * 3000 * t.size)))
          << "all-to-all block from " << i;
    }
  }
  SC_OK(symcommHostBarrier(comm_));
  for (const DeviceCountsCall& d : calls) device_counts_release(d);
  for (void* p : a2a_send) release(p, false);
  for (void* p : a2a_recv) release(p, true);
}

// Counts on the device on a team whose team ranks are not its world ranks (the even
// ranks), alternating with calls on the world, back to back on one stream: the members'
// headers are found by world rank, and the channel counters and the readers' counter stay
// in step although the odd ranks make fewer calls.
TEST_P(Coll, AllToAllvWithCountsOnTheDeviceOnATeam) {
  if (refuses(Op::AllToAllvDevice, false)) GTEST_SKIP() << algo_ << " refuses counts on the device";
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n_ + 1) / 2, &even));
  const Type& t = kTypes[6];
  std::vector<DeviceCountsCall> calls;
  for (uint64_t k = 0; k < 4; ++k) {
    const bool on_even = k % 2 == 0;
    if (on_even && even == SYMCOMM_TEAM_INVALID) continue;
    calls.push_back(on_even ? device_counts_setup(t, 3000 + 500 * k, seed_ + k, even, (n_ + 1) / 2, me_ / 2)
                            : device_counts_setup(t, 3000 + 500 * k, seed_ + k));
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  for (const DeviceCountsCall& d : calls) SC_OK(device_counts_run(d, t));
  for (const DeviceCountsCall& d : calls) {
    SCOPED_TRACE(d.team == SYMCOMM_TEAM_WORLD ? "world" : "even team");
    device_counts_check(d, t);
  }
  SC_OK(symcommHostBarrier(comm_));
  for (const DeviceCountsCall& d : calls) device_counts_release(d);
  if (even != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(comm_, even));
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

// A team of the even ranks: an all-gather, then all-reduces on the team and on the world
// interleaved (algorithms that keep per-pair counters must stay in step across teams).
TEST_P(Coll, OnATeam) {
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (n_ + 1) / 2, &even));
  const Type& t = kTypes[6];
  const size_t count = 5000, b = count * t.size;
  const bool moves = !reduces_only(), reduces = !moves_only();
  const int size = (n_ + 1) / 2;
  if (broadcasts_only_) {
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
  if (std::strcmp(algo_, "relay") == 0) {
    void* sym = buffer(4096, true);
    for (const char* bad : {"SYMCOMM_COLL_RELAY_BLOCKS=0", "SYMCOMM_COLL_RELAY_BLOCKS=129",
                            "SYMCOMM_COLL_RELAY_CHUNK=8", "SYMCOMM_COLL_RELAY_LANE_BYTES=0",
                            "SYMCOMM_COLL_RELAY_STEPS=0"}) {
      const std::string kv = bad, name = kv.substr(0, kv.find('='));
      mp::ScopedEnv env(name.c_str(), kv.substr(kv.find('=') + 1).c_str());
      SC_FAILS(symcommBroadcastOnStream(comm_, w, a, sym, 10, symcommFloat32, 0, algo_, stream_),
               symcommInvalidArgument);
      EXPECT_NE(std::strstr(symcommGetLastError(), name.c_str()), nullptr) << symcommGetLastError();
    }
    mp::sync(stream_);
    SC_OK(symcommHostBarrier(comm_));
    release(sym, true);
  }
  const size_t counts[64] = {}, displs[64] = {};
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, nullptr, displs, b, counts, displs,
                                    symcommFloat32, algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sendcounts"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, counts, displs, b, counts, nullptr,
                                    symcommFloat32, algo_, stream_), symcommInvalidArgument);
  // Buffers not aligned to their type (kernels load elements through T*).
  char* ca = static_cast<char*>(a);
  SC_FAILS(symcommAllReduceOnStream(comm_, w, ca + 2, b, 10, symcommFloat32, symcommSum, algo_,
                                    stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "is not aligned to 4 bytes"), nullptr)
      << symcommGetLastError();
  SC_FAILS(symcommAllGatherOnStream(comm_, w, a, static_cast<char*>(b) + 4, 10, symcommFloat64,
                                    algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "recv"), nullptr) << symcommGetLastError();
  // All-to-all-v: receive blocks that overlap; an extent that overflows, by its count or its
  // displacement (in bytes it would wrap around).
  const size_t nn = static_cast<size_t>(n_);
  std::vector<size_t> fours(nn, 4), apart(nn), close(nn);
  for (size_t j = 0; j < nn; ++j) apart[j] = 4 * j, close[j] = 3 * j;
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, fours.data(), apart.data(), b, fours.data(),
                                    close.data(), symcommFloat32, algo_, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "overlap"), nullptr) << symcommGetLastError();
  std::vector<size_t> one(nn, 1), huge(nn, 0);
  huge[nn - 1] = SIZE_MAX / 8;
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, huge.data(), apart.data(), b, one.data(),
                                    apart.data(), symcommFloat64, algo_, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::string(symcommGetLastError()).find("sendcounts[" + std::to_string(nn - 1) + "]"),
            std::string::npos) << symcommGetLastError();
  SC_FAILS(symcommAllToAllvOnStream(comm_, w, a, one.data(), apart.data(), b, one.data(),
                                    huge.data(), symcommFloat64, algo_, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::string(symcommGetLastError()).find("recvcounts[" + std::to_string(nn - 1) + "]"),
            std::string::npos) << symcommGetLastError();
  // Counts on the device: 8-byte aligned, and in memory the GPU can access (the host's
  // pageable memory is refused in the cuda space; in the host space, all memory is the
  // host's, and copy and auto run the call: here with zero counts, moving nothing).
  std::vector<size_t> host_counts(4 * nn, 0);
  size_t* hc = host_counts.data();
  auto* odd = reinterpret_cast<size_t*>(ca + 4);
  SC_FAILS(symcommAllToAllvDeviceOnStream(comm_, w, a, odd, odd, b, 10, odd, odd, symcommFloat32,
                                          algo_, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "is not aligned to 8 bytes"), nullptr)
      << symcommGetLastError();
  const bool cuda = mp::space() == symcommSpaceCuda;
  const symcommResult_t host_rc = symcommAllToAllvDeviceOnStream(
      comm_, w, a, hc, hc + nn, b, 10, hc + 2 * nn, hc + 3 * nn, symcommFloat32, algo_, stream_);
  if (cuda) {
    EXPECT_EQ(host_rc, symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "not memory the GPU can access"), nullptr)
        << symcommGetLastError();
  } else if (refuses(Op::AllToAllvDevice, false)) {
    EXPECT_EQ(host_rc, symcommNotSupported) << symcommGetLastError();
  } else {
    EXPECT_EQ(host_rc, symcommSuccess) << symcommGetLastError();
    EXPECT_EQ(host_counts[2 * nn], 0u);  // what member 0 sent here (written)
  }
  ASSERT_GE(symcommCollAlgorithmCount(), 2);
  EXPECT_STREQ(symcommCollAlgorithmName(0), "sm");
  EXPECT_STREQ(symcommCollAlgorithmName(1), "copy");
  // ce is registered last: the registry order reaches it only where nothing else runs the
  // call; the selection table's rows send it large all-to-alls and all-gathers.
  EXPECT_STREQ(symcommCollAlgorithmName(symcommCollAlgorithmCount() - 1), "ce");
  EXPECT_EQ(symcommCollAlgorithmName(symcommCollAlgorithmCount()), nullptr);
  mp::sync(stream_);
  release(a, false);
  release(b, false);
}

// The automatic choice, asked (symcommCollAlgorithm) and followed by calls:
// SYMCOMM_COLL_ALGO overrides it, for every operation or per operation, and the calls run
// the algorithm it names (seen where that algorithm refuses the call: the call's error is
// its refusal); "auto" (whole, or for one operation) means the table; a value that names no
// operation or algorithm fails every call, naming what is wrong.
TEST(CollChoice, FollowsSymcommCollAlgo) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t s = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const bool cuda = mp::space() == symcommSpaceCuda;
  const Type& t = kTypes[6];  // float32
  const size_t count = 1000, b = count * t.size;
  const uint64_t seed = mp::agree(std::random_device{}());
  void* send = nullptr;
  void* recv = nullptr;
  SC_OK(symcommMalloc(comm, b, &send));
  SC_OK(symcommMalloc(comm, b * static_cast<size_t>(n), &recv));
  mp::store(send, make(t, seed, me, 0, count));
  // An all-gather (symcommCollAllGather) or all-reduce on symmetric buffers, by the automatic
  // choice, checked: returns the call's result code.
  auto call = [&](symcommCollOp_t op) {
    mp::store(recv, std::vector<uint8_t>(b * static_cast<size_t>(n), 0xAB));
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess);
    const bool gather = op == symcommCollAllGather;
    const symcommResult_t rc =
        gather ? symcommAllGatherOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, t.id, nullptr, s)
               : symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, t.id,
                                          symcommSum, nullptr, s);
    if (rc == symcommSuccess) {
      const std::vector<uint8_t> want =
          gather ? gathered(t, seed, n, count) : reduced(t, symcommSum, seed, n, 0, count);
      EXPECT_EQ(differences(mp::fetch(s, recv, want.size()), want, t.size), "");
    }
    EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess);
    return rc;
  };
  auto query = [&](symcommCollOp_t op, const char** name) {
    return symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, op, count, t.id, 1, name);
  };
  // Without SYMCOMM_COLL_ALGO, and with "auto": a registered algorithm for every operation;
  // in the host space copy does every reduction.
  std::vector<std::string> registered;
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) registered.push_back(symcommCollAlgorithmName(i));
  for (const char* value : {"", "auto", "allreduce=auto"}) {
    SCOPED_TRACE(std::string("SYMCOMM_COLL_ALGO=") + value);
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", value);
    for (int op = symcommCollAllGather; op <= symcommCollBroadcast; ++op) {
      const char* name = nullptr;
      SC_OK(query(static_cast<symcommCollOp_t>(op), &name));
      EXPECT_NE(std::find(registered.begin(), registered.end(), name), registered.end()) << name;
      if (!cuda && (op == symcommCollAllReduce || op == symcommCollReduceScatter)) {
        EXPECT_STREQ(name, "copy");
      }
    }
    SC_OK(call(symcommCollAllGather));
    SC_OK(call(symcommCollAllReduce));
  }
  // SYMCOMM_COLL_ALGO=<algorithm>: the query names it where it runs the call, and the call
  // runs; where it refuses, both fail with its refusal.
  for (const std::string& algo : registered) {
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", algo);
    for (symcommCollOp_t op : {symcommCollAllGather, symcommCollAllReduce}) {
      SCOPED_TRACE(algo + (op == symcommCollAllGather ? " all-gather" : " all-reduce"));
      const bool gather = op == symcommCollAllGather;
      const bool runs = algo == "copy" || (algo == "direct" && gather) ||
                        (cuda && (algo == "sm" || algo == "ll" || algo == "ce" || algo == "nccl" ||
                                  (algo == "twoshot" && !gather)));
      const char* name = nullptr;
      const symcommResult_t asked = query(op, &name);
      const std::string why_asked = symcommGetLastError();
      const symcommResult_t ran = call(op);
      const std::string why = symcommGetLastError();
      if (algo == "nccl" && ran == symcommNotSupported && mp::nccl_missing(why)) continue;
      if (runs) {
        EXPECT_EQ(asked, symcommSuccess) << why_asked;
        if (asked == symcommSuccess) {
          EXPECT_EQ(std::string(name), algo);
        }
        EXPECT_EQ(ran, symcommSuccess) << why;
      } else {
        EXPECT_EQ(asked, symcommNotSupported) << why_asked;
        EXPECT_EQ(ran, symcommNotSupported) << why;
        const std::string refusal = "collective algorithm '" + algo + "' cannot run";
        EXPECT_NE(why_asked.find(refusal), std::string::npos) << why_asked;
        EXPECT_NE(why.find(refusal), std::string::npos) << why;
      }
    }
  }
  // Per operation: all-gather by copy, all-reduce by the table (auto), which the query and
  // the call agree on.
  {
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", "allgather=copy,allreduce=auto,");
    const char* name = nullptr;
    SC_OK(query(symcommCollAllGather, &name));
    EXPECT_STREQ(name, "copy");
    SC_OK(call(symcommCollAllGather));
    SC_OK(call(symcommCollAllReduce));
  }
  // Typos fail every call and every query, whichever operation they concern.
  for (const char* value : {"allgather=copy,allreduc=copy", "allgather=nope", "copy,allreduce=copy",
                            "cpoy"}) {
    SCOPED_TRACE(std::string("SYMCOMM_COLL_ALGO=") + value);
    mp::ScopedEnv env("SYMCOMM_COLL_ALGO", value);
    const char* name = nullptr;
    SC_FAILS(query(symcommCollAllReduce, &name), symcommInvalidArgument);
    for (symcommCollOp_t op : {symcommCollAllGather, symcommCollAllReduce}) {
      SC_FAILS(call(op), symcommInvalidArgument);
      const std::string why = symcommGetLastError();
      EXPECT_NE(why.find(std::string("SYMCOMM_COLL_ALGO=") + value), std::string::npos) << why;
    }
  }
  const char* name = nullptr;
  SC_FAILS(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, static_cast<symcommCollOp_t>(9), count,
                                t.id, 0, &name), symcommInvalidArgument);
  SC_FAILS(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllGather, count, t.id, 0,
                                nullptr), symcommInvalidArgument);
  mp::sync(s);
  SC_OK(symcommFree(comm, send));
  SC_OK(symcommFree(comm, recv));
  mp::free_stream(s);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
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

// copy's all-to-all-v reads the counts back on the host, which a CUDA graph capture cannot
// do. Where sm cannot run (no room for its rings), the registry order gives all-to-all-v to
// copy: outside a capture the automatic choice is copy (asked here), inside one it passes
// over copy to an algorithm that captures (ll), whose graph replays correctly with new data.
// Asked for by name in a capture, copy refuses before it enqueues anything, and the capture
// goes on.
TEST(CollLimits, AutomaticChoicePassesOverCopyInAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda space";
  mp::ScopedEnv rings("SYMCOMM_COLL_SM_BYTES", "256K");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t s = mp::new_stream();
  const int n = mp::nranks(), me = mp::rank();
  const Type& t = kTypes[6];  // float32
  const uint64_t seed = mp::agree(std::random_device{}());
  const VLayout v = random_layout(seed, n, 3000);
  const std::vector<size_t> sc = v.sends(me), sd = v.sdispls(me), rc = v.receives(me), rd = v.rdispls(me);
  const size_t se = VLayout::extent(sd, sc) + 1, re = VLayout::extent(rd, rc) + 1;
  void* send = mp::local_alloc(se * t.size);
  void* recv = mp::local_alloc(re * t.size);
  size_t total = 0;
  for (size_t c : sc) total += c;
  const char* name = nullptr;
  SC_OK(symcommCollAlgorithm(comm, SYMCOMM_TEAM_WORLD, symcommCollAllToAllv, total, t.id, 0, &name));
  EXPECT_STREQ(name, "copy");
  ASSERT_EQ(mp::begin_capture(s), 0);
  SC_FAILS(symcommAllToAllvOnStream(comm, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(), recv,
                                    rc.data(), rd.data(), t.id, "copy", s), symcommNotSupported);
  EXPECT_NE(std::strstr(symcommGetLastError(), "cannot be captured"), nullptr) << symcommGetLastError();
  const symcommResult_t captured = symcommAllToAllvOnStream(
      comm, SYMCOMM_TEAM_WORLD, send, sc.data(), sd.data(), recv, rc.data(), rd.data(), t.id,
      nullptr, s);
  EXPECT_EQ(captured, symcommSuccess) << symcommGetLastError();
  void* exec = mp::end_capture(s);
  ASSERT_NE(exec, nullptr);
  for (uint64_t k = 1; k <= 2 && captured == symcommSuccess; ++k) {
    SCOPED_TRACE("replay " + std::to_string(k));
    mp::store(send, make(t, seed + k, me, 0, se));
    mp::store(recv, std::vector<uint8_t>(re * t.size, 0xAB));
    SC_OK(symcommHostBarrier(comm));
    ASSERT_EQ(mp::launch_graph(exec, s), 0);
    EXPECT_EQ(differences(mp::fetch(s, recv, re * t.size), v.received(t, seed + k, me, re), t.size), "");
    SC_OK(symcommHostBarrier(comm));
  }
  mp::destroy_graph(exec);
  mp::local_free(send);
  mp::local_free(recv);
  mp::free_stream(s);
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

// The algorithms that keep counters with their peers (sm, ll, twoshot, relay): a wait of theirs
// that never ends (only rank 0 calls) is cut at SYMCOMM_WAIT_TIMEOUT and reported at the
// next call; after it the algorithm refuses every call on that communicator, rather than
// run with counters that no longer agree with the peers' (a later wait could pass on a
// stale signal). Other algorithms, and a fresh communicator, still run.
// After a wait of an algorithm's timed out on this rank: the next call reports it, and
// `again` (a call of that algorithm) is refused for good.
void expect_refused_after_timeout(symcommComm_t comm, symcommStream_t stream,
                                  const std::function<symcommResult_t()>& again) {
  mp::sync(stream);
  SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
  SC_FAILS(again(), symcommTimeout);
  EXPECT_NE(std::strstr(symcommGetLastError(), "cannot run on this communicator any more"), nullptr)
      << symcommGetLastError();
  mp::sync(stream);
}

TEST(CollLimits, CounterAlgorithmsRefuseCallsAfterAFailedWait) {
  if (mp::space() != symcommSpaceCuda)
    GTEST_SKIP() << "sm, ll, twoshot and relay run in the cuda space";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  const size_t count = 1000;
  for (const char* algo : {"sm", "ll", "twoshot", "relay"}) {
    SCOPED_TRACE(algo);
    symcommComm_t comm = mp::new_comm();
    ASSERT_NE(comm, nullptr);
    symcommStream_t stream = mp::new_stream();
    void* buf = nullptr;
    SC_OK(symcommMalloc(comm, count * 4, &buf));
    if (mp::rank() == 0) {  // the others never call: rank 0's waits time out
      auto call = [&] {  // relay: a broadcast from rank 0, in place
        return std::strcmp(algo, "relay") == 0
                   ? symcommBroadcastOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count,
                                              symcommInt32, 0, algo, stream)
                   : symcommAllReduceOnStream(comm, SYMCOMM_TEAM_WORLD, buf, buf, count,
                                              symcommInt32, symcommSum, algo, stream);
      };
      SC_OK(call());
      expect_refused_after_timeout(comm, stream, call);
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

// All-to-all-v with counts on the device that only rank 0 calls: its blocks' waits for the
// members' headers end at SYMCOMM_WAIT_TIMEOUT, the next call says so, and sm refuses calls
// on the communicator from then on (the other algorithms still run).
TEST(CollLimits, CountsOnTheDeviceWaitEndsAtTheTimeout) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "counts on the device: the cuda space";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommStream_t stream = mp::new_stream();
  const size_t n = static_cast<size_t>(mp::nranks()), count = 100;
  void* send = mp::local_alloc(n * count * 4);
  void* recv = mp::local_alloc(n * count * 4);
  auto* counts = static_cast<size_t*>(mp::local_alloc(4 * n * sizeof(size_t)));
  std::vector<size_t> host(4 * n);
  for (size_t j = 0; j < n; ++j) {
    host[j] = count;
    host[n + j] = j * count;
  }
  mp::store(counts, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(host.data()),
                                         reinterpret_cast<uint8_t*>(host.data() + host.size())));
  if (mp::rank() == 0) {  // the others never call
    const auto t0 = std::chrono::steady_clock::now();
    SC_OK(symcommAllToAllvDeviceOnStream(comm, SYMCOMM_TEAM_WORLD, send, counts, counts + n, recv,
                                         n * count, counts + 2 * n, counts + 3 * n, symcommInt32,
                                         "sm", stream));
    expect_refused_after_timeout(comm, stream, [&] {
      return symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32,
                                     "sm", stream);
    });
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  }
  EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
  SC_OK(symcommAllToAllOnStream(comm, SYMCOMM_TEAM_WORLD, send, recv, count, symcommInt32, "copy",
                                stream));
  mp::sync(stream);
  mp::local_free(send);
  mp::local_free(recv);
  mp::local_free(counts);
  mp::free_stream(stream);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
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
