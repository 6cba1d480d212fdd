// Differential test: the fast float32 encoder (every instruction-set variant this CPU has, or
// those named with --isa; every algorithm that serves the combination; each output width the
// format fits) against the scalar reference `encode`, on all 2^32 float32 inputs, bit for bit.
// One run checks one (format, rounding, overflow); ctest runs one per combination. Exit 0: no
// mismatch; 1: mismatches (the first few are printed); 77: skipped, because the fast path does
// not support the combination, this CPU has no variant of it, or it lacks an ISA named with --isa.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"

namespace {

using namespace lowbit;

constexpr std::uint64_t kInputs = std::uint64_t{1} << 32;
constexpr std::uint32_t kChunk = 1u << 16;
constexpr int kExamplesShown = 8;

// One implementation under test: a name and how it encodes a chunk into 32-bit codes.
using EncodeVia = void (*)(fastconv::Variant, const Format&, std::span<const float>, std::span<Code>,
                           const ConversionOptions&);
struct Variant {
  std::string name;
  EncodeVia encode;
  fastconv::Variant variant;
  std::atomic<std::uint64_t> mismatches{0};
};

void via_code32(fastconv::Variant v, const Format& f, std::span<const float> in, std::span<Code> out,
                const ConversionOptions& o) {
  fastconv::encode_with(v, f, in, out, o);
}
template <class Narrow>
void via_narrow(fastconv::Variant v, const Format& f, std::span<const float> in, std::span<Code> out,
                const ConversionOptions& o) {
  thread_local std::vector<Narrow> codes;
  codes.resize(in.size());
  fastconv::encode_with(v, f, in, std::span<Narrow>(codes), o);
  std::copy(codes.begin(), codes.end(), out.begin());
}
void via_packed4(fastconv::Variant v, const Format& f, std::span<const float> in, std::span<Code> out,
                 const ConversionOptions& o) {
  thread_local std::vector<std::uint8_t> packed;
  packed.resize((in.size() + 1) / 2);
  fastconv::encode_packed4_with(v, f, in, std::span<std::uint8_t>(packed), o);
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = (packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xF;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Compares the fast float32 encoder with the scalar encode on all 2^32 float32 inputs"};
  std::string format_spec, rounding_name = "nearest-even", overflow_name = "saturate";
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> isa_names;
  app.add_option("--format", format_spec, "format spec (see `lowbit formats`)")->required();
  app.add_option("--rounding", rounding_name, "rounding mode")->capture_default_str();
  app.add_option("--overflow", overflow_name, "overflow policy")->capture_default_str();
  app.add_option("--threads", threads, "worker threads")->capture_default_str()->check(CLI::Range(1u, 256u));
  std::vector<std::string> known_isas;
  for (const fastconv::Isa isa : fastconv::all_isas()) known_isas.emplace_back(fastconv::to_string(isa));
  app.add_option("--isa", isa_names, "instruction-set variants to check (default: every one this CPU has); "
                                     "one this CPU lacks makes the run a skip")
      ->check(CLI::IsMember(known_isas));
  CLI11_PARSE(app, argc, argv);

  const auto parsed = parse_format(format_spec);
  const auto rounding = parse_rounding(rounding_name);
  const auto overflow = parse_overflow(overflow_name);
  if (!parsed.format || !rounding || !overflow) {
    std::fprintf(stderr, "bad arguments: %s\n",
                 !parsed.format ? parsed.error.c_str() : !rounding ? "unknown rounding" : "unknown overflow");
    return 2;
  }
  const Format f = *parsed.format;
  const ConversionOptions o{.rounding = *rounding, .overflow = *overflow};
  const std::string combination = format_name(f) + " " + rounding_name + " " + overflow_name;
  if (auto why = o.validate(f)) {
    std::fprintf(stderr, "%s: invalid combination: %s\n", combination.c_str(), why->c_str());
    return 2;
  }
  if (auto why = fast_encode_unsupported(f, o)) {
    std::printf("SKIPPED %s: not supported by the fast path (%s)\n", combination.c_str(), why->c_str());
    return 77;
  }

  std::vector<std::unique_ptr<Variant>> variants;
  const auto add = [&](fastconv::Variant variant, std::string output, EncodeVia encode) {
    auto v = std::make_unique<Variant>();
    v->name = fastconv::to_string(variant) + ", " + output;
    v->encode = encode;
    v->variant = variant;
    variants.push_back(std::move(v));
  };
  for (const fastconv::Isa isa : fastconv::all_isas()) {
    const std::string isa_name(fastconv::to_string(isa));
    const bool named = std::find(isa_names.begin(), isa_names.end(), isa_name) != isa_names.end();
    if (!isa_names.empty() && !named) continue;
    if (!fastconv::available(isa)) {
      std::printf("%s variant %s: this CPU lacks its instructions\n", named ? "SKIPPED" : "skipped", isa_name.c_str());
      if (named) return 77;
      continue;
    }
    for (const fastconv::Algorithm algorithm : fastconv::all_algorithms()) {
      if (auto why = fastconv::algorithm_unsupported(algorithm, f, o)) {
        std::printf("algorithm %s does not serve %s: %s\n", std::string(fastconv::to_string(algorithm)).c_str(),
                    combination.c_str(), why->c_str());
        continue;
      }
      const fastconv::Variant variant{isa, algorithm};
      add(variant, "32-bit codes", via_code32);
      // The narrowest output each format fits; each writer is exercised by the formats of its width.
      if (f.code_bits() > 8) add(variant, "16-bit codes", via_narrow<std::uint16_t>);
      if (f.code_bits() <= 8) add(variant, "8-bit codes", via_narrow<std::uint8_t>);
      if (f.code_bits() <= 4) add(variant, "packed 4-bit codes", via_packed4);
    }
  }
  if (variants.empty()) {
    std::printf("SKIPPED %s: this CPU has no variant of the fast path\n", combination.c_str());
    return 77;
  }
  if (!fastconv::default_float_environment()) {
    std::printf("%s: the floating-point environment is not the default one the split algorithm needs\n",
                combination.c_str());
    return 2;
  }

  std::mutex report;
  int examples_left = kExamplesShown;
  std::atomic<std::uint64_t> next_chunk{0};
  const auto started = std::chrono::steady_clock::now();
  const auto work = [&] {
    std::vector<float> in(kChunk);
    std::vector<Code> expected(kChunk), got(kChunk);
    for (std::uint64_t chunk; (chunk = next_chunk++) < kInputs / kChunk;) {
      const std::uint32_t first = std::uint32_t(chunk * kChunk);
      for (std::uint32_t i = 0; i < kChunk; ++i) in[i] = std::bit_cast<float>(first + i);
      // The reference: the scalar encode, element by element (the span encoder would take the
      // fast path itself).
      for (std::uint32_t i = 0; i < kChunk; ++i) expected[i] = encode(f, double(in[i]), o);
      for (auto& v : variants) {
        v->encode(v->variant, f, in, got, o);
        for (std::uint32_t i = 0; i < kChunk; ++i) {
          if (got[i] == expected[i]) continue;
          ++v->mismatches;
          std::lock_guard lock(report);
          if (examples_left-- > 0)
            std::printf("MISMATCH %s: input 0x%08x (%a): reference 0x%x, %s 0x%x\n", combination.c_str(), first + i,
                        double(in[i]), expected[i], v->name.c_str(), got[i]);
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::uint64_t total = 0;
  for (const auto& v : variants) {
    std::printf("%s, %s: %llu mismatches in %llu inputs\n", combination.c_str(), v->name.c_str(),
                (unsigned long long)v->mismatches.load(), (unsigned long long)kInputs);
    total += v->mismatches;
  }
  std::printf("%s: %s, %.1f s on %u threads\n", combination.c_str(), total == 0 ? "PASS" : "FAIL", seconds, threads);
  return total == 0 ? 0 : 1;
}
