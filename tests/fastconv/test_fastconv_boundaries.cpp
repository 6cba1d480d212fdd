// The fast encoder against the scalar encode, bit for bit, for every combination it claims to
// serve: every format of small_format_specs() (each preset of at most 16 bits and user specs of
// every kind) x {nearest-even, toward zero} x every overflow policy the format allows, through
// each instruction-set variant this CPU has, each algorithm that serves the combination and each
// output width the format fits, the split algorithm's narrow outputs with regular and with
// streaming stores.
// Inputs: the float32 rounding boundaries of the format (each value and each midpoint between
// neighbours, max finite and the point beyond it included, as the nearest float32 and the two
// float32 either side), +-0, +-Inf, NaNs, float32 subnormals, both signs, and 2^20 random bit
// patterns. exhaustive_fastconv checks 25 combinations on all 2^32 inputs; this test checks all
// of them where mismatches would be, in seconds. The bfloat16 input is checked on all 2^16
// inputs for every combination. Streaming stores are also checked at every output alignment and
// size up to a few steps, never writing outside the output, and on both sides of the size from
// which the encoders take them (fastconv::kStreamingBytes: 32 MiB of output, so that case holds
// about 300 MiB).
#include <catch2/catch.hpp>
#include <xmmintrin.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

float value_of(float x) { return x; }
float value_of(Bf16Bits x) { return std::bit_cast<float>(std::uint32_t(x.bits) << 16); }

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

// One way of writing the fast path's codes: a name, and the codes it gives for `in` widened to 32 bits.
template <class In>
struct Writer {
  std::string name;
  std::vector<Code> (*run)(fastconv::Variant, const Format&, const std::vector<In>&, const ConversionOptions&);
  bool narrow = true;  // streaming stores serve it
};

