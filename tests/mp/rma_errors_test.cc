// One-sided calls refused (host API): every bad argument, and transfers that leave their
// allocation.
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>

#include "rma_fixture.h"
#include "symcomm/device_comm.h"

namespace rma_test {

TEST_F(Rma, BadArguments) {
  char* sym;
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&sym)));
  char* local = static_cast<char*>(mp::local_alloc(8192));
  const symcommEngine_t ce = symcommEngineCe;
  SC_FAILS(symcommPutOnStream(comm_, nullptr, local, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "dst is NULL"), nullptr);
  SC_FAILS(symcommPutOnStream(comm_, local, local, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not inside the symmetric heap"), nullptr);
  SC_FAILS(symcommPutOnStream(comm_, sym + 4000, local, 1 << 30, 0, ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(comm_, sym, nullptr, 8, 0, ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, mp::nranks(), ce, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "out of range"), nullptr);
  SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, -1, ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, 0, static_cast<symcommEngine_t>(9), stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommGetOnStream(comm_, local, local, 8, 0, ce, stream_), symcommInvalidArgument);
  uint64_t* sig = reinterpret_cast<uint64_t*>(sym + 64);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, sig, 1,
                                    static_cast<symcommSignalOp_t>(7), 0, ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, reinterpret_cast<uint64_t*>(sym + 3), 1,
                                    symcommSignalSet, 0, ce, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "8-byte aligned"), nullptr);
  SC_FAILS(symcommSignalWaitOnStream(comm_, sig, static_cast<symcommCmp_t>(42), 0, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommSignalWaitOnStream(comm_, reinterpret_cast<uint64_t*>(local), symcommCmpEq, 0,
                                     stream_), symcommInvalidArgument);
  SC_FAILS(symcommBarrierOnStream(comm_, 57, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutOnStream(nullptr, sym, local, 8, 0, ce, stream_), symcommInvalidArgument);
  // A size that wraps offset + bytes around must not pass the heap's bounds (it once did,
  // and the host space then ran memcpy with it).
  const size_t huge = SIZE_MAX - 100;
  SC_FAILS(symcommPutOnStream(comm_, sym + 4000, local, huge, 0, ce, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not inside the symmetric heap"), nullptr);
  SC_FAILS(symcommGetOnStream(comm_, local, sym + 4000, huge, 0, ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym + 4000, local, huge, sig, 1, symcommSignalSet, 0,
                                    ce, stream_), symcommInvalidArgument);
  // Get: NULL pointers, pe out of range, an unknown engine.
  SC_FAILS(symcommGetOnStream(comm_, nullptr, sym, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "dst"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommGetOnStream(comm_, local, nullptr, 8, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "src is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommGetOnStream(comm_, local, sym, 8, mp::nranks(), ce, stream_),
           symcommInvalidArgument);
  SC_FAILS(symcommGetOnStream(comm_, local, sym, 8, -1, ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommGetOnStream(comm_, local, sym, 8, 0, static_cast<symcommEngine_t>(3), stream_),
           symcommInvalidArgument);
  // Put-signal: the signal word NULL or outside the heap, pe out of range, NULL data.
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, nullptr, 1, symcommSignalSet, 0, ce,
                                    stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sig is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, reinterpret_cast<uint64_t*>(local), 1,
                                    symcommSignalSet, 0, ce, stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "not inside the symmetric heap"), nullptr);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, sig, 1, symcommSignalSet, mp::nranks(),
                                    ce, stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, local, 8, sig, 1, symcommSignalSet, -1, ce,
                                    stream_), symcommInvalidArgument);
  SC_FAILS(symcommPutSignalOnStream(comm_, nullptr, local, 8, sig, 1, symcommSignalSet, 0, ce,
                                    stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "dst is NULL"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommPutSignalOnStream(comm_, sym, nullptr, 8, sig, 1, symcommSignalSet, 0, ce,
                                    stream_), symcommInvalidArgument);
  SC_FAILS(symcommSignalWaitOnStream(comm_, nullptr, symcommCmpEq, 0, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "sig is NULL"), nullptr) << symcommGetLastError();
  // Device handles (checked before the memory space is: the same in both spaces).
  SC_FAILS(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_WORLD, nullptr), symcommInvalidArgument);
  symcomm::DeviceComm handle;
  SC_FAILS(symcommGetDeviceComm(comm_, 57, &handle), symcommInvalidArgument);
  SC_FAILS(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_INVALID, &handle), symcommInvalidArgument);
  // Team calls: a pe out of range of its team, a 2D split without columns.
  int pe = -2;
  SC_FAILS(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, mp::nranks(), SYMCOMM_TEAM_WORLD, &pe),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "out of range"), nullptr) << symcommGetLastError();
  SC_FAILS(symcommTeamTranslate(comm_, SYMCOMM_TEAM_WORLD, -1, SYMCOMM_TEAM_WORLD, &pe),
           symcommInvalidArgument);
  symcommTeam_t xteam = 5, yteam = 5;
  for (int xrange : {0, -3}) {
    SC_FAILS(symcommTeamSplit2D(comm_, SYMCOMM_TEAM_WORLD, xrange, &xteam, &yteam),
             symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "xrange"), nullptr) << symcommGetLastError();
    EXPECT_EQ(xteam, SYMCOMM_TEAM_INVALID);
    EXPECT_EQ(yteam, SYMCOMM_TEAM_INVALID);
  }
  // A team of which this rank is not a member: odd ranks use the even ranks' team id.
  symcommTeam_t even;
  SC_OK(symcommTeamSplitStrided(comm_, SYMCOMM_TEAM_WORLD, 0, 2, (mp::nranks() + 1) / 2, &even));
  const auto even_id = static_cast<symcommTeam_t>(mp::agree(static_cast<uint64_t>(even)));
  if (mp::rank() % 2 == 1) {
    SC_FAILS(symcommGetDeviceComm(comm_, even_id, &handle), symcommInvalidArgument);
    SC_FAILS(symcommBarrierOnStream(comm_, even_id, stream_), symcommInvalidArgument);
  } else {
    SC_OK(symcommTeamDestroy(comm_, even));
  }
  if (mp::space() == symcommSpaceHost) {
    SC_FAILS(symcommPutOnStream(comm_, sym, local, 8, 0, ce,
                                reinterpret_cast<symcommStream_t>(0x1234)),
             symcommInvalidArgument);
    EXPECT_NE(std::strstr(symcommGetLastError(), "host memory space"), nullptr);
    symcomm::DeviceComm h;
    SC_FAILS(symcommGetDeviceComm(comm_, SYMCOMM_TEAM_WORLD, &h), symcommNotSupported);
  }
  mp::sync(stream_);
  mp::local_free(local);
  SC_OK(symcommFree(comm_, sym));
}

