// The fused operations of include/symcomm/fused.h: all-gather + GEMM, GEMM + reduce-scatter
// and transpose + accumulate, each checked element by element against a CPU reference that
// every rank computes from data it regenerates for every member (one agreed seed); their
// workspaces; the registry of implementations; and the arguments the API refuses
// (fused_fixture.h: the values, the reference).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "fused_fixture.h"

namespace {

// One GEMM case over `team` (every world rank calls), run twice by the members with poisoned
// outputs before each run. Both operations are C = A x B of a full A [M, K] and B [K, N]:
// all-gather + GEMM gives member r A's rows of block r; GEMM + reduce-scatter gives it A's
// columns and B's rows of block r (so that the sum over members of A_s x B_s is A x B) and
// wants C's rows of block r back. False where the plan has no implementation here.
bool run_gemm(symcommFusedOp_t op, symcommTeam_t team, const Gemm& g, uint64_t seed,
              std::string* skip) {
  const bool ag = op == symcommFusedAllGatherGemm;
  SCOPED_TRACE(std::string(ag ? "all-gather + GEMM" : "GEMM + reduce-scatter") + " a/b " +
               tname(g.ab) + " c " + tname(g.c) + " b_transposed " + std::to_string(g.bt) +
               " gather_a " + std::to_string(g.gather) + " rows " + list(g.rows) +
               (ag ? "" : " cols " + list(g.cols)) + (g.sym_a ? " symmetric a" : ""));
  int me = -1;
  EXPECT_OK(symcommTeamRank(mp::world(), team, &me));
  const int members = static_cast<int>(g.rows.size());
  std::vector<int64_t> roff(members + 1, 0), coff(members + 1, 0);
  for (int s = 0; s < members; ++s) {
    roff[s + 1] = roff[s] + g.rows[s];
    coff[s + 1] = coff[s] + (ag ? 0 : g.cols[s]);
  }
  const int64_t M = roff[members], N = g.n, K = ag ? g.k : coff[members];
  const size_t ea = esize(g.ab), ec = esize(g.c);
  symcommFusedPlan_t plan;
  if (!create(team, me >= 0, gemm_config(op, g), &plan, skip)) return false;
  void* ws = alloc_workspace(plan);
  int64_t most = 1;  // elements of the largest member's A_r
  for (int s = 0; s < members; ++s) most = std::max(most, ag ? g.rows[s] * K : M * g.cols[s]);
  void* sym = nullptr;
  if (g.sym_a) EXPECT_OK(symcommMalloc(mp::world(), static_cast<size_t>(most) * ea, &sym));
  if (me >= 0 && (sym || !g.sym_a)) {
    const GemmData d = gemm_data(op, g, me, seed, seed);
    const Vec &A = d.a, &a_mine = d.a_mine, &b_mine = d.b_mine, &want = d.want;
    void* a = sym ? sym : mp::local_alloc(static_cast<size_t>(most) * ea);
    mp::store(a, encode(a_mine, g.ab));
    void* b = upload(encode(b_mine, g.ab));
    const size_t c_bytes = want.size() * ec, g_bytes = g.gather ? A.size() * ea : 0;
    void* c = mp::local_alloc(std::max<size_t>(c_bytes, 16));
    void* gathered = g.gather ? mp::local_alloc(g_bytes) : nullptr;
    symcommStream_t stream = mp::new_stream();
    for (int run = 1; run <= 2; ++run) {
      mp::store(c, poison(c_bytes));
      if (gathered) mp::store(gathered, poison(g_bytes));
      EXPECT_OK(symcommFusedRun(plan, a, b, c, gathered, ws, stream));
      const std::string which = ", run " + std::to_string(run) + ", member " + std::to_string(me);
      expect_near(decode(mp::fetch(stream, c, c_bytes), g.c), want, g.c, N, "C" + which);
      if (gathered)
        expect_near(decode(mp::fetch(stream, gathered, g_bytes), g.ab), A, symcommFloat32, K,
                    "gathered A" + which);
    }
    mp::free_stream(stream);
    if (gathered) mp::local_free(gathered);
    mp::local_free(c);
    mp::local_free(b);
    if (!sym) mp::local_free(a);
  }
  EXPECT_OK(symcommHostBarrier(mp::world()));  // no peer reads this rank's A_r any more
  EXPECT_OK(symcommFree(mp::world(), sym));
  EXPECT_OK(symcommFree(mp::world(), ws));
  if (plan) EXPECT_OK(symcommFusedPlanDestroy(plan));
  return true;
}

// Every type combination and b_transposed (and gather_a for the all-gather) over the world,
// with uneven blocks; every third case gives one member no rows (or no columns). Skips the
// test where none of them has an implementation here.
void gemm_cases(symcommFusedOp_t op) {
  std::string skip;
  int ran = 0;
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks();
  const bool ag = op == symcommFusedAllGatherGemm;
  int i = 0;
  for (Type ab : kHalves)
    for (Type c : kOutputs)
      for (int bt = 0; bt < 2; ++bt)
        for (int gather = 0; gather <= (ag ? 1 : 0); ++gather, ++i) {
          Gemm g{ab, c, bt, gather, 24, ag ? 40 : 0, {}, {}, i % 4 == 0};
          for (int r = 0; r < n; ++r) {
            g.rows.push_back(ag ? 3 + 2 * r : 2 + r);
            if (!ag) g.cols.push_back(5 + 3 * r);
          }
          if (i % 3 == 1) (ag ? g.rows : g.cols)[i % n] = 0;
          if (i % 3 == 2 && !ag) g.rows[(i + 1) % n] = 0;
          ran += run_gemm(op, SYMCOMM_TEAM_WORLD, g, seed + i, &skip);
        }
  if (!ran) GTEST_SKIP() << skip;
}

TEST(Fused, AllGatherGemm) { gemm_cases(symcommFusedAllGatherGemm); }

// Either GEMM over many tiles of a kernel's (128 x 128), shapes the fused kernels take (K and
// N multiples of 8): members' rows that begin and end inside tiles, a member with none, (GEMM
// + reduce-scatter) a member with no columns, whose partials are zeros; B either way, float16
// and bfloat16 with C in their type and in float32, (all-gather) the gathered A every other
// case.
void many_tiles(symcommFusedOp_t op) {
  const bool ag = op == symcommFusedAllGatherGemm;
  std::string skip;
  int ran = 0, i = 0;
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks();
  for (Type ab : kHalves)
    for (Type c : {ab, symcommFloat32})
      for (int bt = 0; bt < 2; ++bt, ++i) {
        Gemm g{ab, c, bt, ag ? i % 2 : 0, 264, ag ? 136 : 0, {}, {}, i % 3 == 0};
        for (int r = 0; r < n; ++r) {
          g.rows.push_back(r == i % n && i % 4 == 1 ? 0 : 130 + 70 * r);
          if (!ag) g.cols.push_back(r == (i + 1) % n && i % 4 == 2 ? 0 : 64 + 8 * r);
        }
        ran += run_gemm(op, SYMCOMM_TEAM_WORLD, g, seed + i, &skip);
      }
  if (!ran) GTEST_SKIP() << skip;
}

TEST(Fused, AllGatherGemmOverManyTiles) { many_tiles(symcommFusedAllGatherGemm); }
TEST(Fused, GemmReduceScatterOverManyTiles) { many_tiles(symcommFusedGemmReduceScatter); }

TEST(Fused, GemmReduceScatter) { gemm_cases(symcommFusedGemmReduceScatter); }

// Blocks of thousands of rows: pipelined pushes each owner's block of the partial product in
// pieces of rows (up to 4, of at least 1024 rows and 4 Mi elements), each setting the owner's
// flag one higher.
TEST(Fused, GemmReduceScatterInPieces) {
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks();
  Gemm g{symcommBfloat16, symcommFloat32, 0, 0, 2048, 0, {}, {}, false};
  for (int r = 0; r < n; ++r) {
    g.rows.push_back(r == 0 ? 4100 : 2050 + r);  // 4 pieces, then 2
    g.cols.push_back(6 + r);
  }
  std::string skip;
  if (!run_gemm(symcommFusedGemmReduceScatter, SYMCOMM_TEAM_WORLD, g, seed, &skip))
    GTEST_SKIP() << skip;
}

// On a team split from the world, of world ranks 1 .. n-1 (team rank = world rank - 1;
// rank 0 is not a member and only joins the world's allocations): blocks by team rank.
TEST(Fused, GemmsOnASplitTeam) {
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks();
  symcommTeam_t team;
  SC_OK(symcommTeamSplitStrided(mp::world(), SYMCOMM_TEAM_WORLD, 1, 1, n - 1, &team));
  int me = -2;
  SC_OK(symcommTeamRank(mp::world(), team, &me));
  EXPECT_EQ(me, mp::rank() - 1);
  Gemm g{symcommBfloat16, symcommFloat32, 1, 1, 16, 24, {}, {}, true};
  for (int t = 0; t < n - 1; ++t) {
    g.rows.push_back(2 + 3 * (n - 2 - t));  // largest first
    g.cols.push_back(4 + t);
  }
  std::string skip;
  int ran = run_gemm(symcommFusedAllGatherGemm, team, g, seed, &skip);
  g.k = 0;
  g.gather = 0;
  g.c = symcommFloat16;
  ran += run_gemm(symcommFusedGemmReduceScatter, team, g, seed + 1, &skip);
  SC_OK(symcommHostBarrier(mp::world()));
  if (team != SYMCOMM_TEAM_INVALID) SC_OK(symcommTeamDestroy(mp::world(), team));
  if (!ran) GTEST_SKIP() << skip;
}

// out_r = initial + X^T's block r after one run, initial + 2 X^T's block after two. X_r is
// symmetric (peers read it), allocated for the largest member; every sum here is exact.
TEST(Fused, TransposeAccumulate) {
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks(), me = mp::rank();
  std::string skip;
  int ran = 0, i = 0;
  // Small blocks, with no empty member and then with the last one empty; blocks over several
  // 64 x 64 tiles, even (kernels may move pairs of elements) and odd.
  struct Blocks {
    int64_t base, step;
    int zero;
  };
  const Blocks kinds[] = {{2, 3, -1}, {2, 3, n - 1}, {66, 64, -1}, {61, 67, -1}};
  for (Type t : {symcommFloat32, symcommFloat16, symcommBfloat16})
    for (const Blocks& kind : kinds) {
      ++i;
      symcommFusedConfig_t c;
      SC_OK(symcommFusedConfigInit(&c));
      c.op = symcommFusedTransposeAccumulate;
      c.a_type = c.c_type = t;
      // SYMCOMM_TEST_FUSED_IMPL names the implementation, as for the GEMMs.
      if (const char* impl = std::getenv("SYMCOMM_TEST_FUSED_IMPL"))
        std::snprintf(c.implementation, sizeof c.implementation, "%s", impl);
      std::vector<int64_t> off(n + 1, 0);
      int64_t most = 1;
      for (int r = 0; r < n; ++r) {
        c.cols[r] = r == kind.zero ? 0 : kind.base + kind.step * ((r + i) % n);
        off[r + 1] = off[r] + c.cols[r];
        most = std::max(most, c.cols[r]);
      }
      const int64_t N = c.n = off[n], mine = c.cols[me];
      SCOPED_TRACE(std::string("type ") + tname(t) + " cols " +
                   list(std::vector<int64_t>(c.cols, c.cols + n)) + " member " +
                   std::to_string(me));
      symcommFusedPlan_t plan;
      if (!create(SYMCOMM_TEAM_WORLD, true, c, &plan, &skip)) continue;
      ++ran;
      void* ws = alloc_workspace(plan);
      void* x = nullptr;
      SC_OK(symcommMalloc(mp::world(), static_cast<size_t>(N * most) * esize(t), &x));
      Vec X(static_cast<size_t>(N * N)), init(static_cast<size_t>(N * mine)), want = init;
      for (size_t k = 0; k < X.size(); ++k) X[k] = val(seed + i, 5, 0, k);
      for (size_t k = 0; k < init.size(); ++k) init[k] = val(seed + i, 6, me, k);
      mp::store(x, encode(block(X, N, 0, N, off[me], mine), t));
      void* out = upload(encode(init, t));
      symcommStream_t stream = mp::new_stream();
      for (int run = 1; run <= 2; ++run) {
        SC_OK(symcommFusedRun(plan, x, nullptr, out, nullptr, ws, stream));
        for (int64_t r = 0; r < N; ++r)
          for (int64_t j = 0; j < mine; ++j)
            want[r * mine + j] = init[r * mine + j] + run * X[(off[me] + j) * N + r];
        expect_near(decode(mp::fetch(stream, out, init.size() * esize(t)), t), want,
                    symcommFloat32, mine, "out after run " + std::to_string(run));
      }
      mp::free_stream(stream);
      mp::local_free(out);
      SC_OK(symcommHostBarrier(mp::world()));  // no peer reads this rank's X_r any more
      SC_OK(symcommFree(mp::world(), x));
      SC_OK(symcommFree(mp::world(), ws));
      SC_OK(symcommFusedPlanDestroy(plan));
    }
  if (!ran) GTEST_SKIP() << skip;
}

// All-gather + GEMM where the rows are large (16 MiB a member): a GEMM that started its tiles
// before the members' rows landed would read the workspace's poison. GPUs only: against the
// sequential implementation (the all-gather, then cuBLASLt) on the same inputs, exactly (fp32
// C of sums that fp32 holds exactly), with A new and the workspace poisoned before each run.
TEST(Fused, AllGatherGemmWaitsForLateRows) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "GPUs only (a GPU reference)";
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks(), me = mp::rank();
  const int64_t rows = 2048, K = 4096, N = 128, M = rows * n;
  Gemm g{symcommBfloat16, symcommFloat32, 0, 0, N, K, {}, {}, false};
  g.rows.assign(static_cast<size_t>(n), rows);
  symcommFusedConfig_t c = gemm_config(symcommFusedAllGatherGemm, g), ref = c;
  // SYMCOMM_TEST_FUSED_REF: the implementation compared against (default sequential).
  const char* ref_impl = std::getenv("SYMCOMM_TEST_FUSED_REF");
  std::snprintf(ref.implementation, sizeof ref.implementation, "%s",
                ref_impl ? ref_impl : "sequential");
  std::string skip;
  symcommFusedPlan_t plan, ref_plan;
  if (!create(SYMCOMM_TEAM_WORLD, true, c, &plan, &skip)) GTEST_SKIP() << skip;
  if (!create(SYMCOMM_TEAM_WORLD, true, ref, &ref_plan, &skip)) GTEST_SKIP() << skip;
  size_t ws_bytes = 0;
  void* ws = alloc_workspace(plan, &ws_bytes);
  void* ref_ws = alloc_workspace(ref_plan);
  const size_t a_bytes = static_cast<size_t>(rows * K) * 2, c_bytes = static_cast<size_t>(M * N) * 4;
  void* a = mp::local_alloc(a_bytes);
  Vec B(static_cast<size_t>(K * N));
  for (size_t i = 0; i < B.size(); ++i) B[i] = val(seed, 2, 0, i);
  void* b = upload(encode(B, symcommBfloat16));
  void* out = mp::local_alloc(c_bytes);
  void* want = mp::local_alloc(c_bytes);
  symcommStream_t stream = mp::new_stream();
  for (int run = 1; run <= 3; ++run) {
    Vec A(static_cast<size_t>(rows * K));
    for (size_t i = 0; i < A.size(); ++i) A[i] = val(seed + run, 1, me, i);
    mp::store(a, encode(A, symcommBfloat16));
    if (ws_bytes) mp::store(ws, poison(ws_bytes));
    mp::store(out, poison(c_bytes));
    SC_OK(symcommFusedRun(ref_plan, a, b, want, nullptr, ref_ws, stream));
    SC_OK(symcommFusedRun(plan, a, b, out, nullptr, ws, stream));
    const std::vector<uint8_t> got = mp::fetch(stream, out, c_bytes);
    const std::vector<uint8_t> expected = mp::fetch(stream, want, c_bytes);
    size_t wrong = 0, first = 0, last = 0;
    for (size_t i = 0; i < c_bytes; i += 4)
      if (std::memcmp(&got[i], &expected[i], 4) != 0) {
        if (!wrong++) first = i / 4;
        last = i / 4;
      }
    EXPECT_EQ(wrong, 0u) << "run " << run << ": elements of C [" << M << ", " << N
                         << "] differ from " << ref.implementation << "'s, from row "
                         << first / N << " to row " << last / N;
    SC_OK(symcommHostBarrier(mp::world()));  // every member fetched before A changes
  }
  mp::free_stream(stream);
  for (void* p : {a, b, out, want}) mp::local_free(p);
  SC_OK(symcommFree(mp::world(), ws));
  SC_OK(symcommFree(mp::world(), ref_ws));
  SC_OK(symcommFusedPlanDestroy(plan));
  SC_OK(symcommFusedPlanDestroy(ref_plan));
}

