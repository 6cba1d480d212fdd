// Recomputing a recorded tile (verification/vectors.hpp) with the instruction's model and
// comparing every output bit (the sign of zero and NaN payloads included).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emulation/mma/instruction.hpp"
#include "verification/vectors.hpp"

namespace lowbit::mma {

struct OutputMismatch {
  int row = 0, col = 0;
  std::uint32_t recorded = 0, emulated = 0;
};

struct TileVerdict {
  enum class Outcome { passed, mismatched, rejected };
  Outcome outcome = Outcome::rejected;
  // rejected: why the tile cannot be checked (unknown instruction, shape or type mismatch with
  // the instruction, missing scale factors).
  std::string error;
  bool unknown_instruction = false;
  std::vector<OutputMismatch> mismatches;  // mismatched: every differing output, row-major
  std::size_t outputs = 0;                 // outputs compared
  std::optional<Instruction> instruction;  // when the instruction is modeled
};

// With `model`, the tile's instruction runs that model instead of its own (neighbouring_models).
// A line with the field "mmas_per_flush" is a whole K loop (k = its K, a multiple of the
// instruction's): D is gemm() with KLoop{mmas_per_flush}, C and D fp32 once flushed.
TileVerdict verify_tile(const Tile& tile, const std::optional<Model>& model = std::nullopt);

// Models next to `model`, one parameter changed each (F - 1, F + 1, L / 2, the other output
// rounding, C entering the other way, consecutive chunks, operands not unpacked, other zero-term
// exponents), to see which parameters recorded tiles pin down: a parameter is verified only if
// its neighbours fail tiles.
struct NeighbourModel {
  std::string change;
  Model model;
};
std::vector<NeighbourModel> neighbouring_models(const Model& model);

}  // namespace lowbit::mma
