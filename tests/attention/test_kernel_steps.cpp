// The figures kernel_steps.hpp states for its exp2 polynomials, recomputed over every float in
// [-125, 0] (1,123,680,257 inputs, -0 included) against exp2 in double rounded to float; and the
// steps' small identities.
#include <catch2/catch.hpp>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>

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