// A valid configuration of each operation over the world.
symcommFusedConfig_t good(symcommFusedOp_t op) {
  symcommFusedConfig_t c;
  symcommFusedConfigInit(&c);
  c.op = op;
  c.n = 24;
  c.k = op == symcommFusedAllGatherGemm ? 40 : 0;
  for (int r = 0; r < mp::nranks(); ++r) {
    c.rows[r] = op == symcommFusedTransposeAccumulate ? 0 : 3 + 2 * r;
    c.cols[r] = op == symcommFusedAllGatherGemm ? 0 : 5 + r;
  }
  if (op == symcommFusedTransposeAccumulate) {
    c.n = 0;
    for (int r = 0; r < mp::nranks(); ++r) c.n += c.cols[r];
    c.a_type = c.c_type = symcommFloat32;
  }
  return c;
}

// Expects `rc` to be symcommInvalidArgument with a message holding, for each of `words`,
// one of its '|'-separated alternatives.
void expect_refused(symcommResult_t rc, const std::vector<std::string>& words,
                    const char* call) {
  const std::string said = symcommGetLastError();
  EXPECT_EQ(rc, symcommInvalidArgument) << call << ": " << said;
  for (const std::string& w : words) {
    bool found = false;
    for (size_t at = 0; at <= w.size();) {
      const size_t bar = std::min(w.find('|', at), w.size());
      found = found || said.find(w.substr(at, bar - at)) != std::string::npos;
      at = bar + 1;
    }
    EXPECT_TRUE(found) << call << ": no \"" << w << "\" in \"" << said << "\"";
  }
}

