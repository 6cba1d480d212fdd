// SageAttention2-8b as the Hopper kernel (kernels/) runs it and the `sage2-8b` pipeline
// (emulation/attention/) emulates it: the one record both read, so a block size, a thread
// group or a summation order cannot differ between them.
//
// Per (batch, KV head), from fp16/bf16 [batch, heads, tokens, head_dim]:
//   K smoothing: kbar[c] = float(sum / tokens), the sum in double over chunks of
//     key_mean_chunk tokens (each chunk summed in token order, the chunk sums added in chunk
//     order); K' = float(K) - kbar (one fp32 subtraction).
//   Q, K': per-thread INT8 (scale = amax / 127 in fp32, code = RNE of x / scale, saturating),
//     groups derived from the wgmma s8 accumulator fragment for qk_tiling() (quant/thread_groups.hpp).
//     Q's scale then takes the softmax scale: steps::fold_softmax_scale(s_q, softmax_scale_log2(d)).
//   V: per-channel FP8 E4M3 over all tokens (scale = amax / 448, code = RNE satfinite of v / scale).
// Per (batch, Q head, block of block_q queries), KV blocks of block_kv keys in kv_order, blocks
// whose keys are all masked skipped: S = wgmma s8 (s32, exact), then kernel_steps.hpp steps 1-9
// (sage2-8b-ex2: steps 1 and 5 fused, as SageAttention2's kernel computes them) with P·V through
// wgmma.m64nNk32.f32.e4m3.e4m3 (N = head_dim) chained over the block from +0.
// The LSE puts back the row bias K smoothing removed (steps::smoothing_bias of the row and kbar).
// GQA: Q head h reads KV head h / (heads_q / heads_kv). Causal: key j is visible to query i when
// j <= i (top-left, as PyTorch's is_causal). Tokens past N: zero codes, masked keys.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/quant/thread_groups.hpp"

namespace lowbit::attention {

enum class KvOrder : std::uint8_t { ascending, descending };

struct Sage2HopperRecipe {
  int head_dim = 128;
  int block_q = 128;         // queries per Q block (the tile of Q's per-thread groups and scales)
  int block_kv = 128;        // keys per KV block (the P·V K loop: block_kv / 32 wgmma k32 steps)
  int consumer_warps = 8;    // warps over a Q block's rows in Q K^T: one warpgroup per 64 query rows
                             // (the attention kernel runs each such unit as one warpgroup)
  KvOrder kv_order = KvOrder::ascending;
  int key_mean_chunk = 128;  // tokens per double partial sum of the K mean
  steps::Exp2 exp2;          // the exponential the kernel runs: the polynomial, or MUFU.EX2 (sage2-8b-ex2)
  steps::ExpArgument exp_argument = steps::ExpArgument::rounded_score;  // steps 1 and 5: two roundings, or
                                                                        // one fma (sage2-8b-ex2)
  float p_log2_scale = steps::kLog2Of448;

  // The tiling the per-thread INT8 groups of Q and K are derived from.
  LOWBIT_HD constexpr quant::ThreadTiling qk_tiling() const {
    return quant::ThreadTiling{mma::atoms::wgmma_m64nNk32_s32_s8_s8(block_kv), consumer_warps, block_q, block_kv};
  }

  // Why this recipe cannot be run, or nothing.
  std::optional<std::string> validate() const {
    if (head_dim != 64 && head_dim != 128)
      return "head_dim=" + std::to_string(head_dim) + ": the sage2-8b recipe has head dimensions 64 and 128";
    if (auto why = qk_tiling().validate()) return "thread tiling: " + *why;
    if (block_kv % 32 != 0) return "block_kv=" + std::to_string(block_kv) + ": P·V runs k32 steps";
    if (key_mean_chunk < 1) return "key_mean_chunk=" + std::to_string(key_mean_chunk) + " must be >= 1";
    if (exp2.unit == steps::Exp2Unit::polynomial && (exp2.poly.degree < 1 || exp2.poly.degree > steps::kMaxExp2Degree))
      return "exp2 degree " + std::to_string(exp2.poly.degree) + " outside 1.." + std::to_string(steps::kMaxExp2Degree);
    return std::nullopt;
  }
};

// ---- K smoothing, as the recipe sums it (host and device) ---------------------------------------
// chunk_sum = ((0 + k_0) + k_1) + ... over the chunk's tokens in order, in double;
// total = ((0 + chunk_sum_0) + chunk_sum_1) + ... in chunk order; kbar = float(total / tokens);
// K' = float(K) - kbar. (Every float is exact in double; only the sums and the quotient round.)
LOWBIT_HD inline double add_key(double sum, float k) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(sum, double(k));
#else
  volatile double r = sum + double(k);
  return r;
#endif
}
LOWBIT_HD inline double add_chunk_sum(double total, double chunk_sum) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(total, chunk_sum);
#else
  volatile double r = total + chunk_sum;
  return r;
#endif
}
LOWBIT_HD inline float key_mean(double total, int tokens) {
#if defined(__CUDA_ARCH__)
  return __double2float_rn(__ddiv_rn(total, double(tokens)));
#else
  volatile double quotient = total / double(tokens);
  return float(quotient);
#endif
}
LOWBIT_HD inline float smooth_key(float k, float mean) { return steps::sub_rn(k, mean); }

// The recipe the kernel is built with for a head dimension (64 or 128) and an exp2 unit
// (sage2-8b: the contract's polynomial and rounded steps; sage2-8b-ex2: SageAttention2's own
// kernel's arithmetic, MUFU.EX2 with the score's scale fused into its argument).
LOWBIT_HD constexpr Sage2HopperRecipe sage2_8b_hopper(int head_dim, steps::Exp2Unit exp2 = steps::Exp2Unit::polynomial) {
  Sage2HopperRecipe r;
  r.head_dim = head_dim;
  if (exp2 == steps::Exp2Unit::sm90_ex2) {
    r.exp2 = steps::exp2_sm90_ex2();
    r.exp_argument = steps::ExpArgument::fused;
  }
  return r;
}
// The name of the emulated preset that follows the kernel built with that exp2 unit.
constexpr const char* sage2_8b_preset(steps::Exp2Unit exp2) {
  return exp2 == steps::Exp2Unit::sm90_ex2 ? "sage2-8b-ex2" : "sage2-8b";
}
// The kernels' exp2 units by the names the GPU programs take (--exp2): the contract's degree-5
// polynomial and MUFU.EX2 (the same names as `--set exp2=` of the pipeline).
inline constexpr std::array<std::pair<std::string_view, steps::Exp2Unit>, 2> kKernelExp2Units{
    {{"poly5", steps::Exp2Unit::polynomial}, {"sm90-ex2", steps::Exp2Unit::sm90_ex2}}};
constexpr std::string_view kernel_exp2_name(steps::Exp2Unit exp2) {
  for (const auto& [name, unit] : kKernelExp2Units)
    if (unit == exp2) return name;
  return {};
}
constexpr std::optional<steps::Exp2Unit> kernel_exp2_unit(std::string_view name) {
  for (const auto& [known, unit] : kKernelExp2Units)
    if (known == name) return unit;
  return std::nullopt;
}
inline std::vector<std::string> kernel_exp2_names() {
  std::vector<std::string> names;
  for (const auto& [name, unit] : kKernelExp2Units) names.emplace_back(name);
  return names;
}

}  // namespace lowbit::attention
