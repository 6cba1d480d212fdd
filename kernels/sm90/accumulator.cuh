// Row-wise work on an m64nN wgmma accumulator in registers (layout::wgmma_m64_d(N)), the tile
// vocabulary of the attention kernel's softmax steps:
//   - each thread holds kPerRow values of each of its two rows, r and r + 8 (h = 0, 1), and the 4
//     lanes of a quad (lanes 4q .. 4q + 3) share both rows: a row's maximum is the lane's over its
//     values (lane_max), then the quad's over its 4 lanes (quad_max);
//   - the exponential of a row is a function applied to each of its values in place, which also
//     hands the row's values in column order to the caller's sum (map_row);
//   - the accumulator's values become the 8-bit A fragment of the next wgmma without leaving the
//     thread (to_a8: fragment.hpp's AccumulatorToA8, four values a register).
// Which arithmetic each step does (the order of a sum, the rounding of a code) stays the caller's:
// these only say which registers hold which row and in which order. Each is the attention kernel's
// former inline code, moved: the kernels compile to the same instructions.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/sm90/fragment.hpp"

namespace lowbit::kernels::sm90 {

template <int N>
struct AccumulatorTile {
  static constexpr AccumulatorRows kRows = accumulator_rows(N);
  static constexpr AccumulatorToA8 kToA8 = accumulator_to_a8(N);
  static_assert(kRows.consistent && kToA8.consistent, "fragment maps");
  static constexpr int kPerRow = kRows.per_row;  // values of a row a thread holds
  static constexpr int kAGroups = kToA8.groups;  // k32 steps of the wgmma that reads the A fragment

  // The lane's maximum of row h of `values` (the accumulator's registers, or values derived from
  // them one for one), in kMaxChains interleaved chains of max.
  static constexpr int kMaxChains = 4;
  static_assert(kPerRow % kMaxChains == 0, "whole chains");
  template <class T, int R>
  __device__ static T lane_max(const T (&values)[R], int h) {
    constexpr AccumulatorRows rows = kRows;  // a local copy: a static member's array is not device data
    T chains[kMaxChains];
#pragma unroll
    for (int c = 0; c < kMaxChains; ++c) chains[c] = values[rows.value[h][c]];
#pragma unroll
    for (int k = kMaxChains; k < kPerRow; ++k) chains[k % kMaxChains] = max(chains[k % kMaxChains], values[rows.value[h][k]]);
    return max(max(chains[0], chains[1]), max(chains[2], chains[3]));
  }

  // Each of the thread's two rows' maxima over the 4 lanes of its quad (lane_max's in, the rows' out).
  __device__ static void quad_max(float (&x)[2]) {
#pragma unroll
    for (int lanes = 1; lanes <= 2; lanes *= 2)
#pragma unroll
      for (int h = 0; h < 2; ++h) x[h] = fmaxf(x[h], __shfl_xor_sync(0xffffffffu, x[h], lanes));
  }

  // x[v] = f(x[v]) for the values v of row h, in column order; the results, in that order, into row.
  template <class F, int R>
  __device__ static void map_row(float (&x)[R], int h, F f, float (&row)[kPerRow]) {
    constexpr AccumulatorRows rows = kRows;
#pragma unroll
    for (int k = 0; k < kPerRow; ++k) {
      const int v = rows.value[h][k];
      x[v] = f(x[v]);
      row[k] = x[v];
    }
  }

  // The A fragment of the values x (kAGroups k32 steps of 4 registers): register r of step g packs
  // the 4 values kToA8.source[g][4 r .. 4 r + 3] with pack(v0, v1, v2, v3).
  template <class Pack, int R>
  __device__ static void to_a8(const float (&x)[R], std::uint32_t (&a)[kAGroups][4], Pack pack) {
    constexpr AccumulatorToA8 map = kToA8;
#pragma unroll
    for (int g = 0; g < kAGroups; ++g)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const auto& source = map.source[g];
        a[g][r] = pack(x[source[4 * r]], x[source[4 * r + 1]], x[source[4 * r + 2]], x[source[4 * r + 3]]);
      }
  }
};

}  // namespace lowbit::kernels::sm90
