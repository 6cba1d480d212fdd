// The intra-chunk part of chunkwise gated linear attention (GLA with secondary chunking) on Hopper
// (sm_90a): scores and P V of every chunk, in four precisions, each bit for bit the emulated
// pipeline linear::intra_chunk(linear::preset(preset_of(kernel), {64, 16})) (emulation/linear/gla.hpp).
//
// One thread block (one warpgroup, 128 threads) per (head, chunk of 64 tokens), sub-chunks of 16:
//   gates     log2 running sums over the chunk (linear_steps.hpp), one thread per key channel
//   diagonal  the 4 diagonal 16 x 16 blocks of P in fp32 (diagonal_score), all threads
//   strips    for query sub-chunk i = 1..3: Q~_i and the K~ strip gated against the reference row
//             of i; warp j < i computes block (i, j) with mma.sync over d_k:
//               bf16:  m16n8k16.f32.bf16.bf16 on the bf16 casts of Q~, K~
//               int8:  Q~, K~ minus their sub-chunk means (double sums rounded once), per-thread
//                      INT8 scales of the m16n8 fragment (Q rows r, r+8; K keys 2l, 2l+1, 2l+8,
//                      2l+9), m16n8k32.s32.s8.s8, dequantized with one scale product, plus
//                      qbar . gamma(K~_s) and Q~_t . kbar_j
//   P V       wgmma m64nNk16 bf16 (P, V cast), or m64nNk32 e4m3 (P per token, V per channel over
//             the chunk, one fresh FP22 accumulator for the chunk's two MMAs added into fp32),
//             A = P and B = V^T from shared memory, K-major, no swizzle, N = min(d_v, 128) per tile
// It writes the intra-chunk output and P (both fp32); the inter-chunk part is not computed here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace lowbit::kernels {

enum class GlaIntraKernel : std::uint8_t { bf16, int8_smooth, bf16_fp8, int8_smooth_fp8 };
inline constexpr GlaIntraKernel kGlaIntraKernels[] = {GlaIntraKernel::bf16, GlaIntraKernel::int8_smooth,
                                                      GlaIntraKernel::bf16_fp8, GlaIntraKernel::int8_smooth_fp8};
// The emulated preset (emulation/linear/gla.hpp) the kernel computes bit for bit.
std::string_view preset_of(GlaIntraKernel kernel);

inline constexpr int kGlaChunk = 64, kGlaSubChunk = 16;

struct GlaIntraShape {
  int heads = 1;
  int tokens = 64;  // a multiple of the chunk
  int dk = 128;
  int dv = 128;

  // The shapes built: (d_k, d_v) = (64, 64), (128, 128), (128, 256).
  std::optional<std::string> validate() const;
};

// Device pointers, fp32, row-major: q, k, log_alpha [heads, tokens, dk]; v [heads, tokens, dv];
// intra [heads, tokens, dv]; scores [heads, tokens, kGlaChunk] (P, zero above the diagonal).
// Asynchronous on `stream` (a cudaStream_t; null: the default stream); throws std::runtime_error
// for a shape that does not validate or a launch error.
void launch_gla_intra(GlaIntraKernel kernel, const GlaIntraShape& shape, const float* q, const float* k,
                      const float* v, const float* log_alpha, float* intra, float* scores, void* stream = nullptr);

}  // namespace lowbit::kernels
