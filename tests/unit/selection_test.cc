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
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, 1000, false), "small");
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, 64 << 10, false), "small");
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, (64 << 10) + 1, false), "large");
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 16, 10, false), "large");
  EXPECT_STREQ(table_choice(table, CollOp::AllReduce, 4, 1 << 30, false), "four");
  EXPECT_EQ(table_choice(table, CollOp::AllReduce, 5, 10, false), nullptr);
  EXPECT_EQ(table_choice(table, CollOp::Broadcast, 2, 10, false), nullptr);
}

TEST(Selection, SymmetricRowsOnlyForSymmetricBuffers) {
  const std::vector<SelectionRow> table = {
      {CollOp::AllReduce, 0, 1 << 20, "direct", "test", Buffers::Symmetric},
      {CollOp::AllReduce, 0, 1 << 20, "staged", "test"},
      {CollOp::AllReduce, 0, 0, "large", "test", Buffers::Symmetric},
  };
  EXPECT_STREQ(table_choice(table, CollOp::AllReduce, 4, 1000, true), "direct");
  EXPECT_STREQ(table_choice(table, CollOp::AllReduce, 4, 1000, false), "staged");
  EXPECT_STREQ(table_choice(table, CollOp::AllReduce, 4, 2 << 20, true), "large");
  EXPECT_EQ(table_choice(table, CollOp::AllReduce, 4, 2 << 20, false), nullptr);
  // symcomm-info says which rows are for symmetric buffers.
  bool marked = false;
  for (const SelectionRow& row : selection_table()) marked |= row.buffers == Buffers::Symmetric;
  EXPECT_EQ(selection_text().find("symmetric buffers") != std::string::npos, marked);
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
