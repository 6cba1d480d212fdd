// What every probe kernel shares: tiles as flat device arrays, and register fragments
// loaded and stored through the layout maps of emulation/layout.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "emulation/layout.hpp"
#include "emulation/mma/atom.hpp"
#include "kernels/probes/mma_probe.hpp"

namespace lowbit::kernels {

// A batch of tiles on the device: element codes (one per 16-bit slot), C and D words, each
// tile's block following the previous one's, row-major inside (the Tile orientation).
struct DeviceTiles {
  const std::uint16_t* a;
  const std::uint16_t* b;
  const std::uint32_t* c;  // accumulator codes: f32/s32 words, f16 codes in the low half
  std::uint32_t* d;
  int count;
};

// Thread t's fragment value i lies at (row, col) = F(t, 0) + F(0, i): the maps are linear.
// The F(0, i) part, as offsets into a row-major matrix of Cols columns, is a compile-time table.
template <layout::Fragment F, int Cols>
__device__ int base_offset(int thread) {
  const layout::Offset at = F(thread, 0);
  return at.row * Cols + at.col;
}
template <layout::Fragment F, int Cols>
constexpr std::array<int, F.value_count> value_offsets() {
  std::array<int, F.value_count> table{};
  for (int i = 0; i < F.value_count; ++i) table[i] = F(0, i).row * Cols + F(0, i).col;
  return table;
}

// Packs value i of this thread's fragment F into bits [Bits*i, Bits*i + Bits) of the register
// array (PTX numbers fragment elements low half first). `codes` is the tile's row-major matrix
// with Cols columns.
template <layout::Fragment F, int Cols, int Bits, int Registers, class Code>
__device__ void load_fragment(const Code* codes, int thread, std::uint32_t (&regs)[Registers]) {
  static_assert(F.value_count * Bits == 32 * Registers, "fragment and registers disagree");
  constexpr auto offsets = value_offsets<F, Cols>();
  constexpr int per_register = 32 / Bits;
  constexpr std::uint32_t mask = Bits == 32 ? ~0u : (1u << Bits) - 1;
  codes += base_offset<F, Cols>(thread);
#pragma unroll
  for (int r = 0; r < Registers; ++r) regs[r] = 0;
#pragma unroll
  for (int i = 0; i < F.value_count; ++i)
    regs[i / per_register] |= (std::uint32_t(codes[offsets[i]]) & mask) << (Bits * (i % per_register));
}

// The inverse of load_fragment, for D.
template <layout::Fragment F, int Cols, int Bits, int Registers>
__device__ void store_fragment(const std::uint32_t (&regs)[Registers], int thread, std::uint32_t* codes) {
  static_assert(F.value_count * Bits == 32 * Registers, "fragment and registers disagree");
  constexpr auto offsets = value_offsets<F, Cols>();
  constexpr int per_register = 32 / Bits;
  constexpr std::uint32_t mask = Bits == 32 ? ~0u : (1u << Bits) - 1;
  codes += base_offset<F, Cols>(thread);
#pragma unroll
  for (int i = 0; i < F.value_count; ++i) codes[offsets[i]] = (regs[i / per_register] >> (Bits * (i % per_register))) & mask;
}

// Runs `launch` on device copies of `tiles` (instruction `atom`, A m x depth, B depth x n) and
// writes tiles.d, as MmaProbe::run promises. Defined in probe_io.cu.
void run_on_device(const mma::Atom& atom, int depth, const TileBatch& tiles, void (*launch)(const DeviceTiles&));

}  // namespace lowbit::kernels
