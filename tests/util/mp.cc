#include "mp.h"

#include <cstdlib>
#include <cstring>
#include <random>

namespace mp {

symcommComm_t g_world = nullptr;

symcommComm_t world() { return g_world; }

int rank() {
  int r = -1;
  symcommCommRank(g_world, &r);
  return r;
}

int nranks() {
  int n = -1;
  symcommCommSize(g_world, &n);
  return n;
}

symcommMemorySpace_t space() {
  const char* s = std::getenv("SYMCOMM_TEST_SPACE");
  return s && std::strcmp(s, "cuda") == 0 ? symcommSpaceCuda : symcommSpaceHost;
}

symcommConfig_t config() {
  symcommConfig_t c;
  symcommConfigInit(&c);
  c.space = space();
  return c;
}

symcommUniqueId shared_uid() {
  symcommUniqueId uid{};
  if (rank() == 0) {
    EXPECT_EQ(symcommGetUniqueId(&uid), symcommSuccess) << symcommGetLastError();
  }
  EXPECT_EQ(symcommHostBroadcast(g_world, &uid, sizeof uid, 0), symcommSuccess)
      << symcommGetLastError();
  return uid;
}

symcommComm_t new_comm() {
  symcommUniqueId uid = shared_uid();
  symcommComm_t comm = nullptr;
  symcommConfig_t c = config();
  symcommResult_t rc = symcommInit(&comm, nranks(), rank(), &uid, &c);
  EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
  return rc == symcommSuccess ? comm : nullptr;
}

symcommComm_t new_two_node_comm() {
  ScopedEnv node("SYMCOMM_NODE_NAME", rank() % 2 ? "odd" : "even");
  return new_comm();
}

FinalizeAtEnd::~FinalizeAtEnd() {
  if (comm_ == nullptr) return;
  EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
}

ScopedEnv::ScopedEnv(const char* name, const std::string& value) : name_(name) {
  const char* old = std::getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  setenv(name, value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (had_) setenv(name_.c_str(), old_.c_str(), 1);
  else unsetenv(name_.c_str());
}

uint64_t agree(uint64_t value) {
  EXPECT_EQ(symcommHostBroadcast(g_world, &value, sizeof value, 0), symcommSuccess);
  return value;
}

uint64_t test_seed() {
  const char* fixed = std::getenv("SYMCOMM_TEST_SEED");
  return agree(fixed ? std::strtoull(fixed, nullptr, 10) : std::random_device{}());
}

std::string seed_note(uint64_t seed) {
  return "seed " + std::to_string(seed) + " (SYMCOMM_TEST_SEED=" + std::to_string(seed) +
         " repeats it)";
}

bool all_ok(bool ok) {
  std::vector<int32_t> all(static_cast<size_t>(nranks()));
  int32_t mine = ok ? 1 : 0;
  if (symcommHostAllgather(g_world, &mine, all.data(), sizeof mine) != symcommSuccess) return false;
  for (int32_t v : all)
    if (!v) return false;
  return true;
}

int nodes() {
  int node = 0, n = 0;
  EXPECT_EQ(symcommCommNode(world(), &node, &n), symcommSuccess) << symcommGetLastError();
  return n;
}

int local_size() {
  int n = 0;
  EXPECT_EQ(symcommCommLocalSize(world(), &n), symcommSuccess) << symcommGetLastError();
  return n;
}

size_t count_peer_mismatches(symcommComm_t comm, const void* sym, size_t bytes, int pe, int who,
                             uint64_t what) {
  if (void* remote = symcommPtr(comm, sym, pe)) return count_mismatches(remote, bytes, who, what);
  void* local = local_alloc(bytes);
  symcommStream_t s = new_stream();
  const symcommResult_t rc = symcommGetOnStream(comm, local, sym, bytes, pe, symcommEngineAuto, s);
  EXPECT_EQ(rc, symcommSuccess) << "get from rank " << pe << ": " << symcommGetLastError();
  sync(s);
  const size_t bad = rc == symcommSuccess ? count_mismatches(local, bytes, who, what) : bytes;
  free_stream(s);
  local_free(local);
  return bad;
}

}  // namespace mp
