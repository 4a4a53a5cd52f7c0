// The collective selection table's matching rules.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coll/selection.h"

namespace symcomm {
namespace {

// The algorithms of the rows that match a call, in table order, as choose_algorithm walks
// them (row_matches); the first is the table's choice, the ones after it are taken in turn
// where it cannot run the call.
std::vector<const char*> table_choices(const std::vector<SelectionRow>& table, CollOp op,
                                       int team_size, size_t bytes, bool symmetric) {
  std::vector<const char*> out;
  for (const SelectionRow& row : table)
    if (row_matches(row, op, team_size, bytes, symmetric)) out.push_back(row.algorithm);
  return out;
}

// The first of them, or nullptr when no row matches.
const char* table_choice(const std::vector<SelectionRow>& table, CollOp op, int team_size,
                         size_t bytes, bool symmetric) {
  const std::vector<const char*> all = table_choices(table, op, team_size, bytes, symmetric);
  return all.empty() ? nullptr : all.front();
}

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

// Every matching row, in table order: where the first row's algorithm cannot run the call,
// the next matching row's is taken, before the registry's order.
TEST(Selection, MatchingRowsInTableOrder) {
  const std::vector<SelectionRow> table = {
      {CollOp::AllGather, 4, 64 << 10, "small", "test"},
      {CollOp::AllReduce, 0, 0, "other op", "test"},
      {CollOp::AllGather, 8, 1 << 20, "mid", "test", Buffers::Symmetric},
      {CollOp::AllGather, 2, 0, "pairs", "test"},
      {CollOp::AllGather, 0, 0, "large", "test"},
  };
  using V = std::vector<std::string>;
  auto names = [&](int ranks, size_t bytes, bool symmetric) {
    V out;
    for (const char* a : table_choices(table, CollOp::AllGather, ranks, bytes, symmetric))
      out.emplace_back(a);
    return out;
  };
  EXPECT_EQ(names(4, 1000, true), (V{"small", "mid", "large"}));
  EXPECT_EQ(names(4, 1000, false), (V{"small", "large"}));
  EXPECT_EQ(names(2, 2 << 20, true), (V{"pairs", "large"}));
  EXPECT_EQ(names(8, 100 << 10, true), (V{"mid", "large"}));
  EXPECT_EQ(names(16, 2 << 20, true), (V{"large"}));
  EXPECT_TRUE(table_choices(table, CollOp::Broadcast, 4, 1000, true).empty());
  EXPECT_STREQ(table_choice(table, CollOp::AllGather, 8, 100 << 10, true), "mid");
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

// The table's pick for a call, or "(registry order)" where no row matches.
std::string pick(CollOp op, int ranks, size_t bytes, bool symmetric) {
  const char* p = table_choice(selection_table(), op, ranks, bytes, symmetric);
  return std::string(p ? p : "(registry order)");
}

// The measured decisions the table encodes for the largest data movements: copy engines
// (ce) for all-to-all past 256 MiB and all-gather past 64 MiB sent, only where peers write
// the buffers in place (other buffers get sm, or on 8 ranks no row: the registry's first,
// sm); the same for 8 ranks (extrapolated rows).
TEST(Selection, CopyEnginesForTheLargestMovesOnSymmetricBuffers) {
  for (int ranks : {4, 8}) {
    SCOPED_TRACE(ranks);
    EXPECT_EQ(pick(CollOp::AllToAll, ranks, size_t{1} << 30, true), "ce");
    EXPECT_NE(pick(CollOp::AllToAll, ranks, size_t{1} << 30, false), "ce");
    EXPECT_EQ(pick(CollOp::AllGather, ranks, size_t{128} << 20, true), "ce");
    EXPECT_NE(pick(CollOp::AllGather, ranks, size_t{128} << 20, false), "ce");
  }
}

// Between sm's small sizes and ce's largest, direct (SM stores straight into the members'
// receive buffers, between barriers in one launch) on buffers peers write in place: all-to-all
// from 4 MiB to 256 MiB per rank, all-gather from 1 MiB to 64 MiB sent; sm below and on other
// buffers; teams of 4 measured, 8 extrapolated, larger ones keep sm.
TEST(Selection, DirectStoresForMidSizesOnSymmetricBuffers) {
  for (int ranks : {4, 8}) {
    SCOPED_TRACE(ranks);
    EXPECT_EQ(pick(CollOp::AllToAll, ranks, size_t{2} << 20, true), "sm");
    EXPECT_EQ(pick(CollOp::AllToAll, ranks, size_t{4} << 20, true), "direct");
    EXPECT_EQ(pick(CollOp::AllToAll, ranks, size_t{256} << 20, true), "direct");
    EXPECT_EQ(pick(CollOp::AllToAll, ranks, size_t{16} << 20, false), "sm");
    EXPECT_EQ(pick(CollOp::AllGather, ranks, size_t{512} << 10, true), "sm");
    EXPECT_EQ(pick(CollOp::AllGather, ranks, size_t{1} << 20, true), "direct");
    EXPECT_EQ(pick(CollOp::AllGather, ranks, size_t{64} << 20, true), "direct");
    EXPECT_EQ(pick(CollOp::AllGather, ranks, size_t{32} << 20, false), "sm");
  }
  EXPECT_EQ(pick(CollOp::AllToAll, 16, size_t{16} << 20, true), "sm");
}

// Small reduce-scatters on 4 ranks: ll to 256 KiB per rank (input), then sm, whose single
// kernel ties or beats NCCL at 512 KiB since its launches use PDL (no NCCL row between them).
TEST(Selection, SmallReduceScattersStayWithSymcommOnFourRanks) {
  EXPECT_EQ(pick(CollOp::ReduceScatter, 4, size_t{256} << 10, true), "ll");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 4, size_t{512} << 10, true), "sm");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 4, size_t{1} << 20, true), "sm");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 4, size_t{2} << 20, true), "twoshot");
}

