// Peer address translation: where a place in this rank's symmetric memory (the heap, or a
// registered buffer) is on a peer, as mapped in this process. Every layer that hands a peer's
// address to a copy, a kernel or the application asks here (the collectives, the
// decomposition backends, symcommPtr).
#pragma once

#include "memory/heap.h"
#include "memory/registration.h"

namespace symcomm {

// `p` on world rank `pe`, as mapped here. `p` is this rank's symmetric address (inside
// `heap`), which stands for the same heap offset on every rank, or an address inside a
// buffer of `registrations` (nullptr: none are looked up), which stands for the same offset
// in the same registration of every rank. The heap wins where both would hold p.
// Returns nullptr where pe's memory is not mapped here (pe is not load/store accessible).
// Throws symcommInvalidArgument where pe is out of range [0, nranks) or p is in neither (the
// message says it is not in the symmetric heap, and names the heap's range).
char* peer_address(const Heap& heap, const Registrations* registrations, const void* p, int pe);

}  // namespace symcomm
