// Collectives on a stream: argument checks, then the chosen algorithm (src/coll).
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/cuda_runtime_check.h"
#include "capi/call_buffer.h"
#include "capi/coll_args.h"
#include "capi/guard.h"
#include "coll/agreement.h"
#include "coll/p2p.h"
#include "coll/selection.h"

using namespace symcomm;

namespace symcomm::capi {

size_t max_elems(size_t elem) { return (SIZE_MAX / 2) / elem; }

void require_reach(symcommComm& c, const void* p, size_t bytes, const char* what) {
  if (c.heap->contains(p)) return c.heap->require_in_allocation(p, bytes, what);
  const std::string problem = c.space->device_access_problem(p);
  SYMCOMM_REQUIRE(problem.empty(), symcommInvalidArgument, "%s: %s", what, problem.c_str());
}

CollArgs base_args(symcommComm& c, CollOp op, symcommTeam_t team, size_t count,
                   symcommDataType_t type, symcommRedOp_t redop, int root,
                   symcommStream_t stream) {
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
  SYMCOMM_REQUIRE(redop >= 0 && redop < symcommNumRedOps, symcommInvalidArgument,
                  "op %d is not a symcommRedOp_t", static_cast<int>(redop));
  SYMCOMM_REQUIRE(root >= 0 && root < a.team.size, symcommInvalidArgument,
                  "root %d is out of range [0, %d) of team %d", root, a.team.size, team);
  SYMCOMM_REQUIRE(count <= max_elems(a.elem) / static_cast<size_t>(a.team.size),
                  symcommInvalidArgument, "count %zu is too large", count);
  a.count = count;
  a.type = type;
  a.redop = redop;
  a.root = root;
  a.stream = stream;
  return a;
}

std::string describe(const char* fn, symcommTeam_t team, size_t count, symcommDataType_t type,
                     const char* algorithm) {
  return format("%s(team=%d, count=%zu, type=%d, algorithm=%s)", fn, team, count,
                static_cast<int>(type), algorithm ? algorithm : "NULL");
}

}  // namespace symcomm::capi

using namespace symcomm::capi;

namespace {

bool overlap(const void* a, size_t an, const void* b, size_t bn) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

// Whether this rank is member `root` of `team` (once base_args has checked both).
bool is_root(symcommComm_t comm, symcommTeam_t team, int root) {
  symcommComm& c = checked(comm);
  return c.rma->teams().get(team).index_of(c.topology.rank) == root;
}

// Fills in a's buffers after checking them (see run()).
void check_buffers(symcommComm& c, CollArgs& a, const void* send, void* recv, size_t send_elems,
                   size_t recv_elems, bool exact_in_place, const size_t* const* v,
                   bool counts_on_device) {
  const CollOp op = a.op;
  const int root = a.root;
  const size_t sb = send_elems * a.elem, rb = recv_elems * a.elem;
  // The root's alone: a broadcast's and a scatter's send (reduce's and gather's recv: the
  // others pass an empty one, recv_elems 0).
  const bool root_send = op == CollOp::Broadcast || op == CollOp::Scatter;
  const bool reads_send = !root_send || a.me == root;
  if (sb && reads_send) {
    SYMCOMM_REQUIRE(send != nullptr, symcommInvalidArgument, "send is NULL");
    require_aligned(send, a.elem, "send");
    require_reach(c, send, sb, "send");
  }
  if (rb) {
    SYMCOMM_REQUIRE(recv != nullptr, symcommInvalidArgument, "recv is NULL");
    require_aligned(recv, a.elem, "recv");
    require_reach(c, recv, rb, "recv");
  }
  if (reads_send && !(exact_in_place && send == recv))
    SYMCOMM_REQUIRE(!overlap(send, sb, recv, rb), symcommInvalidArgument,
                    "send [%p, +%zu) and recv [%p, +%zu) overlap%s", send, sb, recv, rb,
                    exact_in_place ? " (only send == recv is allowed)" : "");
  a.send = static_cast<const char*>(send);
  a.recv = static_cast<char*>(recv);
  a.send_bytes = reads_send ? sb : 0;
  a.recv_bytes = rb;
  // The choice of algorithm depends on it: every member must pass the same kind of buffers
  // (symcomm.h). An empty buffer is taken to be of the others' kind. A broadcast's send is
  // the root's alone, read by the root only, so only recv counts: were the root's send to
  // count, a root with a plain send would choose from other rows of the table than its
  // members (a relay on the members, sm on the root) and the call would hang.
  const bool send_counts = reads_send && !root_send && sb != 0;
  a.symmetric = (!send_counts || c.coll->addressable(send, sb)) &&
                (rb == 0 || c.coll->addressable(recv, rb));
  if (v) {  // all-to-all-v: send counts, send displacements, receive counts and displacements
    a.send_counts = v[0];
    a.send_displs = v[1];
    a.recv_counts = v[2];
    a.recv_displs = v[3];
    a.counts_on_device = counts_on_device;
  }
}

// The input of a pre-multiplied sum, multiplied by its scalar into memory of the call's own
// (call_buffer.h).
class ScaledInput {
 public:
  ScaledInput(symcommComm& c, symcommStream_t stream)
      : c_(c), stream_(stream), buffer_(c, stream, "a pre-multiplied sum's input") {}
  const char* make(const char* input, size_t count, const PreMulSum& p) {
    char* out = buffer_.get(count * type_size(p.type));
    c_.copies->scale(out, input, count, p.type, p.value, p.on_device ? p.scalar : nullptr,
                     stream_);
    return out;
  }

