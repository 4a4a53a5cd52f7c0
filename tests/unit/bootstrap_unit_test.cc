// Pure logic of the bootstrap layer: unique ids, addresses, launcher variables, errors.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "base/error.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/socket.h"
#include "bootstrap/unique_id.h"
#include "symcomm/symcomm.h"

// Errors injected into accept4, which socket.cc (linked into this binary) calls: accept(2)
// says that Linux passes a new connection's pending network errors to accept, and they are
// hard to cause for real. Each call takes the next injected error, if any, leaving the
// connection queued; without one it is the real accept4.
namespace {
std::mutex g_accept_mutex;
std::deque<int> g_accept_errors;
}  // namespace

extern "C" int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  {
    std::lock_guard<std::mutex> lock(g_accept_mutex);
    if (!g_accept_errors.empty()) {
      errno = g_accept_errors.front();
      g_accept_errors.pop_front();
      return -1;
    }
  }
  return static_cast<int>(syscall(SYS_accept4, fd, addr, len, flags));
}

namespace symcomm {
namespace {

TEST(UniqueId, RoundTripsAndRejectsGarbage) {
  UniqueId u;
  u.root = NetAddr::parse("127.0.0.1:4567");
  u.token = random_token();
  symcommUniqueId raw = u.encode();
  UniqueId back = UniqueId::decode(raw);
  EXPECT_EQ(back.root.port, 4567);
  EXPECT_EQ(back.token, u.token);
  EXPECT_NE(random_token(), random_token());
  symcommUniqueId zero{};
  EXPECT_THROW(UniqueId::decode(zero), Error);
  raw.internal[SYMCOMM_UNIQUE_ID_BYTES - 1] = 1;
  EXPECT_THROW(UniqueId::decode(raw), Error);
}

TEST(UniqueId, HexText) {
  uint8_t bytes[3] = {0x00, 0xab, 0xff}, back[3];
  EXPECT_EQ(to_hex(bytes, 3), "00abff");
  EXPECT_TRUE(from_hex("00ABff", back, 3));
  EXPECT_EQ(std::memcmp(bytes, back, 3), 0);
  EXPECT_FALSE(from_hex("00abf", back, 3));
  EXPECT_FALSE(from_hex("00abfg", back, 3));
}

TEST(NetAddr, Parses) {
  NetAddr a = NetAddr::parse("127.0.0.1:80");
  EXPECT_EQ(a.family, AF_INET);
  EXPECT_EQ(a.to_string(), "127.0.0.1:80");
  EXPECT_EQ(NetAddr::parse("[::1]:9").to_string(), "[::1]:9");
  EXPECT_EQ(NetAddr::parse("localhost", 7).port, 7);
  EXPECT_THROW(NetAddr::parse("127.0.0.1"), Error);  // no port
  EXPECT_THROW(NetAddr::parse("127.0.0.1:0"), Error);
}

// inet_aton's forms (octal, hex, fewer than four parts) are refused rather than read the way
// getaddrinfo would: "010.0.0.1" is not 10.0.0.1 there, but 8.0.0.1.
TEST(NetAddr, RefusesAmbiguousIpv4Forms) {
  for (const char* bad : {"010.0.0.1:80", "127.1:80", "0x7f.0.0.1:80", "2130706433:80",
                          "127.0.0.01:80"}) {
    SCOPED_TRACE(bad);
    try {
      NetAddr::parse(bad);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), symcommInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("four decimal parts"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(NetAddr::parse("10.0.0.1:80").to_string(), "10.0.0.1:80");
  EXPECT_EQ(NetAddr::parse("127.0.0.1", 5).port, 5);
  EXPECT_THROW(NetAddr::parse("127.0.0.1:70000"), Error);
  EXPECT_THROW(NetAddr::parse("[::1:5"), Error);
}

class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) unsetenv(v);
  }
  void TearDown() override { SetUp(); }
  static constexpr const char* kVars[] = {
      "SYMCOMM_RANK", "SYMCOMM_NRANKS", "SYMCOMM_UNIQUE_ID", "SYMCOMM_BOOTSTRAP_ROOT",
      "SYMCOMM_BOOTSTRAP_TOKEN", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
      "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE", "SLURM_PROCID",
      "SLURM_NTASKS", "SLURM_JOB_ID", "SYMCOMM_MASTER_PORT_OFFSET"};
};

// The message of the error that read_launch_env throws, or "" if it throws none.
std::string launch_env_error() {
  try {
    read_launch_env();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInvalidArgument) << e.what();
    return e.what();
  }
  return "";
}

