// The decomposition descriptor through the C API: collective creation with agreement, grid
// coordinates, pencil information, backends by name, a descriptor outliving its communicator,
// and a transpose whose peers never call (bounded waits). Transposes on every backend are in
// decomp_transpose_test.cc, halo exchanges in decomp_halo_test.cc, bad arguments and the
// cross-rank check in decomp_errors_test.cc.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decomp_fixture.h"

namespace decomp_test {

TEST(Decomp, CreateDescribeDestroy) {
  symcommDecompConfig_t c = config_2d(13);
  c.axis_contiguous[1] = 1;
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  int row = -1, col = -1;
  SC_OK(symcommDecompGridCoords(d, &row, &col));
  EXPECT_EQ(row * c.pdims[1] + col, mp::rank());
  // The pieces of every pencil, gathered from every rank, add up to the grid.
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t halo[3] = {1, 0, 2};
    symcommPencilInfo_t p;
    SC_OK(symcommDecompPencilInfo(d, axis, halo, nullptr, &p));
    int64_t owned = (p.hi[0] - p.lo[0]) * (p.hi[1] - p.lo[1]) * (p.hi[2] - p.lo[2]);
    std::vector<int64_t> all(static_cast<size_t>(mp::nranks()));
    SC_OK(symcommHostAllgather(mp::world(), &owned, all.data(), sizeof owned));
    int64_t total = 0;
    for (int64_t v : all) total += v;
    EXPECT_EQ(total, c.gdims[0] * c.gdims[1] * c.gdims[2]) << "axis " << axis;
    EXPECT_EQ(p.order[0], axis == 1 ? 1 : 0);
    EXPECT_EQ(p.shape[0], p.hi[p.order[0]] - p.lo[p.order[0]] + 2 * halo[p.order[0]]);
  }
  symcommPencilInfo_t bad;
  SC_FAILS(symcommDecompPencilInfo(d, 5, nullptr, nullptr, &bad), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "axis 5"), nullptr) << symcommGetLastError();
  const int64_t negative[3] = {0, -1, 0};
  SC_FAILS(symcommDecompPencilInfo(d, 0, negative, nullptr, &bad), symcommInvalidArgument);
  SC_FAILS(symcommDecompPencilInfo(d, 0, nullptr, nullptr, nullptr), symcommInvalidArgument);
  SC_OK(symcommDecompDestroy(d));
}

TEST(Decomp, RanksMustAgree) {
  symcommDecompConfig_t c = config_2d(16);
  if (mp::rank() == 0) c.gdims[2] = 17;
  symcommDecomp_t d = nullptr;
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "same configuration"), nullptr) << symcommGetLastError();
  EXPECT_NE(std::strstr(symcommGetLastError(), "gdims differs"), nullptr) << symcommGetLastError();
  EXPECT_EQ(d, nullptr);
  // Equal by value: a name's bytes after its NUL, and -0.0 against 0.0, do not count. The
  // backends by name below: the first registered, or, on a world that spans nodes, the first
  // whose descriptor reaches it.
  std::string first;
  for (const std::string& b : backend_names())
    if (first.empty() && !kept_off_by_nodes(backend_info(b))) first = b;
  ASSERT_FALSE(first.empty()) << "no backend reaches the world";
  c = config_2d(16);
  std::snprintf(c.backend, sizeof c.backend, "%s", first.c_str());
  c.autotune_weights[3] = mp::rank() == 0 ? -0.0 : 0.0;
  if (mp::rank() == 0) c.backend[std::strlen(c.backend) + 1] = 'x';
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  SC_OK(symcommDecompDestroy(d));
  // A NULL configuration or handle on one rank: every rank fails the same call, saying why
  // (before, the others went on and paired their steps with the next call's).
  c = config_2d(16);
  d = nullptr;
  SC_FAILS(symcommDecompCreate(mp::world(), mp::rank() == 0 ? nullptr : &c, &d),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "config"), nullptr) << symcommGetLastError();
  EXPECT_EQ(d, nullptr);
  SC_FAILS(symcommDecompCreate(mp::world(), &c, mp::rank() == 0 ? nullptr : &d),
           symcommInvalidArgument);
  EXPECT_EQ(d, nullptr);
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));  // in step again
  SC_OK(symcommDecompDestroy(d));
  c.axis_contiguous[2] = 2;  // 0 or 1
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "axis_contiguous[2] is 2"), nullptr)
      << symcommGetLastError();
  c = config_2d(16);
  c.pdims[0] = mp::nranks() + 1;  // wrong on every rank: each says why
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "does not match"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommDecompCreate(mp::world(), nullptr, &d), symcommInvalidArgument);
  // Backends by name.
  c = config_2d(16);
  std::snprintf(c.backend, sizeof c.backend, "nope");
  SC_FAILS(symcommDecompCreate(mp::world(), &c, &d), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "nope"), nullptr) << symcommGetLastError();
  std::snprintf(c.backend, sizeof c.backend, "%s", first.c_str());
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const char* name = nullptr;
  SC_OK(symcommDecompGetBackend(d, &name));
  EXPECT_STREQ(name, first.c_str());
  SC_OK(symcommDecompDestroy(d));
}

