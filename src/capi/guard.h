// The C boundary: every entry point runs its body through `guarded`, which turns exceptions
// into a result code and the calling thread's last-error message ("symcommMalloc(bytes=0):
// bytes is 0 [heap.cc:61]"). Nothing else in symcomm catches to report.
#pragma once

#include <string>

#include "base/error.h"
#include "base/log.h"
#include "capi/comm.h"

namespace symcomm {

void set_last_error(const std::string& message);
// The communicator the calling thread's current entry point checked (checked()), or null.
symcommComm*& call_comm();
// A symcommPeerLost error's message, led by which rank was lost where the communicator of
// the call knows it (a wait that the loss ended names the rank it waited for, which may be
// another member that left the same barrier).
std::string name_the_lost_rank(const std::string& what);

// `describe` names the call and its arguments; it only runs when the call fails.
template <typename Describe, typename Body>
symcommResult_t guarded(Describe&& describe, Body&& body) {
  Caught caught;
  symcommComm* const outer = call_comm();  // an entry point called from another's body
  call_comm() = nullptr;
  struct Restore {
    symcommComm* comm;
    ~Restore() { call_comm() = comm; }
  } restore{outer};
  try {
    body();
    return symcommSuccess;
  } catch (...) {
    caught = caught_exception();
  }
  if (caught.code == symcommPeerLost) caught.what = name_the_lost_rank(caught.what);
  std::string message = describe() + ": " + caught.what;
  set_last_error(message);
  SYMCOMM_INFO("%s", message.c_str());
  return caught.code;
}

// Checks a communicator handle; this thread's log lines show its rank from now on.
symcommComm& checked(symcommComm_t comm);
// A stream argument must be NULL in the host memory space (operations are synchronous).
void check_stream(const symcommComm& comm, symcommStream_t stream);
// Kernels load elements through T*: a buffer must be aligned to the size of its elements.
void require_aligned(const void* p, size_t alignment, const char* what);

}  // namespace symcomm

#define SYMCOMM_REQUIRE_ARG(ptr) \
  SYMCOMM_REQUIRE((ptr) != nullptr, symcommInvalidArgument, "%s is NULL", #ptr)
