// Quantizing a heads x tokens x d float32 tensor (default 32 x 32768 x 128) with per-thread
// INT4 groups and smoothing, on one thread: the library's quantizer beside the plain
// element-by-element reference, timed in the same run, results compared bit for bit.
// Roles: K (mean over all tokens subtracted; per-thread K groups) and Q (per-block mean
// subtracted; per-thread Q groups), groups from mma.m16n8k64.s4 with 4 warps, 128 x 64 blocks.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <time.h>

#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <random>

#include "emulation/convert_fast.hpp"
#include "emulation/quant/quantize.hpp"
#include "emulation/quant/smoothing.hpp"
#include "experiments/common/results.hpp"

using namespace lowbit;
using namespace lowbit::quant;

namespace {

// One head: a channel bias shared by all tokens plus unit noise (xorshift + Irwin-Hall: fast to
// make, the statistics do not change the speed).
MatrixF make_head(int tokens, int dim, std::uint64_t seed) {
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  const auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return float(state >> 40) * 0x1p-24f;
  };
  std::vector<float> bias(static_cast<std::size_t>(dim));
  for (float& b : bias) b = 8 * (next() - 0.5f);
  MatrixF x(tokens, dim);
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < dim; ++c) x(t, c) = bias[std::size_t(c)] + (next() + next() + next() + next() - 2.0f);
  return x;
}

struct Role {
  std::string name;
  int smooth_block;  // 0: mean over all tokens (K); b_q: per-block mean (Q)
  QuantSpec spec;
};

