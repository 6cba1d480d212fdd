#include "experiments/cli/code_text.hpp"

#include <fmt/format.h>

namespace lowbit::cli {

std::string hex_code(const Format& f, Code code) { return fmt::format("0x{:0{}x}", code, (f.code_bits() + 3) / 4); }

std::string binary_code(const Format& f, Code code) {
  std::string s = "0b";
  int bit = f.code_bits() - 1;
  const auto field = [&](int width) {
    for (int i = 0; i < width; ++i, --bit) s += ((code >> bit) & 1) ? '1' : '0';
  };
  if (f.is_integer()) {
    field(f.code_bits());
    return s;
  }
  if (f.is_signed) field(1), s += '\'';
  field(f.exponent_bits);
  if (f.mantissa_bits > 0) s += '\'', field(f.mantissa_bits);
  return s;
}

std::string value_text(double v) { return fmt::format("{}", v); }

}  // namespace lowbit::cli
