// The integer engine behind execute() and gemm() (not a public interface).
//
// Every element is decoded once into (magnitude, exponent, sign) from a precomputed table; the
// fused dot-product-add then runs on 64-bit integers: no floating point and no big numbers in
// the hot loop. Only each chunk's final rounding calls encode() (emulation/convert.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "emulation/mma/gemm.hpp"
#include "emulation/mma/instruction.hpp"

namespace lowbit::mma::detail {

enum class Special : std::uint8_t { finite, nan, inf };

// Outputs computed together: one row of A against kLanes columns of B (one AVX2 register of int32).
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

// Every code of f (at most 16 bits) decoded; built once per format and kept.
const std::vector<Decoded>& decode_table(const Format& f);

// One operand of a GEMM, decoded and laid out for the K loop: `lines` rows of A (or columns of
// B), each Kp elements long, in the instruction's chunk order within every k step.
struct Operand {
  Eigen::Index K = 0;                 // the operand's depth before padding
  Eigen::Index lines = 0, depth = 0;  // depth: K padded to the instruction's k
  std::vector<std::int32_t> magnitude, exponent, negative;  // lines x depth
  std::vector<std::uint8_t> special_step;  // lines x steps: the step holds a NaN/Inf (or NaN scale)
  std::vector<std::uint32_t> codes;        // lines x depth, original codes in the same order
  // B only: magnitude, exponent, negative again, depth x lines (k-major), for kLanes columns at once.
  std::vector<std::int32_t> k_magnitude, k_exponent, k_negative;
  // Block scales, lines x (depth / scale_block), decoded (per_group) or folded into `exponent`
  // (per_product).
  std::vector<Decoded> scale;
};

class Engine {
 public:
  // Throws std::invalid_argument when the model cannot run this atom (parameters, or sums that
  // could exceed the 53 bits the exact final rounding needs).
  explicit Engine(const Instruction& instruction);

  // rows x depth codes (row-major, `stride` apart), optionally with rows x (depth/scale_block)
  // scale codes. `as_b`: the operand is B, given transposed (one line per column of B).
  Operand decode(std::span<const std::uint32_t> codes, Eigen::Index lines, Eigen::Index K, Eigen::Index depth,
                 std::span<const std::uint32_t> scales, bool as_b) const;

  // Outputs (i, j0 .. j0 + lanes - 1), lanes 1 or kLanes: A's line i against B's lines through the
  // K loop, from c_bits[l] to d[l].
  void run(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, const std::uint32_t* c_bits,
           std::uint32_t* d, const KLoop& loop) const;

  // Every output: d = the K loop of A (M lines) and B (N lines) from c; c and d row-major M x N.
  void run_all(const Operand& a, const Operand& b, const std::uint32_t* c, std::uint32_t* d, const KLoop& loop) const;

  const Instruction& instruction() const { return instruction_; }

 private:
  struct Acc;
  Acc accumulator(std::uint32_t bits) const;
  const Format& output_format() const;
  std::optional<std::uint32_t> special_result(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j,
                                              Eigen::Index first, const Acc& acc) const;
  void step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, Eigen::Index s,
            std::uint32_t* acc) const;
  void chunk_lanes(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, Eigen::Index first,
                   std::uint32_t* acc_bits, bool special) const;
  std::int64_t accumulator_term(const Acc& acc, int E) const;
  std::uint32_t chunk(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index first,
                      std::uint32_t acc_bits, bool special) const;
  std::uint32_t round(std::int64_t sum, int scale_exponent) const;
  std::uint32_t integer_step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index s,
                             std::uint32_t c_bits) const;

  Instruction instruction_;
  FusedDotAdd p_;
  const std::vector<Decoded>* table_a_;
  const std::vector<Decoded>* table_b_;
  const std::vector<Decoded>* half_table_ = nullptr;  // f16 accumulators
  std::vector<int> order_;  // position within a k step -> k
  int product_shift_ = 0;   // F - (fraction of a product term)
  int acc_shift_ = 0;       // F - (fraction of the accumulator)
  // The chunk kernel (engine.cpp: lane width, chunk length, zero-exponent blend).
  std::int64_t (*product_sum_)(const std::int32_t*, const std::int32_t*, const std::int32_t*, const std::int32_t*,
                               const std::int32_t*, const std::int32_t*, int, int, int, int&) = nullptr;
  // The same for kLanes columns of B at once, accumulator included (engine.cpp's ProductSums;
  // none for per-group scaling or f16 accumulators).
  void (*product_sums_)() = nullptr;
};

// An fp32 round-to-nearest-even add with the GPU's canonical NaN.
std::uint32_t fp32_add(std::uint32_t x, std::uint32_t y);

}  // namespace lowbit::mma::detail
