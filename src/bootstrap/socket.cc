#include "bootstrap/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "base/param.h"

namespace symcomm {

static const StringParam kBootstrapAddr(
    "SYMCOMM_BOOTSTRAP_ADDR", "",
    "IP address or host name that bootstrap sockets bind and advertise (default: first "
    "non-loopback IPv4 interface)");
static const StringParam kBootstrapIfname(
    "SYMCOMM_BOOTSTRAP_IFNAME", "", "network interface whose address bootstrap sockets use");

// Poll in slices this long so that aborts are seen promptly.
static constexpr int kSliceMs = 100;

int Deadline::remaining_ms(int cap) const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, cap));
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

std::string NetAddr::to_string() const {
  char host[INET6_ADDRSTRLEN] = "?";
  inet_ntop(family, addr, host, sizeof host);
  return family == AF_INET6 ? format("[%s]:%u", host, port) : format("%s:%u", host, port);
}

NetAddr NetAddr::from_sockaddr(const sockaddr* sa) {
  NetAddr a;
  a.family = sa->sa_family;
  if (sa->sa_family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    a.port = ntohs(in->sin_port);
    std::memcpy(a.addr, &in->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    a.port = ntohs(in6->sin6_port);
    std::memcpy(a.addr, &in6->sin6_addr, 16);
  }
  return a;
}

socklen_t NetAddr::to_sockaddr(sockaddr_storage* ss) const {
  std::memset(ss, 0, sizeof *ss);
  if (family == AF_INET) {
    auto* in = reinterpret_cast<sockaddr_in*>(ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, addr, 4);
    return sizeof(sockaddr_in);
  }
  auto* in6 = reinterpret_cast<sockaddr_in6*>(ss);
  in6->sin6_family = AF_INET6;
  in6->sin6_port = htons(port);
  std::memcpy(&in6->sin6_addr, addr, 16);
  return sizeof(sockaddr_in6);
}

NetAddr NetAddr::parse(const std::string& text, int default_port) {
  std::string host = text, port_text;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    SYMCOMM_REQUIRE(close != std::string::npos, symcommInvalidArgument,
                    "address '%s' has '[' without ']'", text.c_str());
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      SYMCOMM_REQUIRE(text[close + 1] == ':', symcommInvalidArgument,
                      "address '%s': expected ':' after ']'", text.c_str());
      port_text = text.substr(close + 2);
    }
  } else if (size_t colon = text.rfind(':');
             colon != std::string::npos && text.find(':') == colon) {
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  }
  int port = default_port;
  if (!port_text.empty()) {
    auto p = parse_int(port_text);
    SYMCOMM_REQUIRE(p && *p > 0 && *p < 65536, symcommInvalidArgument,
                    "address '%s': port '%s' is not in 1..65535", text.c_str(), port_text.c_str());
    port = static_cast<int>(*p);
  }
  SYMCOMM_REQUIRE(port >= 0, symcommInvalidArgument, "address '%s' has no port", text.c_str());
  SYMCOMM_REQUIRE(!host.empty(), symcommInvalidArgument, "address '%s' has no host",
                  text.c_str());
  // getaddrinfo reads IPv4 numbers as inet_aton does: "010.0.0.1" as octal (8.0.0.1), "10.1"
  // as 10.0.0.1, "0xa.0.0.1" as hex. Ranks that read one address two ways would never meet,
  // and a typo would reach a stranger: only the four-decimal form is taken (what inet_pton
  // accepts). A host name that inet_aton cannot read is left to the resolver.
  in_addr v4{};
  SYMCOMM_REQUIRE(inet_aton(host.c_str(), &v4) == 0 || inet_pton(AF_INET, host.c_str(), &v4) == 1,
                  symcommInvalidArgument,
                  "address '%s': host '%s' is an IPv4 number in a form other than four decimal "
                  "parts without leading zeros (it would be read as octal, hex or a short form)",
                  text.c_str(), host.c_str());
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  SYMCOMM_REQUIRE(rc == 0 && res, symcommInvalidArgument, "cannot resolve host '%s': %s",
                  host.c_str(), gai_strerror(rc));
  // Prefer IPv4 where a name has both.
  const addrinfo* pick = res;
  for (const addrinfo* r = res; r; r = r->ai_next)
    if (r->ai_family == AF_INET) { pick = r; break; }
  NetAddr a = from_sockaddr(pick->ai_addr);
  freeaddrinfo(res);
  a.port = static_cast<uint16_t>(port);
  return a;
}

bool bootstrap_addr_configured() { return !kBootstrapAddr.get().empty(); }