TEST_F(LaunchEnvTest, Torchrun) {
  setenv("RANK", "3", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  LaunchEnv e = read_launch_env();
  EXPECT_STREQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.nranks, 8);
  ASSERT_TRUE(e.root);
  EXPECT_EQ(e.root->port, 29501);  // MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET
  EXPECT_FALSE(e.uid);
}

// symrun sets torchrun's names beside its own (for torch.distributed in the ranks): its own
// are read first, whatever the others say.
TEST_F(LaunchEnvTest, SymrunWinsOverTorchrunNames) {
  setenv("SYMCOMM_RANK", "1", 1);
  setenv("SYMCOMM_NRANKS", "2", 1);
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "8", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  LaunchEnv e = read_launch_env();
  EXPECT_STREQ(e.launcher, "symrun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.nranks, 2);
}

TEST_F(LaunchEnvTest, TokensDifferBetweenJobs) {
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  setenv("SYMCOMM_BOOTSTRAP_ROOT", "127.0.0.1:1234", 1);
  setenv("SLURM_JOB_ID", "100", 1);
  Token a = read_launch_env().token;
  setenv("SLURM_JOB_ID", "101", 1);
  Token b = read_launch_env().token;
  EXPECT_NE(a, b);
  setenv("SYMCOMM_BOOTSTRAP_TOKEN", "000102030405060708090a0b0c0d0e0f", 1);
  Token c = read_launch_env().token;
  EXPECT_EQ(c[15], 15);
  setenv("SYMCOMM_BOOTSTRAP_TOKEN", "xyz", 1);
  EXPECT_THROW(read_launch_env(), Error);
}

TEST_F(LaunchEnvTest, ExplainsWhatIsWrong) {
  try {
    read_launch_env();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::strstr(e.what(), "no launcher environment"), nullptr);
  }
  setenv("OMPI_COMM_WORLD_RANK", "4", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  try {
    read_launch_env();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::strstr(e.what(), "rank 4 is not below"), nullptr) << e.what();
  }
  setenv("OMPI_COMM_WORLD_RANK", "1", 1);
  try {
    read_launch_env();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::strstr(e.what(), "SYMCOMM_BOOTSTRAP_ROOT"), nullptr) << e.what();
  }
  setenv("SYMCOMM_UNIQUE_ID", "00", 1);
  EXPECT_THROW(read_launch_env(), Error);
}

// Launchers write decimal numbers: strtoll's base 0 read RANK=010 as octal 8, and took
// "0x8" and " +8", so that ranks could disagree on who is who.
TEST_F(LaunchEnvTest, RanksAreDecimal) {
  setenv("RANK", "010", 1);
  setenv("WORLD_SIZE", "16", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  EXPECT_EQ(read_launch_env().rank, 10);
  for (const char* bad : {"0x8", " +8", "+8", "8 ", " 8", "-0", "1e3", "", "8.0", "99999999999999"}) {
    setenv("RANK", bad, 1);
    if (*bad == '\0') {
      // Set but empty is not set: WORLD_SIZE alone names the launcher.
      EXPECT_NE(launch_env_error().find("RANK=''"), std::string::npos);
      continue;
    }
    std::string why = launch_env_error();
    EXPECT_NE(why.find("RANK='" + std::string(bad) + "' is not a decimal integer"),
              std::string::npos) << "RANK='" << bad << "': " << why;
  }
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "0x10", 1);
  EXPECT_NE(launch_env_error().find("WORLD_SIZE='0x10'"), std::string::npos);
  setenv("WORLD_SIZE", "0", 1);  // at least one rank
  EXPECT_NE(launch_env_error().find("WORLD_SIZE='0'"), std::string::npos);
}

