// The collective algorithms' registry and choice, asked without a call: their names and
// descriptors, the selection table, which algorithm a call would run and whether one can.
#include <string>
#include <vector>

#include "capi/coll_args.h"
#include "capi/guard.h"
#include "coll/selection.h"

using namespace symcomm;
using namespace symcomm::capi;

extern "C" int symcommCollAlgorithmCount(void) {
  return static_cast<int>(coll_algorithms().size());
}

extern "C" const char* symcommCollAlgorithmName(int index) {
  const auto& all = coll_algorithms();
  if (index < 0 || static_cast<size_t>(index) >= all.size()) return nullptr;
  return all[static_cast<size_t>(index)]->name();
}

extern "C" const char* symcommCollSelectionTable(void) {
  static const std::string text = selection_text();
  return text.c_str();
}

namespace {

// The arguments of a query (symcommCollAlgorithm, symcommCollAlgorithmCanRun): no buffers,
// `symmetric` saying what kind they would be; an all-to-all-v's `count` elements spread over
// the members (what the choice reads of the counts is their sum), in `counts` and `displs`.
CollArgs query_args(symcommComm& c, symcommTeam_t team, symcommCollOp_t op, size_t count,
                    symcommDataType_t type, int symmetric, std::vector<size_t>& counts,
                    std::vector<size_t>& displs) {
  CollOp coll_op;
  switch (op) {
    case symcommCollAllGather: coll_op = CollOp::AllGather; break;
    case symcommCollAllToAll: coll_op = CollOp::AllToAll; break;
    case symcommCollAllToAllv: coll_op = CollOp::AllToAllv; break;
    case symcommCollReduceScatter: coll_op = CollOp::ReduceScatter; break;
    case symcommCollAllReduce: coll_op = CollOp::AllReduce; break;
    case symcommCollBroadcast: coll_op = CollOp::Broadcast; break;
    case symcommCollReduce: coll_op = CollOp::Reduce; break;
    case symcommCollGather: coll_op = CollOp::Gather; break;
    case symcommCollScatter: coll_op = CollOp::Scatter; break;
    default: SYMCOMM_THROW(symcommInvalidArgument, "op %d is not a symcommCollOp_t",
                           static_cast<int>(op));
  }
  CollArgs a = base_args(c, coll_op, team, count, type, symcommSum, 0, nullptr);
  a.symmetric = symmetric != 0;
  a.query = true;
  const size_t n = static_cast<size_t>(a.team.size);
  counts.assign(n, count / n);
  displs.assign(n, 0);
  counts[0] += count % n;
  if (coll_op == CollOp::AllToAllv) {
    a.send_counts = a.recv_counts = counts.data();
    a.send_displs = a.recv_displs = displs.data();
  }
  return a;
}

}  // namespace

extern "C" symcommResult_t symcommCollAlgorithm(symcommComm_t comm, symcommTeam_t team,
                                                symcommCollOp_t op, size_t count,
                                                symcommDataType_t type, int symmetric,
                                                const char** name) {
  return guarded([&] { return describe("symcommCollAlgorithm", team, count, type, nullptr) +
                              format(" op=%d", static_cast<int>(op)); }, [&] {
    SYMCOMM_REQUIRE_ARG(name);
    symcommComm& c = checked(comm);
    std::vector<size_t> counts, displs;
    const CollArgs a = query_args(c, team, op, count, type, symmetric, counts, displs);
    *name = choose_algorithm(a, *c.coll, nullptr).name();
  });
}

extern "C" symcommResult_t symcommGetCollAlgorithmInfo(int index,
                                                       symcommCollAlgorithmInfo_t* info) {
  return guarded([&] { return format("symcommGetCollAlgorithmInfo(index=%d)", index); }, [&] {
    SYMCOMM_REQUIRE_ARG(info);
    const auto& all = coll_algorithms();
    SYMCOMM_REQUIRE(index >= 0 && static_cast<size_t>(index) < all.size(), symcommInvalidArgument,
                    "index %d is out of range [0, %zu)", index, all.size());
    const CollDescriptor& d = all[static_cast<size_t>(index)]->descriptor();
    *info = symcommCollAlgorithmInfo_t{};
    info->name = d.name;
    info->summary = d.summary;
    info->ops = d.ops;
    info->spaces = d.spaces;
    info->device_counts = d.device_counts;
    info->uncapturable_ops = d.uncapturable_ops;
    info->max_team = d.max_team;
    info->in_place_recv = d.in_place_recv;
    info->load_store = d.load_store;
    info->counters = d.state == CollState::Counters;
    info->library = d.library;
    info->across_nodes = d.across_nodes;
  });
}

extern "C" symcommResult_t symcommCollAlgorithmCanRun(symcommComm_t comm, symcommTeam_t team,
                                                      symcommCollOp_t op, size_t count,
                                                      symcommDataType_t type, int symmetric,
                                                      const char* algorithm) {
  return guarded([&] { return describe("symcommCollAlgorithmCanRun", team, count, type,
                                       algorithm) + format(" op=%d", static_cast<int>(op)); }, [&] {
    SYMCOMM_REQUIRE_ARG(algorithm);
    SYMCOMM_REQUIRE(find_coll_algorithm(algorithm) != nullptr, symcommInvalidArgument,
                    "no registered collective algorithm is named '%s'", algorithm);
    symcommComm& c = checked(comm);
    std::vector<size_t> counts, displs;
    const CollArgs a = query_args(c, team, op, count, type, symmetric, counts, displs);
    choose_algorithm(a, *c.coll, algorithm);  // throws the call's refusal
  });
}
