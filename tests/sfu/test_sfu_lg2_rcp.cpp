// The sm_90 lg2 and rcp models (emulation/sfu/lg2.hpp, rcp.hpp) and CUDA's exp2f without fast math
// (sfu::sm90_exp2f) on the host. The models against the instructions were checked on an H100 by
// kernels/probes/sm90_lg2_structure.cu and sm90_rcp_structure.cu (emulation/sfu/data/README.md);
// here: properties that any decoding or rounding error of the tables would break, and the accuracy
// the PTX manual states.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <algorithm>
#include <limits>
#include <random>
#include <stdexcept>

#include "emulation/sfu/ex2.hpp"
#include "emulation/sfu/lg2.hpp"
#include "emulation/sfu/rcp.hpp"

using namespace lowbit;

TEST_CASE("sm90 lg2 table: 0 at 1, non-decreasing, below 1", "[sfu][lg2]") {
  const std::uint64_t* t = sfu::sm90_lg2_table();
  CHECK(t[0] == 0);
  std::uint64_t decreases = 0;
  for (std::uint32_t i = 1; i < sfu::kLg2TableSize; ++i) decreases += t[i] < t[i - 1];
  CHECK(decreases == 0);
  CHECK(t[sfu::kLg2TableSize - 1] < (std::uint64_t{1} << sfu::kLg2FractionBits));
}

TEST_CASE("sm90 lg2: powers of two exact, within 2^-22 of log2 on x >= 1, monotone", "[sfu][lg2]") {
  for (int k = 0; k <= 127; ++k) CHECK(sfu::sm90_lg2(std::ldexp(1.0f, k)) == float(k));
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits(0x3f80'0000u, 0x7f7f'ffffu);
  int far = 0, decreasing = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t b = bits(rng);
    const float x = std::bit_cast<float>(b), next = std::bit_cast<float>(b + 1);
    const float y = sfu::sm90_lg2(x);
    far += std::fabs(double(y) - std::log2(double(x))) > std::ldexp(1.0, -22) * std::max(1.0, std::fabs(std::log2(double(x))));
    if (next <= std::numeric_limits<float>::max()) decreasing += sfu::sm90_lg2(next) < y;
  }
  CHECK(far == 0);
  CHECK(decreasing == 0);
  CHECK_THROWS_AS(sfu::sm90_lg2(std::nextafter(0.5f, 0.0f)), std::domain_error);
  CHECK_THROWS_AS(sfu::sm90_lg2(INFINITY), std::domain_error);
  CHECK_THROWS_AS(sfu::sm90_lg2(NAN), std::domain_error);
}

TEST_CASE("sm90 lg2 from 1/2 up to 1: within 2^-22 of log2, non-decreasing up to lg2(1) = 0", "[sfu][lg2]") {
  // Below 1 the unit is not exact at powers of two: the recorded table gives lg2(1/2) = -0x1.fffffcp-1.
  CHECK(sfu::sm90_lg2(0.5f) == -0x1.fffffcp-1f);
  int far = 0, decreasing = 0;
  float previous = -1.0f;
  for (std::uint32_t b = 0x3f00'0000u; b < 0x3f80'0000u; b += 7) {
    const float x = std::bit_cast<float>(b), y = sfu::sm90_lg2(x);
    far += std::fabs(double(y) - std::log2(double(x))) > std::ldexp(1.0, -22);
    decreasing += y < previous;
    previous = y;
  }
  CHECK(far == 0);
  CHECK(decreasing == 0);
  CHECK(previous <= sfu::sm90_lg2(1.0f));
}

TEST_CASE("sm90 rcp: within one ulp of 1/x, exact at powers of two, the measured specials", "[sfu][rcp]") {
  for (int k = -126; k <= 125; ++k) CHECK(sfu::sm90_rcp(std::ldexp(1.0f, k)) == std::ldexp(1.0f, -k));
  std::mt19937 rng(11);
  std::uniform_int_distribution<std::uint32_t> bits(0x0080'0000u, 0x7e7f'ffffu);  // results stay normal
  int far = 0, asymmetric = 0;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(bits(rng)), y = sfu::sm90_rcp(x), nearest = 1.0f / x;
    far += std::max(std::bit_cast<std::uint32_t>(y), std::bit_cast<std::uint32_t>(nearest)) -
               std::min(std::bit_cast<std::uint32_t>(y), std::bit_cast<std::uint32_t>(nearest)) > 1;
    asymmetric += sfu::sm90_rcp(-x) != -y;
  }
  CHECK(far == 0);
  CHECK(asymmetric == 0);
  // What the probe recorded (results/sfu-rcp-lg2/sm90_rcp_structure.txt).
  CHECK(sfu::sm90_rcp(0.0f) == INFINITY);
  CHECK(sfu::sm90_rcp(-0.0f) == -INFINITY);
  CHECK(sfu::sm90_rcp(1e-40f) == INFINITY);
  CHECK(sfu::sm90_rcp(INFINITY) == 0.0f);
  CHECK(std::signbit(sfu::sm90_rcp(-INFINITY)));
  CHECK(std::isnan(sfu::sm90_rcp(NAN)));
  CHECK(sfu::sm90_rcp(0x1p126f) == 0x1p-126f);
  CHECK(sfu::sm90_rcp(0x1.fffffep127f) == 0.0f);
}

TEST_CASE("exp2f without fast math: MUFU.EX2 at x >= -126, halved and squared below", "[sfu][ex2]") {
  for (float x : {0.0f, -1.5f, -126.0f, 3.25f, -INFINITY, INFINITY}) CHECK(sfu::sm90_exp2f(x) == sfu::sm90_ex2(x));
  CHECK(std::isnan(sfu::sm90_exp2f(NAN)));
  // MUFU.EX2 flushes 2^-140 to +0; exp2f keeps it (a subnormal): ex2(-70)^2.
  CHECK(sfu::sm90_ex2(-140.0f) == 0.0f);
  CHECK(sfu::sm90_exp2f(-140.0f) == std::ldexp(1.0f, -140));
  CHECK(sfu::sm90_exp2f(-126.5f) == sfu::sm90_ex2(-63.25f) * sfu::sm90_ex2(-63.25f));
  CHECK(sfu::sm90_exp2f(-200.0f) == 0.0f);  // 2^-200 underflows in the square
}