// MASTER_PORT + SYMCOMM_MASTER_PORT_OFFSET must be a port: before, it could be 0 or negative,
// or wrap through int to a valid-looking port.
TEST_F(LaunchEnvTest, RootPortIsAPort) {
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", "29500", 1);
  setenv("SYMCOMM_MASTER_PORT_OFFSET", "010", 1);
  EXPECT_EQ(read_launch_env().root->port, 29510);
  setenv("SYMCOMM_MASTER_PORT_OFFSET", "-500", 1);
  EXPECT_EQ(read_launch_env().root->port, 29000);
  setenv("SYMCOMM_MASTER_PORT_OFFSET", "-29499", 1);
  EXPECT_EQ(read_launch_env().root->port, 1);
  setenv("SYMCOMM_MASTER_PORT_OFFSET", "0", 1);
  setenv("MASTER_PORT", "65535", 1);
  EXPECT_EQ(read_launch_env().root->port, 65535);
  struct Case {
    const char* port;
    const char* offset;
    const char* sum;  // "" where the variable itself is refused
  } cases[] = {{"65535", "1", "65536"},        {"29500", "-29500", "0"},
               {"29500", "-40000", "-10500"},  {"29500", "4294967297", "4294996797"},
               {"29500", "4294937297", "4294966797"}, {"0", "1", ""},
               {"070000", "1", ""},            {"0x7530", "1", ""},
               {"29500", "0x10", ""},          {"29500", " 1", ""},
               {"29500", "+1", ""}};
  for (const Case& c : cases) {
    setenv("MASTER_PORT", c.port, 1);
    setenv("SYMCOMM_MASTER_PORT_OFFSET", c.offset, 1);
    std::string why = launch_env_error();
    SCOPED_TRACE(std::string("MASTER_PORT='") + c.port + "' SYMCOMM_MASTER_PORT_OFFSET='" +
                 c.offset + "': " + why);
    if (*c.sum != '\0') {
      EXPECT_NE(why.find(std::string("MASTER_PORT (") + c.port +
                         ") + SYMCOMM_MASTER_PORT_OFFSET (" + c.offset + ") = " + c.sum +
                         " is not a port"),
                std::string::npos);
      EXPECT_NE(why.find("from 1 to 65535"), std::string::npos);
    } else {
      EXPECT_TRUE(why.find(std::string("MASTER_PORT='") + c.port + "'") != std::string::npos ||
                  why.find(std::string("SYMCOMM_MASTER_PORT_OFFSET='") + c.offset + "'") !=
                      std::string::npos);
    }
  }
}

// A listener on loopback with one connection waiting in its backlog (and the client's end).
struct PendingConnection {
  Fd listener = tcp_listen(NetAddr::parse("127.0.0.1", 0), 16);
  Fd client = tcp_connect(socket_local_addr(listener.get()), Deadline::after_ms(5000), nullptr,
                          "connecting to the test listener");
};

