// From a wgmma accumulator to the 8-bit A operand of the next wgmma, in registers (P in P·V), as
// data derived from the two fragments of emulation/layout.hpp (host and device): the map itself is
// layout::accumulator_to_a8, which the emulator reads too; here, how the kernels read it.
//
// P·V multiplies key key_of_column[p] by the row of V placed at position p, so V^T is stored with
// its keys permuted the same way within every group of 32 keys. The permutation changes no bit of
// P·V: the FP8 wgmma model fuses all 32 products of a k32 step into one exact sum before its single
// truncation (chunk L = 32, docs/mma-models.md), so the order of the keys within a group is
// invisible to it.
#pragma once

#include <array>

#include "emulation/layout.hpp"

namespace lowbit::kernels::sm90 {

// A fragment's maps as compile-time data for kernels: F(thread, v) = F(thread, 0) + F(0, v) (the
// maps are linear), the first part at run time, the second a table folded into the code.
template <layout::Fragment F>
LOWBIT_HD inline layout::Offset thread_offset(int thread) {
  return F(thread, 0);
}
template <layout::Fragment F>
LOWBIT_HD constexpr std::array<layout::Offset, F.value_count> value_offsets() {
  std::array<layout::Offset, F.value_count> table{};
  for (int v = 0; v < F.value_count; ++v) table[v] = F(0, v);
  return table;
}

using layout::AccumulatorToA8;
using layout::accumulator_to_a8;

// The values of an m64nN accumulator that a thread holds in each of its two rows (its row r and
// r + 8: layout::wgmma_m64_d), in column order: value[h][k] is the value index of the k-th
// column the thread holds in row r + 8h.
struct AccumulatorRows {
  int per_row = 0;
  std::array<std::array<int, 64>, 2> value{};
  bool consistent = false;  // two rows, 8 apart, the same count in each
};

LOWBIT_HD constexpr AccumulatorRows accumulator_rows(int n) {
  const layout::Fragment d = layout::wgmma_m64_d(n);
  AccumulatorRows rows;
  rows.per_row = d.value_count / 2;
  int count[2] = {0, 0};
  bool ok = rows.per_row <= 64;
  for (int h = 0; h < 2 && ok; ++h)
    for (int col = 0; col < d.cols; ++col)  // column order
      for (int v = 0; v < d.value_count; ++v)
        if (d(0, v).row == 8 * h && d(0, v).col == col) {
          if (count[h] >= rows.per_row) ok = false;
          else rows.value[h][count[h]++] = v;
        }
  rows.consistent = ok && count[0] == rows.per_row && count[1] == rows.per_row;
  return rows;
}

}  // namespace lowbit::kernels::sm90
