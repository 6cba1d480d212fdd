// The integer engine behind execute() and gemm() (not a public interface).
//
// Every element is decoded once into (magnitude, exponent, sign) from a precomputed table; the
// fused dot-product-add then runs on 32/64-bit integers, kLanes outputs at a time (one row of A
// against kLanes columns of B): no floating point and no big numbers in the hot loop. Each
// chunk's final rounding truncates the significand (normal binary32 results) or calls encode()
// (emulation/convert.hpp) for everything else.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "emulation/mma/gemm.hpp"
#include "emulation/mma/instruction.hpp"

namespace lowbit::mma::detail {

enum class Special : std::uint8_t { finite, nan, inf };

// Outputs computed together: one row of A against kLanes columns of B (8 int32 lanes: one AVX2
// register).
inline constexpr int kLanes = 8;

// A decoded element: value = (negative ? -1 : 1) * magnitude * 2^(exponent - fraction), where
// fraction is the format's mantissa bits and exponent is floor(log2 |value|) clamped to the
// format's smallest normal exponent (so a subnormal has magnitude < 2^fraction). A zero has a
// very low exponent (engine.cpp, kZeroCodeExponent). Integers: exponent 0, fraction 0.
struct Decoded {
  std::int32_t magnitude = 0;
  std::int32_t exponent = 0;
  std::int32_t negative = 0;  // 0 or -1 (a mask)
  Special special = Special::finite;
};

// Every code of f (at most 19 bits: tf32) decoded, as the arithmetic sees it in format `as` (f, or
// the format it unpacks to, FusedDotAdd::unpack_to; throws where a code is not a value of `as`);
// built once per pair and kept.
const std::vector<Decoded>& decode_table(const Format& f, const Format& as);
inline const std::vector<Decoded>& decode_table(const Format& f) { return decode_table(f, f); }

// One operand of a GEMM, decoded and laid out for the K loop: `lines` rows of A (or columns of
// B), each `depth` elements (K padded to the instruction's k), in the instruction's chunk order
// within every k step.
struct Operand {
  Eigen::Index K = 0;                 // the operand's depth before padding
  Eigen::Index lines = 0, depth = 0;
  std::vector<std::int32_t> magnitude, exponent, negative;  // lines x depth
  std::vector<std::uint32_t> codes;                         // lines x depth, the codes in the same order
  std::vector<std::uint8_t> special_step;  // lines x steps: the step holds a NaN/Inf code (or NaN scale)
  // Block scales, lines x (K / scale_block), decoded (per-product scales are also folded into
  // `exponent`).
  std::vector<Decoded> scale;
  // B only: magnitude, exponent, negative again, k-major (depth x k_stride), columns padded with
  // zeros to whole lane groups, so that kLanes columns load as one vector.
  Eigen::Index k_stride = 0;
  std::vector<std::int32_t> k_magnitude, k_exponent, k_negative;
};

class Engine {
 public:
  // Throws std::invalid_argument when the model cannot run this atom (parameters, or sums that
  // could exceed the 53 bits the exact final rounding needs).
  explicit Engine(const Instruction& instruction);

  // `lines` x K codes (row-major) of A, or, with `as_b`, K x `lines` codes (row-major) of B, padded
  // to `depth`; scales: lines x (K / scale_block) for A, (K / scale_block) x lines for B.
  Operand decode(std::span<const std::uint32_t> codes, Eigen::Index lines, Eigen::Index K, Eigen::Index depth,
                 std::span<const std::uint32_t> scales, bool as_b) const;

  // Every output: d = the K loop of A (M lines) and B (N lines) from c; c and d row-major M x N.
  void run_all(const Operand& a, const Operand& b, const std::uint32_t* c, std::uint32_t* d, const KLoop& loop) const;

 private:
  struct Acc;
  // Outputs (i, j0 .. j0 + lanes - 1), lanes <= kLanes, from c_bits[l] to d[l].
  void run(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, const std::uint32_t* c_bits,
           std::uint32_t* d, const KLoop& loop) const;
  void step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, Eigen::Index s,
            std::uint32_t* acc) const;
  void chunk_lanes(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, Eigen::Index first,
                   std::uint32_t* acc_bits, bool special) const;
  std::uint32_t group_chunk(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index first,
                            std::uint32_t acc_bits, bool special) const;
  std::optional<std::uint32_t> special_result(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j,
                                              Eigen::Index first, const Acc& acc) const;
  Acc accumulator(std::uint32_t bits) const;
  bool special_accumulator(std::uint32_t bits) const;
  std::uint32_t round(std::int64_t sum, int scale_exponent) const;
  std::uint32_t integer_step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index s,
                             std::uint32_t c_bits) const;

  Instruction instruction_;
  FusedDotAdd p_;
  const std::vector<Decoded>* table_a_;
  const std::vector<Decoded>* table_b_;
  std::vector<int> order_;   // position within a k step -> k
  Format acc_format_;        // binary32 or binary16 accumulator between chunks
  int product_shift_ = 0;    // F - (fraction of a product term)
  int acc_shift_ = 0;        // F - (fraction of the accumulator)
  void (*product_sums_)() = nullptr;  // the lane kernel (engine.cpp's ProductSums)
};

}  // namespace lowbit::mma::detail
