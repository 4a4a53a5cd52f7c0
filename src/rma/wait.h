// What every wait shares: the comparison, the bound, and the error that names the word.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"
#include "symcomm/device_comm.h"  // compare()
#include "symcomm/symcomm.h"

namespace symcomm {

const char* cmp_name(symcommCmp_t cmp);
// SYMCOMM_WAIT_TIMEOUT in milliseconds.
int64_t wait_timeout_ms();
[[noreturn]] void throw_wait_error(symcommResult_t code, int rank, const void* word,
                                   symcommCmp_t cmp, uint64_t expected, uint64_t observed,
                                   const char* why);

}  // namespace symcomm
