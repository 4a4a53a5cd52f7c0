#include "transport/net/tcp_abort.h"

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace symcomm {

namespace {

struct Address {
  sockaddr_storage s{};
  bool valid = false;
};

Address from_name(const std::vector<uint8_t>& name) {
  Address a;
  if (name.size() >= sizeof(sa_family_t) && name.size() <= sizeof a.s) {
    std::memcpy(&a.s, name.data(), name.size());
    a.valid = a.s.ss_family == AF_INET || a.s.ss_family == AF_INET6;
  }
  return a;
}

bool same_ip(const sockaddr_storage& x, const sockaddr_storage& y) {
  if (x.ss_family != y.ss_family) return false;
  if (x.ss_family == AF_INET)
    return reinterpret_cast<const sockaddr_in&>(x).sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(y).sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6&>(x).sin6_addr,
                     &reinterpret_cast<const sockaddr_in6&>(y).sin6_addr, sizeof(in6_addr)) == 0;
}

uint16_t port(const sockaddr_storage& x) {
  return x.ss_family == AF_INET ? reinterpret_cast<const sockaddr_in&>(x).sin_port
                                : reinterpret_cast<const sockaddr_in6&>(x).sin6_port;
}

}  // namespace

int abort_tcp_connections(const std::vector<uint8_t>& local_name,
                          const std::vector<uint8_t>& peer_name) {
  const Address local = from_name(local_name), peer = from_name(peer_name);
  if (!local.valid || !peer.valid) return 0;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return 0;
  int aborted = 0;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end || fd == dirfd(dir)) continue;
    int type = 0;
    socklen_t len = sizeof type;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM)
      continue;
    sockaddr_storage mine{}, theirs{};
    socklen_t ml = sizeof mine, tl = sizeof theirs;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&mine), &ml) != 0 ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&theirs), &tl) != 0)
      continue;  // a listener, or not connected
    if (!same_ip(mine, local.s) || !same_ip(theirs, peer.s)) continue;
    const bool we_connected = port(theirs) == port(peer.s);
    const bool they_connected = port(mine) == port(local.s);
    if (!we_connected && !they_connected) continue;
    sockaddr unspec{};
    unspec.sa_family = AF_UNSPEC;
    if (connect(static_cast<int>(fd), &unspec, sizeof unspec) == 0) ++aborted;
  }
  closedir(dir);
  return aborted;
}

}  // namespace symcomm
