// Chains of transposes X -> Y -> Z -> Y -> X on every grid at once, each step by a backend
// drawn at random (from a seed all ranks share) among those that run here, with a random
// element type, halos and padding and buffer kind per chain, and the chains' steps
// interleaved on one stream with no synchronisation: one decomposition's transpose in
// flight while the next, of another grid and backend, starts, and each step reading what
// the previous step of its chain, by another backend, wrote. Where a chain has halos, each
// step's output then has its halos exchanged along some of the axes (in axis order, each by
// a backend of its own, periodic or not per axis), through the same workspaces as the
// transposes, before the next step reads it. Every output is checked at the end, halos
// included; in the cuda space the same sequence is then captured in a CUDA graph and
// replayed with other values.
#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "decomp_fixture.h"
#include "mix.h"

namespace decomp_test {
namespace {

struct Chain {
  int grid = 0;
  symcommDecompType_t type = symcommR64;
  Buffers kind = Buffers::Local;
  int64_t halo[3] = {0, 0, 0}, padding[3] = {0, 0, 0};
  int backend[4] = {0, 0, 0, 0};  // per step, an index into the runnable backends
  int exchange[4][3] = {};        // per step and axis: the halo exchange's backend, or -1
  int periodic[4][3] = {};        // per step: the exchanges' periodicity
  void* buf[5] = {};             // the pencils X, Y, Z, Y, X
  symcommPencilInfo_t info[3] = {};
};

constexpr int kSteps[4][2] = {{0, 1}, {1, 2}, {2, 1}, {1, 0}};

// The chains' halo and padding layouts (per global axis).
constexpr int64_t kLayouts[3][2][3] = {
    {{0, 0, 0}, {0, 0, 0}}, {{1, 0, 2}, {2, 0, 1}}, {{1, 1, 1}, {1, 0, 0}}};

// An item of the sequence: a chain's step, its transpose (axis -1) or a halo exchange.
struct Item {
  int chain, step, axis;
};

class DecompMix : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = mp::mix_seed();
    for (const std::string& b : backend_names()) {
      std::string why;
      if (!kept_off_by_nodes(backend_info(b)) && runs_here(b, &why)) backends_.push_back(b);
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
        for (const auto& layout : kLayouts)  // the halo exchanges share the workspace
          for (int axis = 0; axis < 3; ++axis)
            for (int dim = 0; dim < 3; ++dim) {
              if (!exchangeable(layout[0], dim)) continue;
              size_t halo_bytes = 0;
              SC_OK(symcommDecompHaloWorkspaceSize(d, axis, dim, symcommC64, layout[0],
                                                   layout[1], &halo_bytes));
              bytes = std::max(bytes, halo_bytes);
            }
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

  // Whether halos `halo` can be exchanged along axis a: a halo, and no part narrower than it
  // (every part along an axis holds at least gdims / ranks points).
  bool exchangeable(const int64_t* halo, int a) const {
    return halo[a] > 0 && halo[a] <= gdims_[a] / mp::nranks();
  }

  // Two chains per grid; pencil geometry from the first step's decomposition, which every
  // backend of the grid shares (checked).
  void plan() {
    std::mt19937_64 rng(seed_);
    for (int g = 0; g < static_cast<int>(grids_.size()); ++g)
      for (int k = 0; k < 2; ++k) {
        Chain c;
        c.grid = g;
        c.type = kTypes[rng() % 4];
        c.kind = rng() % 2 ? Buffers::Symmetric : Buffers::Local;
        const int layout = static_cast<int>(rng() % 3);
        std::copy(kLayouts[layout][0], kLayouts[layout][0] + 3, c.halo);
        std::copy(kLayouts[layout][1], kLayouts[layout][1] + 3, c.padding);
        for (int& b : c.backend) b = static_cast<int>(rng() % backends_.size());
        // Exchanges along about two in three of the axes where they can be.
        for (int st = 0; st < 4; ++st)
          for (int a = 0; a < 3; ++a) {
            const bool can = exchangeable(c.halo, a);
            c.exchange[st][a] = can && rng() % 3 ? static_cast<int>(rng() % backends_.size()) : -1;
            c.periodic[st][a] = static_cast<int>(rng() % 2);
          }
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
    // Steps in rounds: round s holds every chain's step s, in an order of its own, then
    // the halo exchanges of the step's outputs, the chains in another order.
    for (int s = 0; s < 4; ++s) {
      std::vector<int> order(chains_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
      std::shuffle(order.begin(), order.end(), rng);
      for (int i : order) sequence_.push_back({i, s, -1});
      std::shuffle(order.begin(), order.end(), rng);
      for (int i : order)
        for (int a = 0; a < 3; ++a)
          if (chains_[static_cast<size_t>(i)].exchange[s][a] >= 0) sequence_.push_back({i, s, a});
    }
  }

  // Pencil p's values for a run: every owned point its index plus `offset`, the rest -1.
  std::vector<double> filled(const symcommPencilInfo_t& p, double offset) const {
    std::vector<double> v = fill_pencil(p, gdims_);
    for (double& e : v)
      if (e >= 0) e += offset;
    return v;
  }

  // The same after step s's halo exchanges: a halo point holds the value of the point it
  // mirrors (wrapped where periodic) when every axis along which it lies outside the owned
  // part was exchanged (in axis order, each exchange carries the halos of the axes before
  // it) and no non-periodic boundary lies between; else -1, as the padding.
  std::vector<double> expected(const Chain& c, int s, double offset) const {
    const symcommPencilInfo_t& p = c.info[kSteps[s][1]];
    std::vector<double> v = filled(p, offset);
    for (int64_t z = p.lo[2] - p.halo[2]; z < p.hi[2] + p.halo[2]; ++z)
      for (int64_t y = p.lo[1] - p.halo[1]; y < p.hi[1] + p.halo[1]; ++y)
        for (int64_t x = p.lo[0] - p.halo[0]; x < p.hi[0] + p.halo[0]; ++x) {
          const int64_t g[3] = {x, y, z};
          int64_t w[3];
          bool halo = false, reached = true;
          for (int a = 0; a < 3; ++a) {
            w[a] = g[a];
            if (g[a] >= p.lo[a] && g[a] < p.hi[a]) continue;
            halo = true;
            const bool outside = g[a] < 0 || g[a] >= gdims_[a];
            if (c.exchange[s][a] < 0 || (outside && !c.periodic[s][a])) reached = false;
            w[a] = (g[a] + gdims_[a]) % gdims_[a];
          }
          if (halo && reached)
            v[static_cast<size_t>(symcommPencilIndex(&p, x, y, z))] =
                static_cast<double>((w[2] * gdims_[1] + w[1]) * gdims_[0] + w[0]) + offset;
        }
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

  std::string describe(const Chain& c, int s, int axis = -1) const {
    std::string exchanges;
    for (int a = 0; a < 3; ++a)
      if (c.exchange[s][a] >= 0)
        exchanges += std::string(exchanges.empty() ? ", then halo exchanges: " : ", ") +
                     "xyz"[a] + (c.periodic[s][a] ? " periodic" : "") + " by " +
                     backends_[static_cast<size_t>(c.exchange[s][a])];
    return "grid " + std::to_string(grids_[static_cast<size_t>(c.grid)].first) + "x" +
           std::to_string(grids_[static_cast<size_t>(c.grid)].second) + ", " + type_name(c.type) +
           (c.kind == Buffers::Symmetric ? ", symmetric" : ", local") + ", halo " +
           std::to_string(c.halo[0]) + std::to_string(c.halo[1]) + std::to_string(c.halo[2]) +
           ", step " + std::to_string(kSteps[s][0]) + " -> " + std::to_string(kSteps[s][1]) +
           " by " + backends_[static_cast<size_t>(c.backend[s])] + exchanges +
           (axis >= 0 ? std::string(" (in the exchange along ") + "xyz"[axis] + ")" : "") +
           " (SYMCOMM_TEST_MIX_SEED=" + std::to_string(seed_) + ")";
  }

  bool run_sequence() {
    for (auto [i, s, axis] : sequence_) {
      Chain& c = chains_[static_cast<size_t>(i)];
      const size_t g = static_cast<size_t>(c.grid);
      const size_t b = static_cast<size_t>(axis < 0 ? c.backend[s] : c.exchange[s][axis]);
      const symcommResult_t rc =
          axis < 0 ? symcommDecompTranspose(decomps_[g][b], kSteps[s][0], kSteps[s][1],
                                            c.buf[s], c.buf[s + 1], workspaces_[g][b], c.type,
                                            c.halo, c.padding, c.halo, c.padding, stream_)
                   : symcommDecompHalo(decomps_[g][b], kSteps[s][1], axis, c.buf[s + 1],
                                       workspaces_[g][b], c.type, c.halo, c.padding,
                                       c.periodic[s], stream_);
      if (rc != symcommSuccess) {
        ADD_FAILURE() << describe(c, s, axis) << ": " << symcommGetLastError();
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
        const std::vector<double> want = expected(c, s, offset);
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
  std::vector<Item> sequence_;
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
  mp::capture_and_replay(
      mp::world(), stream_, [&] { return run_sequence(); },
      [&](int run) {
        refill(1e6 * run);
        return 1e6 * run;
      },
      [&](double offset, const std::string& when) { check(offset, when); });
}

}  // namespace
}  // namespace decomp_test