// Every registered backend has a descriptor, under its own name; a backend that runs here
// runs in this memory space.
TEST(Decomp, EveryBackendDescribesWhatItNeeds) {
  const unsigned known = (1u << symcommSpaceCuda) | (1u << symcommSpaceHost);
  for (int i = 0; i < symcommDecompBackendCount(); ++i) {
    symcommDecompBackendInfo_t info;
    SC_OK(symcommDecompGetBackendInfo(i, &info));
    ASSERT_NE(info.name, nullptr);
    EXPECT_STREQ(info.name, symcommDecompBackendName(i));
    EXPECT_NE(info.spaces, 0u) << info.name << " runs in no memory space";
    EXPECT_EQ(info.spaces & ~known, 0u) << info.name;
    std::string why;
    if (runs_here(info.name, &why)) {
      EXPECT_NE(info.spaces & (1u << mp::space()), 0u) << info.name;
    }
  }
  symcommDecompBackendInfo_t info;
  SC_FAILS_SAYING(symcommDecompGetBackendInfo(symcommDecompBackendCount(), &info),
                  symcommInvalidArgument,
                  "index " + std::to_string(symcommDecompBackendCount()) + " is not");
  SC_FAILS(symcommDecompGetBackendInfo(-1, &info), symcommInvalidArgument);
  SC_FAILS(symcommDecompGetBackendInfo(0, nullptr), symcommInvalidArgument);
}

TEST(Decomp, OutlivingItsCommunicator) {
  symcommComm_t comm = mp::new_comm();
  ASSERT_NE(comm, nullptr);
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(comm, &c, &d));
  SC_OK(symcommFinalize(comm));  // the decomposition lets go of it
  int row, col;
  SC_FAILS(symcommDecompGridCoords(d, &row, &col), symcommInvalidUsage);
  EXPECT_NE(std::strstr(symcommGetLastError(), "finalized"), nullptr) << symcommGetLastError();
  SC_OK(symcommDecompDestroy(d));
}