// The defaults fused.h states, whatever the struct held before.
TEST(Fused, ConfigInitDefaults) {
  symcommFusedConfig_t c;
  std::memset(&c, 0x5A, sizeof c);
  SC_OK(symcommFusedConfigInit(&c));
  EXPECT_TRUE(c.struct_size == sizeof c && c.magic == SYMCOMM_FUSED_CONFIG_MAGIC);
  EXPECT_TRUE(c.op == symcommFusedAllGatherGemm && c.n == 0 && c.k == 0);
  for (int r = 0; r < SYMCOMM_FUSED_MAX_MEMBERS; ++r) EXPECT_TRUE(!c.rows[r] && !c.cols[r]) << r;
  EXPECT_TRUE(c.a_type == symcommBfloat16 && c.b_type == symcommBfloat16 &&
              c.c_type == symcommBfloat16 && !c.b_transposed && !c.gather_a);
  EXPECT_STREQ(c.implementation, "");
  SC_FAILS(symcommFusedConfigInit(nullptr), symcommInvalidArgument);
}

// Configurations wrong whatever the implementation: symcommFusedCanImplement (local) and
// symcommFusedPlanCreate (every rank passes the same, so every rank fails alike) refuse them
// naming the parameter, in both spaces.
TEST(Fused, RefusesBadConfigurations) {
  using Change = std::function<void(symcommFusedConfig_t&)>;
  const symcommFusedOp_t AG = symcommFusedAllGatherGemm, RS = symcommFusedGemmReduceScatter,
                         TR = symcommFusedTransposeAccumulate;
  const int last = mp::nranks() - 1;
  const struct { symcommFusedOp_t op; Change change; std::vector<std::string> words; } bad[] = {
      {AG, [](auto& c) { c.magic = 0; }, {"symcommFusedConfigInit"}},
      {AG, [](auto& c) { c.op = static_cast<symcommFusedOp_t>(7); }, {"op"}},
      {AG, [](auto& c) { c.n = 0; }, {"n"}},
      {RS, [](auto& c) { c.n = -3; }, {"n"}},
      {AG, [](auto& c) { c.k = 0; }, {"k"}},
      {AG, [](auto& c) { c.k = -1; }, {"k"}},
      {AG, [&](auto& c) { c.rows[last] = -1; }, {"rows"}},
      {RS, [&](auto& c) { c.rows[0] = -2; }, {"rows"}},
      {AG, [](auto& c) { std::fill(c.rows, c.rows + SYMCOMM_FUSED_MAX_MEMBERS, 0); }, {"rows"}},
      {RS, [](auto& c) { std::fill(c.rows, c.rows + SYMCOMM_FUSED_MAX_MEMBERS, 0); }, {"rows"}},
      {RS, [&](auto& c) { c.cols[last] = -4; }, {"cols"}},
      {RS, [](auto& c) { std::fill(c.cols, c.cols + SYMCOMM_FUSED_MAX_MEMBERS, 0); }, {"cols"}},
      {TR, [](auto& c) { std::fill(c.cols, c.cols + SYMCOMM_FUSED_MAX_MEMBERS, 0); }, {"cols"}},
      {AG, [](auto& c) { c.a_type = c.b_type = symcommFloat32; }, {"a_type"}},
      {RS, [](auto& c) { c.a_type = c.b_type = symcommFloat32; }, {"a_type"}},
      {AG, [](auto& c) { c.a_type = symcommFloat16; }, {"a_type|b_type"}},
      {RS, [](auto& c) { c.b_type = symcommFloat16; }, {"a_type|b_type"}},
      {AG, [](auto& c) { c.c_type = symcommInt32; }, {"c_type"}},
      {RS, [](auto& c) { c.c_type = symcommFloat64; }, {"c_type"}},
      {AG, [](auto& c) { c.a_type = c.b_type = static_cast<symcommDataType_t>(99); }, {"a_type"}},
      {TR, [](auto& c) { c.c_type = symcommFloat16; }, {"a_type|c_type"}},
      {TR, [](auto& c) { c.a_type = c.c_type = symcommInt32; }, {"a_type"}},
      {TR, [](auto& c) { c.n += 1; }, {"n"}},  // X is N x N, N the sum of cols
      {AG, [](auto& c) { std::strcpy(c.implementation, "no-such-impl"); },
       {"implementation", "no-such-impl"}},
  };
  char why[256];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    SCOPED_TRACE("bad configuration " + std::to_string(i));
    symcommFusedConfig_t c = good(bad[i].op);
    bad[i].change(c);
    expect_refused(symcommFusedCanImplement(mp::world(), SYMCOMM_TEAM_WORLD, &c, why, sizeof why),
                   bad[i].words, "symcommFusedCanImplement");
    symcommFusedPlan_t plan = nullptr;
    expect_refused(symcommFusedPlanCreate(mp::world(), SYMCOMM_TEAM_WORLD, &c, &plan),
                   bad[i].words, "symcommFusedPlanCreate");
    if (plan) SC_OK(symcommFusedPlanDestroy(plan));
  }
  symcommFusedConfig_t c = good(AG);
  symcommFusedPlan_t plan = nullptr;
  expect_refused(symcommFusedCanImplement(mp::world(), SYMCOMM_TEAM_WORLD, nullptr, why, 256),
                 {"config"}, "symcommFusedCanImplement(NULL config)");
  expect_refused(symcommFusedPlanCreate(mp::world(), SYMCOMM_TEAM_WORLD, nullptr, &plan),
                 {"config"}, "symcommFusedPlanCreate(NULL config)");
  expect_refused(symcommFusedPlanCreate(mp::world(), SYMCOMM_TEAM_WORLD, &c, nullptr), {"plan"},
                 "symcommFusedPlanCreate(NULL plan)");
  expect_refused(symcommFusedCanImplement(mp::world(), SYMCOMM_TEAM_INVALID, &c, why, 256),
                 {"team"}, "symcommFusedCanImplement(SYMCOMM_TEAM_INVALID)");
  expect_refused(symcommFusedPlanCreate(mp::world(), SYMCOMM_TEAM_INVALID, &c, &plan), {"team"},
                 "symcommFusedPlanCreate(SYMCOMM_TEAM_INVALID)");
}

