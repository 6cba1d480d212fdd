// Differential test: the fast float32 encoder (every instruction-set variant this CPU has, or
// those named with --isa; every algorithm that serves the combination; each output width the
// format fits) against the scalar reference `encode`, on all 2^32 float32 inputs, bit for bit.
// The split algorithm's narrow outputs are checked with regular and with streaming stores. One
// run checks one (format, rounding, overflow); ctest runs one per combination and ISA. Exit 0:
// no mismatch; 1: mismatches (the first few are printed); 2: bad arguments, or a digest file that
// is missing, malformed, written for something else or not that of this scalar encode; 77:
// skipped, because the fast path does not support the combination, this CPU has no variant of it,
// or it lacks an ISA named with --isa.
//
// The scalar reference costs three quarters of a full run, so its codes are kept as digests, one
// per chunk of 2^22 inputs (tests/fastconv/reference/, written with --write-reference). Given
// --reference FILE, a run compares each variant's digests with the file's and recomputes the
// scalar reference only in a chunk whose digest differs (the digest changes whenever one code
// does), then compares there code by code and names the inputs. It also recomputes a few chunks
// always (those holding +-0, +-1, +-min positive, +-max finite and +-Inf) and fails when their
// digests are not the file's: a stale file is an error, never a pass. --recompute-reference
// computes the scalar reference everywhere and checks every digest of the file (what ctest does
// for a few combinations, so that a drifting scalar encoder is caught).
#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"

