// Stochastic rounding: the rule, its statistics and its reproducibility. All draws are seeded,
// so every figure here is deterministic; the statistical bounds are 6 standard deviations.
//
// The rule (convert.hpp): with b random bits, x between T (toward zero) and A rounds to A
// exactly when stochastic_bits(seed, index, b) < floor(f * 2^b), f = (|x| - |T|) / (|A| - |T|).
// So P(A) is f truncated to b bits, provided stochastic_bits is uniform on [0, 2^b).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;
using lowbit::testing::ReferenceFormat;

namespace {

// floor(f * 2^bits) for f in [0, 1): exact, f * 2^bits only rescales.
std::uint64_t truncated_fraction(double f, int bits) { return std::uint64_t(std::floor(std::ldexp(f, bits))); }

// x uniformly placed between neighbours of the format, both signs, plus midpoints.
std::vector<double> inexact_inputs(const ReferenceFormat& r, std::mt19937_64& rng, int count) {
  const auto& v = r.values();
  std::uniform_int_distribution<std::size_t> pick(0, v.size() - 2);
  std::uniform_real_distribution<double> where(0.0, 1.0);
  std::vector<double> xs;
  for (int i = 0; i < count; ++i) {
    const std::size_t k = pick(rng);
    const double x = v[k] + where(rng) * (v[k + 1] - v[k]);
    if (x != v[k] && x != v[k + 1]) xs.push_back(x);
    if (i % 8 == 0) xs.push_back((v[k] + v[k + 1]) / 2);
  }
  return xs;
}

}  // namespace

TEST_CASE("stochastic rounding picks a neighbour exactly by the truncated-fraction rule", "[convert][stochastic]") {
  std::mt19937_64 rng(42);
  std::size_t checked = 0;
  for (const char* spec : {"e4m3", "e5m2", "e2m1", "bf16", "ue8m0", "e4m3fnuz", "e4m3:bias=8:no-subnormals", "int8",
                           "uint4", "p3109:k=8:p=1"}) {
    const Format f = format_from_string(spec);
    const ReferenceFormat reference(f);
    const auto xs = inexact_inputs(reference, rng, 4000);
    for (int bits : {1, 2, 3, 8, 16, 24, 32, 53, 63}) {
      const ConversionOptions options{.rounding = Rounding::stochastic, .random_bits = bits, .seed = 1234};
      int wrong = 0;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        const auto expected = reference.expected(xs[i], Rounding::stochastic, Overflow::saturate);
        const std::uint64_t index = i * 7919;
        const bool away = stochastic_bits(options.seed, index, bits) < truncated_fraction(expected.away_fraction, bits);
        const Code got = encode(f, xs[i], options, index);
        if (got != (away ? expected.away_code : expected.code) && ++wrong <= 4)
          UNSCOPED_INFO(fmt::format("{} bits={} x={:a} index={}: got {:#x}, expected {:#x}", spec, bits, xs[i], index,
                                    got, away ? expected.away_code : expected.code));
        ++checked;
      }
      CHECK(wrong == 0);
    }
  }
  CHECK(checked > 300'000);
}

