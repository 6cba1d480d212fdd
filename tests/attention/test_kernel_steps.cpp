// The figures kernel_steps.hpp states for its exp2 polynomials, recomputed over every float in
// [-125, 0] (1,123,680,257 inputs, -0 included) against exp2 in double rounded to float; and the
// steps' small identities.
#include <catch2/catch.hpp>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/pipeline.hpp"
#include "numerics/metrics.hpp"
#include "numerics/parallel.hpp"

using namespace lowbit;
namespace st = lowbit::attention::steps;

namespace {

constexpr std::uint32_t kMinusZero = 0x8000'0000u;   // -0
constexpr std::uint32_t kMinus125 = 0xc2fa'0000u;    // -125 = -0b1.111101 x 2^6

struct Tally {
  std::uint64_t inputs = 0, exact5 = 0, exact6 = 0, worst5 = 0, worst6 = 0;
};

// Both degrees over the bit patterns [first, last] (negative floats: increasing bits, decreasing
// value). tests/attention/CMakeLists.txt builds this file with -mfma where the machine has FMA.
Tally tally(std::uint32_t first, std::uint32_t last) {
  const st::Exp2Poly p5 = st::exp2_degree5(), p6 = st::exp2_degree6();
  Tally t;
  for (std::uint64_t b = first; b <= last; ++b) {
    const float x = std::bit_cast<float>(std::uint32_t(b));
    const float exact = float(std::exp2(double(x)));
    const std::uint64_t d5 = ulp_distance(st::poly_exp2(x, p5), exact), d6 = ulp_distance(st::poly_exp2(x, p6), exact);
    ++t.inputs;
    t.exact5 += d5 == 0;
    t.exact6 += d6 == 0;
    t.worst5 = std::max(t.worst5, d5);
    t.worst6 = std::max(t.worst6, d6);
  }
  return t;
}

}  // namespace

