// The collective selection: the data files' parser, the walk (select_row, as choose_algorithm
// calls it) and what must hold of the embedded rows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "base/error.h"
#include "coll/selection.h"

namespace symcomm {
namespace {

// The operations the selection serves: every one but all-to-all-v (a row could give its
// members different algorithms: its bytes per rank differ between them).
const CollOp kServed[] = {CollOp::AllGather, CollOp::AllToAll, CollOp::ReduceScatter,
                          CollOp::AllReduce, CollOp::Broadcast};

constexpr size_t KiB = size_t{1} << 10, MiB = size_t{1} << 20, GiB = size_t{1} << 30;

// Whether `algorithm` can run the calls `row` gives it, as far as its descriptor says: the
// row's operation, in the cuda space (where the rows were measured), on its kind of buffers,
// and teams of the row's bound where both bound them (a row for teams of any size gives
// larger teams than an algorithm runs to the next row). The rest (reach, alignment, NCCL's
// library) depends on the call and the communicator: choose_algorithm asks can_implement.
bool can_run_rows(const CollAlgorithm& algorithm, const SelectionRow& row) {
  const CollDescriptor& d = algorithm.descriptor();
  return (d.ops & op_bit(row.op)) && (d.spaces & kCudaSpace) &&
         (!d.in_place_recv || row.buffers == Buffers::Symmetric) &&
         (d.max_team == 0 || row.max_team == 0 || row.max_team <= d.max_team);
}

// The algorithm of the first row of `rows` that matches the call and whose algorithm is not
// in `refused` (as choose_algorithm walks them, an algorithm that cannot run a call being
// refused); "(none)" where no row is left.
std::string choice(const std::vector<SelectionRow>& rows, CollOp op, int team, size_t bytes,
                   bool symmetric, const std::vector<std::string>& refused = {}) {
  const SelectionRow* row = select_row(rows, {op, team, bytes, symmetric}, [&](const SelectionRow& r) {
    for (const std::string& name : refused)
      if (r.algorithm == name) return false;
    return true;
  });
  return row ? row->algorithm : "(none)";
}

// The library's pick for a call, from the embedded rows (every algorithm taken as able).
std::string pick(CollOp op, int team, size_t bytes, bool symmetric,
                 const std::vector<std::string>& refused = {}) {
  return choice(selection_table(), op, team, bytes, symmetric, refused);
}

// The message of the error that parsing `text` as `name` throws ("" where it throws none).
std::string parse_error(const std::string& text, const std::string& name = "h200x4.txt") {
  try {
    parse_selection_file(name, text);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), symcommInternalError);
    return e.what();
  }
  return "";
}

TEST(SelectionData, ParsesRowsCommentsAndUnits) {
  const std::vector<SelectionRow> rows = parse_selection_file("src/coll/selection/h200x4.txt",
      "# a comment line\n"
      "\n"
      "allgather  4    64KiB  any        ll       bench/a.jsonl\n"
      "  alltoall any  65536  symmetric  direct   bench/b.jsonl   # a comment after a row\n"
      "broadcast\t2\t1GiB\tany\tnccl\tbench/c.jsonl\n"
      "allreduce  3    any    any        twoshot  bench/d.jsonl\n"
      "reducescatter 1 12MiB  symmetric  sm       bench/e.jsonl");
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_EQ(rows[0].op, CollOp::AllGather);
  EXPECT_EQ(rows[0].max_team, 4);
  EXPECT_EQ(rows[0].max_bytes, 64 * KiB);
  EXPECT_EQ(rows[0].buffers, Buffers::Any);
  EXPECT_EQ(rows[0].algorithm, "ll");
  EXPECT_EQ(rows[0].source, "bench/a.jsonl");
  EXPECT_EQ(rows[0].file, "src/coll/selection/h200x4.txt");
  EXPECT_EQ(rows[0].line, 3);
  EXPECT_EQ(rows[1].op, CollOp::AllToAll);
  EXPECT_EQ(rows[1].max_team, 0);
  EXPECT_EQ(rows[1].max_bytes, 65536u);
  EXPECT_EQ(rows[1].buffers, Buffers::Symmetric);
  EXPECT_EQ(rows[1].source, "bench/b.jsonl");
  EXPECT_EQ(rows[2].op, CollOp::Broadcast);
  EXPECT_EQ(rows[2].max_bytes, GiB);
  EXPECT_EQ(rows[3].op, CollOp::AllReduce);
  EXPECT_EQ(rows[3].max_bytes, 0u);
  EXPECT_EQ(rows[4].op, CollOp::ReduceScatter);
  EXPECT_EQ(rows[4].max_bytes, 12 * MiB);
  EXPECT_EQ(rows[4].line, 7);
}

