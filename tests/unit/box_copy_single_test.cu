// The box copy tests of copy_box and copy_box_ce (one box per call), on the host and on
// GPU 0, and the binary's main; copy_boxes: box_copy_batch_test.cu; what they share:
// box_copy_fixture.h.
//
// Direct tests of the box copies of each memory space (src/copy/copies.h): copy_box,
// copy_boxes and copy_box_ce, on GPU 0 through the cuda copies (copies_cuda.cu) and on the
// host through the host copies (copies_host.cc), against a reference computed here.
//
// Why: the decomposition tests reach these copies only with the shapes their pencils happen
// to have, while the cuda backend picks its kernel by the layouts (shape_box):
//   - rows along an axis contiguous on both sides (the axes permuted on the host), moved as
//     16-byte vectors where a row starts 16-byte aligned on both sides, else by element;
//   - 32 x 32 shared-memory tiles where the source and the destination are contiguous along
//     different axes (partial tiles at the edges);
//   - rows with a stride on both sides where neither side is contiguous along the box;
//   - a thread per element for rows shorter than 32;
//   - copy_boxes: up to 16 boxes per launch, the row boxes and the tiled ones launched apart;
//   - copy_box_ce: one cudaMemcpy/2D/3D after merging contiguous axes, or false (nothing
//     issued) where the layouts walk the box's axes in different orders, the first axis has
//     no unit stride, or a slice pitch is not a whole number of rows.
// A wrong index, a missed partial tile, a write past a row or a misaligned vector each
// shows here as a difference from the reference, with the case and the elements named.
//
// How: a case is two 3D arrays and a box inside both. An array has per axis an extent, a
// padded extent and the global index of its first element (its origin); a memory order (a
// permutation of x, y, z); optionally elements between slices beyond whole rows; and its
// start shifted by whole elements within its allocation. The source allocation holds
// random bytes, the destination's a position-dependent poison. After the copy the whole
// destination allocation, including the elements before the array, its padding and a
// 256-byte guard after it, must equal the expected bytes: the box holds the source's
// elements, everything else is still poison. The reference indexes the arrays from their
// extents and memory order, not from the BoxLayout strides handed to the backend.
//
// Cases: directed ones that hit each path on purpose (directed_cases), large ones that
// need more blocks than a launch has (grid-stride loops, GPU only), and random ones from a
// fixed seed (printed; BOX_COPY_SEED=<n> changes it): extents 1..70 per axis, biased to 1
// and to multiples of 32 and their neighbours; element sizes 4, 8 and 16 bytes.
//
// Tests: HostBoxCopy.* (the host backend: runs everywhere, ctest unit_box_copy) and
// GpuBoxCopy.* (the cuda backend on GPU 0, ctest gpu_box_copy). Without a GPU the
// GpuBoxCopy tests skip, and the binary exits with 77 (ctest's SKIP_RETURN_CODE) when every
// test that ran was skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "box_copy_fixture.h"

