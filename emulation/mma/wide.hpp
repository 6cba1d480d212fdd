// An instruction's accumulation applied to float32 operand values it cannot take: the arithmetic
// of its model (FusedDotAdd: chunks, truncation to F bits below the largest term, the rounding
// between chunks, how C enters) run on products of floats, so the error of the accumulator alone
// can be injected into an otherwise exact computation (attention pipelines' "wide:" products,
// error attribution).
//
// One output of a K loop, k step after k step (K a multiple of the instruction's k; the caller
// zero-pads), from C: for each chunk of the step (the model's chunk and interleave),
//   terms = the chunk's products a_t b_t (exact in double), or with ScaleMode::per_group each
//           group's exact sum as one term; plus the accumulator (CEntry::aligned), or +0 with C
//           added after the step by a round-to-nearest-even add (CEntry::added_after);
//   a term's exponent: a product's max(ilogb a, -126) + max(ilogb b, -126) (the engine's
//   ea + eb), a group sum's own ilogb, the accumulator's, a zero term's zero_exponent;
//   E = the max;  S = sum of trunc(term 2^(F - E));  accumulator = round(S 2^(E - F)).
// Integer instructions: the exact sum rounded once to float32 (wide operands have no integer sum).
//
// On operands the instruction takes, whose values are normal numbers, this is the engine's
// arithmetic (tests/mma/test_wide.cpp compares them bit for bit); subnormal operands, block
// scales and NaN/Inf are where the two may differ: here the scales must already be folded into
// the values and non-finite inputs give a non-finite sum without the instruction's NaN rules.
#pragma once

#include <cstddef>
#include <vector>

#include "emulation/mma/instruction.hpp"

namespace lowbit::mma {

class WideAccumulation {
 public:
  // Throws std::invalid_argument for a model it cannot run (ScaleMode::per_product).
  explicit WideAccumulation(const Instruction& instruction);

  // sum over t < K of a[t] * b[t * b_stride], from c. K must be a multiple of k().
  float dot(const float* a, const float* b, std::ptrdiff_t b_stride, int K, float c) const;
  int k() const { return k_; }

 private:
  float step(const float* a, const float* b, std::ptrdiff_t b_stride, float acc) const;
  float chunk(const float* a, const float* b, std::ptrdiff_t b_stride, const int* ks, int count, float acc) const;

  Model model_;
  Format accumulator_;     // fp32 or fp16 between chunks
  int k_ = 0;
  std::vector<int> order_;  // the step's k, chunk after chunk
};

}  // namespace lowbit::mma
