// Recomputing a recorded tile (verification/vectors.hpp) with the instruction's model and
// comparing every output bit (the sign of zero and NaN payloads included).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
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

// Models next to the instruction's, one parameter changed each (F - 1, F + 1, L / 2, the other
// output rounding, C entering the other way, consecutive chunks, operands not unpacked, other
// zero-term exponents), to see which parameters recorded tiles pin down: a parameter is verified
// only if its neighbours fail tiles. A neighbour the engine cannot run on this instruction is
// listed with the reason and not run.
struct NeighbourModel {
  std::string change;
  Model model;
  std::string skipped;  // why the model cannot run this instruction, or empty
};
std::vector<NeighbourModel> neighbouring_models(const Instruction& instruction);

// Parameters to change in every instruction's model, as `lowbit verify-vectors --change` reads
// them: comma-separated key=value, e.g. "L=32,F=25,c=aligned,unpack=none" (keys: L, F,
// interleave, c = aligned | after, rounding = rz-fp32 | rz-e8m13 | rne-fp16, unpack = none | f16,
// e_zero, zero = keep-sign | plus). To test a published model against recorded tiles.
struct ModelChange {
  std::optional<int> chunk, fraction_bits, interleave, zero_exponent;
  std::optional<CEntry> c_entry;
  std::optional<OutputRounding> rounding;
  std::optional<std::optional<Format>> unpack_to;
  std::optional<bool> rounded_zero_keeps_sign;

  Model applied_to(Model model) const;
};
// The change, or why the text is not one (naming the key or value).
std::variant<ModelChange, std::string> parse_model_change(std::string_view text);

}  // namespace lowbit::mma
