// One-sided communication on a stream: argument checks; the transport of each peer
// (src/transport) moves the bytes, and the memory space's backend (src/rma) waits.
#include "capi/guard.h"
#include "coll/agreement.h"

using namespace symcomm;

namespace {

// The communicator, live, with `stream` acceptable for its memory space.
symcommComm& live(symcommComm_t comm, symcommStream_t stream) {
  symcommComm& c = checked(comm);
  c.check_live();
  check_stream(c, stream);
  return c;
}

// The transport that reaches rank `pe` (symcommNotSupported, saying why, where none does).
Transport& transport(const symcommComm& c, int pe) {
  SYMCOMM_REQUIRE(pe >= 0 && pe < c.topology.nranks, symcommInvalidArgument,
                  "pe %d is out of range [0, %d)", pe, c.topology.nranks);
  return c.rma->transports().to(pe);
}

// `sym` .. `sym + bytes` of this rank's heap, inside one allocation: the transports take this
// rank's symmetric address and find the peer's themselves.
void* symmetric(const symcommComm& c, const void* sym, size_t bytes, const char* arg) {
  c.heap->require_in_allocation(sym, bytes, arg);
  return const_cast<void*>(sym);
}

// The local side of a transfer: where it is symmetric, it must not leave its allocation
// either (the copy would read or write the next one); other memory is the caller's to size.
void check_local(const symcommComm& c, const void* local, size_t bytes, const char* arg) {
  if (c.heap->contains(local)) c.heap->require_in_allocation(local, bytes, arg);
}

uint64_t* signal_word(const symcommComm& c, uint64_t* sig) {
  SYMCOMM_REQUIRE(reinterpret_cast<uintptr_t>(sig) % 8 == 0, symcommInvalidArgument,
                  "sig %p is not 8-byte aligned", static_cast<void*>(sig));
  return static_cast<uint64_t*>(symmetric(c, sig, 8, "sig"));
}

void check_engine(symcommEngine_t e) {
  SYMCOMM_REQUIRE(e == symcommEngineAuto || e == symcommEngineCe || e == symcommEngineSm,
                  symcommInvalidArgument, "engine %d is not a symcommEngine_t", static_cast<int>(e));
}

// The engine for a copy whose local side (`what`: "src" of a put, "dst" of a get) is not
// symmetric: SM copies touch it from a kernel, so it must be memory this GPU reaches at that
// address (pageable host memory would fault the kernel and end the context). The copy
// engines take any memory: auto moves such a buffer with them; an explicit sm is refused.
symcommEngine_t engine_for(const symcommComm& c, symcommEngine_t engine, const void* local,
                           const char* what) {
  if (engine == symcommEngineCe || c.heap->contains(local)) return engine;
  const std::string problem = c.space->device_access_problem(local);
  if (problem.empty()) return engine;
  SYMCOMM_REQUIRE(engine != symcommEngineSm, symcommInvalidArgument,
                  "%s %s; or pass symcommEngineCe (the copy engines read any memory)", what,
                  problem.c_str());
  return symcommEngineCe;
}

}  // namespace

namespace {

// A put (or, `nbi`, one that may still be in flight when it returns: Transport::put_nbi).
symcommResult_t put(const char* fn, symcommComm_t comm, void* dst, const void* src, size_t bytes,
                    int pe, symcommEngine_t engine, symcommStream_t stream, bool nbi) {
  return guarded([&] { return format("%s(dst=%p, src=%p, bytes=%zu, pe=%d)", fn, dst, src, bytes,
                                     pe); }, [&] {
    symcommComm& c = live(comm, stream);
    Transport& t = transport(c, pe);
    check_engine(engine);
    void* to = symmetric(c, dst, bytes, "dst");
    if (bytes == 0) return;
    SYMCOMM_REQUIRE_ARG(src);
    check_local(c, src, bytes, "src");
    const symcommEngine_t e = engine_for(c, engine, src, "src");
    if (nbi) t.put_nbi(pe, to, src, bytes, e, stream);
    else t.put(pe, to, src, bytes, e, stream);
  });
}

symcommResult_t get(const char* fn, symcommComm_t comm, void* dst, const void* src, size_t bytes,
                    int pe, symcommEngine_t engine, symcommStream_t stream, bool nbi) {
  return guarded([&] { return format("%s(dst=%p, src=%p, bytes=%zu, pe=%d)", fn, dst, src, bytes,
                                     pe); }, [&] {
    symcommComm& c = live(comm, stream);
    Transport& t = transport(c, pe);
    check_engine(engine);
    const void* from = symmetric(c, src, bytes, "src");
    if (bytes == 0) return;
    SYMCOMM_REQUIRE_ARG(dst);
    check_local(c, dst, bytes, "dst");
    const symcommEngine_t e = engine_for(c, engine, dst, "dst");
    if (nbi) t.get_nbi(pe, dst, from, bytes, e, stream);
    else t.get(pe, dst, from, bytes, e, stream);
  });
}

}  // namespace

