// Support for multi-process tests: each test binary runs as every rank under symrun, joins
// a "world" communicator from the environment in main(), and agrees with the other ranks on
// pass/fail at the end (mp_main.cc). Tests that need a communicator of their own make one
// with new_comm(), which passes a fresh unique id through the world.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "pattern.h"
#include "symcomm/symcomm.h"

namespace mp {

symcommComm_t world();
int rank();
int nranks();
// The memory space under test, from SYMCOMM_TEST_SPACE (host or cuda).
symcommMemorySpace_t space();
// Nodes of the world communicator (symrun --nodes names ranks of one machine apart).
int nodes();
// Ranks on this rank's node of the world communicator.
int local_size();
symcommConfig_t config();

// Collective over the world: a new communicator of all ranks with the test's space.
symcommComm_t new_comm();
// A unique id made by rank 0 and given to every rank.
symcommUniqueId shared_uid();
// Collective like new_comm: ranks of even and odd number claim two nodes (SYMCOMM_NODE_NAME,
// read when the communicator is made), so that no rank reaches one of the other parity by
// load/store. For the host space: GPUs of one machine stay reachable whatever the names say.
symcommComm_t new_two_node_comm();

// Finalizes a communicator that a test made when the scope ends, however the test leaves it
// (a skip, a failed ASSERT). A communicator left alive at exit sees the other ranks' exits as
// lost peers and aborts its NCCL communicators while the process exits (a crash in NCCL).
class FinalizeAtEnd {
 public:
  explicit FinalizeAtEnd(symcommComm_t comm) : comm_(comm) {}
  ~FinalizeAtEnd();
  FinalizeAtEnd(const FinalizeAtEnd&) = delete;
  FinalizeAtEnd& operator=(const FinalizeAtEnd&) = delete;

 private:
  symcommComm_t comm_;
};

// Sets an environment variable for the scope's life, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value);
  ~ScopedEnv();

 private:
  std::string name_;
  bool had_;
  std::string old_;
};

// The same value on every rank (rank 0's), for seeds and ports.
uint64_t agree(uint64_t value);
// The seed of a test's random choices, the same on every rank: SYMCOMM_TEST_SEED (which
// repeats a run that failed), else a fresh random one. Failures name it through seed_note.
uint64_t test_seed();
// "seed N (SYMCOMM_TEST_SEED=N repeats it)": for SCOPED_TRACE (a fixture holds a
// ::testing::ScopedTrace of it) and failure messages.
std::string seed_note(uint64_t seed);
// True on every rank iff `ok` on every rank.
bool all_ok(bool ok);

// pattern(who, what, index): the byte rank `who` writes at `index` of allocation `what`.

// Writes pattern(who, what, i) into [dst, dst + bytes), a symmetric address of any
// accessible peer, in the test's memory space (plain stores on the host, a kernel on GPUs).
void fill(void* dst, size_t bytes, int who, uint64_t what);
// Enqueues on `stream` (cuda space only; no wait) a kernel that first lets the next kernel on
// the stream launch (griddepcontrol.launch_dependents, as kernels written for programmatic
// dependent launch do), then spins for `delay_us` and only then copies `bytes` from src to
// dst (both this GPU's memory). A library kernel launched after it that did not wait for it
// (griddepcontrol.wait) would read what dst held before.
void copy_after_early_trigger(symcommStream_t stream, void* dst, const void* src, size_t bytes,
                              unsigned delay_us);
// Counts the bytes of [src, src + bytes) that differ from the pattern (loads through the
// same kind of address; on GPUs a kernel reads the peer's memory directly).
size_t count_mismatches(const void* src, size_t bytes, int who, uint64_t what);
// count_mismatches of rank `pe`'s copy of the symmetric range [sym, sym + bytes): through
// its pointer where pe is load/store accessible, else read with a get (a peer on another
// node, reached by the network transport).
size_t count_peer_mismatches(symcommComm_t comm, const void* sym, size_t bytes, int pe, int who,
                             uint64_t what);

// Memory and streams of the space under test, for the local (non-symmetric) side of RMA.
void* local_alloc(size_t bytes);  // malloc on the host, cudaMalloc on GPUs
void local_free(void* p);
symcommStream_t new_stream();     // NULL on the host
void free_stream(symcommStream_t s);
void sync(symcommStream_t s);     // waits for the stream (nothing on the host)
// Makes the calling thread's current GPU comm's (a new thread starts on GPU 0); nothing in
// the host space.
void use_device(symcommComm_t comm);
// Copies bytes of this process's memory in the space under test to the host, and back.
void copy_to_host(void* dst, const void* src, size_t bytes);
void copy_from_host(void* dst, const void* src, size_t bytes);
// The same in the order of `stream` and waiting for it only, not for the whole GPU (other
// threads' streams may hold kernels that wait for peers: see threads_test.cc).
void copy_to_host_on(symcommStream_t stream, void* dst, const void* src, size_t bytes);
void copy_from_host_on(symcommStream_t stream, void* dst, const void* src, size_t bytes);
// The same as byte vectors: `bytes` of p after everything on `stream` finished, and back.
std::vector<uint8_t> fetch(symcommStream_t stream, const void* p, size_t bytes);
void store(void* p, const std::vector<uint8_t>& v);
// Memory of the space to memory of the space, in `stream`'s order (memcpy on the host).
void copy_on(symcommStream_t stream, void* dst, const void* src, size_t bytes);
// CUDA graph capture of a stream (cuda space): 0 on success; the executable graph as void*.
int begin_capture(symcommStream_t s);
void* end_capture(symcommStream_t s);
int launch_graph(void* exec, symcommStream_t s);
void destroy_graph(void* exec);
// Reads / writes one 64-bit word of this process's memory in the space under test.
uint64_t read_u64(const void* p);
void write_u64(void* p, uint64_t v);

}  // namespace mp

// Fails the test and prints the last-error message unless `call` returns symcommSuccess.
#define SC_OK(call)                                                                       \
  do {                                                                                    \
    symcommResult_t sc_rc_ = (call);                                                      \
    ASSERT_EQ(sc_rc_, symcommSuccess) << #call << ": " << symcommGetLastError();          \
  } while (0)
// Expects `call` to fail with `code`.
#define SC_FAILS(call, code)                                                              \
  do {                                                                                    \
    symcommResult_t sc_rc_ = (call);                                                      \
    EXPECT_EQ(sc_rc_, code) << #call << " returned " << symcommGetErrorString(sc_rc_)     \
                            << ": " << symcommGetLastError();                             \
  } while (0)
// Expects `call` to fail with `code` and an error message that contains every one of the
// strings that follow.
#define SC_FAILS_SAYING(call, code, ...)                                                  \
  do {                                                                                    \
    SC_FAILS(call, code);                                                                 \
    const std::string said_ = symcommGetLastError();                                      \
    for (const std::string& part_ : std::initializer_list<std::string>{__VA_ARGS__})      \
      EXPECT_NE(said_.find(part_), std::string::npos) << "no \"" << part_ << "\" in " << said_; \
  } while (0)
