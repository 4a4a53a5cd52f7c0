#include "rma/wait.h"

#include "base/error.h"
#include "base/param.h"

namespace symcomm {

static const SecondsParam kWaitTimeout(
    "SYMCOMM_WAIT_TIMEOUT", "60",
    "bound of every signal wait and barrier, on the host and on the device (read when a "
    "communicator is created); 0: no bound (a wait then ends only when it succeeds or the "
    "communicator is aborted); at least 0.001", 0.001);

int64_t wait_timeout_ms() { return kWaitTimeout.get_ms(); }

const char* cmp_name(symcommCmp_t cmp) {
  switch (cmp) {
    case symcommCmpEq: return "==";
    case symcommCmpNe: return "!=";
    case symcommCmpGe: return ">=";
    case symcommCmpGt: return ">";
    case symcommCmpLe: return "<=";
    case symcommCmpLt: return "<";
  }
  return "?";
}

void throw_wait_error(symcommResult_t code, int rank, const void* word, symcommCmp_t cmp,
                      uint64_t expected, uint64_t observed, const char* why, int missing) {
  if (missing >= 0)
    SYMCOMM_THROW(code,
                  "a barrier wait ended (%s): rank %d waited for rank %d, which did not arrive "
                  "(its slot at %p was to be %s %llu and last held %llu)", why, rank, missing,
                  word, cmp_name(cmp), static_cast<unsigned long long>(expected),
                  static_cast<unsigned long long>(observed));
  SYMCOMM_THROW(code,
                "a wait ended (%s): rank %d waited for the word at %p to be %s %llu and last saw "
                "%llu", why, rank, word, cmp_name(cmp),
                static_cast<unsigned long long>(expected), static_cast<unsigned long long>(observed));
}

}  // namespace symcomm
