// bench_convert: float32 -> e4m3, e5m2, e2m1, bf16 (nearest-even, saturating) conversions per
// second on one core, for the fast path (32-bit and narrow codes), the scalar reference (the
// generic `encode`, element by element) and, when the CUDA headers are present, CUDA's host
// conversions, all on the same inputs in one run. Every path must produce the reference's codes.
// Prints a table and writes it to OUT_DIR/bench_convert.md and .csv, each with a provenance line
// (default results/: `build/experiments/bench_convert` from the repository root remakes the record).
#include <time.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"
#include "experiments/common/results.hpp"

#if LOWBIT_HAVE_CUDA_HEADERS
#include <cuda_bf16.h>
#include <cuda_fp4.h>
#include <cuda_fp8.h>
#endif

namespace {

using namespace lowbit;

constexpr const char* kFormats[]{"e4m3", "e5m2", "e2m1", "bf16"};

// Inputs are normal(0, max_finite/8): they spread over the format's binades and overflow with
// probability ~1e-15 (8 sigma), so every path converts the same kind of values.
double input_sigma(const Format& f) { return max_finite(f) / 8; }

struct Timing {
  double cpu = 0, wall = 0;  // medians
};

struct Path {
  std::string name;    // which implementation
  std::string output;  // what it writes per element
  std::function<void()> run;
  std::function<Code(std::size_t)> code_at;
  Timing median{};
  std::size_t mismatches = 0;
};

// The narrow output of the fast path (and of CUDA) for this format: bytes, words or nibbles.
struct Buffers {
  std::vector<Code> reference, code32;
  std::vector<std::uint8_t> code8, packed4, cuda8;
  std::vector<std::uint16_t> code16, cuda16;
};

// CPU time of this thread: the machine is shared, and time spent descheduled is not the
// conversion's. Wall time is kept beside it.
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Timing median_seconds(const std::function<void()>& run, int repetitions) {
  run();  // warm-up: page faults, caches, the fast path's plan
  std::vector<double> cpu, wall;
  for (int r = 0; r < repetitions; ++r) {
    const double cpu_start = thread_cpu_seconds(), wall_start = wall_seconds();
    run();
    cpu.push_back(thread_cpu_seconds() - cpu_start);
    wall.push_back(wall_seconds() - wall_start);
  }
  const auto median = [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  return {median(cpu), median(wall)};
}

std::vector<Path> paths_for(const std::string& name, const Format& f, const std::vector<float>& in, Buffers& b) {
  const std::size_t n = in.size();
  std::vector<Path> paths;
  b.reference.assign(n, 0);
  paths.push_back({"scalar reference", "32-bit codes",
                   [&, f] {
                     for (std::size_t i = 0; i < in.size(); ++i) b.reference[i] = encode(f, double(in[i]));
                   },
                   [&](std::size_t i) { return b.reference[i]; }});
  b.code32.assign(n, 0);
  paths.push_back({"fast", "32-bit codes", [&, f] { encode(f, std::span<const float>(in), std::span<Code>(b.code32)); },
                   [&](std::size_t i) { return b.code32[i]; }});
  if (f.code_bits() <= 8) {
    b.code8.assign(n, 0);
    paths.push_back({"fast", "8-bit codes", [&, f] { encode(f, in, std::span<std::uint8_t>(b.code8)); },
                     [&](std::size_t i) { return Code(b.code8[i]); }});
  } else {
    b.code16.assign(n, 0);
    paths.push_back({"fast", "16-bit codes", [&, f] { encode(f, in, std::span<std::uint16_t>(b.code16)); },
                     [&](std::size_t i) { return Code(b.code16[i]); }});
  }
  if (f.code_bits() <= 4) {
    b.packed4.assign((n + 1) / 2, 0);
    paths.push_back({"fast", "packed 4-bit codes", [&, f] { encode_packed4(f, in, b.packed4); },
                     [&](std::size_t i) { return Code(b.packed4[i / 2] >> (i % 2 ? 4 : 0)) & 0xF; }});
  }
#if LOWBIT_HAVE_CUDA_HEADERS
  const auto cuda8 = [&](std::string output, std::function<std::uint8_t(float)> convert) {
    b.cuda8.assign(n, 0);
    paths.push_back({"CUDA host", std::move(output),
                     [&, convert] {
                       for (std::size_t i = 0; i < in.size(); ++i) b.cuda8[i] = convert(in[i]);
                     },
                     [&](std::size_t i) { return Code(b.cuda8[i]); }});
  };
  if (name == "e4m3") cuda8("8-bit codes", [](float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); });
  if (name == "e5m2") cuda8("8-bit codes", [](float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); });
  if (name == "e2m1")
    cuda8("8-bit codes", [](float x) { return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest); });
  if (name == "bf16") {
    // __float2bfloat16_rn does not saturate; the inputs never overflow bf16, so it must agree.
    b.cuda16.assign(n, 0);
    paths.push_back({"CUDA host", "16-bit codes",
                     [&] {
                       for (std::size_t i = 0; i < in.size(); ++i)
                         b.cuda16[i] = std::bit_cast<std::uint16_t>(__float2bfloat16_rn(in[i]));
                     },
                     [&](std::size_t i) { return Code(b.cuda16[i]); }});
  }
#else
  (void)name;
