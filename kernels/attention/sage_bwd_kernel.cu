// SageBwd's forward and backward passes on Hopper (sage_bwd_gpu.hpp), the emulator's
// (emulation/attention/backward.cpp) steps in its order, every fp32 operation rounded as it rounds
// (steps::add_rn and kin). Three kernels of 128 threads (4 warps), one 64-row tile each:
//   forward   per Q tile: S = Q K_j^T, online softmax, O += P V_j; O, L and D = rowsum(dO O)
//   dk_dv     per KV tile and KV head: the group's Q heads, their Q tiles ascending: S, P = exp2(S - L),
//             dV += P^T dO, dP = dO V^T, dS = P (dP - D), dK += dS^T Q / sqrt(d)
//   dq        per Q tile: KV tiles ascending, the same S, P, dP, dS, then dQ += dS K / sqrt(d)
// A product's operands are staged in shared memory as the emulator's make_tile makes them (INT8:
// scale = amax / 127 per tile or per row, codes RN(x / s); FP16: RN cast), rows x depth with the
// depth contiguous and zero-padded, and multiplied by mma.sync (m16n8k32 s8: exact sums, then
// float(sum) * (s_a * s_b); m16n8k16 f16: one fp32 accumulator chained through ceil(depth / 16)
// k chunks ascending from +0, mma::gemm's pad_k). Each warp computes 16 rows of a product.
#include "kernels/attention/sage_bwd_launch.hpp"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "emulation/attention/kernel_steps.hpp"
#include "kernels/attention/exact_exp2.cuh"
#include "kernels/device.hpp"
#include "kernels/sm90/mma_sync.cuh"

namespace lowbit::kernels::attention {
namespace {

namespace steps = lowbit::attention::steps;

constexpr int kTile = 64;  // block_q = block_kv
constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kMaxDim = 128;
constexpr float kNegInf = steps::kNegativeInfinity;
constexpr float kInt8Target = 127.0f;
// An operand's rows: the depth rounded up to 32 elements, then 16 bytes more so that the 8 rows a
// fragment load reads fall in distinct banks.
__host__ __device__ constexpr int operand_stride(int depth, bool f16) { return (depth + 31) / 32 * 32 * (f16 ? 2 : 1) + 16; }
// The largest operand: 128 rows of depth 64 in fp16 (V^T, dO^T, Q^T, K^T at d = 128).
constexpr int kOperandBytes = 128 * operand_stride(64, true);
static_assert(kOperandBytes >= 64 * operand_stride(128, true));
constexpr int kAccumulatorStride = kMaxDim + 4;  // fp32 tiles of 64 x d
constexpr int kScoreStride = kTile + 4;          // fp32 tiles of 64 x 64

struct Products {
  bool qk, pv, dv, dp, dq, dk;  // FP16 (else INT8 per block)
};

struct Params {
  const float *q, *k, *v, *d_out;
  float *o, *lse, *lse_log2, *delta, *dq, *dk, *dv;
  int heads, kv_heads, tokens, keys, dim, value_dim;
  bool causal;
  float scale_log2, inv_sqrt_d;
  Products fp16;