namespace {

using namespace lowbit;

constexpr std::uint64_t kInputs = std::uint64_t{1} << 32;
constexpr std::uint32_t kRun = 1u << 16;     // inputs a thread converts at once
constexpr std::uint64_t kRuns = kInputs / kRun;
constexpr std::uint32_t kChunk = 1u << 22;   // inputs per digest of a reference file
constexpr std::uint64_t kChunks = kInputs / kChunk;
constexpr std::uint64_t kRunsPerChunk = kChunk / kRun;
constexpr int kExamplesShown = 8;
constexpr std::uint64_t kOdd = 0x9E3779B97F4A7C15ull;

// The digest of one run: eight interleaved sums h = h * P + code + 1 (mod 2^64, P odd), folded
// the same way: one code changed changes the digest (P is invertible), and the lanes keep the
// multiplier busy.
std::uint64_t digest(std::span<const Code> codes) {
  std::array<std::uint64_t, 8> lanes{};
  std::size_t i = 0;
  for (; i + lanes.size() <= codes.size(); i += lanes.size())
    for (std::size_t j = 0; j < lanes.size(); ++j) lanes[j] = lanes[j] * kOdd + codes[i + j] + 1;
  std::uint64_t h = codes.size();
  for (; i < codes.size(); ++i) h = h * kOdd + codes[i] + 1;
  for (const std::uint64_t lane : lanes) h = h * kOdd + lane;
  return h;
}

// The digest of chunk c: the digests of its runs folded in order, the same way.
std::uint64_t chunk_digest(const std::vector<std::uint64_t>& run_digests, std::uint64_t c) {
  std::uint64_t h = kRunsPerChunk;
  for (std::uint64_t r = c * kRunsPerChunk; r < (c + 1) * kRunsPerChunk; ++r) h = h * kOdd + run_digests[r];
  return h;
}

// The first line of a reference file: what it is the reference of.
std::string reference_header(const std::string& combination) {
  return "exhaustive_fastconv scalar-reference digests, " + combination + ", " + std::to_string(kChunks) +
         " chunks of " + std::to_string(kChunk) + " inputs";
}

// The digests of a reference file written for `combination`, or why not.
std::vector<std::uint64_t> read_reference(const std::string& path, const std::string& combination, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  std::string header;
  if (!in || !std::getline(in, header)) {
    error = path + ": cannot read it (tests/fastconv/reference/README.md has the command that writes these files)";
    return {};
  }
  if (header != reference_header(combination)) {
    error = path + ": its header is '" + header.substr(0, 200) + "', not '" + reference_header(combination) + "'";
    return {};
  }
  std::vector<std::uint64_t> digests(kChunks);
  if (!in.read(reinterpret_cast<char*>(digests.data()), std::streamsize(digests.size() * sizeof(std::uint64_t))) ||
      in.peek() != std::ifstream::traits_type::eof()) {
    error = path + ": not " + std::to_string(kChunks) + " digests after the header";
    return {};
  }
  return digests;
}

// The chunks a run with --reference always recomputes: those holding the float32 values of
// +-0, +-1, +-min positive, +-max finite and +-Inf of the format.
std::vector<std::uint64_t> spot_check_chunks(const Format& f) {
  std::vector<std::uint64_t> chunks;
  for (const double v : {0.0, 1.0, min_positive(f), max_finite(f), std::numeric_limits<double>::infinity()})
    for (const double s : {v, -v}) chunks.push_back(std::bit_cast<std::uint32_t>(float(s)) / kChunk);
  std::sort(chunks.begin(), chunks.end());
  chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  return chunks;
}

// One implementation under test: a name and how it encodes a run into 32-bit codes.
using EncodeVia = void (*)(fastconv::Variant, const Format&, std::span<const float>, std::span<Code>,
                           const ConversionOptions&);
struct Variant {
  std::string name;
  EncodeVia encode;
  fastconv::Variant variant;
  std::atomic<std::uint64_t> mismatches{0};
  std::vector<std::uint64_t> run_digests;  // where the reference comes from digests
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
  fastconv::encode_packed4_with(v, f, std::span<const float>(in), std::span<std::uint8_t>(packed), o);
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = (packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xF;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Compares the fast float32 encoder with the scalar encode on all 2^32 float32 inputs"};
  std::string format_spec, rounding_name = "nearest-even", overflow_name = "saturate";
  std::string write_reference, reference;
  bool recompute_reference = false;
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::string> isa_names;
  app.add_option("--format", format_spec, "format spec (see `lowbit formats`)")->required();
  app.add_option("--rounding", rounding_name, "rounding mode")->capture_default_str();
  app.add_option("--overflow", overflow_name, "overflow policy")->capture_default_str();
  auto* writing = app.add_option("--write-reference", write_reference,
                                 "also write the digests of the scalar reference's codes to this file");
  auto* reading =
      app.add_option("--reference", reference,
                     "take the scalar reference's digests from this file (written with --write-reference); recompute "
                     "the scalar reference only where a digest differs and in a few chunks checked every time")
          ->excludes(writing);
  app.add_flag("--recompute-reference", recompute_reference,
               "with --reference: compute the scalar reference on every input and require every digest of the file "
               "to be its own")
      ->needs(reading);
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
      // The narrowest output each format fits; each writer is exercised by the formats of its
      // width. A run of 2^16 inputs is below the size that streams by itself, so the split
      // algorithm's narrow outputs are checked again with streaming stores.
      for (const auto stores : {fastconv::Stores::by_size, fastconv::Stores::streaming}) {
        if (stores == fastconv::Stores::streaming && algorithm != fastconv::Algorithm::split) continue;
        const fastconv::Variant narrow{isa, algorithm, stores};
        if (f.code_bits() > 8) add(narrow, "16-bit codes", via_narrow<std::uint16_t>);
        if (f.code_bits() <= 8) add(narrow, "8-bit codes", via_narrow<std::uint8_t>);
        if (f.code_bits() <= 4) add(narrow, "packed 4-bit codes", via_packed4);
      }
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
  std::vector<std::uint64_t> reference_digests;
  if (!reference.empty()) {
    std::string error;
    reference_digests = read_reference(reference, combination, error);
    if (reference_digests.empty()) {
      std::fprintf(stderr, "--reference %s\n", error.c_str());
      return 2;
    }
    std::printf("%s: the scalar reference %s the digests in %s\n", combination.c_str(),
                recompute_reference ? "recomputed on every input and checked against" : "from", reference.c_str());
  }
  // Where the scalar reference is computed on every input; elsewhere the variants' digests stand in.
  const bool scalar_everywhere = reference.empty() || recompute_reference;
  if (!scalar_everywhere)
    for (auto& v : variants) v->run_digests.resize(kRuns);
  std::vector<std::uint64_t> scalar_run_digests(kRuns);

  // Converts the runs `runs` through every variant: with `scalar`, also through the scalar
  // reference, comparing code by code; without, keeping each variant's digests.
  std::mutex report;
  int examples_left = kExamplesShown;
  const auto sweep = [&](const std::vector<std::uint64_t>& runs, bool scalar) {
    std::atomic<std::size_t> next{0};
    const auto work = [&] {
      std::vector<float> in(kRun);
      std::vector<Code> expected(kRun), got(kRun);
      for (std::size_t k; (k = next++) < runs.size();) {
        const std::uint64_t run = runs[k];
        const std::uint32_t first = std::uint32_t(run * kRun);
        for (std::uint32_t i = 0; i < kRun; ++i) in[i] = std::bit_cast<float>(first + i);
        // The scalar encode, element by element (the span encoder would take the fast path itself).
        if (scalar) {
          for (std::uint32_t i = 0; i < kRun; ++i) expected[i] = encode(f, double(in[i]), o);
          scalar_run_digests[run] = digest(expected);
        }
        for (auto& v : variants) {
          v->encode(v->variant, f, in, got, o);
          if (!scalar) {
            v->run_digests[run] = digest(got);
            continue;
          }
          for (std::uint32_t i = 0; i < kRun; ++i) {
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
  };
  const auto runs_of = [](const std::vector<std::uint64_t>& chunks) {
    std::vector<std::uint64_t> runs;
    for (const std::uint64_t c : chunks)
      for (std::uint64_t r = c * kRunsPerChunk; r < (c + 1) * kRunsPerChunk; ++r) runs.push_back(r);
    return runs;
  };
  std::vector<std::uint64_t> every_chunk(kChunks);
  for (std::uint64_t c = 0; c < kChunks; ++c) every_chunk[c] = c;

  const auto started = std::chrono::steady_clock::now();
  sweep(runs_of(every_chunk), scalar_everywhere);
  // The chunks whose scalar reference was computed, to be checked against the file's digests.
  std::vector<std::uint64_t> checked_chunks = scalar_everywhere ? every_chunk : std::vector<std::uint64_t>{};
  std::uint64_t differing_chunks = 0;
  if (!scalar_everywhere) {
    const std::vector<std::uint64_t> spot_checks = spot_check_chunks(f);
    for (std::uint64_t c = 0; c < kChunks; ++c) {
      bool differs = false;
      for (const auto& v : variants) differs = differs || chunk_digest(v->run_digests, c) != reference_digests[c];
      differing_chunks += differs;
      if (differs || std::binary_search(spot_checks.begin(), spot_checks.end(), c)) checked_chunks.push_back(c);
    }
    sweep(runs_of(checked_chunks), true);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  if (!reference.empty()) {
    std::uint64_t stale_chunks = 0;
    for (const std::uint64_t c : checked_chunks) stale_chunks += chunk_digest(scalar_run_digests, c) != reference_digests[c];
    if (stale_chunks > 0) {
      std::fprintf(stderr,
                   "--reference %s: %llu of the %llu chunks recomputed have digests that are not those of this "
                   "program's scalar encode: the file is stale or damaged (tests/fastconv/reference/README.md)\n",
                   reference.c_str(), (unsigned long long)stale_chunks, (unsigned long long)checked_chunks.size());
      return 2;
    }
  }
  if (!write_reference.empty()) {
    std::filesystem::path path(write_reference);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path, std::ios::binary);
    out << reference_header(combination) << "\n";
    for (std::uint64_t c = 0; c < kChunks; ++c) {
      const std::uint64_t d = chunk_digest(scalar_run_digests, c);
      out.write(reinterpret_cast<const char*>(&d), sizeof d);
    }
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
  if (!scalar_everywhere)
    std::printf("%s: scalar reference recomputed in %llu of %llu chunks (%llu where a digest differed, the rest "
                "checked every run), each equal to the file's digest\n",
                combination.c_str(), (unsigned long long)checked_chunks.size(), (unsigned long long)kChunks,
                (unsigned long long)differing_chunks);
  else if (!reference.empty())
    std::printf("%s: scalar reference recomputed on every input, its %llu chunk digests equal to the file's\n",
                combination.c_str(), (unsigned long long)kChunks);
  std::printf("%s: %s, %.1f s on %u threads\n", combination.c_str(), total == 0 ? "PASS" : "FAIL", seconds, threads);
  return total == 0 ? 0 : 1;
}
