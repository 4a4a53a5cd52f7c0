// symcommCommSplit: communicators of arbitrary subsets, each joined as any communicator is
// (symcommInit on a unique id of its own), which the parent's bootstrap agrees on.
#include <algorithm>
#include <cstring>
#include <vector>

#include "capi/comm.h"
#include "capi/guard.h"

using namespace symcomm;

namespace {

// What each rank of the parent says: its color and key, then (second round) the unique id
// its group's first rank made, or that it could not.
struct Ask {
  int32_t color, key;
};
struct Id {
  int32_t ok;  // 1: `uid` is the group's; 0: the group's first rank could not make one
  symcommUniqueId uid;
};

}  // namespace

extern "C" symcommResult_t symcommCommSplit(symcommComm_t comm, int color, int key,
                                            symcommComm_t* newcomm) {
  return guarded([&] { return format("symcommCommSplit(color=%d, key=%d)", color, key); }, [&] {
    symcommComm& c = checked(comm);
    SYMCOMM_REQUIRE_ARG(newcomm);
    *newcomm = nullptr;
    c.check_live();
    SYMCOMM_REQUIRE(color >= 0 || color == SYMCOMM_COMM_SPLIT_NOCOLOR, symcommInvalidArgument,
                    "color %d: at least 0, or SYMCOMM_COMM_SPLIT_NOCOLOR", color);
    const int n = c.topology.nranks, me = c.topology.rank;
    const Ask mine{color, key};
    std::vector<Ask> all(static_cast<size_t>(n));
    c.bootstrap->allgather(&mine, sizeof mine, all.data());
    // This rank's group: the ranks of its color, by key, then by rank in the parent.
    std::vector<int> group;
    for (int r = 0; r < n && color >= 0; ++r)
      if (all[static_cast<size_t>(r)].color == color) group.push_back(r);
    std::stable_sort(group.begin(), group.end(), [&](int a, int b) {
      return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
    });
    const int first = group.empty() ? -1 : group[0];
    // The group's first rank makes its unique id (a bootstrap root of its own); every rank
    // learns every group's.
    Id id{};
    if (first == me) {
      id.ok = symcommGetUniqueId(&id.uid) == symcommSuccess;
      if (!id.ok) SYMCOMM_WARN("symcommCommSplit: %s", symcommGetLastError());
    }
    std::vector<Id> ids(static_cast<size_t>(n));
    c.bootstrap->allgather(&id, sizeof id, ids.data());
    if (first < 0) return;  // SYMCOMM_COMM_SPLIT_NOCOLOR: no communicator
    const Id& ours = ids[static_cast<size_t>(first)];
    SYMCOMM_REQUIRE(ours.ok, symcommSystemError,
                    "rank %d, the first of color %d, could not make the new communicator's "
                    "unique id", first, color);
    const int rank = static_cast<int>(std::find(group.begin(), group.end(), me) - group.begin());
    symcommConfig_t config;
    symcommConfigInit(&config);
    config.space = c.space_kind;
    config.device = c.topology.device;
    symcommComm_t made = nullptr;
    const symcommResult_t rc =
        symcommInit(&made, static_cast<int>(group.size()), rank, &ours.uid, &config);
    if (rc != symcommSuccess) throw Error(rc, symcommGetLastError());
    *newcomm = made;
  });
}
