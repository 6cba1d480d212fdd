// The presets wider than 16 bits, fp32, tf32 and e8m13 ("FP22"), encoding float64: too wide for
// the value-list reference of format_reference.hpp, so two other references.
//  * fp32: the CPU's own double -> float conversion under each IEEE 754 rounding direction
//    (fesetround; this file is compiled with -frounding-math and converts through volatile, so
//    the compiler neither folds nor hoists the conversion).
//  * tf32, e8m13 and fp32 in all 7 rounding modes and 3 overflow policies: a reference built
//    from float32 truncation. These formats are float32 with fewer mantissa bits (same exponent
//    range, subnormals and specials), so the neighbours of |x| are T = float(|x|) rounded toward
//    zero by the CPU with its low 23 - m bits cleared, and A = T + 2^(23 - m) in float32 bits
//    (2^128, one past max finite, when those are the bits of Inf); a code is the float32 bits
//    shifted right by 23 - m. The rounding decision is worked out here from |x|, T, A and the
//    midpoint (T + A) / 2, which a double holds exactly.
// Inputs: several million doubles from 2^-155 to 2^130 (float32 subnormals, underflow and
// overflow), random bit patterns (every double exponent, NaNs), exact midpoints of random
// neighbour pairs of each format with the doubles beside them, and the specials.
#include <catch2/catch.hpp>

#include <bit>
#include <cfenv>
#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;

namespace {

constexpr std::uint32_t kFloatSign = 0x8000'0000, kFloatInf = 0x7f80'0000, kFloatMax = 0x7f7f'ffff;
constexpr Overflow kOverflows[]{Overflow::saturate, Overflow::inf, Overflow::nan};

std::uint32_t float_bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// float(x) under the rounding direction `mode` (FE_TONEAREST ...), converted by the CPU.
std::vector<float> cpu_floats(const std::vector<double>& xs, int mode) {
  std::vector<float> out(xs.size());
  const int saved = std::fegetround();
  REQUIRE(std::fesetround(mode) == 0);
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const volatile double in = xs[i];
    const volatile float converted = float(in);
    out[i] = converted;
  }
  std::fesetround(saved);
  return out;
}

// Inputs for a float32-like format with `mantissa_bits` stored bits (23: fp32).
std::vector<double> wide_inputs(int mantissa_bits, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> xs;
  const auto random_sign = [&](double v) { return rng() & 1 ? -v : v; };
  std::uniform_int_distribution<int> exponent(-155, 130);
  for (int i = 0; i < (1 << 20); ++i)
    xs.push_back(random_sign(std::ldexp(1.0 + double(rng() >> 12) * 0x1p-52, exponent(rng))));
  for (int i = 0; i < (1 << 18); ++i) xs.push_back(std::bit_cast<double>(rng()));
  // Exact midpoints of neighbours T < A (random magnitude codes of the format, zero to max finite),
  // the doubles beside them, T itself, and points a quarter of the way in.
  const int shift = 23 - mantissa_bits;
  const std::uint32_t step = std::uint32_t{1} << shift;
  std::uniform_int_distribution<std::uint32_t> magnitude(0, kFloatMax >> shift);
  const auto add_gap = [&](std::uint32_t toward_bits) {
    const double toward = std::bit_cast<float>(toward_bits);
    const double away = toward_bits + step == kFloatInf ? 0x1p128 : double(std::bit_cast<float>(toward_bits + step));
    const double midpoint = (toward + away) / 2;
    for (double v : {midpoint, std::nextafter(midpoint, 0.0), std::nextafter(midpoint, INFINITY), toward,
                     toward + (away - toward) / 4})
      xs.push_back(random_sign(v));
  };
  for (int i = 0; i < (1 << 18); ++i) add_gap(magnitude(rng) << shift);
  for (std::uint32_t toward_bits : {0u, step, 0x0080'0000u - step, 0x0080'0000u, kFloatMax & ~(step - 1)})
    add_gap(toward_bits);
  for (double special : {0.0, DBL_TRUE_MIN, DBL_MIN, double(FLT_TRUE_MIN) / 2, double(FLT_TRUE_MIN), double(FLT_MIN),
                         double(FLT_MAX), 0x1p128, DBL_MAX, double(INFINITY), double(NAN)}) {
    xs.push_back(special);
    xs.push_back(-special);
  }
  return xs;
}