TEST(SelectionData, MalformedRowsAreErrorsNamingFileAndLine) {
  const std::string ok = "allgather 4 64KiB any ll bench/a.jsonl\n# comment\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"allgather 4 64KiB any ll", "5 columns where a row has 6"},
      {"allgather 4 64KiB any ll bench/a.jsonl extra", "7 columns where a row has 6"},
      {"allgathr 4 64KiB any ll bench/a.jsonl", "op 'allgathr' is none of"},
      {"alltoallv 4 64KiB any ll bench/a.jsonl", "alltoallv has no rows"},
      {"allgather 5 64KiB any ll bench/a.jsonl", "team '5' is neither 'any' nor a number of ranks from 1 to 4"},
      {"allgather 0 64KiB any ll bench/a.jsonl", "team '0'"},
      {"allgather four 64KiB any ll bench/a.jsonl", "team 'four'"},
      {"allgather 4 64kB any ll bench/a.jsonl", "bytes '64kB' is neither 'any' nor"},
      {"allgather 4 0 any ll bench/a.jsonl", "bytes '0'"},
      {"allgather 4 KiB any ll bench/a.jsonl", "bytes 'KiB'"},
      {"allgather 4 99999999999GiB any ll bench/a.jsonl", "bytes '99999999999GiB'"},
      {"allgather 4 64KiB plain ll bench/a.jsonl", "buffers 'plain' is neither 'any' nor 'symmetric'"},
  };
  EXPECT_EQ(parse_error(ok), "");
  for (const auto& [row, why] : cases) {
    SCOPED_TRACE(row);
    const std::string message = parse_error(ok + row + "\n");
    EXPECT_NE(message.find("selection data h200x4.txt:3: " + why), std::string::npos) << message;
  }
  // A file's name says its machine kind: <card>x<GPUs>.txt.
  for (const char* name : {"h200.txt", "h200x4.tsv", "h200x0.txt", "x4.txt"}) {
    SCOPED_TRACE(name);
    EXPECT_NE(parse_error(ok, name).find(std::string("selection data ") + name +
                                         ": the file of a machine kind is named <card>x<GPUs>.txt"),
              std::string::npos);
  }
}

// Rows are walked by operation, then team bound (any last), then in file order, files by
// their machine kind's GPU count (h200x16 after h200x8).
TEST(SelectionData, WalkOrder) {
  const std::vector<SelectionFile> files = {
      {"h200x16.txt", "allgather 16 any any x16 s\nallgather any any any x16any s\n"},
      {"h200x8.txt", "allgather any 1KiB any x8any s\nallgather 8 any any x8 s\n"
                     "allreduce 8 any any ar8 s\n"},
      {"h200x4.txt", "allreduce 4 1KiB any ar4a s\nallgather 4 any any x4 s\n"
                     "allreduce 4 2KiB symmetric ar4b s\n"},
  };
  std::vector<std::string> order;
  for (const SelectionRow& row : parse_selection(files)) order.push_back(row.algorithm);
  EXPECT_EQ(order, (std::vector<std::string>{"x4", "x8", "x16", "x8any", "x16any", "ar4a",
                                             "ar4b", "ar8"}));
}

// The walk takes the first matching row whose algorithm runs the call; where one does not,
// the next matching row's; symmetric rows only for symmetric calls.
TEST(SelectionWalk, FirstMatchingRowThatRuns) {
  const std::vector<SelectionRow> rows = parse_selection({{"h100x8.txt",
      "allgather      4    64KiB  any        small  s\n"
      "allreduce      any  any    any        other  s\n"
      "allgather      8    1MiB   symmetric  mid    s\n"
      "allgather      2    any    any        pairs  s\n"
      "allgather      any  any    any        large  s\n"}});
  EXPECT_EQ(choice(rows, CollOp::AllGather, 4, 1000, true), "small");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 4, 64 * KiB, false), "small");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 4, 64 * KiB + 1, false), "large");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 4, 1000, true, {"small"}), "mid");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 4, 1000, false, {"small"}), "large");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 2, 2 * MiB, true), "pairs");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 8, 100 * KiB, true), "mid");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 8, 100 * KiB, false), "large");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 16, 2 * MiB, true), "large");
  EXPECT_EQ(choice(rows, CollOp::AllGather, 16, 2 * MiB, true, {"large"}), "(none)");
  EXPECT_EQ(choice(rows, CollOp::Broadcast, 4, 1000, true), "(none)");
  EXPECT_EQ(choice(rows, CollOp::AllReduce, 64, GiB, false), "other");
}

