// Tiles of one instruction as plain code arrays, the form the GPU probes take
// (kernels/probes/mma_probe.hpp, TileBatch), and back: the vector files' side of a GPU run.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "emulation/mma/atom.hpp"
#include "verification/vectors.hpp"

namespace lowbit::mma {

// Tile after tile, each matrix row-major: A m x depth and B depth x n element codes, C and D
// m x n accumulator codes (f32/s32 bit patterns, f16 codes in the low half; the files hold f16
// widened to binary32, see accumulator_word).
struct TileCodes {
  int count = 0;
  std::vector<std::uint16_t> a, b;
  std::vector<std::uint32_t> c, d;  // d: sized for the outputs, zero
};

// Throws std::invalid_argument naming the tile whose fields do not match the instruction's shape
// (A m x depth, B depth x n) or whose C word is not a value of the accumulator format.
TileCodes tile_codes(const Atom& atom, int depth, std::span<const Tile> tiles);

// Sets each tile's d from codes.d, as accumulator words.
void store_d(const Atom& atom, const TileCodes& codes, std::span<Tile> tiles);

}  // namespace lowbit::mma
