// Log lines: "host:pid:rank symcomm LEVEL message [file:line]", the rank being the one this
// thread last set (set_log_rank, as every entry point taking a communicator does) or that a
// LogRankScope holds, and '-' on a thread that never set one.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "base/log.h"

namespace symcomm {
namespace {

std::string warn_line(const char* message) {
  testing::internal::CaptureStderr();
  SYMCOMM_WARN("%s", message);
  return testing::internal::GetCapturedStderr();
}

TEST(Log, LinesNameTheRankThisThreadLastWorkedFor) {
  std::string fresh;
  std::thread([&] { fresh = warn_line("from a fresh thread"); }).join();
  EXPECT_NE(fresh.find(":- symcomm WARN from a fresh thread [log_test.cc:"), std::string::npos)
      << fresh;

  std::thread([] {
    set_log_rank(3);
    EXPECT_NE(warn_line("after set").find(":3 symcomm WARN after set"), std::string::npos);
    {
      LogRankScope scope(5);
      EXPECT_NE(warn_line("in scope").find(":5 symcomm WARN in scope"), std::string::npos);
    }
    EXPECT_NE(warn_line("after scope").find(":3 symcomm WARN after scope"), std::string::npos);
  }).join();
}

}  // namespace
}  // namespace symcomm
