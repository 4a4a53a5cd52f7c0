// What every wait shares: the comparison, the bound, and the error that names the word.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"
#include "symcomm/device_comm.h"  // compare()
#include "symcomm/symcomm.h"

namespace symcomm {

const char* cmp_name(symcommCmp_t cmp);
// SYMCOMM_WAIT_TIMEOUT in milliseconds; 0 means no bound, on the host and on the device
// alike (a positive value is at least 1).
int64_t wait_timeout_ms();
// `missing`: for a barrier's wait on a member's slot, the world rank of the member that did
// not arrive (named in the message); -1 for other waits.
[[noreturn]] void throw_wait_error(symcommResult_t code, int rank, const void* word,
                                   symcommCmp_t cmp, uint64_t expected, uint64_t observed,
                                   const char* why, int missing = -1);

}  // namespace symcomm