TEST(SelectionTable, EveryRowNamesARegisteredAlgorithmThatCanRunIt) {
  ASSERT_FALSE(selection_table().empty());
  for (const SelectionRow& row : selection_table()) {
    SCOPED_TRACE(row.file + ":" + std::to_string(row.line));
    CollAlgorithm* registered = nullptr;
    for (CollAlgorithm* a : coll_algorithms())
      if (row.algorithm == a->name()) registered = a;
    ASSERT_NE(registered, nullptr) << row.algorithm;
    EXPECT_EQ(row.impl, registered);
    EXPECT_TRUE(can_run_rows(*registered, row)) << row.algorithm;
  }
}

// Within an operation, team bound and kind of buffers, each row's byte bound is above the
// one before it (a row at or below an earlier bound would never be reached first), and only
// the last has none.
TEST(SelectionTable, BoundsIncreaseWithinEachGroup) {
  std::map<std::tuple<CollOp, int, Buffers>, const SelectionRow*> last;
  for (const SelectionRow& row : selection_table()) {
    const SelectionRow*& before = last[{row.op, row.max_team, row.buffers}];
    if (before) {
      SCOPED_TRACE(row.file + ":" + std::to_string(row.line) + " after line " +
                   std::to_string(before->line));
      EXPECT_NE(before->max_bytes, 0u) << "a row after one for any size";
      if (row.max_bytes) {
        EXPECT_GT(row.max_bytes, before->max_bytes);
      }
    }
    before = &row;
  }
}

// Every operation the selection serves has rows in every machine kind's file; all-to-all-v
// has none.
TEST(SelectionTable, RowsForEveryOperationOnEveryMachineKind) {
  std::map<std::string, std::map<CollOp, int>> rows;  // file -> op -> rows
  for (const SelectionFile& f : selection_files()) rows[f.name];
  for (const SelectionRow& row : selection_table()) ++rows[row.file][row.op];
  ASSERT_FALSE(rows.empty());
  for (const auto& [file, ops] : rows) {
    for (CollOp op : kServed) EXPECT_GT(ops.count(op), 0u) << file << ": " << coll_op_name(op);
    EXPECT_EQ(ops.count(CollOp::AllToAllv), 0u) << file;
  }
}

// A team takes the rows of the smallest machine kind that covers it, then larger kinds':
// teams of 3 pick as teams of 4, teams of 5-7 as teams of 8, and teams larger than every
// kind only the rows for any team.
TEST(SelectionTable, MachineKindFallback) {
  std::vector<SelectionRow> any_team;
  for (const SelectionRow& row : selection_table())
    if (row.max_team == 0) any_team.push_back(row);
  ASSERT_FALSE(any_team.empty());
  for (CollOp op : kServed)
    for (int s = 0; s <= 34; ++s)
      for (size_t bytes : {size_t{1} << s, (size_t{1} << s) + 1})
        for (bool symmetric : {false, true}) {
          SCOPED_TRACE(std::string(coll_op_name(op)) + " " + std::to_string(bytes) +
                       (symmetric ? " symmetric" : ""));
          EXPECT_EQ(pick(op, 3, bytes, symmetric), pick(op, 4, bytes, symmetric));
          for (int team : {5, 7}) EXPECT_EQ(pick(op, team, bytes, symmetric), pick(op, 8, bytes, symmetric));
          EXPECT_EQ(pick(op, 16, bytes, symmetric), choice(any_team, op, 16, bytes, symmetric));
          EXPECT_EQ(pick(op, 1, bytes, symmetric), pick(op, 2, bytes, symmetric));
        }
  // Where a 2-rank row's algorithm cannot run a call, the 4-rank rows come next.
  EXPECT_EQ(pick(CollOp::AllGather, 2, 4 * MiB, true), "direct");
  EXPECT_EQ(pick(CollOp::AllToAll, 2, 64 * KiB, false, {"ll"}), "sm");
}

