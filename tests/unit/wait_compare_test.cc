// The comparison every signal wait makes, on the host (rma_host.cc) and on the device
// (device_impl.cuh's wait_local): symcomm::compare of symcomm/device_comm.h, one function for
// both. Each comparison against a value v at v - 1, v and v + 1 (where an off-by-one, < for
// <= or the like, differs), at the ends of the 64-bit range (the words are unsigned), and its
// name in wait errors.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "rma/wait.h"
#include "symcomm/device_comm.h"

namespace symcomm {
namespace {

TEST(WaitCompare, EveryComparisonOneBelowAtAndOneAboveTheValue) {
  struct Case {
    symcommCmp_t cmp;
    bool below, at, above;  // whether a word of value - 1, value, value + 1 satisfies it
  };
  const Case cases[] = {{symcommCmpEq, false, true, false}, {symcommCmpNe, true, false, true},
                        {symcommCmpGe, false, true, true},  {symcommCmpGt, false, false, true},
                        {symcommCmpLe, true, true, false},  {symcommCmpLt, true, false, false}};
  for (const Case& c : cases) {
    for (uint64_t value : {uint64_t{1}, uint64_t{50}, uint64_t{1} << 40, UINT64_MAX - 1}) {
      SCOPED_TRACE(std::string("word ") + cmp_name(c.cmp) + " " + std::to_string(value));
      EXPECT_EQ(compare(value - 1, c.cmp, value), c.below) << "word one below";
      EXPECT_EQ(compare(value, c.cmp, value), c.at) << "word equal";
      EXPECT_EQ(compare(value + 1, c.cmp, value), c.above) << "word one above";
    }
    // Unsigned at the ends: 0 is the least word, UINT64_MAX the greatest (not -1).
    SCOPED_TRACE(cmp_name(c.cmp));
    EXPECT_EQ(compare(0, c.cmp, UINT64_MAX), c.below) << "0 against UINT64_MAX";
    EXPECT_EQ(compare(UINT64_MAX, c.cmp, 0), c.above) << "UINT64_MAX against 0";
  }
  // Not a comparison: never holds (symcommSignalWait refuses it before it gets here).
  EXPECT_FALSE(compare(5, static_cast<symcommCmp_t>(42), 5));
}

TEST(WaitCompare, NamesInWaitErrors) {
  EXPECT_STREQ(cmp_name(symcommCmpEq), "==");
  EXPECT_STREQ(cmp_name(symcommCmpNe), "!=");
  EXPECT_STREQ(cmp_name(symcommCmpGe), ">=");
  EXPECT_STREQ(cmp_name(symcommCmpGt), ">");
  EXPECT_STREQ(cmp_name(symcommCmpLe), "<=");
  EXPECT_STREQ(cmp_name(symcommCmpLt), "<");
}

}  // namespace
}  // namespace symcomm
