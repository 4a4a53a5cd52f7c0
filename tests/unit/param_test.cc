// The parameter registry and its parsers.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/param.h"
#include "scoped_env.h"
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
const SecondsParam kTestSeconds("SYMCOMM_UNIT_TEST_SECONDS", "1", "a duration for the unit test",
                                 0.001);
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
  setenv("SYMCOMM_UNIT_TEST_SECONDS", "0.0015", 1);
  EXPECT_EQ(kTestSeconds.get_ms(), 2);
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
  EXPECT_EQ(kTestSize.get(), 3u << 10);  // parsed once, its text unchanged
  setenv("SYMCOMM_UNIT_TEST_SIZE", "5K", 1);  // a value parsed before is not kept past a change
  EXPECT_EQ(kTestSize.get(), 5u << 10);
  unsetenv("SYMCOMM_UNIT_TEST_SIZE");
  EXPECT_EQ(kTestSize.get(), 2u << 20);
  setenv("SYMCOMM_UNIT_TEST_SIZE", "lots", 1);
  try {
    kTestSize.get();
    FAIL() << "a malformed value was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument);
    EXPECT_NE(std::strstr(e.what(), "SYMCOMM_UNIT_TEST_SIZE='lots'"), nullptr) << e.what();
  }
  EXPECT_THROW(kTestSize.get(), Error);  // a refusal is not remembered as a value
  setenv("SYMCOMM_UNIT_TEST_SIZE", "5K", 1);
  EXPECT_EQ(kTestSize.get(), 5u << 10);
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