std::string bootstrap_host() {
  std::string configured = kBootstrapAddr.get();
  if (!configured.empty()) return configured;
  std::string want_if = kBootstrapIfname.get();
  ifaddrs* list = nullptr;
  SYMCOMM_SYSCHECK(getifaddrs(&list));
  std::string found;
  for (ifaddrs* i = list; i && found.empty(); i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    if (!(i->ifa_flags & IFF_UP)) continue;
    if (want_if.empty() ? (i->ifa_flags & IFF_LOOPBACK) : want_if != i->ifa_name) continue;
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, host, sizeof host);
    found = host;
  }
  freeifaddrs(list);
  SYMCOMM_REQUIRE(want_if.empty() || !found.empty(), symcommInvalidArgument,
                  "SYMCOMM_BOOTSTRAP_IFNAME='%s': no such interface with an IPv4 address",
                  want_if.c_str());
  return found.empty() ? "127.0.0.1" : found;
}

static void set_socket_options(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// `busy`: where not null, a taken port (EADDRINUSE) returns an empty Fd and sets it.
static Fd listen_on(const NetAddr& addr, int backlog, bool* busy) {
  Fd fd(::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  SYMCOMM_SYSCHECK(fd.get());
  int one = 1;
  SYMCOMM_SYSCHECK(setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
  sockaddr_storage ss;
  socklen_t len = addr.to_sockaddr(&ss);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    int err = errno;
    if (busy && err == EADDRINUSE) {
      *busy = true;
      return Fd();
    }
    SYMCOMM_THROW(symcommSystemError, "cannot bind bootstrap socket to %s: %s",
                  addr.to_string().c_str(), strerror(err));
  }
  SYMCOMM_SYSCHECK(::listen(fd.get(), backlog));
  return fd;
}

Fd tcp_listen(const NetAddr& addr, int backlog) { return listen_on(addr, backlog, nullptr); }

Fd tcp_listen_if_free(const NetAddr& addr, int backlog) {
  bool busy = false;
  return listen_on(addr, backlog, &busy);
}

NetAddr socket_local_addr(int fd) {
  sockaddr_storage ss;
  socklen_t len = sizeof ss;
  SYMCOMM_SYSCHECK(getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len));
  return NetAddr::from_sockaddr(reinterpret_cast<sockaddr*>(&ss));
}

// Waits until `fd` is ready for `events`, polling in slices and calling `abort` between.
static void wait_ready(int fd, short events, Deadline deadline, const AbortCheck& abort,
                       const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    // What already arrived is delivered even if the communicator was aborted meanwhile:
    // a peer that answered and then left is not a failure of this step.
    int rc = ::poll(&p, 1, 0);
    if (rc > 0) return;
    if (abort) abort();
    rc = ::poll(&p, 1, deadline.remaining_ms(kSliceMs));
    if (rc > 0) return;  // ready, or an error/hangup the next call will report
    if (rc < 0 && errno != EINTR) throw_system_error(__FILE__, __LINE__, "poll", errno);
    if (deadline.expired())
      SYMCOMM_THROW(symcommTimeout, "timed out %s (SYMCOMM_BOOTSTRAP_TIMEOUT)", what);
  }
}

Fd tcp_connect(const NetAddr& addr, Deadline deadline, const AbortCheck& abort, const char* what) {
  sockaddr_storage ss;
  socklen_t len = addr.to_sockaddr(&ss);
  int last_err = 0;
  while (true) {
    if (abort) abort();
    Fd fd(::socket(addr.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    SYMCOMM_SYSCHECK(fd.get());
    int rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      while ((rc = ::poll(&p, 1, deadline.remaining_ms(kSliceMs))) == 0 && !deadline.expired())
        if (abort) abort();
      int err = 0;
      socklen_t elen = sizeof err;
      getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
      rc = (rc > 0 && err == 0) ? 0 : -1;
      errno = err ? err : ETIMEDOUT;
    }
    if (rc == 0) {
      int flags = fcntl(fd.get(), F_GETFL);
      SYMCOMM_SYSCHECK(fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK));
      set_socket_options(fd.get());
      return fd;
    }
    last_err = errno;
    if (deadline.expired()) break;
    // Refused or unreachable: the listener may not be up yet; try again shortly.
    ::poll(nullptr, 0, std::min(50, deadline.remaining_ms(50)));
  }
  SYMCOMM_THROW(symcommTimeout, "timed out %s: cannot connect to %s (last error: %s)", what,
                addr.to_string().c_str(), strerror(last_err));
}

