// Receiving a memory handle (header + one descriptor over a Unix socket): a message that
// arrives in pieces is reassembled; one that stalls, ends early or carries no descriptor
// fails within the deadline, naming what was wrong, and leaks no descriptor.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "base/error.h"
#include "bootstrap/socket.h"

namespace symcomm {
namespace {

struct Header {
  uint64_t a, b;
};

class RecvFd : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    sender_.reset(sv[0]);
    receiver_.reset(sv[1]);
    ASSERT_GE(payload_[0] = open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
  }
  void TearDown() override { close(payload_[0]); }

  // Sends `bytes` of `h` from offset `from`, with the descriptor if `with_fd`.
  void send_piece(const Header& h, size_t from, size_t bytes, bool with_fd) {
    if (with_fd) {
      send_fd(sender_.get(), reinterpret_cast<const char*>(&h) + from, bytes, payload_[0]);
    } else {
      ASSERT_EQ(::send(sender_.get(), reinterpret_cast<const char*>(&h) + from, bytes, 0),
                static_cast<ssize_t>(bytes));
    }
  }

  // Receives with a deadline of `ms`; returns the error code (symcommSuccess if none).
  symcommResult_t receive(Header* out, int ms, Fd* fd = nullptr) {
    try {
      Fd got = recv_fd(receiver_.get(), out, sizeof *out, Deadline::after_ms(ms), nullptr);
      if (fd) *fd = std::move(got);
      return symcommSuccess;
    } catch (const Error& e) {
      message_ = e.what();
      return e.code();
    }
  }

  static int open_descriptors() {
    int n = 0;
    for (int d = 0; d < 1024; ++d) n += fcntl(d, F_GETFD) != -1;
    return n;
  }

  Fd sender_, receiver_;
  int payload_[1] = {-1};
  std::string message_;
};

TEST_F(RecvFd, AWholeMessage) {
  Header h{1, 2}, got{};
  send_piece(h, 0, sizeof h, true);
  Fd fd;
  EXPECT_EQ(receive(&got, 1000, &fd), symcommSuccess) << message_;
  EXPECT_EQ(got.a, 1u);
  EXPECT_EQ(got.b, 2u);
  EXPECT_TRUE(fd);
}

TEST_F(RecvFd, AMessageInPieces) {
  Header h{3, 4}, got{};
  send_piece(h, 0, 5, true);
  send_piece(h, 5, sizeof h - 5, false);
  Fd fd;
  EXPECT_EQ(receive(&got, 1000, &fd), symcommSuccess) << message_;
  EXPECT_EQ(got.a, 3u);
  EXPECT_EQ(got.b, 4u);
  EXPECT_TRUE(fd);
}

TEST_F(RecvFd, AStalledMessageTimesOut) {
  Header h{5, 6}, got{};
  send_piece(h, 0, 5, true);  // and never the rest
  int before = open_descriptors();
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(receive(&got, 300), symcommTimeout);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(s, 0.9 * 0.3) << "the receive ended before its deadline";
  EXPECT_LT(s, 5.0);
  EXPECT_NE(message_.find("memory handle"), std::string::npos) << message_;
  EXPECT_EQ(open_descriptors(), before);  // the descriptor that came with the piece is closed
}

TEST_F(RecvFd, AConnectionClosedMidMessageIsAPeerLost) {
  Header h{7, 8}, got{};
  send_piece(h, 0, 5, true);
  sender_.reset();
  int before = open_descriptors();
  EXPECT_EQ(receive(&got, 1000), symcommPeerLost);
  EXPECT_NE(message_.find("after 5 of 16 bytes"), std::string::npos) << message_;
  EXPECT_EQ(open_descriptors(), before);
}

TEST_F(RecvFd, AMessageWithoutADescriptorIsRefused) {
  Header h{9, 10}, got{};
  send_piece(h, 0, sizeof h, false);
  EXPECT_EQ(receive(&got, 1000), symcommSystemError);
  EXPECT_NE(message_.find("0 descriptors"), std::string::npos) << message_;
}

}  // namespace
}  // namespace symcomm
