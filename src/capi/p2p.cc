// symcommSendOnStream, symcommRecvOnStream, symcommGroupStart, symcommGroupEnd (coll/p2p.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "capi/coll_batch.h"
#include "capi/guard.h"
#include "coll/p2p.h"

using namespace symcomm;

namespace {

// Checks a call and makes it: `buf` the send or receive buffer.
PointToPoint::Call make_call(symcommComm_t comm, bool send, symcommTeam_t team, const void* buf,
                             size_t count, symcommDataType_t type, int peer,
                             symcommStream_t stream) {
  symcommComm& c = checked(comm);
  c.check_live();
  check_stream(c, stream);
  c.p2p->raise_mismatch();
  const Team t = c.rma->teams().get(team);
  SYMCOMM_REQUIRE(t.index_of(c.topology.rank) >= 0, symcommInvalidArgument,
                  "rank %d is not a member of team %d", c.topology.rank, team);
  SYMCOMM_REQUIRE(peer >= 0 && peer < t.size, symcommInvalidArgument,
                  "peer %d is out of range [0, %d) of team %d", peer, t.size, team);
  const size_t elem = type_size(type);
  SYMCOMM_REQUIRE(count <= (SIZE_MAX / 2) / elem, symcommInvalidArgument, "count %zu is too large",
                  count);
  SYMCOMM_REQUIRE(count == 0 || buf != nullptr, symcommInvalidArgument, "%s is NULL",
                  send ? "send" : "recv");
  if (c.space_kind == symcommSpaceCuda && count > 0) {
    // The group's kernel reads and writes the buffer.
    const std::string problem = c.space->device_access_problem(buf);
    SYMCOMM_REQUIRE(problem.empty(), symcommInvalidArgument, "%s %p: %s", send ? "send" : "recv",
                    buf, problem.c_str());
  }
  const int world = t.world_of(peer);
  SYMCOMM_REQUIRE(c.rma->transports().connected(world), symcommNotSupported,
                  "rank %d is not reached by any transport: %s", world,
                  c.rma->transports().why_unconnected(world).c_str());
  PointToPoint::Call call{};
  call.owner = c.p2p.get();
  call.handle = comm;
  call.send = send;
  call.peer = world;
  call.team = team;
  call.send_buf = send ? static_cast<const char*>(buf) : nullptr;
  call.recv_buf = send ? nullptr : static_cast<char*>(const_cast<void*>(buf));
  call.bytes = count * elem;
  call.stream = stream;
  return call;
}

void queue_or_run(PointToPoint::Call call) {
  Group& g = this_threads_group();
  if (g.depth > 0) {
    g.calls.push_back(call);
    return;
  }
  std::vector<PointToPoint::Call> one{call};
  PointToPoint::run(one);
}

}  // namespace

extern "C" symcommResult_t symcommSendOnStream(symcommComm_t comm, symcommTeam_t team,
                                               const void* send, size_t count,
                                               symcommDataType_t type, int peer,
                                               symcommStream_t stream) {
  return guarded([&] { return format("symcommSendOnStream(team=%d, count=%zu, type=%d, peer=%d)",
                                     team, count, static_cast<int>(type), peer); },
                 [&] {
                   queue_or_run(make_call(comm, true, team, send, count, type, peer, stream));
                 });
}

extern "C" symcommResult_t symcommRecvOnStream(symcommComm_t comm, symcommTeam_t team, void* recv,
                                               size_t count, symcommDataType_t type, int peer,
                                               symcommStream_t stream) {
  return guarded([&] { return format("symcommRecvOnStream(team=%d, count=%zu, type=%d, peer=%d)",
                                     team, count, static_cast<int>(type), peer); },
                 [&] {
                   queue_or_run(make_call(comm, false, team, recv, count, type, peer, stream));
                 });
}

extern "C" symcommResult_t symcommGroupStart(void) {
  return guarded([] { return std::string("symcommGroupStart()"); }, [] {
    Group& g = this_threads_group();
    SYMCOMM_REQUIRE(g.depth < 1024, symcommInvalidUsage,
                    "1024 groups are open on this thread: symcommGroupEnd is missing");
    ++g.depth;
  });
}

extern "C" symcommResult_t symcommGroupEnd(void) {
  return guarded([] { return std::string("symcommGroupEnd()"); }, [] {
    Group& g = this_threads_group();
    SYMCOMM_REQUIRE(g.depth > 0, symcommInvalidUsage,
                    "no group is open on this thread (symcommGroupStart first)");
    if (--g.depth > 0) return;
    std::vector<PointToPoint::Call> calls = std::move(g.calls);
    std::vector<Group::Collective> collectives = std::move(g.collectives);
    g.calls.clear();
    g.collectives.clear();
    // A communicator finalized since its calls were queued: refused, none of them run.
    for (const PointToPoint::Call& call : calls)
      checked(static_cast<symcommComm_t>(const_cast<void*>(call.handle))).check_live();
    // The collectives first, in one order on every rank; each runs whatever the others did,
    // as its peers' do, and the first failure is reported once the sends and receives ran.
    std::stable_sort(collectives.begin(), collectives.end(),
                     [](const Group::Collective& a, const Group::Collective& b) {
                       return a.comm_id < b.comm_id;
                     });
    capi::pack_all_reduces(collectives);
    symcommResult_t failed = symcommSuccess;
    std::string why;
    for (Group::Collective& k : collectives) {
      const symcommResult_t rc = k.run();
      if (rc != symcommSuccess && failed == symcommSuccess) {
        failed = rc;
        why = symcommGetLastError();
      }
    }
    PointToPoint::run(calls);
    SYMCOMM_REQUIRE(failed == symcommSuccess, failed, "a collective of the group: %s",
                    why.c_str());
  });
}