// Rank 1 passes another valid configuration (other sizes; types alike, so that no rank's
// configuration lacks an implementation): every rank fails with symcommInvalidUsage, and a
// plan made with the same configuration everywhere afterwards works.
TEST(Fused, ConfigurationsThatDifferBetweenRanks) {
  std::string skip;
  symcommFusedPlan_t plan;
  if (!create(SYMCOMM_TEAM_WORLD, true, good(symcommFusedAllGatherGemm), &plan, &skip))
    GTEST_SKIP() << skip;
  SC_OK(symcommFusedPlanDestroy(plan));
  const std::function<void(symcommFusedConfig_t&)> changes[] = {
      [](auto& c) { c.n += 1; }, [](auto& c) { c.rows[0] += 1; },
      [](auto& c) { c.k += 8; }, [](auto& c) { c.rows[mp::nranks() - 1] = 0; }};
  for (const auto& change : changes) {
    symcommFusedConfig_t c = good(symcommFusedAllGatherGemm);
    if (mp::rank() == 1) change(c);
    plan = nullptr;
    SC_FAILS(symcommFusedPlanCreate(mp::world(), SYMCOMM_TEAM_WORLD, &c, &plan),
             symcommInvalidUsage);
    if (plan) SC_OK(symcommFusedPlanDestroy(plan));
  }
  ASSERT_TRUE(create(SYMCOMM_TEAM_WORLD, true, good(symcommFusedAllGatherGemm), &plan, &skip));
  SC_OK(symcommFusedPlanDestroy(plan));
}

