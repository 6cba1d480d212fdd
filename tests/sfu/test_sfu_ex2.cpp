// The sm_90 ex2 model (emulation/sfu/ex2.hpp) on the host, against what was measured on GPUs by
// programs other than the one that recorded its tables: the accuracy of MUFU.EX2 over [-150, -0]
// that `lowbit verify-exp2` recorded on an H100 (results/attention-gpu/exp2.json, at 310e07f), and
// single values noted from an H200 (../shared/notes/hopper-numerics-facts.md). The model against
// the instruction on every input is `lowbit verify-exp2` on a GPU.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "emulation/sfu/ex2.hpp"
#include "numerics/metrics.hpp"
#include "numerics/parallel.hpp"

using namespace lowbit;

namespace {

float ex2(float x) { return sfu::sm90_ex2(x); }
std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }

constexpr std::uint32_t kMinusZero = 0x8000'0000u;  // -0
constexpr std::uint32_t kMinus150 = 0xc316'0000u;   // -150 = -0b1.00101100 x 2^7

}  // namespace

TEST_CASE("sm90 ex2 tables: 1 at 0, monotone, T+ from 1 below 2 and T- from 1 down to 1/2", "[sfu][ex2]") {
  const sfu::Ex2Tables& t = sfu::sm90_ex2_tables();
  CHECK(t.positive[0] == 0x3f80'0000u);  // 1.0
  CHECK(t.negative[0] == 0x3f80'0000u);
  std::uint64_t positive_decreases = 0, negative_increases = 0, out_of_range = 0;
  for (std::uint32_t i = 1; i < sfu::kEx2TableSize; ++i) {
    positive_decreases += t.positive[i] < t.positive[i - 1];
    negative_increases += t.negative[i] > t.negative[i - 1];
    out_of_range += !(from_bits(t.positive[i]) > 1.0f && from_bits(t.positive[i]) < 2.0f);
    out_of_range += !(from_bits(t.negative[i]) >= 0.5f && from_bits(t.negative[i]) < 1.0f);  // T-[2^23 - 1] is 1/2
  }
  CHECK(positive_decreases == 0);
  CHECK(negative_increases == 0);
  CHECK(out_of_range == 0);
}

TEST_CASE("sm90 ex2: zeros, saturation, flush to zero, NaN", "[sfu][ex2]") {
  CHECK(bits(ex2(0.0f)) == 0x3f80'0000u);
  CHECK(bits(ex2(-0.0f)) == 0x3f80'0000u);
  CHECK(bits(ex2(-INFINITY)) == 0u);   // +0: masked keys
  CHECK(bits(ex2(-130.0f)) == 0u);
  CHECK(bits(ex2(-126.5f)) == 0u);      // 2^-126.5 is subnormal: flushed
  CHECK(bits(ex2(-126.0f)) == 0x0080'0000u);  // 2^-126, the smallest normal
  CHECK(bits(ex2(128.0f)) == 0x7f80'0000u);
  CHECK(bits(ex2(INFINITY)) == 0x7f80'0000u);
  CHECK(std::isnan(ex2(NAN)));
  // Whole numbers are exact (T[0] = 1).
  for (int n = -126; n <= 127; ++n) CHECK(ex2(float(n)) == std::ldexp(1.0f, n));
}

TEST_CASE("sm90 ex2: the values measured on an H200", "[sfu][ex2]") {
  // hopper-numerics-facts.md: "x = -0x1.715478p-25 gives 1.0" (|x| < 2^-23: no fraction bit left),
  // and the worst case of 2 ulps at -0x1.41p-8.
  CHECK(bits(ex2(-0x1.715478p-25f)) == 0x3f80'0000u);
  const float worst = -0x1.41p-8f;
  CHECK(ulp_distance(ex2(worst), float(std::exp2(double(worst)))) == 2);
}

TEST_CASE("sm90 ex2 over every float from -150 to 0: the accuracy measured on an H100", "[sfu][ex2][exhaustive]") {
  // results/attention-gpu/exp2.json (lowbit verify-exp2 at 310e07f, NVIDIA H100 80GB HBM3): against
  // exp2 in double rounded to float, over the inputs whose rounded result is normal.
  constexpr std::uint64_t kInputs = 1'125'515'266, kNormal = 1'123'811'330;
  constexpr std::uint64_t kUlps[3] = {1'002'211'404, 120'621'352, 978'574};
  constexpr std::uint32_t kWorstInput = 0xc2fb'0c93u;  // -0x1.f61926p+6, the largest input at 2 ulps
  struct Tally {
    std::uint64_t inputs = 0, normal = 0, ulps[4] = {};
    std::uint64_t worst = 0;  // (ulps << 32) | input, the maximum
  };
  constexpr std::size_t kPieces = 256;
  const std::uint64_t span = std::uint64_t(kMinus150 - kMinusZero) + 1;
  std::vector<Tally> parts(kPieces);
  parallel_for(kPieces, [&](std::size_t piece, unsigned) {
    Tally& t = parts[piece];
    const std::uint64_t from = kMinusZero + span * piece / kPieces, to = kMinusZero + span * (piece + 1) / kPieces;
    for (std::uint64_t b = from; b < to; ++b) {
      const float x = from_bits(std::uint32_t(b));
      ++t.inputs;
      const float reference = float(std::exp2(double(x)));
      if (!(reference >= 0x1p-126f)) continue;
      ++t.normal;
      const std::uint64_t d = ulp_distance(ex2(x), reference);
      ++t.ulps[d < 3 ? d : 3];
      t.worst = std::max(t.worst, d << 32 | b);
    }
  });
  Tally all;
  ++all.inputs, ++all.normal, ++all.ulps[0];  // +0 (the GPU's range [-150, 0] holds both zeros): exactly 1
  CHECK(ex2(0.0f) == 1.0f);
  for (const Tally& t : parts) {
    all.inputs += t.inputs;
    all.normal += t.normal;
    for (int u = 0; u < 4; ++u) all.ulps[u] += t.ulps[u];
    all.worst = std::max(all.worst, t.worst);
  }
  CHECK(all.inputs == kInputs);
  CHECK(all.normal == kNormal);
  CHECK(all.ulps[0] == kUlps[0]);
  CHECK(all.ulps[1] == kUlps[1]);
  CHECK(all.ulps[2] == kUlps[2]);
  CHECK(all.ulps[3] == 0);
  CHECK((all.worst >> 32) == 2);
  CHECK(std::uint32_t(all.worst) == kWorstInput);
}
