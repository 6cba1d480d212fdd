// The sage2-4b family's kernel on Hopper (sm_90a), device code: one thread block of 4 warps per 128
// queries of a head, each warp 32 queries (two m16 tiles), KV blocks of 64 keys; the instructions are
// mma.sync, chosen at compile time (QK: s4 or s8; P V: e4m3, e5m2, s8 or f16; two-level or in-place
// accumulation).
//
// Per KV block (the emulated pipeline's steps, emulation/attention/forward.cpp, in its order):
//   1. S = Q K^T (exact s32), s = dequantize_score(S, score_scale(q_scale, k_scale)); with Q smoothed
//      + add_score_correction(qbar . k'), the dot an fp32 fma chain over the head dimension from +0;
//      masked keys -inf
//   2-6. row max (std::max's fold over the columns in order: the first maximum wins, so signed zeros
//      are the emulator's), offset, alpha, p, each lane's tree sum (kernel_steps.hpp)
//   7. P codes in P's format, at its static scale or divided by the block's s_P = amax(P) / max
//      finite (amax over the tile's queries: a reduction over the thread block), staged in shared
//      memory and read back as the P V instruction's A fragment (so every key keeps its column:
//      Hopper's FP8 mma.sync sums are not order-free)
//   8-9. two-level: R = P V from +0 per flush interval (times s_P per block), o =
//      accumulate_output(o, alpha or 1, R); in place: o = alpha o, then P V accumulated onto o
// End of row: l from the 4 lanes (combine_lanes), output = normalize_output (+ V's mean), LSE.
// Every fragment's (row, col) comes from the instruction records (kernels/sm90/mma_sync.cuh).
//
// kernel_for<Pv>() picks an instance; each P V instruction's instances are compiled in a file of their
// own (variant_kernel_e4m3.cu, _e5m2, _s8, _f16: extern below), so that the 32 instances build in
// parallel; variant_kernel.cu launches them.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "emulation/attention/kernel_steps.hpp"
#include "kernels/attention/variant_launch.hpp"
#include "kernels/sm90/mma_sync.cuh"