// symcommFusedRun's buffer checks (every rank passes the same, so every rank fails alike,
// before anything runs), then the same plans run with good buffers.
TEST(Fused, RunRefusesBadBuffers) {
  std::string skip;
  symcommFusedConfig_t c = good(symcommFusedAllGatherGemm);
  symcommFusedPlan_t plan, with_gather;
  if (!create(SYMCOMM_TEAM_WORLD, true, c, &plan, &skip)) GTEST_SKIP() << skip;
  c.gather_a = 1;
  if (!create(SYMCOMM_TEAM_WORLD, true, c, &with_gather, &skip)) with_gather = nullptr;
  size_t need = 0;
  void* ws = alloc_workspace(plan, &need);
  int64_t M = 0;
  for (int r = 0; r < mp::nranks(); ++r) M += c.rows[r];
  auto zeros = [](int64_t elements) { return upload(std::vector<uint8_t>(elements * 2)); };
  void* a = zeros(c.rows[mp::rank()] * c.k);
  void* b = zeros(c.k * c.n);
  void* out = zeros(M * c.n);
  void* gathered = zeros(M * c.k);
  symcommStream_t s = mp::new_stream();
  auto refused = [&](symcommFusedPlan_t p, const void* a_, const void* b_, void* c_, void* g_,
                     void* w_, const char* word) {
    SCOPED_TRACE(word);
    SC_FAILS_SAYING(symcommFusedRun(p, a_, b_, c_, g_, w_, s), symcommInvalidArgument, word);
  };
  refused(nullptr, a, b, out, nullptr, ws, "plan");
  refused(plan, nullptr, b, out, nullptr, ws, "NULL");
  refused(plan, a, nullptr, out, nullptr, ws, "NULL");
  refused(plan, a, b, nullptr, nullptr, ws, "NULL");
  refused(plan, a, b, out, gathered, ws, "gathered");  // gather_a is 0
  if (with_gather) refused(with_gather, a, b, out, nullptr, ws, "gathered");  // gather_a is 1
  if (need > 0) refused(plan, a, b, out, nullptr, nullptr, "workspace");
  SC_OK(symcommFusedRun(plan, a, b, out, nullptr, ws, s));
  if (with_gather) SC_OK(symcommFusedRun(with_gather, a, b, out, gathered, ws, s));
  mp::sync(s);
  mp::free_stream(s);
  SC_OK(symcommHostBarrier(mp::world()));
  for (void* p : {a, b, out, gathered}) mp::local_free(p);
  SC_OK(symcommFree(mp::world(), ws));
  for (symcommFusedPlan_t p : {plan, with_gather})
    if (p) SC_OK(symcommFusedPlanDestroy(p));
}

