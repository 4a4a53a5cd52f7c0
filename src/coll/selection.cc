#include "coll/selection.h"

#include "base/error.h"

namespace symcomm {

const std::vector<SelectionRow>& selection_table() {
  // Rows from bench/selection_rows.py --margin 0.05 (another algorithm displaces sm only
  // where it is more than 5% faster). Measured on 4 x H200 (8 were not lent), so they bound
  // teams of at most 4; larger teams, and calls whose row names an algorithm that cannot run
  // (no NCCL), fall through to the registry order ("sm" on GPUs, "copy" in the host space).
  static const char* const kRun4 =
      "bench/results/h200x4/coll_a45e7a6.jsonl (2026-11-21, commit a45e7a6)";
  static const std::vector<SelectionRow> table = {
      {CollOp::AllGather, 4, 0, "sm", kRun4},
      {CollOp::AllReduce, 4, 32768, "ll", kRun4},
      {CollOp::AllReduce, 4, 131072, "sm", kRun4},
      {CollOp::AllReduce, 4, 0, "nccl", kRun4},
      {CollOp::AllToAll, 4, 32, "sm", kRun4},
      {CollOp::AllToAll, 4, 128, "nccl", kRun4},
      {CollOp::AllToAll, 4, 0, "sm", kRun4},
      {CollOp::Broadcast, 4, 131072, "sm", kRun4},
      {CollOp::Broadcast, 4, 0, "nccl", kRun4},
      {CollOp::ReduceScatter, 4, 131072, "ll", kRun4},
      {CollOp::ReduceScatter, 4, 524288, "nccl", kRun4},
      {CollOp::ReduceScatter, 4, 536870912, "sm", kRun4},
      {CollOp::ReduceScatter, 4, 0, "nccl", kRun4},
  };
  return table;
}

const char* table_choice(const std::vector<SelectionRow>& table, CollOp op, int team_size,
                         size_t bytes) {
  for (const SelectionRow& row : table) {
    if (row.op != op) continue;
    if (row.max_team > 0 && team_size > row.max_team) continue;
    if (row.max_bytes > 0 && bytes > row.max_bytes) continue;
    return row.algorithm;
  }
  return nullptr;
}

std::string selection_text() {
  std::string out;
  for (const SelectionRow& row : selection_table()) {
    out += format("%s, teams %s, %s: %s (%s)\n", coll_op_name(row.op),
                  row.max_team ? format("<= %d", row.max_team).c_str() : "of any size",
                  row.max_bytes ? ("<= " + format_bytes(row.max_bytes)).c_str() : "any size",
                  row.algorithm, row.source);
  }
  out += "otherwise: the first registered algorithm that supports the call\n";
  return out;
}

}  // namespace symcomm