namespace lowbit::kernels::attention::variant {

namespace steps = lowbit::attention::steps;

constexpr int kBlockQ = 128, kBlockKv = 64, kWarps = 4, kWarpRows = kBlockQ / kWarps;
constexpr int kMTiles = kWarpRows / 16, kNTiles = kBlockKv / 8;

struct Params {
  const std::int8_t *q, *k;
  const float *q_scale, *k_scale, *q_means, *k_smoothed;
  const std::uint16_t* v;
  const float *v_scale, *v_mean, *lse_bias;
  float *out, *lse;
  int heads, kv_heads, tokens, keys, tokens_padded, keys_padded;
  int mmas_per_flush;
  bool p_toward_zero, p_per_block, smooth_q, smooth_v, causal, descending;
  int causal_offset;
  float softmax_scale_log2, p_log2_scale, p_target;
  steps::Exp2 exp2;
};

template <QkInstruction Qk>
struct QkOf {
  using Mma = sm90::MmaS4;
};
template <>
struct QkOf<QkInstruction::s8> {
  using Mma = sm90::MmaS8;
};
template <PvInstruction Pv>
struct PvOf {
  using Mma = sm90::MmaE4m3;
};
template <>
struct PvOf<PvInstruction::e5m2> {
  using Mma = sm90::MmaE5m2;
};
template <>
struct PvOf<PvInstruction::s8> {
  using Mma = sm90::MmaS8;
};
template <>
struct PvOf<PvInstruction::f16> {
  using Mma = sm90::MmaF16;
};

// P's code in the P V instruction's A format (P >= 0), as the emulator's cast: e4m3 (satfinite,
// nearest), e5m2 (satfinite, nearest), int8 (cvt.rni.sat or cvt.rzi.sat), fp16 (nearest or toward
// zero, saturating at 65504).
template <PvInstruction Pv>
__device__ inline std::uint16_t p_code(float p, bool toward_zero) {
  if constexpr (Pv == PvInstruction::e4m3) {
    return steps::e4m3_code(p);
  } else if constexpr (Pv == PvInstruction::e5m2) {
    return std::uint16_t(__nv_cvt_float_to_fp8(p, __NV_SATFINITE, __NV_E5M2));
  } else if constexpr (Pv == PvInstruction::s8) {  // cvt.rni/rzi.s32, then the saturation to 127 (P >= 0)
    return std::uint16_t(min(toward_zero ? __float2int_rz(p) : __float2int_rn(p), 127) & 0xff);
  } else {
    const std::uint16_t h = __half_as_ushort(toward_zero ? __float2half_rz(p) : __float2half_rn(p));
    return h == 0x7c00 ? std::uint16_t(0x7bff) : h;  // saturate: +inf -> 65504
  }
}

// The accumulator's value as a float (s32: exact below 2^24).
template <bool Integer>
__device__ inline float accumulator_value(std::uint32_t bits) {
  if constexpr (Integer) return float(std::int32_t(bits));
  else return __uint_as_float(bits);
}

template <QkInstruction Qk, PvInstruction Pv, int D, bool InPlace>
__global__ void __launch_bounds__(kWarps * 32) variant_attention(Params p) {
  using QkMma = typename QkOf<Qk>::Mma;
  using PvMma = typename PvOf<Pv>::Mma;
  constexpr mma::Atom qk = QkMma::atom, pv = PvMma::atom;
  constexpr int kQkK = qk.k, kPvK = pv.k;
  constexpr int kQkSteps = D / kQkK, kPvSteps = kBlockKv / kPvK, kVTiles = D / 8;
  constexpr int kQkBits = qk.a.code_bits(), kPBits = pv.a.code_bits(), kVBits = pv.b.code_bits();
  constexpr layout::Fragment kC = qk.c_fragment;  // every m16n8 accumulator (S, R, o)
  static_assert(kC == pv.c_fragment, "S and the P V accumulator share a fragment");
  static_assert(D % kQkK == 0, "the head dimension is a whole number of QK k steps");

  __shared__ float delta[kBlockKv];                                  // Q smoothing's qbar . k'
  __shared__ std::uint16_t p_tile[kWarps][kWarpRows][kBlockKv];     // each warp's P codes
  __shared__ float warp_amax[2][kWarps];                              // P per block: by KV block parity

  const int block = blockIdx.x, bh = blockIdx.y;
  const int group = p.heads / p.kv_heads, bg = bh / p.heads * p.kv_heads + bh % p.heads / group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first_row = block * kBlockQ, last_row = min(first_row + kBlockQ, p.tokens) - 1;
  const int warp_row = first_row + warp * kWarpRows;  // the warp's first query
  const layout::Offset c_base = sm90::thread_offset<kC>(lane);
  constexpr auto c_at = sm90::value_offsets<kC>();
  // The thread's row of tile mt, half h (values 2h, 2h + 1), and column of tile nt, value e.
  const auto row_of = [&](int mt, int h) { return warp_row + 16 * mt + c_base.row + c_at[2 * h].row; };
  const auto col_of = [&](int nt, int e) { return 8 * nt + c_base.col + c_at[e].col; };

  // Q's fragments, for every KV block.
  const std::int8_t* q = p.q + (std::size_t(bh) * p.tokens_padded + warp_row) * D;
  std::uint32_t qa[kMTiles][kQkSteps][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int ks = 0; ks < kQkSteps; ++ks)
      sm90::gather_fragment<qk.a_fragment, kQkBits>(
          lane, [&](int r, int c) { return q[(16 * mt + r) * D + ks * kQkK + c]; }, qa[mt][ks]);

  float m[kMTiles][2], offset[kMTiles][2], lane_sum[kMTiles][2];
  float o[kMTiles][kVTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) m[mt][h] = offset[mt][h] = steps::kNegativeInfinity, lane_sum[mt][h] = 0.0f;
#pragma unroll
    for (int vt = 0; vt < kVTiles; ++vt)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mt][vt][i] = 0.0f;
  }

  const int kv_blocks = p.keys_padded / kBlockKv;
  for (int step = 0; step < kv_blocks; ++step) {
    const int kb = p.descending ? kv_blocks - 1 - step : step, first_key = kb * kBlockKv;
    if (first_key >= p.keys || (p.causal && first_key > last_row + p.causal_offset)) continue;  // every key masked

    if (p.smooth_q) {  // qbar . k' per key of the block, from +0 over the head dimension in order
      __syncthreads();
      if (threadIdx.x < kBlockKv) {
        const int key = first_key + threadIdx.x;
        float acc = 0.0f;
        if (key < p.keys) {
          const float* qbar = p.q_means + (std::size_t(bh) * (p.tokens_padded / kBlockQ) + block) * D;
          const float* kp = p.k_smoothed + (std::size_t(bg) * p.keys + key) * D;
          for (int i = 0; i < D; ++i) acc = steps::fma_rn(qbar[i], kp[i], acc);
        }
        delta[threadIdx.x] = acc;
      }
      __syncthreads();
    }

    // 1. S = Q K^T, dequantized, corrected, masked.
    float s[kMTiles][kNTiles][4];
    const std::int8_t* k = p.k + (std::size_t(bg) * p.keys_padded + first_key) * D;
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt) {
      std::uint32_t acc[kMTiles][4] = {};
#pragma unroll
      for (int ks = 0; ks < kQkSteps; ++ks) {
        std::uint32_t b[2];
        sm90::gather_fragment<qk.b_fragment, kQkBits>(
            lane, [&](int r, int c) { return k[(8 * nt + c) * D + ks * kQkK + r]; }, b);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) QkMma::run(acc[mt], qa[mt][ks], b, acc[mt]);
      }
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int row = row_of(mt, i / 2), col = col_of(nt, i % 2), key = first_key + col;
          const float scale = steps::score_scale(p.q_scale[std::size_t(bh) * p.tokens_padded + row],
                                                 p.k_scale[std::size_t(bg) * p.keys_padded + key]);
          float x = steps::dequantize_score(std::int32_t(acc[mt][i]), scale);
          if (p.smooth_q) x = steps::add_score_correction(x, delta[col], p.softmax_scale_log2);
          if (key >= p.keys || (p.causal && key > row + p.causal_offset)) x = steps::kNegativeInfinity;
          s[mt][nt][i] = x;
        }
    }

    // 2-6. The online softmax of each row; s keeps P's values.
    float alpha[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // The block's first maximum in column order: the lane's, then across the row's 4 lanes.
        float best = steps::kNegativeInfinity;
        int best_col = kBlockKv;
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e)
            if (best < s[mt][nt][2 * h + e]) best = s[mt][nt][2 * h + e], best_col = col_of(nt, e);
