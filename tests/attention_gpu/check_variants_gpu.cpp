// check_variants_gpu: the sage2-4b kernel family (kernels/attention/variant_attention.hpp) on the GPU
// against the emulator, every bit.
//
// For each variant the experiments run on sage2-4b (sage2_4b_variants.hpp) whose Hopper twin
// (arch=sm_90) the family supports, on each input (synthetic with outliers, numerics/synthetic: d = 64
// and 128, causal and not, N = 1000 and 2100, GQA 4:2): variant_forward() against forward() of the
// twin, every output code and every LSE bit. Prints per variant the codes compared and those that
// differ, the LSE values that differ (and the first difference); lists the variants the family does
// not run, with the reason, as skipped. Exit 0: every supported variant equal; 1: any difference;
// 77: no GPU (after the list of skipped variants).
//   --configs all|quick   quick: N = 1000 only
//   --only TEXT           only variants whose name contains TEXT
//   --emulate-arch A      the emulated side's arch (default sm_90: the twin itself); sm_89 (the Ada
//                         presets' models) is a negative control: FP8 and FP16 P V then differ
//   --seed S|fresh        the inputs' seeds are S, S + 1, ... (default 11, the recorded inputs);
//                         fresh: S drawn from std::random_device and printed (inputs nobody has seen)
#include <bit>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "kernels/attention/variant_attention.hpp"
#include "kernels/device.hpp"
#include "numerics/synthetic.hpp"
#include "tests/attention_gpu/sage2_4b_variants.hpp"