Fd tcp_connect_first(const NetAddr& addr, int ports, Deadline deadline, const AbortCheck& abort,
                     const char* what) {
  if (ports <= 1) return tcp_connect(addr, deadline, abort, what);
  while (true) {
    for (int k = 0; k < ports && addr.port + k <= 65535; ++k) {
      NetAddr at = addr;
      at.port = static_cast<uint16_t>(addr.port + k);
      // A short slice each (a refused connection is tried again after 50 ms, once): a port
      // without the root is passed over.
      try {
        return tcp_connect(at, Deadline::after_ms(std::min(60, deadline.remaining_ms(60))), abort,
                           what);
      } catch (const Error& e) {
        if (e.code() != symcommTimeout) throw;
      }
      if (deadline.expired()) break;
    }
    if (deadline.expired()) break;
  }
  SYMCOMM_THROW(symcommTimeout, "timed out %s: nothing accepted a connection on %s or the %d "
                "ports after it", what, addr.to_string().c_str(), ports - 1);
}

// accept(2): Linux passes pending network errors of the new connection to accept, which
// should then be retried like EAGAIN; they say nothing about the listening socket.
static bool accept_error_is_transient(int err) {
  switch (err) {
    case EINTR: case EAGAIN: case ECONNABORTED: case ENETDOWN: case EPROTO: case ENOPROTOOPT:
    case EHOSTDOWN: case ENONET: case EHOSTUNREACH: case EOPNOTSUPP: case ENETUNREACH:
      return true;
    default:
      return false;
  }
}

Fd accept_before(int listen_fd, Deadline deadline, const AbortCheck& abort, const char* what) {
  // Out of descriptors (EMFILE, ENFILE): the connection waits in the backlog while others
  // close theirs; retried briefly until the deadline.
  int out_of_files = 0;
  for (;;) {
    if (out_of_files != 0) {
      if (abort) abort();
      if (deadline.expired())
        SYMCOMM_THROW(symcommSystemError,
                      "cannot accept a connection %s: too many open files (raise ulimit -n): %s",
                      what, strerror(out_of_files));
      ::poll(nullptr, 0, std::min(20, deadline.remaining_ms(20)));
    }
    wait_ready(listen_fd, POLLIN, deadline, abort, what);
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      set_socket_options(fd);  // harmless on Unix sockets
      return Fd(fd);
    }
    const int err = errno;
    if (err == EMFILE || err == ENFILE) {
      out_of_files = err;
      continue;
    }
    out_of_files = 0;
    if (!accept_error_is_transient(err)) throw_system_error(__FILE__, __LINE__, "accept4", err);
  }
}

void send_all(int fd, const void* buf, size_t bytes, Deadline deadline, const AbortCheck& abort,
              const char* what) {
  auto* p = static_cast<const char*>(buf);
  while (bytes > 0) {
    wait_ready(fd, POLLOUT, deadline, abort, what);
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == EPIPE || errno == ECONNRESET)
        SYMCOMM_THROW(symcommPeerLost, "connection closed %s", what);
      throw_system_error(__FILE__, __LINE__, "send", errno);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void recv_all(int fd, void* buf, size_t bytes, Deadline deadline, const AbortCheck& abort,
              const char* what) {
  auto* p = static_cast<char*>(buf);
  while (bytes > 0) {
    wait_ready(fd, POLLIN, deadline, abort, what);
    ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n == 0) SYMCOMM_THROW(symcommPeerLost, "connection closed %s", what);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) SYMCOMM_THROW(symcommPeerLost, "connection reset %s", what);
      throw_system_error(__FILE__, __LINE__, "recv", errno);
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

static socklen_t unix_addr(const std::string& name, sockaddr_un* sa) {
  SYMCOMM_REQUIRE(!name.empty() && name.size() < sizeof(sa->sun_path), symcommInvalidArgument,
                  "abstract socket name '%s' is empty or longer than %zu characters",
                  name.c_str(), sizeof(sa->sun_path) - 1);
  std::memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  // sun_path[0] stays 0: the abstract namespace, where the length says where the name ends.
  std::memcpy(sa->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

uid_t peer_uid(int sock) {
  ucred cred{};
  socklen_t len = sizeof cred;
  SYMCOMM_SYSCHECK(::getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len));
  return cred.uid;
}

Fd unix_listen(const std::string& name, int backlog) {
  sockaddr_un sa;
  socklen_t len = unix_addr(name, &sa);
  Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  SYMCOMM_SYSCHECK(fd.get());
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) != 0) {
    int err = errno;
    SYMCOMM_THROW(symcommSystemError, "cannot bind abstract Unix socket @%s: %s", name.c_str(),
                  strerror(err));
  }
  SYMCOMM_SYSCHECK(::listen(fd.get(), backlog));
  return fd;
}