TEST_CASE("poly_exp2 over every float in [-125, 0]: the figures kernel_steps.hpp states", "[attention][exp2][exhaustive]") {
  constexpr std::uint32_t kPieces = 256;
  const std::uint64_t span = std::uint64_t(kMinus125 - kMinusZero) + 1;
  std::vector<Tally> parts(kPieces);
  parallel_for(kPieces, [&](std::size_t i, unsigned) {
    const std::uint64_t from = kMinusZero + span * i / kPieces, to = kMinusZero + span * (i + 1) / kPieces - 1;
    parts[i] = tally(std::uint32_t(from), std::uint32_t(to));
  });
  Tally all;
  for (const Tally& t : parts) {
    all.inputs += t.inputs;
    all.exact5 += t.exact5;
    all.exact6 += t.exact6;
    all.worst5 = std::max(all.worst5, t.worst5);
    all.worst6 = std::max(all.worst6, t.worst6);
  }
  CHECK(all.inputs == 1'123'680'257u);
  // "degree 5 is correctly rounded on 95.08% ... and within 2 ulp on all of them (degree 6: 99.42%,
  // within 1 ulp)": the percentages as stated, to two decimals.
  const double share5 = 100.0 * double(all.exact5) / double(all.inputs);
  const double share6 = 100.0 * double(all.exact6) / double(all.inputs);
  WARN("degree 5: " << all.exact5 << " correctly rounded (" << share5 << "%), worst " << all.worst5
                    << " ulp; degree 6: " << all.exact6 << " (" << share6 << "%), worst " << all.worst6 << " ulp");
  CHECK(std::round(share5 * 100) == 9508);
  CHECK(std::round(share6 * 100) == 9942);
  CHECK(all.worst5 == 2);
  CHECK(all.worst6 == 1);
}

TEST_CASE("exp2 steps: exp2(0) = 1, P's maximum at 448, masked keys, the first block's alpha", "[attention][exp2]") {
  for (const st::Exp2Poly& p : {st::exp2_degree5(), st::exp2_degree6()}) {
    CHECK(st::poly_exp2(0.0f, p) == 1.0f);
    CHECK(st::poly_exp2(-0.0f, p) == 1.0f);
    CHECK(st::poly_exp2(st::kNegativeInfinity, p) == 0.0f);
    CHECK(std::isnan(st::poly_exp2(std::nanf(""), p)));
    for (int j = -125; j <= 0; ++j) CHECK(st::poly_exp2(float(j), p) == std::ldexp(1.0f, j));
  }
  // The row maximum's P: poly_exp2(log2 448) = 0x1.bffffep+8, which E4M3 (RNE, satfinite) stores as 448.
  CHECK(st::poly_exp2(st::kLog2Of448) == 0x1.bffffep+8f);
  CHECK(st::e4m3_code(st::poly_exp2(st::kLog2Of448)) == 0x7e);
  CHECK(float(std::log2(448.0)) == st::kLog2Of448);
  CHECK(st::rescale(st::kNegativeInfinity, st::row_offset(3.0f, st::kLog2Of448)) == 0.0f);
  CHECK(st::row_offset(st::kNegativeInfinity, st::kLog2Of448) == -st::kLog2Of448);
  // A row with every key so far masked carries -inf, so a later block whose maximum is far below 0
  // rescales by 0, where carrying its -log2 448 would overflow MUFU.EX2 to +inf.
  const float far_below = -739.0f;
  CHECK(st::carried_offset(st::kNegativeInfinity, st::row_offset(st::kNegativeInfinity, st::kLog2Of448)) == st::kNegativeInfinity);
  CHECK(st::carried_offset(far_below, st::row_offset(far_below, st::kLog2Of448)) == st::row_offset(far_below, st::kLog2Of448));
  CHECK(st::rescale(st::kNegativeInfinity, st::row_offset(far_below, st::kLog2Of448), st::exp2_sm90_ex2()) == 0.0f);
  CHECK(std::isinf(st::rescale(-st::kLog2Of448, st::row_offset(far_below, st::kLog2Of448), st::exp2_sm90_ex2())));
}

TEST_CASE("fused steps 1 and 5: one rounding of acc scale - offset, a scale of 0 kept from NaN", "[attention][exp2]") {
  // acc = 1000028, scale = 0x1.23456p-17, offset = 8 (worked in exact rationals): acc scale has 41
  // bits. Rounded: s = RN(acc scale) = 0x1.15c912p+3, s - 8 = 0x1.5c912p-1 (exact). Fused:
  // RN(acc scale - 8) = 0x1.5c913p-1, without s's rounding (2^-21), so exp2 differs.
  const float acc = 1000028.0f, scale = 0x1.23456p-17f, offset = 8.0f;
  CHECK(st::dequantize_score(std::int32_t(1000028), scale) == 0x1.15c912p+3f);
  for (const st::Exp2& unit : {st::exp2_polynomial(), st::exp2_sm90_ex2()}) {
    const float rounded = st::probability(st::dequantize_score(std::int32_t(1000028), scale), offset, unit);
    const float fused = st::fused_probability(acc, scale, offset, unit);
    CHECK(rounded == st::exp2_up_to_highest(0x1.5c912p-1f, unit));
    CHECK(fused == st::exp2_anywhere(0x1.5c913p-1f, unit));
    CHECK(rounded != fused);
    // A masked key (acc = -inf) gives +0 even where the pair's scale rounded to 0.
    const float masked = st::fused_probability(st::kNegativeInfinity, st::fused_scale(0.0f), -st::kLog2Of448, unit);
    CHECK(std::bit_cast<std::uint32_t>(masked) == 0u);
    CHECK(std::isnan(st::fused_probability(st::kNegativeInfinity, 0.0f, -st::kLog2Of448, unit)));  // why the floor
    // The fused argument can pass kExp2Highest (huge maxima): exp2 over every float, +inf there.
    CHECK(std::isinf(st::fused_probability(acc, 1.0f, -200.0f, unit)));
  }
  CHECK(st::fused_scale(0.0f) == 0x1p-149f);
  CHECK(st::fused_scale(0x1p-149f) == 0x1p-149f);
  CHECK(st::fused_scale(0x1.8p-140f) == 0x1.8p-140f);
  CHECK(st::fused_scale(0.5f) == 0.5f);
}

TEST_CASE("correctly rounded exp2 and log2 against long double on sampled inputs", "[attention][exp2]") {
  std::size_t checked = 0, wrong = 0;
  for (std::uint32_t b = kMinusZero; b <= kMinus125; b += 9973) {
    const float x = std::bit_cast<float>(b);
    wrong += attention::exp2_exact(x) != float(std::exp2(static_cast<long double>(x)));
    const float l = std::ldexp(1.0f + float(b % 1000) / 1000.0f, int(b % 200) - 100);
    wrong += attention::log2_exact(l) != float(std::log2(static_cast<long double>(l)));
    checked += 2;
  }
  CHECK(checked > 200'000);
  CHECK(wrong == 0);
}

// divide_by_inverse against the division it replaces in the quantization kernels: every finite fp16
// value (Q's and V's inputs) over the scales amax / 127 (INT8) and amax / 448 (E4M3) of every 16th
// positive fp16 amax, and sampled fp32 pairs (K's smoothed values) over 2^-30 .. 2^30.
TEST_CASE("divide_by_inverse equals x / s bit for bit", "[attention][quantize]") {
  std::vector<float> halves;
  for (std::uint32_t h = 0; h < 0x10000u; ++h)
    if ((h & 0x7c00u) != 0x7c00u) halves.push_back(float(std::bit_cast<_Float16>(std::uint16_t(h))));
  std::vector<float> scales;
  for (std::uint32_t h = 1; h < 0x7c00u; h += 16)
    for (float target : {127.0f, 448.0f}) scales.push_back(st::div_rn(float(std::bit_cast<_Float16>(std::uint16_t(h))), target));
  std::atomic<std::uint64_t> compared{0}, differ{0};
  parallel_for(scales.size(), [&](std::size_t i, unsigned) {
    const float s = scales[i], inverse = st::div_rn(1.0f, s);
    std::uint64_t bad = 0;
    for (float x : halves)
      bad += std::bit_cast<std::uint32_t>(st::divide_by_inverse(x, s, inverse)) != std::bit_cast<std::uint32_t>(st::div_rn(x, s));
    compared += halves.size();
    differ += bad;
  });
  CHECK(compared == halves.size() * scales.size());
  CHECK(differ == 0);

  std::uint64_t state = 0x9e3779b97f4a7c15u, sampled = 0, sampled_differ = 0;
  const auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (int i = 0; i < 20'000'000; ++i) {
    const std::uint64_t r = next();
    const float s = std::bit_cast<float>(std::uint32_t((r & 0x7fffffu) | ((97u + (r >> 23) % 60u) << 23)));
    const float x = std::bit_cast<float>(std::uint32_t(((r >> 32) & 0x807fffffu) | ((100u + (r >> 56) % 56u) << 23)));
    const float q = st::div_rn(x, s);
    if (!(std::fabs(q) >= 0x1p-126f)) continue;
    ++sampled;
    sampled_differ += std::bit_cast<std::uint32_t>(st::divide_by_inverse(x, s, st::div_rn(1.0f, s))) != std::bit_cast<std::uint32_t>(q);
  }
  CHECK(sampled > 19'000'000);
  CHECK(sampled_differ == 0);
  // Zeros keep their sign.
  CHECK(std::bit_cast<std::uint32_t>(st::divide_by_inverse(-0.0f, 0.75f, st::div_rn(1.0f, 0.75f))) == kMinusZero);
  CHECK(std::bit_cast<std::uint32_t>(st::divide_by_inverse(0.0f, 0.75f, st::div_rn(1.0f, 0.75f))) == 0u);
}

// The inverse serves scales from 2^-92 on (steps::invertible_scale): there the sampled quotients a
// code can tell from zero (2^-11 .. 2^9) equal the division's; below, some differ (the remainder
// x - q0 s is not exact), and below 2^-128 RN(1 / s) overflows and the quotient is NaN. The kernels
// divide there (a bf16 or fp32 group of magnitude under about 2^-85).
TEST_CASE("divide_by_inverse needs a scale of 2^-92 or more", "[attention][quantize]") {
  CHECK(st::invertible_scale(0x1p-92f));
  CHECK_FALSE(st::invertible_scale(0x1.fffffep-93f));
  CHECK_FALSE(st::invertible_scale(0.0f));
  const float tiny = 0x1p-130f, tiny_inverse = st::div_rn(1.0f, tiny);
  CHECK(std::isinf(tiny_inverse));
  CHECK(std::isnan(st::divide_by_inverse(0x1p-125f, tiny, tiny_inverse)));
  CHECK(st::div_rn(0x1p-125f, tiny) == 32.0f);

  std::uint64_t state = 0x2545f4914f6cdd1du;
  const auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  // Scales with exponent 2^(first - 127) .. 2^(first + 14 - 127), |x / s| in 2^-11 .. 2^9.
  const auto differing = [&](std::uint32_t first, int samples) {
    int differ = 0;
    for (int i = 0; i < samples; ++i) {
      const std::uint64_t r = next();
      const float s = std::bit_cast<float>(std::uint32_t((r & 0x7fffffu) | ((first + (r >> 23) % 15u) << 23)));
      const float ratio = std::bit_cast<float>(std::uint32_t(((r >> 32) & 0x807fffffu) | ((116u + (r >> 56) % 21u) << 23)));
      const float x = st::mul_rn(ratio, s);
      const float q = st::div_rn(x, s);
      if (!(std::fabs(q) >= 0x1p-11f)) continue;
      differ += std::bit_cast<std::uint32_t>(st::divide_by_inverse(x, s, st::div_rn(1.0f, s))) != std::bit_cast<std::uint32_t>(q);
    }
    return differ;
  };
  CHECK(differing(127 - 92, 10'000'000) == 0);  // 2^-92 .. 2^-78
  CHECK(differing(127 - 107, 10'000'000) > 0);  // 2^-107 .. 2^-93
}