 private:
  symcommComm& c_;
  symcommStream_t stream_;
  CallBuffer buffer_;
};

// With SYMCOMM_COLL_CHECK: `prepare` (the call's checks and the choice of algorithm, whose
// name it returns) and the members' agreement on the call (coll/agreement.h). A member whose
// checks refused the call takes part all the same, so that every member fails at once: it
// throws its own error, the others one that quotes it.
void agreed(symcommComm& c, symcommTeam_t team, const CollArgs& a,
            const std::function<const char*()>& prepare) {
  CollArgs who{};
  who.team_id = team;
  who.team = c.rma->teams().get(team);
  who.me = who.team.index_of(c.topology.rank);
  SYMCOMM_REQUIRE(who.me >= 0, symcommInvalidArgument, "rank %d is not a member of team %d",
                  c.topology.rank, team);
  std::exception_ptr refusal;
  std::string text;
  try {
    text = prepare();
  } catch (const std::exception& e) {
    refusal = std::current_exception();
    text = e.what();
  }
  try {
    check_agreement(refusal ? who : a, text, refusal != nullptr, *c.coll);
  } catch (...) {
    if (refusal) std::rethrow_exception(refusal);
    throw;
  }
  // A team of one agrees with itself without a check: its own refusal still stands.
  if (refusal) std::rethrow_exception(refusal);
}

// Checks what every collective shares and runs it. `extents()`: this rank's send and
// receive buffer sizes in elements, after the checks that give them (a pair);
// `exact_in_place`: send == recv is allowed (other overlaps never are).
template <typename Extents>
void run(symcommComm_t comm, CollOp op, symcommTeam_t team, const void* send, void* recv,
         size_t count, symcommDataType_t type, symcommRedOp_t redop, int root,
         const char* algorithm, symcommStream_t stream, const Extents& extents,
         bool exact_in_place, const size_t* const* v = nullptr, bool counts_on_device = false) {
  symcommComm& c = checked(comm);
  CollArgs a{};
  CollAlgorithm* chosen = nullptr;
  // A pre-multiplied sum: a sum of the input multiplied into a buffer of the call's own.
  const PreMulSum* premul = nullptr;
  if (redop >= symcommNumRedOps) {
    auto it = c.premul_sums.find(static_cast<int>(redop));
    SYMCOMM_REQUIRE(it != c.premul_sums.end(), symcommInvalidArgument,
                    "op %d is not a symcommRedOp_t (nor an op made on this communicator)",
                    static_cast<int>(redop));
    premul = &it->second;
    SYMCOMM_REQUIRE(premul->type == type, symcommInvalidArgument,
                    "op %d multiplies by a scalar of type %d; the call's type is %d",
                    static_cast<int>(redop), static_cast<int>(premul->type),
                    static_cast<int>(type));
  }
  ScaledInput scaled(c, stream);
  auto prepare = [&] {
    a = base_args(c, op, team, count, type, premul ? symcommSum : redop, root, stream);
    const auto [send_elems, recv_elems] = extents();
    check_buffers(c, a, send, recv, send_elems, recv_elems, exact_in_place, v, counts_on_device);
    if (premul && a.send_bytes) {
      a.send = scaled.make(a.send, a.send_bytes / a.elem, *premul);
      a.symmetric = false;
    }
    chosen = &choose_algorithm(a, *c.coll, algorithm);
    return chosen->name();
  };
  if (c.coll->check_calls())
    agreed(c, team, a, prepare);
  else
    prepare();
  if (a.redop != symcommAvg) return chosen->run(a, *c.coll);
  // The average: the sum, then this rank's result divided by the team's size.
  a.redop = symcommSum;
  chosen->run(a, *c.coll);
  c.coll->copies().divide(a.recv, a.recv_bytes / a.elem, a.type, a.team.size, a.stream);
}

}  // namespace

