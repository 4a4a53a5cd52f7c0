// What the net transport's fault scenarios (net_fault_test.cc, net_link_fault_test.cc) share:
// a clock, the failure line, a host-space init, the byte pattern their transfers carry and the
// transport's log kept to be counted.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "symcomm/symcomm.h"

namespace net_fault {

using Clock = std::chrono::steady_clock;

inline double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

inline int fail(const std::string& scenario, int rank, const std::string& why) {
  std::fprintf(stderr, "FAIL %s rank %d: %s\n", scenario.c_str(), rank, why.c_str());
  return 1;
}

// A communicator in the host space from symrun's environment (nullptr where init failed).
inline symcommComm_t init(symcommResult_t* rc) {
  symcommConfig_t cfg;
  symcommConfigInit(&cfg);
  cfg.space = symcommSpaceHost;
  symcommComm_t comm = nullptr;
  *rc = symcommInitFromEnv(&comm, &cfg);
  return comm;
}

// Byte i of the pattern `what`.
inline uint8_t byte_of(uint64_t what, size_t i) {
  return static_cast<uint8_t>((what * 131 + i * 7) >> 2);
}

// The transport's log (stderr, at the info level) kept in a file while `on`, so that a test
// can count its lines: start() before the communicator is made, finish() for the text (and
// stderr back).
class LogCapture {
 public:
  // False where stderr could not be redirected.
  bool start(const std::string& name) {
    path_ = "/tmp/symcomm_" + name + "_" + std::to_string(getpid()) + ".log";
    setenv("SYMCOMM_LOG_LEVEL", "info", 1);
    std::fflush(stderr);
    saved_ = dup(2);
    return std::freopen(path_.c_str(), "w", stderr) != nullptr;
  }
  std::string finish() {
    if (saved_ < 0) return "";
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    std::remove(path_.c_str());
    return text.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

// Sets link `dev` of this namespace up or down (ip, from iproute2).
inline bool link(const std::string& dev, bool up) {
  const std::string cmd = "ip link set " + dev + (up ? " up" : " down");
  return std::system(cmd.c_str()) == 0;
}

// net_message_fault_test.cc's scenarios, run from net_link_fault_test.cc's main.
int run_messages(const std::string& scenario, int rank);

// How many times `line` occurs in `text`.
inline int occurrences(const std::string& text, const std::string& line) {
  int n = 0;
  for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++n;
  return n;
}

}  // namespace net_fault
