// The inputs on which test_sage_bwd_gpu and check_sage_bwd_gpu compare SageBwd's kernels
// (kernels/attention/sage_bwd_gpu.hpp) with the emulated Hopper twin, and the report of a
// comparison that localizes a difference: per tensor (O, LSE, dQ, dK, dV) how many values differ
// and the first with both bit patterns, then L's stand-in and D (the forward kernel's hand-over):
// D = rowsum(dO O) recomputed from the emulated O, so that a D that differs while O is equal points
// at the D step, and a dQ/dK/dV difference under equal O, LSE and D at the backward kernels.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/attention/backward.hpp"
#include "kernels/attention/sage_bwd_gpu.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::tests {

struct SageBwdCase {
  std::string preset;
  int dim = 64, queries = 0, keys = 0, heads = 4, kv_heads = 2;
  bool causal = false;

  std::string name() const {
    return fmt::format("{} d{} {}x{} {} GQA {}:{}", preset, dim, queries, keys, causal ? "causal" : "full", heads, kv_heads);
  }
};

// Every preset, d = 64 and 128, causal and not, on token counts with tail tiles: as many queries as
// keys, fewer, and more; GQA 4:2, and 3:1 once.
inline std::vector<SageBwdCase> sage_bwd_cases() {
  std::vector<SageBwdCase> cases;
  for (const std::string& preset : lowbit::attention::sagebwd_presets())
    for (int dim : {64, 128})
      for (bool causal : {false, true}) {
        cases.push_back({preset, dim, 200, 200, 4, 2, causal});
        cases.push_back({preset, dim, 77, 190, 4, 2, causal});
        cases.push_back({preset, dim, 150, 64, 3, 1, causal});
      }
  return cases;
}

struct SageBwdInputs {
  Tensor4 q, k, v, d_out;
};

// Gaussian Q, K, V and dO rounded to fp16 (the experiment's inputs are), Q and K with a few large
// channels and K with an offset (outliers that stretch the INT8 scales), seeded.
inline SageBwdInputs make_sage_bwd_inputs(const SageBwdCase& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const auto fill = [&](int heads, int tokens, double scale, bool outliers, double offset) {
    Tensor4 t(1, heads, tokens, c.dim);
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      const bool wide = outliers && i % std::size_t(c.dim) % 29 == 3;
      t.values[i] = float(_Float16(offset + scale * (wide ? 8.0 : 1.0) * normal(rng)));
    }
    return t;
  };
  SageBwdInputs in;
  in.q = fill(c.heads, c.queries, 1.5, true, 0.0);
  in.k = fill(c.kv_heads, c.keys, 1.0, true, 0.5);
  in.v = fill(c.kv_heads, c.keys, 1.0, false, 0.0);
  in.d_out = fill(c.heads, c.queries, 1.0, false, 0.0);
  return in;
}

struct SageBwdVerdict {
  bool equal = true;
  std::string report;  // a line per tensor, then D's
};

// gpu against emulated (the twin's sage_bwd), and the GPU's D against D recomputed from the emulated O.
inline SageBwdVerdict judge_sage_bwd(const lowbit::attention::BackwardResult& gpu,
                                     const lowbit::attention::BackwardResult& emulated,
                                     const lowbit::kernels::attention::SageBwdDiagnostics& diagnostics,
                                     const Tensor4& d_out) {
  SageBwdVerdict v;
  for (const auto& c : lowbit::attention::compare_bits(gpu, emulated)) {
    v.equal = v.equal && c.differ == 0;
    v.report += "  " + c.text("gpu", "emulated") + "\n";
  }
  const std::size_t rows = std::size_t(d_out.batch) * std::size_t(d_out.heads) * std::size_t(d_out.tokens);
  std::uint64_t d_differ = 0;
  std::int64_t first = -1;
  for (std::size_t r = 0; r < rows && r < diagnostics.delta.size(); ++r) {
    float sum = 0.0f;
    for (int c = 0; c < d_out.dim; ++c)
      sum = std::fma(d_out.values[r * std::size_t(d_out.dim) + std::size_t(c)],
                     emulated.output[r * std::size_t(d_out.dim) + std::size_t(c)], sum);
    if (std::bit_cast<std::uint32_t>(sum) != std::bit_cast<std::uint32_t>(diagnostics.delta[r]) && d_differ++ == 0)
      first = std::int64_t(r);
  }
  v.report += fmt::format("  D = rowsum(dO O) of the emulated O: {} of {} rows differ{}\n", d_differ, rows,
                          first < 0 ? std::string() : fmt::format(", the first at row {}", first));
  return v;
}

}  // namespace lowbit::tests