  __device__ std::size_t q_row(int b, int h, int t) const { return (std::size_t(b) * heads + h) * tokens + t; }
  __device__ std::size_t k_row(int b, int g, int t) const { return (std::size_t(b) * kv_heads + g) * keys + t; }
};

// A product's operand in shared memory: rows x depth codes (int8 or fp16) and a scale per row.
struct Operand {
  std::uint8_t* bytes;
  float* scale;  // INT8: per row (per-tile scales repeated)
  bool f16 = false;
  int depth = 0, stride = 0;  // the emulator's K; bytes per row
};

// Carves shared memory into operands and fp32 tiles.
struct SharedCarver {
  std::uint8_t* at;
  __device__ Operand operand() {
    Operand o{at, reinterpret_cast<float*>(at + kOperandBytes)};
    at += kOperandBytes + kMaxDim * sizeof(float);
    return o;
  }
  __device__ float* floats(int count) {
    float* f = reinterpret_cast<float*>(at);
    at += std::size_t(count) * sizeof(float);
    return f;
  }
};
constexpr std::size_t operand_bytes(int count) { return std::size_t(count) * (kOperandBytes + kMaxDim * sizeof(float)); }

// ---- staging: make_tile ------------------------------------------------------------------------

__device__ inline float warp_max(float x) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

__device__ inline int int8_code(float x, float scale) {
  if (scale == 0.0f) return 0;  // quant::quantize: a zero scale gives zero codes
  return min(127, max(-128, __float2int_rn(__fdiv_rn(x, scale))));
}

// The operand of value(r, c) for r < rows, c < depth as the emulator's make_tile(x, kind, per_row)
// makes it, zero codes beyond (up to rows_alloc rows and the padded depth). Ends with a barrier.
// `reduce`: 4 floats of shared memory.
template <class Value>
__device__ void stage(Operand& op, bool f16, bool per_row, int rows, int rows_alloc, int depth, float* reduce, Value value) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  op.f16 = f16;
  op.depth = depth;
  op.stride = operand_stride(depth, f16);
  if (!f16) {
    if (per_row) {
      for (int r = warp; r < rows_alloc; r += kWarps) {
        float amax = 0.0f;
        if (r < rows)
          for (int c = lane; c < depth; c += 32) amax = fmaxf(amax, fabsf(value(r, c)));
        amax = warp_max(amax);
        if (lane == 0) op.scale[r] = __fdiv_rn(amax, kInt8Target);
      }
    } else {
      float amax = 0.0f;
      for (int i = threadIdx.x; i < rows * depth; i += kThreads) amax = fmaxf(amax, fabsf(value(i / depth, i % depth)));
      amax = warp_max(amax);
      if (lane == 0) reduce[warp] = amax;
      __syncthreads();
      const float scale = __fdiv_rn(fmaxf(fmaxf(reduce[0], reduce[1]), fmaxf(reduce[2], reduce[3])), kInt8Target);
      for (int r = threadIdx.x; r < rows_alloc; r += kThreads) op.scale[r] = scale;
    }
    __syncthreads();
    const int words = op.stride / 4 - 4;  // 4 codes each (the 16 pad bytes are never read)
    for (int i = threadIdx.x; i < rows_alloc * words; i += kThreads) {
      const int r = i / words, c = (i % words) * 4;
      std::uint32_t packed = 0;
      if (r < rows) {
        const float s = op.scale[r];
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (c + e < depth) packed |= std::uint32_t(std::uint8_t(std::int8_t(int8_code(value(r, c + e), s)))) << (8 * e);
      }
      *reinterpret_cast<std::uint32_t*>(op.bytes + r * op.stride + c) = packed;
    }
  } else {
    const int words = op.stride / 4 - 4;  // 2 halves each
    for (int i = threadIdx.x; i < rows_alloc * words; i += kThreads) {
      const int r = i / words, c = (i % words) * 2;
      const float x0 = r < rows && c < depth ? value(r, c) : 0.0f;
      const float x1 = r < rows && c + 1 < depth ? value(r, c + 1) : 0.0f;
      *reinterpret_cast<__half2*>(op.bytes + r * op.stride + 2 * c) = __halves2half2(__float2half_rn(x0), __float2half_rn(x1));
    }
  }
  __syncthreads();
}

// ---- products ------------------------------------------------------------------------------------

__device__ inline std::uint32_t word_at(const Operand& op, int row, int byte) {
  return *reinterpret_cast<const std::uint32_t*>(op.bytes + row * op.stride + byte);
}

// a (64 x K) times b (n x K) transposed, n a multiple of 32: epilogue(r, c, value) for every
// element, value the emulator's product() (INT8: float(sum) * (s_a[r] * s_b[c])). The fragments
// (emulation/layout.hpp): A's registers rows g, g + 8 at k, then at k + 8 (f16) or k + 16 (s8); B's
// column g at k, then k + 8 or k + 16; C's rows g, g + 8, columns 2t, 2t + 1 (g = lane / 4, t = lane % 4).
template <class Epilogue>
__device__ void product(const Operand& a, const Operand& b, int n, Epilogue epilogue) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, tig = lane % 4;
  const int row = 16 * warp + group;
  for (int n0 = 0; n0 < n; n0 += 32) {
    if (a.f16) {
      std::uint32_t acc[4][4] = {};  // fp32 bits, +0
      for (int k0 = 0; k0 < a.depth; k0 += 16) {  // ceil(depth / 16) chunks, ascending
        const int byte = 2 * (k0 + 2 * tig);
        const std::uint32_t fa[4] = {word_at(a, row, byte), word_at(a, row + 8, byte), word_at(a, row, byte + 16),
                                     word_at(a, row + 8, byte + 16)};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int col = n0 + 8 * t + group;
          const std::uint32_t fb[2] = {word_at(b, col, byte), word_at(b, col, byte + 16)};
          sm90::MmaF16::run(acc[t], fa, fb, acc[t]);
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) epilogue(row + 8 * (e / 2), n0 + 8 * t + 2 * tig + e % 2, __uint_as_float(acc[t][e]));
    } else {
      std::uint32_t acc[4][4] = {};  // s32 sums
      for (int k0 = 0; k0 < a.depth; k0 += 32) {
        const int byte = k0 + 4 * tig;
        const std::uint32_t fa[4] = {word_at(a, row, byte), word_at(a, row + 8, byte), word_at(a, row, byte + 16),
                                     word_at(a, row + 8, byte + 16)};
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const int col = n0 + 8 * t + group;
          const std::uint32_t fb[2] = {word_at(b, col, byte), word_at(b, col, byte + 16)};
          sm90::MmaS8::run(acc[t], fa, fb, acc[t]);
        }
      }
#pragma unroll
      for (int t = 0; t < 4; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = row + 8 * (e / 2), c = n0 + 8 * t + 2 * tig + e % 2;
          epilogue(r, c, steps::mul_rn(__int2float_rn(int(acc[t][e])), steps::mul_rn(a.scale[r], b.scale[c])));
        }
    }
  }
  __syncthreads();
}

