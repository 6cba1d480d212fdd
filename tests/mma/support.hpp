// Helpers shared by the MMA tests: one output element through a whole tile, codes from values,
// random operands.
#pragma once

#include <bit>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/gemm.hpp"
#include "verification/reference.hpp"

namespace lowbit::mma::test {

// The code of an exactly representable value (the tests write values, not bit patterns).
inline Code code_of(const Format& f, double value) {
  const Code c = encode(f, value, {Rounding::toward_zero, f.has_inf() ? Overflow::inf : Overflow::saturate});
  if (!f.is_integer() && decode(f, c) != value) throw std::logic_error("test value is not exact in " + format_name(f));
  return c;
}

struct Dot {
  std::vector<double> a, b;  // A's row 0 and B's column 0 (the rest of the tile is zero)
  std::uint32_t c = 0;       // C[0][0] bits
  std::vector<Code> a_codes, b_codes;  // raw codes, when set they replace a and b
  std::vector<Code> scale_a, scale_b;  // row 0 / column 0 scale codes (block-scaled)
};

struct DotResult {
  std::uint32_t engine, reference;
};

// D[0][0] of one instruction, from the engine and from the rational reference.
inline DotResult run_dot(const Instruction& in, const Dot& dot) {
  const Atom& at = in.atom;
  std::vector<Code> a(std::size_t(at.m * at.k), 0), b(std::size_t(at.k * at.n), 0);
  std::vector<std::uint32_t> c(std::size_t(at.m * at.n), 0);
  for (std::size_t k = 0; k < dot.a.size(); ++k) a[k] = code_of(at.a, dot.a[k]);
  for (std::size_t k = 0; k < dot.b.size(); ++k) b[k * std::size_t(at.n)] = code_of(at.b, dot.b[k]);
  for (std::size_t k = 0; k < dot.a_codes.size(); ++k) a[k] = dot.a_codes[k];
  for (std::size_t k = 0; k < dot.b_codes.size(); ++k) b[k * std::size_t(at.n)] = dot.b_codes[k];
  c[0] = dot.c;
  std::vector<Code> sa, sb;
  if (at.block_scaled()) {
    const Code one = code_of(at.scale, 1.0);
    sa.assign(std::size_t(at.m * at.scale_columns()), one);
    sb.assign(std::size_t(at.scale_columns() * at.n), one);
    for (std::size_t s = 0; s < dot.scale_a.size(); ++s) sa[s] = dot.scale_a[s];
    for (std::size_t s = 0; s < dot.scale_b.size(); ++s) sb[s * std::size_t(at.n)] = dot.scale_b[s];
  }
  const TileInputs inputs{a, b, c, sa, sb};
  return {execute(in, inputs)[0], reference_execute(in, inputs)[0]};
}

inline std::uint32_t fp32_bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Random codes of a format, in one of a few families that exercise different paths.
enum class Mix { uniform, narrow, tiny, finite };

inline Code random_code(const Format& f, Mix mix, std::mt19937_64& rng) {
  const Code all = f == formats::ue4m3 ? 0xff : f.code_count_minus_one();
  for (;;) {
    Code c = Code(rng()) & all;
    if (f.is_integer() || mix == Mix::uniform) return c;
    if (f.is_nan_code(c & f.code_count_minus_one()) || f.is_inf_code(c & f.code_count_minus_one())) continue;
    const int field = int((c & f.magnitude_mask()) >> f.mantissa_bits);
    const int middle = f.exponent_field_max() / 2;
    if (mix == Mix::narrow && std::abs(field - middle) > 1) continue;
    if (mix == Mix::tiny && field > 2) continue;
    return c;
  }
}

// Random binary32 accumulator bits: any pattern, zeros of both signs, or values near 1.
inline std::uint32_t random_accumulator(std::mt19937_64& rng) {
  switch (rng() % 4) {
    case 0: return std::uint32_t(rng());
    case 1: return (rng() & 1) ? 0x8000'0000u : 0u;
    default: return (std::uint32_t(rng()) & 0x807f'ffffu) | (std::uint32_t(120 + rng() % 16) << 23);
  }
}

}  // namespace lowbit::mma::test
