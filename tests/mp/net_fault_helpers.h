// What the net transport's fault scenarios (net_fault_test.cc, net_link_fault_test.cc) share:
// a clock, the failure line, a host-space init and the byte pattern their transfers carry.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
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

}  // namespace net_fault
