// The fast float32 encoder against the scalar encode, bit for bit, for every combination it
// claims to serve: every format of small_format_specs() (each preset of at most 16 bits and user
// specs of every kind) x {nearest-even, toward zero} x every overflow policy the format allows,
// through each instruction-set variant this CPU has and each output width the format fits.
// Inputs: the float32 rounding boundaries of the format (each value and each midpoint between
// neighbours, max finite and the point beyond it included, as the nearest float32 and the two
// float32 either side), +-0, +-Inf, NaNs, float32 subnormals, both signs, and 2^20 random bit
// patterns. exhaustive_fastconv checks 25 combinations on all 2^32 inputs; this test checks all
// of them where mismatches would be, in seconds.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;

namespace {

constexpr Rounding kFastRoundings[]{Rounding::nearest_even, Rounding::toward_zero};
constexpr Overflow kOverflows[]{Overflow::saturate, Overflow::inf, Overflow::nan};

void add_float_and_neighbours(std::vector<float>& xs, double v) {
  const float nearest = float(v);
  float up = nearest, down = nearest;
  xs.push_back(nearest);
  for (int i = 0; i < 2; ++i) {
    xs.push_back(up = std::nextafter(up, INFINITY));
    xs.push_back(down = std::nextafter(down, -INFINITY));
  }
}

std::vector<float> boundary_inputs(const testing::ReferenceFormat& r, const std::vector<float>& random_floats) {
  std::vector<float> xs;
  const std::vector<double> line = r.extended_values();
  for (std::size_t i = 0; i < line.size(); ++i) {
    add_float_and_neighbours(xs, line[i]);
    if (i + 1 < line.size()) add_float_and_neighbours(xs, (line[i] + line[i + 1]) / 2);
  }
  // Float32 subnormals: the smallest, the largest and every power of two.
  for (std::uint32_t bits : {0x0000'0001u, 0x0000'0002u, 0x0000'0003u, 0x007f'fffeu, 0x007f'ffffu})
    xs.push_back(std::bit_cast<float>(bits));
  for (int e = -149; e <= -127; ++e) add_float_and_neighbours(xs, std::ldexp(1.0, e));
  for (std::uint32_t bits : {0x0000'0000u, 0x7f80'0000u, 0x7fc0'0000u, 0x7f80'0001u, 0x7fff'ffffu, 0x7fa0'0000u})
    xs.push_back(std::bit_cast<float>(bits));
  const std::size_t n = xs.size();
  for (std::size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  xs.insert(xs.end(), random_floats.begin(), random_floats.end());
  return xs;
}

// One way of running the fast path: a name, and the codes it gives for `in` widened to 32 bits.
struct Variant {
  std::string name;
  std::vector<Code> (*run)(fastconv::Isa, const Format&, const std::vector<float>&, const ConversionOptions&);
};

std::vector<Code> run_code32(fastconv::Isa isa, const Format& f, const std::vector<float>& in, const ConversionOptions& o) {
  std::vector<Code> out(in.size());
  fastconv::encode_with(isa, f, in, std::span<Code>(out), o);
  return out;
}
template <class Narrow>
std::vector<Code> run_narrow(fastconv::Isa isa, const Format& f, const std::vector<float>& in, const ConversionOptions& o) {
  std::vector<Narrow> narrow(in.size());
  fastconv::encode_with(isa, f, in, std::span<Narrow>(narrow), o);
  return {narrow.begin(), narrow.end()};
}
std::vector<Code> run_packed4(fastconv::Isa isa, const Format& f, const std::vector<float>& in, const ConversionOptions& o) {
  std::vector<std::uint8_t> packed((in.size() + 1) / 2);
  fastconv::encode_packed4_with(isa, f, in, packed, o);
  std::vector<Code> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = (packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xF;
  return out;
}

}  // namespace

TEST_CASE("fast encoder equals the scalar encode at every rounding boundary of every small format",
          "[fastconv][boundary]") {
  std::vector<fastconv::Isa> isas;
  std::string lacking;  // the variants this CPU cannot run, named in the summary line
  for (const auto isa : fastconv::all_isas())
    if (fastconv::available(isa)) isas.push_back(isa);
    else lacking += fmt::format(" {}", fastconv::to_string(isa));
  if (isas.empty()) {
    std::puts("SKIPPED: this CPU has no variant of the fast path (AVX2 or AVX-512)");
    std::exit(77);  // ctest's SKIP_RETURN_CODE: reported as skipped, not passed
  }
  std::mt19937_64 rng(4);
  std::vector<float> random_floats(1 << 20);
  for (float& x : random_floats) x = std::bit_cast<float>(std::uint32_t(rng()));

  std::size_t combinations = 0, policies_of_formats = 0, compared = 0;
  for (const auto& spec : testing::small_format_specs()) {
    const Format f = format_from_string(spec);
    policies_of_formats += 1 + f.has_inf() + f.has_nan();  // saturate, and inf / nan where it has them
    const std::vector<float> in = boundary_inputs(testing::ReferenceFormat(f), random_floats);
    std::vector<Variant> variants{{"32-bit codes", run_code32}};
    if (f.code_bits() > 8) variants.push_back({"16-bit codes", run_narrow<std::uint16_t>});
    else variants.push_back({"8-bit codes", run_narrow<std::uint8_t>});
    if (f.code_bits() <= 4) variants.push_back({"packed 4-bit codes", run_packed4});
    for (Rounding rounding : kFastRoundings)
      for (Overflow overflow : kOverflows) {
        const ConversionOptions o{.rounding = rounding, .overflow = overflow};
        if (o.validate(f)) continue;  // the format has no Inf (or NaN) to overflow to
        INFO(fmt::format("{} {} {}", spec, to_string(rounding), to_string(overflow)));
        REQUIRE_FALSE(fast_encode_unsupported(f, o));  // the fast path claims every such combination
        ++combinations;
        std::vector<Code> expected(in.size());
        for (std::size_t i = 0; i < in.size(); ++i) expected[i] = encode(f, double(in[i]), o);
        for (const auto isa : isas)
          for (const Variant& v : variants) {
            const std::vector<Code> got = v.run(isa, f, in, o);
            std::size_t mismatches = 0, first = 0;
            for (std::size_t i = 0; i < in.size(); ++i)
              if (got[i] != expected[i] && mismatches++ == 0) first = i;
            compared += in.size();
            INFO(fmt::format("{} {}: {} mismatches of {}; first: input {:#010x} ({:a}): scalar {:#x}, fast {:#x}",
                             fastconv::to_string(isa), v.name, mismatches, in.size(), std::bit_cast<std::uint32_t>(in[first]),
                             double(in[first]), expected[first], got[first]));
            CHECK(mismatches == 0);
          }
      }
  }
  std::string checked;
  for (const auto isa : isas) checked += fmt::format(" {}", fastconv::to_string(isa));
  fmt::print("{} (format, rounding, overflow) combinations, {} fast-path codes compared; variants checked:{}{}\n",
             combinations, compared, checked, lacking.empty() ? "" : "; not checked (this CPU lacks them):" + lacking);
  CHECK(combinations == 2 * policies_of_formats);
}
