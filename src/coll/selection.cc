#include "coll/selection.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <sstream>

#include "base/error.h"

namespace symcomm {
namespace {

// The operations that have rows (all-to-all-v has none: selection.h).
const CollOp kRowOps[] = {CollOp::AllGather, CollOp::AllToAll, CollOp::ReduceScatter,
                          CollOp::AllReduce, CollOp::Broadcast};

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Parses a positive decimal number; false where `s` is not one or exceeds `max`.
bool parse_count(const std::string& s, unsigned long long max, unsigned long long* out) {
  if (s.empty() || s.size() > 19) return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + static_cast<unsigned long long>(c - '0');
  }
  if (v == 0 || v > max) return false;
  *out = v;
  return true;
}

// The GPU count of a machine kind's file, named <card>x<N>.txt; 0 where the name is not so.
int kind_gpus(const std::string& name) {
  const std::string base = base_name(name);
  const std::string ext = ".txt";
  if (base.size() <= ext.size() || base.compare(base.size() - ext.size(), ext.size(), ext) != 0)
    return 0;
  const std::string stem = base.substr(0, base.size() - ext.size());
  const size_t x = stem.rfind('x');
  unsigned long long n = 0;
  if (x == 0 || x == std::string::npos || !parse_count(stem.substr(x + 1), INT_MAX, &n)) return 0;
  return static_cast<int>(n);
}

// Where a row goes in the walk: by operation, then team bound ("any" last).
std::pair<std::string, long> walk_key(const SelectionRow& row) {
  return {coll_op_name(row.op), row.max_team == 0 ? LONG_MAX : row.max_team};
}

}  // namespace

std::vector<SelectionRow> parse_selection_file(const std::string& name, const std::string& text) {
  const int gpus = kind_gpus(name);
  SYMCOMM_REQUIRE(gpus > 0, symcommInternalError,
                  "selection data %s: the file of a machine kind is named <card>x<GPUs>.txt "
                  "(h200x4.txt: rows measured on 4 x H200)", name.c_str());
  std::vector<SelectionRow> rows;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream words(line);
    std::vector<std::string> col;
    for (std::string w; words >> w;) col.push_back(w);
    if (col.empty()) continue;
    const std::string where = format("selection data %s:%d", name.c_str(), number);
    SYMCOMM_REQUIRE(col.size() == 6, symcommInternalError,
                    "%s: %zu columns where a row has 6: op team bytes buffers algorithm source",
                    where.c_str(), col.size());
    SelectionRow row;
    row.file = name;
    row.line = number;
    bool known = false;
    for (CollOp op : kRowOps)
      if (col[0] == coll_op_name(op)) {
        row.op = op;
        known = true;
      }
    SYMCOMM_REQUIRE(col[0] != coll_op_name(CollOp::AllToAllv), symcommInternalError,
                    "%s: alltoallv has no rows: its bytes per rank differ between members, so a "
                    "row could give them different algorithms", where.c_str());
    SYMCOMM_REQUIRE(known, symcommInternalError,
                    "%s: op '%s' is none of allgather, alltoall, reducescatter, allreduce, "
                    "broadcast", where.c_str(), col[0].c_str());
    unsigned long long team = 0;
    SYMCOMM_REQUIRE(col[1] == "any" || parse_count(col[1], static_cast<unsigned>(gpus), &team),
                    symcommInternalError,
                    "%s: team '%s' is neither 'any' nor a number of ranks from 1 to %d (the "
                    "GPUs of this machine kind)", where.c_str(), col[1].c_str(), gpus);
    row.max_team = static_cast<int>(team);
    if (col[2] != "any") {
      std::string digits = col[2];
      unsigned long long unit = 1;
      for (const auto& [suffix, scale] : {std::pair<const char*, unsigned long long>{"KiB", 1ull << 10},
                                          {"MiB", 1ull << 20}, {"GiB", 1ull << 30}}) {
        const size_t n = std::char_traits<char>::length(suffix);
        if (digits.size() > n && digits.compare(digits.size() - n, n, suffix) == 0) {
          digits.resize(digits.size() - n);
          unit = scale;
        }
      }
      unsigned long long count = 0;
      SYMCOMM_REQUIRE(parse_count(digits, SIZE_MAX / unit, &count), symcommInternalError,
                      "%s: bytes '%s' is neither 'any' nor a positive count of bytes (65536, "
                      "64KiB, 1MiB, 1GiB)", where.c_str(), col[2].c_str());
      row.max_bytes = static_cast<size_t>(count * unit);
    }
    SYMCOMM_REQUIRE(col[3] == "any" || col[3] == "symmetric", symcommInternalError,
                    "%s: buffers '%s' is neither 'any' nor 'symmetric'", where.c_str(),
                    col[3].c_str());
    row.buffers = col[3] == "symmetric" ? Buffers::Symmetric : Buffers::Any;
    row.algorithm = col[4];
    row.source = col[5];
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<SelectionRow> parse_selection(const std::vector<SelectionFile>& files) {
  std::vector<const SelectionFile*> order;
  for (const SelectionFile& f : files) order.push_back(&f);
  std::stable_sort(order.begin(), order.end(), [](const SelectionFile* a, const SelectionFile* b) {
    return kind_gpus(a->name) < kind_gpus(b->name);
  });
  std::vector<SelectionRow> rows;
  for (const SelectionFile* f : order)
    for (SelectionRow& row : parse_selection_file(f->name, f->text)) rows.push_back(std::move(row));
  std::stable_sort(rows.begin(), rows.end(), [](const SelectionRow& a, const SelectionRow& b) {
    return walk_key(a) < walk_key(b);
  });
  return rows;
}

const std::vector<SelectionRow>& selection_table() {
  static const std::vector<SelectionRow> table = [] {
    std::vector<SelectionRow> rows = parse_selection(selection_files());
    for (SelectionRow& row : rows) {
      row.impl = find_coll_algorithm(row.algorithm.c_str());
      SYMCOMM_REQUIRE(row.impl, symcommInternalError,
                      "selection data %s:%d: no collective algorithm '%s' is registered",
                      row.file.c_str(), row.line, row.algorithm.c_str());
    }
    return rows;
  }();
  return table;
}

bool row_matches(const SelectionRow& row, const SelectionCall& call) {
  return row.op == call.op && !call.across_nodes &&
         (row.buffers != Buffers::Symmetric || call.symmetric) &&
         (row.max_team <= 0 || call.team_size <= row.max_team) &&
         (row.max_bytes == 0 || call.bytes <= row.max_bytes);
}

std::string selection_text() {
  std::string out;
  for (const SelectionRow& row : selection_table()) {
    out += format("%s, teams %s, %s%s: %s (%s:%d, %s)\n", coll_op_name(row.op),
                  row.max_team ? format("<= %d", row.max_team).c_str() : "of any size",
                  row.max_bytes ? ("<= " + format_bytes(row.max_bytes)).c_str() : "any size",
                  row.buffers == Buffers::Symmetric ? ", symmetric buffers" : "",
                  row.algorithm.c_str(), base_name(row.file).c_str(), row.line,
                  row.source.c_str());
  }
  out += "a call takes the first matching row whose algorithm can run it; otherwise the first "
         "registered algorithm that can (rows apply to teams on one node: a team that spans "
         "nodes takes the registry's order)\n";
  return out;
}

}  // namespace symcomm