// What a finite overflow or an infinite input gives, as float32 bits of the result.
std::uint32_t overflow_bits(bool negative, Rounding rounding, Overflow overflow, bool infinite_input) {
  const bool toward_zero = rounding == Rounding::toward_zero || (rounding == Rounding::toward_negative && !negative) ||
                           (rounding == Rounding::toward_positive && negative);
  const std::uint32_t sign = negative ? kFloatSign : 0;
  if ((toward_zero && !infinite_input) || overflow == Overflow::saturate) return sign | kFloatMax;
  if (overflow == Overflow::inf) return sign | kFloatInf;
  return sign | 0x7fff'ffff;  // NaN with every magnitude bit set, keeping the sign
}

// The expected code of x (not NaN) in the format with `mantissa_bits`, given float(x) rounded
// toward zero by the CPU.
Code expected_code(int mantissa_bits, double x, float x_toward_zero, const ConversionOptions& o, std::uint64_t index) {
  const int shift = 23 - mantissa_bits;
  const bool negative = std::signbit(x);
  const std::uint32_t sign = negative ? kFloatSign : 0;
  const auto code = [&](std::uint32_t bits) { return Code(bits >> shift); };
  const double magnitude = std::fabs(x);
  if (std::isinf(x)) return code(overflow_bits(negative, o.rounding, o.overflow, true));
  if (magnitude >= 0x1p128) return code(overflow_bits(negative, o.rounding, o.overflow, false));
  const std::uint32_t toward_bits = float_bits(std::fabs(x_toward_zero)) & ~((std::uint32_t{1} << shift) - 1);
  const double toward = std::bit_cast<float>(toward_bits);
  if (magnitude == toward) return code(sign | toward_bits);
  const std::uint32_t away_bits = toward_bits + (std::uint32_t{1} << shift);
  const bool away_is_beyond = away_bits == kFloatInf;
  const double away = away_is_beyond ? 0x1p128 : double(std::bit_cast<float>(away_bits));
  const double midpoint = (toward + away) / 2;
  const bool toward_odd = code(toward_bits) & 1;
  bool rounds_away = false;
  switch (o.rounding) {
    case Rounding::nearest_even: rounds_away = magnitude > midpoint || (magnitude == midpoint && toward_odd); break;
    case Rounding::nearest_away: rounds_away = magnitude >= midpoint; break;
    case Rounding::toward_zero: rounds_away = false; break;
    case Rounding::toward_positive: rounds_away = !negative; break;
    case Rounding::toward_negative: rounds_away = negative; break;
    case Rounding::odd: rounds_away = !toward_odd; break;
    case Rounding::stochastic: {
      // convert.hpp's rule: away when the random bits are below the fraction of the gap,
      // truncated to random_bits (the gap is a power of two and |x| - T exact).
      const double fraction = (magnitude - toward) / (away - toward);
      rounds_away = stochastic_bits(o.seed, index, o.random_bits) <
                    std::uint64_t(std::floor(std::ldexp(fraction, o.random_bits)));
      break;
    }
  }
  if (!rounds_away) return code(sign | toward_bits);
  if (away_is_beyond) return code(overflow_bits(negative, o.rounding, o.overflow, false));
  return code(sign | away_bits);
}

struct Tally {
  std::size_t checked = 0, mismatches = 0;
  std::string first;
  void record(bool ok, const auto& describe) {
    ++checked;
    if (ok) return;
    if (++mismatches <= 8) first += describe() + "\n";
  }
};

}  // namespace

