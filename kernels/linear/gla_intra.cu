// The intra-chunk GLA kernels of gla_intra.hpp. Every fp32 operation is a step of
// emulation/linear/linear_steps.hpp (or an explicitly rounded intrinsic where the emulation's
// quantizer does the same operation: the group amax, amax / target, x / scale); fragments are
// emulation/layout.hpp's maps; the per-thread score groups are quant::derive_groups' of the tile.
#include "kernels/linear/gla_intra.hpp"

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <type_traits>

#include "emulation/layout.hpp"
#include "emulation/linear/linear_steps.hpp"
#include "emulation/quant/thread_groups.hpp"
#include "kernels/device.hpp"
#include "kernels/quant_codes.cuh"
#include "kernels/sm90/smem_layout.hpp"
#include "kernels/sm90/wgmma.cuh"

namespace lowbit::kernels {

std::string_view preset_of(GlaIntraKernel kernel) {
  switch (kernel) {
    case GlaIntraKernel::bf16: return "bf16";
    case GlaIntraKernel::int8_smooth: return "int8-smooth";
    case GlaIntraKernel::bf16_fp8: return "bf16-fp8";
    case GlaIntraKernel::int8_smooth_fp8: return "int8-smooth-fp8";
  }
  return "?";
}

std::optional<std::string> GlaIntraShape::validate() const {
  if (heads < 1) return "heads = " + std::to_string(heads) + ": must be at least 1";
  if (tokens < kGlaChunk || tokens % kGlaChunk != 0)
    return "tokens = " + std::to_string(tokens) + ": must be a positive multiple of the chunk (" +
           std::to_string(kGlaChunk) + ")";
  const bool built = (dk == 64 && dv == 64) || (dk == 128 && dv == 128) || (dk == 128 && dv == 256);
  if (!built)
    return "(d_k, d_v) = (" + std::to_string(dk) + ", " + std::to_string(dv) +
           "): the kernels are built for (64, 64), (128, 128) and (128, 256)";
  return std::nullopt;
}

namespace {

namespace st = lowbit::linear::steps;

constexpr int C = kGlaChunk, c = kGlaSubChunk, kSubChunks = C / c;
constexpr float kInt8Target = 127.0f, kE4m3Target = 448.0f;  // the quantizer's amax targets
constexpr bool kSmallScales = true;  // fp32 inputs: scales below 2^-92 (kernels/quant_codes.cuh)

// ---- wgmma (kernels/sm90/): operands in shared memory, K-major without swizzle ---------------------
using sm90::KMajorLayout;

__device__ inline void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
__device__ inline void mma_s8(std::int32_t (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D (f32, N / 2 registers) += A B over one k step (bf16: k16, e4m3: k32), waited for.
template <int N, bool Fp8>
__device__ inline void wgmma(float (&d)[N / 2], std::uint64_t desc_a, std::uint64_t desc_b) {
  using Mma = std::conditional_t<Fp8, sm90::WgmmaE4m3Shared<N>, sm90::WgmmaBf16<N>>;
  sm90::wgmma_fence();
  Mma::mma(d, desc_a, desc_b, 1);
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
}

// ---- codes, as the emulation's quantizer and casts make them ----------------------------------------
__device__ inline std::uint32_t bf16_code(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
template <layout::Fragment F>
__device__ inline layout::Offset at(int thread, int value) {
  return F(thread, value);
}

// The per-thread groups of one sub_chunk x sub_chunk score tile of mma.sync m16n8k32 s8 on one warp
// (the tiling Pipeline::score_tiling() gives the int8 presets).
__constant__ quant::QkGroups kScoreGroups = quant::derive_groups(
    quant::ThreadTiling{mma::atoms::mma_m16n8k32_s32_s8_s8, 1, kGlaSubChunk, kGlaSubChunk}, quant::GroupScope::thread);

// ---- shared memory -----------------------------------------------------------------------------
template <int DK, int DV>
struct Smem {
  static constexpr int kStripRows = C - c;  // keys of the longest strip
  static constexpr int q = 0;                            // C x DK floats
  static constexpr int k = q + C * DK * 4;               // C x DK
  static constexpr int g = k + C * DK * 4;               // C x DK log2 running sums
  static constexpr int p = g + C * DK * 4;               // C x C: P
  static constexpr int q_strip = p + C * C * 4;          // c x DK: Q~_i (then its residual)
  static constexpr int k_strip = q_strip + c * DK * 4;   // kStripRows x DK: K~ (then residuals)
  static constexpr int q_mean = k_strip + kStripRows * DK * 4;        // DK
  static constexpr int k_means = q_mean + DK * 4;                     // (kSubChunks - 1) x DK
  static constexpr int key_terms = k_means + (kSubChunks - 1) * DK * 4;  // kStripRows
  static constexpr int query_terms = key_terms + kStripRows * 4;         // c x (kSubChunks - 1)
  static constexpr int row_amax = query_terms + c * (kSubChunks - 1) * 4;  // c + kStripRows
  static constexpr int row_scale = row_amax + C * 4;                       // c + kStripRows
  static constexpr int row_inverse = row_scale + C * 4;                    // c + kStripRows
  static constexpr int p_scale = row_inverse + C * 4;                      // C
  static constexpr int v_scale = p_scale + C * 4;                          // DV
  static constexpr int p_codes = (v_scale + DV * 4 + 127) / 128 * 128;    // C x C, 2 bytes (bf16) or 1
  static constexpr int v_codes = p_codes + C * C * 2;                      // DV x C (V^T), 2 bytes or 1
  static constexpr int bytes = v_codes + DV * C * 2;
};

template <int DK, int DV, bool Int8Scores, bool Fp8Values>
__global__ void __launch_bounds__(128)
    gla_intra_kernel(const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,
                     const float* __restrict__ log_alpha, float* __restrict__ intra, float* __restrict__ scores,
                     int tokens) {
  extern __shared__ __align__(128) unsigned char smem[];
  using S = Smem<DK, DV>;
  float* qs = reinterpret_cast<float*>(smem + S::q);
  float* ks = reinterpret_cast<float*>(smem + S::k);
  float* gs = reinterpret_cast<float*>(smem + S::g);
  float* ps = reinterpret_cast<float*>(smem + S::p);
  float* qt = reinterpret_cast<float*>(smem + S::q_strip);
  float* kt = reinterpret_cast<float*>(smem + S::k_strip);
  float* q_mean = reinterpret_cast<float*>(smem + S::q_mean);
  float* k_means = reinterpret_cast<float*>(smem + S::k_means);
  float* key_terms = reinterpret_cast<float*>(smem + S::key_terms);
  float* query_terms = reinterpret_cast<float*>(smem + S::query_terms);
  float* row_amax = reinterpret_cast<float*>(smem + S::row_amax);
  float* row_scale = reinterpret_cast<float*>(smem + S::row_scale);
  float* row_inverse = reinterpret_cast<float*>(smem + S::row_inverse);
  float* p_scale = reinterpret_cast<float*>(smem + S::p_scale);
  float* v_scale = reinterpret_cast<float*>(smem + S::v_scale);
  unsigned char* p_codes = smem + S::p_codes;
  unsigned char* v_codes = smem + S::v_codes;
  constexpr int code_bytes = Fp8Values ? 1 : 2, k_bytes = C * code_bytes;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const std::size_t row0 = std::size_t(blockIdx.y) * std::size_t(tokens) + std::size_t(blockIdx.x) * C;
  const float* qg = q + row0 * DK;
  const float* kg = k + row0 * DK;
  const float* ag = log_alpha + row0 * DK;
  const float* vg = v + row0 * DV;

  // Inputs and gates: log2 running sums over the chunk, one thread per channel.
  for (int e = tid; e < C * DK; e += 128) qs[e] = qg[e], ks[e] = kg[e];
  for (int x = tid; x < DK; x += 128) {
    float sum = 0.0f;
    for (int t = 0; t < C; ++t) {
      const float l = st::log2_gate(ag[t * DK + x]);
      sum = t == 0 ? l : st::gate_sum(sum, l);
      gs[t * DK + x] = sum;
    }
  }
  // V^T codes, K-major: bf16 casts, or E4M3 with a scale per channel over the chunk.
  if constexpr (Fp8Values) {
    for (int y = tid; y < DV; y += 128) {
      float amax = 0.0f;
      for (int s = 0; s < C; ++s) amax = fmaxf(amax, fabsf(vg[s * DV + y]));
      const float scale = __fdiv_rn(amax, kE4m3Target), inverse = inverse_of(scale);
      v_scale[y] = scale;
      for (int s = 0; s < C; ++s) {
        const float value[1] = {vg[s * DV + y]};
        v_codes[KMajorLayout{k_bytes}.offset(y, s)] = std::uint8_t(e4m3_codes<kSmallScales>(value, scale, inverse));
      }
    }
  } else {
    for (int e = tid; e < C * DV; e += 128)
      *reinterpret_cast<std::uint16_t*>(v_codes + KMajorLayout{k_bytes}.offset(e % DV, e / DV * 2)) = std::uint16_t(bf16_code(vg[e]));
  }
  for (int e = tid; e < C * C; e += 128) ps[e] = 0.0f;
  __syncthreads();

  // The diagonal blocks in fp32.
  for (int e = tid; e < kSubChunks * c * c; e += 128) {
    const int i = e / (c * c), t = e / c % c, s = e % c;
    if (s > t) continue;
    const int rt = i * c + t, rs = i * c + s;
    ps[rt * C + rs] = st::diagonal_score(&qs[rt * DK], &gs[rt * DK], &ks[rs * DK], &gs[rs * DK], DK);
  }

  // The inter-sub-chunk strips: query sub-chunk i against the keys before it.
  for (int i = 1; i < kSubChunks; ++i) {
    const int qi = i * c, keys = qi;
    const float* n = &gs[qi * DK];
    __syncthreads();
    for (int e = tid; e < c * DK; e += 128) qt[e] = st::gated(qs[qi * DK + e], gs[qi * DK + e], n[e % DK]);
    for (int e = tid; e < keys * DK; e += 128) kt[e] = st::gated(ks[e], n[e % DK], gs[e]);
    __syncthreads();
    if constexpr (Int8Scores) {
      // Means per sub-chunk (double sums in row order, rounded once), the row-bias terms with the
      // unsmoothed Q~, the residuals, the key terms, then the per-thread group scales.
      for (int e = tid; e < (1 + i) * DK; e += 128) {
        const int block = e / DK, x = e % DK;
        const float* rows = block == 0 ? qt : kt + (block - 1) * c * DK;
        double sum = 0.0;
        for (int r = 0; r < c; ++r) sum = __dadd_rn(sum, double(rows[r * DK + x]));
        (block == 0 ? q_mean[x] : k_means[(block - 1) * DK + x]) = __double2float_rn(__ddiv_rn(sum, double(c)));
      }
      __syncthreads();
      for (int e = tid; e < c * i; e += 128)
        query_terms[e / i * (kSubChunks - 1) + e % i] = st::dot(&qt[e / i * DK], &k_means[e % i * DK], DK);
      __syncthreads();
      for (int e = tid; e < c * DK; e += 128) qt[e] = st::sub_rn(qt[e], q_mean[e % DK]);
      for (int e = tid; e < keys * DK; e += 128) kt[e] = st::sub_rn(kt[e], k_means[e / DK / c * DK + e % DK]);
      __syncthreads();
      for (int s = tid; s < keys; s += 128) key_terms[s] = st::dot(q_mean, &kt[s * DK], DK);
      for (int r = tid; r < c + keys; r += 128) {
        const float* row = r < c ? &qt[r * DK] : &kt[(r - c) * DK];
        float amax = 0.0f;
        for (int x = 0; x < DK; ++x) amax = fmaxf(amax, fabsf(row[x]));
        row_amax[r] = amax;
      }
      __syncthreads();
      for (int r = tid; r < c + keys; r += 128) {
        const bool query = r < c;
        const int in_block = query ? r : (r - c) % c, block_first = query ? 0 : r - in_block;
        const quant::BlockGroups& groups = query ? kScoreGroups.q : kScoreGroups.k;
        float amax = 0.0f;
        for (int o = 0; o < c; ++o)
          if (groups.group_of_row[o] == groups.group_of_row[in_block]) amax = fmaxf(amax, row_amax[block_first + o]);
        row_scale[r] = __fdiv_rn(amax, kInt8Target);
        row_inverse[r] = inverse_of(row_scale[r]);
      }
      __syncthreads();
    }
    // Warp j computes block (i, j): two m16n8 tiles over d_k.
    if (warp < i) {
      const int j = warp;
      for (int tile = 0; tile < 2; ++tile) {
        const int key0 = j * c + tile * 8;
        if constexpr (Int8Scores) {
          std::int32_t acc[4] = {0, 0, 0, 0};
          for (int kk = 0; kk < DK; kk += 32) {
            // A register's 4 values (bits 0 and 1 of the value index) share a row of Q, or a key:
            // one group, one call.
            static_assert(layout::mma_m16n8k32_a8.value_basis[0].row == 0 && layout::mma_m16n8k32_a8.value_basis[1].row == 0,
                          "a register of A holds one row");
            static_assert(layout::mma_m16n8k32_b8.value_basis[0].col == 0 && layout::mma_m16n8k32_b8.value_basis[1].col == 0,
                          "a register of B holds one key");
            std::uint32_t a[4], b[2];
#pragma unroll
            for (int r = 0; r < 4; ++r) {
              float value[4];
#pragma unroll
              for (int j = 0; j < 4; ++j) {
                const layout::Offset o = at<layout::mma_m16n8k32_a8>(lane, 4 * r + j);
                value[j] = qt[o.row * DK + kk + o.col];
              }
              const int row = at<layout::mma_m16n8k32_a8>(lane, 4 * r).row;
              a[r] = int8_codes<kSmallScales>(value, row_scale[row], row_inverse[row]);
            }
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              float value[4];
              const int key = key0 + at<layout::mma_m16n8k32_b8>(lane, 4 * r).col;
#pragma unroll
              for (int j = 0; j < 4; ++j) value[j] = kt[key * DK + kk + at<layout::mma_m16n8k32_b8>(lane, 4 * r + j).row];
              b[r] = int8_codes<kSmallScales>(value, row_scale[c + key], row_inverse[c + key]);
            }
            mma_s8(acc, a, b);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const layout::Offset o = at<layout::mma_m16n8_c>(lane, e);
            const int key = key0 + o.col;
            const float s = st::dequantize_score(acc[e], st::score_scale(row_scale[o.row], row_scale[c + key]));
            ps[(qi + o.row) * C + key] =
                st::corrected_score(s, key_terms[key], query_terms[o.row * (kSubChunks - 1) + j]);
          }
        } else {
          float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
          for (int kk = 0; kk < DK; kk += 16) {
            std::uint32_t a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const layout::Offset o = at<layout::mma_m16n8k16_a16>(lane, e);
              a[e / 2] |= bf16_code(qt[o.row * DK + kk + o.col]) << (16 * (e % 2));
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const layout::Offset o = at<layout::mma_m16n8k16_b16>(lane, e);
              b[e / 2] |= bf16_code(kt[(key0 + o.col) * DK + kk + o.row]) << (16 * (e % 2));
            }
            mma_bf16(acc, a, b);
          }
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const layout::Offset o = at<layout::mma_m16n8_c>(lane, e);
            ps[(qi + o.row) * C + key0 + o.col] = acc[e];
          }
        }
      }
    }
  }
  __syncthreads();

  // P codes (K-major A operand): bf16 casts, or E4M3 with a scale per row (query).
  if constexpr (Fp8Values) {
    for (int t = tid; t < C; t += 128) {
      float amax = 0.0f;
      for (int s = 0; s < C; ++s) amax = fmaxf(amax, fabsf(ps[t * C + s]));
      const float scale = __fdiv_rn(amax, kE4m3Target), inverse = inverse_of(scale);
      p_scale[t] = scale;
      for (int s = 0; s < C; ++s) {
        const float value[1] = {ps[t * C + s]};
        p_codes[KMajorLayout{k_bytes}.offset(t, s)] = std::uint8_t(e4m3_codes<kSmallScales>(value, scale, inverse));
      }
    }
  } else {
    for (int e = tid; e < C * C; e += 128)
      *reinterpret_cast<std::uint16_t*>(p_codes + KMajorLayout{k_bytes}.offset(e / C, e % C * 2)) = std::uint16_t(bf16_code(ps[e]));
  }
  for (int e = tid; e < C * C; e += 128) scores[row0 * C + e] = ps[e];
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  // P V through wgmma, N columns at a time. bf16: one accumulator chained from +0 over the 4 k16
  // steps. E4M3: a fresh accumulator (+0) over the 2 k32 steps, added into the fp32 output (+0).
  constexpr int N = DV < 128 ? DV : 128;
  constexpr int kSteps = Fp8Values ? 2 : 4;
  constexpr KMajorLayout layout{k_bytes};
  constexpr int step_bytes = 32;  // a k step: 32 bytes of every row (k16 bf16, k32 e4m3)
  constexpr layout::Fragment d_fragment = layout::wgmma_m64_d(N);
  for (int n0 = 0; n0 < DV; n0 += N) {
    float acc[N / 2];
#pragma unroll
    for (int r = 0; r < N / 2; ++r) acc[r] = 0.0f;
    for (int step = 0; step < kSteps; ++step)
      wgmma<N, Fp8Values>(acc, sm90::matrix_descriptor(p_codes + layout.slice_offset(step, step_bytes), layout),
                          sm90::matrix_descriptor(v_codes + layout.row_offset(n0) + layout.slice_offset(step, step_bytes), layout));
#pragma unroll
    for (int r = 0; r < N / 2; ++r) {
      const layout::Offset o = at<d_fragment>(tid, r);
      const int y = n0 + o.col;
      float out = acc[r];
      if constexpr (Fp8Values) out = st::dequantize_value(st::add_rn(0.0f, out), p_scale[o.row], v_scale[y]);
      intra[(row0 + o.row) * DV + y] = out;
    }
  }
}

template <int DK, int DV, bool Int8Scores, bool Fp8Values>
void launch(const GlaIntraShape& shape, const float* q, const float* k, const float* v, const float* log_alpha,
            float* intra, float* scores, cudaStream_t stream) {
  constexpr int bytes = Smem<DK, DV>::bytes;
  const auto kernel = gla_intra_kernel<DK, DV, Int8Scores, Fp8Values>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
             "gla_intra: cudaFuncSetAttribute(shared memory)");
  kernel<<<dim3(shape.tokens / C, shape.heads), 128, bytes, stream>>>(q, k, v, log_alpha, intra, scores, shape.tokens);
  check_cuda(cudaGetLastError(), "gla_intra: launch");
}

template <int DK, int DV>
void launch_kind(GlaIntraKernel kernel, const GlaIntraShape& s, const float* q, const float* k, const float* v,
                 const float* a, float* intra, float* scores, cudaStream_t stream) {
  switch (kernel) {
    case GlaIntraKernel::bf16: return launch<DK, DV, false, false>(s, q, k, v, a, intra, scores, stream);
    case GlaIntraKernel::int8_smooth: return launch<DK, DV, true, false>(s, q, k, v, a, intra, scores, stream);
    case GlaIntraKernel::bf16_fp8: return launch<DK, DV, false, true>(s, q, k, v, a, intra, scores, stream);
    case GlaIntraKernel::int8_smooth_fp8: return launch<DK, DV, true, true>(s, q, k, v, a, intra, scores, stream);
  }
}

}  // namespace

void launch_gla_intra(GlaIntraKernel kernel, const GlaIntraShape& shape, const float* q, const float* k,
                      const float* v, const float* log_alpha, float* intra, float* scores, void* stream) {
  if (auto why = shape.validate()) throw std::runtime_error("gla_intra: " + *why);
  const auto s = static_cast<cudaStream_t>(stream);
  if (shape.dk == 64) return launch_kind<64, 64>(kernel, shape, q, k, v, log_alpha, intra, scores, s);
  if (shape.dv == 128) return launch_kind<128, 128>(kernel, shape, q, k, v, log_alpha, intra, scores, s);
  return launch_kind<128, 256>(kernel, shape, q, k, v, log_alpha, intra, scores, s);
}

}  // namespace lowbit::kernels
