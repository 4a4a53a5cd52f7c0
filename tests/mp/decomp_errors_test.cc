// Calls the decomposition refuses: bad transpose and halo arguments (too small or freed
// workspaces, non-symmetric buffers), buffers the GPU cannot access, load/store backends on
// ranks of two nodes, and with SYMCOMM_DECOMP_CHECK=1 calls that differ between ranks.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decomp_fixture.h"
#include "transpose_check.h"

namespace decomp_test {

// Expects `call` to fail with `code` and a last-error message that holds every one of `parts`.
// Every failure below is this rank's own (nothing collective has begun), so each rank fails
// the same way.
TEST(Decomp, TransposeBadArguments) {
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  symcommPencilInfo_t x, y;
  SC_OK(symcommDecompPencilInfo(d, 0, nullptr, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, nullptr, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 8;
  void* in = mp::local_alloc(bytes);
  void* out = mp::local_alloc(bytes);
  size_t need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  void* ws = nullptr;
  SC_OK(symcommMalloc(mp::world(), need, &ws));
  symcommStream_t stream = mp::new_stream();
  // Poisoned: the input (so that a transpose that ran would move recognisable bytes), the
  // output and the workspace. No call below but the last may change the output or the
  // workspace.
  mp::fill(in, bytes, mp::rank(), 60);
  mp::fill(out, bytes, mp::rank(), 61);
  mp::fill(ws, need, mp::rank(), 62);
  auto transpose = [&](int from, int to, const void* i, void* o, void* w,
                       symcommDecompType_t type = symcommR64) {
    return symcommDecompTranspose(d, from, to, i, o, w, type, nullptr, nullptr, nullptr, nullptr,
                                  stream);
  };
  SC_FAILS_SAYING(transpose(0, 2, in, out, ws), symcommInvalidArgument, "X<->Y or Y<->Z");
  SC_FAILS_SAYING(transpose(0, 1, in, out, ws, static_cast<symcommDecompType_t>(9)),
                  symcommInvalidArgument, "type 9");
  SC_FAILS_SAYING(transpose(0, 1, nullptr, out, ws), symcommInvalidArgument, "input is NULL");
  SC_FAILS_SAYING(transpose(0, 1, in, nullptr, ws), symcommInvalidArgument, "output is NULL");
  SC_FAILS_SAYING(transpose(0, 1, in, out, nullptr), symcommInvalidArgument, "workspace is NULL",
                  std::to_string(need));
  SC_FAILS_SAYING(transpose(0, 1, in, out, in), symcommInvalidArgument,
                  "is not a symmetric buffer");
  const int64_t negative[3] = {-1, 0, 0};
  SC_FAILS(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, negative, nullptr, nullptr,
                                  nullptr, nullptr), symcommInvalidArgument);
  // A workspace too small for the call: the allocation it lies in is smaller (256 bytes, the
  // allocator's unit), or it starts too close to the allocation's end. Before the check
  // looked at the live allocations, both passed (the heap beyond is mapped) and the
  // transpose wrote over the next allocation.
  ASSERT_GT(need, 512u) << "the grid is too small for this test";
  void* small = nullptr;
  SC_OK(symcommMalloc(mp::world(), 256, &small));
  mp::fill(small, 256, mp::rank(), 63);
  SC_FAILS_SAYING(transpose(0, 1, in, out, small), symcommInvalidArgument, "too small", "256",
                  std::to_string(need));
  // The allocation holds the bytes asked for (`need`), not the allocator's rounding up.
  char* late = static_cast<char*>(ws) + 256;
  SC_FAILS_SAYING(transpose(0, 1, in, out, late), symcommInvalidArgument, "too small",
                  std::to_string(need - 256) + " bytes from it", std::to_string(need));
  // A symmetric output smaller than its pencil (the direct paths write into it from peers).
  SC_FAILS_SAYING(transpose(0, 1, in, small, ws), symcommInvalidArgument, "output",
                  std::to_string(static_cast<size_t>(y.size) * 8));
  // Nothing above was enqueued: once every rank is past its failed calls (and its stream
  // has drained), no output, workspace or input was written, here or by a peer.
  mp::sync(stream);
  SC_OK(symcommHostBarrier(mp::world()));
  EXPECT_EQ(mp::count_mismatches(in, bytes, mp::rank(), 60), 0u) << "input";
  EXPECT_EQ(mp::count_mismatches(out, bytes, mp::rank(), 61), 0u) << "output";
  EXPECT_EQ(mp::count_mismatches(ws, need, mp::rank(), 62), 0u) << "workspace";
  EXPECT_EQ(mp::count_mismatches(small, 256, mp::rank(), 63), 0u) << "the small allocation";
  SC_OK(symcommFree(mp::world(), small));
  // A freed workspace: still inside the mapped heap, in no live allocation.
  SC_FAILS_SAYING(transpose(0, 1, in, out, small), symcommInvalidArgument, "no live allocation");
  mp::sync(stream);
  SC_OK(symcommHostBarrier(mp::world()));
  EXPECT_EQ(mp::count_mismatches(out, bytes, mp::rank(), 61), 0u) << "output";
  EXPECT_EQ(mp::count_mismatches(ws, need, mp::rank(), 62), 0u) << "workspace";
  // The same call with good arguments works.
  SC_OK(transpose(0, 1, in, out, ws));
  mp::sync(stream);
  mp::free_stream(stream);
  size_t bytes_out = 0;
  SC_FAILS(symcommDecompWorkspaceSize(d, static_cast<symcommDecompType_t>(9), &bytes_out),
           symcommInvalidArgument);
  SC_OK(symcommFree(mp::world(), ws));
  mp::local_free(out);
  mp::local_free(in);
  SC_OK(symcommDecompDestroy(d));
}

TEST(Decomp, HaloBadArguments) {
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const int64_t halo[3] = {1, 1, 1};
  const int periodic[3] = {1, 1, 1};
  symcommPencilInfo_t p;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &p));
  void* buf = mp::local_alloc(static_cast<size_t>(p.size) * 8);
  size_t need = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &need));
  void* ws = nullptr;
  ASSERT_GT(need, 256u) << "the grid is too small for this test";
  SC_OK(symcommMalloc(mp::world(), need, &ws));
  symcommStream_t stream = mp::new_stream();
  auto exchange_with = [&](int axis, int dim, void* b, void* w, symcommDecompType_t type,
                           const int64_t* h) {
    return symcommDecompHalo(d, axis, dim, b, w, type, h, nullptr, periodic, stream);
  };
  auto exchange = [&](int axis, int dim, void* b, void* w) {
    return exchange_with(axis, dim, b, w, symcommR64, halo);
  };
  SC_FAILS_SAYING(exchange(3, 1, buf, ws), symcommInvalidArgument, "axis 3");
  SC_FAILS_SAYING(exchange(-1, 1, buf, ws), symcommInvalidArgument, "axis -1");
  SC_FAILS_SAYING(exchange(0, 3, buf, ws), symcommInvalidArgument, "dim 3");
  SC_FAILS_SAYING(exchange(0, -1, buf, ws), symcommInvalidArgument, "dim -1");
  SC_FAILS_SAYING(exchange_with(0, 1, buf, ws, static_cast<symcommDecompType_t>(7), halo),
                  symcommInvalidArgument, "type 7");
  SC_FAILS_SAYING(exchange(0, 1, nullptr, ws), symcommInvalidArgument, "buffer is NULL");
  SC_FAILS_SAYING(exchange(0, 1, buf, nullptr), symcommInvalidArgument, "workspace is NULL");
  SC_FAILS_SAYING(exchange(0, 1, buf, buf), symcommInvalidArgument, "not a symmetric buffer");
  SC_FAILS_SAYING(exchange(0, 1, buf, static_cast<char*>(ws) + 256), symcommInvalidArgument,
                  "too small", std::to_string(need));
  const int64_t huge[3] = {0, 0, 100};
  size_t bytes = 0;
  SC_FAILS_SAYING(symcommDecompHaloWorkspaceSize(d, 0, 2, symcommR64, huge, nullptr, &bytes),
                  symcommInvalidArgument, "larger than");
  SC_FAILS(exchange_with(0, 2, buf, ws, symcommR64, huge), symcommInvalidArgument);
  // No halo along the dimension: nothing to do, nothing checked.
  const int64_t none[3] = {0, 0, 0};
  SC_OK(exchange_with(0, 1, nullptr, nullptr, symcommR64, none));
  SC_OK(exchange(0, 1, buf, ws));
  mp::sync(stream);
  mp::free_stream(stream);
  SC_OK(symcommFree(mp::world(), ws));
  mp::local_free(buf);
  SC_OK(symcommDecompDestroy(d));
}