#pragma unroll
        for (int x = 1; x <= 2; x *= 2) {
          const float other = __shfl_xor_sync(0xffffffffu, best, x);
          const int other_col = __shfl_xor_sync(0xffffffffu, best_col, x);
          if (best < other || (best == other && other_col < best_col)) best = other, best_col = other_col;
        }
        const float m_new = m[mt][h] < best ? best : m[mt][h];
        const float offset_new = steps::row_offset(m_new, p.p_log2_scale);
        alpha[mt][h] = steps::rescale(offset[mt][h], offset_new, p.exp2);
        float probabilities[2 * kNTiles];
#pragma unroll
        for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pr = steps::probability(s[mt][nt][2 * h + e], offset_new, p.exp2);
            probabilities[2 * nt + e] = pr;
            s[mt][nt][2 * h + e] = pr;
          }
        lane_sum[mt][h] = steps::update_row_sum(lane_sum[mt][h], alpha[mt][h], steps::tree_sum<2 * kNTiles>(probabilities));
        m[mt][h] = m_new;
        offset[mt][h] = steps::carried_offset(m_new, offset_new);
      }

    // 7. P's codes, per block divided by s_P (the tile's rows past the last query take no part in the amax).
    float p_scale = 1.0f;
    if (p.p_per_block) {
      float amax = 0.0f;
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (row_of(mt, i / 2) < p.tokens)
#pragma unroll
            for (int nt = 0; nt < kNTiles; ++nt) amax = fmaxf(amax, s[mt][nt][i]);
#pragma unroll
      for (int x = 1; x < 32; x *= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, x));
      if (lane == 0) warp_amax[step & 1][warp] = amax;
      __syncthreads();
#pragma unroll
      for (int w = 0; w < kWarps; ++w) amax = fmaxf(amax, warp_amax[step & 1][w]);
      p_scale = steps::div_rn(amax, p.p_target);
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          // A zero scale (every P of the tile 0) gives zero codes, as the quantizer's.
          const float x = !p.p_per_block ? s[mt][nt][i] : p_scale == 0.0f ? 0.0f : steps::div_rn(s[mt][nt][i], p_scale);
          p_tile[warp][row_of(mt, i / 2) - warp_row][col_of(nt, i % 2)] = p_code<Pv>(x, p.p_toward_zero);
        }
    __syncwarp();

    // 8-9. P V into o.
    std::uint32_t pa[kMTiles][kPvSteps][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int ks = 0; ks < kPvSteps; ++ks)
        sm90::gather_fragment<pv.a_fragment, kPBits>(
            lane, [&](int r, int c) { return p_tile[warp][16 * mt + r][ks * kPvK + c]; }, pa[mt][ks]);
    __syncwarp();  // p_tile is written again in the next block
    const std::uint16_t* v = p.v + (std::size_t(bg) * p.keys_padded + first_key) * D;
    const int flush = InPlace || p.mmas_per_flush == 0 ? kPvSteps : p.mmas_per_flush;