// The walk picks what the data says (spot checks of the measured choices).
TEST(SelectionTable, SpotChecks) {
  // Copy engines for the largest moves, on symmetric buffers only; direct's SM stores below.
  for (int team : {4, 8}) {
    SCOPED_TRACE(team);
    EXPECT_EQ(pick(CollOp::AllToAll, team, GiB, true), "ce");
    EXPECT_EQ(pick(CollOp::AllToAll, team, GiB, false), team == 4 ? "sm" : "(none)");
    EXPECT_EQ(pick(CollOp::AllToAll, team, 4 * MiB, true), "direct");
    EXPECT_EQ(pick(CollOp::AllGather, team, 64 * MiB, true), "direct");
    EXPECT_EQ(pick(CollOp::AllGather, team, 32 * MiB, false), "sm");
  }
  // Teams of 2: ll's packets for small moves, twoshot for large symmetric reductions.
  EXPECT_EQ(pick(CollOp::AllToAll, 2, 64 * KiB, false), "ll");
  EXPECT_EQ(pick(CollOp::AllReduce, 2, 256 * KiB, true), "sm");
  EXPECT_EQ(pick(CollOp::AllReduce, 2, GiB, true), "twoshot");
  EXPECT_EQ(pick(CollOp::AllReduce, 2, GiB, false), "sm");
  // ... and where twoshot cannot run one, the next matching row's algorithm.
  EXPECT_EQ(pick(CollOp::AllReduce, 2, GiB, true, {"twoshot"}), "sm");
  // Broadcasts on 4 ranks: sm to 512 KiB on symmetric buffers, NCCL at 1 MiB, relay to 2 MiB.
  EXPECT_EQ(pick(CollOp::Broadcast, 4, 512 * KiB, true), "sm");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, MiB, true), "nccl");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, MiB + 16, true), "relay");
  EXPECT_EQ(pick(CollOp::Broadcast, 4, 2 * MiB, false), "nccl");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 4, 512 * KiB, true), "sm");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 16, 16 * MiB + 1, true), "twoshot");
  EXPECT_EQ(pick(CollOp::Broadcast, 8, 4 * KiB, false), "sm");
  EXPECT_EQ(pick(CollOp::ReduceScatter, 8, 4 * KiB, false), "ll");
  EXPECT_EQ(pick(CollOp::Broadcast, 16, 16 * MiB, true), "relay");
  EXPECT_EQ(pick(CollOp::Broadcast, 16, 16 * MiB + 1, true), "nccl");
}

// symcomm-info's text: a line per row, symmetric rows marked, each citing where it is written
// and the run that chose it; then what happens past the rows.
TEST(SelectionTable, Text) {
  const std::string text = selection_text();
  std::istringstream lines(text);
  std::string line;
  for (const SelectionRow& row : selection_table()) {
    ASSERT_TRUE(std::getline(lines, line));
    EXPECT_EQ(line.rfind(coll_op_name(row.op), 0), 0u) << line;
    EXPECT_EQ(line.find("symmetric buffers") != std::string::npos, row.buffers == Buffers::Symmetric) << line;
    EXPECT_NE(line.find(": " + row.algorithm + " ("), std::string::npos) << line;
    EXPECT_NE(line.find(":" + std::to_string(row.line) + ", " + row.source + ")"), std::string::npos)
        << line;
  }
  ASSERT_TRUE(std::getline(lines, line));
  EXPECT_NE(line.find("otherwise the first registered algorithm"), std::string::npos) << line;
}

// For bench/test_selection_rows.py: the rows of the file SYMCOMM_SELECTION_FILE names, as
// the library reads them ("row op team bytes buffers algorithm"; 0 for "any").
TEST(Selection, DISABLED_ParsesTheFileNamedBySYMCOMM_SELECTION_FILE) {
  const char* path = std::getenv("SYMCOMM_SELECTION_FILE");
  ASSERT_NE(path, nullptr) << "SYMCOMM_SELECTION_FILE is not set";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream read;
  read << in.rdbuf();
  const std::string text = read.str();
  const std::vector<SelectionRow> rows = parse_selection({{path, text.c_str()}});
  EXPECT_FALSE(rows.empty());
  for (const SelectionRow& row : rows)
    std::printf("row %s %d %zu %s %s\n", coll_op_name(row.op), row.max_team, row.max_bytes,
                row.buffers == Buffers::Symmetric ? "symmetric" : "any", row.algorithm.c_str());
}

}  // namespace
}  // namespace symcomm