bool symcomm::capi::all_reduce_segments(symcommComm& c, symcommTeam_t team,
                                         const std::vector<CollSegment>& parts,
                                         symcommDataType_t type, symcommRedOp_t op,
                                         symcommStream_t stream) {
  static CollAlgorithm* const ll = find_coll_algorithm("ll");  // looked up once, not per group
  if (!ll || parts.empty() || op < 0 || op >= symcommNumRedOps || op == symcommAvg) return false;
  const size_t bytes = segments_layout(parts, nullptr);
  CollArgs a = base_args(c, CollOp::AllReduce, team, bytes / type_size(type), type, op, 0, stream);
  a.segments = &parts;
  a.send = parts.front().send;
  a.recv = parts.front().recv;
  a.send_bytes = a.recv_bytes = bytes;
  if (!ll->refusal(a, *c.coll)) return false;  // the same answer on every member
  if (c.coll->check_calls()) agreed(c, team, a, [&] { return ll->name(); });
  ll->run(a, *c.coll);
  return true;
}

namespace {

// Host all-to-all-v: every count and extent fits (no overflow, in elements and in bytes), no
// two blocks that this rank receives overlap, and the block this rank (team rank `me`) sends
// itself is the one it expects from itself: the algorithms copy sendcounts[me] elements to
// rdispls[me], so a larger send count would write past the receive block (where rdispls[me]
// is not even checked when recvcounts[me] is 0). Returns the send and receive extents, in
// elements (for the overlap check of send and recv).
std::pair<size_t, size_t> check_v(int n, int me, const size_t* sendcounts, const size_t* sdispls,
                                  const size_t* recvcounts, const size_t* rdispls,
                                  symcommDataType_t type) {
  const size_t limit = max_elems(type_size(type)) / static_cast<size_t>(n);  // so is their sum
  auto extent = [&](const char* what, int j, size_t count, size_t displ) -> size_t {
    if (count == 0) return 0;  // where an empty block would be does not matter
    SYMCOMM_REQUIRE(count <= limit && displ <= limit - count, symcommInvalidArgument,
                    "%scounts[%d] = %zu at displacement %zu: more than %zu elements of type %d",
                    what, j, count, displ, limit, static_cast<int>(type));
    return displ + count;
  };
  size_t send_elems = 0, recv_elems = 0;
  std::vector<std::pair<size_t, int>> blocks;  // nonempty receive blocks: start, member
  for (int j = 0; j < n; ++j) {
    send_elems = std::max(send_elems, extent("send", j, sendcounts[j], sdispls[j]));
    recv_elems = std::max(recv_elems, extent("recv", j, recvcounts[j], rdispls[j]));
    if (recvcounts[j]) blocks.emplace_back(rdispls[j], j);
  }
  std::sort(blocks.begin(), blocks.end());
  for (size_t k = 1; k < blocks.size(); ++k) {
    const int i = blocks[k - 1].second, j = blocks[k].second;
    SYMCOMM_REQUIRE(rdispls[i] + recvcounts[i] <= rdispls[j], symcommInvalidArgument,
                    "the receive blocks of members %d ([%zu, +%zu)) and %d ([%zu, +%zu)) overlap",
                    i, rdispls[i], recvcounts[i], j, rdispls[j], recvcounts[j]);
  }
  SYMCOMM_REQUIRE(sendcounts[me] == recvcounts[me], symcommInvalidArgument,
                  "sendcounts[%d] = %zu but recvcounts[%d] = %zu: the block team rank %d sends "
                  "itself must be the one it receives from itself", me, sendcounts[me], me,
                  recvcounts[me], me);
  return {send_elems, recv_elems};
}

// Device all-to-all-v: the kernels read and write the count arrays (`n` entries each), which
// must be memory this rank's GPU can access (Space::device_access_problem: not pageable host
// memory, not another GPU's), aligned, and apart from what the call writes: recvcounts and
// rdispls from each other, from the send counts and displacements, and from recv's
// `recv_bytes` (0: too many to say; the count check refuses them). The counts themselves are
// on the device: the host cannot check them (symcomm.h says what the call trusts).
void check_device_counts(symcommComm& c, const size_t* const* v, int n, const void* recv,
                         size_t recv_bytes) {
  static const char* const names[4] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
  const size_t bytes = static_cast<size_t>(n) * sizeof(size_t);
  for (int k = 0; k < 4; ++k) {
    require_aligned(v[k], sizeof(size_t), names[k]);
    SYMCOMM_REQUIRE(!overlap(v[k], bytes, recv, recv_bytes), symcommInvalidArgument,
                    "%s [%p, +%zu) overlaps recv [%p, +%zu), which the call writes", names[k],
                    static_cast<const void*>(v[k]), bytes, recv, recv_bytes);
    for (int w = 2; w < 4; ++w)  // the written arrays against every other
      SYMCOMM_REQUIRE(w == k || !overlap(v[k], bytes, v[w], bytes), symcommInvalidArgument,
                      "%s [%p, +%zu) and %s [%p, +%zu) overlap, and the call writes %s",
                      names[k], static_cast<const void*>(v[k]), bytes, names[w],
                      static_cast<const void*>(v[w]), bytes, names[w]);
    if (c.heap->contains(v[k])) continue;
    const std::string problem = c.space->device_access_problem(v[k]);
    SYMCOMM_REQUIRE(problem.empty(), symcommInvalidArgument,
                    "%s is not memory the GPU can access (the counts of this call are read and "
                    "written on the device): %s", names[k], problem.c_str());
  }
}


// Whether the calling thread is inside a group (symcommGroupStart; coll/p2p.h).
bool group_open() { return this_threads_group().depth > 0; }

// Inside a group: queues `again` (the call, made again at the group's end) and returns true.
// The communicator is checked now; the rest when it runs.
bool queued_in_group(symcommComm_t comm, std::function<symcommResult_t()> again,
                     std::optional<Group::AllReduce> all_reduce = std::nullopt) {
  Group& g = this_threads_group();
  if (g.depth == 0) return false;
  symcommComm& c = checked(comm);
  g.collectives.push_back({c.bootstrap->comm_id(), std::move(again), all_reduce});
  return true;
}

// The algorithm's name, kept for a call queued in a group (the caller's string may go).
struct Algorithm {
  explicit Algorithm(const char* a) : given(a != nullptr), name(a ? a : "") {}
  const char* get() const { return given ? name.c_str() : nullptr; }
  bool given;
  std::string name;
};

}  // namespace

