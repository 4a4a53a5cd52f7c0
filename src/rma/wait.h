// What every wait shares: the comparison, the bound, and the error that names the word.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"
#include "symcomm/symcomm.h"

namespace symcomm {

inline bool compare(uint64_t seen, symcommCmp_t cmp, uint64_t value) {
  switch (cmp) {
    case symcommCmpEq: return seen == value;
    case symcommCmpNe: return seen != value;
    case symcommCmpGe: return seen >= value;
    case symcommCmpGt: return seen > value;
    case symcommCmpLe: return seen <= value;
    case symcommCmpLt: return seen < value;
  }
  return false;
}

const char* cmp_name(symcommCmp_t cmp);
// SYMCOMM_WAIT_TIMEOUT in milliseconds.
int64_t wait_timeout_ms();
[[noreturn]] void throw_wait_error(symcommResult_t code, int rank, const void* word,
                                   symcommCmp_t cmp, uint64_t expected, uint64_t observed,
                                   const char* why);

}  // namespace symcomm
