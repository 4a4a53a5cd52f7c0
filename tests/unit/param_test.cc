// The parameter registry and its parsers.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "base/param.h"
#include "symcomm/symcomm.h"

namespace symcomm {
namespace {

TEST(Param, ParsesSizes) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("64K"), 64u << 10);
  EXPECT_EQ(parse_size("512m"), 512u << 20);
  EXPECT_EQ(parse_size("8G"), size_t{8} << 30);
  EXPECT_EQ(parse_size("8GiB"), size_t{8} << 30);
  EXPECT_EQ(parse_size("2MB"), size_t{2} << 20);
  EXPECT_EQ(parse_size(" 1T "), size_t{1} << 40);
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("-1"));
  EXPECT_FALSE(parse_size("12Q"));
  EXPECT_FALSE(parse_size("G"));
  EXPECT_FALSE(parse_size("99999999999999999999T"));
}

TEST(Param, ParsesOthers) {
  EXPECT_EQ(parse_int("-12"), -12);
  // Decimal only: a leading 0 is not octal, and 0x is junk.
  EXPECT_EQ(parse_int("010"), 10);
  EXPECT_FALSE(parse_int("0x10"));
  EXPECT_EQ(parse_int("08"), 8);
  EXPECT_FALSE(parse_int("1.5"));
  EXPECT_EQ(parse_bool("Yes"), true);
  EXPECT_EQ(parse_bool("off"), false);
  EXPECT_FALSE(parse_bool("maybe"));
  EXPECT_EQ(parse_seconds("0.25"), 0.25);
  EXPECT_FALSE(parse_seconds("-1"));
  EXPECT_FALSE(parse_seconds("inf"));
  EXPECT_FALSE(parse_seconds("10s"));
}

// Durations past kMaxSeconds count as kMaxSeconds: a bound of 1e10 s once wrapped to a
// negative deadline in std::chrono's nanoseconds (every wait timed out at once).
const SecondsParam kTestSeconds("SYMCOMM_UNIT_TEST_SECONDS", "1", "a duration for the unit test");
TEST(Param, HugeDurationsAreClamped) {
  setenv("SYMCOMM_UNIT_TEST_SECONDS", "1e10", 1);
  EXPECT_EQ(kTestSeconds.get(), SecondsParam::kMaxSeconds);
  const int64_t ms = kTestSeconds.get_ms();
  EXPECT_EQ(ms, static_cast<int64_t>(SecondsParam::kMaxSeconds * 1000));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  EXPECT_GT(deadline, std::chrono::steady_clock::now());
  setenv("SYMCOMM_UNIT_TEST_SECONDS", "1e300", 1);
  EXPECT_EQ(kTestSeconds.get(), SecondsParam::kMaxSeconds);
  setenv("SYMCOMM_UNIT_TEST_SECONDS", "2.5", 1);
  EXPECT_EQ(kTestSeconds.get(), 2.5);
  // A positive duration never rounds to 0 ms, which often means "no bound".
  setenv("SYMCOMM_UNIT_TEST_SECONDS", "0.0002", 1);
  EXPECT_EQ(kTestSeconds.get_ms(), 1);
  setenv("SYMCOMM_UNIT_TEST_SECONDS", "0", 1);
  EXPECT_EQ(kTestSeconds.get_ms(), 0);
  unsetenv("SYMCOMM_UNIT_TEST_SECONDS");
}

const SizeParam kTestSize("SYMCOMM_UNIT_TEST_SIZE", "2M", "a size for the unit test");
const EnumParam kTestEnum("SYMCOMM_UNIT_TEST_ENUM", "b", "a|b|cc", "an enum for the unit test");

TEST(Param, ReadsEnvironmentEachTime) {
  unsetenv("SYMCOMM_UNIT_TEST_SIZE");
  EXPECT_EQ(kTestSize.get(), 2u << 20);
  EXPECT_FALSE(kTestSize.raw());
  setenv("SYMCOMM_UNIT_TEST_SIZE", "3K", 1);
  EXPECT_EQ(kTestSize.get(), 3u << 10);
  setenv("SYMCOMM_UNIT_TEST_SIZE", "lots", 1);
  try {
    kTestSize.get();
    FAIL() << "a malformed value was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument);
    EXPECT_NE(std::strstr(e.what(), "SYMCOMM_UNIT_TEST_SIZE='lots'"), nullptr) << e.what();
  }
  unsetenv("SYMCOMM_UNIT_TEST_SIZE");
}

TEST(Param, EnumsAreCaseInsensitiveAndChecked) {
  setenv("SYMCOMM_UNIT_TEST_ENUM", "CC", 1);
  EXPECT_EQ(kTestEnum.get(), "cc");
  setenv("SYMCOMM_UNIT_TEST_ENUM", "c", 1);
  EXPECT_THROW(kTestEnum.get(), Error);
  unsetenv("SYMCOMM_UNIT_TEST_ENUM");
  EXPECT_EQ(kTestEnum.get(), "b");
}

TEST(Param, RegistryListsEveryParameterOnce) {
  int n = symcommGetParamCount();
  ASSERT_GT(n, 10);
  bool saw_log_level = false, saw_timeout = false;
  for (int i = 0; i < n; ++i) {
    symcommParamInfo_t info;
    ASSERT_EQ(symcommGetParam(i, &info), symcommSuccess);
    EXPECT_GT(std::strlen(info.description), 5u) << info.name;
    for (int j = 0; j < i; ++j) {
      symcommParamInfo_t other;
      symcommGetParam(j, &other);
      EXPECT_STRNE(info.name, other.name);
    }
    saw_log_level |= std::strcmp(info.name, "SYMCOMM_LOG_LEVEL") == 0;
    if (std::strcmp(info.name, "SYMCOMM_BOOTSTRAP_TIMEOUT") == 0) {
      saw_timeout = true;
      EXPECT_STREQ(info.default_value, "60");
      EXPECT_STREQ(info.type, "seconds");
    }
  }
  EXPECT_TRUE(saw_log_level);
  EXPECT_TRUE(saw_timeout);
  symcommParamInfo_t info;
  EXPECT_EQ(symcommGetParam(n, &info), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "symcommGetParam(index="), nullptr);
  EXPECT_EQ(symcommGetParam(0, nullptr), symcommInvalidArgument);
}

const IntParam kTestInt("SYMCOMM_UNIT_TEST_INT", "5", "an integer for the unit test");
TEST(Param, IntegersInARange) {
  EXPECT_EQ(kTestInt.get_in(1, 8), 5);
  setenv("SYMCOMM_UNIT_TEST_INT", "4294967297", 1);  // 2^32 + 1: was cast to int as 1
  try {
    kTestInt.get_in(1, 1024);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("SYMCOMM_UNIT_TEST_INT='4294967297' is not an integer "
                                         "in [1, 1024]"), std::string::npos) << e.what();
  }
  setenv("SYMCOMM_UNIT_TEST_INT", "-5", 1);
  EXPECT_THROW(kTestInt.get_in(-1, 7), Error);
  unsetenv("SYMCOMM_UNIT_TEST_INT");
}

}  // namespace
}  // namespace symcomm