// A transpose whose peers never call, on every backend whose copies wait for their peers
// (its descriptor says so): its waits are bounded. In the cuda space the call returns at
// once and the host learns the timeout at its next call (the copy kernel's waits for the
// peers' arrival end at SYMCOMM_WAIT_TIMEOUT); in the host space the call itself fails.
// Either way nothing hangs, the process goes on, and nothing was written into the peers'
// buffers (a backend that writes straight into their outputs does so only after their
// arrival). In the cuda space also with the barriers and copies apart
// (SYMCOMM_BOX_COPY_SYNCED_PER_SM=0), and with a grid of several waves (16 per SM: the
// blocks of later waves must not wait the bound again).
TEST(Decomp, TransposeWithoutItsPeersTimesOut) {
  if (mp::nranks() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::string> backends;
  for (const std::string& b : backend_names())
    if (backend_info(b).copies_wait_for_peers && !kept_off_by_nodes(backend_info(b)))
      backends.push_back(b);
  if (backends.empty())
    GTEST_SKIP() << "no backend that reaches the world (" << mp::nodes()
                 << " nodes) has copies that wait for their peers";
  mp::ScopedEnv timeout("SYMCOMM_WAIT_TIMEOUT", "1");
  // The transposes' own bound: SYMCOMM_DECOMP_CHECK (on by default in the host space) would
  // stop the call at its allgather, which the absent rank never joins.
  mp::ScopedEnv unchecked("SYMCOMM_DECOMP_CHECK", "0");
  std::vector<std::string> per_sm = {"2"};
  if (mp::space() == symcommSpaceCuda) per_sm = {"2", "16", "0"};
  for (const std::string& blocks : per_sm)
    for (const std::string& backend : backends) {
      SCOPED_TRACE(backend + ", SYMCOMM_BOX_COPY_SYNCED_PER_SM=" + blocks);
      mp::ScopedEnv synced("SYMCOMM_BOX_COPY_SYNCED_PER_SM", blocks);
      symcommComm_t comm = mp::new_comm();
      ASSERT_NE(comm, nullptr);
      symcommDecompConfig_t c;
      symcommDecompConfigInit(&c);
      for (int a = 0; a < 3; ++a) c.gdims[a] = 128;
      c.pdims[0] = 1;
      c.pdims[1] = mp::nranks();
      std::snprintf(c.backend, sizeof c.backend, "%s", backend.c_str());
      symcommDecomp_t d = nullptr;
      ASSERT_EQ(symcommDecompCreate(comm, &c, &d), symcommSuccess) << symcommGetLastError();
      size_t ws_bytes = 0, bytes = 0;
      SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
      for (int a = 0; a < 3; ++a) {
        symcommPencilInfo_t p;
        SC_OK(symcommDecompPencilInfo(d, a, nullptr, nullptr, &p));
        bytes = std::max(bytes, static_cast<size_t>(p.size) * 8);
      }
      void *ws = nullptr, *in = nullptr, *out = nullptr;
      SC_OK(symcommMalloc(comm, ws_bytes, &ws));
      SC_OK(symcommMalloc(comm, bytes, &in));
      SC_OK(symcommMalloc(comm, bytes, &out));
      const std::vector<uint8_t> marker(bytes, 0x5A);
      mp::copy_from_host(out, marker.data(), bytes);
      EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
      symcommStream_t stream = mp::new_stream();
      if (mp::rank() == 0) {  // Y -> Z over every rank; the others never call
        const auto start = std::chrono::steady_clock::now();
        const symcommResult_t rc = symcommDecompTranspose(d, 1, 2, in, out, ws, symcommR64,
                                                          nullptr, nullptr, nullptr, nullptr,
                                                          stream);
        if (mp::space() == symcommSpaceCuda) {
          EXPECT_EQ(rc, symcommSuccess) << symcommGetLastError();
          mp::sync(stream);
          SC_FAILS(symcommQuietOnStream(comm, stream), symcommTimeout);
        } else {
          EXPECT_EQ(rc, symcommTimeout) << symcommGetLastError();
        }
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // In the host space the call itself waits out the bound (its peers never arrive).
        if (mp::space() != symcommSpaceCuda) {
          EXPECT_GE(seconds, 0.9 * 1.0) << "the call ended before SYMCOMM_WAIT_TIMEOUT";
        }
        EXPECT_LT(seconds, 10.0) << "each wait is bounded by 1 s, and waited once";
      }
      EXPECT_EQ(symcommHostBarrier(comm), symcommSuccess) << symcommGetLastError();
      if (mp::rank() != 0) {
        std::vector<uint8_t> got(bytes);
        mp::copy_to_host(got.data(), out, bytes);
        EXPECT_TRUE(got == marker) << "rank 0 wrote into this rank's output without its arrival";
      }
      mp::free_stream(stream);
      SC_OK(symcommDecompDestroy(d));
      EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
    }
}

}  // namespace decomp_test
