// Per-thread and per-warp quantization groups, derived from an instruction's accumulator
// fragment (emulation/layout.hpp), for S = Q K^T computed by a thread block.
//
// A thread dequantizes its accumulator elements with one scale product delta_Q * delta_K
// (SageAttention2 §3.3). So every Q row (row of S) that one thread holds anywhere in the
// block's tile must share one Q scale, and every K row (column of S) it holds one K scale.
// The groups are the connected components of that "held by the same thread" relation, found
// by union-find over the fragment map: nothing about the layout is typed here.
//
// The block: block_q rows of Q split evenly over the thread units (a warp for mma.sync, a
// warpgroup of 4 warps for wgmma), each unit covering its rows x block_k with a grid of
// instruction tiles. Per-warp groups are the same relation taken over the threads of one warp
// (thread index / 32 within the unit): for mma.sync a warp is the unit; for wgmma, warp w of a
// warpgroup holds rows 16w..16w+15 of every 64-row tile, so its Q group is those rows.
//
// Header-only and constexpr (LOWBIT_HD): a CUDA kernel can derive the same map on the device,
// or take it from the host (tests/quant/test_thread_groups_device.cu compiles it with nvcc, in
// constant expressions and in a kernel whose maps it compares with the host's).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "emulation/layout.hpp"
#include "emulation/mma/atom.hpp"

namespace lowbit::quant {

inline constexpr int kMaxBlockRows = 512;

// How a thread block computes one block_q x block_k tile of S with the instruction `atom`: its
// m x n tile of S, its reduction depth k, its element format a (Q's and K's) and its accumulator
// fragment c_fragment are what the groups depend on.
struct ThreadTiling {
  mma::Atom atom = mma::atoms::mma_m16n8k64_s32_s4_s4;
  int warps = 4;
  int block_q = 128;
  int block_k = 64;

  LOWBIT_HD constexpr int warps_per_unit() const { return atom.c_fragment.threads() / 32; }
  LOWBIT_HD constexpr int units() const { return warps / warps_per_unit(); }
  LOWBIT_HD constexpr int rows_per_unit() const { return block_q / units(); }

  std::optional<std::string> validate() const {
    const std::string atom_name = mma::short_name(atom);
    if (atom.m <= 0 || atom.n <= 0 || atom.k <= 0) return "instruction " + atom_name + " has an empty tile";
    if (atom.c_fragment.empty()) return "instruction " + atom_name + " has no accumulator fragment map (layout.hpp)";
    if (warps <= 0 || warps % warps_per_unit() != 0)
      return "warps=" + std::to_string(warps) + ": " + atom_name + " is issued by " +
             std::to_string(warps_per_unit()) + " warp(s) at a time";
    if (block_q <= 0 || block_q > kMaxBlockRows || block_q % (units() * atom.m) != 0)
      return "block_q=" + std::to_string(block_q) + ": must be a positive multiple of " +
             std::to_string(units() * atom.m) + " (" + std::to_string(units()) + " unit(s) x m=" +
             std::to_string(atom.m) + "), at most " + std::to_string(kMaxBlockRows);
    if (block_k <= 0 || block_k > kMaxBlockRows || block_k % atom.n != 0)
      return "block_k=" + std::to_string(block_k) + ": must be a positive multiple of n=" + std::to_string(atom.n) +
             ", at most " + std::to_string(kMaxBlockRows);
    return std::nullopt;
  }
};

// group_of_row[r] for r < block_rows: the group of row r of a block, numbered 0.. in the order
// of each group's first row.
struct BlockGroups {
  int block_rows = 0;
  int count = 0;
  std::array<std::int16_t, kMaxBlockRows> group_of_row{};
};

struct QkGroups {
  BlockGroups q;  // rows of a Q block (block_q)
  BlockGroups k;  // rows of a K block (block_k)
};

enum class GroupScope : std::uint8_t {
  thread,  // per-thread: what one thread holds
  warp,    // per-warp: what the 32 threads of one warp hold
};

namespace detail {

struct UnionFind {
  std::array<std::int16_t, kMaxBlockRows> parent{};
  LOWBIT_HD constexpr explicit UnionFind(int n) {
    for (int i = 0; i < n; ++i) parent[i] = std::int16_t(i);
  }
  LOWBIT_HD constexpr int find(int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  }
  LOWBIT_HD constexpr void join(int a, int b) {
    a = find(a), b = find(b);
    if (a != b) parent[a > b ? a : b] = std::int16_t(a < b ? a : b);  // the smaller row is the root
  }
  LOWBIT_HD constexpr BlockGroups label(int n) {
    BlockGroups g;
    g.block_rows = n;
    std::array<std::int16_t, kMaxBlockRows> id_of_root{};
    for (int r = 0; r < n; ++r) id_of_root[r] = -1;
    for (int r = 0; r < n; ++r) {
      const int root = find(r);
      if (id_of_root[root] < 0) id_of_root[root] = std::int16_t(g.count++);
      g.group_of_row[r] = id_of_root[root];
    }
    return g;
  }
};

}  // namespace detail

// The Q and K groups of a tiling (which must validate()).
LOWBIT_HD constexpr QkGroups derive_groups(const ThreadTiling& t, GroupScope scope) {
  detail::UnionFind q(t.block_q), k(t.block_k);
  const layout::Fragment& c = t.atom.c_fragment;
  const int m_tiles = t.rows_per_unit() / t.atom.m, n_tiles = t.block_k / t.atom.n;
  for (int unit = 0; unit < t.units(); ++unit) {
    int q_anchor = -1, k_anchor = -1;  // the first row the current thread (or warp) holds
    for (int thread = 0; thread < c.threads(); ++thread) {
      if (scope == GroupScope::thread || thread % 32 == 0) q_anchor = k_anchor = -1;
      for (int tm = 0; tm < m_tiles; ++tm)
        for (int tn = 0; tn < n_tiles; ++tn)
          for (int v = 0; v < c.value_count; ++v) {
            const layout::Offset o = c(thread, v);
            const int q_row = unit * t.rows_per_unit() + tm * t.atom.m + o.row;
            const int k_row = tn * t.atom.n + o.col;
            if (q_anchor < 0) q_anchor = q_row;
            if (k_anchor < 0) k_anchor = k_row;
            q.join(q_anchor, q_row);
            k.join(k_anchor, k_row);
          }
    }
  }
  return {q.label(t.block_q), k.label(t.block_k)};
}

}  // namespace lowbit::quant
