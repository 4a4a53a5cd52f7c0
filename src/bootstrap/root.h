// The bootstrap root: a thread that serves joins of ranks. It accepts connections on
// `listener`, refuses those that do not present `token`, checks that the ranks agree on the
// communicator size and that no rank joins twice, and once all have joined sends each the
// table of PeerInfo. If the ranks do not all join within SYMCOMM_BOOTSTRAP_TIMEOUT of the
// first one, it sends the ones that did a timeout error naming the missing ranks.
//
// RootMode::Once (symcommGetUniqueId): one join; a root that no rank reaches within
// SYMCOMM_BOOTSTRAP_TIMEOUT of its start stops, so that an unused id leaves no thread behind
// (with SYMCOMM_BOOTSTRAP_TIMEOUT=0, no bound, it stays).
// RootMode::Serial (symrun): one join after another (one communicator after another: init,
// finalize, init again), for the process's lifetime; no bound before the first rank of each.
// SYMCOMM_BOOTSTRAP_TIMEOUT is read when the root starts, by the caller: a bad value fails
// start_bootstrap_root.
#pragma once

#include <cstdint>

#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"

namespace symcomm {

enum class RootMode { Once, Serial };

// Starts the root thread (detached) on a listening socket; returns the address it serves.
NetAddr start_bootstrap_root(Fd listener, const Token& token, RootMode mode = RootMode::Once);

// Makes room for `more` descriptors beyond those open now (the root's and rank 0's hub's
// connections, one or two per rank), raising the soft RLIMIT_NOFILE toward the hard limit
// where needed; warns, naming `who`, if the hard limit is too low.
void ensure_descriptors(int64_t more, const char* who);

}  // namespace symcomm