std::uint64_t fingerprint(const QuantizedTensor& q) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (Eigen::Index i = 0; i < q.codes.size(); ++i) mix(q.codes.data()[i]);
  for (Code c : q.scale_codes) mix(c);
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_quantize: per-thread INT4 quantization with smoothing, one thread"};
  int heads = 32, tokens = 32768, dim = 128, repeats = 3;
  std::string out = "results/bench/bench_quantize.csv";
  bool skip_reference = false;
  // Every count is at least 1: no heads or tokens leave nothing to time, no repeats no best time.
  const CLI::Validator at_least_one(
      [](std::string& text) {
        int value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool ok = error == std::errc{} && end == text.data() + text.size() && value >= 1;
        return ok ? std::string() : "must be a whole number >= 1, got " + text;
      },
      "INT>=1");
  app.add_option("--heads", heads)->capture_default_str()->check(at_least_one);
  app.add_option("--tokens", tokens)->capture_default_str()->check(at_least_one);
  app.add_option("--dim", dim, "head dimension (padded to whole k64 instructions)")
      ->capture_default_str()
      ->check(at_least_one);
  app.add_option("--repeats", repeats, "timed runs of the library quantizer (best is reported)")
      ->capture_default_str()
      ->check(at_least_one);
  app.add_option("--out", out, "CSV file")->capture_default_str();
  app.add_flag("--skip-reference", skip_reference, "time only the library quantizer");
  CLI11_PARSE(app, argc, argv);

  try {

    std::vector<MatrixF> tensor;
    for (int h = 0; h < heads; ++h) tensor.push_back(make_head(tokens, dim, std::uint64_t(h) + 1));
    const double elements = double(heads) * tokens * dim, bytes = elements * sizeof(float);
    const ThreadTiling tiling{atoms::mma_m16n8k64_s4, 4, 128, 64};
    const std::vector<Role> roles{
        {"K (smooth: mean of all tokens)", 0, presets::int4(grouping::per_thread(tiling, Operand::k))},
        {"Q (smooth: mean per 128-token block)", 128, presets::int4(grouping::per_thread(tiling, Operand::q))}};
    // The library quantizes into reused buffers (quantize_into, smooth_into); the plain reference
    // allocates its result per call.
    using Quantizer = void (*)(const MatrixF&, const QuantSpec&, QuantizedTensor&, std::string_view);
    const Quantizer reference = [](const MatrixF& x, const QuantSpec& spec, QuantizedTensor& out,
                                   std::string_view name) {
      out = quantize_reference(x, spec, name);
    };
    // Timed per head: smoothing and quantization. Wall time and this thread's CPU time (the
    // machine is shared, so wall time includes waiting for a core; CPU time does not).
    struct Timing {
      double wall = 0, cpu = 0;
    };
    const auto cpu_now = [] {
      timespec ts{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
    };
    const auto run = [&](const Role& role, Quantizer quantizer, std::vector<std::uint64_t>& prints) {
      prints.clear();
      Timing t;
      Smoothed<float> s;
      QuantizedTensor q;
      for (const MatrixF& head : tensor) {
        const auto wall_start = std::chrono::steady_clock::now();
        const double cpu_start = cpu_now();
        smooth_into(head, role.smooth_block, true, s);
        quantizer(s.residual, role.spec, q, "head");
        t.cpu += cpu_now() - cpu_start;
        t.wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
        prints.push_back(fingerprint(q));
      }
      return t;
    };
    const Provenance prov = Provenance::current();
    const auto best_isa = fastconv::best_available();
    const std::string isa = best_isa ? std::string(fastconv::to_string(*best_isa)) : "none (scalar)";
    struct Result {
      std::string role, implementation;
      Timing time;
      bool identical;
    };
    std::vector<Result> results;
    for (const Role& role : roles) {
      std::vector<std::uint64_t> fast_prints, reference_prints;
      Timing best{1e30, 1e30};
      for (int i = 0; i < repeats; ++i) {
        const Timing t = run(role, &quantize_into, fast_prints);
        best = {std::min(best.wall, t.wall), std::min(best.cpu, t.cpu)};
      }
      results.push_back({role.name, "library quantize_into()", best, true});
      if (!skip_reference) {
        const Timing t = run(role, reference, reference_prints);
        const bool identical = fast_prints == reference_prints;
        results.back().identical = identical;
        results.push_back({role.name, "plain reference", t, identical});
      }
    }

    std::cout << prov.comment_line() << "\n";
    std::cout << fmt::format("tensor {} x {} x {} float32 ({:.0f} MiB), INT4 per-thread (mma.m16n8k64.s4, 4 warps, "
                             "128x64), smoothing, 1 thread, fast encode: {}\n\n",
                             heads, tokens, dim, bytes / (1 << 20), isa);
    std::cout << "| role | implementation | CPU seconds | wall seconds | GB/s (input, CPU) | elements/s (CPU) | codes "
                 "identical to reference |\n";
    std::cout << "|---|---|---|---|---|---|---|\n";
    experiments::RunInfo run_info = experiments::RunInfo::from_args(argc, argv);
    run_info.machine = prov;
    run_info.formats = {{"element", "int4"}, {"grouping", "per-thread mma.m16n8k64.s4, 4 warps, 128x64"}};
    run_info.config = {{"heads", heads}, {"tokens", tokens}, {"dim", dim}, {"repeats", repeats}, {"fast_encode", isa}};
    const std::filesystem::path out_path(out);
    const experiments::ResultDirectory folder(out_path.parent_path().empty() ? "." : out_path.parent_path(), run_info,
                                              "bench_quantize");
    std::string csv = "role,implementation,cpu_seconds,wall_seconds,gb_per_s_cpu,elements_per_s_cpu,identical\n";
    for (const Result& r : results) {
      const std::string identical = skip_reference ? "not checked" : r.identical ? "yes" : "NO";
      std::cout << fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.2f} | {:.3g} | {} |\n", r.role, r.implementation,
                               r.time.cpu, r.time.wall, bytes / r.time.cpu / 1e9, elements / r.time.cpu, identical);
      csv += fmt::format("\"{}\",\"{}\",{:.4f},{:.4f},{:.3f},{:.4g},{}\n", r.role, r.implementation, r.time.cpu,
                         r.time.wall, bytes / r.time.cpu / 1e9, elements / r.time.cpu, identical);
    }
    for (std::size_t i = 0; i + 1 < results.size(); i += 2)
      if (results[i + 1].implementation == "plain reference")
        std::cout << fmt::format("\n{}: library is {:.1f}x the reference (CPU time)", results[i].role,
                                 results[i + 1].time.cpu / results[i].time.cpu);
    folder.csv(out_path.filename().string(), csv,
               {fmt::format("tensor {}x{}x{} float32, int4 per-thread, smoothing, 1 thread, fast encode {}", heads, tokens,
                            dim, isa)});
    folder.write_provenance();
    std::cout << "\nwrote " << out << "\n";
    for (const Result& r : results)
      if (!r.identical) return 1;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_quantize: error: " << e.what() << "\n";
    return 1;
  }
}
