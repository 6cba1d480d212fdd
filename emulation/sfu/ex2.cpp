// The sm_90 ex2 tables, decoded from the gzip data embedded at build time (ex2_data.cpp, generated
// by CMake from data/*.delta.gz).
#include "emulation/sfu/ex2.hpp"

#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "emulation/sfu/embedded.hpp"

namespace lowbit::sfu {

// Defined in the generated ex2_data.cpp.
extern const unsigned char kSm90Ex2PositiveGz[];
extern const std::size_t kSm90Ex2PositiveGzSize;
extern const unsigned char kSm90Ex2NegativeGz[];
extern const std::size_t kSm90Ex2NegativeGzSize;

namespace {

constexpr std::uint32_t kOne = 0x3f800000u;  // 1.0f: T[0] of both tables, and the first difference's base

// One table's differences (int8), summed into bit patterns.
std::vector<std::uint32_t> decode(const char* name, std::span<const unsigned char> gz) {
  const std::vector<unsigned char> delta = inflate_table(name, gz, kEx2TableSize);
  std::vector<std::uint32_t> table(kEx2TableSize);
  std::uint32_t bits = kOne;
  for (std::uint32_t i = 0; i < kEx2TableSize; ++i) table[i] = bits = bits + std::uint32_t(int(static_cast<signed char>(delta[i])));
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
