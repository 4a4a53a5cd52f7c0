// The bootstrap root: a thread that serves one join of `nranks` ranks. It accepts
// connections on `listener`, refuses those that do not present `token`, checks that the
// ranks agree on the communicator size and that no rank joins twice, and once all have
// joined sends each the table of PeerInfo. If the ranks do not all join within
// SYMCOMM_BOOTSTRAP_TIMEOUT of the first one (or of the root's start), it sends the ones
// that did a timeout error naming the missing ranks, and stops.
#pragma once

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace symcomm {

// Starts the root thread (detached) on a listening socket; returns the address it serves.
NetAddr start_bootstrap_root(Fd listener, const Token& token);

}  // namespace symcomm
