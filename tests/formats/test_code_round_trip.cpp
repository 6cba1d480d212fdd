// Every code of every format of at most 16 bits, decoded and encoded again under every rounding
// mode and overflow policy.
//
// Which codes are non-canonical, and what they re-encode to:
//  * NaN codes other than the canonical NaN (IEEE NaNs with another payload or the sign bit set,
//    the negative top code of "fn" formats) re-encode to the canonical NaN: the negative-zero code
//    where that is the only NaN (fnuz, P3109 signed), else the positive code with every magnitude
//    bit set (0x7F, 0x7FFF, ...).
//  * Without subnormals, the codes with exponent field 0 and a non-zero mantissa decode to zero of
//    their sign (flushed) and re-encode to that zero: the -0 code where the format has one, else +0.
//  * Every other code re-encodes to itself (an Inf code under Overflow::inf).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;

namespace {

bool is_flushed_code(const Format& f, Code c) {
  const Code magnitude = c & f.magnitude_mask();
  return !f.is_integer() && f.has_zero && !f.subnormals && (magnitude >> f.mantissa_bits) == 0 && magnitude != 0;
}

// The code decode(c) must encode back to, by the rules above.
Code canonical_code(const Format& f, Code c) {
  if (f.is_nan_code(c)) return f.nan == NanEncoding::negative_zero ? f.sign_mask() : f.magnitude_mask();
  if (is_flushed_code(f, c)) return f.nan == NanEncoding::negative_zero ? 0 : c & f.sign_mask();
  return c;
}

// Non-canonical codes counted by hand from each format's layout.
const std::map<std::string, int> kNonCanonicalCounts{
    {"bf16", 253},                      // 2 x 127 NaNs, less 0x7FFF
    {"fp16", 2045},                     // 2 x 1023 NaNs, less 0x7FFF
    {"e4m3", 1},                        // 0xFF
    {"e4m3fnuz", 0},                    // the only NaN is 0x80
    {"e5m2", 5},                        // 2 x 3 NaNs, less 0x7F
    {"e3m4", 29},                       // 2 x 15 NaNs, less 0x7F
    {"e2m1", 0},
    {"ue8m0", 0},                       // the only NaN is 0xFF
    {"int8", 0},
    {"e4m3:bias=8:no-subnormals", 15},  // 2 x 7 flushed, and 0xFF
    {"e5m2:no-subnormals", 11},         // 2 x 3 flushed, 5 NaNs
    {"e4m3fnuz:no-subnormals", 14},     // 2 x 7 flushed, all to +0
    {"e2m1:no-subnormals", 2},          // 0b0'00'1 and 0b1'00'1
    {"e6m9", 1021},                     // 2 x 511 NaNs, less 0x7FFF
    {"ue5m3", 6},                       // 7 NaNs, less 0xFF
    {"e4m3:nan=none:inf=none", 0},
    {"e3m2:no-zero", 0},
    {"p3109:k=8:p=3", 0},
    {"p3109:k=8:p=3:unsigned", 0},
};

}  // namespace

TEST_CASE("every code decodes and re-encodes to its canonical code", "[format][round-trip]") {
  std::size_t total_codes = 0;
  for (const auto& spec : lowbit::testing::small_format_specs()) {
    const Format f = format_from_string(spec);
    std::size_t checks = 0, mismatches = 0;
    int non_canonical = 0;
    std::vector<std::string> first;
    for (Code c = 0; c <= f.code_count_minus_one(); ++c) {
      const double v = decode(f, c);
      const Code expected = canonical_code(f, c);
      if (expected != c) ++non_canonical;
      for (Rounding rounding : lowbit::testing::kAllRoundings)
        for (Overflow overflow : {Overflow::saturate, Overflow::inf, Overflow::nan}) {
          const ConversionOptions options{.rounding = rounding, .overflow = overflow, .random_bits = 8, .seed = 3};
          if (options.validate(f)) continue;
          if (std::isinf(v) && overflow != Overflow::inf) continue;  // Inf is kept only under Overflow::inf
          const Code got = encode(f, v, options, c);
          ++checks;
          if (got != expected && ++mismatches <= 8)
            first.push_back(fmt::format("code {:#x} = {}: {} -> {:#x}, expected {:#x}", c, v, to_string(rounding), got,
                                        expected));
        }
    }
    total_codes += f.code_count_minus_one() + std::size_t{1};
    fmt::print("{:<28} {:>6} codes {:>5} non-canonical {:>8} checks {} mismatches\n", spec,
               f.code_count_minus_one() + std::size_t{1}, non_canonical, checks, mismatches);
    INFO(fmt::format("{}: {}", spec, fmt::join(first, "; ")));
    CHECK(mismatches == 0);
    if (auto it = kNonCanonicalCounts.find(spec); it != kNonCanonicalCounts.end()) CHECK(non_canonical == it->second);
  }
  CHECK(total_codes > 400'000);
}

TEST_CASE("positive codes of sign-magnitude formats ascend with their value", "[format][round-trip]") {
  for (const auto& spec : lowbit::testing::small_format_specs()) {
    const Format f = format_from_string(spec);
    if (f.is_integer()) continue;
    INFO(spec);
    double previous = -INFINITY;
    int out_of_order = 0;
    for (Code c = 0; c <= f.magnitude_mask(); ++c) {
      const double v = decode(f, c);
      if (std::isnan(v) || canonical_code(f, c) != c) continue;
      if (!(v > previous)) ++out_of_order;
      previous = v;
    }
    CHECK(out_of_order == 0);
  }
}