extern "C" symcommResult_t symcommAllGatherOnStream(symcommComm_t comm, symcommTeam_t team,
                                                    const void* send, void* recv, size_t count,
                                                    symcommDataType_t type, const char* algorithm,
                                                    symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllGatherOnStream", team, count, type, algorithm); },
                 [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommAllGatherOnStream(comm, team, send, recv, count, type, algo.get(), stream);
        }))
      return;
    run(comm, CollOp::AllGather, team, send, recv, count, type, symcommSum, 0, algorithm, stream,
        [&]() -> std::pair<size_t, size_t> {
          const Team t = checked(comm).rma->teams().get(team);
          // In place: send is this rank's block of recv.
          const bool in_place = recv && send == static_cast<char*>(recv) + count * type_size(type) *
                                                    static_cast<size_t>(t.index_of(checked(comm).topology.rank));
          return {in_place ? 0 : count, count * static_cast<size_t>(t.size)};
        }, false);
  });
}

extern "C" symcommResult_t symcommAllToAllOnStream(symcommComm_t comm, symcommTeam_t team,
                                                   const void* send, void* recv, size_t count,
                                                   symcommDataType_t type, const char* algorithm,
                                                   symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllToAllOnStream", team, count, type, algorithm); },
                 [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommAllToAllOnStream(comm, team, send, recv, count, type, algo.get(), stream);
        }))
      return;
    run(comm, CollOp::AllToAll, team, send, recv, count, type, symcommSum, 0, algorithm, stream,
        [&]() -> std::pair<size_t, size_t> {
          const size_t n = static_cast<size_t>(checked(comm).rma->teams().get(team).size);
          return {count * n, count * n};
        }, false);
  });
}