TEST_CASE("fp32 from float64 equals the CPU's conversion under each IEEE rounding direction", "[convert][wide]") {
  const std::vector<double> xs = wide_inputs(23, 32);
  const std::pair<int, Rounding> directions[]{{FE_TONEAREST, Rounding::nearest_even},
                                              {FE_UPWARD, Rounding::toward_positive},
                                              {FE_DOWNWARD, Rounding::toward_negative},
                                              {FE_TOWARDZERO, Rounding::toward_zero}};
  for (const auto& [mode, rounding] : directions) {
    const std::vector<float> cpu = cpu_floats(xs, mode);
    // IEEE 754 overflow: Inf, except max finite where the direction is toward zero (our rule too).
    const ConversionOptions options{.rounding = rounding, .overflow = Overflow::inf};
    Tally tally;
    std::size_t nan_inputs = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const Code ours = encode(formats::fp32, xs[i], options);
      const std::uint32_t theirs = float_bits(cpu[i]);
      // The CPU keeps a NaN's sign and payload; ours is the canonical NaN: both must be NaN.
      const bool both_nan = std::isnan(xs[i]) && (ours & 0x7fff'ffff) > kFloatInf && (theirs & 0x7fff'ffff) > kFloatInf;
      nan_inputs += std::isnan(xs[i]);
      tally.record(ours == theirs || both_nan, [&] {
        return fmt::format("{}: ours {:#010x}, CPU {:#010x}", testing::describe(formats::fp32, xs[i], options), ours, theirs);
      });
    }
    fmt::print("fp32 {}: {} inputs ({} NaN), {} mismatches\n", to_string(rounding), tally.checked, nan_inputs,
               tally.mismatches);
    INFO(tally.first);
    CHECK(tally.mismatches == 0);
    CHECK(xs.size() > 2'000'000);
  }
}

TEST_CASE("tf32, e8m13 and fp32 from float64 equal the float32-truncation reference in every mode and policy",
          "[convert][wide]") {
  for (const auto& [name, f] : {std::pair{"tf32", formats::tf32}, std::pair{"e8m13", formats::e8m13},
                                std::pair{"fp32", formats::fp32}}) {
    // The reference's premise: float32's exponent range and specials, fewer mantissa bits.
    REQUIRE(f.exponent_bits == 8);
    REQUIRE(f.bias == 127);
    REQUIRE(f.nan == NanEncoding::ieee);
    REQUIRE(f.subnormals);
    const std::vector<double> xs = wide_inputs(f.mantissa_bits, 13 + std::uint64_t(f.mantissa_bits));
    const std::vector<float> toward_zero = cpu_floats(xs, FE_TOWARDZERO);
    const Code canonical_nan = Code(0x7fff'ffffu >> (23 - f.mantissa_bits));
    std::size_t checked = 0;
    for (Rounding rounding : testing::kAllRoundings)
      for (Overflow overflow : kOverflows) {
        const ConversionOptions options{.rounding = rounding, .overflow = overflow, .random_bits = 32, .seed = 5};
        Tally tally;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const Code ours = encode(f, xs[i], options, i);
          const Code expected = std::isnan(xs[i]) ? canonical_nan
                                                  : expected_code(f.mantissa_bits, xs[i], toward_zero[i], options, i);
          tally.record(ours == expected, [&] {
            return fmt::format("{} index {}: ours {:#x}, expected {:#x}", testing::describe(f, xs[i], options), i, ours,
                               expected);
          });
        }
        INFO(fmt::format("{} {} {}: first mismatches\n{}", name, to_string(rounding), to_string(overflow), tally.first));
        CHECK(tally.mismatches == 0);
        checked += tally.checked;
      }
    fmt::print("{}: {} inputs x 7 modes x 3 overflow policies = {} checks\n", name, xs.size(), checked);
    CHECK(xs.size() > 2'000'000);
  }
}
