// The selection table: for each operation, size thresholds (bytes per rank) and team sizes,
// the algorithm to use. Rows are tried in order; the first whose operation, team size and
// size bound match (and, for rows of symmetric buffers, whose buffers are) and whose
// algorithm supports the call wins; when none does, the first
// registered algorithm that supports it. The table is measured on 8 x H200: each row says
// which run produced it (bench/results/h200x8/coll.jsonl); `symcomm-info` prints it.
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
  CollOp op;
  int max_team;        // the row applies to teams of at most this many ranks (0: any)
  size_t max_bytes;    // ... and to at most this many bytes per rank (0: any)
  const char* algorithm;
  const char* source;  // the measurement that chose it
  Buffers buffers = Buffers::Any;
};

const std::vector<SelectionRow>& selection_table();
// Whether `row` applies to a call of `op` over a team of `team_size` moving `bytes` per rank
// (symmetric: the call's buffers are symmetric or registered). choose_algorithm (coll.cc)
// takes the first matching row, in table order, whose algorithm can run the call.
bool row_matches(const SelectionRow& row, CollOp op, int team_size, size_t bytes,
                 bool symmetric);
// The table as text, a row per line ("allgather, teams <= 8, <= 64 KiB: sm_oneshot (...)").
std::string selection_text();

}  // namespace symcomm