// The transpose reads peers' X_r: plain memory is refused, symmetric memory runs.
TEST(Fused, TransposeRefusesPlainMemory) {
  std::string skip;
  const symcommFusedConfig_t t = good(symcommFusedTransposeAccumulate);
  symcommFusedPlan_t plan;
  if (!create(SYMCOMM_TEAM_WORLD, true, t, &plan, &skip)) GTEST_SKIP() << skip;
  void* ws = alloc_workspace(plan);
  const size_t bytes = static_cast<size_t>(t.n * (4 + mp::nranks())) * 4;  // largest member
  void* plain = upload(std::vector<uint8_t>(bytes));
  void* out = upload(std::vector<uint8_t>(bytes));
  void* sym = nullptr;
  SC_OK(symcommMalloc(mp::world(), bytes, &sym));
  mp::store(sym, std::vector<uint8_t>(bytes));
  symcommStream_t s = mp::new_stream();
  SC_FAILS_SAYING(symcommFusedRun(plan, plain, nullptr, out, nullptr, ws, s),
                  symcommInvalidArgument, "symmetric");
  SC_OK(symcommFusedRun(plan, sym, nullptr, out, nullptr, ws, s));
  mp::sync(s);
  mp::free_stream(s);
  SC_OK(symcommHostBarrier(mp::world()));
  for (void* p : {plain, out}) mp::local_free(p);
  for (void* p : {sym, ws}) SC_OK(symcommFree(mp::world(), p));
  SC_OK(symcommFusedPlanDestroy(plan));
}

