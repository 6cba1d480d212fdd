// SageBwd's kernels' launch as plain host data (no CUDA types, no fmt: nvcc compiles this header):
// sage_bwd_gpu.cpp checks the inputs and fills it; sage_bwd_kernel.cu copies the tensors to the
// GPU, runs the three kernels and copies the results back.
#pragma once

#include <cstdint>
#include <vector>

#include "emulation/attention/exact_rounding.hpp"

namespace lowbit::kernels::attention {

struct SageBwdLaunch {
  // Whether each product is FP16 (else INT8 per block): S = Q K^T, O += P V, dV += P^T dO,
  // dP = dO V^T, dQ += dS K, dK += dS^T Q.
  bool qk_fp16 = false, pv_fp16 = false, dv_fp16 = false, dp_fp16 = false, dq_fp16 = false, dk_fp16 = false;
  bool causal = false;
  float scale_log2 = 0;  // steps::softmax_scale_log2(dim)
  float inv_sqrt_d = 0;  // float(1 / sqrt(double(dim)))
  int batch = 0, heads = 0, kv_heads = 0, tokens = 0, keys = 0, dim = 0, value_dim = 0;
  // Row-major [batch, heads or kv_heads, tokens or keys, dim or value_dim].
  const std::vector<float>*q = nullptr, *k = nullptr, *v = nullptr, *d_out = nullptr;
};

struct SageBwdOutputs {
  std::vector<float> output, lse, lse_log2, delta, dq, dk, dv;
  float kernel_milliseconds = 0;  // the three kernels, between CUDA events
};

// Throws check_cuda's std::runtime_error for the GPU's errors.
SageBwdOutputs launch_sage_bwd(const SageBwdLaunch& launch);
// The device's exp2_exact or log2_exact (exact_exp2.cuh) of first, first + 1, ... into out.
void launch_exact_function(lowbit::attention::ExactFunction f, std::uint32_t first, std::vector<std::uint32_t>& out);

}  // namespace lowbit::kernels::attention
