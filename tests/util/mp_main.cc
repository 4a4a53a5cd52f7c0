// main() of every multi-process test binary (see mp.h).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "mp.h"

namespace mp {
extern symcommComm_t g_world;
bool space_available(std::string* why);
}  // namespace mp

namespace {

// What the other ranks print: each failed assertion, with the test's name and the rank.
// The name is kept from OnTestStart: asking gtest for the current test inside
// OnTestPartResult would take a lock gtest already holds there.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& t) override {
    name_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "rank %d: %s: %s:%d: Failure\n%s\n", mp::rank(), name_.c_str(),
                 r.file_name() ? r.file_name() : "?", r.line_number(), r.message());
  }
  std::string name_ = "(outside a test)";
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string why;
  if (!mp::space_available(&why)) {
    std::printf("SKIP: the %s space is not available here: %s\n",
                mp::space() == symcommSpaceCuda ? "cuda" : "host", why.c_str());
    return 77;  // ctest's SKIP_RETURN_CODE
  }
  symcommConfig_t cfg = mp::config();
  if (symcommInitFromEnv(&mp::g_world, &cfg) != symcommSuccess) {
    std::fprintf(stderr, "cannot join the world communicator: %s\n", symcommGetLastError());
    return 1;
  }
  // Only rank 0 prints gtest's report in full; the others print failures.
  if (mp::rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  int rc = RUN_ALL_TESTS();
  bool ok = mp::all_ok(rc == 0);
  if (!ok && rc == 0) std::fprintf(stderr, "rank %d passed, another rank failed\n", mp::rank());
  // Every test that was to run skipped itself (the device API's tests outside the cuda space,
  // say), on every rank: the run checked nothing, and says so to ctest (SKIP_RETURN_CODE 77)
  // rather than pass. symrun exits with the first non-zero code a rank ends with (stopping
  // the other ranks, done by then).
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  const bool skipped = mp::all_ok(rc == 0 && u.test_to_run_count() > 0 &&
                                  u.skipped_test_count() == u.test_to_run_count());
  if (symcommFinalize(mp::g_world) != symcommSuccess) {
    std::fprintf(stderr, "finalize failed: %s\n", symcommGetLastError());
    ok = false;
  }
  if (ok && skipped) {
    if (mp::rank() == 0) std::printf("SKIP: every test that was to run was skipped\n");
    return 77;  // ctest's SKIP_RETURN_CODE
  }
  return ok ? 0 : 1;
}