// The registry: named implementations; a plan takes the one named, or the first that can
// implement it ("reference" in the host space, which runs everything). Where none can
// (the cuda space without one), the reason comes back in `why`, cut at why_bytes.
TEST(Fused, Implementations) {
  const int count = symcommFusedImplementationCount();
  ASSERT_GE(count, 1);
  std::set<std::string> names;
  for (int i = 0; i < count; ++i) {
    const char* name = symcommFusedImplementationName(i);
    ASSERT_NE(name, nullptr) << i;
    EXPECT_GT(std::strlen(name), 0u) << i;
    EXPECT_LT(std::strlen(name), sizeof(symcommFusedConfig_t{}.implementation)) << name;
    EXPECT_TRUE(names.insert(name).second) << name << " is registered twice";
  }
  EXPECT_TRUE(mp::space() != symcommSpaceHost || names.count("reference"));
  symcommFusedConfig_t c = good(symcommFusedAllGatherGemm);
  char why[8];
  const symcommResult_t can = symcommFusedCanImplement(mp::world(), SYMCOMM_TEAM_WORLD, &c, why,
                                                       sizeof why);
  const std::string reason = can == symcommSuccess ? "" : symcommGetLastError();
  if (can == symcommNotSupported) {
    EXPECT_EQ(mp::space(), symcommSpaceCuda) << reason;
    const size_t said = strnlen(why, sizeof why);
    EXPECT_TRUE(said > 0 && said < sizeof why) << "the reason, cut and NUL-terminated";
  }
  if (!mp::all_ok(can != symcommNotSupported)) GTEST_SKIP() << reason;
  ASSERT_EQ(can, symcommSuccess) << reason;
  std::string skip;
  symcommFusedPlan_t plan;
  ASSERT_TRUE(create(SYMCOMM_TEAM_WORLD, true, c, &plan, &skip)) << skip;
  const char* chosen = nullptr;
  SC_OK(symcommFusedPlanImplementation(plan, &chosen));
  ASSERT_NE(chosen, nullptr);
  EXPECT_EQ(names.count(chosen), 1u) << chosen;
  if (mp::space() == symcommSpaceHost) {
    EXPECT_STREQ(chosen, "reference");
  }
  SC_OK(symcommFusedPlanDestroy(plan));
  for (const std::string& name : names) {
    std::snprintf(c.implementation, sizeof c.implementation, "%s", name.c_str());
    const bool can_here = symcommFusedCanImplement(mp::world(), SYMCOMM_TEAM_WORLD, &c, nullptr,
                                                   0) == symcommSuccess;
    if (!mp::all_ok(can_here)) continue;
    ASSERT_TRUE(create(SYMCOMM_TEAM_WORLD, true, c, &plan, &skip)) << name << ": " << skip;
    SC_OK(symcommFusedPlanImplementation(plan, &chosen));
    EXPECT_STREQ(chosen, name.c_str());
    SC_OK(symcommFusedPlanDestroy(plan));
  }
}

}  // namespace
