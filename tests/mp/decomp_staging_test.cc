// The staging rule across nodes (docs/decomp.md, "Across nodes"): a block that is one
// contiguous run of the caller's buffer goes to a peer's transport straight from that
// buffer only where the transport takes the buffer as it is. Peers of the node (load/store)
// take any buffer; the network takes the symmetric heap only, so a local buffer's blocks to
// peers on other nodes are staged through the workspace. symcommDecompGetTraffic says which
// path every byte took; the data is checked too.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "decomp_fixture.h"
#include "transpose_check.h"

namespace decomp_test {

namespace {

// What moved between two readings of symcommDecompGetTraffic.
symcommDecompTraffic_t since(const symcommDecompTraffic_t& before, const symcommDecompTraffic_t& now) {
  return {now.load_store_from_buffer - before.load_store_from_buffer,
          now.load_store_from_workspace - before.load_store_from_workspace,
          now.network_from_buffer - before.network_from_buffer,
          now.network_from_workspace - before.network_from_workspace};
}

// Whether rank `pe` of `comm` is reached by a transport other than load/store.
bool by_network(symcommComm_t comm, int pe) {
  const char* name = nullptr;
  EXPECT_EQ(symcommPeerTransport(comm, pe, &name), symcommSuccess) << symcommGetLastError();
  return name && std::strcmp(name, "lsa") != 0;
}

// `bytes` of either kind on `comm` (symmetric: collective, the largest size of any rank).
void* alloc_on(symcommComm_t comm, Buffers kind, size_t bytes) {
  if (kind == Buffers::Local) return mp::local_alloc(bytes);
  std::vector<size_t> all(static_cast<size_t>(mp::nranks()));
  EXPECT_EQ(symcommHostAllgather(comm, &bytes, all.data(), sizeof bytes), symcommSuccess);
  void* p = nullptr;
  EXPECT_EQ(symcommMalloc(comm, std::max<size_t>(8, *std::max_element(all.begin(), all.end())), &p),
            symcommSuccess) << symcommGetLastError();
  return p;
}

void free_on(symcommComm_t comm, Buffers kind, void* p) {
  if (kind == Buffers::Local) mp::local_free(p);
  else EXPECT_EQ(symcommFree(comm, p), symcommSuccess) << symcommGetLastError();
}

// The counts of one exchange from a buffer of `kind`, where the blocks for peers reached by
// load/store come to `load_store_bytes` and those for peers over the network to
// `network_bytes` (0: this rank has none), every block one contiguous run of the buffer:
// only a symmetric buffer goes to the network as it is; the node's peers take either.
void expect_paths(const symcommDecompTraffic_t& moved, Buffers kind, bool load_store_peers,
                  bool network_peers) {
  EXPECT_EQ(moved.load_store_from_workspace, 0u) << "a contiguous block was packed";
  EXPECT_EQ(moved.load_store_from_buffer > 0, load_store_peers);
  if (kind == Buffers::Symmetric) {
    EXPECT_EQ(moved.network_from_workspace, 0u) << "a symmetric block was staged";
    EXPECT_EQ(moved.network_from_buffer > 0, network_peers);
  } else {
    EXPECT_EQ(moved.network_from_buffer, 0u) << "the network was handed a local buffer";
    EXPECT_EQ(moved.network_from_workspace > 0, network_peers);
  }
}

}  // namespace

// On a 1 x N grid spanning nodes (the world where symrun made nodes, else ranks of even and
// odd number claiming two, host space), with the automatic choice (a backend through the
// transports): a Z -> Y transpose (every block a contiguous run of the x-fastest Z pencil)
// and a halo exchange along z (whose slabs are contiguous runs) from local and from symmetric
// buffers. A local buffer's blocks reach the node's peers from the buffer and the other
// nodes' through the workspace; a symmetric buffer's reach every peer from the buffer. The
// same blocks each time: a symmetric run sends to the network what a local run staged.
TEST(DecompStaging, TheNetworkTakesOnlyTheHeapAsItIs) {
  if (mp::nranks() < 2) GTEST_SKIP() << "needs two nodes";
  const bool own = mp::nodes() == 1;
  if (own && mp::space() != symcommSpaceHost)
    GTEST_SKIP() << "node names are faked in the host space only";
  if (!own && !every_rank_has_transport())
    GTEST_SKIP() << "some rank of another node has no transport in this memory space";
  symcommComm_t comm = own ? mp::new_two_node_comm() : mp::world();
  ASSERT_NE(comm, nullptr);
  const int n = mp::nranks(), me = mp::rank();
  std::vector<bool> network(static_cast<size_t>(n));
  for (int pe = 0; pe < n; ++pe) network[static_cast<size_t>(pe)] = by_network(comm, pe);
  symcommDecompConfig_t c;
  symcommDecompConfigInit(&c);
  c.gdims[0] = 5;
  c.gdims[1] = n + 3;
  c.gdims[2] = 2 * n + 1;
  c.pdims[0] = 1;
  c.pdims[1] = n;
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(comm, &c, &d));
  const char* chosen = nullptr;
  SC_OK(symcommDecompGetBackend(d, &chosen));
  EXPECT_FALSE(backend_info(chosen).load_store_peers) << chosen;
  symcommPencilInfo_t y, z;
  SC_OK(symcommDecompPencilInfo(d, 1, nullptr, nullptr, &y));
  SC_OK(symcommDecompPencilInfo(d, 2, nullptr, nullptr, &z));
  size_t ws_bytes = 0;
  SC_OK(symcommDecompWorkspaceSize(d, symcommR64, &ws_bytes));
  const int64_t halo[3] = {0, 0, 1};
  const int periodic[3] = {1, 1, 1};
  size_t halo_ws = 0;
  SC_OK(symcommDecompHaloWorkspaceSize(d, 0, 2, symcommR64, halo, nullptr, &halo_ws));
  void* ws = alloc_on(comm, Buffers::Symmetric, std::max(ws_bytes, halo_ws));
  symcommStream_t stream = mp::new_stream();
  // The transpose's members are every rank; the halo exchange's the neighbours along z.
  bool ls_members = false, net_members = false;
  for (int pe = 0; pe < n; ++pe)
    if (pe != me) (network[static_cast<size_t>(pe)] ? net_members : ls_members) = true;
  bool ls_neighbours = false, net_neighbours = false;
  for (int pe : {(me + 1) % n, (me + n - 1) % n})
    (network[static_cast<size_t>(pe)] ? net_neighbours : ls_neighbours) = true;
  uint64_t staged[2] = {0, 0};  // what the local runs staged: the transpose's, the halo's
  for (Buffers kind : {Buffers::Local, Buffers::Symmetric}) {
    const bool local = kind == Buffers::Local;
    SCOPED_TRACE(local ? "local buffers" : "symmetric buffers");
    // Z -> Y.
    void* in = alloc_on(comm, kind, static_cast<size_t>(z.size) * 8);
    void* out = alloc_on(comm, kind, static_cast<size_t>(y.size) * 8);
    store_values(in, fill_pencil(z, c.gdims), symcommR64);
    store_values(out, std::vector<double>(static_cast<size_t>(y.size), -1.0), symcommR64);
    symcommDecompTraffic_t before, after;
    SC_OK(symcommDecompGetTraffic(d, &before));
    SC_OK(symcommDecompTranspose(d, 2, 1, in, out, ws, symcommR64, nullptr, nullptr, nullptr,
                                 nullptr, stream));
    mp::sync(stream);
    SC_OK(symcommDecompGetTraffic(d, &after));
    EXPECT_EQ(load_values(out, static_cast<size_t>(y.size), symcommR64), fill_pencil(y, c.gdims));
    symcommDecompTraffic_t moved = since(before, after);
    expect_paths(moved, kind, ls_members, net_members);
    if (local) {
      staged[0] = moved.network_from_workspace;
    } else {
      EXPECT_EQ(moved.network_from_buffer, staged[0]) << "other blocks went to the network";
    }
    SC_OK(symcommHostBarrier(comm));  // every peer has read this rank's symmetric input
    free_on(comm, kind, out);
    free_on(comm, kind, in);
    // A periodic halo exchange of the X pencil along z.
    symcommPencilInfo_t x;
    SC_OK(symcommDecompPencilInfo(d, 0, halo, nullptr, &x));
    void* buf = alloc_on(comm, kind, static_cast<size_t>(x.size) * 8);
    store_values(buf, fill_pencil(x, c.gdims), symcommR64);
    SC_OK(symcommDecompGetTraffic(d, &before));
    SC_OK(symcommDecompHalo(d, 0, 2, buf, ws, symcommR64, halo, nullptr, periodic, stream));
    mp::sync(stream);
    SC_OK(symcommDecompGetTraffic(d, &after));
    const std::vector<double> got = load_values(buf, static_cast<size_t>(x.size), symcommR64);
    size_t bad = 0;
    for (int64_t zz : {x.lo[2] - 1, x.hi[2]})
      for (int64_t yy = x.lo[1]; yy < x.hi[1]; ++yy)
        for (int64_t xx = x.lo[0]; xx < x.hi[0]; ++xx) {
          const int64_t wrapped = (zz + c.gdims[2]) % c.gdims[2];
          bad += got[static_cast<size_t>(symcommPencilIndex(&x, xx, yy, zz))] !=
                 static_cast<double>((wrapped * c.gdims[1] + yy) * c.gdims[0] + xx);
        }
    EXPECT_EQ(bad, 0u) << "z halo points wrong";
    moved = since(before, after);
    expect_paths(moved, kind, ls_neighbours, net_neighbours);
    if (local) {
      staged[1] = moved.network_from_workspace;
    } else {
      EXPECT_EQ(moved.network_from_buffer, staged[1]) << "other slabs went to the network";
    }
    SC_OK(symcommHostBarrier(comm));
    free_on(comm, kind, buf);
  }
  mp::free_stream(stream);
  free_on(comm, Buffers::Symmetric, ws);
  SC_OK(symcommDecompDestroy(d));
  if (own) {
    EXPECT_EQ(symcommFinalize(comm), symcommSuccess) << symcommGetLastError();
  }
}