// Buffers the kernels cannot use whole: misaligned data or workspace, data that overlaps
// the workspace, a padding whose size overflows. Each used to be accepted: the overflow
// crashed the process in the copies, the overlap gave wrong values (fused), a misaligned
// buffer faults on a GPU.
TEST(Decomp, RefusesMisalignedOverlappingAndOverflowingBuffers) {
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  symcommPencilInfo_t x, y;
  SC_OK(symcommDecompPencilInfo(d, 0, nullptr, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, nullptr, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 16;
  size_t need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommC64, &need));
  char* in = static_cast<char*>(mp::local_alloc(bytes + 16));
  char* out = static_cast<char*>(mp::local_alloc(bytes + 16));
  // One symmetric allocation that holds a workspace and an output, apart or overlapping.
  void* both_raw = nullptr;
  const size_t whole = static_cast<size_t>(c.gdims[0] * c.gdims[1] * c.gdims[2]) * 16;
  SC_OK(symcommMalloc(mp::world(), need + whole + 256, &both_raw));  // same size everywhere
  char* both = static_cast<char*>(both_raw);
  symcommStream_t stream = mp::new_stream();
  auto transpose = [&](const void* i, void* o, void* w, const int64_t* out_padding = nullptr) {
    return symcommDecompTranspose(d, 0, 1, i, o, w, symcommC64, nullptr, nullptr, nullptr,
                                  out_padding, stream);
  };
  SC_FAILS_SAYING(transpose(in + 8, out, both), symcommInvalidArgument, "input",
                  "not aligned to 16");
  SC_FAILS_SAYING(transpose(in, out + 4, both), symcommInvalidArgument, "output",
                  "not aligned to 16");
  SC_FAILS_SAYING(transpose(in, out, both + 8), symcommInvalidArgument, "workspace",
                  "not aligned to 16");
  SC_FAILS_SAYING(transpose(in, both, both), symcommInvalidArgument, "output",
                  "overlaps the workspace");
  SC_FAILS_SAYING(transpose(both + need - 16, out, both), symcommInvalidArgument, "input",
                  "overlaps the workspace");
  const int64_t wraps[3] = {int64_t{1} << 59, 0, 0};
  SC_FAILS_SAYING(transpose(in, out, both, wraps), symcommInvalidArgument, "out_padding",
                  "overflow");
  const int64_t negative[3] = {0, -1, 0};
  SC_FAILS_SAYING(transpose(in, out, both, negative), symcommInvalidArgument,
                  "out_padding[1] is -1");
  // Apart, aligned: it runs (output right after the workspace, in the same allocation).
  const size_t after = (need + 255) / 256 * 256;
  SC_OK(transpose(in, both + after, both));
  mp::sync(stream);

  const int64_t halo[3] = {1, 1, 1};
  const int periodic[3] = {1, 1, 1};
  size_t halo_need = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommC64, halo, nullptr, &halo_need));
  void* hws = nullptr;
  SC_OK(symcommMalloc(mp::world(), halo_need + whole * 2, &hws));  // room for a buffer too
  symcommPencilInfo_t hx;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &hx));
  char* hbuf = static_cast<char*>(mp::local_alloc(static_cast<size_t>(hx.size) * 16 + 16));
  auto exchange = [&](void* b, void* w) {
    return symcommDecompHalo(d, 0, 1, b, w, symcommC64, halo, nullptr, periodic, stream);
  };
  SC_FAILS_SAYING(exchange(hbuf + 8, hws), symcommInvalidArgument, "buffer", "not aligned");
  SC_FAILS_SAYING(exchange(hws, hws), symcommInvalidArgument, "buffer", "overlaps the workspace");
  SC_OK(exchange(hbuf, hws));
  mp::sync(stream);
  mp::free_stream(stream);
  mp::local_free(hbuf);
  SC_OK(symcommFree(mp::world(), hws));
  SC_OK(symcommFree(mp::world(), both_raw));
  mp::local_free(out);
  mp::local_free(in);
  SC_OK(symcommDecompDestroy(d));
}