TEST_CASE("stochastic rounding frequencies match the distance", "[convert][stochastic]") {
  // e4m3 between 1 and 1.125 (spacing 1/8) and bf16 between 1 and 1 + 2^-7: fraction f of the gap.
  constexpr int kDraws = 1 << 16;
  for (const char* spec : {"e4m3", "bf16", "e2m1", "ue8m0"}) {
    const Format f = format_from_string(spec);
    const ReferenceFormat reference(f);
    const double one = 1.0;
    const double next = *std::upper_bound(reference.values().begin(), reference.values().end(), one);
    for (double fraction : {0.5, 1.0 / 3, 0.1, 0.9, 0.01, 0.999, 0x1p-10, 0.75})
      for (int bits : {2, 4, 8, 32}) {
        for (double sign : {1.0, -1.0}) {
          if (sign < 0 && !f.is_signed) continue;
          const double x = sign * (one + fraction * (next - one));
          const ConversionOptions options{.rounding = Rounding::stochastic, .random_bits = bits, .seed = 99};
          const Code away_code = encode(f, sign * next);
          int away = 0;
          for (int i = 0; i < kDraws; ++i) away += encode(f, x, options, std::uint64_t(i)) == away_code;
          const double p = std::ldexp(double(truncated_fraction(fraction, bits)), -bits);
          const double sigma = std::sqrt(kDraws * p * (1 - p));
          INFO(fmt::format("{} x={} fraction={} bits={}: {} of {} away, expected {} +- {}", spec, x, fraction, bits, away,
                           kDraws, kDraws * p, 6 * sigma));
          CHECK(std::fabs(away - kDraws * p) <= 6 * sigma + 0.5);
          if (p == 0) CHECK(away == 0);  // f below 2^-bits never rounds away
        }
      }
  }
}

TEST_CASE("stochastic rounding frequencies in subnormal, zero, binade-crossing and overflow gaps",
          "[convert][stochastic]") {
  // Gaps between a value T and the next one away from zero, A, where the code arithmetic is not
  // that of [1, next): the frequency of A must follow from the distance alone,
  // P(A) = (|x| - T) / (A - T) truncated to 32 bits (A - T is a power of two, so P is exact). The
  // codes are golden, for positive x; negative x take the sign bit as well.
  struct Gap {
    const char* what;
    const char* spec;
    Overflow overflow;
    double toward, away;
    Code toward_code, away_code;
  };
  const Gap gaps[]{
      {"e4m3 subnormals 3*2^-9 .. 4*2^-9", "e4m3", Overflow::saturate, 0x3p-9, 0x4p-9, 0b0'0000'011, 0b0'0000'100},
      {"e4m3 zero .. smallest subnormal 2^-9", "e4m3", Overflow::saturate, 0.0, 0x1p-9, 0b0'0000'000, 0b0'0000'001},
      {"e2m1 subnormal 0.5 .. min normal 1", "e2m1", Overflow::saturate, 0.5, 1.0, 0b0'00'1, 0b0'01'0},
      {"no subnormals: zero .. min normal 2^-7", "e4m3:bias=8:no-subnormals", Overflow::saturate, 0.0, 0x1p-7,
       0b0'0000'000, 0b0'0001'000},
      {"e4m3 binade crossing 1.875 .. 2", "e4m3", Overflow::saturate, 1.875, 2.0, 0b0'0111'111, 0b0'1000'000},
      {"e5m2 binade crossing 1.75 .. 2", "e5m2", Overflow::saturate, 1.75, 2.0, 0b0'01111'11, 0b0'10000'00},
      {"e4m3 just below max finite, 416 .. 448", "e4m3", Overflow::saturate, 416.0, 448.0, 0b0'1111'101, 0b0'1111'110},
      {"e4m3 max finite 448 .. 480 (overflow to NaN)", "e4m3", Overflow::nan, 448.0, 480.0, 0b0'1111'110, 0b0'1111'111},
      {"e5m2 max finite 57344 .. 65536 (overflow to Inf)", "e5m2", Overflow::inf, 57344.0, 65536.0, 0b0'11110'11,
       0b0'11111'00},
      // Saturating: rounding away overflows to max finite again, so every draw gives 448.
      {"e4m3 max finite 448 .. 480 (saturate)", "e4m3", Overflow::saturate, 448.0, 480.0, 0b0'1111'110, 0b0'1111'110},
  };
  constexpr int kDraws = 1 << 16;
  constexpr int kBits = 32;
  std::uint64_t seed = 1000;
  for (const Gap& gap : gaps) {
    const Format f = format_from_string(gap.spec);
    for (double fraction : {0.5, 0.25, 0.9, 1.0 / 3, 0.01, 0x1p-10})
      for (const bool negative : {false, true}) {
        const double magnitude = gap.toward + fraction * (gap.away - gap.toward);
        const double x = negative ? -magnitude : magnitude;
        const double p = std::ldexp(double(truncated_fraction((magnitude - gap.toward) / (gap.away - gap.toward), kBits)), -kBits);
        const Code sign = negative ? f.sign_mask() : 0;
        const ConversionOptions options{.rounding = Rounding::stochastic, .overflow = gap.overflow, .random_bits = kBits,
                                        .seed = ++seed};
        int away = 0, neighbours = 0;
        for (int i = 0; i < kDraws; ++i) {
          const Code got = encode(f, x, options, std::uint64_t(i));
          away += got == (sign | gap.away_code);
          neighbours += got == (sign | gap.toward_code) || got == (sign | gap.away_code);
        }
        // 5 standard deviations of the binomial count: a fixed seed makes the outcome fixed, and
        // a correct rule fails one such check in about 2 million.
        const double sigma = std::sqrt(kDraws * p * (1 - p));
        INFO(fmt::format("{}: x={} seed={}: {} of {} away, expected {:.1f} +- {:.1f}", gap.what, x, options.seed, away,
                         kDraws, kDraws * p, 5 * sigma));
        CHECK(neighbours == kDraws);
        if (gap.toward_code != gap.away_code) CHECK(std::fabs(away - kDraws * p) <= 5 * sigma);
      }
  }
}

