// The sm_90 rcp table, decoded from the gzip data embedded at build time (rcp_data.cpp, generated
// by CMake from data/sm90_rcp_mantissa.delta.gz: int8 bits(R[i]) - bits(1 / x to nearest)).
#include "emulation/sfu/rcp.hpp"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "emulation/sfu/embedded.hpp"

namespace lowbit::sfu {

// Defined in the generated rcp_data.cpp.
extern const unsigned char kSm90RcpMantissaGz[];
extern const std::size_t kSm90RcpMantissaGzSize;

namespace {

constexpr std::uint32_t kMantissas = std::uint32_t{1} << 23;

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// R[i] for x = 1 + i 2^-23.
const float* mantissa_table() {
  static const std::vector<float> table = [] {
    const std::vector<unsigned char> delta =
        inflate_table("sm90_rcp_mantissa.delta.gz", {kSm90RcpMantissaGz, kSm90RcpMantissaGzSize}, kMantissas);
    std::vector<float> r(kMantissas);
    for (std::uint32_t i = 0; i < kMantissas; ++i) {
      const float nearest = 1.0f / from_bits(0x3f800000u | i);  // IEEE division: correctly rounded
      std::uint32_t bits;
      std::memcpy(&bits, &nearest, 4);
      r[i] = from_bits(bits + std::uint32_t(int(static_cast<signed char>(delta[i]))));
    }
    return r;
  }();
  return table.data();
}

}  // namespace

float sm90_rcp(float x) {
  if (std::isnan(x)) return x;
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const bool negative = bits >> 31;
  const int biased = int(bits >> 23 & 0xff);
  float y;
  if (biased == 0) y = std::numeric_limits<float>::infinity();  // +-0 and subnormals (flushed)
  else if (biased == 0xff) y = 0.0f;                            // +-inf
  else {
    y = std::ldexp(mantissa_table()[bits & (kMantissas - 1)], 127 - biased);
    if (y < std::numeric_limits<float>::min()) y = 0.0f;  // flushed
  }
  return negative ? -y : y;
}

}  // namespace lowbit::sfu