extern "C" symcommResult_t symcommPutOnStream(symcommComm_t comm, void* dst, const void* src,
                                              size_t bytes, int pe, symcommEngine_t engine,
                                              symcommStream_t stream) {
  return put("symcommPutOnStream", comm, dst, src, bytes, pe, engine, stream, false);
}

extern "C" symcommResult_t symcommGetOnStream(symcommComm_t comm, void* dst, const void* src,
                                              size_t bytes, int pe, symcommEngine_t engine,
                                              symcommStream_t stream) {
  return get("symcommGetOnStream", comm, dst, src, bytes, pe, engine, stream, false);
}

extern "C" symcommResult_t symcommPutNbiOnStream(symcommComm_t comm, void* dst, const void* src,
                                                 size_t bytes, int pe, symcommEngine_t engine,
                                                 symcommStream_t stream) {
  return put("symcommPutNbiOnStream", comm, dst, src, bytes, pe, engine, stream, true);
}

extern "C" symcommResult_t symcommGetNbiOnStream(symcommComm_t comm, void* dst, const void* src,
                                                 size_t bytes, int pe, symcommEngine_t engine,
                                                 symcommStream_t stream) {
  return get("symcommGetNbiOnStream", comm, dst, src, bytes, pe, engine, stream, true);
}

extern "C" symcommResult_t symcommPutSignalOnStream(symcommComm_t comm, void* dst, const void* src,
                                                    size_t bytes, uint64_t* sig, uint64_t value,
                                                    symcommSignalOp_t op, int pe,
                                                    symcommEngine_t engine,
                                                    symcommStream_t stream) {
  return guarded([&] { return format("symcommPutSignalOnStream(dst=%p, bytes=%zu, sig=%p, "
                                     "value=%llu, op=%d, pe=%d)", dst, bytes,
                                     static_cast<void*>(sig), static_cast<unsigned long long>(value),
                                     static_cast<int>(op), pe); }, [&] {
    symcommComm& c = live(comm, stream);
    Transport& t = transport(c, pe);
    check_engine(engine);
    SYMCOMM_REQUIRE(op == symcommSignalSet || op == symcommSignalAdd, symcommInvalidArgument,
                    "op %d is not a symcommSignalOp_t", static_cast<int>(op));
    uint64_t* word = signal_word(c, sig);
    void* to = nullptr;
    if (bytes > 0) {
      to = symmetric(c, dst, bytes, "dst");
      SYMCOMM_REQUIRE_ARG(src);
      check_local(c, src, bytes, "src");
      engine = engine_for(c, engine, src, "src");
    }
    t.put_signal(pe, to, src, bytes, word, value, op, engine, stream);
  });
}

extern "C" symcommResult_t symcommSignalWaitOnStream(symcommComm_t comm, uint64_t* sig,
                                                     symcommCmp_t cmp, uint64_t value,
                                                     symcommStream_t stream) {
  return guarded([&] { return format("symcommSignalWaitOnStream(sig=%p, cmp=%d, value=%llu)",
                                     static_cast<void*>(sig), static_cast<int>(cmp),
                                     static_cast<unsigned long long>(value)); }, [&] {
    symcommComm& c = live(comm, stream);
    SYMCOMM_REQUIRE(cmp >= symcommCmpEq && cmp <= symcommCmpLt, symcommInvalidArgument,
                    "cmp %d is not a symcommCmp_t", static_cast<int>(cmp));
    c.rma->backend().wait(signal_word(c, sig), cmp, value, stream);
  });
}