template <class In, class Out>
std::vector<Code> run_one_per_element(fastconv::Variant v, const Format& f, const std::vector<In>& in,
                                      const ConversionOptions& o) {
  std::vector<Out> out(in.size());
  fastconv::encode_with(v, f, std::span<const In>(in), std::span<Out>(out), o);
  return {out.begin(), out.end()};
}
template <class In>
std::vector<Code> run_packed4(fastconv::Variant v, const Format& f, const std::vector<In>& in, const ConversionOptions& o) {
  std::vector<std::uint8_t> packed((in.size() + 1) / 2);
  fastconv::encode_packed4_with(v, f, std::span<const In>(in), std::span<std::uint8_t>(packed), o);
  std::vector<Code> out(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = (packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xF;
  return out;
}
// Every output width the format fits.
template <class In>
std::vector<Writer<In>> writers_for(const Format& f) {
  std::vector<Writer<In>> writers{{"32-bit codes", run_one_per_element<In, Code>, false},
                                  {"16-bit codes", run_one_per_element<In, std::uint16_t>}};
  if (f.code_bits() <= 8) writers.push_back({"8-bit codes", run_one_per_element<In, std::uint8_t>});
  if (f.code_bits() <= 4) writers.push_back({"packed 4-bit codes", run_packed4<In>});
  return writers;
}

// The variants (ISA the CPU has x algorithm that serves (f, o), and split with streaming stores);
// exits 77 where the CPU has none.
std::vector<fastconv::Variant> variants_for(const Format& f, const ConversionOptions& o) {
  std::vector<fastconv::Isa> isas;
  for (const auto isa : fastconv::all_isas())
    if (fastconv::available(isa)) isas.push_back(isa);
  if (isas.empty()) {
    std::puts("SKIPPED: this CPU has no variant of the fast path (AVX2 or AVX-512)");
    std::exit(77);  // ctest's SKIP_RETURN_CODE: reported as skipped, not passed
  }
  std::vector<fastconv::Variant> variants;
  for (const auto isa : isas)
    for (const auto algorithm : fastconv::all_algorithms())
      if (!fastconv::algorithm_unsupported(algorithm, f, o)) {
        variants.push_back({isa, algorithm});
        if (algorithm == fastconv::Algorithm::split) variants.push_back({isa, algorithm, fastconv::Stores::streaming});
      }
  return variants;
}

// Compares every variant and writer with the scalar encode of `in`; returns the codes compared.
template <class In>
std::size_t compare_all(const Format& f, const ConversionOptions& o, const std::vector<In>& in,
                        std::set<std::string>& variants_seen) {
  std::vector<Code> expected(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) expected[i] = encode(f, double(value_of(in[i])), o);
  std::size_t compared = 0;
  for (const auto variant : variants_for(f, o)) {
    variants_seen.insert(fastconv::to_string(variant));
    for (const Writer<In>& w : writers_for<In>(f)) {
      if (variant.stores == fastconv::Stores::streaming && !w.narrow) continue;
      const std::vector<Code> got = w.run(variant, f, in, o);
      std::size_t mismatches = 0, first = 0;
      for (std::size_t i = 0; i < in.size(); ++i)
        if (got[i] != expected[i] && mismatches++ == 0) first = i;
      compared += in.size();
      INFO(fmt::format("{} {}: {} mismatches of {}; first: input {:#010x} ({:a}): scalar {:#x}, fast {:#x}",
                       fastconv::to_string(variant), w.name, mismatches, in.size(),
                       std::bit_cast<std::uint32_t>(value_of(in[first])), double(value_of(in[first])),
                       expected[first], got[first]));
      CHECK(mismatches == 0);
    }
  }
  return compared;
}

}  // namespace

TEST_CASE("fast encoder equals the scalar encode at every rounding boundary of every small format",
          "[fastconv][boundary]") {
  std::mt19937_64 rng(4);
  std::vector<float> random_floats(1 << 20);
  for (float& x : random_floats) x = std::bit_cast<float>(std::uint32_t(rng()));

  std::size_t combinations = 0, policies_of_formats = 0, compared = 0;
  std::set<std::string> variants_seen;
  for (const auto& spec : testing::small_format_specs()) {
    const Format f = format_from_string(spec);
    policies_of_formats += 1 + f.has_inf() + f.has_nan();  // saturate, and inf / nan where it has them
    const std::vector<float> in = boundary_inputs(testing::ReferenceFormat(f), random_floats);
    for (Rounding rounding : kFastRoundings)
      for (Overflow overflow : kOverflows) {
        const ConversionOptions o{.rounding = rounding, .overflow = overflow};
        if (o.validate(f)) continue;  // the format has no Inf (or NaN) to overflow to
        INFO(fmt::format("{} {} {}", spec, to_string(rounding), to_string(overflow)));
        REQUIRE_FALSE(fast_encode_unsupported(f, o));  // the fast path claims every such combination
        ++combinations;
        compared += compare_all(f, o, in, variants_seen);
      }
  }
  std::string lacking;  // the ISAs this CPU cannot run, named in the summary line
  for (const auto isa : fastconv::all_isas())
    if (!fastconv::available(isa)) lacking += fmt::format(" {}", fastconv::to_string(isa));
  fmt::print("{} (format, rounding, overflow) combinations, {} fast-path codes compared, variants: {}{}\n", combinations,
             compared, fmt::join(variants_seen, ", "),
             lacking.empty() ? "" : "; not checked (this CPU lacks them):" + lacking);
  CHECK(combinations == 2 * policies_of_formats);
  // Both algorithms, and split with streaming stores, served something on every ISA the CPU has.
  for (const auto isa : fastconv::all_isas()) {
    if (!fastconv::available(isa)) continue;
    for (const auto algorithm : fastconv::all_algorithms())
      CHECK(variants_seen.count(fastconv::to_string(fastconv::Variant{isa, algorithm})) == 1);
    const fastconv::Variant streaming{isa, fastconv::Algorithm::split, fastconv::Stores::streaming};
    CHECK(variants_seen.count(fastconv::to_string(streaming)) == 1);
  }
}

TEST_CASE("fast encoder equals the scalar encode on every bfloat16 input", "[fastconv][bf16]") {
  std::vector<Bf16Bits> every_bf16(1 << 16);
  for (std::uint32_t i = 0; i < every_bf16.size(); ++i) every_bf16[i] = Bf16Bits{std::uint16_t(i)};
  std::size_t combinations = 0, compared = 0;
  std::set<std::string> variants_seen;
  for (const auto& spec : testing::small_format_specs()) {
    const Format f = format_from_string(spec);
    for (Rounding rounding : kFastRoundings)
      for (Overflow overflow : kOverflows) {
        const ConversionOptions o{.rounding = rounding, .overflow = overflow};
        if (o.validate(f)) continue;
        INFO(fmt::format("bf16 -> {} {} {}", spec, to_string(rounding), to_string(overflow)));
        ++combinations;
        compared += compare_all(f, o, every_bf16, variants_seen);
      }
  }
  fmt::print("bf16 input: {} combinations, {} fast-path codes compared, variants: {}\n", combinations, compared,
             fmt::join(variants_seen, ", "));
  CHECK(compared >= combinations * every_bf16.size() * 2);
}

TEST_CASE("the encoders take the bit fields where the floating-point environment is not the default",
          "[fastconv][environment]") {
  // e4m3's subnormals and ties: round toward zero or denormals-are-zero in MXCSR would change
  // the split algorithm's float arithmetic; the encoders must notice and give the same codes.
  std::mt19937_64 rng(5);
  std::vector<float> in = boundary_inputs(testing::ReferenceFormat(formats::e4m3), {});
  for (int i = 0; i < 4096; ++i) in.push_back(std::bit_cast<float>(std::uint32_t(rng())));
  for (const ConversionOptions o : {ConversionOptions{}, ConversionOptions{.rounding = Rounding::toward_zero}}) {
    std::vector<Code> expected(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) expected[i] = encode(formats::e4m3, double(in[i]), o);
    REQUIRE(fastconv::default_float_environment());
    const bool served_by_split = fastconv::algorithm_used(formats::e4m3, o) == fastconv::Algorithm::split;
    for (const unsigned csr_bits : {0x6000u /* round toward zero */, 0x0040u /* denormals are zero */}) {
      const unsigned saved = _mm_getcsr();
      _mm_setcsr(saved | csr_bits);
      const bool default_environment = fastconv::default_float_environment();
      const auto used = fastconv::algorithm_used(formats::e4m3, o);
      std::vector<std::uint8_t> got(in.size());
      encode(formats::e4m3, in, std::span<std::uint8_t>(got), o);
      _mm_setcsr(saved);
      CHECK_FALSE(default_environment);
      if (served_by_split) CHECK(used == fastconv::Algorithm::bit_fields);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < in.size(); ++i) mismatches += got[i] != expected[i];
      INFO("MXCSR bits " << csr_bits << ", rounding " << to_string(o.rounding));
      CHECK(mismatches == 0);
    }
  }
}