extern "C" symcommResult_t symcommAllToAllvOnStream(
    symcommComm_t comm, symcommTeam_t team, const void* send, const size_t* sendcounts,
    const size_t* sdispls, void* recv, const size_t* recvcounts, const size_t* rdispls,
    symcommDataType_t type, const char* algorithm, symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllToAllvOnStream", team, 0, type, algorithm); },
                 [&] {
    if (group_open()) {
      // The counts and displacements are copied: the caller's arrays may change or go.
      const size_t n = static_cast<size_t>(checked(comm).rma->teams().get(team).size);
      auto copy = [n](const size_t* a) {
        return a ? std::vector<size_t>(a, a + n) : std::vector<size_t>();
      };
      auto ptr = [](const std::vector<size_t>& a) { return a.empty() ? nullptr : a.data(); };
      queued_in_group(comm, [=, algo = Algorithm(algorithm), sc = copy(sendcounts),
                             sd = copy(sdispls), rc = copy(recvcounts), rd = copy(rdispls)] {
        return symcommAllToAllvOnStream(comm, team, send, ptr(sc), ptr(sd), recv, ptr(rc),
                                        ptr(rd), type, algo.get(), stream);
      });
      return;
    }
    const size_t* v[4] = {sendcounts, sdispls, recvcounts, rdispls};
    run(comm, CollOp::AllToAllv, team, send, recv, 0, type, symcommSum, 0, algorithm, stream,
        [&] {
          SYMCOMM_REQUIRE_ARG(sendcounts);
          SYMCOMM_REQUIRE_ARG(sdispls);
          SYMCOMM_REQUIRE_ARG(recvcounts);
          SYMCOMM_REQUIRE_ARG(rdispls);
          symcommComm& c = checked(comm);
          const Team& t = c.rma->teams().get(team);
          return check_v(t.size, t.index_of(c.topology.rank), sendcounts, sdispls, recvcounts,
                         rdispls, type);
        }, false, v);
  });
}

extern "C" symcommResult_t symcommAllToAllvDeviceOnStream(
    symcommComm_t comm, symcommTeam_t team, const void* send, const size_t* sendcounts,
    const size_t* sdispls, void* recv, size_t recv_capacity, size_t* recvcounts, size_t* rdispls,
    symcommDataType_t type, const char* algorithm, symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllToAllvDeviceOnStream", team, recv_capacity,
                                       type, algorithm); }, [&] {
    const size_t* v[4] = {sendcounts, sdispls, recvcounts, rdispls};
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommAllToAllvDeviceOnStream(comm, team, send, sendcounts, sdispls, recv,
                                                recv_capacity, recvcounts, rdispls, type,
                                                algo.get(), stream);
        }))
      return;
    run(comm, CollOp::AllToAllv, team, send, recv, recv_capacity, type, symcommSum, 0, algorithm,
        stream, [&]() -> std::pair<size_t, size_t> {
          SYMCOMM_REQUIRE_ARG(send);
          SYMCOMM_REQUIRE_ARG(sendcounts);
          SYMCOMM_REQUIRE_ARG(sdispls);
          SYMCOMM_REQUIRE_ARG(recvcounts);
          SYMCOMM_REQUIRE_ARG(rdispls);
          const size_t elem = type_size(type);
          require_aligned(send, elem, "send");
          check_device_counts(checked(comm), v, checked(comm).rma->teams().get(team).size, recv,
                              recv_capacity <= SIZE_MAX / elem ? recv_capacity * elem : 0);
          // The extents are on the device: only recv's capacity is checked against send here.
          return {0, recv_capacity};
        }, false, v, true);
  });
}

extern "C" symcommResult_t symcommReduceScatterOnStream(symcommComm_t comm, symcommTeam_t team,
                                                        const void* send, void* recv,
                                                        size_t recvcount, symcommDataType_t type,
                                                        symcommRedOp_t op, const char* algorithm,
                                                        symcommStream_t stream) {
  return guarded([&] { return describe("symcommReduceScatterOnStream", team, recvcount, type,
                                       algorithm); }, [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommReduceScatterOnStream(comm, team, send, recv, recvcount, type, op,
                                              algo.get(), stream);
        }))
      return;
    run(comm, CollOp::ReduceScatter, team, send, recv, recvcount, type, op, 0, algorithm, stream,
        [&]() -> std::pair<size_t, size_t> {
          const size_t n = static_cast<size_t>(checked(comm).rma->teams().get(team).size);
          return {recvcount * n, recvcount};
        }, false);
  });
}

