// The emulator's quantized operands of a sage2-8b pass laid out as the attention kernel's quantized
// buffers (sage2_attention.hpp): the one translation that the checks of the GPU's quantization
// (verification/sage2_emulated.cpp) and the runs on the host's quantization (gpu_forward.cpp: smooth
// V, which the GPU's quantization does not compute) both need. Host code only.
//
// Layout only, every number the emulator's, but two the kernels' quantization forms the same way:
// Q's group scales take the softmax scale (steps::fold_softmax_scale), and the LSE bias of Q's
// padding rows is that of a zero row (steps::smoothing_bias). V^T's keys run in the order of P's A
// fragment within every 32 (kernels/sm90/fragment.hpp); padding keys hold zero codes.
#pragma once

#include <span>
#include <vector>

#include "emulation/attention/forward_operands.hpp"
#include "emulation/attention/pipeline.hpp"
#include "kernels/attention/sage2_attention.hpp"

namespace lowbit::kernels::attention {

// One pass's operands as the emulator holds them (attention::forward's with keep_operands, or
// attention::prepare_operands').
struct Sage2EmulatedOperands {
  // Per Q head, batch-major: Q quantized (padded_q x head_dim codes, the recipe's groups), and the
  // LSE bias of its real rows (tokens values).
  std::vector<const lowbit::attention::QuantizedHead*> q;
  std::vector<std::span<const float>> q_bias;
  // Per KV head, batch-major: K' quantized with K's mean; V quantized (minus its mean, with the mean,
  // when the problem smooths V).
  std::vector<const lowbit::attention::QuantizedHead*> k, v;
};

// The buffers of QuantizedSizes::of(problem). Throws std::logic_error when an operand is not shaped
// as the problem's recipe lays it out (head counts, padded rows, groups, V's mean present exactly
// with smooth_v).
Sage2HostQuantized lay_out_operands(const Sage2Problem& problem, const Sage2EmulatedOperands& operands);
// attention::prepare_operands' (Q of problem.tokens rows, whole KV range).
Sage2HostQuantized lay_out_operands(const Sage2Problem& problem, const lowbit::attention::PreparedOperands& prepared);

}  // namespace lowbit::kernels::attention
