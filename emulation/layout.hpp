// Thread/value -> (row, col) maps of tensor-core fragments, as data (host and device).
//
// Every PTX mma/wgmma register fragment is linear over the bits of the thread index and of the
// value index: each bit set adds a fixed (row, col) offset. A fragment is therefore a pair of
// bases, read the same way by the CPU instruction models, the quantizers' per-thread groups and
// the CUDA probes and kernels (nothing about fragments is typed twice).
//
// Orientation is the math one: A is m x k (row = m, col = k), B is k x n (row = k, col = n),
// C and D are m x n. Value i is the i-th element in PTX's numbering (a0, a1, ... of the
// instruction's fragment figure), packed registers unpacked low half first.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "emulation/format.hpp"  // LOWBIT_HD

namespace lowbit::layout {

struct Offset {
  int row = 0;
  int col = 0;
  friend constexpr bool operator==(const Offset&, const Offset&) = default;
};

struct Fragment {
  int rows = 0, cols = 0;   // the tile one instruction covers
  int thread_bits = 0;      // 5: a warp; 7: a warpgroup
  int value_count = 0;      // elements per thread
  std::array<Offset, 7> thread_basis{};  // offset added by bit b of the thread index
  std::array<Offset, 8> value_basis{};   // offset added by bit b of the value index

  friend constexpr bool operator==(const Fragment&, const Fragment&) = default;

