// Temporary: the old C++ table against the embedded data (run once, then removed).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "coll/selection.h"

namespace symcomm {
namespace {

struct OldRow {
  CollOp op;
  int max_team;
  size_t max_bytes;
  const char* algorithm;
  Buffers buffers = Buffers::Any;
};
constexpr Buffers kSym = Buffers::Symmetric;
const std::vector<OldRow> kOld = {
      {CollOp::AllGather, 2, 65536, "ll"},
      {CollOp::AllGather, 2, 1048576, "sm"},
      {CollOp::AllGather, 4, 524288, "sm"},
      {CollOp::AllGather, 4, 67108864, "direct", kSym},
      {CollOp::AllGather, 4, 67108864, "sm"},
      {CollOp::AllGather, 4, 0, "ce", kSym},
      {CollOp::AllGather, 4, 0, "sm"},
      {CollOp::AllGather, 8, 524288, "sm"},
      {CollOp::AllGather, 8, 67108864, "direct", kSym},
      {CollOp::AllGather, 0, 67108864, "sm"},
      {CollOp::AllGather, 0, 0, "ce", kSym},
      {CollOp::AllReduce, 2, 65536, "ll"},
      {CollOp::AllReduce, 2, 524288, "sm"},
      {CollOp::AllReduce, 2, 0, "twoshot", kSym},
      {CollOp::AllReduce, 2, 16777216, "twoshot"},
      {CollOp::AllReduce, 2, 0, "sm"},
      {CollOp::AllReduce, 4, 65536, "ll"},
      {CollOp::AllReduce, 4, 33554432, "twoshot", kSym},
      {CollOp::AllReduce, 4, 262144, "sm"},
      {CollOp::AllReduce, 4, 4194304, "twoshot"},
      {CollOp::AllReduce, 4, 0, "nccl"},
      {CollOp::AllReduce, 0, 32768, "ll"},
      {CollOp::AllReduce, 0, 33554432, "twoshot", kSym},
      {CollOp::AllReduce, 0, 4194304, "twoshot"},
      {CollOp::AllReduce, 0, 0, "nccl"},
      {CollOp::AllToAll, 2, 131072, "ll"},
      {CollOp::AllToAll, 4, 2097152, "sm"},
      {CollOp::AllToAll, 4, 268435456, "direct", kSym},
      {CollOp::AllToAll, 4, 268435456, "sm"},
      {CollOp::AllToAll, 4, 0, "ce", kSym},
      {CollOp::AllToAll, 4, 0, "sm"},
      {CollOp::AllToAll, 8, 2097152, "sm"},
      {CollOp::AllToAll, 8, 268435456, "direct", kSym},
      {CollOp::AllToAll, 0, 268435456, "sm"},
      {CollOp::AllToAll, 0, 0, "ce", kSym},
      {CollOp::Broadcast, 2, 65536, "ll"},
      {CollOp::Broadcast, 2, 134217728, "sm"},
      {CollOp::Broadcast, 2, 0, "ce", kSym},
      {CollOp::Broadcast, 2, 0, "nccl"},
      {CollOp::Broadcast, 4, 524288, "sm", kSym},
      {CollOp::Broadcast, 4, 131072, "sm"},
      {CollOp::Broadcast, 4, 1048576, "nccl"},
      {CollOp::Broadcast, 4, 2097152, "relay", kSym},
      {CollOp::Broadcast, 4, 0, "nccl"},
      {CollOp::Broadcast, 0, 65536, "sm"},
      {CollOp::Broadcast, 0, 262144, "sm", kSym},
      {CollOp::Broadcast, 0, 16777216, "relay", kSym},
      {CollOp::Broadcast, 0, 0, "nccl"},
      {CollOp::ReduceScatter, 2, 131072, "ll"},
      {CollOp::ReduceScatter, 2, 2097152, "sm"},
      {CollOp::ReduceScatter, 2, 0, "twoshot", kSym},
      {CollOp::ReduceScatter, 2, 16777216, "twoshot"},
      {CollOp::ReduceScatter, 2, 0, "sm"},
      {CollOp::ReduceScatter, 4, 262144, "ll"},
      {CollOp::ReduceScatter, 4, 1048576, "sm"},
      {CollOp::ReduceScatter, 4, 536870912, "twoshot", kSym},
      {CollOp::ReduceScatter, 4, 536870912, "sm"},
      {CollOp::ReduceScatter, 4, 0, "nccl"},
      {CollOp::ReduceScatter, 0, 131072, "ll"},
      {CollOp::ReduceScatter, 0, 536870912, "twoshot", kSym},
      {CollOp::ReduceScatter, 0, 536870912, "sm"},
      {CollOp::ReduceScatter, 0, 0, "nccl"},
};

bool old_matches(const OldRow& row, CollOp op, int team_size, size_t bytes, bool symmetric) {
  return row.op == op && (row.buffers != Buffers::Symmetric || symmetric) &&
         (row.max_team <= 0 || team_size <= row.max_team) &&
         (row.max_bytes == 0 || bytes <= row.max_bytes);
}

TEST(SelectionOldTable, SameRowsInTheSameOrder) {
  const std::vector<SelectionRow>& now = selection_table();
  ASSERT_EQ(now.size(), kOld.size());
  for (size_t i = 0; i < now.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(now[i].op, kOld[i].op);
    EXPECT_EQ(now[i].max_team, kOld[i].max_team);
    EXPECT_EQ(now[i].max_bytes, kOld[i].max_bytes);
    EXPECT_EQ(now[i].algorithm, kOld[i].algorithm);
    EXPECT_EQ(now[i].buffers, kOld[i].buffers);
  }
}

TEST(SelectionOldTable, SameChoicesEverywhere) {
  std::set<size_t> sizes = {0, 1, 2, 3, 4, 7, 8, 16, 100, 1000};
  for (int s = 0; s <= 36; ++s) sizes.insert(size_t{1} << s);
  for (const OldRow& row : kOld)
    if (row.max_bytes) {
      sizes.insert(row.max_bytes - 1);
      sizes.insert(row.max_bytes);
      sizes.insert(row.max_bytes + 1);
    }
  const CollOp ops[] = {CollOp::AllGather, CollOp::AllToAll, CollOp::AllToAllv,
                        CollOp::ReduceScatter, CollOp::AllReduce, CollOp::Broadcast};
  long checked = 0;
  for (CollOp op : ops)
    for (int team = 1; team <= 20; ++team)
      for (size_t bytes : sizes)
        for (bool sym : {false, true}) {
          std::vector<std::string> old_order, new_order;
          for (const OldRow& row : kOld)
            if (old_matches(row, op, team, bytes, sym)) old_order.emplace_back(row.algorithm);
          // The real walk, refusing every row: it offers each matching row in turn.
          const SelectionRow* none = select_row(selection_table(), {op, team, bytes, sym},
                                                [&](const SelectionRow& r) {
                                                  new_order.push_back(r.algorithm);
                                                  return false;
                                                });
          EXPECT_EQ(none, nullptr);
          ASSERT_EQ(new_order, old_order) << coll_op_name(op) << " team " << team << " bytes "
                                          << bytes << " sym " << sym;
          ++checked;
        }
  std::printf("compared %ld calls\n", checked);
}

}  // namespace
}  // namespace symcomm
