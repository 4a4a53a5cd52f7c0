// Chains of transposes X -> Y -> Z -> Y -> X on every grid at once, each step by a backend
// drawn at random (from a seed all ranks share) among those that run here, with a random
// element type, halos and padding and buffer kind per chain, and the chains' steps
// interleaved on one stream with no synchronisation: one decomposition's transpose in
// flight while the next, of another grid and backend, starts, and each step reading what
// the previous step of its chain, by another backend, wrote. Every output is checked at the
// end; in the cuda space the same sequence is then captured in a CUDA graph and replayed
// with other values.
#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "decomp_fixture.h"

namespace decomp_test {
namespace {

struct Chain {
  int grid = 0;
  symcommDecompType_t type = symcommR64;
  Buffers kind = Buffers::Local;
  int64_t halo[3] = {0, 0, 0}, padding[3] = {0, 0, 0};
  int backend[4] = {0, 0, 0, 0};  // per step, an index into the runnable backends
  void* buf[5] = {};             // the pencils X, Y, Z, Y, X
  symcommPencilInfo_t info[3] = {};
};

constexpr int kSteps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};

class DecompMix : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* fixed = std::getenv("SYMCOMM_TEST_MIX_SEED");
    seed_ = mp::agree(fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}());
    for (const std::string& b : backend_names()) {
      std::string why;
      if (runs_here(b, &why)) backends_.push_back(b);
    }
    ASSERT_FALSE(backends_.empty());
    grids_ = test_grids();
    const bool gpu = mp::space() == symcommSpaceCuda;
    const int64_t dims[3] = {gpu ? 96 : fit(7), gpu ? 80 : fit(9), gpu ? 72 : fit(6)};
    std::copy(dims, dims + 3, gdims_);
    // One decomposition per grid and backend, with a dirty workspace for the widest type.
    for (auto [pr, pc] : grids_) {
      std::vector<symcommDecomp_t> row;
      std::vector<void*> spaces;
      for (const std::string& b : backends_) {
        symcommDecomp_t d = make_decomp(grid_config(gdims_, pr, pc), b);
        ASSERT_NE(d, nullptr);
        size_t bytes = 0;
        SC_OK(symcommDecompWorkspaceSize(d, symcommC64, &bytes));
        row.push_back(d);
        spaces.push_back(dirty_workspace(bytes));
      }
      decomps_.push_back(row);
      workspaces_.push_back(spaces);
    }
    stream_ = mp::new_stream();
  }
  void TearDown() override {
    if (stream_) {
      mp::sync(stream_);
      mp::free_stream(stream_);
    }
    for (Chain& c : chains_)
      for (void* p : c.buf)
        if (p) free_buffer(c.kind, p);
    for (auto& row : workspaces_)
      for (void* w : row) EXPECT_EQ(symcommFree(mp::world(), w), symcommSuccess);
    for (auto& row : decomps_)
      for (symcommDecomp_t d : row) EXPECT_EQ(symcommDecompDestroy(d), symcommSuccess);
  }

  // Two chains per grid; pencil geometry from the first step's decomposition, which every
  // backend of the grid shares (checked).
  void plan() {
    std::mt19937_64 rng(seed_);
    const int64_t halos[3][2][3] = {
        {{0, 0, 0}, {0, 0, 0}}, {{1, 0, 2}, {2, 0, 1}}, {{1, 1, 1}, {1, 0, 0}}};
    for (int g = 0; g < static_cast<int>(grids_.size()); ++g)
      for (int k = 0; k < 2; ++k) {
        Chain c;
        c.grid = g;
        c.type = kTypes[rng() % 4];
        c.kind = rng() % 2 ? Buffers::Symmetric : Buffers::Local;
        const int layout = static_cast<int>(rng() % 3);
        std::copy(halos[layout][0], halos[layout][0] + 3, c.halo);
        std::copy(halos[layout][1], halos[layout][1] + 3, c.padding);
        for (int& b : c.backend) b = static_cast<int>(rng() % backends_.size());
        int64_t most = 0;
        for (int a = 0; a < 3; ++a) {
          SC_OK(symcommDecompPencilInfo(decomps_[g][0], a, c.halo, c.padding, &c.info[a]));
          most = std::max(most, c.info[a].size);
          for (size_t b = 1; b < backends_.size(); ++b) {
            symcommPencilInfo_t other;
            SC_OK(symcommDecompPencilInfo(decomps_[g][b], a, c.halo, c.padding, &other));
            ASSERT_EQ(other.size, c.info[a].size) << backends_[b] << ", axis " << a;
            ASSERT_TRUE(std::equal(other.lo, other.lo + 3, c.info[a].lo)) << backends_[b];
          }
        }
        for (void*& p : c.buf) p = alloc_buffer(c.kind, static_cast<size_t>(most) * elem_bytes(c.type));
        chains_.push_back(c);
      }
    // Steps in rounds: round s holds every chain's step s, in an order of its own.
    for (int s = 0; s < 4; ++s) {
      std::vector<int> order(chains_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::shuffle(order.begin(), order.end(), rng);
      for (int i : order) sequence_.push_back({i, s});
    }
  }

  // Pencil p's values for a run: every owned point its index plus `offset`, the rest -1.
  std::vector<double> filled(const symcommPencilInfo_t& p, double offset) const {
    std::vector<double> v = fill_pencil(p, gdims_);
    for (double& e : v)
      if (e >= 0) e += offset;
    return v;
  }

  // Inputs for a run; every output poisoned (-1, what halos and padding must keep).
  void refill(double offset) {
    for (Chain& c : chains_) {
      store_values(c.buf[0], filled(c.info[0], offset), c.type);
      for (int s = 1; s < 5; ++s)
        store_values(c.buf[s], std::vector<double>(static_cast<size_t>(c.info[kSteps[s - 1][1]].size), -1.0),
                     c.type);
    }
    mp::sync(stream_);
  }

  std::string describe(const Chain& c, int s) const {
    return "grid " + std::to_string(grids_[static_cast<size_t>(c.grid)].first) + "x" +
           std::to_string(grids_[static_cast<size_t>(c.grid)].second) + ", " + type_name(c.type) +
           (c.kind == Buffers::Symmetric ? ", symmetric" : ", local") + ", halo " +
           std::to_string(c.halo[0]) + std::to_string(c.halo[1]) + std::to_string(c.halo[2]) +
           ", step " + std::to_string(kSteps[s][0]) + " -> " + std::to_string(kSteps[s][1]) +
           " by " + backends_[static_cast<size_t>(c.backend[s])] +
           " (SYMCOMM_TEST_MIX_SEED=" + std::to_string(seed_) + ")";
  }

  bool run_sequence() {
    for (auto [i, s] : sequence_) {
      Chain& c = chains_[static_cast<size_t>(i)];
      const size_t b = static_cast<size_t>(c.backend[s]);
      const symcommResult_t rc = symcommDecompTranspose(
          decomps_[static_cast<size_t>(c.grid)][b], kSteps[s][0], kSteps[s][1], c.buf[s],
          c.buf[s + 1], workspaces_[static_cast<size_t>(c.grid)][b], c.type, c.halo, c.padding,
          c.halo, c.padding, stream_);
      if (rc != symcommSuccess) {
        ADD_FAILURE() << describe(c, s) << ": " << symcommGetLastError();
        return false;
      }
    }
    return true;
  }

  void check(double offset, const std::string& when) {
    mp::sync(stream_);
    for (const Chain& c : chains_)
      for (int s = 0; s < 4; ++s) {
        const symcommPencilInfo_t& p = c.info[kSteps[s][1]];
        const std::vector<double> got = load_values(c.buf[s + 1], static_cast<size_t>(p.size), c.type);
        const std::vector<double> want = filled(p, offset);
        size_t bad = 0;
        for (size_t k = 0; k < want.size(); ++k) bad += !(got[k] == want[k]);
        EXPECT_EQ(bad, 0u) << when << ", " << describe(c, s);
      }
  }

  uint64_t seed_ = 0;
  std::vector<std::string> backends_;
  std::vector<std::pair<int, int>> grids_;
  int64_t gdims_[3] = {0, 0, 0};
  std::vector<std::vector<symcommDecomp_t>> decomps_;
  std::vector<std::vector<void*>> workspaces_;
  std::vector<Chain> chains_;
  std::vector<std::pair<int, int>> sequence_;  // (chain, step)
  symcommStream_t stream_ = nullptr;
};

