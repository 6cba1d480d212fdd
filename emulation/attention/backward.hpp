// SageBwd (SageAttention3 §4, Algorithms 2 and 3): an 8-bit attention for training, forward and
// backward, as a record of choices, one per matrix product, so that the paper's ablation (dO V^T in
// FP16 or INT8, Table 1c) and an all-FP16 baseline are each a change of one field.
//
// Tiles of block_q queries and block_kv keys, FlashAttention-2's order. Every product's operands
// are either INT8 with one scale per tile (s = amax / 127, round to nearest even; P in the forward
// pass one scale per row of its tile, s_P = rowmax / 127, Algorithm 2 line 9) whose exact integer
// sum is dequantized once, float(sum) * (s_a * s_b), or FP16 (cast, round to nearest even) through
// the f16 mma.sync with fp32 accumulators (the instruction's model, emulation/mma). All else fp32.
//   Forward, per Q tile i, KV tile j:  S = Q_i K_j^T / sqrt(d) (log2 units), online softmax with
//     exp2 correctly rounded, O = alpha O + (P V_j) (P's row scales times V's), O / l, L = m + log2 l.
//   Backward, per KV tile j, Q tile i (i after j, both ascending): S as forward, P = exp2(S - L_i),
//     dV_j += P^T dO_i,  dP = dO_i V_j^T,  dS = P (dP - D_i) with D_i = rowsum(dO_i O_i),
//     dQ_i += dS K_j / sqrt(d),  dK_j += dS^T Q_i / sqrt(d)
// The fp32 sums over tiles are added in that order (a kernel's atomics may add dQ in any order).
// Assumed where the paper does not say: 64 x 64 tiles, the per-tile INT8 scales of the backward
// products as of its forward ones ("per block"), exp2 correctly rounded (Triton's exp2 is not
// modeled), the sm_89 f16 instruction (SageBwd runs on an RTX 4090).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emulation/format.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::attention {

enum class BackwardOperands : std::uint8_t {
  int8_per_block,  // INT8, one scale per tile (P in the forward pass: per row), exact integer sums
  fp16,            // FP16 cast, the f16 mma.sync with fp32 accumulators
};

struct SageBwdConfig {
  std::string name = "sagebwd";
  int block_q = 64, block_kv = 64;
  std::string arch = "sm_89";
  BackwardOperands qk = BackwardOperands::int8_per_block;  // S = Q K^T (forward and backward)
  BackwardOperands pv = BackwardOperands::int8_per_block;  // O += P V
  BackwardOperands dv = BackwardOperands::int8_per_block;  // dV += P^T dO
  BackwardOperands dp = BackwardOperands::fp16;            // dP = dO V^T: FP16 in SageBwd
  BackwardOperands dq = BackwardOperands::int8_per_block;  // dQ += dS K
  BackwardOperands dk = BackwardOperands::int8_per_block;  // dK += dS^T Q

  std::optional<std::string> validate() const;
};

// sagebwd (the paper's), sagebwd-int8-dp (dO V^T in INT8, Table 1c's other row), fp16 (every
// product FP16: FlashAttention-2 with fp16 operands).
SageBwdConfig sagebwd_preset(const std::string& name);
std::vector<std::string> sagebwd_presets();

struct BackwardResult {
  std::vector<float> output;  // [batch, heads, tokens, value_dim]
  std::vector<float> lse;     // natural log, [batch, heads, tokens]
  std::vector<float> dq;      // [batch, heads, tokens, dim]
  std::vector<float> dk, dv;  // [batch, kv_heads, keys, dim]
};

// Two results of the same shapes, every fp32 bit, tensor by tensor (O, LSE, dQ, dK, dV in that
// order): how many values, how many differ, and the first that does (its flat index, both bit
// patterns). Throws std::invalid_argument naming the tensor whose sizes differ.
struct BackwardBitComparison {
  std::string tensor;
  std::uint64_t compared = 0, differ = 0;
  std::int64_t first = -1;  // flat index of the first difference; -1: none
  std::uint32_t first_a = 0, first_b = 0;

  // "dQ: 3 of 51200 differ, the first at 1021: 0x3f800000 vs 0x3f800001" or "dQ: 51200 equal".
  std::string text(std::string_view a_name = "a", std::string_view b_name = "b") const;
};
std::vector<BackwardBitComparison> compare_bits(const BackwardResult& a, const BackwardResult& b);

// Throws std::invalid_argument for shapes that do not fit (dO: Q's batch, heads, tokens and V's
// dim), non-finite inputs and a config that does not validate.
BackwardResult sage_bwd(const SageBwdConfig& config, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                        const Tensor4& d_out, bool causal, unsigned threads = 0);

}  // namespace lowbit::attention
