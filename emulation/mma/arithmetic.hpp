// Running an instruction's model on one tile: D = A B + C, bit for bit.
//
// Operands are element codes in the math orientation (A: m x k row-major, B: k x n row-major),
// exactly as the vector files hold them; C and D are accumulator bit patterns (binary32, binary16
// in the low 16 bits, or s32; the vector files hold binary16 widened to binary32, see
// accumulator_word in verification/vectors.hpp). Block-scaled instructions take scale codes too.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "emulation/mma/instruction.hpp"

namespace lowbit::mma {

struct TileInputs {
  std::span<const Code> a;                // m x k codes of atom.a
  std::span<const Code> b;                // k x n codes of atom.b
  std::span<const std::uint32_t> c;       // m x n accumulator bit patterns (atom.c)
  std::span<const Code> scale_a = {};     // m x scale_columns codes of atom.scale
  std::span<const Code> scale_b = {};     // scale_columns x n codes of atom.scale
};

// Why these inputs do not fit the instruction (a size, or a code too wide for its format), or nothing.
std::optional<std::string> check_inputs(const Atom& atom, const TileInputs& in);

// Why the instruction's model cannot run its atom (its parameters, or sums too wide for the
// integer engine), or nothing.
std::optional<std::string> check_model(const Instruction& instruction);

// D (m x n accumulator bit patterns). Throws std::invalid_argument when check_inputs or
// check_model fails.
std::vector<std::uint32_t> execute(const Instruction& instruction, const TileInputs& in);

// The canonical NaN the tensor cores write (published by MMA-Sim; fp32: 0x7fffffff, fp16: 0x7fff).
std::uint32_t canonical_nan_bits(const Format& accumulator);

// x + y in an fp32 or fp16 accumulator (bit patterns as TileInputs::c), rounded to nearest even,
// overflowing to Inf, NaN canonical: FADD and HADD2 as the software FP8 paths use them.
std::uint32_t accumulator_add(const Format& accumulator, std::uint32_t x, std::uint32_t y);

}  // namespace lowbit::mma