extern "C" symcommResult_t symcommQuietOnStream(symcommComm_t comm, symcommStream_t stream) {
  return guarded([] { return std::string("symcommQuietOnStream"); }, [&] {
    symcommComm& c = live(comm, stream);
    c.rma->transports().quiet(stream);
    c.rma->backend().quiet(stream);
  });
}

namespace {

// The word of an atomic, checked, and `result`: in the cuda space memory this rank's GPU
// writes (the stream writes it), in the host space with no stream.
uint64_t* atomic_word(const symcommComm& c, uint64_t* word, uint64_t* result) {
  SYMCOMM_REQUIRE_ARG(result);
  SYMCOMM_REQUIRE(reinterpret_cast<uintptr_t>(word) % 8 == 0, symcommInvalidArgument,
                  "word %p is not 8-byte aligned", static_cast<void*>(word));
  if (c.space_kind == symcommSpaceCuda) {
    const std::string problem = c.space->device_access_problem(result);
    SYMCOMM_REQUIRE(problem.empty(), symcommInvalidArgument,
                    "result %p: the stream writes it, so it must be memory this rank's GPU "
                    "reaches: %s", static_cast<void*>(result), problem.c_str());
  }
  return static_cast<uint64_t*>(symmetric(c, word, 8, "word"));
}

// An atomic: the host space's completes in the call; the cuda space's on the stream.
void run_atomic(symcommComm& c, int pe, uint64_t* w, uint64_t operand, uint64_t desired,
                bool compare_swap, uint64_t* result, symcommStream_t stream) {
  Transport& t = transport(c, pe);
  if (c.space_kind == symcommSpaceCuda)
    return t.atomic_on_stream(pe, w, operand, desired, compare_swap, result, stream);
  *result = compare_swap ? t.compare_swap(pe, w, operand, desired) : t.fetch_add(pe, w, operand);
}

}  // namespace

extern "C" symcommResult_t symcommAtomicFetchAddOnStream(symcommComm_t comm, uint64_t* word,
                                                         uint64_t value, int pe,
                                                         uint64_t* result,
                                                         symcommStream_t stream) {
  return guarded([&] { return format("symcommAtomicFetchAddOnStream(word=%p, value=%llu, pe=%d)",
                                     static_cast<void*>(word),
                                     static_cast<unsigned long long>(value), pe); }, [&] {
    symcommComm& c = live(comm, stream);
    uint64_t* w = atomic_word(c, word, result);
    run_atomic(c, pe, w, value, 0, false, result, stream);
  });
}

extern "C" symcommResult_t symcommAtomicCompareSwapOnStream(symcommComm_t comm, uint64_t* word,
                                                            uint64_t expected, uint64_t desired,
                                                            int pe, uint64_t* result,
                                                            symcommStream_t stream) {
  return guarded([&] {
    return format("symcommAtomicCompareSwapOnStream(word=%p, expected=%llu, desired=%llu, pe=%d)",
                  static_cast<void*>(word), static_cast<unsigned long long>(expected),
                  static_cast<unsigned long long>(desired), pe); }, [&] {
    symcommComm& c = live(comm, stream);
    uint64_t* w = atomic_word(c, word, result);
    run_atomic(c, pe, w, expected, desired, true, result, stream);
  });
}

extern "C" symcommResult_t symcommBarrierOnStream(symcommComm_t comm, symcommTeam_t team,
                                                  symcommStream_t stream) {
  return guarded([&] { return format("symcommBarrierOnStream(team=%d)", team); }, [&] {
    symcommComm& c = live(comm, stream);
    BarrierArgs args = c.rma->barrier_args(team);
    SYMCOMM_REQUIRE(args.team.index_of(c.topology.rank) >= 0, symcommInvalidArgument,
                    "rank %d is not a member of team %d", c.topology.rank, team);
    for (int i = 0; i < args.team.size; ++i) transport(c, args.team.world_of(i));
    if (c.coll->check_calls())  // SYMCOMM_COLL_CHECK: in turn with the team's collectives
      check_barrier_agreement(team, args.team, args.team.index_of(c.topology.rank), *c.coll);
    c.rma->backend().barrier(args, stream);
  });
}

extern "C" symcommResult_t symcommGetDeviceComm(symcommComm_t comm, symcommTeam_t team,
                                                symcomm::DeviceComm* handle) {
  return guarded([&] { return format("symcommGetDeviceComm(team=%d)", team); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(handle);
    *handle = c.rma->device_comm(team);
  });
}
