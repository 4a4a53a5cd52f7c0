// The selection table: which algorithm the automatic choice gives a call, by operation, team
// size, bytes per rank and kind of buffers, as measured. The rows are data: one file per
// machine kind in src/coll/selection/ (h200x2.txt: teams of 2, measured on 2 x H200; ...),
// embedded into the library at build time (cmake/embed_selection.cmake) and parsed at first
// use. bench/selection_rows.py writes rows from a benchmark run; `symcomm-info` prints them.
//
// A data file holds one row per line; '#' starts a comment. Columns, separated by spaces:
//   op         allgather, alltoall, reducescatter, allreduce or broadcast (not alltoallv: its
//              bytes per rank differ between members, so a row could give them different
//              algorithms)
//   team       the row is for teams of at most this many ranks, or "any"; at most the
//              machine kind's GPU count (the <N> of <card>x<N>.txt), or "any"
//   bytes      ... and for at most this many bytes per rank (what CollArgs::bytes_per_rank
//              counts: an all-gather's send size), as 65536, 64KiB, 1MiB or 1GiB; or "any"
//   buffers    "any", or "symmetric": only calls whose buffers peers write in place
//              (CollArgs::symmetric: symmetric or registered)
//   algorithm  a registered collective algorithm's name
//   source     the results file that chose the row (bench/results/...)
//
// The walk (select_row): rows are tried by operation, then team bound (smallest first, "any"
// last: so a team takes the rows of the smallest machine kind that covers it, then those of
// larger kinds), then in file order; the first row that matches the call and whose algorithm
// can run it wins. Where none does, choose_algorithm (coll.cc) takes the registry's order.
//
// Every row was measured on one node: a row applies to teams whose members are on one node.
// A team that spans nodes takes the registry's order, in which the hierarchical algorithm
// (hier) comes before copy: hier where it can run the call, else copy.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coll/coll.h"

namespace symcomm {

// Which calls a row is for: any, or only those whose buffers peers address in place
// (CollArgs::symmetric; an algorithm such as twoshot is faster on them than when it stages).
enum class Buffers { Any, Symmetric };

struct SelectionRow {
  CollOp op = CollOp::AllGather;
  int max_team = 0;      // the row applies to teams of at most this many ranks (0: any)
  size_t max_bytes = 0;  // ... and to at most this many bytes per rank (0: any)
  Buffers buffers = Buffers::Any;
  std::string algorithm;
  std::string source;    // the measurement that chose it
  std::string file;      // where the row is written: its data file's name and line
  int line = 0;
  CollAlgorithm* impl = nullptr;  // the registered `algorithm` (selection_table() fills it)
};

// What a row is matched against: a call's operation, team size, bytes per rank, whether its
// buffers are symmetric (or registered), and whether the team spans nodes.
struct SelectionCall {
  CollOp op;
  int team_size;
  size_t bytes;
  bool symmetric;
  bool across_nodes = false;
};

// An embedded data file: its name (<card>x<N>.txt) and text. The build generates the list.
struct SelectionFile {
  const char* name;
  const char* text;
};
const std::vector<SelectionFile>& selection_files();

// The rows of one data file, in file order. Throws symcommInternalError naming the file, the
// line and what is wrong for a malformed row.
std::vector<SelectionRow> parse_selection_file(const std::string& name, const std::string& text);
// The rows of `files`, in walk order (above).
std::vector<SelectionRow> parse_selection(const std::vector<SelectionFile>& files);

// The library's table: the embedded files, parsed at first use, each row's algorithm looked
// up in the registry (a row naming none is an error naming its file and line).
const std::vector<SelectionRow>& selection_table();

// Whether `row` applies to `call` (never to a team that spans nodes: see above).
bool row_matches(const SelectionRow& row, const SelectionCall& call);

// The walk: the first row of `rows` that matches `call` and that `runs` accepts (whose
// algorithm can run the call); nullptr where none does. The rows after a refused one are
// the choices measured for the nearest sizes, closer to the call than the registry's order.
template <typename Runs>
const SelectionRow* select_row(const std::vector<SelectionRow>& rows, const SelectionCall& call,
                               Runs&& runs) {
  for (const SelectionRow& row : rows)
    if (row_matches(row, call) && runs(row)) return &row;
  return nullptr;
}

// The table as text, a row per line ("allgather, teams <= 4, <= 512 KiB: sm (h200x4.txt:9,
// bench/results/...)"), and a closing line on what happens where no row's algorithm can run.
std::string selection_text();

}  // namespace symcomm
