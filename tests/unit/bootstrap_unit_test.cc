// Pure logic of the bootstrap layer: unique ids, addresses, launcher variables, errors.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "bootstrap/launcher_env.h"
#include "bootstrap/unique_id.h"
#include "symcomm/symcomm.h"

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
      "SLURM_NTASKS", "SLURM_JOB_ID"};
};

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