// A transfer whose range on either side leaves the allocation it starts in is refused,
// naming the allocation's size, and writes nothing: past the end lies the next allocation.
TEST_F(Rma, TransfersStayInsideTheirAllocation) {
  char *a, *b, *small;
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&a)));
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&b)));
  SC_OK(symcommMalloc(comm_, 100, reinterpret_cast<void**>(&small)));
  mp::fill(b, 4096, mp::rank(), 5);
  char* local = static_cast<char*>(mp::local_alloc(8192));
  mp::fill(local, 8192, mp::rank(), 6);
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  const int pe = (mp::rank() + 1) % mp::nranks();
  auto refused = [&](symcommResult_t rc, const char* what) {
    EXPECT_EQ(rc, symcommInvalidArgument) << what;
    const std::string e = symcommGetLastError();
    EXPECT_NE(e.find("runs past the end of its allocation"), std::string::npos) << what << ": " << e;
    EXPECT_NE(e.find("has 4096 bytes"), std::string::npos) << what << ": " << e;
  };
  for (symcommEngine_t engine : kEngines) {
    refused(symcommPutOnStream(comm_, a, local, 5000, pe, engine, stream_), "put 5000 into a");
    refused(symcommGetOnStream(comm_, local, a, 5000, pe, engine, stream_), "get 5000 from a");
    refused(symcommPutOnStream(comm_, a + 96, local, 4001, pe, engine, stream_), "put a+96");
    // The symmetric source of a put, the symmetric destination of a get.
    refused(symcommPutOnStream(comm_, b, a + 100, 4000, pe, engine, stream_), "put from a+100");
    refused(symcommGetOnStream(comm_, a + 100, b, 4000, pe, engine, stream_), "get into a+100");
    uint64_t* sig = reinterpret_cast<uint64_t*>(small);
    refused(symcommPutSignalOnStream(comm_, a, local, 4097, sig, 1, symcommSignalSet, pe, engine,
                                     stream_), "put-signal 4097");
  }
  // The size asked for counts, not the allocator's rounding up to 256 bytes.
  SC_FAILS(symcommPutOnStream(comm_, small, local, 101, pe, symcommEngineAuto, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "has 100 bytes"), nullptr) << symcommGetLastError();
  // Freed memory is in no allocation.
  char* gone;
  SC_OK(symcommMalloc(comm_, 4096, reinterpret_cast<void**>(&gone)));
  SC_OK(symcommFree(comm_, gone));
  SC_FAILS(symcommPutOnStream(comm_, gone, local, 8, pe, symcommEngineAuto, stream_),
           symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "no live allocation"), nullptr)
      << symcommGetLastError();
  // Collectives: a symmetric buffer that runs past its allocation is refused too.
  const size_t n = static_cast<size_t>(mp::nranks());
  SC_FAILS(symcommAllGatherOnStream(comm_, SYMCOMM_TEAM_WORLD, local, a, 4096 / n + 1,
                                    symcommUint8, "", stream_), symcommInvalidArgument);
  EXPECT_NE(std::strstr(symcommGetLastError(), "recv"), nullptr) << symcommGetLastError();
  // What fits exactly is allowed, and nothing refused landed in b (after a, on every rank).
  for (symcommEngine_t engine : kEngines) {
    SC_OK(symcommPutOnStream(comm_, a, local, 4096, pe, engine, stream_));
    SC_OK(symcommGetOnStream(comm_, local, a + 96, 4000, pe, engine, stream_));
  }
  mp::sync(stream_);
  SC_OK(symcommHostBarrier(comm_));
  EXPECT_EQ(mp::count_mismatches(b, 4096, mp::rank(), 5), 0u);
  mp::local_free(local);
  SC_OK(symcommFree(comm_, small));
  SC_OK(symcommFree(comm_, b));
  SC_OK(symcommFree(comm_, a));
}

}  // namespace rma_test