  // No map: the operand is not held in registers, or this shape has no map yet.
  LOWBIT_HD constexpr bool empty() const { return value_count == 0; }
  LOWBIT_HD constexpr int threads() const { return 1 << thread_bits; }
  LOWBIT_HD constexpr Offset operator()(int thread, int value) const {
    Offset o;
    for (int b = 0; b < thread_bits; ++b)
      if ((thread >> b) & 1) o.row += thread_basis[b].row, o.col += thread_basis[b].col;
    for (int b = 0; b < 8; ++b)
      if ((value >> b) & 1) o.row += value_basis[b].row, o.col += value_basis[b].col;
    return o;
  }
};

namespace detail {
// The common shape of mma.sync fragments: lane = 4 * groupID + threadID_in_group; consecutive
// values first run along `inner` (pack elements per 32-bit register), then the PTX
// fragment's 8-row / k-half steps.
LOWBIT_HD constexpr Fragment warp_fragment(int rows, int cols, std::array<Offset, 2> lane_in_group,
                                           std::array<Offset, 3> group, std::array<Offset, 8> values, int value_count) {
  Fragment f;
  f.rows = rows;
  f.cols = cols;
  f.thread_bits = 5;
  f.value_count = value_count;
  f.thread_basis = {lane_in_group[0], lane_in_group[1], group[0], group[1], group[2], Offset{}, Offset{}};
  f.value_basis = values;
  return f;
}
// Stacks a warp fragment over the 4 warps of a warpgroup, 16 rows apart (wgmma's A and D).
LOWBIT_HD constexpr Fragment warpgroup_fragment(Fragment warp, int rows) {
  warp.rows = rows;
  warp.thread_bits = 7;
  warp.thread_basis[5] = {16, 0};
  warp.thread_basis[6] = {32, 0};
  return warp;
}
// log2 of a power of two, rounded up otherwise.
LOWBIT_HD constexpr int log2_exact(int v) {
  int b = 0;
  while ((1 << b) < v) ++b;
  return b;
}
}  // namespace detail

// mma.m16n8k16 .f16/.bf16 (PTX ISA "Matrix Fragments for mma.m16n8k16 with floating point type").
// A: row = groupID + 8*((i>>1)&1), col = 2*threadID_in_group + (i&1) + 8*(i>>2).
inline constexpr Fragment mma_m16n8k16_a16 = detail::warp_fragment(
    16, 16, {Offset{0, 2}, Offset{0, 4}}, {Offset{1, 0}, Offset{2, 0}, Offset{4, 0}},
    {Offset{0, 1}, Offset{8, 0}, Offset{0, 8}}, 8);
// B (k x n): row = 2*threadID_in_group + (i&1) + 8*(i>>1), col = groupID.
inline constexpr Fragment mma_m16n8k16_b16 = detail::warp_fragment(
    16, 8, {Offset{2, 0}, Offset{4, 0}}, {Offset{0, 1}, Offset{0, 2}, Offset{0, 4}}, {Offset{1, 0}, Offset{8, 0}}, 4);
// C/D of every m16n8 shape: row = groupID + 8*(i>>1), col = 2*threadID_in_group + (i&1).
inline constexpr Fragment mma_m16n8_c = detail::warp_fragment(
    16, 8, {Offset{0, 2}, Offset{0, 4}}, {Offset{1, 0}, Offset{2, 0}, Offset{4, 0}}, {Offset{0, 1}, Offset{8, 0}}, 4);
// C/D of mma.m8n8k16 (.s8) and mma.m8n8k32 (.s4) (PTX ISA "Matrix Fragments for mma.m8n8k16"):
// row = groupID, col = 2*threadID_in_group + i; each thread holds one row of the 8 x 8 tile.
inline constexpr Fragment mma_m8n8_c = detail::warp_fragment(
    8, 8, {Offset{0, 2}, Offset{0, 4}}, {Offset{1, 0}, Offset{2, 0}, Offset{4, 0}}, {Offset{0, 1}}, 2);
// mma.m16n8k32 with 8-bit A (.s8/.u8/.e4m3/.e5m2):
// row = groupID + 8*((i>>2)&1), col = 4*threadID_in_group + (i&3) + 16*(i>>3).
inline constexpr Fragment mma_m16n8k32_a8 = detail::warp_fragment(
    16, 32, {Offset{0, 4}, Offset{0, 8}}, {Offset{1, 0}, Offset{2, 0}, Offset{4, 0}},
    {Offset{0, 1}, Offset{0, 2}, Offset{8, 0}, Offset{0, 16}}, 16);
// B (k x n): row = 4*threadID_in_group + (i&3) + 16*(i>>2), col = groupID.
inline constexpr Fragment mma_m16n8k32_b8 = detail::warp_fragment(
    32, 8, {Offset{4, 0}, Offset{8, 0}}, {Offset{0, 1}, Offset{0, 2}, Offset{0, 4}},
    {Offset{1, 0}, Offset{2, 0}, Offset{16, 0}}, 8);
// mma.m16n8k64 with 4-bit A (.s4/.u4/.e2m1):
// row = groupID + 8*((i>>3)&1), col = 8*threadID_in_group + (i&7) + 32*(i>>4).
inline constexpr Fragment mma_m16n8k64_a4 = detail::warp_fragment(
    16, 64, {Offset{0, 8}, Offset{0, 16}}, {Offset{1, 0}, Offset{2, 0}, Offset{4, 0}},
    {Offset{0, 1}, Offset{0, 2}, Offset{0, 4}, Offset{8, 0}, Offset{0, 32}}, 32);
// B (k x n): row = 8*threadID_in_group + (i&7) + 32*(i>>3), col = groupID.
inline constexpr Fragment mma_m16n8k64_b4 = detail::warp_fragment(
    64, 8, {Offset{8, 0}, Offset{16, 0}}, {Offset{0, 1}, Offset{0, 2}, Offset{0, 4}},
    {Offset{1, 0}, Offset{2, 0}, Offset{4, 0}, Offset{32, 0}}, 16);

// wgmma: warp w of the warpgroup owns rows 16w..16w+15 of A (from registers) and of D.
// A (.f16/.bf16, k16) is the mma m16n8k16 A fragment per warp; A (8-bit, k32) the m16n8k32 one.
inline constexpr Fragment wgmma_m64k16_a16 = detail::warpgroup_fragment(mma_m16n8k16_a16, 64);
inline constexpr Fragment wgmma_m64k32_a8 = detail::warpgroup_fragment(mma_m16n8k32_a8, 64);
// D of wgmma m64nN: row = 16*warp + groupID + 8*((i>>1)&1),
// col = 8*(i>>2) + 2*threadID_in_group + (i&1), for n/8 column tiles.
LOWBIT_HD constexpr Fragment wgmma_m64_d(int n) {
  Fragment f = detail::warpgroup_fragment(mma_m16n8_c, 64);
  f.cols = n;
  f.value_count = n / 2;
  for (int b = 2; b < 2 + detail::log2_exact(n / 8); ++b) f.value_basis[b] = {0, 8 << (b - 2)};
  return f;
}

// Registers reused as an 8-bit A operand (P in P·V, FlashAttention's trick): the k32 group s of an
// m64nN accumulator (columns 32s .. 32s+31) feeds one k32 step of the next product. Each thread
// holds, in both fragments, the same rows and the same number of values per row, so it needs no
// data from other threads: its A values of a row, in value order, take its accumulator values of
// that row in that group, in value order. The columns do not agree: A column p holds what was
// accumulator column key_of_column[p] of the group. The wgmma fragments are the mma.sync ones
// (m16n8 accumulator, m16n8k32 A) per warp, so the map is also a warp's that keeps P of mma.sync
// tiles in registers (SageAttention2's Ada kernels). Where the product rounds parts of a k step
// apart (Hopper's software mma.sync FP8: two HMMA over k mod 4 in {0,1} and {2,3}), this order
// decides which keys are summed together.
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

}  // namespace lowbit::layout
