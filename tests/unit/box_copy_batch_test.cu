// The box copy tests of copy_boxes (a batch of boxes per call), on the host and on GPU 0.
// The rest of the binary box_copy_test: box_copy_single_test.cu (copy_box, copy_box_ce and
// the overview); what they share: box_copy_fixture.h.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "box_copy_fixture.h"

namespace box_copy_test {
namespace {

// ---------------------------------------------------------------------------------------
// The tests' bodies, shared by the host and the GPU fixtures

// copy_boxes: every box of the batch its own source and destination array, at disjoint
// places of one source and one destination allocation (guards between them).
enum class Kind { Rows, Tiles, Any, Empty };

Case kind_case(Rng& rng, Kind kind, size_t elem) {
  constexpr int64_t kMax = 40;
  const int f = static_cast<int>(uniform(rng, 0, 2));
  const int g = (f + static_cast<int>(uniform(rng, 1, 2))) % 3;
  switch (kind) {
    case Kind::Rows: return random_case(rng, kMax, elem, f, f);
    case Kind::Tiles: return random_case(rng, kMax, elem, f, g);
    case Kind::Any: return random_case(rng, kMax, elem);
    case Kind::Empty: break;
  }
  return random_case(rng, kMax, elem, -1, -1, true);
}

const char* kind_str(Kind k) {
  return k == Kind::Rows ? "rows" : k == Kind::Tiles ? "tiles" : k == Kind::Any ? "any" : "empty";
}

bool run_batch(Space& space, const std::vector<Kind>& kinds, Rng& rng, const std::string& label) {
  const size_t elem = random_elem(rng);
  std::vector<Case> cases;
  std::vector<size_t> soff, doff;  // each array's allocation within the shared ones
  size_t sbytes = 0, dbytes = 0;
  for (size_t i = 0; i < kinds.size(); ++i) {
    cases.push_back(kind_case(rng, kinds[i], elem));
    cases.back().label = label + ", box " + std::to_string(i) + " (" + kind_str(kinds[i]) + ")";
    check_case(cases.back());
    soff.push_back(sbytes);
    doff.push_back(dbytes);
    sbytes += cases.back().src.alloc_bytes(elem);
    dbytes += cases.back().dst.alloc_bytes(elem);
  }
  const Bytes src = random_bytes(rng, sbytes);
  const Bytes before = poison(dbytes);
  Buffer s(space, src), d(space, before);
  std::vector<BoxCopy> copies;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    BoxCopy b{};
    b.dst = d.data() + doff[i] + static_cast<size_t>(c.dst.shift) * elem;
    b.dl = c.dst.layout();
    b.src = s.data() + soff[i] + static_cast<size_t>(c.src.shift) * elem;
    b.sl = c.src.layout();
    std::copy(c.box.lo, c.box.lo + 3, b.lo);
    std::copy(c.box.hi, c.box.hi + 3, b.hi);
    copies.push_back(b);
  }
  space.copies().copy_boxes(copies, elem, space.stream());
  space.finish();
  const Bytes got = d.read();
  bool ok = true;
  for (size_t i = 0; i < cases.size(); ++i) {  // each box's destination allocation apart
    const Case& c = cases[i];
    const size_t n = c.dst.alloc_bytes(elem);
    Bytes want(before.begin() + doff[i], before.begin() + doff[i] + n);
    Bytes in_src(src.begin() + soff[i], src.begin() + soff[i] + c.src.alloc_bytes(elem));
    reference_copy(want, c.dst, in_src, c.src, c.box, elem);
    const auto same = same_bytes(Bytes(got.begin() + doff[i], got.begin() + doff[i] + n), want,
                                 c.dst, c.box, elem);
    EXPECT_TRUE(same) << "copy_boxes of " << cases.size() << " boxes, destination of " << c.str();
    ok = ok && same;
  }
  const bool src_ok = s.read() == src;
  EXPECT_TRUE(src_ok) << label << ": copy_boxes changed a source";
  return ok && src_ok;
}

void test_batches(Space& space, int random_batches) {
  Rng rng(test_seed());
  FailureBudget budget;
  // Sizes around the 16 boxes of a launch, the kinds alternating (both kernels in a batch,
  // more than 16 of a kind in the largest), then one kind only, then random batches.
  for (int count : {1, 2, 15, 16, 17, 31, 32, 33, 40}) {
    std::vector<Kind> kinds;
    for (int i = 0; i < count; ++i) kinds.push_back(i % 2 ? Kind::Tiles : Kind::Rows);
    const std::string label = "alternating batch of " + std::to_string(count);
    if (budget.exhausted(run_batch(space, kinds, rng, label))) return;
  }
  for (Kind k : {Kind::Rows, Kind::Tiles})
    if (budget.exhausted(run_batch(space, std::vector<Kind>(33, k), rng,
                                   std::string("batch of 33 ") + kind_str(k))))
      return;
  for (int b = 0; b < random_batches; ++b) {
    std::vector<Kind> kinds(static_cast<size_t>(uniform(rng, 1, 40)));
    for (Kind& k : kinds) k = static_cast<Kind>(uniform(rng, 0, 9) < 9 ? uniform(rng, 0, 2) : 3);
    if (budget.exhausted(run_batch(space, kinds, rng, "random batch " + std::to_string(b))))
      return;
  }
}

// ---------------------------------------------------------------------------------------
// Fixtures and tests

// The host backend: the reference, the cases and the checks themselves, everywhere.
TEST_F(HostBoxCopy, Batches) { test_batches(*space_, 10); }

// The cuda backend on GPU 0.
TEST_F(GpuBoxCopy, Batches) { test_batches(*space_, 60); }

}  // namespace
}  // namespace box_copy_test
