// bench_variants: the sage2-4b kernel family's time per head at long sequences (issue 36: a variant
// must run a 32K-token head in well under a second). For each pipeline (a preset with --set
// overrides, as its Hopper twin: arch=sm_90), head dimension, causal mode and length: one head of
// synthetic Q, K, V (numerics/synthetic, the default preset, seeded per configuration), then
// variant_forward() timed --repeats times after one untimed run:
//   total   the whole call, as `lowbit run --device gpu` pays it: the host's quantization with the
//           emulator's code, the copies, the kernel, the output's rounding (steady clock)
//   kernel  the kernel alone (CUDA events around its launch)
// Medians. Prints a table; writes a CSV (--csv) with the GPU, the git SHA and every measurement.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "emulation/attention/pipeline.hpp"
#include "kernels/attention/variant_attention.hpp"
#include "kernels/device.hpp"
#include "numerics/provenance.hpp"
#include "numerics/synthetic.hpp"

using namespace lowbit;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_variants: the sage2-4b kernel family's time per head at long sequences (kernel and whole call)"};
  std::vector<std::string> presets{"sage2-4b"}, sets;
  std::vector<int> tokens{8192, 32768}, dims{64, 128};
  std::vector<std::string> causal_modes{"no", "yes"};
  int repeats = 3;
  std::string csv = "build/results/bench_variants.csv";
  app.add_option("--preset", presets, "Pipelines (presets the family runs: sage2-4b, smoothattn, hadamard)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--set", sets, "Stage overrides for every preset, as `lowbit attention --set` (arch=sm_90 is added)");
  app.add_option("--tokens", tokens, "Sequence lengths (queries = keys)")->delimiter(',')->check(CLI::Range(128, 1 << 17))->capture_default_str();
  app.add_option("--dims", dims, "Head dimensions (64, 128)")->delimiter(',')->check(CLI::IsMember({64, 128}))->capture_default_str();
  app.add_option("--causal", causal_modes, "no, yes or both")->delimiter(',')->check(CLI::IsMember({"no", "yes"}))->capture_default_str();
  app.add_option("--repeats", repeats, "Timed runs after one untimed run (the median is reported)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("--csv", csv, "Write the measurements here")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  struct Entry {
    std::string name;
    int d;
    attention::Pipeline pipeline;
  };
  std::vector<Entry> pipelines;
  for (const std::string& name : presets)
    for (int d : dims) {
      attention::Pipeline p;
      try {
        p = attention::preset(name, d);
      } catch (const std::exception& e) {
        fmt::print(stderr, "bench_variants: --preset {}: {}\n", name, e.what());
        return 2;
      }
      std::vector<std::string> all = sets;
      all.push_back("arch=sm_90");
      for (const std::string& s : all)
        if (auto why = attention::set_stage(p, s)) {
          fmt::print(stderr, "bench_variants: --set {}: {}\n", s, *why);
          return 2;
        }
      if (auto why = kernels::attention::variant_unsupported(p)) {
        fmt::print(stderr, "bench_variants: {} is not a pipeline the family runs: {}\n", name, *why);
        return 2;
      }
      pipelines.push_back({name, d, p});
    }
  const auto gpu = kernels::first_gpu();
  if (!gpu) {
    fmt::print(stderr, "bench_variants: no GPU found (or no CUDA driver); skipped\n");
    return 77;
  }
  if (const auto dir = std::filesystem::path(csv).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
  std::ofstream out(csv);
  if (!out) {
    fmt::print(stderr, "bench_variants: cannot write {}\n", csv);
    return 2;
  }
  const Provenance prov = Provenance::current();
  out << fmt::format("# git={} gpu=\"{}\" driver={} method=\"median of {} runs after 1 untimed\"\n", prov.git_sha, gpu->name,
                     gpu->driver, repeats);
  out << "pipeline,sets,d,causal,tokens,total_ms,kernel_ms\n";
  fmt::print("GPU: {} ({}), driver {}\n", gpu->name, gpu->arch, gpu->driver);
  fmt::print("{:<12} {:>4} {:>6} {:>7} {:>10} {:>10}\n", "pipeline", "d", "causal", "tokens", "total ms", "kernel ms");
  try {
    for (const auto& [name, d, pipeline] : pipelines)
      for (const std::string& mode : causal_modes)
        for (int n : tokens) {
          SyntheticAttentionSpec spec;
          spec.heads = 1;
          spec.tokens = n;
          spec.dim = d;
          spec.seed = std::uint64_t(1000003) * std::uint64_t(n) + std::uint64_t(d) * 2 + (mode == "yes");
          const AttentionData data = make_synthetic_attention(spec);
          const Tensor4 q = Tensor4::from_heads(data.q), k = Tensor4::from_heads(data.k), v = Tensor4::from_heads(data.v);
          attention::ForwardOptions options;
          options.causal = mode == "yes";
          std::vector<double> total, kernel;
          for (int r = 0; r <= repeats; ++r) {
            kernels::attention::VariantTiming t;
            kernels::attention::variant_forward(pipeline, q, k, v, options, &t);
            if (r == 0) continue;
            total.push_back(t.total_ms);
            kernel.push_back(t.kernel_ms);
          }
          const double total_ms = median(total), kernel_ms = median(kernel);
          fmt::print("{:<12} {:>4} {:>6} {:>7} {:>10.1f} {:>10.2f}\n", name, d, mode, n, total_ms, kernel_ms);
          std::fflush(stdout);
          std::string set_text;
          for (const auto& s : sets) set_text += (set_text.empty() ? "" : " ") + s;
          out << fmt::format("{},\"{}\",{},{},{},{:.3f},{:.4f}\n", name, set_text, d, mode, n, total_ms, kernel_ms);
        }
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_variants: {}\n", e.what());
    return 1;
  }
  fmt::print("wrote {}\n", csv);
  return 0;
}