// In the cuda space a buffer the GPU cannot access (pageable host memory) is refused before
// anything is enqueued, where the copy kernels would fault and the copy engines would stage
// through the host.
TEST(Decomp, RefusesBuffersTheGpuCannotAccess) {
  if (mp::space() != symcommSpaceCuda)
    GTEST_SKIP() << "the host space has only host memory, which it accepts";
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  symcommPencilInfo_t x, y;
  const int64_t halo[3] = {1, 1, 1};
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, halo, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 8;
  std::vector<double> pageable(bytes / 8, 1.0);
  void* in = mp::local_alloc(bytes);
  void* out = mp::local_alloc(bytes);
  size_t need = 0, halo_need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 1, symcommR64, halo, nullptr, &halo_need));
  void* ws = nullptr;
  SC_OK(symcommMalloc(mp::world(), std::max(need, halo_need), &ws));
  symcommStream_t stream = mp::new_stream();
  const int periodic[3] = {1, 1, 1};
  SC_FAILS_SAYING(symcommDecompTranspose(d, 0, 1, pageable.data(), out, ws, symcommR64, halo,
                                         nullptr, halo, nullptr, stream),
                  symcommInvalidArgument, "input", "pageable host memory");
  SC_FAILS_SAYING(symcommDecompTranspose(d, 0, 1, in, pageable.data(), ws, symcommR64, halo,
                                         nullptr, halo, nullptr, stream),
                  symcommInvalidArgument, "output", "pageable host memory");
  SC_FAILS_SAYING(symcommDecompHalo(d, 0, 1, pageable.data(), ws, symcommR64, halo, nullptr,
                                    periodic, stream),
                  symcommInvalidArgument, "buffer", "pageable host memory");
  // Device memory passes.
  SC_OK(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, halo, nullptr, halo, nullptr,
                               stream));
  SC_OK(symcommDecompHalo(d, 0, 1, in, ws, symcommR64, halo, nullptr, periodic, stream));
  mp::sync(stream);
  mp::free_stream(stream);
  SC_OK(symcommFree(mp::world(), ws));
  mp::local_free(out);
  mp::local_free(in);
  SC_OK(symcommDecompDestroy(d));
}