// Scores of Q tile q0 and KV tile k0 in log2 units, masked (the emulator's scores()), into s.
__device__ void scores(const Params& p, const Operand& q_op, const Operand& k_op, int q0, int k0, float* s) {
  product(q_op, k_op, kTile, [&](int r, int c, float x) {
    s[r * kScoreStride + c] = p.causal && k0 + c > q0 + r ? kNegInf : steps::mul_rn(x, p.scale_log2);
  });
}

// P = exp2(S - L) in place for the valid rows and columns, 0 beyond.
__device__ void probabilities(float* s, const float* lse_log2, int rows, int cols) {
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int r = i / kTile, c = i % kTile;
    float& x = s[r * kScoreStride + c];
    x = r < rows && c < cols ? exp2_exact(steps::sub_rn(x, lse_log2[r])) : 0.0f;
  }
  __syncthreads();
}

// dP = dO V^T into ds, then dS = P (dP - D) in place.
__device__ void score_gradients(const Operand& d_out_op, const Operand& v_op, const float* prob, const float* delta,
                                int rows, int cols, float* ds) {
  product(d_out_op, v_op, kTile, [&](int r, int c, float x) { ds[r * kScoreStride + c] = x; });
  for (int i = threadIdx.x; i < kTile * kTile; i += kThreads) {
    const int r = i / kTile, c = i % kTile;
    float& x = ds[r * kScoreStride + c];
    x = r < rows && c < cols ? steps::mul_rn(prob[r * kScoreStride + c], steps::sub_rn(x, delta[r])) : 0.0f;
  }
  __syncthreads();
}

// ---- the kernels -----------------------------------------------------------------------------

constexpr std::size_t kForwardShared = operand_bytes(4) + sizeof(float) * (kTile * kScoreStride + kTile * kAccumulatorStride + 4 * kTile + 4);