namespace {

// Random bit patterns, with the boundary inputs of f first: every kind of value in a short span.
std::vector<float> mixed_inputs(const Format& f, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> random(count);
  for (float& x : random) x = std::bit_cast<float>(std::uint32_t(rng()));
  std::vector<float> in = boundary_inputs(testing::ReferenceFormat(f), {});
  std::shuffle(in.begin(), in.end(), rng);
  in.insert(in.end(), random.begin(), random.end());
  in.resize(count);
  return in;
}

std::uint32_t bits_of_input(float x) { return std::bit_cast<std::uint32_t>(x); }
std::uint32_t bits_of_input(Bf16Bits x) { return std::uint32_t(x.bits) << 16; }

std::vector<Code> scalar_codes(const Format& f, std::span<const float> in) {
  std::vector<Code> codes(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) codes[i] = encode(f, double(in[i]), {});
  return codes;
}

// The codes of `stored` (count codes of Out, or packed), read back as 32-bit codes.
template <class Out>
Code code_at(const Out* stored, std::size_t i, bool packed) {
  return packed ? (stored[i / 2] >> (i % 2 ? 4 : 0)) & 0xF : Code(stored[i]);
}

}  // namespace

TEST_CASE("streaming stores give the scalar codes at every output alignment and size, and nothing outside",
          "[fastconv][streaming]") {
  constexpr std::uint8_t kGuard = 0xA5;
  std::size_t calls = 0;
  const auto check = [&]<class Out>(const Format& f, bool packed, Out) {
    const std::vector<float> all = mixed_inputs(f, 1000, 6);
    const std::vector<Code> expected = scalar_codes(f, all);
    for (const auto isa : fastconv::all_isas()) {
      if (!fastconv::available(isa)) continue;
      for (const auto stores : {fastconv::Stores::streaming, fastconv::Stores::regular})
        for (const std::size_t count : {0, 1, 2, 15, 31, 32, 33, 63, 64, 65, 127, 128, 129, 130, 255, 257, 1000})
          for (std::size_t offset = 0; offset < 64 / sizeof(Out); ++offset) {
            const std::size_t outputs = packed ? (count + 1) / 2 : count;
            std::vector<Out> buffer(64 / sizeof(Out) + outputs + 64, Out(kGuard * 0x0101));
            // Offsets from a 64-byte boundary, whatever the allocation's alignment.
            const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(buffer.data()) % 64 / sizeof(Out);
            const std::size_t start = (64 / sizeof(Out) - misaligned) % (64 / sizeof(Out)) + offset;
            const std::span<Out> out(buffer.data() + start, outputs);
            const std::span<const float> in(all.data(), count);
            const fastconv::Variant v{isa, fastconv::Algorithm::split, stores};
            if constexpr (sizeof(Out) == 1)
              if (packed) fastconv::encode_packed4_with(v, f, in, out, {});
            if (!packed) fastconv::encode_with(v, f, in, out, {});
            ++calls;
            std::size_t mismatches = 0, guards_changed = 0;
            for (std::size_t i = 0; i < count; ++i) mismatches += code_at(out.data(), i, packed) != expected[i];
            for (std::size_t j = 0; j < buffer.size(); ++j)
              if (j < start || j >= start + outputs) guards_changed += buffer[j] != Out(kGuard * 0x0101);
            INFO(fmt::format("{} {}{}: {} inputs at offset {} (elements of {} bytes)", fastconv::to_string(v),
                             format_name(f), packed ? " packed" : "", count, offset, sizeof(Out)));
            CHECK(mismatches == 0);
            CHECK(guards_changed == 0);
          }
    }
  };
  check(formats::e4m3, false, std::uint8_t{});
  check(formats::e2m1, false, std::uint8_t{});
  check(formats::e2m1, true, std::uint8_t{});
  check(formats::bf16, false, std::uint16_t{});
  if (!fastconv::best_available()) {
    std::puts("SKIPPED: this CPU has no variant of the fast path (AVX2 or AVX-512)");
    std::exit(77);
  }
  fmt::print("streaming and regular stores: {} calls, every code equal to the scalar encode's\n", calls);
}