TEST_CASE("stochastic_bits is uniform, and fewer bits are a prefix of more", "[convert][stochastic]") {
  constexpr int kDraws = 1 << 20;
  for (std::uint64_t seed : {0ull, 1ull, 0xDEADBEEFull}) {
    std::vector<int> bucket(256);
    for (int i = 0; i < kDraws; ++i) ++bucket[stochastic_bits(seed, std::uint64_t(i), 8)];
    double chi2 = 0;
    const double expected = kDraws / 256.0;
    for (int n : bucket) chi2 += (n - expected) * (n - expected) / expected;
    INFO(fmt::format("seed {}: chi^2 = {} with 255 degrees of freedom (mean 255, sd 22.6)", seed, chi2));
    CHECK(chi2 < 255 + 6 * 22.6);
    CHECK(chi2 > 255 - 6 * 22.6);
  }
  for (std::uint64_t i = 0; i < 1000; ++i)
    for (int bits = 1; bits <= 63; ++bits)
      REQUIRE(stochastic_bits(5, i, bits) == stochastic_bits(5, i, 63) >> (63 - bits));
}

TEST_CASE("stochastic rounding is reproducible for (seed, index) however the work is split", "[convert][stochastic]") {
  const Format f = formats::e4m3;
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<float> value(-300.0f, 300.0f);
  std::vector<float> xs(10'000);
  for (auto& x : xs) x = value(rng);
  const ConversionOptions options{.rounding = Rounding::stochastic, .random_bits = 16, .seed = 2024};
  std::vector<Code> whole(xs.size()), pieces(xs.size()), again(xs.size()), other_seed(xs.size());
  encode(f, xs, whole, options, 1000);
  encode(f, xs, again, options, 1000);
  CHECK(whole == again);
  // Split into uneven pieces, each with its own first index.
  for (std::size_t start = 0, step = 1; start < xs.size(); start += step, step = step * 3 % 997 + 1) {
    const std::size_t n = std::min(step, xs.size() - start);
    encode(f, std::span(xs).subspan(start, n), std::span(pieces).subspan(start, n), options, 1000 + start);
  }
  CHECK(whole == pieces);
  int scalar_mismatches = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) scalar_mismatches += encode(f, double(xs[i]), options, 1000 + i) != whole[i];
  CHECK(scalar_mismatches == 0);
  ConversionOptions reseeded = options;
  reseeded.seed = 2025;
  encode(f, xs, other_seed, reseeded, 1000);
  int differing = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) differing += other_seed[i] != whole[i];
  CHECK(differing > 1000);  // a different seed draws differently
}