// blockIdx: (Q tile, Q head, batch).
__global__ void __launch_bounds__(kThreads) forward(const Params p) {
  extern __shared__ __align__(16) std::uint8_t shared[];
  SharedCarver carve{shared};
  Operand q_op = carve.operand(), k_op = carve.operand(), p_op = carve.operand(), v_op = carve.operand();
  float* s = carve.floats(kTile * kScoreStride);
  float* o = carve.floats(kTile * kAccumulatorStride);
  float *m = carve.floats(kTile), *l = carve.floats(kTile), *alpha = carve.floats(kTile), *m_new = carve.floats(kTile);
  float* reduce = carve.floats(4);
  const int b = blockIdx.z, h = blockIdx.y, g = h / (p.heads / p.kv_heads);
  const int q0 = blockIdx.x * kTile, rows = min(kTile, p.tokens - q0), d = p.dim, dv = p.value_dim;
  const float* Q = p.q + p.q_row(b, h, q0) * d;
  stage(q_op, p.fp16.qk, false, rows, kTile, d, reduce, [&](int r, int c) { return Q[r * d + c]; });
  for (int i = threadIdx.x; i < kTile * kAccumulatorStride; i += kThreads) o[i] = 0.0f;
  for (int r = threadIdx.x; r < kTile; r += kThreads) m[r] = kNegInf, l[r] = 0.0f;
  for (int k0 = 0; k0 < p.keys; k0 += kTile) {
    const int cols = min(kTile, p.keys - k0);
    if (p.causal && k0 > q0 + rows - 1) break;
    const float* K = p.k + p.k_row(b, g, k0) * d;
    const float* V = p.v + p.k_row(b, g, k0) * dv;
    stage(k_op, p.fp16.qk, false, cols, kTile, d, reduce, [&](int r, int c) { return K[r * d + c]; });
    scores(p, q_op, k_op, q0, k0, s);
    // Row maxima (a warp per row; max is exact in any order) and alpha.
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = warp; r < rows; r += kWarps) {
      float x = kNegInf;
      for (int c = lane; c < cols; c += 32) x = fmaxf(x, s[r * kScoreStride + c]);
      x = fmaxf(warp_max(x), m[r]);
      if (lane == 0) m_new[r] = x, alpha[r] = m[r] == kNegInf ? 0.0f : exp2_exact(steps::sub_rn(m[r], x));
    }
    __syncthreads();
    probabilities(s, m_new, rows, cols);
    // l = fma(l, alpha, sum over the columns ascending).
    for (int r = threadIdx.x; r < rows; r += kThreads) {
      float sum = 0.0f;
      for (int c = 0; c < cols; ++c) sum = steps::add_rn(sum, s[r * kScoreStride + c]);
      l[r] = steps::fma_rn(l[r], alpha[r], sum);
      m[r] = m_new[r];
    }
    stage(p_op, p.fp16.pv, true, rows, kTile, cols, reduce, [&](int r, int c) { return s[r * kScoreStride + c]; });
    stage(v_op, p.fp16.pv, false, dv, dv, cols, reduce, [&](int r, int c) { return V[c * dv + r]; });
    product(p_op, v_op, dv, [&](int r, int c, float x) {
      o[r * kAccumulatorStride + c] = steps::fma_rn(o[r * kAccumulatorStride + c], alpha[r], x);
    });
  }
  // O = o / l, L = m + log2 l, LSE = L ln 2; then D = rowsum(dO O).
  for (int i = threadIdx.x; i < rows * dv; i += kThreads) {
    const int r = i / dv, c = i % dv;
    const float value = steps::mul_rn(o[r * kAccumulatorStride + c], steps::div_rn(1.0f, l[r]));
    o[r * kAccumulatorStride + c] = value;
    p.o[(p.q_row(b, h, q0) + r) * dv + c] = value;
  }
  __syncthreads();
  const float* dO = p.d_out + p.q_row(b, h, q0) * dv;
  for (int r = threadIdx.x; r < rows; r += kThreads) {
    const float L = steps::add_rn(m[r], log2_exact(l[r]));
    const std::size_t at = p.q_row(b, h, q0) + r;
    p.lse_log2[at] = L;
    p.lse[at] = steps::mul_rn(L, steps::kLn2);
    float sum = 0.0f;
    for (int c = 0; c < dv; ++c) sum = steps::fma_rn(dO[r * dv + c], o[r * kAccumulatorStride + c], sum);
    p.delta[at] = sum;
  }
}

constexpr std::size_t kDkDvShared =
    operand_bytes(4) + sizeof(float) * (2 * kTile * kScoreStride + 2 * kTile * kAccumulatorStride + 2 * kTile + 4);

