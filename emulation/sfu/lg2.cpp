// The sm_90 lg2 tables, decoded from the gzip data embedded at build time (lg2_data.cpp, generated
// by CMake from data/sm90_lg2_mantissa.delta.gz: little-endian int16 differences of T[i] 2^36, and
// data/sm90_lg2_half_to_one.delta.gz: little-endian int32 corrections D[i] on [1/2, 1)).
#include "emulation/sfu/lg2.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "emulation/sfu/embedded.hpp"

namespace lowbit::sfu {

// Defined in the generated lg2_data.cpp.
extern const unsigned char kSm90Lg2MantissaGz[];
extern const std::size_t kSm90Lg2MantissaGzSize;
extern const unsigned char kSm90Lg2HalfToOneGz[];
extern const std::size_t kSm90Lg2HalfToOneGzSize;

namespace {

std::vector<std::uint64_t> decode_mantissa_table() {
  const std::vector<unsigned char> bytes =
      inflate_table("sm90_lg2_mantissa.delta.gz", {kSm90Lg2MantissaGz, kSm90Lg2MantissaGzSize}, 2 * std::size_t(kLg2TableSize));
  std::vector<std::uint64_t> table(kLg2TableSize);
  std::int64_t value = 0;
  for (std::uint32_t i = 0; i < kLg2TableSize; ++i) {
    value += std::int16_t(std::uint16_t(bytes[2 * i]) | std::uint16_t(bytes[2 * i + 1]) << 8);
    table[i] = std::uint64_t(value);
  }
  if (table[0] != 0 || table[kLg2TableSize - 1] >= (std::uint64_t{1} << kLg2FractionBits))
    throw std::runtime_error("sm90_lg2_mantissa.delta.gz: T[0] is not 0 or T is not below 1");
  return table;
}

const std::int32_t* half_to_one_corrections() {
  static const std::vector<std::int32_t> table = [] {
    const std::vector<unsigned char> bytes = inflate_table(
        "sm90_lg2_half_to_one.delta.gz", {kSm90Lg2HalfToOneGz, kSm90Lg2HalfToOneGzSize}, 4 * std::size_t(kLg2TableSize));
    std::vector<std::int32_t> d(kLg2TableSize);
    for (std::uint32_t i = 0; i < kLg2TableSize; ++i)
      d[i] = std::int32_t(std::uint32_t(bytes[4 * i]) | std::uint32_t(bytes[4 * i + 1]) << 8 |
                          std::uint32_t(bytes[4 * i + 2]) << 16 | std::uint32_t(bytes[4 * i + 3]) << 24);
    return d;
  }();
  return table.data();
}

// float(e + T[i]) rounded toward zero (e + T[i] is exact in double).
float toward_zero(double exact) {
  float result = float(exact);
  if (std::fabs(double(result)) > std::fabs(exact)) result = std::nextafter(result, 0.0f);
  return result;
}

}  // namespace

const std::uint64_t* sm90_lg2_table() {
  static const std::vector<std::uint64_t> table = decode_mantissa_table();
  return table.data();
}

float sm90_lg2(float x) {
  if (!(x >= 0.5f) || std::isinf(x))
    throw std::domain_error("sm90_lg2: the MUFU.LG2 model covers finite x >= 1/2, not " + std::to_string(x));
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const int e = int(bits >> 23) - 127;
  const std::uint32_t i = bits & (kLg2TableSize - 1);
  const float rule = toward_zero(double(e) + std::ldexp(double(sm90_lg2_table()[i]), -kLg2FractionBits));
  if (e >= 0) return rule;
  std::uint32_t out;
  std::memcpy(&out, &rule, 4);
  out += std::uint32_t(half_to_one_corrections()[i]);
  float result;
  std::memcpy(&result, &out, 4);
  return result;
}

}  // namespace lowbit::sfu
