// Collectives on a stream: argument checks, then the chosen algorithm (src/coll).
#include <algorithm>

#include "capi/guard.h"
#include "coll/selection.h"

using namespace symcomm;

namespace {

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

// Checks what every collective shares and runs it. `send_bytes`/`recv_bytes`: this rank's
// buffer sizes; `exact_in_place`: send == recv is allowed (other overlaps never are).
void run(symcommComm_t comm, CollOp op, symcommTeam_t team, const void* send, void* recv,
         size_t count, symcommDataType_t type, symcommRedOp_t redop, int root,
         const char* algorithm, symcommStream_t stream, size_t send_elems, size_t recv_elems,
         bool exact_in_place, const size_t* const* v = nullptr, bool counts_on_device = false) {
  symcommComm& c = checked(comm);
  c.check_live();
  check_stream(c, stream);
  CollArgs a{};
  a.op = op;
  a.team_id = team;
  a.team = c.rma->teams().get(team);
  a.me = a.team.index_of(c.topology.rank);
  SYMCOMM_REQUIRE(a.me >= 0, symcommInvalidArgument, "rank %d is not a member of team %d",
                  c.topology.rank, team);
  a.elem = type_size(type);
  SYMCOMM_REQUIRE(redop == symcommSum || redop == symcommMin || redop == symcommMax,
                  symcommInvalidArgument, "op %d is not a symcommRedOp_t", static_cast<int>(redop));
  SYMCOMM_REQUIRE(root >= 0 && root < a.team.size, symcommInvalidArgument,
                  "root %d is out of range [0, %d) of team %d", root, a.team.size, team);
  SYMCOMM_REQUIRE(count <= (SIZE_MAX / 2) / a.elem / static_cast<size_t>(a.team.size),
                  symcommInvalidArgument, "count %zu is too large", count);
  const size_t sb = send_elems * a.elem, rb = recv_elems * a.elem;
  const bool reads_send = op != CollOp::Broadcast || a.me == root;
  if (sb && reads_send) SYMCOMM_REQUIRE(send != nullptr, symcommInvalidArgument, "send is NULL");
  if (rb) SYMCOMM_REQUIRE(recv != nullptr, symcommInvalidArgument, "recv is NULL");
  if (reads_send && !(exact_in_place && send == recv))
    SYMCOMM_REQUIRE(!overlap(send, sb, recv, rb), symcommInvalidArgument,
                    "send [%p, +%zu) and recv [%p, +%zu) overlap%s", send, sb, recv, rb,
                    exact_in_place ? " (only send == recv is allowed)" : "");
  a.send = static_cast<const char*>(send);
  a.recv = static_cast<char*>(recv);
  a.count = count;
  a.type = type;
  a.redop = redop;
  a.root = root;
  a.stream = stream;
  a.symmetric = (!reads_send || sb == 0 || c.coll->addressable(send, sb)) &&
                (rb == 0 || c.coll->addressable(recv, rb));
  if (v) {  // all-to-all-v: send counts, send displacements, receive counts and displacements
    a.send_counts = v[0];
    a.send_displs = v[1];
    a.recv_counts = v[2];
    a.recv_displs = v[3];
    a.counts_on_device = counts_on_device;
  }
  choose_algorithm(a, *c.coll, algorithm).run(a, *c.coll);
}

std::string describe(const char* fn, symcommTeam_t team, size_t count, symcommDataType_t type,
                     const char* algorithm) {
  return format("%s(team=%d, count=%zu, type=%d, algorithm=%s)", fn, team, count,
                static_cast<int>(type), algorithm ? algorithm : "NULL");
}

}  // namespace

extern "C" symcommResult_t symcommAllGatherOnStream(symcommComm_t comm, symcommTeam_t team,
                                                    const void* send, void* recv, size_t count,
                                                    symcommDataType_t type, const char* algorithm,
                                                    symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllGatherOnStream", team, count, type, algorithm); },
                 [&] {
    int n = 0;
    SYMCOMM_REQUIRE(symcommTeamSize(comm, team, &n) == symcommSuccess && n > 0,
                    symcommInvalidArgument, "team %d does not exist", team);
    // In place: send is this rank's block of recv.
    bool in_place = recv && send == static_cast<char*>(recv) + count * type_size(type) *
                                       static_cast<size_t>(checked(comm).rma->teams().get(team)
                                                               .index_of(checked(comm).topology.rank));
    run(comm, CollOp::AllGather, team, send, recv, count, type, symcommSum, 0, algorithm, stream,
        in_place ? 0 : count, count * static_cast<size_t>(n), false);
  });
}

extern "C" symcommResult_t symcommAllToAllOnStream(symcommComm_t comm, symcommTeam_t team,
                                                   const void* send, void* recv, size_t count,
                                                   symcommDataType_t type, const char* algorithm,
                                                   symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllToAllOnStream", team, count, type, algorithm); },
                 [&] {
    int n = 0;
    SYMCOMM_REQUIRE(symcommTeamSize(comm, team, &n) == symcommSuccess && n > 0,
                    symcommInvalidArgument, "team %d does not exist", team);
    run(comm, CollOp::AllToAll, team, send, recv, count, type, symcommSum, 0, algorithm, stream,
        count * static_cast<size_t>(n), count * static_cast<size_t>(n), false);
  });
}

