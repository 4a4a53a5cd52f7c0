// Fused plans run back to back without synchronising, and replayed from a CUDA graph, each
// run on new values of A written in the stream's order: every run's C against the CPU
// reference of its own A (fused_fixture.h). GPUs only (CUDA graphs and streams); every
// implementation the plan can take, or SYMCOMM_TEST_FUSED_IMPL's. Shapes the fused kernels
// take (K and N multiples of 8), over several 128 x 128 tiles, members of unequal rows.
#include <string>
#include <vector>

#include "fused_fixture.h"

namespace {

constexpr int kRuns = 3;

// `op` run kRuns times back to back (C of run r into its own buffer), then captured once and
// replayed kRuns times. A changes before each run, B stays.
void back_to_back_and_graph(symcommFusedOp_t op, const Gemm& g, uint64_t seed,
                            std::string* skip, int* ran) {
  const bool ag = op == symcommFusedAllGatherGemm;
  SCOPED_TRACE(std::string(ag ? "all-gather + GEMM" : "GEMM + reduce-scatter") + " a/b " +
               tname(g.ab) + " c " + tname(g.c) + " rows " + list(g.rows) +
               (ag ? "" : " cols " + list(g.cols)));
  const int me = mp::rank();
  symcommFusedPlan_t plan;
  if (!create(SYMCOMM_TEAM_WORLD, true, gemm_config(op, g), &plan, skip)) return;
  ++*ran;
  void* ws = alloc_workspace(plan);
  std::vector<GemmData> data;
  for (int r = 0; r < kRuns; ++r) data.push_back(gemm_data(op, g, me, seed + 10 * r, seed));
  const size_t ea = esize(g.ab), ec = esize(g.c);
  const size_t a_bytes = data[0].a_mine.size() * ea, c_bytes = data[0].want.size() * ec;
  std::vector<std::vector<uint8_t>> a_runs;
  for (const GemmData& d : data) a_runs.push_back(encode(d.a_mine, g.ab));
  void* a = mp::local_alloc(std::max<size_t>(a_bytes, 16));
  void* b = upload(encode(data[0].b_mine, g.ab));
  std::vector<void*> c(kRuns);
  for (void*& p : c) p = upload(poison(c_bytes));
  symcommStream_t stream = mp::new_stream();
  for (int r = 0; r < kRuns; ++r) {  // no synchronisation between the runs
    mp::copy_from_host_on(stream, a, a_runs[static_cast<size_t>(r)].data(), a_bytes);
    EXPECT_OK(symcommFusedRun(plan, a, b, c[static_cast<size_t>(r)], nullptr, ws, stream));
  }
  for (int r = 0; r < kRuns; ++r)
    expect_near(decode(mp::fetch(stream, c[static_cast<size_t>(r)], c_bytes), g.c),
                data[static_cast<size_t>(r)].want, g.c, g.n,
                "C of back-to-back run " + std::to_string(r + 1));
  SC_OK(symcommHostBarrier(mp::world()));

  // One run captured, replayed on each A.
  mp::store(c[0], poison(c_bytes));
  ASSERT_EQ(mp::begin_capture(stream), 0);
  const symcommResult_t captured = symcommFusedRun(plan, a, b, c[0], nullptr, ws, stream);
  void* graph = mp::end_capture(stream);
  EXPECT_EQ(captured, symcommSuccess) << symcommGetLastError();
  ASSERT_NE(graph, nullptr) << "the capture of a fused run";
  for (int r = 0; r < kRuns; ++r) {
    mp::copy_from_host_on(stream, a, a_runs[static_cast<size_t>(r)].data(), a_bytes);
    ASSERT_EQ(mp::launch_graph(graph, stream), 0);
    expect_near(decode(mp::fetch(stream, c[0], c_bytes), g.c), data[static_cast<size_t>(r)].want,
                g.c, g.n, "C of graph replay " + std::to_string(r + 1));
    mp::store(c[0], poison(c_bytes));
  }
  mp::destroy_graph(graph);
  mp::free_stream(stream);
  SC_OK(symcommHostBarrier(mp::world()));  // nobody reads this rank's memory any more
  for (void* p : c) mp::local_free(p);
  mp::local_free(a);
  mp::local_free(b);
  EXPECT_OK(symcommFree(mp::world(), ws));
  EXPECT_OK(symcommFusedPlanDestroy(plan));
}

TEST(FusedStreams, BackToBackAndReplayedFromAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "GPUs only (CUDA graphs)";
  const uint64_t seed = mp::test_seed();
  SCOPED_TRACE(mp::seed_note(seed));
  const int n = mp::nranks();
  std::string skip;
  int ran = 0;
  Gemm g{symcommBfloat16, symcommFloat32, 0, 0, 136, 72, {}, {}, false};
  for (int r = 0; r < n; ++r) {
    g.rows.push_back(130 + 70 * r);
    g.cols.push_back(64 + 8 * r);
  }
  back_to_back_and_graph(symcommFusedAllGatherGemm, g, seed, &skip, &ran);
  g.c = symcommBfloat16;
  back_to_back_and_graph(symcommFusedGemmReduceScatter, g, seed + 1, &skip, &ran);
  if (!ran) GTEST_SKIP() << skip;
}

}  // namespace
