// `lowbit tour`: the main job on embedded defaults — a walk through the formats, every rounding
// mode at a rounding boundary, the overflow rules and stochastic rounding.
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "experiments/cli/code_text.hpp"
#include "experiments/cli/command.hpp"

namespace lowbit::cli {
namespace {

constexpr Rounding kModes[] = {Rounding::nearest_even,    Rounding::nearest_away,    Rounding::toward_zero,
                               Rounding::toward_positive, Rounding::toward_negative, Rounding::odd};

void print_row(const Format& f, double x, const ConversionOptions& options) {
  const Code code = encode(f, x, options);
  fmt::print("  {:<24} {:<17} -> {} {}\n", fmt::format("{}", x), to_string(options.rounding), hex_code(f, code),
             value_text(decode(f, code)));
}

int run_tour() {
  fmt::print("== Presets ==\n");
  for (const auto& p : presets())
    fmt::print("  {:<9} {:>2} bits  max {:<12} min positive {:<14} {}\n", p.name, p.format.code_bits(),
               value_text(max_finite(p.format)), value_text(min_positive(p.format)), preset_description(p));

  const Format& e4m3 = formats::e4m3;
  const double below = 1.0, above = 1.125, midpoint = (below + above) / 2;
  fmt::print("\n== Every rounding mode around the e4m3 boundary between {} and {} ==\n", below, above);
  for (double x : {std::nextafter(midpoint, 0.0), midpoint, std::nextafter(midpoint, 2.0), -midpoint})
    for (Rounding mode : kModes) print_row(e4m3, x, {.rounding = mode});

  fmt::print("\n== Overflow: rounding first with an unbounded exponent, then the policy ==\n");
  for (double x : {448.0, 464.0, 465.0, double(INFINITY)}) {
    fmt::print("  e4m3 {:<8} saturate -> {}   nan -> {}\n", x, hex_code(e4m3, encode(e4m3, x)),
               hex_code(e4m3, encode(e4m3, x, {.overflow = Overflow::nan})));
  }
  for (double x : {57344.0, 61439.0, 61440.0})
    fmt::print("  e5m2 {:<8} saturate -> {}   inf -> {}\n", x, hex_code(formats::e5m2, encode(formats::e5m2, x)),
               hex_code(formats::e5m2, encode(formats::e5m2, x, {.overflow = Overflow::inf})));

  const double tricky = 1.0625 + 0x1p-30;  // just above an e4m3 tie; float32 rounds it onto the tie
  fmt::print("\n== No double rounding: {} (float64) ==\n", tricky);
  fmt::print("  float64 -> e4m3 directly:          {}\n", value_text(round_to_format(e4m3, tricky)));
  fmt::print("  float64 -> float32 {:<8} -> e4m3: {}  (the double rounding lowbit never does)\n", double(float(tricky)),
             value_text(round_to_format(e4m3, double(float(tricky)))));

  const double x = 1.03;
  const ConversionOptions stochastic{.rounding = Rounding::stochastic, .random_bits = 16, .seed = 42};
  int ups = 0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) ups += round_to_format(e4m3, x, stochastic, i) > 1.0;
  fmt::print("\n== Stochastic rounding of {} to e4m3 (16 random bits, seed 42) ==\n", x);
  fmt::print("  rounded up {} of {} times ({:.4f}); distance says {:.4f}\n", ups, kDraws, double(ups) / kDraws,
             (x - 1.0) / 0.125);
  return 0;
}

}  // namespace

void add_tour_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("tour", "Walk through the formats, rounding modes, overflow rules and stochastic rounding");
  cmd->callback([&exit_code] { exit_code = run_tour(); });
}

}  // namespace lowbit::cli