Fd unix_connect(const std::string& name, Deadline deadline, const AbortCheck& abort) {
  sockaddr_un sa;
  socklen_t len = unix_addr(name, &sa);
  for (;;) {
    if (abort) abort();
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int err;
    if (!fd) {
      // Out of descriptors: retried until the deadline, as others may close theirs.
      err = errno;
      if (err != EMFILE && err != ENFILE) throw_system_error(__FILE__, __LINE__, "socket", err);
    } else if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), len) == 0) {
      // Whoever listens under the name gets what is sent next (a memory handle): it must be
      // this user's process, not one that took the name first.
      const uid_t owner = peer_uid(fd.get());
      SYMCOMM_REQUIRE(owner == ::geteuid(), symcommSystemError,
                      "abstract Unix socket @%s belongs to uid %u, not to this user (uid %u)",
                      name.c_str(), static_cast<unsigned>(owner),
                      static_cast<unsigned>(::geteuid()));
      return fd;
    } else {
      err = errno;
    }
    if (deadline.expired()) {
      if (err == EMFILE || err == ENFILE)
        SYMCOMM_THROW(symcommSystemError,
                      "cannot connect to abstract Unix socket @%s: too many open files (raise "
                      "ulimit -n): %s", name.c_str(), strerror(err));
      SYMCOMM_THROW(symcommTimeout, "timed out connecting to abstract Unix socket @%s: %s",
                    name.c_str(), strerror(err));
    }
    ::poll(nullptr, 0, 10);
  }
}

Fd accept_same_user(int listen_fd, Deadline deadline, const AbortCheck& abort, const char* what) {
  for (;;) {
    Fd c = accept_before(listen_fd, deadline, abort, what);
    const uid_t uid = peer_uid(c.get());
    if (uid == ::geteuid()) return c;
    SYMCOMM_WARN("refused a connection from uid %u (not this user) while %s",
                 static_cast<unsigned>(uid), what);
  }
}

namespace {
// A message of `bytes` header bytes with room for one descriptor (SCM_RIGHTS).
struct FdMessage {
  iovec iov;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  FdMessage(void* header, size_t bytes) : iov{header, bytes} {
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
  }
};
}  // namespace

void send_fd(int sock, const void* header, size_t bytes, int fd_to_send) {
  FdMessage m(const_cast<void*>(header), bytes);
  cmsghdr* c = CMSG_FIRSTHDR(&m.msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd_to_send, sizeof(int));
  ssize_t n;
  do n = ::sendmsg(sock, &m.msg, MSG_NOSIGNAL); while (n < 0 && errno == EINTR);
  SYMCOMM_SYSCHECK(n);
  SYMCOMM_REQUIRE(static_cast<size_t>(n) == bytes, symcommSystemError,
                  "sendmsg sent %zd of %zu bytes", n, bytes);
}

Fd recv_fd(int sock, void* header, size_t bytes, Deadline deadline, const AbortCheck& abort) {
  // The sender writes header and descriptor in one sendmsg, but a stream socket may still
  // deliver the header in pieces, and a connection that stalls mid-message must not hold
  // this rank past its deadline: read without blocking, waiting under the deadline between.
  auto* p = static_cast<char*>(header);
  size_t got = 0;
  std::vector<Fd> fds;
  while (got < bytes) {
    wait_ready(sock, POLLIN, deadline, abort, "receiving a memory handle from a local peer");
    FdMessage m(p + got, bytes - got);
    ssize_t n = ::recvmsg(sock, &m.msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET)
        SYMCOMM_THROW(symcommPeerLost, "a local peer closed its handle connection early");
      throw_system_error(__FILE__, __LINE__, "recvmsg", errno);
    }
    // Own every descriptor that arrived before judging the message, so none leaks.
    for (cmsghdr* c = CMSG_FIRSTHDR(&m.msg); c; c = CMSG_NXTHDR(&m.msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int d;
        std::memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(d);
      }
    }
    SYMCOMM_REQUIRE(!(m.msg.msg_flags & MSG_CTRUNC), symcommSystemError,
                    "a local peer sent more descriptors with a memory handle than one");
    SYMCOMM_REQUIRE(n > 0, symcommPeerLost,
                    "a local peer closed its handle connection after %zu of %zu bytes", got,
                    bytes);
    got += static_cast<size_t>(n);
  }
  SYMCOMM_REQUIRE(fds.size() == 1, symcommSystemError,
                  "a local peer sent %zu descriptors with a memory handle, not one", fds.size());
  return std::move(fds[0]);
}

}  // namespace symcomm