TEST_F(DecompMix, InterleavedChainsAcrossBackendsAndGrids) {
  plan();
  refill(0);
  SC_OK(symcommHostBarrier(mp::world()));
  ASSERT_TRUE(run_sequence());
  check(0, "eager");
}

TEST_F(DecompMix, InterleavedChainsReplayedFromAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda memory space";
  plan();
  refill(0);
  SC_OK(symcommHostBarrier(mp::world()));
  ASSERT_TRUE(run_sequence());  // eager first: NCCL makes its communicators outside a capture
  check(0, "eager");
  SC_OK(symcommHostBarrier(mp::world()));
  ASSERT_EQ(mp::begin_capture(stream_), 0);
  const bool issued = run_sequence();
  void* graph = mp::end_capture(stream_);
  ASSERT_TRUE(issued);
  ASSERT_NE(graph, nullptr);
  for (int r = 1; r <= 3; ++r) {
    refill(1e6 * r);
    SC_OK(symcommHostBarrier(mp::world()));
    ASSERT_EQ(mp::launch_graph(graph, stream_), 0);
    check(1e6 * r, "replay " + std::to_string(r));
    if (!mp::all_ok(!HasFailure())) break;
  }
  mp::destroy_graph(graph);
}

}  // namespace
}  // namespace decomp_test
