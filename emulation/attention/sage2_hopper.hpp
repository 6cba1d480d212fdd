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
// with P·V through wgmma.m64nNk32.f32.e4m3.e4m3 (N = head_dim) chained over the block from +0.
// GQA: Q head h reads KV head h / (heads_q / heads_kv). Causal: key j is visible to query i when
// j <= i (top-left, as PyTorch's is_causal). Tokens past N: zero codes, masked keys.
#pragma once

#include <cstdint>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/quant/thread_groups.hpp"

namespace lowbit::attention {

enum class KvOrder : std::uint8_t { ascending, descending };

struct Sage2HopperRecipe {
  int head_dim = 128;
  int block_q = 128;         // queries per thread block
  int block_kv = 128;        // keys per KV block (the P·V K loop: block_kv / 32 wgmma k32 steps)
  int consumer_warps = 8;    // warps that run the math: two warpgroups of 64 query rows each
  KvOrder kv_order = KvOrder::ascending;
  int key_mean_chunk = 128;  // tokens per double partial sum of the K mean
  steps::Exp2Poly exp2 = steps::exp2_degree5();  // the exponential the kernel runs
  float p_log2_scale = steps::kLog2Of448;

  // The tiling the per-thread INT8 groups of Q and K are derived from.
  LOWBIT_HD constexpr quant::ThreadTiling qk_tiling() const {
    return quant::ThreadTiling{mma::atoms::wgmma_m64nNk32_s32_s8_s8(block_kv), consumer_warps, block_q, block_kv};
  }
};

// The recipe the kernel is built with for a head dimension (64 or 128).
LOWBIT_HD constexpr Sage2HopperRecipe sage2_8b_hopper(int head_dim) {
  Sage2HopperRecipe r;
  r.head_dim = head_dim;
  return r;
}

}  // namespace lowbit::attention
