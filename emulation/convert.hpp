// Encoding real numbers into a Format: one generic, exact conversion for every format.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "emulation/format.hpp"

namespace lowbit {

enum class Rounding : std::uint8_t {
  nearest_even,
  nearest_away,
  toward_zero,
  toward_positive,
  toward_negative,
  odd,         // round to odd: inexact results get an odd last bit (no double rounding later)
  stochastic,  // round up with probability (discarded fraction, truncated to random_bits bits)
};

// What a finite value too large for the format, or an infinite input, becomes.
enum class Overflow : std::uint8_t {
  saturate,  // +-max finite
  inf,       // +-Inf (formats with Inf only)
  nan,       // NaN (formats with NaN only)
};

struct ConversionOptions {
  Rounding rounding = Rounding::nearest_even;
  Overflow overflow = Overflow::saturate;
  // Stochastic rounding: the random bits compared with the discarded fraction, drawn from a
  // counter-based generator keyed by (seed, element index), so results are reproducible and
  // independent of how the work is split.
  int random_bits = 32;
  std::uint64_t seed = 0;

  // Why these options cannot be used with f, or nothing.
  std::optional<std::string> validate(const Format& f) const;
};

// Rounding-boundary rules the conversion follows, shared by every format:
//  * Rounding is done with an unbounded exponent first; a result above max finite overflows
//    (so e4m3 464 -> 448 but 465 -> overflow). Under a rounding direction toward zero for the
//    value's sign (toward_zero; toward_negative for positives; toward_positive for
//    negatives) an overflow gives max finite instead of Inf/NaN (IEEE 754 §7.4).
//  * NaN input: the canonical NaN; formats without NaN give +max finite (as CUDA's fp6/fp4
//    host conversions do); integer formats give 0 (as PTX cvt does).
//  * Infinite input follows the overflow policy (it is exact under Overflow::inf).
//  * Unsigned floating formats encode |x| (as CUDA's e8m0 conversion does); unsigned integer
//    formats clamp negative values to 0.
//  * Formats without zero (ue8m0) clip results below their smallest value to it.
//  * Without subnormals the interval below min normal has the two points 0 and min normal.
//  * Integer formats saturate to [lowest, max].
Code encode(const Format& f, double x, const ConversionOptions& options = {}, std::uint64_t index = 0);

// Encodes a span; element i uses index first_index + i for stochastic rounding. Float input
// takes the vectorized path of convert_fast.hpp when it supports (f, options), with the same
// results. Throws std::invalid_argument when out.size() != in.size().
void encode(const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& options = {},
            std::uint64_t first_index = 0);
void encode(const Format& f, std::span<const double> in, std::span<Code> out, const ConversionOptions& options = {},
            std::uint64_t first_index = 0);

// Encode then decode: the value the format stores for x.
double round_to_format(const Format& f, double x, const ConversionOptions& options = {}, std::uint64_t index = 0);

// The random integer in [0, 2^bits) stochastic rounding uses for (seed, index).
std::uint64_t stochastic_bits(std::uint64_t seed, std::uint64_t index, int bits);

std::string_view to_string(Rounding r);
std::string_view to_string(Overflow o);
std::optional<Rounding> parse_rounding(std::string_view name);
std::optional<Overflow> parse_overflow(std::string_view name);

}  // namespace lowbit