// SYMCOMM_DECOMP_CHECK=1: every rank's call is compared (a host allgather per call). One
// rank passing a local buffer where the others pass a symmetric one, another symmetric
// object, other halos, or arguments it refuses itself: every rank fails with the same
// message, and nothing is enqueued. Without the check such calls run with the ranks
// disagreeing on the direct paths.
// Across nodes: ranks of even and odd number claim two nodes (host space: node names are
// faked there only). Every backend that loads and stores every rank's heap, asked for by
// name, refuses with the first need of its descriptor that the communicator lacks, naming
// the rank on the other node; the automatic choice takes a backend that needs no load/store
// reach (through the transports), and its transposes move the data.
TEST(Decomp, AcrossNodesLoadStoreBackendsSayWhy) {
  if (mp::space() == symcommSpaceCuda) GTEST_SKIP() << "node names are faked in the host space only";
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two nodes";
  symcommComm_t comm = mp::new_two_node_comm();
  ASSERT_NE(comm, nullptr);
  symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(comm, &c, &d));
  const char* chosen = nullptr;
  SC_OK(symcommDecompGetBackend(d, &chosen));
  const symcommDecompBackendInfo_t info = backend_info(chosen);
  EXPECT_FALSE(info.load_store_peers) << chosen;
  EXPECT_FALSE(info.nccl) << chosen;
  mp::expect_transposes_work(comm, d, c.gdims);
  SC_OK(symcommDecompDestroy(d));
  for (const std::string& b : backend_names()) {
    const symcommDecompBackendInfo_t need = backend_info(b);
    if (!need.load_store_peers && (need.spaces & (1u << symcommSpaceHost))) continue;  // runs
    std::snprintf(c.backend, sizeof c.backend, "%s", b.c_str());
    SC_FAILS(symcommDecompCreate(comm, &c, &d), symcommNotSupported);
    EXPECT_EQ(d, nullptr);
    const std::string why = symcommGetLastError();
    EXPECT_NE(why.find("no decomposition backend named " + b + " can run on this communicator: "),
              std::string::npos) << why;
    if (!(need.spaces & (1u << symcommSpaceHost))) {
      EXPECT_NE(why.find("this communicator's is the host memory space"), std::string::npos)
          << b << ": " << why;
    } else {
      EXPECT_NE(why.find("it loads and stores every rank's heap: rank "), std::string::npos) << why;
      EXPECT_NE(why.find("is on node"), std::string::npos) << b << ": " << why;
    }
  }
  EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
}