void inject_accept_errors(std::initializer_list<int> errors) {
  std::lock_guard<std::mutex> lock(g_accept_mutex);
  g_accept_errors.assign(errors);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// accept(2): "Linux accept() passes already-pending network errors on the new socket as an
// error code from accept()... should treat them like EAGAIN by retrying". Without the retry
// one such error ends the bootstrap root (and every rank's join with it) or rank 0's hub.
TEST(AcceptBefore, RetriesTheNetworkErrorsOfANewConnection) {
  PendingConnection p;
  inject_accept_errors({ENETDOWN, EPROTO, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH,
                        EOPNOTSUPP, ENETUNREACH, ECONNABORTED, EINTR, EAGAIN});
  Fd conn;
  EXPECT_NO_THROW(conn = accept_before(p.listener.get(), Deadline::after_ms(5000), nullptr,
                                       "accepting the test connection"));
  EXPECT_TRUE(conn);
  std::lock_guard<std::mutex> lock(g_accept_mutex);
  EXPECT_TRUE(g_accept_errors.empty());
}

TEST(AcceptBefore, OtherErrorsAreErrors) {
  PendingConnection p;
  inject_accept_errors({EINVAL});
  EXPECT_THROW(accept_before(p.listener.get(), Deadline::after_ms(5000), nullptr, "accepting"),
               Error);
  inject_accept_errors({});
}

// Out of descriptors, accept waits for some to be closed (briefly, until its deadline), then
// says what to do.
TEST(AcceptBefore, WaitsOutTooManyOpenFiles) {
  PendingConnection p;
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  // Every descriptor below the lowered limit in use: the next one cannot be made.
  int lowest_free = dup(0);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit low = saved;
  low.rlim_cur = static_cast<rlim_t>(lowest_free) + 4;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> fillers;
  for (int fd; (fd = dup(0)) >= 0;) fillers.push_back(fd);
  ASSERT_EQ(errno, EMFILE);

  auto start = std::chrono::steady_clock::now();
  std::string why;
  try {
    accept_before(p.listener.get(), Deadline::after_ms(300), nullptr, "accepting the test one");
  } catch (const Error& e) {
    why = e.what();
  }
  double waited = seconds_since(start);
  EXPECT_NE(why.find("too many open files (raise ulimit -n)"), std::string::npos) << why;
  EXPECT_GE(waited, 0.25) << why;  // retried until the deadline, not refused at once
  EXPECT_LT(waited, 5.0);

  // A descriptor closed meanwhile lets the connection in.
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    close(fillers.back());
  });
  Fd conn;
  EXPECT_NO_THROW(conn = accept_before(p.listener.get(), Deadline::after_ms(10000), nullptr,
                                       "accepting the test one"));
  closer.join();
  fillers.pop_back();
  EXPECT_TRUE(conn);
  for (int fd : fillers) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
}

TEST(CApi, ErrorStringsAndConfig) {
  for (int c = 0; c < symcommNumResults; ++c)
    EXPECT_NE(std::strstr(symcommGetErrorString(static_cast<symcommResult_t>(c)), "symcomm"),
              nullptr);
  EXPECT_STREQ(symcommGetErrorString(static_cast<symcommResult_t>(99)), "unknown symcommResult_t");
  symcommConfig_t c{};
  EXPECT_EQ(symcommConfigInit(&c), symcommSuccess);
  EXPECT_EQ(c.struct_size, sizeof c);
  EXPECT_EQ(c.device, -1);
  EXPECT_EQ(symcommConfigInit(nullptr), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "config is NULL"), nullptr);
  int v = 0;
  EXPECT_EQ(symcommGetVersion(&v), symcommSuccess);
  EXPECT_EQ(v, SYMCOMM_VERSION_CODE);
  EXPECT_NE(std::strstr(symcommGetBuildInfo(), "cuda_architectures=90"), nullptr);
}

TEST(CApi, SingleRankCommunicatorInProcess) {
  setenv("SYMCOMM_BOOTSTRAP_ADDR", "127.0.0.1", 1);
  symcommUniqueId uid;
  ASSERT_EQ(symcommGetUniqueId(&uid), symcommSuccess) << symcommGetLastError();
  symcommConfig_t cfg;
  symcommConfigInit(&cfg);
  cfg.space = symcommSpaceHost;
  symcommComm_t comm;
  ASSERT_EQ(symcommInit(&comm, 1, 0, &uid, &cfg), symcommSuccess) << symcommGetLastError();
  void* p = nullptr;
  ASSERT_EQ(symcommMalloc(comm, 1000, &p), symcommSuccess) << symcommGetLastError();
  std::memset(p, 7, 1000);
  EXPECT_EQ(symcommPtr(comm, p, 0), p);
  int x = 5;
  EXPECT_EQ(symcommHostBroadcast(comm, &x, sizeof x, 0), symcommSuccess);
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  EXPECT_EQ(symcommFinalize(comm), symcommInvalidArgument);  // the handle is dead now
}

}  // namespace
}  // namespace symcomm
