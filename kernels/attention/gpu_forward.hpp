// The GPU's forward pass for an emulated attention pipeline, where a kernel of kernels/attention/
// computes that pipeline bit for bit. Host code only; callers need no CUDA headers.
//
// Contract: when gpu_unsupported(p, q, k, v, o) is nothing, gpu_forward(p, q, k, v, o) runs a kernel
// whose output codes and LSE equal, every bit, those of attention::forward(p, q, k, v, o)
// (emulation/attention/pipeline.hpp) on the same inputs; otherwise it says why none does, and
// gpu_forward throws std::invalid_argument with that reason. The decision is made from the pipeline
// as data: a kernel family matches when every stage of p (attention::stage_values; the name and
// `follows` are not stages) equals a pipeline the family computes, and the inputs, shapes and
// options are ones its kernel takes.
//
// The kernel families, tried in order (kernel_families() in gpu_forward.cpp, one entry each):
//   sage2-8b  SageAttention2-8b on Hopper (sage2_attention.hpp): the presets sage2-8b (the
//             contract's exp2 polynomial) and sage2-8b-ex2 (MUFU.EX2), each with the output (and the
//             kernel's input) in fp16 or bf16 (attention::follow_inputs); and the preset of
//             kInPlaceSmoothVExp2 with kInPlaceSmoothVDtype output (sage2-8b, fp16) with
//             accumulation=in-place, smooth-v=on or both, every other stage the preset's (smooth V
//             runs on the emulator's operands, attention::prepare_operands: the GPU's quantization
//             does not smooth V; the others on the GPU's quantization); Q, K, V values of that
//             format, one head dimension for Q, K, V, whole Q heads per KV head,
//             Sage2Problem::validate (d = 64 or 128), the whole KV range, no descales or given K
//             means; at most as many Q as K tokens: fewer queries run as the first rows of a
//             problem of N = K's tokens, the rest zero rows (rows are independent but for Q's
//             per-thread scale groups within a block of queries, whose amax zero rows leave as
//             the emulation's zero padding does; a causal mask is top-left in both).
//
// gpu_forward fills the ForwardResult's shape, output_format, output_codes, lse and output (the
// codes' values: the kernel keeps no output before rounding); it keeps no quantized operands
// (a family's buffers are in its kernel's layout), so keep_operands is refused, and macs is 0
// (nothing is emulated). Errors of the GPU (none present, not sm_90) are the kernel's exceptions.
#pragma once

#include <optional>
#include <string>

#include "emulation/attention/pipeline.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::kernels::attention {

// Why no kernel computes pipeline p on these inputs bit for bit (each family's reason, in the
// order tried), or nothing.
std::optional<std::string> gpu_unsupported(const lowbit::attention::Pipeline& p, const Tensor4& q, const Tensor4& k,
                                           const Tensor4& v, const lowbit::attention::ForwardOptions& o);

// The kernel's result, as attention::forward fills it (above). Throws std::invalid_argument with
// gpu_unsupported's reason when no kernel computes p.
lowbit::attention::ForwardResult gpu_forward(const lowbit::attention::Pipeline& p, const Tensor4& q, const Tensor4& k,
                                             const Tensor4& v, const lowbit::attention::ForwardOptions& o);

}  // namespace lowbit::kernels::attention