// Runs `call`, which must throw symcommInvalidArgument with a message that contains `text`.
template <typename Call>
void expect_refused(Call&& call, const std::string& text) {
  try {
    call();
    ADD_FAILURE() << "accepted; expected an error saying " << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

// The range is the declaration's: get() refuses what is outside it (a cast to int once made
// 2^32 + 1 a 1).
const IntParam kTestInt("SYMCOMM_UNIT_TEST_INT", "5", "an integer for the unit test", 1, 1024);
TEST(Param, IntegersInTheirRange) {
  EXPECT_EQ(kTestInt.get(), 5);
  {
    ScopedEnv v("SYMCOMM_UNIT_TEST_INT", "4294967297");  // 2^32 + 1
    expect_refused([] { kTestInt.get(); },
                   "SYMCOMM_UNIT_TEST_INT='4294967297' is not an integer in [1, 1024]");
  }
  ScopedEnv v("SYMCOMM_UNIT_TEST_INT", "0");
  expect_refused([] { kTestInt.get(); }, "SYMCOMM_UNIT_TEST_INT='0' is not an integer in [1, 1024]");
  setenv("SYMCOMM_UNIT_TEST_INT", "1024", 1);
  EXPECT_EQ(kTestInt.get(), 1024);
}

// A size past what size_t holds is "too large", like one past the declaration's range, not
// "not a size".
const SizeParam kTestBoundedSize("SYMCOMM_UNIT_TEST_BOUNDED_SIZE", "1K",
                                 "a size with a range for the unit test", 16, size_t{64} << 40);
TEST(Param, SizesInTheirRange) {
  EXPECT_EQ(kTestBoundedSize.get(), 1024u);
  const struct {
    const char* value;
    const char* says;
  } bad[] = {{"99999999T", "='99999999T' is too large: at most 64 TiB"},
             {"99999999999999999999", "is too large: at most 64 TiB"},
             {"65T", "='65T' is too large: at most 64 TiB"},
             {"15", "='15' is too small: at least 16 bytes"},
             {"lots", "='lots' is not a size"},
             {"-1", "='-1' is not a size"}};
  for (const auto& b : bad) {
    ScopedEnv v("SYMCOMM_UNIT_TEST_BOUNDED_SIZE", b.value);
    expect_refused([] { kTestBoundedSize.get(); }, b.says);
  }
  ScopedEnv v("SYMCOMM_UNIT_TEST_BOUNDED_SIZE", "64T");
  EXPECT_EQ(kTestBoundedSize.get(), size_t{64} << 40);
}

// Durations: 0 is no bound where the declaration allows it (every timeout), refused where it
// does not (an interval); a positive duration below the minimum is refused, naming it (a
// peer timeout of 1e-9 s once lost every peer during initialization).
const SecondsParam kTestBound("SYMCOMM_UNIT_TEST_BOUND", "10", "a timeout for the unit test",
                              0.1);
const SecondsParam kTestInterval("SYMCOMM_UNIT_TEST_INTERVAL", "1",
                                 "an interval for the unit test", 0.01,
                                 SecondsParam::Zero::Refused);
TEST(Param, DurationsFollowOneRule) {
  {
    ScopedEnv v("SYMCOMM_UNIT_TEST_BOUND", "0");
    EXPECT_EQ(kTestBound.get(), 0);
    EXPECT_EQ(kTestBound.get_ms(), 0);
  }
  {
    ScopedEnv v("SYMCOMM_UNIT_TEST_BOUND", "0.1");
    EXPECT_EQ(kTestBound.get_ms(), 100);
  }
  for (const char* small : {"1e-9", "0.05", "0.0999"}) {
    ScopedEnv v("SYMCOMM_UNIT_TEST_BOUND", small);
    expect_refused([] { kTestBound.get(); },
                   std::string("SYMCOMM_UNIT_TEST_BOUND='") + small +
                       "' is below the minimum of 0.1 s (0: no bound)");
  }
  for (const char* junk : {"abc", "-1", "nan", "inf", "", "1s"}) {
    ScopedEnv v("SYMCOMM_UNIT_TEST_BOUND", junk);
    expect_refused([] { kTestBound.get(); },
                   std::string("SYMCOMM_UNIT_TEST_BOUND='") + junk +
                       "' is not a non-negative number of seconds");
  }
  for (const char* small : {"0", "0.001"}) {
    ScopedEnv v("SYMCOMM_UNIT_TEST_INTERVAL", small);
    expect_refused([] { kTestInterval.get(); },
                   std::string("SYMCOMM_UNIT_TEST_INTERVAL='") + small +
                       "' is below the minimum of 0.01 s");
  }
  ScopedEnv v("SYMCOMM_UNIT_TEST_INTERVAL", "0.01");
  EXPECT_EQ(kTestInterval.get_ms(), 10);
}

// Values that no parameter of `p`'s type and declaration accepts: junk, and what lies just
// outside its range.
std::vector<std::string> bad_values(const Param& p) {
  switch (p.type()) {
    case ParamType::Int: {
      const auto& i = static_cast<const IntParam&>(p);
      std::vector<std::string> v{"banana", "1.5", "0x10", "99999999999999999999"};
      if (i.lo() > INT64_MIN) v.push_back(std::to_string(i.lo() - 1));
      if (i.hi() < INT64_MAX) v.push_back(std::to_string(i.hi() + 1));
      return v;
    }
    case ParamType::Size: {
      const auto& z = static_cast<const SizeParam&>(p);
      std::vector<std::string> v{"banana", "-3", "12Q", "99999999T", std::to_string(z.hi() + 1)};
      if (z.lo() > 0) v.push_back(std::to_string(z.lo() - 1));
      return v;
    }
    case ParamType::Bool: return {"2", "maybe", ""};
    case ParamType::Seconds: {
      const auto& d = static_cast<const SecondsParam&>(p);
      std::vector<std::string> v{"abc", "-1", "nan", "inf", "10s"};
      if (d.min_seconds() > 0) v.push_back(std::to_string(d.min_seconds() / 2));
      if (!d.zero_is_no_bound()) v.push_back("0");
      return v;
    }
    case ParamType::Enum: return {"loud", ""};
    case ParamType::String: return {};
  }
  return {};
}

// Every registered parameter but the strings (those of GPU-only files too: they are linked
// into every process) refuses garbage and values outside its range, through get() and
// through validate_all(), which communicator initialization calls in every memory space;
// with nothing set, the defaults pass.
TEST(Param, EveryParameterRefusesGarbage) {
  std::vector<std::string> names;
  for (const Param* p : Param::all()) names.push_back(p->name());
  for (const char* gpu_only : {"SYMCOMM_SM_COPY_BLOCKS", "SYMCOMM_PDL", "SYMCOMM_COLL_SM_BLOCKS",
                               "SYMCOMM_COLL_TWOSHOT_BLOCKS", "SYMCOMM_COLL_RELAY_CHUNK",
                               "SYMCOMM_WAIT_ENGINE", "SYMCOMM_DEVICE", "SYMCOMM_CUMEM_HANDLE"})
    EXPECT_NE(std::find(names.begin(), names.end(), gpu_only), names.end()) << gpu_only;

  std::vector<std::unique_ptr<ScopedEnv>> unset;
  for (const Param* p : Param::all())
    if (p->type() != ParamType::String) unset.push_back(std::make_unique<ScopedEnv>(p->name(), std::nullopt));
  EXPECT_NO_THROW(validate_all());
  int checked = 0;
  for (const Param* p : Param::all()) {
    for (const std::string& value : bad_values(*p)) {
      ScopedEnv v(p->name(), value);
      const std::string named = std::string(p->name()) + "='" + value + "'";
      expect_refused([&] { p->validated_text(); }, named);
      expect_refused([] { validate_all(); }, named);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

// validate_all names every bad parameter at once.
TEST(Param, ValidationNamesEveryBadParameter) {
  ScopedEnv a("SYMCOMM_PDL", "2"), b("SYMCOMM_SM_COPY_BLOCKS", "-3");
  expect_refused([] { validate_all(); }, "2 environment parameters are invalid");
  expect_refused([] { validate_all(); }, "SYMCOMM_PDL='2' is not a boolean");
  expect_refused([] { validate_all(); },
                 "SYMCOMM_SM_COPY_BLOCKS='-3' is not an integer in [1, 1024]");
}

// Initialization refuses a parameter that only GPU code reads in the host space too, before
// anything is joined.
TEST(Param, InitRefusesGpuParametersInTheHostSpace) {
  ScopedEnv addr("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1");
  symcommConfig_t cfg;
  symcommConfigInit(&cfg);
  cfg.space = symcommSpaceHost;
  for (const char* assignment : {"SYMCOMM_PDL=2", "SYMCOMM_SM_COPY_BLOCKS=-3",
                                 "SYMCOMM_DEVICE=banana", "SYMCOMM_LOG_LEVEL=loud"}) {
    const std::string a = assignment, name = a.substr(0, a.find('=')),
                      value = a.substr(a.find('=') + 1);
    symcommUniqueId uid;
    ASSERT_EQ(symcommGetUniqueId(&uid), symcommSuccess) << symcommGetLastError();
    ScopedEnv bad(name.c_str(), value);
    symcommComm_t comm = nullptr;
    EXPECT_EQ(symcommInit(&comm, 1, 0, &uid, &cfg), symcommInvalidArgument) << assignment;
    EXPECT_NE(std::strstr(symcommGetLastError(), (name + "='" + value + "'").c_str()), nullptr)
        << symcommGetLastError();
    EXPECT_EQ(comm, nullptr);
  }
}

}  // namespace
}  // namespace symcomm