// blockIdx: (KV tile, KV head, batch).
__global__ void __launch_bounds__(kThreads) dk_dv(const Params p) {
  extern __shared__ __align__(16) std::uint8_t shared[];
  SharedCarver carve{shared};
  Operand k_op = carve.operand(), v_op = carve.operand(), x_op = carve.operand(), y_op = carve.operand();
  float *prob = carve.floats(kTile * kScoreStride), *ds = carve.floats(kTile * kScoreStride);
  float *dk = carve.floats(kTile * kAccumulatorStride), *dv_acc = carve.floats(kTile * kAccumulatorStride);
  float *lse_log2 = carve.floats(kTile), *delta = carve.floats(kTile), *reduce = carve.floats(4);
  const int b = blockIdx.z, g = blockIdx.y, group = p.heads / p.kv_heads, d = p.dim, dv = p.value_dim;
  const int k0 = blockIdx.x * kTile, cols = min(kTile, p.keys - k0);
  const float* K = p.k + p.k_row(b, g, k0) * d;
  const float* V = p.v + p.k_row(b, g, k0) * dv;
  stage(k_op, p.fp16.qk, false, cols, kTile, d, reduce, [&](int r, int c) { return K[r * d + c]; });
  stage(v_op, p.fp16.dp, false, cols, kTile, dv, reduce, [&](int r, int c) { return V[r * dv + c]; });
  for (int i = threadIdx.x; i < kTile * kAccumulatorStride; i += kThreads) dk[i] = dv_acc[i] = 0.0f;
  for (int h = g * group; h < (g + 1) * group; ++h)
    for (int q0 = p.causal ? k0 / kTile * kTile : 0; q0 < p.tokens; q0 += kTile) {
      const int rows = min(kTile, p.tokens - q0);
      if (p.causal && k0 > q0 + rows - 1) continue;
      const float* Q = p.q + p.q_row(b, h, q0) * d;
      const float* dO = p.d_out + p.q_row(b, h, q0) * dv;
      for (int r = threadIdx.x; r < rows; r += kThreads)
        lse_log2[r] = p.lse_log2[p.q_row(b, h, q0) + r], delta[r] = p.delta[p.q_row(b, h, q0) + r];
      stage(x_op, p.fp16.qk, false, rows, kTile, d, reduce, [&](int r, int c) { return Q[r * d + c]; });
      scores(p, x_op, k_op, q0, k0, prob);
      probabilities(prob, lse_log2, rows, cols);
      // dV += P^T dO.
      stage(x_op, p.fp16.dv, false, cols, kTile, rows, reduce, [&](int r, int c) { return prob[c * kScoreStride + r]; });
      stage(y_op, p.fp16.dv, false, dv, dv, rows, reduce, [&](int r, int c) { return dO[c * dv + r]; });
      product(x_op, y_op, dv, [&](int r, int c, float x) {
        float& acc = dv_acc[r * kAccumulatorStride + c];
        acc = steps::add_rn(acc, x);
      });
      stage(x_op, p.fp16.dp, false, rows, kTile, dv, reduce, [&](int r, int c) { return dO[r * dv + c]; });
      score_gradients(x_op, v_op, prob, delta, rows, cols, ds);
      // dK += dS^T Q / sqrt(d).
      stage(x_op, p.fp16.dk, false, cols, kTile, rows, reduce, [&](int r, int c) { return ds[c * kScoreStride + r]; });
      stage(y_op, p.fp16.dk, false, d, d, rows, reduce, [&](int r, int c) { return Q[c * d + r]; });
      product(x_op, y_op, d, [&](int r, int c, float x) {
        float& acc = dk[r * kAccumulatorStride + c];
        acc = steps::fma_rn(x, p.inv_sqrt_d, acc);
      });
    }
  for (int i = threadIdx.x; i < cols * d; i += kThreads)
    p.dk[(p.k_row(b, g, k0) + i / d) * d + i % d] = dk[(i / d) * kAccumulatorStride + i % d];
  for (int i = threadIdx.x; i < cols * dv; i += kThreads)
    p.dv[(p.k_row(b, g, k0) + i / dv) * dv + i % dv] = dv_acc[(i / dv) * kAccumulatorStride + i % dv];
}

constexpr std::size_t kDqShared = operand_bytes(4) + sizeof(float) * (2 * kTile * kScoreStride + kTile * kAccumulatorStride + 2 * kTile + 4);

