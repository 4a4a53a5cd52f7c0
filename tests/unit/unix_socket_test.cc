// The Unix sockets that pass memory handles: abstract names (no file on the file system,
// nothing left when the socket closes) and the user check at both ends (SO_PEERCRED), which
// stands in for the file permissions that abstract names do not have. The cases with another
// user fork a child that switches to `nobody`, so they need root (skipped otherwise).
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>

#include "base/error.h"
#include "bootstrap/socket.h"

namespace symcomm {
namespace {

constexpr uid_t kNobody = 65534;

std::string test_name(const char* what) {
  return "symcomm-unit-" + std::to_string(getpid()) + "-" + what;
}

bool listed_in_proc_net_unix(const std::string& name) {
  std::ifstream f("/proc/net/unix");
  for (std::string line; std::getline(f, line);)
    if (line.size() > name.size() && line.compare(line.size() - name.size() - 1, name.size() + 1,
                                                  "@" + name) == 0)
      return true;
  return false;
}

// A child process that runs as `nobody` and reports through a pipe: it writes one byte once
// its socket is set up, then waits until the parent closes its end.
class NobodyChild {
 public:
  // `setup` runs in the child after setuid and returns false on failure (exit code 2).
  template <typename Setup>
  explicit NobodyChild(Setup setup) {
    int to_parent[2], to_child[2];
    EXPECT_EQ(pipe(to_parent), 0);
    EXPECT_EQ(pipe(to_child), 0);
    pid_ = fork();
    if (pid_ == 0) {
      close(to_parent[0]);
      close(to_child[1]);
      if (setuid(kNobody) != 0 || !setup()) _exit(2);
      char byte = 1;
      if (write(to_parent[1], &byte, 1) != 1) _exit(3);
      while (read(to_child[0], &byte, 1) > 0) {
      }
      _exit(0);
    }
    close(to_parent[1]);
    close(to_child[0]);
    release_ = to_child[1];
    char byte = 0;
    ready_ = read(to_parent[0], &byte, 1) == 1;
    close(to_parent[0]);
  }
  ~NobodyChild() { finish(); }
  bool ready() const { return ready_; }
  // Lets the child end; returns its exit code.
  int finish() {
    if (pid_ <= 0) return -1;
    close(release_);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool ready_ = false;
};

int raw_connect(const std::string& name) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::memcpy(sa.sun_path + 1, name.data(), name.size());
  auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&sa), len) != 0) return -1;
  return fd;
}

TEST(UnixSocket, AnAbstractNameLeavesNoFile) {
  const std::string name = test_name("nofile");
  {
    Fd listener = unix_listen(name, 4);
    EXPECT_TRUE(listed_in_proc_net_unix(name));
    EXPECT_NE(access(name.c_str(), F_OK), 0) << "a file " << name << " exists";
    Fd c = unix_connect(name, Deadline::after_ms(5000), nullptr);
    EXPECT_TRUE(c);
  }
  EXPECT_FALSE(listed_in_proc_net_unix(name)) << "the name outlived its socket";
  EXPECT_NE(access(name.c_str(), F_OK), 0);
}

TEST(UnixSocket, PeerUidIsThisUser) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  Fd a(sv[0]), b(sv[1]);
  EXPECT_EQ(peer_uid(a.get()), geteuid());
}

TEST(UnixSocket, AConnectionFromAnotherUserIsDropped) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a process as another user";
  const std::string name = test_name("foreign-client");
  Fd listener = unix_listen(name, 4);
  int foreign = -1;
  NobodyChild child([&] { return (foreign = raw_connect(name)) >= 0; });
  ASSERT_TRUE(child.ready()) << "the child could not connect";
  // In the backlog after the foreign connection: accepted once that one is dropped.
  Fd mine = unix_connect(name, Deadline::after_ms(5000), nullptr);
  Fd got = accept_same_user(listener.get(), Deadline::after_ms(5000), nullptr, "in the test");
  EXPECT_EQ(peer_uid(got.get()), geteuid());
  // Nothing else waits: the foreign connection was not kept for later either.
  try {
    accept_same_user(listener.get(), Deadline::after_ms(300), nullptr, "in the test");
    ADD_FAILURE() << "a second connection was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommTimeout) << e.what();
  }
  EXPECT_EQ(child.finish(), 0);
}

TEST(UnixSocket, AListenerOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a process as another user";
  const std::string name = test_name("foreign-listener");
  Fd foreign;
  NobodyChild child([&] {
    try {
      foreign = unix_listen(name, 4);
      return true;
    } catch (...) {
      return false;
    }
  });
  ASSERT_TRUE(child.ready()) << "the child could not listen";
  try {
    unix_connect(name, Deadline::after_ms(5000), nullptr);
    ADD_FAILURE() << "connected to another user's socket";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommSystemError) << e.what();
    EXPECT_NE(std::string(e.what()).find("belongs to uid 65534"), std::string::npos) << e.what();
  }
  EXPECT_EQ(child.finish(), 0);
}

}  // namespace
}  // namespace symcomm
