#include "coll/alltoallv_table.h"

#include <algorithm>

namespace symcomm {

AlltoallvTable::AlltoallvTable(const CollArgs& a, CollContext& ctx) : n_(a.team.size) {
  const int n = n_;
  words_ = 3 * static_cast<size_t>(n) + 1;
  const size_t row = words_ * sizeof(uint64_t);
  SYMCOMM_REQUIRE(row * static_cast<size_t>(n) <= ctx.workspace_bytes(), symcommOutOfMemory,
                  "SYMCOMM_COLL_WORKSPACE (%zu bytes) is too small for the counts of a team of %d",
                  ctx.workspace_bytes(), n);
  size_t extent = 0;
  for (int j = 0; j < n; ++j)
    if (a.recv_counts[j]) extent = std::max(extent, (a.recv_displs[j] + a.recv_counts[j]) * a.elem);
  std::vector<uint64_t> mine(words_);
  all_.resize(words_ * static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    mine[static_cast<size_t>(j)] = a.send_counts[j];
    mine[static_cast<size_t>(n + j)] = a.recv_counts[j];
    mine[static_cast<size_t>(2 * n + j)] = a.recv_displs[j];
  }
  // In place only where every member receives something into a buffer the others can
  // address: a member that receives nothing may pass any recv (NULL, or another object of
  // the heap, which the others would then take for its receive buffer when this member
  // writes into theirs at its own recv's place).
  mine[words_ - 1] = a.recv && extent > 0 && ctx.writable_in_place(a, a.recv, extent);
  char* ws = ctx.workspace();
  ctx.barrier(a);  // every member is in the call: its workspace and receive buffer are free
  for (int j = 0; j < n; ++j)
    ctx.put_to(a, j, ws + static_cast<size_t>(a.me) * row, mine.data(), row);
  ctx.barrier(a);
  ctx.backend().get(all_.data(), ws, row * static_cast<size_t>(n), symcommEngineCe, a.stream);
  ctx.backend().synchronize(a.stream);
  for (int i = 0; i < n; ++i) {
    in_place_ = in_place_ && all_[static_cast<size_t>(i) * words_ + words_ - 1] != 0;
    for (int j = 0; j < n; ++j) {
      SYMCOMM_REQUIRE(at(i, 0, j) == at(j, 1, i), symcommInvalidArgument,
                      "all-to-all-v: member %d sends %zu elements to member %d, which expects %zu",
                      i, at(i, 0, j), j, at(j, 1, i));
      longest_ = std::max(longest_, at(i, 0, j) * a.elem);
    }
  }
}

}  // namespace symcomm