// Broadcasts on 4 ranks into symmetric buffers: sm to 512 KiB, where it ties or beats NCCL
// since d52510d (7.0 against 10.7 us at 256 KiB); NCCL at 1 MiB, relay past it to 2 MiB,
// NCCL beyond. Plain buffers (not measured past 128 KiB) keep sm to 128 KiB.
TEST(Selection, BroadcastsToHalfAMebibyteStayWithSmOnFourRanks) {
  EXPECT_EQ(pick(CollOp::Broadcast, 4, size_t{256} << 10, true), "sm");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, size_t{512} << 10, true), "sm");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, size_t{1} << 20, true), "nccl");
  // Past 1 MiB to 2 MiB relay (1.05-1.06x NCCL at 2 MiB), symmetric buffers only; then NCCL.
  EXPECT_EQ(pick(CollOp::Broadcast, 4, (size_t{1} << 20) + 16, true), "relay");
  EXPECT_EQ(pick(CollOp::Broadcast, 3, size_t{2} << 20, true), "relay");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, size_t{2} << 20, false), "nccl");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, (size_t{2} << 20) + 16, true), "nccl");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, size_t{128} << 10, false), "sm");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, size_t{256} << 10, false), "nccl");
}

// Broadcast and reduce-scatter, where sm is 0.43-0.70x NCCL past its rows on 4 ranks: larger
// teams get NCCL there too (extrapolated rows), not the registry's first (sm); except
// broadcasts past 256 KiB to 16 MiB into symmetric buffers, which relay moves in two hops
// where NCCL's ring takes seven (below, sm: relay's round trip per call costs it more).
TEST(Selection, LargeBroadcastsAndReduceScattersGoToNcclOnLargerTeams) {
  for (int ranks : {8, 16}) {
    SCOPED_TRACE(ranks);
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{4} << 10, false), "sm");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{64} << 10, true), "sm");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{256} << 10, true), "sm");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, (size_t{256} << 10) + 16, true), "relay");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{128} << 10, false), "nccl");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{1} << 20, false), "nccl");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{1} << 20, true), "relay");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, size_t{16} << 20, true), "relay");
    EXPECT_EQ(pick(CollOp::Broadcast, ranks, (size_t{16} << 20) + 1, true), "nccl");
    EXPECT_EQ(pick(CollOp::ReduceScatter, ranks, size_t{4} << 10, false), "ll");
    EXPECT_EQ(pick(CollOp::ReduceScatter, ranks, size_t{64} << 20, true), "twoshot");
    EXPECT_EQ(pick(CollOp::ReduceScatter, ranks, size_t{64} << 20, false), "sm");
    EXPECT_EQ(pick(CollOp::ReduceScatter, ranks, size_t{1} << 30, true), "nccl");
  }
}

// All-to-all-v is indexed by what this rank sends, which differs between members: a row
// would give members different algorithms (a hang). The table has none.
TEST(Selection, NoRowsForAllToAllv) {
  for (const SelectionRow& row : selection_table())
    EXPECT_NE(row.op, CollOp::AllToAllv) << row.algorithm << " (" << row.source << ")";
}

// Teams of 2 (measured on 2 x H200): ll's packets for small moves, sm for mid-size
// reductions and broadcasts, twoshot for large reductions on symmetric buffers.
TEST(Selection, TeamsOfTwo) {
  EXPECT_EQ(pick(CollOp::AllToAll, 2, 64 << 10, false), "ll");
  EXPECT_EQ(pick(CollOp::AllToAll, 2, 1 << 20, false), "sm");
  EXPECT_EQ(pick(CollOp::AllGather, 2, 64 << 10, false), "ll");
  EXPECT_EQ(pick(CollOp::AllGather, 2, 1 << 20, true), "sm");
  EXPECT_EQ(pick(CollOp::AllGather, 2, 4 << 20, true), "direct");
  EXPECT_EQ(pick(CollOp::Broadcast, 2, 8 << 20, false), "sm");
  EXPECT_EQ(pick(CollOp::Broadcast, 2, size_t{1} << 30, true), "ce");
  EXPECT_EQ(pick(CollOp::Broadcast, 2, size_t{1} << 30, false), "nccl");
  EXPECT_EQ(pick(CollOp::AllReduce, 2, 256 << 10, true), "sm");
  EXPECT_EQ(pick(CollOp::AllReduce, 2, size_t{1} << 30, true), "twoshot");
  EXPECT_EQ(pick(CollOp::AllReduce, 2, size_t{1} << 30, false), "sm");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 2, 1 << 20, true), "sm");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 2, 8 << 20, false), "twoshot");
  // Teams of 3 and 4 keep the 4-rank rows.
  EXPECT_EQ(pick(CollOp::AllToAll, 3, 64 << 10, false), "sm");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, 8 << 20, false), "nccl");
}

}  // namespace
}  // namespace symcomm