#endif
  return paths;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Times float32 -> e4m3, e5m2, e2m1, bf16 conversion (nearest-even, saturating) on one core: the fast path, the "
      "scalar reference and CUDA's host conversions, on the same inputs, and checks they give the same codes."};
  int log2_count = 26, repetitions = 5;
  std::uint64_t seed = 1;
  std::string out_dir = "results";
  app.add_option("--log2-count", log2_count, "number of inputs: 2^N")->capture_default_str()->check(CLI::Range(10, 30));
  app.add_option("--repetitions", repetitions, "timed runs per path (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 101));
  app.add_option("--seed", seed, "seed of the input generator")->capture_default_str();
  app.add_option("--out-dir", out_dir, "where bench_convert.md and bench_convert.csv go (created if missing)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // Outputs are checked before the minutes of timing. Append mode: a failed run keeps the last record.
  const std::filesystem::path markdown_path = std::filesystem::path(out_dir) / "bench_convert.md",
                              csv_path = std::filesystem::path(out_dir) / "bench_convert.csv";
  std::error_code created;
  std::filesystem::create_directories(out_dir, created);
  for (const auto& path : {markdown_path, csv_path})
    if (created || !std::ofstream(path, std::ios::app)) {
      std::fprintf(stderr, "bench_convert: --out-dir '%s': cannot write %s%s%s\n", out_dir.c_str(), path.c_str(),
                   created ? ": " : "", created ? created.message().c_str() : "");
      return 2;
    }

  const std::size_t count = std::size_t{1} << log2_count;
  const auto isa = fastconv::best_available();
  const Provenance provenance = Provenance::current();
  experiments::RunInfo run = experiments::RunInfo::from_args(argc, argv);
  run.machine = provenance;
  run.seeds = {{"inputs", seed}};
  run.formats = std::vector<std::string>(std::begin(kFormats), std::end(kFormats));
  run.config = {{"log2_count", log2_count}, {"repetitions", repetitions},
                {"fast_path", isa ? fastconv::to_string(*isa) : "none (scalar)"}};
  const std::string& command = run.command;
  std::vector<std::string> sigmas;
  for (const char* name : kFormats) sigmas.push_back(fmt::format("{} {:.3g}", name, input_sigma(format_from_string(name))));
  std::string table = fmt::format(
      "{}\n\nCommand: `{}` (from the repository root, after building the target bench_convert).\n\n"
      "float32 -> format, nearest-even, saturating; {} inputs per format drawn from normal(0, sigma = max_finite/8), so "
      "they spread over\nthe format's range without overflow (sigma: {}), seed {}; one thread; median thread CPU time of "
      "{} runs\nafter a warm-up (per CPU second, so time descheduled on a shared machine does not count; the CSV has "
      "wall time too).\nFast path variant: {}.\n\n"
      "| format | path | output | ns/conversion | conversions/s | vs scalar reference | same codes |\n"
      "|---|---|---|---:|---:|---:|---|\n",
      provenance.comment_line(), command, count, fmt::join(sigmas, ", "), seed, repetitions,
      isa ? fastconv::to_string(*isa) : "none (scalar)");
  std::string csv =
      "format,path,output,inputs,repetitions,median_cpu_seconds,median_wall_seconds,conversions_per_second,"
      "ratio_vs_scalar,mismatches\n";
  bool all_identical = true;
  double target_rate[2] = {0, 0};  // best fast rate for e4m3, e2m1

  for (const std::string name : kFormats) {
    const Format f = format_from_string(name);
    std::mt19937_64 generator(seed);
    std::normal_distribution<float> normal(0.0f, float(input_sigma(f)));
    std::vector<float> in(count);
    for (float& x : in) x = normal(generator);

    Buffers buffers;
    std::vector<Path> paths = paths_for(name, f, in, buffers);
    fmt::print(stderr, "bench_convert: {}: {} paths, {} timed runs each\n", name, paths.size(), repetitions);
    for (Path& p : paths) {
      p.median = median_seconds(p.run, repetitions);
      fmt::print(stderr, "bench_convert: {} {} ({}): {:.3f} ns/conversion\n", name, p.name, p.output,
                 1e9 * p.median.cpu / double(count));
    }
    const double scalar_seconds = paths.front().median.cpu;
    for (Path& p : paths) {
      for (std::size_t i = 0; i < count; ++i) p.mismatches += p.code_at(i) != buffers.reference[i];
      all_identical = all_identical && p.mismatches == 0;
      const double rate = double(count) / p.median.cpu;
      if (p.name == "fast" && (name == "e4m3" || name == "e2m1"))
        target_rate[name == "e2m1"] = std::max(target_rate[name == "e2m1"], rate);
      const std::string same = p.mismatches == 0 ? "yes" : fmt::format("NO: {} differ", p.mismatches);
      table += fmt::format("| {} | {} | {} | {:.3f} | {:.3g} | {:.1f}x | {} |\n", name, p.name, p.output,
                           1e9 * p.median.cpu / double(count), rate, scalar_seconds / p.median.cpu, same);
      csv += fmt::format("{},{},{},{},{},{:.6f},{:.6f},{:.6g},{:.4g},{}\n", name, p.name, p.output, count,
                         repetitions, p.median.cpu, p.median.wall, rate, scalar_seconds / p.median.cpu, p.mismatches);
      std::fflush(stdout);
    }
  }
  const auto verdict = [](double rate) { return rate >= 1e9 ? "met" : "NOT met"; };
  table += fmt::format(
      "\nTarget >= 1e9 conversions/s per core with the fast path: e4m3 {} ({:.3g}/s), e2m1 {} ({:.3g}/s).\n"
      "Every path gave the scalar reference's codes on every input: {}.\n",
      verdict(target_rate[0]), target_rate[0], verdict(target_rate[1]), target_rate[1], all_identical ? "yes" : "NO");
  std::fputs(table.c_str(), stdout);

  try {
    const experiments::ResultDirectory folder(out_dir, run, "bench_convert");
    folder.csv(csv_path.filename().string(), csv);
    folder.markdown(markdown_path.filename().string(), table);
    folder.write_provenance();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_convert: %s\n", e.what());
    return 1;
  }
  return all_identical ? 0 : 1;
}