namespace {

using namespace lowbit;

struct Input {
  std::string name;
  bool causal;
  Tensor4 q, k, v;
};

// Synthetic heads with outliers (larger scores, rarer and bigger outlier tokens: saturating P, deep
// exp2 ranges), 4 Q heads on 2 KV heads.
Input make_input(int d, int tokens, bool causal, std::uint64_t seed) {
  SyntheticAttentionSpec spec;
  spec.heads = 4;
  spec.tokens = tokens;
  spec.dim = d;
  spec.seed = seed;
  spec.outlier_bias = 40;
  spec.outlier_token_scale = 30;
  spec.outlier_token_fraction = 0.01;
  spec.q_gain = 3;
  const AttentionData data = make_synthetic_attention(spec);
  const auto first_two = [](const std::vector<MatrixF>& heads) { return std::vector<MatrixF>(heads.begin(), heads.begin() + 2); };
  return {fmt::format("d{} N{} {} GQA 4:2", d, tokens, causal ? "causal" : "full"), causal, Tensor4::from_heads(data.q),
          Tensor4::from_heads(first_two(data.k)), Tensor4::from_heads(first_two(data.v))};
}

struct Tally {
  std::uint64_t codes = 0, codes_differ = 0, lse = 0, lse_differ = 0;
  std::string first;  // the first difference
};

void compare(const attention::ForwardResult& gpu, const attention::ForwardResult& emu, const std::string& input, Tally& t) {
  const int dv = emu.value_dim;
  for (std::size_t i = 0; i < emu.output_codes.size(); ++i) {
    ++t.codes;
    if (gpu.output_codes[i] == emu.output_codes[i]) continue;
    if (t.codes_differ++ == 0 && t.first.empty())
      t.first = fmt::format("{}: output [head {}, token {}, channel {}]: GPU {:#x} ({}), emulated {:#x} ({})", input,
                            i / std::size_t(dv) / std::size_t(emu.tokens), i / std::size_t(dv) % std::size_t(emu.tokens),
                            i % std::size_t(dv), gpu.output_codes[i], gpu.output[i], emu.output_codes[i], emu.output[i]);
  }
  for (std::size_t i = 0; i < emu.lse.size(); ++i) {
    ++t.lse;
    if (std::bit_cast<std::uint32_t>(gpu.lse[i]) == std::bit_cast<std::uint32_t>(emu.lse[i])) continue;
    if (t.lse_differ++ == 0 && t.first.empty())
      t.first = fmt::format("{}: LSE [head {}, token {}]: GPU {:a}, emulated {:a}", input, i / std::size_t(emu.tokens),
                            i % std::size_t(emu.tokens), gpu.lse[i], emu.lse[i]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string configs = "all", only, emulate_arch = "sm_90", seed_text = "11";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--configs" && i + 1 < argc) configs = argv[++i];
    else if (a == "--only" && i + 1 < argc) only = argv[++i];
    else if (a == "--emulate-arch" && i + 1 < argc) emulate_arch = argv[++i];
    else if (a == "--seed" && i + 1 < argc) seed_text = argv[++i];
    else {
      std::cerr << "usage: check_variants_gpu [--configs all|quick] [--only TEXT] [--emulate-arch ARCH] [--seed S|fresh]\n";
      return 2;
    }
  }
  if (configs != "all" && configs != "quick") {
    std::cerr << "check_variants_gpu: --configs " << configs << ": all or quick\n";
    return 2;
  }
  std::uint64_t seed = 0;
  if (seed_text == "fresh") {
    std::random_device device;
    seed = (std::uint64_t(device()) << 32 | device()) >> 12;  // printed below: the run can be repeated
  } else {
    const char* end = seed_text.data() + seed_text.size();
    if (std::from_chars(seed_text.data(), end, seed).ptr != end || seed_text.empty()) {
      std::cerr << "check_variants_gpu: --seed " << seed_text << ": a whole number or 'fresh'\n";
      return 2;
    }
  }
  std::vector<tests::VariantSpec> run;
  std::cout << "Variants the family does not run (skipped):\n";
  for (const tests::VariantSpec& v : tests::sage2_4b_experiment_variants()) {
    if (!only.empty() && v.name.find(only) == std::string::npos) continue;
    const attention::Pipeline twin = tests::variant_pipeline(v, 128, true);
    if (auto why = kernels::attention::variant_unsupported(twin)) std::cout << "  SKIPPED " << v.name << ": " << *why << "\n";
    else run.push_back(v);
  }
  const auto gpu = kernels::first_gpu();
  if (!gpu) {
    std::cout << "check_variants_gpu: no GPU found (or no CUDA driver); skipped\n";
    return 77;
  }
  std::cout << "GPU: " << gpu->name << " (" << gpu->arch << "), driver " << gpu->driver << "\n";

  std::cout << "inputs: seeds " << seed << " .. " << seed + (configs == "all" ? 3 : 1) << "\n";
  std::vector<Input> inputs;
  inputs.push_back(make_input(64, 1000, true, seed));
  inputs.push_back(make_input(128, 1000, false, seed + 1));
  if (configs == "all") {
    inputs.push_back(make_input(128, 2100, true, seed + 2));
    inputs.push_back(make_input(64, 2100, false, seed + 3));
  }
  bool any_differ = false;
  if (emulate_arch != "sm_90") std::cout << "emulated with arch=" << emulate_arch << " (not the twin)\n";
  std::cout << fmt::format("{:<58} {:>12} {:>12} {:>9} {:>10}\n", "variant (Hopper twin)", "codes", "codes differ",
                           "LSE", "LSE differ");
  for (const tests::VariantSpec& v : run) {
    Tally t;
    for (const Input& in : inputs) {
      const attention::Pipeline twin = tests::variant_pipeline(v, in.q.dim, true);
      attention::ForwardOptions options;
      options.causal = in.causal;
      options.keep_operands = false;
      attention::Pipeline emulated = twin;
      if (auto why = attention::set_stage(emulated, "arch=" + emulate_arch)) throw std::invalid_argument(*why);
      const attention::ForwardResult emu = attention::forward(emulated, in.q, in.k, in.v, options);
      const attention::ForwardResult got = kernels::attention::variant_forward(twin, in.q, in.k, in.v, options);
      compare(got, emu, in.name, t);
    }
    any_differ = any_differ || t.codes_differ || t.lse_differ;
    std::cout << fmt::format("{:<58} {:>12} {:>12} {:>9} {:>10}\n", v.name, t.codes, t.codes_differ, t.lse, t.lse_differ);
    if (!t.first.empty()) std::cout << "    first difference: " << t.first << "\n";
    std::cout.flush();
  }
  std::cout << (any_differ ? "FAILED: some output codes or LSE values differ\n"
                           : fmt::format("all {} variants equal on every output code and LSE bit\n", run.size()));
  return any_differ ? 1 : 0;
}
