// The sage2-4b kernel family on Hopper: pipelines built from the preset sage2-4b (and its SmoothAttn and
// Hadamard baselines) with --set overrides, run on the GPU so that every output code and LSE value
// equals attention::forward() of the same pipeline.
//
// Algorithm: the host quantizes with the emulator's own code (attention::prepare_operands: transforms,
// smoothing, Q/K/V quantizers, so any granularity the emulator has); the kernel
// (variant_kernel.cuh, sm_90a) runs the tiled pass: QK^T on mma.sync s4 or s8, the scores'
// dequantization and Q-smoothing correction, the softmax steps of kernel_steps.hpp, P in its format
// (at its static scale, or per block: divided by amax over the 128 x 64 tile / max finite, R times
// that scale), P V on mma.sync (e4m3, e5m2, s8, f16; fp32 or s32 out), two-level or in place; the
// output is rounded on the host as forward() rounds it.
//
// Contract: the GPU runs sm_90's arithmetic, so a pipeline runs here only with arch sm_90 (the
// Ada presets' Hopper twin: --set arch=sm_90). variant_unsupported() says why a pipeline cannot
// run (shapes aside); variant_forward() fills output, output_codes and lse as forward() does (and
// q, k, v with keep_operands; macs stays 0: nothing is emulated), throwing std::invalid_argument as
// forward() does, and for pipelines or shapes the family does not run (head dimension 64 or 128,
// the value dimension the same). Host-only header: no CUDA types.
#pragma once

#include <optional>
#include <string>

#include "emulation/attention/pipeline.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::kernels::attention {

// Why the family cannot run this pipeline, or nothing.
std::optional<std::string> variant_unsupported(const lowbit::attention::Pipeline& pipeline);

// Where a variant_forward call's time went (bench_variants).
struct VariantTiming {
  double total_ms = 0;   // the whole call: host quantization, copies, kernel, rounding
  double kernel_ms = 0;  // the kernel alone (CUDA events)
};

// The pipeline on the first GPU. Throws std::invalid_argument (as forward(), or the reason the family
// cannot run it), std::runtime_error when a CUDA call fails (no GPU included). With `timing`, fills it.
lowbit::attention::ForwardResult variant_forward(const lowbit::attention::Pipeline& pipeline, const Tensor4& q,
                                                 const Tensor4& k, const Tensor4& v,
                                                 const lowbit::attention::ForwardOptions& options = {},
                                                 VariantTiming* timing = nullptr);

}  // namespace lowbit::kernels::attention
