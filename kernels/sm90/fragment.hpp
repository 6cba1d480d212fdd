// From a wgmma accumulator to the 8-bit A operand of the next wgmma, in registers (P in P·V), as
// data derived from the two fragments of emulation/layout.hpp (host and device).
//
// The k32 group s of an m64nN accumulator (columns 32s .. 32s+31) feeds one wgmma k32 step. Each
// thread holds, in both fragments, the same rows and the same number of values per row, so it
// needs no data from other threads: its A values of a row, in value order, take its accumulator
// values of that row in that group, in value order. The columns do not agree: A column p holds
// what was accumulator column key_of_column[p] of the group. P·V then multiplies key
// key_of_column[p] by the row of V placed at position p, so V^T is stored with its keys permuted
// the same way within every group of 32 keys.
//
// The permutation changes no bit of P·V: the FP8 wgmma model fuses all 32 products of a k32 step
// into one exact sum before its single truncation (chunk L = 32, docs/mma-models.md), so the
// order of the keys within a group is invisible to it.
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

struct AccumulatorToA8 {
  static constexpr int kGroupColumns = 32;
  static constexpr int kAValues = 16;
  int groups = 0;                                   // N / 32
  std::array<std::array<int, kAValues>, 8> source{};  // [group][A value] -> accumulator value
  std::array<int, kGroupColumns> key_of_column{};   // A column p -> accumulator column in the group
  bool consistent = false;                          // one map serves every thread and every group
};

// The map for an m64nN accumulator (N a multiple of 32, at most 256).
LOWBIT_HD constexpr AccumulatorToA8 accumulator_to_a8(int n) {
  constexpr int kColumns = AccumulatorToA8::kGroupColumns;
  const layout::Fragment d = layout::wgmma_m64_d(n);
  const layout::Fragment a = layout::wgmma_m64k32_a8;
  AccumulatorToA8 m;
  m.groups = n / kColumns;
  m.consistent = a.value_count == AccumulatorToA8::kAValues && n % kColumns == 0 && a.threads() == d.threads() &&
                 m.groups >= 1 && m.groups <= 8;
  // Thread bits past the 4 lanes of a row (groupID, warp) move both fragments by the same rows
  // and no columns, so the 4 lanes of one row decide the map for every thread.
  for (int b = 2; b < a.thread_bits; ++b)
    if (a.thread_basis[b] != d.thread_basis[b] || a.thread_basis[b].col != 0) m.consistent = false;
  if (!m.consistent) return m;
  for (int p = 0; p < kColumns; ++p) m.key_of_column[p] = -1;
  for (int thread = 0; thread < 4; ++thread)
    for (int group = 0; group < m.groups; ++group)
      for (int i = 0; i < a.value_count; ++i) {
        const layout::Offset at = a(thread, i);
        int rank = 0;  // A values of this row before value i
        for (int j = 0; j < i; ++j) rank += a(thread, j).row == at.row;
        int source = -1;
        for (int v = 0, seen = 0; v < d.value_count && source < 0; ++v) {
          const layout::Offset from = d(thread, v);
          if (from.row != at.row || from.col < group * kColumns || from.col >= (group + 1) * kColumns) continue;
          if (seen++ == rank) source = v;
        }
        if (source < 0 || at.col < 0 || at.col >= kColumns) {
          m.consistent = false;
          return m;
        }
        const int key = d(thread, source).col - group * kColumns;
        if (thread == 0) m.source[group][i] = source;
        if (m.source[group][i] != source) m.consistent = false;
        if (m.key_of_column[at.col] < 0) m.key_of_column[at.col] = key;
        if (m.key_of_column[at.col] != key) m.consistent = false;
      }
  // key_of_column must be a permutation of the group's 32 columns.
  for (int key = 0; key < kColumns; ++key) {
    int count = 0;
    for (int p = 0; p < kColumns; ++p) count += m.key_of_column[p] == key;
    if (count != 1) m.consistent = false;
  }
  return m;
}

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