#pragma unroll
    for (int vt = 0; vt < kVTiles; ++vt) {
      std::uint32_t b[kPvSteps][2];
#pragma unroll
      for (int ks = 0; ks < kPvSteps; ++ks)
        sm90::gather_fragment<pv.b_fragment, kVBits>(
            lane, [&](int r, int c) { return v[(ks * kPvK + r) * D + 8 * vt + c]; }, b[ks]);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        if constexpr (InPlace) {
          std::uint32_t acc[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[i] = __float_as_uint(steps::mul_rn(o[mt][vt][i], alpha[mt][i / 2]));
#pragma unroll
          for (int ks = 0; ks < kPvSteps; ++ks) PvMma::run(acc, pa[mt][ks], b[ks], acc);
#pragma unroll
          for (int i = 0; i < 4; ++i) o[mt][vt][i] = __uint_as_float(acc[i]);
        } else {
          for (int k0 = 0; k0 < kPvSteps; k0 += flush) {
            std::uint32_t acc[4] = {};
            for (int ks = k0; ks < min(k0 + flush, kPvSteps); ++ks) PvMma::run(acc, pa[mt][ks], b[ks], acc);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              float r = accumulator_value<Pv == PvInstruction::s8>(acc[i]);
              if (p.p_per_block) r = steps::mul_rn(r, p_scale);
              o[mt][vt][i] = steps::accumulate_output(o[mt][vt][i], k0 == 0 ? alpha[mt][i / 2] : 1.0f, r);
            }
          }
        }
      }
    }
  }

  // The end of each row: l from the 4 lanes, the normalized output, the LSE.
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float lanes[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) lanes[i] = __shfl_sync(0xffffffffu, lane_sum[mt][h], (lane & ~3) | i);
      const int row = row_of(mt, h);
      if (row >= p.tokens) continue;
      const float l = steps::combine_lanes(lanes[0], lanes[1], lanes[2], lanes[3]);
      const float inverse = steps::inverse_row_sum(l);
      float* out = p.out + (std::size_t(bh) * p.tokens + row) * D;
#pragma unroll
      for (int vt = 0; vt < kVTiles; ++vt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = col_of(vt, e);
          float y = steps::normalize_output(o[mt][vt][2 * h + e], inverse, p.v_scale[std::size_t(bg) * D + c]);
          if (p.smooth_v) y = steps::add_value_mean(y, p.v_mean[std::size_t(bg) * D + c]);
          out[c] = y;
        }
      if (c_base.col == 0)  // one lane of the row writes its LSE
        p.lse[std::size_t(bh) * p.tokens + row] =
            steps::log_sum_exp(offset[mt][h], l, p.lse_bias[std::size_t(bh) * p.tokens + row]);
    }
}

using Kernel = void (*)(Params);

template <QkInstruction Qk, PvInstruction Pv, int D>
Kernel pick_accumulation(bool in_place) {
  if constexpr (Pv == PvInstruction::s8) {  // two-level only (validate)
    return variant_attention<Qk, Pv, D, false>;
  } else {
    return in_place ? variant_attention<Qk, Pv, D, true> : variant_attention<Qk, Pv, D, false>;
  }
}
template <QkInstruction Qk, PvInstruction Pv>
Kernel pick_dim(int head_dim, bool in_place) {
  return head_dim == 64 ? pick_accumulation<Qk, Pv, 64>(in_place) : pick_accumulation<Qk, Pv, 128>(in_place);  // (validate)
}
// The instance for these choices (VariantLaunch::validate has checked them).
template <PvInstruction Pv>
Kernel kernel_for(QkInstruction qk, int head_dim, bool in_place) {
  return qk == QkInstruction::s4 ? pick_dim<QkInstruction::s4, Pv>(head_dim, in_place)
                                 : pick_dim<QkInstruction::s8, Pv>(head_dim, in_place);
}
extern template Kernel kernel_for<PvInstruction::e4m3>(QkInstruction, int, bool);
extern template Kernel kernel_for<PvInstruction::e5m2>(QkInstruction, int, bool);
extern template Kernel kernel_for<PvInstruction::s8>(QkInstruction, int, bool);
extern template Kernel kernel_for<PvInstruction::f16>(QkInstruction, int, bool);

}  // namespace lowbit::kernels::attention::variant
