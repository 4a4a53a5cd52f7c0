#include "coll/selection.h"

#include "base/error.h"

namespace symcomm {

const std::vector<SelectionRow>& selection_table() {
  // Rows arrive with their measurements (bench/selection_rows.py); without one, an operation
  // falls through to the registry order ("sm" on GPUs, "copy" in the host space).
  static const std::vector<SelectionRow> table = {};
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