// Without SYMCOMM_DECOMP_CHECK in the environment, the check is on in the host space: a
// transpose whose halo differs on the last rank fails every rank, naming the argument.
TEST(Decomp, CheckIsOnByDefaultInTheHostSpace) {
  if (mp::space() != symcommSpaceHost) GTEST_SKIP() << "off by default in the cuda space";
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two ranks";
  mp::ScopedEnv unset("SYMCOMM_DECOMP_CHECK", "auto");  // the default, whatever the caller set
  symcommDecompConfig_t c = config_2d(8);
  std::snprintf(c.backend, sizeof c.backend, "%s", reaching_or_automatic("copy").c_str());
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const int64_t halo[3] = {1, 1, 1}, other[3] = {1, 0, 1};
  const bool last = mp::rank() == mp::nranks() - 1;
  symcommPencilInfo_t x, y;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, nullptr, nullptr, &y));
  size_t need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  void* ws = alloc_buffer(Buffers::Symmetric, need);
  void* in = mp::local_alloc(static_cast<size_t>(x.size) * 8);
  void* out = mp::local_alloc(static_cast<size_t>(y.size) * 8);
  SC_FAILS_SAYING(symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, last ? other : halo,
                                         nullptr, nullptr, nullptr, nullptr),
                  symcommInvalidUsage, "SYMCOMM_DECOMP_CHECK", "in_halo[1]");
  mp::local_free(in);
  mp::local_free(out);
  free_buffer(Buffers::Symmetric, ws);
  SC_OK(symcommDecompDestroy(d));
}

