// The sm_90 lg2 table, decoded from the gzip data embedded at build time (lg2_data.cpp, generated
// by CMake from data/sm90_lg2_mantissa.delta.gz: little-endian int16 differences of T[i] 2^36).
#include "emulation/sfu/lg2.hpp"

#include <zlib.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace lowbit::sfu {

// Defined in the generated lg2_data.cpp.
extern const unsigned char kSm90Lg2MantissaGz[];
extern const std::size_t kSm90Lg2MantissaGzSize;

namespace {

std::vector<std::uint64_t> decode() {
  std::vector<unsigned char> bytes(2 * std::size_t(kLg2TableSize) + 1);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error("sm90_lg2_mantissa.delta.gz: inflateInit2 failed");
  z.next_in = const_cast<unsigned char*>(kSm90Lg2MantissaGz);
  z.avail_in = unsigned(kSm90Lg2MantissaGzSize);
  z.next_out = bytes.data();
  z.avail_out = unsigned(bytes.size());
  const int status = inflate(&z, Z_FINISH);
  const std::size_t produced = bytes.size() - z.avail_out;
  inflateEnd(&z);
  if (status != Z_STREAM_END || produced != 2 * std::size_t(kLg2TableSize))
    throw std::runtime_error("sm90_lg2_mantissa.delta.gz: the embedded table does not inflate to " +
                             std::to_string(kLg2TableSize) + " int16 differences (got " + std::to_string(produced) + " bytes)");
  std::vector<std::uint64_t> table(kLg2TableSize);
  std::int64_t value = 0;
  for (std::uint32_t i = 0; i < kLg2TableSize; ++i) {
    const auto d = std::int16_t(std::uint16_t(bytes[2 * i]) | std::uint16_t(bytes[2 * i + 1]) << 8);
    value += d;
    table[i] = std::uint64_t(value);
  }
  if (table[0] != 0 || table[kLg2TableSize - 1] >= (std::uint64_t{1} << kLg2FractionBits))
    throw std::runtime_error("sm90_lg2_mantissa.delta.gz: T[0] is not 0 or T is not below 1");
  return table;
}

}  // namespace

const std::uint64_t* sm90_lg2_table() {
  static const std::vector<std::uint64_t> table = decode();
  return table.data();
}

float sm90_lg2_at_least_one(float x) {
  if (!(x >= 1.0f) || std::isinf(x))
    throw std::domain_error("sm90_lg2_at_least_one: the MUFU.LG2 model covers finite x >= 1, not " + std::to_string(x));
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  const int e = int(bits >> 23) - 127;
  const double exact = double(e) + std::ldexp(double(sm90_lg2_table()[bits & (kLg2TableSize - 1)]), -kLg2FractionBits);
  float result = float(exact);  // to nearest; then toward zero (exact >= 0)
  if (double(result) > exact) result = std::nextafter(result, 0.0f);
  return result;
}

}  // namespace lowbit::sfu
