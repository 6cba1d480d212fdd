#include <algorithm>
#include <bit>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "experiments/cli/code_text.hpp"
#include "experiments/cli/command.hpp"

namespace lowbit::cli {
namespace {

struct ConvertArgs {
  std::string to;
  std::string rounding = "nearest-even";
  std::string overflow = "saturate";
  std::uint64_t seed = 0;
  int random_bits = 32;
  bool from_double = false;
};

std::string_view trim(std::string_view s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// A float32 (or, with --from-double, float64) given as a decimal (strtof/strtod: "1.5", "-2e-3",
// "inf", "nan") or as its bit pattern, "0x" and exactly 8 (16) hex digits. Any other text with an
// x or X is rejected: strtof would read "-0x3f800000" as the hex float -1.06e9 and "0x1.8p1" as 3,
// which look like bit patterns but are not. Decimals beyond float32 read as +-Inf.
std::optional<double> parse_value(std::string_view text, bool from_double) {
  const std::size_t hex_digits = from_double ? 16 : 8;
  if (text.find_first_of("xX") != std::string_view::npos) {
    const auto digits = text.substr(std::min<std::size_t>(2, text.size()));
    const auto is_hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    if (!text.starts_with("0x") || digits.size() != hex_digits || !std::ranges::all_of(digits, is_hex))
      return std::nullopt;
    std::uint64_t bits = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), bits, 16);
    return from_double ? std::bit_cast<double>(bits) : double(std::bit_cast<float>(std::uint32_t(bits)));
  }
  // strtof/strtod round the decimal correctly once.
  const std::string s(text);
  char* end = nullptr;
  const double v = from_double ? std::strtod(s.c_str(), &end) : double(std::strtof(s.c_str(), &end));
  if (s.empty() || end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

int run_convert(const ConvertArgs& args) {
  const auto parsed = parse_format(args.to);
  if (!parsed.format) {
    fmt::print(stderr, "lowbit convert: --to '{}': {}\n", args.to, parsed.error);
    return 2;
  }
  const Format& f = *parsed.format;
  ConversionOptions options;
  options.rounding = *parse_rounding(args.rounding);
  options.overflow = *parse_overflow(args.overflow);
  options.seed = args.seed;
  options.random_bits = args.random_bits;
  if (auto why = options.validate(f)) {
    fmt::print(stderr, "lowbit convert: {}\n", *why);
    return 2;
  }
  std::size_t line_number = 0, bad_lines = 0;
  std::uint64_t index = 0;
  for (std::string line; std::getline(std::cin, line);) {
    ++line_number;
    const auto text = trim(line);
    if (text.empty() || text.starts_with('#')) continue;
    const auto value = parse_value(text, args.from_double);
    if (!value) {
      ++bad_lines;
      fmt::print(stderr, "lowbit convert: line {}: '{}' is not a {} (a decimal, inf, nan, or 0x and {} hex digits)\n",
                 line_number, text, args.from_double ? "float64" : "float32", args.from_double ? 16 : 8);
      fmt::print("error\n");
      continue;
    }
    const Code code = encode(f, *value, options, index++);
    fmt::print("{} {}\n", hex_code(f, code), value_text(decode(f, code)));
  }
  if (bad_lines) fmt::print(stderr, "lowbit convert: {} invalid line(s)\n", bad_lines);
  return bad_lines ? 1 : 0;
}

}  // namespace

void add_convert_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand(
      "convert",
      "Convert float32 values, one per line on stdin, to a format; prints each code in hex and its value.\n"
      "A line is a decimal (strtof syntax: 1.5, -2e-3, inf, nan) or the bit pattern as 0x and exactly 8 hex\n"
      "digits (no sign). A decimal beyond the float32 range (1e999) reads as +-Inf, which then follows\n"
      "--overflow; a tiny one reads as the nearest float32 (a subnormal or 0). Blank lines and lines starting\n"
      "with # are skipped. Any other line (-0x3f800000, 0x1.8p1, 0x1234) prints 'error', is reported on\n"
      "stderr with its line number and text, and makes the exit status 1 once every line is read.");
  cmd->add_option("--to", args->to, "Target format: a preset or a spec (see `lowbit format --help`)")->required();
  cmd->add_option("--rounding", args->rounding, "Rounding mode")
      ->check(CLI::IsMember({"nearest-even", "nearest-away", "toward-zero", "toward-positive", "toward-negative", "odd",
                             "stochastic"}))
      ->capture_default_str();
  cmd->add_option("--overflow", args->overflow, "What too-large values and infinities become")
      ->check(CLI::IsMember({"saturate", "inf", "nan"}))
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of stochastic rounding (value i uses counter i)")->capture_default_str();
  cmd->add_option("--random-bits", args->random_bits, "Random bits of stochastic rounding (1..63)")->capture_default_str();
  cmd->add_flag("--from-double", args->from_double,
                "Read float64 values (decimal, or 0x and 16 hex digits) and round them once, directly");
  cmd->callback([&exit_code, args] { exit_code = run_convert(*args); });
}

}  // namespace lowbit::cli