// blockIdx: (Q tile, Q head, batch).
__global__ void __launch_bounds__(kThreads) dq(const Params p) {
  extern __shared__ __align__(16) std::uint8_t shared[];
  SharedCarver carve{shared};
  Operand q_op = carve.operand(), d_out_op = carve.operand(), x_op = carve.operand(), y_op = carve.operand();
  float *prob = carve.floats(kTile * kScoreStride), *ds = carve.floats(kTile * kScoreStride);
  float* dq_acc = carve.floats(kTile * kAccumulatorStride);
  float *lse_log2 = carve.floats(kTile), *delta = carve.floats(kTile), *reduce = carve.floats(4);
  const int b = blockIdx.z, h = blockIdx.y, g = h / (p.heads / p.kv_heads), d = p.dim, dv = p.value_dim;
  const int q0 = blockIdx.x * kTile, rows = min(kTile, p.tokens - q0);
  const float* Q = p.q + p.q_row(b, h, q0) * d;
  const float* dO = p.d_out + p.q_row(b, h, q0) * dv;
  stage(q_op, p.fp16.qk, false, rows, kTile, d, reduce, [&](int r, int c) { return Q[r * d + c]; });
  stage(d_out_op, p.fp16.dp, false, rows, kTile, dv, reduce, [&](int r, int c) { return dO[r * dv + c]; });
  for (int i = threadIdx.x; i < kTile * kAccumulatorStride; i += kThreads) dq_acc[i] = 0.0f;
  for (int r = threadIdx.x; r < rows; r += kThreads)
    lse_log2[r] = p.lse_log2[p.q_row(b, h, q0) + r], delta[r] = p.delta[p.q_row(b, h, q0) + r];
  for (int k0 = 0; k0 < p.keys; k0 += kTile) {
    const int cols = min(kTile, p.keys - k0);
    if (p.causal && k0 > q0 + rows - 1) break;
    const float* K = p.k + p.k_row(b, g, k0) * d;
    const float* V = p.v + p.k_row(b, g, k0) * dv;
    stage(x_op, p.fp16.qk, false, cols, kTile, d, reduce, [&](int r, int c) { return K[r * d + c]; });
    stage(y_op, p.fp16.dp, false, cols, kTile, dv, reduce, [&](int r, int c) { return V[r * dv + c]; });
    scores(p, q_op, x_op, q0, k0, prob);
    probabilities(prob, lse_log2, rows, cols);
    score_gradients(d_out_op, y_op, prob, delta, rows, cols, ds);
    // dQ += dS K / sqrt(d).
    stage(x_op, p.fp16.dq, false, rows, kTile, cols, reduce, [&](int r, int c) { return ds[r * kScoreStride + c]; });
    stage(y_op, p.fp16.dq, false, d, d, cols, reduce, [&](int r, int c) { return K[c * d + r]; });
    product(x_op, y_op, d, [&](int r, int c, float x) {
      float& acc = dq_acc[r * kAccumulatorStride + c];
      acc = steps::fma_rn(x, p.inv_sqrt_d, acc);
    });
  }
  for (int i = threadIdx.x; i < rows * d; i += kThreads)
    p.dq[(p.q_row(b, h, q0) + i / d) * d + i % d] = dq_acc[(i / d) * kAccumulatorStride + i % d];
}

__global__ void exact_function(lowbit::attention::ExactFunction f, std::uint32_t first, std::uint32_t count,
                               std::uint32_t* out) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
    const float x = __uint_as_float(first + i);
    out[i] = __float_as_uint(f == lowbit::attention::ExactFunction::exp2 ? exp2_exact(x) : log2_exact(x));
  }
}

// ---- host ------------------------------------------------------------------------------------

// Device memory freed on every path.
template <class T>
struct DeviceBuffer {
  T* data = nullptr;
  std::size_t count = 0;
  explicit DeviceBuffer(std::size_t n, const char* what) : count(n) {
    check_cuda(cudaMalloc(&data, std::max<std::size_t>(n, 1) * sizeof(T)), what);
  }
  DeviceBuffer(const std::vector<T>& host, const char* what) : DeviceBuffer(host.size(), what) {
    check_cuda(cudaMemcpy(data, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), what);
  }
  ~DeviceBuffer() { cudaFree(data); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::vector<T> download(const char* what) const {
    std::vector<T> host(count);
    check_cuda(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost), what);
    return host;
  }
};

// Once per process (one device): the hard cases of exp2 and log2 into this unit's constant memory.
void upload_tables() {
  static const cudaError_t status = upload_exact_rounding_tables();
  check_cuda(status, "cudaMemcpyToSymbol (exp2/log2 hard cases)");
}

}  // namespace

