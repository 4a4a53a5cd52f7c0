// Aborts this process's TCP connections between two endpoints of the tcp provider, under
// libfabric: the net transport's way to close both ends of a rail's stalled connection
// (rail_transfer.h) so that nothing it held lands later. libfabric has no call that closes one
// connection at once: removing the peer's address from the address vector does
// (FI_AV_REMOVE_CLEANUP), but rxm crashes there (libfabric 1.17 to 1.21) on a connection
// whose connect failed and on one in the middle of receiving a write with immediate data, and
// closing a socket with data unacknowledged leaves the kernel retransmitting it. Here the
// socket is found by its addresses (/proc/self/fd) and disconnected in place (connect with
// AF_UNSPEC: the kernel resets it and drops what it still holds to send and to read), its
// descriptor left to libfabric (FabricEndpoint::abort_connection then has rxm close it).
#pragma once

#include <cstdint>
#include <vector>

namespace symcomm {

// Aborts every TCP connection of this process whose local address is `local`'s IP and whose
// peer is `peer` (IP and port; the peer's listening address), or whose local address is
// `local` (IP and port: this endpoint's listening address) and whose peer has `peer`'s IP.
// `local` and `peer` are endpoint names as fi_getname gives them (sockaddr_in or
// sockaddr_in6). Returns how many it aborted.
int abort_tcp_connections(const std::vector<uint8_t>& local, const std::vector<uint8_t>& peer);

}  // namespace symcomm