namespace box_copy_test {
namespace {

// ---------------------------------------------------------------------------------------
// Running cases

enum class Via { Kernels, CopyEngine };

struct Outcome {
  bool issued = true;  // what copy_box_ce returned (copy_box: true)
  bool ok = true;      // the destination and the source are as expected
};

// Runs one case through copy_box or copy_box_ce and checks the whole destination
// allocation: the box copied when the copy was issued, everything else untouched.
Outcome run_case(Space& space, const Case& c, Via via, Rng& rng) {
  check_case(c);
  const Bytes src = random_bytes(rng, c.src.alloc_bytes(c.elem));
  const Bytes before = poison(c.dst.alloc_bytes(c.elem));
  Buffer s(space, src), d(space, before);
  const BoxLayout sl = c.src.layout(), dl = c.dst.layout();
  const char* sp = s.data() + c.src.shift * static_cast<int64_t>(c.elem);
  char* dp = d.data() + c.dst.shift * static_cast<int64_t>(c.elem);
  Outcome out;
  if (via == Via::Kernels)
    space.copies().copy_box(dp, dl, sp, sl, c.box.lo, c.box.hi, c.elem, space.stream());
  else
    out.issued =
        space.copies().copy_box_ce(dp, dl, sp, sl, c.box.lo, c.box.hi, c.elem, space.stream());
  space.finish();
  Bytes want = before;
  if (out.issued) reference_copy(want, c.dst, src, c.src, c.box, c.elem);
  const char* what = via == Via::Kernels ? "copy_box"
                     : out.issued        ? "copy_box_ce (returned true: the copy must be exact)"
                                         : "copy_box_ce (returned false: nothing may be written)";
  const auto dst_ok = same_bytes(d.read(), want, c.dst, c.box, c.elem);
  EXPECT_TRUE(dst_ok) << what << ", destination of " << c.str();
  const auto src_ok = same_bytes(s.read(), src, c.src, c.box, c.elem);
  EXPECT_TRUE(src_ok) << what << ", the source changed: " << c.str();
  out.ok = dst_ok && src_ok;
  return out;
}

// ---------------------------------------------------------------------------------------
// Directed cases: each path of the cuda backend on purpose

std::vector<Case> directed_cases() {
  using E = CeExpect;
  std::vector<Case> v;
  auto add = [&](const char* label, Array src, Array dst, Box box, E ce, size_t elem = 0) {
    for (size_t e : kElemSizes)
      if (elem == 0 || e == elem) v.push_back(Case{label, src, dst, box, e, ce});
  };

  // Rows along an axis contiguous on both sides.
  add("rows: x contiguous on both sides, same order, whole array (one run)",
      make_array(64, 8, 3, "xyz"), make_array(64, 8, 3, "xyz"),
      make_box(0, 64, 0, 8, 0, 3), E::Yes);
  add("rows: x contiguous on both, padded, origins apart, box inside",
      make_array(70, 9, 4, "xyz").padded(6, 1, 0), make_array(67, 12, 5, "xyz").at(-2, -1, 0),
      make_box(1, 60, 2, 9, 0, 4), E::Yes);
  add("rows: x contiguous on both, slow axes in other orders",
      make_array(40, 6, 5, "xyz"), make_array(40, 6, 5, "xzy"), make_box(0, 40, 0, 6, 0, 5), E::No);
  add("rows: y contiguous on both (axes permuted on the host)",
      make_array(7, 50, 3, "yxz"), make_array(7, 50, 3, "yzx"), make_box(1, 6, 3, 50, 0, 3), E::No);
  add("rows: z contiguous on both", make_array(5, 4, 33, "zyx"), make_array(5, 4, 33, "zxy"),
      make_box(0, 5, 0, 4, 0, 33), E::No);
  add("rows: z contiguous on both, same order, padded",
      make_array(5, 4, 40, "zyx").padded(1, 2, 3), make_array(6, 4, 35, "zyx").at(0, 0, 2),
      make_box(0, 5, 1, 4, 2, 37), E::Yes);
  add("rows: exact multiples of 32", make_array(64, 32, 2, "xyz"),
      make_array(64, 32, 2, "xyz").shifted(2), make_box(0, 64, 0, 32, 0, 2), E::Yes);

  // Tiles: contiguous along different axes.
  add("tiles: x-fastest source, y-fastest destination, whole tiles",
      make_array(64, 64, 2, "xyz"), make_array(64, 64, 2, "yxz"),
      make_box(0, 64, 0, 64, 0, 2), E::No);
  add("tiles: partial tiles on both axes",
      make_array(70, 33, 3, "xyz"), make_array(45, 65, 3, "yxz").at(-2, -20, 0),
      make_box(3, 40, 0, 31, 0, 3), E::No);
  add("tiles: y-fastest source, x-fastest destination",
      make_array(33, 31, 2, "yxz"), make_array(33, 31, 2, "xzy"),
      make_box(0, 33, 0, 31, 0, 2), E::No);
  add("tiles: x-fastest source, z-fastest destination",
      make_array(35, 3, 34, "xyz"), make_array(35, 3, 34, "zyx"),
      make_box(0, 35, 0, 3, 0, 34), E::No);
  add("tiles: z-fastest source, y-fastest destination",
      make_array(3, 40, 36, "zxy"), make_array(3, 40, 36, "yzx"),
      make_box(0, 3, 0, 40, 0, 36), E::No);
  add("tiles: a 2 x 2 box", make_array(2, 2, 1, "xyz"), make_array(2, 2, 1, "yxz"),
      make_box(0, 2, 0, 2, 0, 1), E::No);
  add("tiles: padded, gaps between slices, negative origins, shifted starts",
      make_array(50, 40, 3, "xyz").padded(3, 2, 1).at(-20, -10, -1).slice_gap(5),
      make_array(45, 50, 3, "yxz").padded(1, 5, 0).at(-15, -12, -1).shifted(1),
      make_box(-15, 30, -10, 28, -1, 2), E::No);

  // Short rows (a thread per element) and strided rows.
  add("short rows: x contiguous on both, rows of 5",
      make_array(40, 20, 6, "xyz"), make_array(9, 20, 6, "xyz").at(10, 0, 0),
      make_box(12, 17, 0, 20, 0, 6), E::Yes);
  add("short rows: rows of 31", make_array(31, 10, 3, "xyz"),
      make_array(40, 10, 3, "xyz").padded(2, 0, 0), make_box(0, 31, 0, 10, 0, 3), E::Yes);
  add("short rows: box of extent 1 along x, neither side contiguous along the box",
      make_array(40, 20, 6, "xyz"), make_array(40, 20, 6, "xyz"),
      make_box(7, 8, 0, 20, 0, 6), E::No);
  add("extent-1 fastest axis unpadded: the next axis is contiguous, rows along y",
      make_array(1, 40, 5, "xyz"), make_array(1, 40, 5, "xyz"),
      make_box(0, 1, 0, 40, 0, 5), E::Yes);
  add("extent-1 fastest axis padded on one side: no common contiguous axis",
      make_array(1, 40, 5, "xyz"), make_array(1, 40, 5, "xyz").padded(1, 0, 0),
      make_box(0, 1, 0, 40, 0, 5), E::No);
  add("strided rows of 40: neither side contiguous along the box",
      make_array(40, 3, 20, "yxz"), make_array(40, 3, 20, "yzx"),
      make_box(0, 40, 1, 2, 0, 20), E::No);
  add("strided short rows of 10", make_array(10, 3, 20, "yxz"), make_array(10, 3, 20, "yzx"),
      make_box(0, 10, 1, 2, 0, 20), E::No);

  // 16-byte vectors (rows that start 16-byte aligned on both sides) or elements.
  add("vectorised: 8-byte elements, even x offset, aligned rows",
      make_array(64, 4, 2, "xyz"), make_array(64, 4, 2, "xyz"),
      make_box(0, 64, 0, 4, 0, 2), E::Yes, 8);
  add("vectorised with a tail: 8-byte elements, rows of 67",
      make_array(68, 3, 2, "xyz").padded(2, 0, 0), make_array(67, 3, 2, "xyz").padded(3, 0, 0),
      make_box(0, 67, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned source: 8-byte elements, odd x offset",
      make_array(70, 3, 2, "xyz"), make_array(64, 3, 2, "xyz").at(1, 0, 0),
      make_box(1, 65, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned destination: 8-byte elements, start shifted by one element",
      make_array(64, 3, 2, "xyz"), make_array(64, 3, 2, "xyz").shifted(1),
      make_box(0, 64, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned both alike: 8-byte elements, both starts shifted by one element",
      make_array(64, 3, 2, "xyz").shifted(1), make_array(64, 3, 2, "xyz").shifted(1),
      make_box(0, 64, 0, 3, 0, 2), E::Yes, 8);
  add("misaligned: 4-byte elements, x offset 2 (8 bytes)",
      make_array(64, 3, 2, "xyz"), make_array(64, 3, 2, "xyz"),
      make_box(2, 62, 0, 3, 0, 2), E::Yes, 4);
  add("vectorised: 4-byte elements, rows of 37 (a tail of 1)",
      make_array(40, 3, 2, "xyz"), make_array(44, 3, 2, "xyz"),
      make_box(0, 37, 0, 3, 0, 2), E::Yes, 4);
  add("alternately aligned rows: 4-byte elements, a row pitch of 33",
      make_array(33, 8, 2, "xyz"), make_array(33, 8, 2, "xyz").padded(3, 0, 0),
      make_box(0, 33, 0, 8, 0, 2), E::Yes, 4);
  add("16-byte elements, odd x offset", make_array(50, 3, 2, "xyz"),
      make_array(50, 3, 2, "xyz").shifted(1), make_box(1, 48, 0, 3, 0, 2), E::Yes, 16);

  // Contiguous runs, single elements, empty boxes, slice gaps.
  add("one contiguous run: whole slices", make_array(40, 30, 5, "xyz"),
      make_array(40, 30, 5, "xyz").at(0, 0, -2), make_box(0, 40, 0, 30, 1, 3), E::Yes);
  add("one contiguous run: part of a row", make_array(70, 3, 3, "xyz"),
      make_array(70, 3, 3, "xyz"), make_box(5, 69, 1, 2, 2, 3), E::Yes);
  add("part of a row, orders differ along axes the box does not extend along",
      make_array(70, 3, 3, "xyz"), make_array(70, 3, 3, "xzy"),
      make_box(5, 69, 1, 2, 2, 3), E::Yes);
  add("one element, orders differ", make_array(5, 6, 7, "zyx").at(-3, 0, 0),
      make_array(6, 7, 5, "yxz").shifted(3), make_box(1, 2, 4, 5, 3, 4), E::Yes);
  add("empty box (hi == lo along y)", make_array(40, 10, 3, "xyz"), make_array(40, 10, 3, "yxz"),
      make_box(0, 40, 4, 4, 0, 3), E::Yes);
  add("slice pitch not whole rows, box not whole rows (no 3D copy)",
      make_array(40, 10, 4, "xyz").slice_gap(3), make_array(40, 10, 4, "xyz").slice_gap(5),
      make_box(0, 39, 0, 10, 0, 4), E::No);
  add("slice pitch not whole rows, box of whole slices (rows merge: a 2D copy)",
      make_array(40, 10, 4, "xyz").slice_gap(3), make_array(40, 10, 4, "xyz").slice_gap(5),
      make_box(0, 40, 0, 10, 0, 4), E::Yes);
  add("slice pitch not whole rows, box within one slice (a 2D copy)",
      make_array(40, 10, 4, "xyz").slice_gap(3), make_array(40, 10, 4, "xyz").slice_gap(5),
      make_box(0, 39, 0, 10, 2, 3), E::Yes);
  return v;
}

// Boxes that need more blocks than one launch gets (8192 for rows and tiles, 4096 for the
// thread-per-element kernel): the kernels' grid-stride loops. GPU only (large).
std::vector<Case> large_cases() {
  std::vector<Case> v;
  for (size_t e : kElemSizes) {
    v.push_back({"large: rows over more than 8192 blocks", make_array(32, 256, 300, "xyz"),
                 make_array(32, 256, 300, "xyz"), make_box(0, 32, 0, 256, 0, 300), e});
    v.push_back({"large: tiles over more than 8192 blocks", make_array(40, 40, 2100, "xyz"),
                 make_array(40, 40, 2100, "yxz"), make_box(0, 40, 0, 40, 0, 2100), e});
    v.push_back({"large: short rows over more than 4096 blocks", make_array(8, 400, 400, "xyz"),
                 make_array(9, 400, 400, "xyz"), make_box(0, 8, 0, 400, 0, 400), e});
  }
  return v;
}

// What copy_box_ce must return on GPUs by copies.h's contract, where it can be told simply: a
// box of one element, or whose axes (those of extent > 1) both layouts walk in the same
// order, the first with unit stride, with no slice gaps: true; where the orders differ, or
// the first axis is not of unit stride: false. Either where slice gaps decide.
CeExpect ce_contract(const Case& c) {
  auto walked = [&](const Array& a) {
    std::vector<int> axes;
    for (int i = 0; i < 3; ++i)
      if (c.box.n(a.order[i]) > 1) axes.push_back(a.order[i]);
    return axes;
  };
  for (int a = 0; a < 3; ++a)
    if (c.box.n(a) <= 0) return CeExpect::Yes;  // nothing to copy
  const std::vector<int> s = walked(c.src), d = walked(c.dst);
  if (s.empty()) return CeExpect::Yes;
  if (s != d) return CeExpect::No;
  if (c.src.layout().stride[s[0]] != 1 || c.dst.layout().stride[s[0]] != 1) return CeExpect::No;
  if (c.src.slice_extra == 0 && c.dst.slice_extra == 0) return CeExpect::Yes;
  return CeExpect::Either;
}

const char* ce_str(CeExpect e) {
  return e == CeExpect::Yes ? "true" : e == CeExpect::No ? "false" : "either";
}

// ---------------------------------------------------------------------------------------
// The tests' bodies, shared by the host and the GPU fixtures

void test_directed_kernels(Space& space) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (const Case& c : directed_cases())
    if (budget.exhausted(run_case(space, c, Via::Kernels, rng).ok)) return;
}

void test_large(Space& space) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (const Case& c : large_cases())
    if (budget.exhausted(run_case(space, c, Via::Kernels, rng).ok)) return;
}

void test_random_kernels(Space& space, int cases) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (int i = 0; i < cases; ++i) {
    Case c = random_case(rng, 70, kElemSizes[i % 3]);
    c.label = "random case " + std::to_string(i);
    if (budget.exhausted(run_case(space, c, Via::Kernels, rng).ok)) return;
  }
}

// copy_box_ce: exact where it returns true, nothing written where false; on GPUs, what it
// returns as the case says (the host backend always copies and returns true).
void check_ce_result(Space& space, const Case& c, bool issued, CeExpect expect) {
  if (!space.gpu()) expect = CeExpect::Yes;
  if (expect == CeExpect::Either) return;
  EXPECT_EQ(issued, expect == CeExpect::Yes)
      << "copy_box_ce returned " << issued << ", expected " << ce_str(expect) << ": " << c.str();
}

void test_directed_ce(Space& space) {
  Rng rng(test_seed());
  FailureBudget budget;
  for (const Case& c : directed_cases()) {
    const Outcome out = run_case(space, c, Via::CopyEngine, rng);
    check_ce_result(space, c, out.issued, c.ce);
    if (c.ce != CeExpect::Either) {  // the directed expectation agrees with the contract
      const CeExpect contract = ce_contract(c);
      EXPECT_TRUE(contract == CeExpect::Either || contract == c.ce)
          << "test bug: ce_contract says " << ce_str(contract) << " for " << c.str();
    }
    if (budget.exhausted(out.ok)) return;
  }
}

void test_random_ce(Space& space, int cases) {
  Rng rng(test_seed());
  FailureBudget budget;
  int issued = 0;
  for (int i = 0; i < cases; ++i) {
    Case c = random_case(rng, 70, kElemSizes[i % 3]);
    if (chance(rng, 60)) {  // same memory order: mostly what the copy engines can take
      std::copy(c.src.order, c.src.order + 3, c.dst.order);
      if (chance(rng, 50)) c.src.slice_extra = c.dst.slice_extra = 0;
    }
    c.label = "random ce case " + std::to_string(i);
    const Outcome out = run_case(space, c, Via::CopyEngine, rng);
    check_ce_result(space, c, out.issued, ce_contract(c));
    issued += out.issued;
    if (budget.exhausted(out.ok)) return;
  }
  std::printf("copy_box_ce: %d of %d random cases issued\n", issued, cases);
  EXPECT_GT(issued, cases / 10) << "the random cases hardly reach the copy engines";
  if (space.gpu()) {
    EXPECT_LT(issued, cases - cases / 10) << "the random cases hardly decline";
  }
}

// ---------------------------------------------------------------------------------------
// Fixtures and tests

// The host backend: the reference, the cases and the checks themselves, everywhere.
TEST_F(HostBoxCopy, DirectedCases) { test_directed_kernels(*space_); }
TEST_F(HostBoxCopy, RandomCases) { test_random_kernels(*space_, 150); }
TEST_F(HostBoxCopy, CopyEngineDirectedCases) { test_directed_ce(*space_); }
TEST_F(HostBoxCopy, CopyEngineRandomCases) { test_random_ce(*space_, 60); }

// The cuda backend on GPU 0.
TEST_F(GpuBoxCopy, DirectedCases) { test_directed_kernels(*space_); }
TEST_F(GpuBoxCopy, LargeCases) { test_large(*space_); }
TEST_F(GpuBoxCopy, RandomCases) { test_random_kernels(*space_, 900); }
TEST_F(GpuBoxCopy, CopyEngineDirectedCases) { test_directed_ce(*space_); }
TEST_F(GpuBoxCopy, CopyEngineRandomCases) { test_random_ce(*space_, 600); }

}  // namespace
}  // namespace box_copy_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::printf("box_copy_test: base seed %llu (BOX_COPY_SEED=<n> changes it)\n",
              static_cast<unsigned long long>(box_copy_test::base_seed()));
  const int rc = RUN_ALL_TESTS();
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  if (rc == 0 && u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count()) {
    std::printf("SKIP: every test that ran was skipped\n");
    return 77;  // ctest's SKIP_RETURN_CODE
  }
  return rc;
}
