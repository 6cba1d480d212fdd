#include <fmt/format.h>

#include <cmath>

#include "emulation/format.hpp"
#include "experiments/cli/code_text.hpp"
#include "experiments/cli/command.hpp"

namespace lowbit::cli {
namespace {

std::string nan_text(const Format& f) {
  switch (f.nan) {
    case NanEncoding::none: return "none";
    case NanEncoding::ieee: return "IEEE (exponent all ones, mantissa non-zero)";
    case NanEncoding::top_code: return fmt::format("top code (0x{:x}{})", f.magnitude_mask(), f.is_signed ? " with either sign" : "");
    case NanEncoding::negative_zero: return fmt::format("negative-zero code (0x{:x})", f.sign_mask());
  }
  return "?";
}

std::string inf_text(const Format& f) {
  switch (f.inf) {
    case InfEncoding::none: return "none";
    case InfEncoding::ieee: return "IEEE (exponent all ones, mantissa zero)";
    case InfEncoding::top_code: return fmt::format("top non-NaN code (0x{:x})", f.top_non_nan_magnitude());
  }
  return "?";
}

// A value, plus its power of two when it is one.
std::string value_and_power(double v) {
  int e = 0;
  const double m = std::frexp(std::fabs(v), &e);
  if (v != 0 && m == 0.5) return fmt::format("{} = 2^{}", v, e - 1);
  return value_text(v);
}

int list_formats() {
  fmt::print("{:<10} {:>4} {:>3} {:>3} {:>5}  {:<14} {:<14} {:<14}  {}\n", "name", "bits", "e", "m", "bias", "max finite",
             "min normal", "min subnormal", "description");
  for (const auto& p : presets()) {
    const Format& f = p.format;
    fmt::print("{:<10} {:>4} {:>3} {:>3} {:>5}  {:<14} {:<14} {:<14}  {}\n", p.name, f.code_bits(), f.exponent_bits,
               f.mantissa_bits, f.bias, fmt::format("{}", max_finite(f)), fmt::format("{}", min_normal(f)),
               fmt::format("{}", min_positive(f)), preset_description(p));
  }
  fmt::print("\nAny other format: eXmY[fn|fnuz], ueXmY, intN, uintN or p3109:k=K:p=P, with options such as\n"
             "':bias=N:no-subnormals:nan=top:inf=none' (see `lowbit format --help`).\n");
  return 0;
}

int describe_format(const std::string& spec) {
  const auto parsed = parse_format(spec);
  if (!parsed.format) {
    fmt::print(stderr, "lowbit format: '{}': {}\n", spec, parsed.error);
    return 2;
  }
  const Format& f = *parsed.format;
  std::string description;
  for (const auto& p : presets())
    if (p.format == f) description = preset_description(p);
  fmt::print("format         {}{}\n", format_name(f), description.empty() ? "" : "  (" + description + ")");
  if (f.is_integer()) {
    fmt::print("kind           {} integer, {} bits, storage {} bits\n", f.is_signed ? "two's complement" : "unsigned",
               f.code_bits(), f.storage_bits);
    fmt::print("range          {} .. {}\n", lowest_finite(f), max_finite(f));
  } else {
    fmt::print("kind           {} floating point\n", f.is_signed ? "signed" : "unsigned");
    fmt::print("bits           {} ({}{} exponent, {} mantissa), storage {} bits\n", f.code_bits(), f.is_signed ? "1 sign, " : "",
               f.exponent_bits, f.mantissa_bits, f.storage_bits);
    fmt::print("bias           {}\n", f.bias);
    fmt::print("NaN            {}\n", nan_text(f));
    fmt::print("Inf            {}\n", inf_text(f));
    fmt::print("zero           {}\n", f.has_zero ? "yes" : "no (code 0 is the smallest value)");
    fmt::print("subnormals     {}\n", f.subnormals ? "yes" : "no");
    fmt::print("max finite     {}  ({})\n", value_and_power(max_finite(f)), hex_code(f, f.max_finite_magnitude()));
    fmt::print("min normal     {}\n", value_and_power(min_normal(f)));
    fmt::print("min positive   {}\n", value_and_power(min_positive(f)));
    fmt::print("ulp(1)         {}\n", value_and_power(ulp(f, 1.0)));
    fmt::print("exponents      2^{} .. 2^{} (normal)\n", f.min_exponent(), max_exponent(f));
  }
  if (f.code_bits() > 8) return 0;
  fmt::print("\n{:<6} {:<14} {}\n", "code", "bits", "value");
  for (Code c = 0; c <= f.code_count_minus_one(); ++c)
    fmt::print("{:<6} {:<14} {}\n", hex_code(f, c), binary_code(f, c), value_text(decode(f, c)));
  return 0;
}

}  // namespace

void add_format_commands(CLI::App& app, int& exit_code) {
  auto* list = app.add_subcommand("formats", "List the preset number formats and their limits");
  list->callback([&exit_code] { exit_code = list_formats(); });

  auto* one = app.add_subcommand("format", "Print a format's parameters, limits and (up to 8 bits) every code");
  auto spec = std::make_shared<std::string>();
  one->add_option("FORMAT", *spec,
                  "A preset (lowbit formats) or a spec: e3m4, e5m2fnuz, ue4m3, int6, e4m3:bias=8:no-subnormals,\n"
                  "p3109:k=8:p=3[:unsigned][:finite]. Options: bias=N, nan=none|ieee|top|negative-zero,\n"
                  "inf=none|ieee|top, subnormals|no-subnormals, zero|no-zero, signed|unsigned, storage=N")
      ->required();
  one->callback([&exit_code, spec] { exit_code = describe_format(*spec); });
}

}  // namespace lowbit::cli
