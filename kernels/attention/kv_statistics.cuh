// SageAttention2-8b on Hopper, the K/V statistics that the quantization reads: per chunk of the
// recipe's key_mean_chunk tokens the K sums and the V amax (key_value_statistics), then per KV head
// the K mean and the V scales (key_mean_value_scales). Launched by quantize.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "kernels/attention/sage2_device.cuh"
#include "kernels/attention/sage2_kernels.cuh"

namespace lowbit::kernels::attention::detail {
namespace {

constexpr float kE4m3Target = 448.0f;   // max_finite(e4m3): V scales are amax / 448

// ---- K/V statistics: per chunk of key_mean_chunk tokens, the K sums (double) and V amax ---------
// A thread takes two adjacent channels of one chunk, tokens in order (the recipe's chunk sum), the
// pair one 4-byte load where the strides allow it (a warp's load then is 128 bytes of a row); a
// block, kStatisticsChunks chunks.
constexpr int kStatisticsChunks = 2;
template <class T, int HeadDim>
__global__ void __launch_bounds__(HeadDim / 2 * kStatisticsChunks) key_value_statistics(const QuantizeParams p) {
  constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim);
  constexpr int kPairs = HeadDim / 2;
  using Pair = PairOf<T>;
  const int chunk = blockIdx.x * kStatisticsChunks + threadIdx.x / kPairs, h = blockIdx.y, b = blockIdx.z;
  const int c = threadIdx.x % kPairs * 2;
  if (chunk >= p.key_chunks) return;
  const T* k = static_cast<const T*>(p.k) + b * p.kv_strides.batch + h * p.kv_strides.head + c;
  const T* v = static_cast<const T*>(p.v) + b * p.kv_strides.batch + h * p.kv_strides.head + c;
  const long long stride = p.kv_strides.token;
  const bool pairs = rows_aligned(k, stride, sizeof(Pair)) && rows_aligned(v, stride, sizeof(Pair));
  const int first = chunk * recipe.key_mean_chunk, last = min(p.tokens, first + recipe.key_mean_chunk);
  double sum[2] = {0.0, 0.0};
  float amax[2] = {0.0f, 0.0f};
  const auto add = [&](float k0, float k1, float v0, float v1) {
    sum[0] = lowbit::attention::add_key(sum[0], k0), sum[1] = lowbit::attention::add_key(sum[1], k1);
    amax[0] = fmaxf(amax[0], fabsf(v0)), amax[1] = fmaxf(amax[1], fabsf(v1));
  };
  if (pairs) {
#pragma unroll 8
    for (int t = first; t < last; ++t) {
      const Pair kt = *reinterpret_cast<const Pair*>(k + t * stride), vt = *reinterpret_cast<const Pair*>(v + t * stride);
      add(to_float(kt.x), to_float(kt.y), to_float(vt.x), to_float(vt.y));
    }
  } else {
    for (int t = first; t < last; ++t)
      add(to_float(k[t * stride]), to_float(k[t * stride + 1]), to_float(v[t * stride]), to_float(v[t * stride + 1]));
  }
  const long long slot = ((long long)(b * p.heads_kv + h) * p.key_chunks + chunk) * HeadDim + c;
  for (int e = 0; e < 2; ++e) {
    p.out.k_chunk_sums[slot + e] = sum[e];
    p.out.v_chunk_amax[slot + e] = amax[e];
  }
}

// ---- the K mean and the V scales of a KV head, once: every quantization block reads them ---------
// One thread per channel; the chunk sums in chunk order (the recipe's), the V amax over the chunks.
// The loads go kBatch chunks at a time ahead of their sums: the grid is one block an SM, so a thread's
// round trips set the time.
template <int HeadDim>
__global__ void __launch_bounds__(HeadDim) key_mean_value_scales(const QuantizeParams p) {
  constexpr int kBatch = 32;
  const long long head = (long long)blockIdx.y * p.heads_kv + blockIdx.x;
  const int c = threadIdx.x;
  double total = 0.0;
  float amax = 0.0f;
  for (int first = 0; first < p.key_chunks; first += kBatch) {
    double sums[kBatch];
    float amaxes[kBatch];
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      const long long slot = (head * p.key_chunks + first + k) * HeadDim + c;
      sums[k] = first + k < p.key_chunks ? p.out.k_chunk_sums[slot] : 0.0;
      amaxes[k] = first + k < p.key_chunks ? p.out.v_chunk_amax[slot] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kBatch; ++k) {
      if (first + k >= p.key_chunks) break;
      total = lowbit::attention::add_chunk_sum(total, sums[k]);
      amax = fmaxf(amax, amaxes[k]);
    }
  }
  p.out.k_mean[head * HeadDim + c] = lowbit::attention::key_mean(total, p.tokens);
  p.out.v_scales[head * HeadDim + c] = __fdiv_rn(amax, kE4m3Target);
}

}  // namespace
}  // namespace lowbit::kernels::attention::detail
