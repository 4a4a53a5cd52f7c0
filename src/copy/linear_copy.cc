#include <algorithm>

#include "copy/box.h"

namespace symcomm {

int64_t linear_row(int64_t elements, size_t elem) {
  const int64_t fit = kLinearRowBytes / static_cast<int64_t>(std::max<size_t>(elem, 1));
  const int64_t shortest = std::clamp<int64_t>(fit, 1, kLinearRow);
  int64_t row = kLinearRow;
  while (row / 2 >= shortest && elements / row < kLinearRows) row /= 2;
  return row;
}

void append_linear_copy(std::vector<BoxCopy>& out, void* dst, const void* src, int64_t elements,
                        size_t elem, int peer, int64_t row) {
  const int64_t se = static_cast<int64_t>(elem);
  if (row <= 0) row = linear_row(elements, elem);
  const BoxLayout rows{{1, row, 0}, {0, 0, 0}};
  if (const int64_t full = elements / row; full > 0)
    out.push_back({dst, rows, src, rows, {0, 0, 0}, {row, full, 1}, peer});
  if (const int64_t rest = elements % row; rest > 0) {
    const int64_t at = elements / row * row * se;
    out.push_back({static_cast<char*>(dst) + at, rows, static_cast<const char*>(src) + at, rows,
                   {0, 0, 0}, {rest, 1, 1}, peer});
  }
}

}  // namespace symcomm
