#include "memory/peer_address.h"

#include "base/error.h"

namespace symcomm {

char* peer_address(const Heap& heap, const Registrations* registrations, const void* p, int pe) {
  if (p && registrations && !heap.contains(p) && registrations->find(p, 0)) {
    const int nranks = static_cast<int>(heap.windows().size());
    SYMCOMM_REQUIRE(pe >= 0 && pe < nranks, symcommInvalidArgument,
                    "pe %d is out of range [0, %d)", pe, nranks);
    return registrations->peer_ptr(p, pe);
  }
  // Checks pe's range and that p is in the heap.
  return static_cast<char*>(heap.peer_ptr(p, pe));
}

}  // namespace symcomm
