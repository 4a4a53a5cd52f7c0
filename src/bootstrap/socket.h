// TCP and Unix-domain socket helpers with deadlines. Every blocking step polls in short
// slices so that it can also notice that the communicator was aborted (a peer was lost):
// nothing here blocks past its deadline.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace symcomm {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline after_ms(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  bool expired() const { return Clock::now() >= at_; }
  // Milliseconds left, at least 0 and at most `cap`.
  int remaining_ms(int cap) const;
  Clock::time_point at() const { return at_; }

 private:
  explicit Deadline(Clock::time_point at) : at_(at) {}
  Clock::time_point at_;
};

// Called between poll slices; throws to abandon the wait (for example when a peer was lost).
using AbortCheck = std::function<void()>;

// An IPv4/IPv6 address and port, trivially copyable so that it can travel in messages.
struct NetAddr {
  uint16_t family = 0;  // AF_INET or AF_INET6
  uint16_t port = 0;    // host byte order
  uint8_t addr[16] = {};
  std::string to_string() const;
  // "1.2.3.4:5", "[::1]:5", "host:5"; port may be omitted if default_port >= 0.
  static NetAddr parse(const std::string& text, int default_port = -1);
  static NetAddr from_sockaddr(const sockaddr* sa);
  socklen_t to_sockaddr(sockaddr_storage* ss) const;
};

// An owned file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset(int fd = -1);
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// The address to bind and advertise for bootstrap sockets: SYMCOMM_BOOTSTRAP_ADDR if set,
// else the first up, non-loopback IPv4 interface (SYMCOMM_BOOTSTRAP_IFNAME narrows the
// choice), else 127.0.0.1.
std::string bootstrap_host();
// Whether SYMCOMM_BOOTSTRAP_ADDR names the addresses to bind (else sockets may bind any).
bool bootstrap_addr_configured();

Fd tcp_listen(const NetAddr& addr, int backlog);  // port 0: any free port
// As tcp_listen, but an empty Fd where the port is taken (EADDRINUSE).
Fd tcp_listen_if_free(const NetAddr& addr, int backlog);
NetAddr socket_local_addr(int fd);
// Connects, retrying refused connections until the deadline (the listener may not be up yet).
Fd tcp_connect(const NetAddr& addr, Deadline deadline, const AbortCheck& abort, const char* what);
// The first of `ports` consecutive ports from addr's that accepts a connection, tried in
// turn (each refusal moves on to the next; a round of refusals waits a moment) until the
// deadline (symcommTimeout naming them).
Fd tcp_connect_first(const NetAddr& addr, int ports, Deadline deadline, const AbortCheck& abort,
                     const char* what);
// Accepts one connection on a listening socket (TCP or Unix).
Fd accept_before(int listen_fd, Deadline deadline, const AbortCheck& abort, const char* what);

// Sends or receives exactly `bytes`. A closed connection is symcommPeerLost; the deadline
// passing is symcommTimeout; `what` names the step in messages ("allgather from rank 3").
void send_all(int fd, const void* buf, size_t bytes, Deadline deadline, const AbortCheck& abort,
              const char* what);
void recv_all(int fd, void* buf, size_t bytes, Deadline deadline, const AbortCheck& abort,
              const char* what);

// Unix-domain sockets for passing file descriptors between processes of one node, named in
// Linux's abstract namespace (`name` without the leading NUL byte): there is no file, so a
// process that is killed leaves nothing behind. Abstract names have no permissions (any
// process of the network namespace may connect), so the ends check each other's user:
// unix_connect refuses a listener of another user (symcommSystemError), and
// accept_same_user drops connections from other users.
Fd unix_listen(const std::string& name, int backlog);
Fd unix_connect(const std::string& name, Deadline deadline, const AbortCheck& abort);
// accept_before, dropping (and logging) connections whose process runs as another user.
Fd accept_same_user(int listen_fd, Deadline deadline, const AbortCheck& abort, const char* what);
// The effective uid of the process at the other end of a connected Unix socket (at the time
// it connected or listened: SO_PEERCRED).
uid_t peer_uid(int sock);
// Sends `bytes` of header data and one descriptor (SCM_RIGHTS).
void send_fd(int sock, const void* header, size_t bytes, int fd_to_send);
// Receives `bytes` of header data and one descriptor; returns the descriptor (owned).
Fd recv_fd(int sock, void* header, size_t bytes, Deadline deadline, const AbortCheck& abort);

}  // namespace symcomm
