// What each registered collective algorithm declares it can do (symcommGetCollAlgorithmInfo),
// for the tests that run every algorithm: which operations, memory spaces and buffers to give
// it, and which of its refusals are by design. Tests learn an algorithm's reach here, never
// from its name or the words of its refusals. Public API only (mp_fault uses it too).
#ifndef SYMCOMM_TESTS_MP_COLL_CAPS_H_
#define SYMCOMM_TESTS_MP_COLL_CAPS_H_

#include <cstring>
#include <string>
#include <vector>

#include "symcomm/symcomm.h"

namespace coll_caps {

constexpr symcommCollOp_t kOps[] = {symcommCollAllGather,     symcommCollAllToAll,
                                    symcommCollAllToAllv,     symcommCollReduceScatter,
                                    symcommCollAllReduce,     symcommCollBroadcast,
                                    symcommCollReduce,        symcommCollGather,
                                    symcommCollScatter};

// One call of `op` over `team` (of `n` members), `count` elements a member (all-to-all-v:
// `count` to each member, and reduce-scatter's block), root 0, sum. send and recv hold
// n * count elements.
inline symcommResult_t call_op(symcommComm_t comm, symcommTeam_t team, symcommCollOp_t op,
                               const void* send, void* recv, size_t count, int n,
                               symcommDataType_t type, const char* algo,
                               symcommStream_t stream) {
  std::vector<size_t> counts(static_cast<size_t>(n), count), displs(static_cast<size_t>(n));
  for (size_t j = 0; j < displs.size(); ++j) displs[j] = j * count;
  switch (op) {
    case symcommCollAllGather:
      return symcommAllGatherOnStream(comm, team, send, recv, count, type, algo, stream);
    case symcommCollAllToAll:
      return symcommAllToAllOnStream(comm, team, send, recv, count, type, algo, stream);
    case symcommCollAllToAllv:
      return symcommAllToAllvOnStream(comm, team, send, counts.data(), displs.data(), recv,
                                      counts.data(), displs.data(), type, algo, stream);
    case symcommCollReduceScatter:
      return symcommReduceScatterOnStream(comm, team, send, recv, count, type, symcommSum, algo,
                                          stream);
    case symcommCollAllReduce:
      return symcommAllReduceOnStream(comm, team, send, recv, count, type, symcommSum, algo,
                                      stream);
    case symcommCollReduce:
      return symcommReduceOnStream(comm, team, send, recv, count, type, symcommSum, 0, algo,
                                   stream);
    case symcommCollGather:
      return symcommGatherOnStream(comm, team, send, recv, count, type, 0, algo, stream);
    case symcommCollScatter:
      return symcommScatterOnStream(comm, team, send, recv, count, type, 0, algo, stream);
    default:
      return symcommBroadcastOnStream(comm, team, send, recv, count, type, 0, algo, stream);
  }
}

struct Caps : symcommCollAlgorithmInfo_t {
  bool does(symcommCollOp_t op) const { return (ops & (1u << op)) != 0; }
  bool runs_in(symcommMemorySpace_t s) const { return (spaces & (1u << s)) != 0; }
  bool device_counts_in(symcommMemorySpace_t s) const { return (device_counts & (1u << s)) != 0; }
  bool captures(symcommCollOp_t op) const { return (uncapturable_ops & (1u << op)) == 0; }
  bool reduces() const { return does(symcommCollReduceScatter) || does(symcommCollAllReduce); }
  bool moves_data() const {
    return does(symcommCollAllGather) || does(symcommCollAllToAll) ||
           does(symcommCollAllToAllv) || does(symcommCollBroadcast);
  }
  bool fits(int team_size) const { return max_team == 0 || team_size <= max_team; }
  // Whether it reaches a team whose members are on `nodes` nodes, as many on each (one where
  // it needs load/store reach of every member; two or more where it runs across nodes only).
  bool reaches(int nodes) const {
    if (across_nodes) return nodes >= 2;
    return !load_store || nodes <= 1;
  }
  // Whether the descriptor lets it run `op` over a team of `n` in `space` on buffers that are
  // symmetric (or registered) or not, outside a capture. Its own conditions (a library that
  // loads, resident blocks) may still refuse.
  bool declares(symcommCollOp_t op, symcommMemorySpace_t space, int n, bool symmetric) const {
    return runs_in(space) && does(op) && fits(n) && (symmetric || !in_place_recv);
  }
  // The first operation it does, in symcommCollOp_t order.
  symcommCollOp_t first_op() const {
    for (symcommCollOp_t op : kOps)
      if (does(op)) return op;
    return symcommCollAllGather;
  }
};

// Every registered algorithm, in the registry's order.
inline std::vector<Caps> all() {
  std::vector<Caps> out;
  for (int i = 0; i < symcommCollAlgorithmCount(); ++i) {
    Caps c{};
    if (symcommGetCollAlgorithmInfo(i, &c) == symcommSuccess) out.push_back(c);
  }
  return out;
}

// The first registered algorithm that runs only across nodes (the hierarchical one), or Caps{}
// (name NULL) where none is.
inline Caps across_nodes() {
  for (const Caps& c : all())
    if (c.across_nodes) return c;
  return Caps{};
}

// The automatic choice ("auto", NULL) on a world of `nodes` nodes: what the algorithms that
// reach such a team declare together (an operation, a space, counts on the device, a capture
// that any of them takes). Algorithms built on a library loaded at run time are left out:
// their own conditions may refuse (NCCL's communicator is not made inside a capture).
inline Caps automatic(int nodes) {
  Caps c{};
  c.name = "auto";
  c.summary = "the automatic choice";
  c.uncapturable_ops = (1u << 6) - 1;
  for (const Caps& a : all()) {
    if (a.library != nullptr || !a.reaches(nodes)) continue;
    c.ops |= a.ops;
    c.spaces |= a.spaces;
    c.device_counts |= a.device_counts;
    c.uncapturable_ops &= a.uncapturable_ops | ~a.ops;
  }
  c.uncapturable_ops &= c.ops;
  return c;
}

// The algorithm named `name` ("auto": automatic(nodes)); name NULL where none is.
inline Caps of(const std::string& name, int nodes = 1) {
  if (name == "auto") return automatic(nodes);
  for (const Caps& c : all())
    if (name == c.name) return c;
  return Caps{};
}

}  // namespace coll_caps

#endif  // SYMCOMM_TESTS_MP_COLL_CAPS_H_