extern "C" symcommResult_t symcommAllReduceOnStream(symcommComm_t comm, symcommTeam_t team,
                                                    const void* send, void* recv, size_t count,
                                                    symcommDataType_t type, symcommRedOp_t op,
                                                    const char* algorithm,
                                                    symcommStream_t stream) {
  return guarded([&] { return describe("symcommAllReduceOnStream", team, count, type, algorithm); },
                 [&] {
    // Without a named algorithm, a plain reduction of a known type may run packed with its
    // neighbours (anything else runs alone, where its checks say what is wrong).
    std::optional<Group::AllReduce> packable;
    if (!algorithm && op >= 0 && op < symcommNumRedOps && type >= 0 &&
        type < symcommNumDataTypes && count > 0 && count <= SIZE_MAX / 16)
      packable = Group::AllReduce{comm, team, send, recv, count, type, op, stream};
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommAllReduceOnStream(comm, team, send, recv, count, type, op, algo.get(),
                                          stream);
        }, packable))
      return;
    run(comm, CollOp::AllReduce, team, send, recv, count, type, op, 0, algorithm, stream,
        [&] { return std::pair<size_t, size_t>{count, count}; }, true);
  });
}

extern "C" symcommResult_t symcommBroadcastOnStream(symcommComm_t comm, symcommTeam_t team,
                                                    const void* send, void* recv, size_t count,
                                                    symcommDataType_t type, int root,
                                                    const char* algorithm,
                                                    symcommStream_t stream) {
  return guarded([&] { return describe("symcommBroadcastOnStream", team, count, type, algorithm) +
                              format(" root=%d", root); }, [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommBroadcastOnStream(comm, team, send, recv, count, type, root,
                                          algo.get(), stream);
        }))
      return;
    run(comm, CollOp::Broadcast, team, send, recv, count, type, symcommSum, root, algorithm,
        stream, [&] { return std::pair<size_t, size_t>{count, count}; }, true);
  });
}

extern "C" symcommResult_t symcommReduceOnStream(symcommComm_t comm, symcommTeam_t team,
                                                 const void* send, void* recv, size_t count,
                                                 symcommDataType_t type, symcommRedOp_t op,
                                                 int root, const char* algorithm,
                                                 symcommStream_t stream) {
  return guarded([&] { return describe("symcommReduceOnStream", team, count, type, algorithm) +
                              format(" root=%d", root); }, [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommReduceOnStream(comm, team, send, recv, count, type, op, root,
                                       algo.get(), stream);
        }))
      return;
    run(comm, CollOp::Reduce, team, send, recv, count, type, op, root, algorithm, stream,
        [&] { return std::pair<size_t, size_t>{count, is_root(comm, team, root) ? count : 0}; },
        true);
  });
}

extern "C" symcommResult_t symcommGatherOnStream(symcommComm_t comm, symcommTeam_t team,
                                                 const void* send, void* recv, size_t count,
                                                 symcommDataType_t type, int root,
                                                 const char* algorithm, symcommStream_t stream) {
  return guarded([&] { return describe("symcommGatherOnStream", team, count, type, algorithm) +
                              format(" root=%d", root); }, [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommGatherOnStream(comm, team, send, recv, count, type, root, algo.get(),
                                       stream);
        }))
      return;
    run(comm, CollOp::Gather, team, send, recv, count, type, symcommSum, root, algorithm, stream,
        [&] {
          const size_t n = static_cast<size_t>(checked(comm).rma->teams().get(team).size);
          return std::pair<size_t, size_t>{count, is_root(comm, team, root) ? count * n : 0};
        }, false);
  });
}

extern "C" symcommResult_t symcommScatterOnStream(symcommComm_t comm, symcommTeam_t team,
                                                  const void* send, void* recv, size_t count,
                                                  symcommDataType_t type, int root,
                                                  const char* algorithm, symcommStream_t stream) {
  return guarded([&] { return describe("symcommScatterOnStream", team, count, type, algorithm) +
                              format(" root=%d", root); }, [&] {
    if (queued_in_group(comm, [=, algo = Algorithm(algorithm)] {
          return symcommScatterOnStream(comm, team, send, recv, count, type, root,
                                        algo.get(), stream);
        }))
      return;
    run(comm, CollOp::Scatter, team, send, recv, count, type, symcommSum, root, algorithm,
        stream, [&] {
          const size_t n = static_cast<size_t>(checked(comm).rma->teams().get(team).size);
          return std::pair<size_t, size_t>{is_root(comm, team, root) ? count * n : 0, count};
        }, false);
  });
}