extern "C" symcommResult_t symcommAllToAllvOnStream(
    symcommComm_t comm, symcommTeam_t team, const void* send, const size_t* sendcounts,
    const size_t* sdispls, void* recv, const size_t* recvcounts, const size_t* rdispls,
    symcommDataType_t type, const char* algorithm, symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllToAllvOnStream", team, 0, type, algorithm); },
                 [&] {
    int n = 0;
    SYMCOMM_REQUIRE(symcommTeamSize(comm, team, &n) == symcommSuccess && n > 0,
                    symcommInvalidArgument, "team %d does not exist", team);
    SYMCOMM_REQUIRE_ARG(sendcounts);
    SYMCOMM_REQUIRE_ARG(sdispls);
    SYMCOMM_REQUIRE_ARG(recvcounts);
    SYMCOMM_REQUIRE_ARG(rdispls);
    // The extents the buffers must have, in elements (for the overlap check).
    size_t send_elems = 0, recv_elems = 0;
    for (int j = 0; j < n; ++j) {
      SYMCOMM_REQUIRE(sendcounts[j] <= SIZE_MAX / 4 && sdispls[j] <= SIZE_MAX / 4 &&
                      recvcounts[j] <= SIZE_MAX / 4 && rdispls[j] <= SIZE_MAX / 4,
                      symcommInvalidArgument, "count or displacement of member %d is too large", j);
      if (sendcounts[j]) send_elems = std::max(send_elems, sdispls[j] + sendcounts[j]);
      if (recvcounts[j]) recv_elems = std::max(recv_elems, rdispls[j] + recvcounts[j]);
    }
    const size_t* v[4] = {sendcounts, sdispls, recvcounts, rdispls};
    run(comm, CollOp::AllToAllv, team, send, recv, 0, type, symcommSum, 0, algorithm, stream,
        send_elems, recv_elems, false, v);
  });
}

extern "C" symcommResult_t symcommAllToAllvDeviceOnStream(
    symcommComm_t comm, symcommTeam_t team, const void* send, const size_t* sendcounts,
    const size_t* sdispls, void* recv, size_t recv_capacity, size_t* recvcounts, size_t* rdispls,
    symcommDataType_t type, const char* algorithm, symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllToAllvDeviceOnStream", team, recv_capacity,
                                       type, algorithm); }, [&] {
    SYMCOMM_REQUIRE_ARG(send);
    SYMCOMM_REQUIRE_ARG(sendcounts);
    SYMCOMM_REQUIRE_ARG(sdispls);
    SYMCOMM_REQUIRE_ARG(recvcounts);
    SYMCOMM_REQUIRE_ARG(rdispls);
    const size_t* v[4] = {sendcounts, sdispls, recvcounts, rdispls};
    // The extents are on the device: only recv's capacity is checked against send here.
    run(comm, CollOp::AllToAllv, team, send, recv, recv_capacity, type, symcommSum, 0, algorithm,
        stream, 0, recv_capacity, false, v, true);
  });
}

extern "C" symcommResult_t symcommReduceScatterOnStream(symcommComm_t comm, symcommTeam_t team,
                                                        const void* send, void* recv,
                                                        size_t recvcount, symcommDataType_t type,
                                                        symcommRedOp_t op, const char* algorithm,
                                                        symcommStream_t stream) {
  return guarded([&] { return describe("symcommReduceScatterOnStream", team, recvcount, type,
                                       algorithm); }, [&] {
    int n = 0;
    SYMCOMM_REQUIRE(symcommTeamSize(comm, team, &n) == symcommSuccess && n > 0,
                    symcommInvalidArgument, "team %d does not exist", team);
    run(comm, CollOp::ReduceScatter, team, send, recv, recvcount, type, op, 0, algorithm, stream,
        recvcount * static_cast<size_t>(n), recvcount, false);
  });
}

extern "C" symcommResult_t symcommAllReduceOnStream(symcommComm_t comm, symcommTeam_t team,
                                                    const void* send, void* recv, size_t count,
                                                    symcommDataType_t type, symcommRedOp_t op,
                                                    const char* algorithm,
                                                    symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllReduceOnStream", team, count, type, algorithm); },
                 [&] {
    run(comm, CollOp::AllReduce, team, send, recv, count, type, op, 0, algorithm, stream, count,
        count, true);
  });
}

extern "C" symcommResult_t symcommBroadcastOnStream(symcommComm_t comm, symcommTeam_t team,
                                                    const void* send, void* recv, size_t count,
                                                    symcommDataType_t type, int root,
                                                    const char* algorithm,
                                                    symcommStream_t stream) {
  return guarded([&] { return describe("symcommBroadcastOnStream", team, count, type, algorithm) +
                              format(" root=%d", root); }, [&] {
    run(comm, CollOp::Broadcast, team, send, recv, count, type, symcommSum, root, algorithm,
        stream, count, count, true);
  });
}

extern "C" int symcommCollAlgorithmCount(void) {
  return static_cast<int>(coll_algorithms().size());
}

extern "C" const char* symcommCollAlgorithmName(int index) {
  const auto& all = coll_algorithms();
  return index >= 0 && static_cast<size_t>(index) < all.size() ? all[static_cast<size_t>(index)]->name()
                                                                 : nullptr;
}

extern "C" const char* symcommCollSelectionTable(void) {
  static const std::string text = selection_text();
  return text.c_str();
}