TEST(Decomp, CheckFindsCallsThatDifferBetweenRanks) {
  mp::ScopedEnv check("SYMCOMM_DECOMP_CHECK", "1");
  symcommDecompConfig_t c = config_2d(8);
  // copy runs in both spaces; across nodes, the automatic choice.
  std::snprintf(c.backend, sizeof c.backend, "%s", reaching_or_automatic("copy").c_str());
  symcommDecomp_t d;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  const int64_t halo[3] = {1, 1, 1};
  const int periodic[3] = {1, 1, 1};
  symcommPencilInfo_t x, y;
  SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &x));
  SC_OK(symcommDecompPencilInfo(d, 1, halo, nullptr, &y));
  const size_t bytes = static_cast<size_t>(std::max(x.size, y.size)) * 8;
  size_t need = 0, halo_need = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &need));
  SC_OK(symcommDecompHaloWorkspaceSize(d, 1, 0, symcommR64, halo, nullptr, &halo_need));
  void* ws = alloc_buffer(Buffers::Symmetric, std::max(need, halo_need));
  void* sym[2] = {alloc_buffer(Buffers::Symmetric, bytes), alloc_buffer(Buffers::Symmetric, bytes)};
  void* local = mp::local_alloc(bytes);
  const bool odd = mp::rank() == mp::nranks() - 1;  // the rank that differs
  const std::string who = std::to_string(mp::nranks() - 1);
  symcommStream_t stream = mp::new_stream();
  auto transpose = [&](const void* in, void* out, const int64_t* in_halo) {
    return symcommDecompTranspose(d, 0, 1, in, out, ws, symcommR64, in_halo, nullptr, halo,
                                  nullptr, stream);
  };
  // Every buffer the failing calls name, poisoned: none of them may change.
  void* const named[4] = {sym[0], sym[1], local, ws};
  const size_t named_bytes[4] = {bytes, bytes, bytes, std::max(need, halo_need)};
  for (int k = 0; k < 4; ++k) mp::fill(named[k], named_bytes[k], mp::rank(), 70 + k);
  SC_FAILS_SAYING(transpose(odd ? local : sym[0], sym[1], halo), symcommInvalidUsage,
                  "the input is symmetric on rank 0 and not on rank " + who,
                  "on every rank or on none");
  SC_FAILS_SAYING(transpose(sym[0], odd ? sym[0] : sym[1], halo), symcommInvalidUsage,
                  "the symmetric output is at heap offset", "on rank " + who,
                  "the same object on every rank");
  const int64_t other[3] = {1, 0, 1};
  SC_FAILS_SAYING(transpose(sym[0], sym[1], odd ? other : halo), symcommInvalidUsage,
                  "rank " + who + " passes other arguments",
                  "in_halo[1] is 0 on rank " + who + " and 1 on rank 0");
  if (odd)
    SC_FAILS_SAYING(transpose(nullptr, sym[1], halo), symcommInvalidArgument, "input is NULL");
  else
    SC_FAILS_SAYING(transpose(sym[0], sym[1], halo), symcommInvalidUsage,
                    "rank " + who + " refused its arguments");
  SC_FAILS_SAYING(symcommDecompHalo(d, 1, 0, odd ? local : sym[0], ws, symcommR64, halo, nullptr,
                                    periodic, stream),
                  symcommInvalidUsage, "the buffer is symmetric on rank 0 and not on rank " + who);
  // Nothing was enqueued: once every rank is past its failed calls and its stream drained,
  // every buffer still holds its poison, here and on every peer.
  mp::sync(stream);
  SC_OK(symcommHostBarrier(mp::world()));
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(mp::count_mismatches(named[k], named_bytes[k], mp::rank(), 70 + k), 0u)
        << (k == 0 ? "sym[0]" : k == 1 ? "sym[1]" : k == 2 ? "the local buffer" : "the workspace")
        << " was written by a call that failed";
  // Calls that keep the contract pass, symmetric and local alike, and move the data. The
  // reference, over the whole buffer: every owned point holds its global index; the halo
  // points along x (the exchange's dim 0, periodic) whose y and z are owned hold the index
  // of the point they mirror (x wrapped around); every other halo point (along y or z, the
  // corners too: no exchange along those dims, and the transposes neither read nor write
  // halos) and everything past the pencil keep the -1 stored before.
  const std::vector<double> start = fill_pencil(x, c.gdims);
  std::vector<double> want(bytes / 8, -1.0);
  for (int64_t zz = y.lo[2]; zz < y.hi[2]; ++zz)
    for (int64_t yy = y.lo[1]; yy < y.hi[1]; ++yy)
      for (int64_t xx = y.lo[0] - halo[0]; xx < y.hi[0] + halo[0]; ++xx) {
        const int64_t wrapped = (xx + c.gdims[0]) % c.gdims[0];
        want[static_cast<size_t>(symcommPencilIndex(&y, xx, yy, zz))] =
            static_cast<double>((zz * c.gdims[1] + yy) * c.gdims[0] + wrapped);
      }
  for (void* in : {sym[0], local}) {
    SCOPED_TRACE(in == local ? "local" : "symmetric");
    SC_OK(symcommHostBarrier(mp::world()));  // every peer is done with the last round's sym[1]
    store_values(in, start, symcommR64);
    store_values(sym[1], std::vector<double>(bytes / 8, -1.0), symcommR64);
    SC_OK(transpose(in, sym[1], halo));
    SC_OK(symcommDecompHalo(d, 1, 0, sym[1], ws, symcommR64, halo, nullptr, periodic, stream));
    mp::sync(stream);
    const std::vector<double> got = load_values(sym[1], want.size(), symcommR64);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i] && bad++ < 5)
        ADD_FAILURE() << "element " << i << " holds " << got[i] << ", expected " << want[i];
    EXPECT_EQ(bad, 0u);
  }
  SC_OK(symcommHostBarrier(mp::world()));
  mp::free_stream(stream);
  mp::local_free(local);
  free_buffer(Buffers::Symmetric, sym[1]);
  free_buffer(Buffers::Symmetric, sym[0]);
  free_buffer(Buffers::Symmetric, ws);
  SC_OK(symcommDecompDestroy(d));
}

}  // namespace decomp_test
