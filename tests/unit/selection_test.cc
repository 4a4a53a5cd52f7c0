// The collective selection table's matching rules.
#include <gtest/gtest.h>

#include "coll/selection.h"

namespace symcomm {
namespace {

TEST(Selection, FirstMatchingRowWins) {
  const std::vector<SelectionRow> table = {
      {CollOp::AllGather, 8, 64 << 10, "small", "test"},
      {CollOp::AllGather, 0, 0, "large", "test"},
      {CollOp::AllReduce, 4, 0, "four", "test"},
  };
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, 1000), "small");
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, 64 << 10), "small");
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, (64 << 10) + 1), "large");
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 16, 10), "large");
  EXPECT_STREQ(table_choice(table, CollOp::AllReduce, 4, 1 << 30), "four");
  EXPECT_EQ(table_choice(table, CollOp::AllReduce, 5, 10), nullptr);
  EXPECT_EQ(table_choice(table, CollOp::Broadcast, 2, 10), nullptr);
}

TEST(Selection, EveryRowNamesARegisteredAlgorithm) {
  for (const SelectionRow& row : selection_table()) {
    bool found = false;
    for (CollAlgorithm* a : coll_algorithms()) found |= std::string(a->name()) == row.algorithm;
    EXPECT_TRUE(found) << row.algorithm;
  }
  EXPECT_NE(selection_text().find("otherwise"), std::string::npos);
}

}  // namespace
}  // namespace symcomm
