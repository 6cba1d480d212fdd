// SageBwd (emulation/attention/backward.hpp) on the GPU, bit for bit. Host code only; callers need
// no CUDA headers.
//
// Contract: when gpu_sage_bwd_unsupported(c, q, k, v, d_out) is nothing, gpu_sage_bwd(c, q, k, v,
// d_out, causal) runs kernels (sage_bwd_kernel.cu) whose O, LSE, dQ, dK and dV equal, every fp32
// bit, those of attention::sage_bwd(c, q, k, v, d_out, causal); otherwise it says why not, and
// gpu_sage_bwd throws std::invalid_argument with that reason. The kernels run the emulator's steps
// in its order: a forward pass per Q tile (O, L, and D = rowsum(dO O)), dK and dV per KV tile (the
// group's Q heads ascending, Q tiles ascending), dQ per Q tile (KV tiles ascending), each
// recomputing S, P, dP and dS; no atomics. INT8 products through mma.sync s8 (exact sums), FP16
// ones through the f16 mma.sync with one accumulator over K (kernels/attention/exact_exp2.cuh has
// the correctly rounded exp2 and log2).
//
// The GPU's f16 mma.sync is sm_90's model: a config with an FP16 product computes its Hopper twin
// (sage_bwd_hopper_twin: arch sm_90), and one of another arch is refused; an all-INT8 config is
// computed whatever its arch names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emulation/attention/backward.hpp"
#include "emulation/attention/exact_rounding.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::kernels::attention {

// The config the GPU computes for c: c at arch sm_90 where a product is FP16, else c.
lowbit::attention::SageBwdConfig sage_bwd_hopper_twin(const lowbit::attention::SageBwdConfig& c);

// Why the kernels do not compute sage_bwd(c, ...) on these shapes bit for bit, or nothing: 64 x 64
// tiles, d and dV of 64 or 128, an FP16 product's arch sm_90, the shapes sage_bwd takes.
std::optional<std::string> gpu_sage_bwd_unsupported(const lowbit::attention::SageBwdConfig& c, const Tensor4& q,
                                                    const Tensor4& k, const Tensor4& v, const Tensor4& d_out);

// For a test that localizes a difference: what the forward kernel hands to the backward ones, L
// (the row's log-sum-exp in log2 units, m + log2_exact(l)) and D = rowsum(dO O) (fma_rn over the
// columns ascending), each [batch, heads, tokens]; and the three kernels' time (CUDA events).
struct SageBwdDiagnostics {
  std::vector<float> lse_log2, delta;
  float kernel_milliseconds = 0;
};

// Throws std::invalid_argument with the reason above, or for non-finite inputs (as sage_bwd does);
// the GPU's errors as check_cuda's std::runtime_error.
lowbit::attention::BackwardResult gpu_sage_bwd(const lowbit::attention::SageBwdConfig& c, const Tensor4& q,
                                               const Tensor4& k, const Tensor4& v, const Tensor4& d_out, bool causal,
                                               SageBwdDiagnostics* diagnostics = nullptr);

// The kernels' exp2_exact or log2_exact of the inputs first, first + 1, ... (float32 bit patterns,
// out.size() of them, wrapping modulo 2^32) on the GPU, as bit patterns: the exhaustive check's
// device side.
void device_exact_function(lowbit::attention::ExactFunction f, std::uint32_t first, std::vector<std::uint32_t>& out);

}  // namespace lowbit::kernels::attention
