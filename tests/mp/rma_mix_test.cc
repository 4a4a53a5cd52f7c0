// RmaMix: the random sequences of one-sided operations of rma_mix.h through the host API, on
// one stream, each data step by an engine drawn at random (auto, ce, sm), with quiet calls
// sprinkled in and nothing synchronised on the host until the end. In the cuda space the
// same sequence is then captured in a CUDA graph and replayed with fresh data.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mix.h"
#include "mp.h"
#include "rma_mix.h"

namespace {

using rma_mix::Kind;
using rma_mix::Step;

class RmaMix : public ::testing::Test {
 protected:
  void SetUp() override {
    // Small chunks, so that transfers cross chunk boundaries.
    mp::ScopedEnv chunk("SYMCOMM_HEAP_CHUNK_SIZE", "2M");
    comm_ = mp::new_comm();
    ASSERT_NE(comm_, nullptr);
    stream_ = mp::new_stream();
    me_ = mp::rank();
    teams_.make(comm_);
    plan_ = std::make_unique<rma_mix::Plan>(mp::mix_seed(), teams_,
                                            mp::space() == symcommSpaceCuda, false);
    SC_OK(symcommMalloc(comm_, plan_->bytes(), &sym_));
    loc_ = mp::local_alloc(plan_->bytes());
    ASSERT_NE(loc_, nullptr);
    SC_OK(symcommMalloc(comm_, sizeof(uint64_t) * static_cast<size_t>(plan_->words()),
                        reinterpret_cast<void**>(&sigs_)));
  }
  void TearDown() override {
    if (!comm_) return;
    mp::sync(stream_);
    mp::free_stream(stream_);
    if (symcommHostBarrier(comm_) == symcommSuccess)
      for (void* p : {sym_, static_cast<void*>(sigs_)})
        if (p) {
          EXPECT_EQ(symcommFree(comm_, p), symcommSuccess) << symcommGetLastError();
        }
    if (loc_) mp::local_free(loc_);
    EXPECT_EQ(symcommFinalize(comm_), symcommSuccess) << symcommGetLastError();
  }

  // Run `run`'s initial memory, this rank's part written; every rank's returned.
  std::vector<std::vector<uint8_t>> initial(int run) {
    std::vector<std::vector<uint8_t>> mem = plan_->initial(run);
    plan_->store(mem, me_, sym_, loc_, sigs_);
    return mem;
  }

  // Issues this rank's steps; false (with the failure recorded) where a call failed.
  bool issue() {
    char* sym = static_cast<char*>(sym_);
    char* mine[2] = {sym, static_cast<char*>(loc_)};
    for (const Step& s : plan_->steps()) {
      if (s.rank != me_) continue;
      symcommResult_t rc = symcommSuccess;
      switch (s.kind) {
        case Kind::Put:
          rc = symcommPutOnStream(comm_, sym + s.dst.off, mine[s.src.buf] + s.src.off, s.bytes,
                                  s.pe, s.engine, stream_);
          break;
        case Kind::PutSignal:
          rc = symcommPutSignalOnStream(comm_, sym + s.dst.off, mine[s.src.buf] + s.src.off,
                                        s.bytes, &sigs_[s.sig], s.value, s.op, s.pe, s.engine,
                                        stream_);
          break;
        case Kind::Get:
          rc = symcommGetOnStream(comm_, mine[s.dst.buf] + s.dst.off, sym + s.src.off, s.bytes,
                                  s.pe, s.engine, stream_);
          break;
        case Kind::Wait:
          rc = symcommSignalWaitOnStream(comm_, &sigs_[s.sig], s.cmp, s.value, stream_);
          break;
        case Kind::Barrier:
          rc = symcommBarrierOnStream(comm_, teams_.id[s.team], stream_);
          break;
        case Kind::Quiet:
          rc = symcommQuietOnStream(comm_, stream_);
          break;
        default:
          ADD_FAILURE() << "a device step in a host plan: " << plan_->describe(s);
          return false;
      }
      if (rc != symcommSuccess) {
        ADD_FAILURE() << plan_->describe(s) << ": " << symcommGetLastError();
        return false;
      }
    }
    return true;
  }

  void check(std::vector<std::vector<uint8_t>> mem, const std::string& when) {
    mp::sync(stream_);
    // A wait that timed out on the device is reported at the next call.
    EXPECT_EQ(symcommQuietOnStream(comm_, stream_), symcommSuccess)
        << when << ": " << symcommGetLastError()
        << " (SYMCOMM_TEST_MIX_SEED=" << plan_->seed() << ")";
    plan_->check(std::move(mem), me_, sym_, loc_, sigs_, stream_, when);
  }

  symcommComm_t comm_ = nullptr;
  symcommStream_t stream_ = nullptr;
  int me_ = 0;
  mp::MixTeams teams_;
  std::unique_ptr<rma_mix::Plan> plan_;
  void* sym_ = nullptr;
  void* loc_ = nullptr;
  uint64_t* sigs_ = nullptr;
};

TEST_F(RmaMix, RandomSequence) {
  std::vector<std::vector<uint8_t>> mem = initial(0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_TRUE(issue());
  check(std::move(mem), "eager");
}

TEST_F(RmaMix, RandomSequenceReplayedFromAGraph) {
  if (mp::space() != symcommSpaceCuda) GTEST_SKIP() << "CUDA graphs need the cuda memory space";
  std::vector<std::vector<uint8_t>> mem = initial(0);
  SC_OK(symcommHostBarrier(comm_));
  ASSERT_TRUE(issue());
  check(std::move(mem), "eager");
  mp::capture_and_replay(
      comm_, stream_, [&] { return issue(); }, [&](int run) { return initial(run); },
      [&](std::vector<std::vector<uint8_t>> m, const std::string& when) {
        check(std::move(m), when);
      });
}

}  // namespace
