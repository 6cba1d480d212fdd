// The sm_90 ex2 tables, decoded from the gzip data embedded at build time (ex2_data.cpp, generated
// by CMake from data/*.delta.gz).
#include "emulation/sfu/ex2.hpp"

#include <zlib.h>

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace lowbit::sfu {

// Defined in the generated ex2_data.cpp.
extern const unsigned char kSm90Ex2PositiveGz[];
extern const std::size_t kSm90Ex2PositiveGzSize;
extern const unsigned char kSm90Ex2NegativeGz[];
extern const std::size_t kSm90Ex2NegativeGzSize;

namespace {

constexpr std::uint32_t kOne = 0x3f800000u;  // 1.0f: T[0] of both tables, and the first difference's base

// Inflates one table's differences and sums them into bit patterns; throws naming the table when
// the embedded data is not what the build expects (the model must never run on a wrong table).
std::vector<std::uint32_t> decode(const char* name, std::span<const unsigned char> gz) {
  std::vector<signed char> delta(kEx2TableSize + 1);
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error(std::string(name) + ": inflateInit2 failed");
  z.next_in = const_cast<unsigned char*>(gz.data());
  z.avail_in = unsigned(gz.size());
  z.next_out = reinterpret_cast<unsigned char*>(delta.data());
  z.avail_out = unsigned(delta.size());
  const int status = inflate(&z, Z_FINISH);
  const std::size_t produced = delta.size() - z.avail_out;
  inflateEnd(&z);
  if (status != Z_STREAM_END || produced != kEx2TableSize)
    throw std::runtime_error(std::string(name) + ": the embedded table does not inflate to " +
                             std::to_string(kEx2TableSize) + " differences (got " + std::to_string(produced) + ")");
  std::vector<std::uint32_t> table(kEx2TableSize);
  std::uint32_t bits = kOne;
  for (std::uint32_t i = 0; i < kEx2TableSize; ++i) table[i] = bits = bits + std::uint32_t(int(delta[i]));
  if (table[0] != kOne) throw std::runtime_error(std::string(name) + ": T[0] is not 1");
  return table;
}

}  // namespace

const Ex2Tables& sm90_ex2_tables() {
  static const std::vector<std::uint32_t> positive =
      decode("sm90_ex2_positive.delta.gz", {kSm90Ex2PositiveGz, kSm90Ex2PositiveGzSize});
  static const std::vector<std::uint32_t> negative =
      decode("sm90_ex2_negative.delta.gz", {kSm90Ex2NegativeGz, kSm90Ex2NegativeGzSize});
  static const Ex2Tables tables{positive.data(), negative.data()};
  return tables;
}

}  // namespace lowbit::sfu