SageBwdOutputs launch_sage_bwd(const SageBwdLaunch& l) {
  upload_tables();
  const std::size_t rows = std::size_t(l.batch) * std::size_t(l.heads) * std::size_t(l.tokens);
  DeviceBuffer<float> q_in(*l.q, "cudaMemcpy (Q)"), k_in(*l.k, "cudaMemcpy (K)"), v_in(*l.v, "cudaMemcpy (V)"),
      d_out_in(*l.d_out, "cudaMemcpy (dO)");
  DeviceBuffer<float> o(rows * std::size_t(l.value_dim), "cudaMalloc (O)"), lse(rows, "cudaMalloc (LSE)"),
      lse_log2(rows, "cudaMalloc (L)"), delta(rows, "cudaMalloc (D)"), dq_out(l.q->size(), "cudaMalloc (dQ)"),
      dk_out(l.k->size(), "cudaMalloc (dK)"), dv_out(l.v->size(), "cudaMalloc (dV)");
  Params p{};
  p.q = q_in.data, p.k = k_in.data, p.v = v_in.data, p.d_out = d_out_in.data;
  p.o = o.data, p.lse = lse.data, p.lse_log2 = lse_log2.data, p.delta = delta.data;
  p.dq = dq_out.data, p.dk = dk_out.data, p.dv = dv_out.data;
  p.heads = l.heads, p.kv_heads = l.kv_heads, p.tokens = l.tokens, p.keys = l.keys, p.dim = l.dim, p.value_dim = l.value_dim;
  p.causal = l.causal;
  p.scale_log2 = l.scale_log2;
  p.inv_sqrt_d = l.inv_sqrt_d;
  p.fp16 = {l.qk_fp16, l.pv_fp16, l.dv_fp16, l.dp_fp16, l.dq_fp16, l.dk_fp16};
  const unsigned q_tiles = unsigned((l.tokens + kTile - 1) / kTile), k_tiles = unsigned((l.keys + kTile - 1) / kTile);
  check_cuda(cudaFuncSetAttribute(forward, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kForwardShared)),
             "cudaFuncSetAttribute (forward)");
  check_cuda(cudaFuncSetAttribute(dk_dv, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kDkDvShared)),
             "cudaFuncSetAttribute (dk_dv)");
  check_cuda(cudaFuncSetAttribute(dq, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kDqShared)),
             "cudaFuncSetAttribute (dq)");
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start), "cudaEventRecord");
  forward<<<dim3(q_tiles, unsigned(l.heads), unsigned(l.batch)), kThreads, kForwardShared>>>(p);
  check_cuda(cudaGetLastError(), "sage_bwd forward launch");
  dk_dv<<<dim3(k_tiles, unsigned(l.kv_heads), unsigned(l.batch)), kThreads, kDkDvShared>>>(p);
  check_cuda(cudaGetLastError(), "sage_bwd dk_dv launch");
  dq<<<dim3(q_tiles, unsigned(l.heads), unsigned(l.batch)), kThreads, kDqShared>>>(p);
  check_cuda(cudaGetLastError(), "sage_bwd dq launch");
  check_cuda(cudaEventRecord(stop), "cudaEventRecord");
  check_cuda(cudaDeviceSynchronize(), "sage_bwd kernels");
  SageBwdOutputs out;
  check_cuda(cudaEventElapsedTime(&out.kernel_milliseconds, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  out.output = o.download("cudaMemcpy (O)");
  out.lse = lse.download("cudaMemcpy (LSE)");
  out.lse_log2 = lse_log2.download("cudaMemcpy (L)");
  out.delta = delta.download("cudaMemcpy (D)");
  out.dq = dq_out.download("cudaMemcpy (dQ)");
  out.dk = dk_out.download("cudaMemcpy (dK)");
  out.dv = dv_out.download("cudaMemcpy (dV)");
  return out;
}

void launch_exact_function(lowbit::attention::ExactFunction f, std::uint32_t first, std::vector<std::uint32_t>& out) {
  if (out.empty()) return;
  upload_tables();
  DeviceBuffer<std::uint32_t> device(out.size(), "cudaMalloc (exact function outputs)");
  exact_function<<<4096, 256>>>(f, first, std::uint32_t(out.size()), device.data);
  check_cuda(cudaGetLastError(), "exact_function launch");
  out = device.download("cudaMemcpy (exact function outputs)");
}

}  // namespace lowbit::kernels::attention