TEST_CASE("the encoders stream from kStreamingBytes of narrow output up, with the same codes on both sides",
          "[fastconv][streaming]") {
  const auto isa = fastconv::best_available();
  if (!isa) {
    std::puts("SKIPPED: this CPU has no variant of the fast path (AVX2 or AVX-512)");
    std::exit(77);
  }
  const fastconv::Variant by_size{*isa, fastconv::Algorithm::split};
  constexpr std::size_t kLimit = fastconv::kStreamingBytes;
  for (const std::size_t element_bytes : {1, 2}) {
    CHECK_FALSE(fastconv::streams(by_size, element_bytes, kLimit - element_bytes, false));
    CHECK(fastconv::streams(by_size, element_bytes, kLimit, false));
  }
  CHECK_FALSE(fastconv::streams(by_size, 1, kLimit - 1, true));
  CHECK(fastconv::streams(by_size, 1, kLimit, true));
  // 32-bit codes and the bit fields never stream; streaming asked of them is an error.
  CHECK_FALSE(fastconv::streams(by_size, sizeof(Code), 64 * kLimit, false));
  CHECK_FALSE(fastconv::streams({*isa, fastconv::Algorithm::bit_fields}, 1, 64 * kLimit, false));
  std::vector<float> few(8, 1.0f);
  std::vector<Code> wide(8);
  std::vector<std::uint8_t> narrow(8);
  CHECK_THROWS_WITH(fastconv::encode_with(fastconv::Variant{*isa, fastconv::Algorithm::split, fastconv::Stores::streaming},
                                          formats::e4m3, std::span<const float>(few), std::span<Code>(wide), {}),
                    Catch::Contains("streaming stores serve only"));
  CHECK_THROWS_WITH(
      fastconv::encode_with(fastconv::Variant{*isa, fastconv::Algorithm::bit_fields, fastconv::Stores::streaming},
                            formats::e4m3, std::span<const float>(few), std::span<std::uint8_t>(narrow), {}),
      Catch::Contains("streaming stores serve only"));

  // The public encoders just below, at and above the limit (and by an odd amount past it), against
  // the fast path with regular stores (which the tests above and exhaustive_fastconv check against
  // the scalar encode) on every input and the scalar encode on every 4099th. Float32 inputs for
  // 8-bit codes, bfloat16 for 16-bit and packed codes (half the memory: 128 MiB each).
  const std::vector<float> floats = mixed_inputs(formats::e4m3, kLimit + 37, 7);
  std::vector<Bf16Bits> bf16s(2 * kLimit + 75);
  std::mt19937_64 rng(8);
  for (Bf16Bits& x : bf16s) x = Bf16Bits{std::uint16_t(rng())};
  const auto compare = [&]<class In, class Out>(const std::vector<In>& all, const Format& f, std::size_t count,
                                                bool packed, Out) {
    const std::span<const In> in(all.data(), count);
    std::vector<Out> out(packed ? (count + 1) / 2 : count), regular(out.size());
    const fastconv::Variant regular_stores{*isa, fastconv::Algorithm::split, fastconv::Stores::regular};
    if constexpr (sizeof(Out) == 1)
      if (packed) {
        encode_packed4(f, in, std::span<std::uint8_t>(out));
        fastconv::encode_packed4_with(regular_stores, f, in, std::span<std::uint8_t>(regular), {});
      }
    if (!packed) {
      encode(f, in, std::span<Out>(out));
      fastconv::encode_with(regular_stores, f, in, std::span<Out>(regular), {});
    }
    std::size_t mismatches = 0, scalar_mismatches = 0, scalar_compared = 0;
    for (std::size_t j = 0; j < out.size(); ++j) mismatches += out[j] != regular[j];
    for (std::size_t i = 0; i < count; i += 4099, ++scalar_compared) {
      const float x = std::bit_cast<float>(bits_of_input(in[i]));
      scalar_mismatches += code_at(out.data(), i, packed) != encode(f, double(x), {});
    }
    const bool streamed = fastconv::streams(by_size, sizeof(Out), out.size() * sizeof(Out), packed);
    INFO(fmt::format("{}{}: {} inputs, {} output bytes, streaming: {}", format_name(f), packed ? " packed" : "", count,
                     out.size() * sizeof(Out), streamed));
    CHECK(streamed == (out.size() * sizeof(Out) >= kLimit));
    CHECK(mismatches == 0);
    CHECK(scalar_compared > 1000);
    CHECK(scalar_mismatches == 0);
  };
  for (const std::size_t count : {kLimit - 1, kLimit, kLimit + 37}) compare(floats, formats::e4m3, count, false, std::uint8_t{});
  for (const std::size_t count : {kLimit / 2 - 1, kLimit / 2, kLimit / 2 + 19})
    compare(bf16s, formats::bf16, count, false, std::uint16_t{});
  for (const std::size_t count : {2 * kLimit - 2, 2 * kLimit, 2 * kLimit + 75})
    compare(bf16s, formats::e2m1, count, true, std::uint8_t{});
}