// The query's own checks. A new decomposition has moved nothing; after transposes, a backend
// that needs load/store peers (which does not send through the transports) still counts
// nothing, and one that sends through them counts what it sent.
TEST(DecompStaging, TrafficQuery) {
  symcommDecompTraffic_t t;
  SC_FAILS(symcommDecompGetTraffic(nullptr, &t), symcommInvalidArgument);
  const symcommDecompConfig_t c = config_2d(8);
  symcommDecomp_t d = nullptr;
  SC_OK(symcommDecompCreate(mp::world(), &c, &d));
  SC_FAILS(symcommDecompGetTraffic(d, nullptr), symcommInvalidArgument);
  auto total = [&] {
    EXPECT_EQ(symcommDecompGetTraffic(d, &t), symcommSuccess) << symcommGetLastError();
    return t.load_store_from_buffer + t.load_store_from_workspace + t.network_from_buffer +
           t.network_from_workspace;
  };
  EXPECT_EQ(total(), 0u);
  mp::expect_transposes_work(mp::world(), d, c.gdims);
  const char* chosen = nullptr;
  SC_OK(symcommDecompGetBackend(d, &chosen));
  if (backend_info(chosen).load_store_peers) {
    EXPECT_EQ(total(), 0u) << chosen;
  } else {
    EXPECT_GT(total(), 0u) << chosen;
  }
  SC_OK(symcommDecompDestroy(d));
}

}  // namespace decomp_test
