// Differential test: the fast float32 encoder (every instruction-set variant this CPU has, or
// those named with --isa; every algorithm that serves the combination; each output width the
// format fits) against the scalar reference `encode`, on all 2^32 float32 inputs, bit for bit.
// One run checks one (format, rounding, overflow); ctest runs one per combination and ISA. Exit 0:
// no mismatch; 1: mismatches (the first few are printed); 2: bad arguments or reference file; 77:
// skipped, because the fast path does not support the combination, this CPU has no variant of it,
// or it lacks an ISA named with --isa.
//
// The scalar reference costs three quarters of a run. --write-reference FILE keeps a digest of
// its codes per chunk of 2^16 inputs; a run of another variant given --reference FILE compares
// its codes' digests with those, and recomputes the scalar reference (and compares code by code)
// only in a chunk whose digest differs (the digest changes whenever one code does); ctest runs
// the avx2 variant first, writing the file.
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
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
constexpr std::uint64_t kChunks = kInputs / kChunk;
constexpr int kExamplesShown = 8;

// Eight interleaved sums h = h * P + code + 1 (mod 2^64, P odd), folded the same way: one code
// changed changes the digest (P is invertible), and the lanes keep the multiplier busy.
std::uint64_t digest(std::span<const Code> codes) {
  constexpr std::uint64_t P = 0x9E3779B97F4A7C15ull;
  std::array<std::uint64_t, 8> lanes{};
  std::size_t i = 0;
  for (; i + lanes.size() <= codes.size(); i += lanes.size())
    for (std::size_t j = 0; j < lanes.size(); ++j) lanes[j] = lanes[j] * P + codes[i + j] + 1;
  std::uint64_t h = codes.size();
  for (; i < codes.size(); ++i) h = h * P + codes[i] + 1;
  for (const std::uint64_t lane : lanes) h = h * P + lane;
  return h;
}

// The first line of a reference file: what it is the reference of.
std::string reference_header(const std::string& combination) {
  return "exhaustive_fastconv scalar-reference digests, " + combination + ", " + std::to_string(kChunks) +
         " chunks of " + std::to_string(kChunk) + " inputs";
}

// The digests of a reference file written for `combination` by this build of the program, or why not.
std::vector<std::uint64_t> read_reference(const std::string& path, const std::string& combination, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  if (!in || !std::getline(in, header)) {
    error = path + ": cannot read (ctest writes it in the avx2 run of the same combination)";
    return {};
  }
  if (header != reference_header(combination)) {
    error = path + ": written for '" + header + "', not for " + combination;
    return {};
  }
  std::error_code ignored;
  if (std::filesystem::last_write_time(path, ignored) < std::filesystem::last_write_time("/proc/self/exe", ignored)) {
    error = path + ": older than this program (rebuilt since); run with --write-reference again";
    return {};
  }
  std::vector<std::uint64_t> digests(kChunks);
  if (!in.read(reinterpret_cast<char*>(digests.data()), std::streamsize(digests.size() * sizeof(std::uint64_t))) ||
      in.peek() != std::ifstream::traits_type::eof()) {
    error = path + ": not " + std::to_string(kChunks) + " digests";
    return {};
  }
  return digests;
}

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
  std::string write_reference, reference;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> isa_names;
  app.add_option("--format", format_spec, "format spec (see `lowbit formats`)")->required();
  app.add_option("--rounding", rounding_name, "rounding mode")->capture_default_str();
  app.add_option("--overflow", overflow_name, "overflow policy")->capture_default_str();
  auto* writing = app.add_option("--write-reference", write_reference,
                                 "also write the digests of the scalar reference's codes to this file");
  app.add_option("--reference", reference, "take the scalar reference's digests from this file (--write-reference)")
      ->excludes(writing);
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
  std::vector<std::uint64_t> reference_digests, written_digests;
  if (!reference.empty()) {
    std::string error;
    reference_digests = read_reference(reference, combination, error);
    if (reference_digests.empty()) {
      std::fprintf(stderr, "--reference %s\n", error.c_str());
      return 2;
    }
    std::printf("%s: the scalar reference from the digests in %s\n", combination.c_str(), reference.c_str());
  }
  if (!write_reference.empty()) written_digests.resize(kChunks);

  std::mutex report;
  int examples_left = kExamplesShown;
  std::atomic<std::uint64_t> next_chunk{0}, recomputed_chunks{0}, stale_chunks{0};
  const auto started = std::chrono::steady_clock::now();
  const auto work = [&] {
    std::vector<float> in(kChunk);
    std::vector<Code> expected(kChunk), got(kChunk);
    for (std::uint64_t chunk; (chunk = next_chunk++) < kChunks;) {
      const std::uint32_t first = std::uint32_t(chunk * kChunk);
      for (std::uint32_t i = 0; i < kChunk; ++i) in[i] = std::bit_cast<float>(first + i);
      // The reference: the scalar encode, element by element (the span encoder would take the
      // fast path itself); with --reference only where a variant's digest differs.
      bool have_expected = false;
      const auto compute_expected = [&] {
        for (std::uint32_t i = 0; i < kChunk; ++i) expected[i] = encode(f, double(in[i]), o);
        have_expected = true;
      };
      if (reference_digests.empty()) compute_expected();
      if (!written_digests.empty()) written_digests[chunk] = digest(expected);
      for (auto& v : variants) {
        v->encode(v->variant, f, in, got, o);
        if (!have_expected) {
          if (digest(got) == reference_digests[chunk]) continue;
          compute_expected();
          ++recomputed_chunks;
          if (digest(expected) != reference_digests[chunk]) ++stale_chunks;
        }
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

  if (stale_chunks > 0) {
    std::fprintf(stderr, "--reference %s: %llu chunks' digests are not those of this program's scalar encode\n",
                 reference.c_str(), (unsigned long long)stale_chunks.load());
    return 2;
  }
  if (!written_digests.empty()) {
    std::filesystem::path path(write_reference);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << reference_header(combination) << "\n";
    out.write(reinterpret_cast<const char*>(written_digests.data()),
              std::streamsize(written_digests.size() * sizeof(std::uint64_t)));
    if (!out.flush()) {
      std::fprintf(stderr, "--write-reference %s: cannot write\n", write_reference.c_str());
      return 2;
    }
  }
  std::uint64_t total = 0;
  for (const auto& v : variants) {
    std::printf("%s, %s: %llu mismatches in %llu inputs\n", combination.c_str(), v->name.c_str(),
                (unsigned long long)v->mismatches.load(), (unsigned long long)kInputs);
    total += v->mismatches;
  }
  if (!reference_digests.empty())
    std::printf("%s: scalar reference recomputed in %llu of %llu chunks (where a digest differed)\n",
                combination.c_str(), (unsigned long long)recomputed_chunks.load(), (unsigned long long)kChunks);
  std::printf("%s: %s, %.1f s on %u threads\n", combination.c_str(), total == 0 ? "PASS" : "FAIL", seconds, threads);
  return total == 0 ? 0 : 1;
}
