#include "experiments/cli/code_text.hpp"

#include <vector>

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

std::string preset_description(const NamedFormat& preset) {
  const Format& f = preset.format;
  if (f.is_integer()) return fmt::format("{}: {} .. {}", preset.origin, lowest_finite(f), max_finite(f));
  std::vector<std::string> traits;
  if (!f.is_signed) traits.push_back("unsigned");
  traits.push_back(fmt::format("bias {}", f.bias));
  if (!f.has_zero) traits.push_back("no zero");
  else if (!f.subnormals) traits.push_back("no subnormals");
  const auto both_signs = [&](Code magnitude) {
    return f.is_signed ? hex_code(f, magnitude) + "/" + hex_code(f, f.sign_mask() | magnitude) : hex_code(f, magnitude);
  };
  if (f.nan == NanEncoding::ieee) traits.push_back("IEEE Inf/NaN");
  else if (!f.has_nan() && !f.has_inf()) traits.push_back("no Inf/NaN");
  else {
    if (f.nan == NanEncoding::top_code) traits.push_back("NaN " + both_signs(f.magnitude_mask()));
    if (f.nan == NanEncoding::negative_zero) traits.push_back("NaN " + hex_code(f, f.sign_mask()));
    if (!f.has_nan()) traits.push_back("no NaN");
    if (f.inf == InfEncoding::top_code) traits.push_back("Inf " + both_signs(f.top_non_nan_magnitude()));
    if (!f.has_inf()) traits.push_back("no Inf");
  }
  return fmt::format("{}: {}", preset.origin, fmt::join(traits, ", "));
}

}  // namespace lowbit::cli
