// D = A B + C for any M, N, K through one instruction, in the K-loop order of a real kernel.
//
// Each output element runs the instruction's model over K in steps of the instruction's k. A
// kernel either chains one accumulator register through all of K (mmas_per_flush = 0; C is the
// first MMA's accumulator), or, as SageAttention2's FP32 buffer for the FP22 accumulator does,
// chains a fresh register (+0) through `mmas_per_flush` MMAs and then adds it into an fp32
// accumulator with an fp32 round-to-nearest-even add (two-level accumulation; the fp32
// accumulator starts at C).
//
// Rows of A and columns of B are independent, so M and N need no padding. K must be a multiple of
// the instruction's k unless pad_k is set: then A's extra columns and B's extra rows are +0 codes,
// as a kernel's zero-filled shared-memory tile would be (a zero term still takes part in the
// exponent max through the zero-term exponent, so padding is part of the result).
#pragma once

#include <optional>
#include <string>

#include "emulation/mma/instruction.hpp"
#include "numerics/matrix.hpp"

namespace lowbit::mma {

struct KLoop {
  int mmas_per_flush = 0;  // 0: one accumulator through all of K; f > 0: flush every f MMAs
  bool pad_k = false;      // allow K not a multiple of the instruction's k (zero padding)

  // Why this K loop cannot run `atom` over K, or nothing.
  std::optional<std::string> validate(const Atom& atom, Eigen::Index K, bool block_scaled) const;
};

struct GemmOperands {
  const MatrixCode& a;  // M x K codes of atom.a
  const MatrixCode& b;  // K x N codes of atom.b
  // M x N bit patterns: atom.c without flushing; binary32 (the fp32 accumulator) with flushing.
  const MatrixCode& c;
  const MatrixCode* scale_a = nullptr;  // M x (K / atom.scale_block) codes of atom.scale
  const MatrixCode* scale_b = nullptr;  // (K / atom.scale_block) x N
};

// D (M x N bit patterns: atom.d without flushing, binary32 with flushing). Throws
// std::invalid_argument naming the operand whose shape or codes do not fit.
MatrixCode gemm(const Instruction& instruction, const GemmOperands& operands, const KLoop& loop = {});

}  // namespace lowbit::mma
