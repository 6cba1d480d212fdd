// SageAttention2-8b kernels for Hopper (sm_90a): K/V statistics, quantization, attention.
// Every fp32 step is a function of emulation/attention/kernel_steps.hpp or sage2_hopper.hpp; the
// tiling, the groups and the KV order are the recipe's (sage2_8b_hopper).
//
// The attention kernel: every warpgroup runs one unit, the 64 query rows of a Q block that the
// recipe gives one consumer warpgroup, of one (Q head, batch); a thread block holds the
// kUnitsPerBlock consecutive units of a head, kBlocksPerSm blocks per SM (AttentionShape):
//   per KV block, in order: S = Q K'^T (wgmma s8, exact), the contract's steps 1-7 in registers,
//     P's E4M3 codes moved from the S fragment to the A fragment of P V (fragment.hpp), R = P V
//     (wgmma e4m3 from +0), o = fma(o, alpha, R); at the end the lanes' row sums, the
//     normalization, the LSE with its smoothing bias. A warpgroup waits for each wgmma: the other
//     warpgroups of the SM, at other points of their loops, keep the tensor cores and the
//     exponential unit busy meanwhile;
//   K and V of every KV block reach a ring of shared-memory stages that the block's warpgroups
//     share, one bulk copy per tile (the tiles are stored in shared-memory order); each stage has a
//     "full" mbarrier (its bytes landed) and an "empty" one (every unit reading it released it),
//     and its refills go round robin to the units.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "kernels/attention/sage2_kernels.cuh"
#include "kernels/device.hpp"
#include "kernels/quant_codes.cuh"
#include "kernels/sm90/copy.cuh"
#include "kernels/sm90/fragment.hpp"
#include "kernels/sm90/smem_layout.hpp"
#include "kernels/sm90/sync.cuh"
#include "kernels/sm90/wgmma.cuh"

namespace lowbit::kernels::attention::detail {
namespace {

namespace steps = lowbit::attention::steps;
using lowbit::attention::KvOrder;
using lowbit::attention::Sage2HopperRecipe;
using lowbit::attention::sage2_8b_hopper;
using sm90::KMajorLayout;

constexpr int kThreads = 256;  // threads of the quantization kernel
constexpr float kInt8Target = 127.0f;   // max_finite(int8): Q and K scales are amax / 127
constexpr float kE4m3Target = 448.0f;   // max_finite(e4m3): V scales are amax / 448

// The per-thread groups of the recipe (quant::derive_groups on the host; [0]: d = 64, [1]: d = 128).
__constant__ quant::QkGroups kGroups[2];
__device__ inline const quant::QkGroups& groups_of(int head_dim) { return kGroups[head_dim == 128]; }

template <class T>
__device__ inline float to_float(T x);
template <>
__device__ inline float to_float(__half x) { return __half2float(x); }
template <>
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __half from_float(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }

// Two adjacent outputs, each rounded to nearest even, in one 4-byte store.
__device__ inline void store_pair(__half* at, float a, float b) {
  *reinterpret_cast<__half2*>(at) = __floats2half2_rn(a, b);
}
__device__ inline void store_pair(__nv_bfloat16* at, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(a, b);
}

// Two adjacent 16-bit values, one 4-byte load.
template <class T>
using PairOf = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

// Every row of a tensor (rows `stride` elements apart from `first`) starts at a multiple of `bytes`:
// what a kernel's loads of `bytes` a row piece need (else it reads element by element).
template <class T>
__device__ inline bool rows_aligned(const T* first, long long stride, int bytes) {
  return reinterpret_cast<std::uintptr_t>(first) % bytes == 0 && stride * static_cast<long long>(sizeof(T)) % bytes == 0;
}

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
// round trips set the time (one chunk at a time: 11.2 us at d = 128, N = 8K on an H100).
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

// ---- quantization of one block of tokens of one head --------------------------------------------
// Rows of the block (block_q for Q, block_kv for K) are spread over the warps, each lane holding
// HeadDim / 32 consecutive channels of a row (its codes: one store). Group amax = max over the
// group's rows of the row amax (max is exact, so the order is free: a warp takes its rows' maximum
// into their group by an atomic max on the bits, which order non-negative floats as unsigned
// integers); scale = amax / 127 in fp32; codes from the fp32 quotient.
template <int MaxRows>
struct QuantizeTile {
  unsigned group_amax_bits[MaxRows];  // zero, and a barrier since, before quantize_int8_block
  float group_scale[MaxRows];
  float group_inverse[MaxRows];
};

// The channels of a row that lane l of a warp holds in quantize_int8_block: kChannelsPerLane
// consecutive ones from first_channel_of_lane(l).
template <int HeadDim>
inline constexpr int kChannelsPerLane = HeadDim / 32;
template <int HeadDim>
__device__ constexpr int first_channel_of_lane(int lane) { return kChannelsPerLane<HeadDim> * lane; }

// N consecutive values of a staged row from an even channel, as fp32, a 4-byte load per pair.
template <int N, class T>
__device__ inline void load_pairs(const T* from, float (&x)[N]) {
#pragma unroll
  for (int e = 0; e < N; e += 2) {
    const PairOf<T> pair = *reinterpret_cast<const PairOf<T>*>(from + e);
    x[e] = to_float(pair.x), x[e + 1] = to_float(pair.y);
  }
}

// load(row, x) fills x with the fp32 values of the calling lane's channels of the row (0 for
// padding rows); writes their codes at codes[at(row)] (consecutive bytes there) and the raw group
// scales.
template <int Rows, int HeadDim, bool SmallScales, int MaxRows, class Load, class At>
__device__ void quantize_int8_block(const quant::BlockGroups& groups, Load load, std::int8_t* codes, At at,
                                    QuantizeTile<MaxRows>& tile) {
  static_assert(Rows <= MaxRows);
  constexpr int kPerLane = kChannelsPerLane<HeadDim>, kWarps = kThreads / 32;
  using Word = std::conditional_t<kPerLane == 4, std::uint32_t, std::uint16_t>;  // a lane's codes of a row
  static_assert(kPerLane == 4 || kPerLane == 2, "d = 128 or 64");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // A warp's rows (warp, warp + kWarps, ...) often share a group (K's per-thread groups are rows 8
  // apart): a lane keeps a running maximum, and the warp reduces it into the group only where the
  // next row's group differs (the rows are the warp's, so the branch is uniform).
  float amax = 0.0f;
  for (int row = warp; row < Rows; row += kWarps) {
    float x[kPerLane];
    load(row, x);
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) amax = fmaxf(amax, fabsf(x[e]));
    const int group = groups.group_of_row[row];
    if (row + kWarps < Rows && groups.group_of_row[row + kWarps] == group) continue;
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
    if (lane == 0) atomicMax(&tile.group_amax_bits[group], __float_as_uint(amax));
    amax = 0.0f;
  }
  __syncthreads();
  for (int group = threadIdx.x; group < groups.count; group += kThreads) {
    const float scale = __fdiv_rn(__uint_as_float(tile.group_amax_bits[group]), kInt8Target);
    tile.group_scale[group] = scale;
    tile.group_inverse[group] = inverse_of(scale);
  }
  __syncthreads();
  for (int row = warp; row < Rows; row += kWarps) {
    const int group = groups.group_of_row[row];
    float x[kPerLane];
    load(row, x);
    *reinterpret_cast<Word*>(codes + at(row)) = Word(int8_codes<SmallScales>(x, tile.group_scale[group], tile.group_inverse[group]));
  }
}

// P's key of each position of a group of 32 as compile-time data a thread reads in two shifts:
// word j holds key_of_column[4 q + j] for q = 0 .. 7, 5 bits each.
constexpr std::array<std::uint64_t, 4> key_fields_of(const sm90::AccumulatorToA8& map) {
  static_assert(sm90::AccumulatorToA8::kGroupColumns == 32, "5-bit keys, 8 words of 4 positions");
  std::array<std::uint64_t, 4> fields{};
  for (int q = 0; q < 8; ++q)
    for (int j = 0; j < 4; ++j) fields[j] |= std::uint64_t(map.key_of_column[4 * q + j]) << (5 * q);
  return fields;
}

// Blocks of quantize_block an SM must hold by its registers: at d = 128 the 6 its shared memory
// allows (ptxas takes 48 registers otherwise, room for 5); at d = 64 ptxas's choice (78 registers,
// 3 blocks; 64 spill).
template <int HeadDim>
inline constexpr int kQuantizeMinBlocks = HeadDim == 128 ? 6 : 1;

// blockIdx.x: the token block; blockIdx.y: KV heads first, then Q heads; blockIdx.z: the batch. The
// batches and the KV heads run in the reverse of key_value_statistics' order, so the first blocks
// read the K and V that the statistics read last, while the L2 still holds them.
template <class T, int HeadDim>
__global__ void __launch_bounds__(kThreads, kQuantizeMinBlocks<HeadDim>) quantize_block(const QuantizeParams p) {
  constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim);
  constexpr int kQRows = recipe.block_q, kRows = recipe.block_kv;  // a Q block, a K/V block
  constexpr int kMaxRows = kQRows > kRows ? kQRows : kRows;
  constexpr sm90::AccumulatorToA8 p_map = sm90::accumulator_to_a8(recipe.block_kv);
  static_assert(p_map.consistent, "the accumulator -> A fragment map of P");
  __shared__ QuantizeTile<kMaxRows> tile;
  __shared__ float channel[HeadDim];          // K mean or V scale
  __shared__ float channel_inverse[HeadDim];  // V: inverse_of(scale)
  // The block's Q, K or V values, read from global memory once, row by row (coalesced); each pass
  // (row amax, codes, the LSE bias, V's transposed store) reads them here. (Rows 2 elements longer:
  // V's pass reads 32 rows of one channel at once, then in 32 banks.)
  __shared__ __align__(16) T values[kMaxRows][HeadDim + 2];
  const quant::QkGroups& groups = groups_of(HeadDim);
  constexpr int kPerLane = kChannelsPerLane<HeadDim>;
  constexpr bool kSmallScales = !std::is_same_v<T, __half>;  // scales below 2^-92 (quant_codes.cuh)
  const int block = blockIdx.x, b = p.batch - 1 - int(blockIdx.z);
  // The group maxima start at 0 (every path stages its values, whose barrier follows, before
  // quantize_int8_block).
  for (int group = threadIdx.x; group < kMaxRows; group += kThreads) tile.group_amax_bits[group] = 0;
  // 16 bytes a load where the rows allow it (4-byte stores into the padded rows), else 2; rows: a
  // multiple of 4. A warp takes a patch of 4 rows x 8 pieces: rows are 1 word past a multiple of
  // 32 banks and a piece is 4 words, so the patch's 32 stores of each word land in 32 banks (2 rows
  // x 16 pieces conflicted 2 ways).
  // Warp w takes patch w mod kPatchesAcross of rows 4 (w / kPatchesAcross) .. + 3, then the same
  // patch kRowsPerRound rows further each round: a thread's channels stay fixed. `rows` (a
  // std::integral_constant): the block's rows.
  const auto stage = [&](const T* input, long long token_stride, int t0, auto rows) {
    constexpr int kRowsToStage = decltype(rows)::value;
    constexpr int kPiece = 16 / sizeof(T), kPieces = HeadDim / kPiece, kPatchesAcross = kPieces / 8;
    constexpr int kWarps = kThreads / 32, kRowsPerRound = kWarps / kPatchesAcross * 4;
    // A thread's loads go kBatch at a time, then their stores: one at a time, each store waiting
    // for its load, kept too few bytes in flight for the DRAM (Nsight Compute: 75% of its
    // throughput, half the warps' time waiting on the loads).
    constexpr int kBatch = 4;
    static_assert(sizeof(values[0]) % 128 == 4 && kPieces % 8 == 0, "a patch of 4 rows x 8 pieces in 32 banks");
    static_assert(kWarps % kPatchesAcross == 0 && kRowsToStage % (kBatch * kRowsPerRound) == 0,
                  "whole rows of patches a round, whole batches of rounds");
    if (rows_aligned(input, token_stride, 16)) {
      const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
      const int c = (warp % kPatchesAcross * 8 + lane % 8) * kPiece;
      for (int first = warp / kPatchesAcross * 4 + lane / 8; first < kRowsToStage; first += kBatch * kRowsPerRound) {
        uint4 bytes[kBatch];
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          const int t = t0 + first + k * kRowsPerRound;
          bytes[k] = t < p.tokens ? *reinterpret_cast<const uint4*>(input + t * token_stride + c) : uint4{0, 0, 0, 0};
        }
#pragma unroll
        for (int k = 0; k < kBatch; ++k) {
          std::uint32_t* to = reinterpret_cast<std::uint32_t*>(&values[first + k * kRowsPerRound][c]);
          to[0] = bytes[k].x, to[1] = bytes[k].y, to[2] = bytes[k].z, to[3] = bytes[k].w;
        }
      }
    } else {
      for (int e = threadIdx.x; e < kRowsToStage * HeadDim; e += kThreads) {
        const int row = e / HeadDim, c = e % HeadDim, t = t0 + row;
        values[row][c] = t < p.tokens ? input[t * token_stride + c] : from_float<T>(0.0f);
      }
    }
    __syncthreads();
  };
  // A KV head's K mean or V scales (key_mean_value_scales) into channel[].
  const auto load_channels = [&](const float* values) {
    for (int c = threadIdx.x; c < HeadDim; c += kThreads) channel[c] = values[c];
    __syncthreads();
  };
  if (int(blockIdx.y) >= p.heads_kv) {
    const int h = blockIdx.y - p.heads_kv, t0 = block * kQRows;
    if (t0 >= p.padded_q) return;
    stage(static_cast<const T*>(p.q) + b * p.q_strides.batch + h * p.q_strides.head, p.q_strides.token, t0, std::integral_constant<int, kQRows>{});
    const int c0 = first_channel_of_lane<HeadDim>(threadIdx.x % 32);
    const auto load = [&](int row, float (&x)[kPerLane]) { load_pairs(&values[row][c0], x); };  // padding rows hold 0
    const long long head = (long long)b * p.heads_q + h;
    quantize_int8_block<kQRows, HeadDim, kSmallScales>(groups.q, load, p.out.q_codes + (head * p.padded_q + t0) * HeadDim,
                                         [&](int row) { return row * HeadDim + c0; }, tile);
    for (int group = threadIdx.x; group < groups.q.count; group += kThreads)
      p.out.q_scales[(head * (p.padded_q / kQRows) + block) * p.q_groups + group] =
          steps::fold_softmax_scale(tile.group_scale[group], p.softmax_scale_log2);
    // The row bias of the LSE: q . kbar of the row's KV head.
    load_channels(p.out.k_mean + ((long long)b * p.heads_kv + h / (p.heads_q / p.heads_kv)) * HeadDim);
    for (int row = threadIdx.x; row < kQRows; row += kThreads)
      p.out.q_bias[head * p.padded_q + t0 + row] =
          steps::smoothing_bias([&](int c) { return to_float(values[row][c]); }, channel, HeadDim, p.softmax_scale_log2);
    return;
  }
  const int h = p.heads_kv - 1 - int(blockIdx.y), t0 = block * kRows;
  if (t0 >= p.padded_kv) return;
  const long long head = (long long)b * p.heads_kv + h;
  const long long input_head = b * p.kv_strides.batch + h * p.kv_strides.head;
  load_channels(p.out.k_mean + head * HeadDim);
  stage(static_cast<const T*>(p.k) + input_head, p.kv_strides.token, t0, std::integral_constant<int, kRows>{});
  // The K means of this lane's channels in quantize_int8_block, in registers: read from channel[]
  // per value, 32 lanes 16 bytes apart conflicted 4 ways on the shared-memory banks.
  const int c0 = first_channel_of_lane<HeadDim>(threadIdx.x % 32);
  float kbar[kPerLane];
#pragma unroll
  for (int e = 0; e < kPerLane; ++e) kbar[e] = channel[c0 + e];
  const auto load = [&](int row, float (&x)[kPerLane]) {
    load_pairs(&values[row][c0], x);
#pragma unroll
    for (int e = 0; e < kPerLane; ++e) x[e] = t0 + row < p.tokens ? lowbit::attention::smooth_key(x[e], kbar[e]) : 0.0f;
  };
  // The block's codes are one tile (t0 a multiple of block_kv), so a row's offset is the tile's.
  quantize_int8_block<kRows, HeadDim, kSmallScales>(groups.k, load, p.out.k_codes + head * p.padded_kv * HeadDim + k_code_offset(t0, 0, HeadDim, kRows),
                                      [&](int row) { return k_code_offset(row, c0, HeadDim, kRows); }, tile);
  for (int group = threadIdx.x; group < groups.k.count; group += kThreads)
    p.out.k_scales[(head * (p.padded_kv / kRows) + block) * p.k_groups + group] = tile.group_scale[group];
  __syncthreads();  // channel[] and values[] are reused for V

  // V: the per-channel scales; codes stored as V^T with the P permutation.
  for (int c = threadIdx.x; c < HeadDim; c += kThreads) channel_inverse[c] = inverse_of(p.out.v_scales[head * HeadDim + c]);
  load_channels(p.out.v_scales + head * HeadDim);
  stage(static_cast<const T*>(p.v) + input_head, p.kv_strides.token, t0, std::integral_constant<int, kRows>{});
  // Thread -> (channel, 4 consecutive positions): one 4-byte store. A warp takes 8 words of 4
  // channels: its 8 rows of a position j lie in one group of P's columns, so they are 8 distinct
  // keys in 8 distinct banks (32 words of one channel conflicted 4 ways). A thread keeps its
  // positions in every round, so its 4 keys are looked up once, in 5-bit fields of compile-time
  // words (a run-time index into p_map compiles to a chain of selects).
  constexpr int kColumns = sm90::AccumulatorToA8::kGroupColumns, kWords = kRows / 4, kWordGroups = kWords / 8;
  static_assert(kWords % 8 == 0 && kColumns == 32 && (kThreads / 32) % kWordGroups == 0,
                "a warp's 8 words in one group of columns, the same positions in every round");
  constexpr std::array<std::uint64_t, 4> key_fields = key_fields_of(p_map);
  constexpr int kChannelsPerRound = 4 * (kThreads / 32 / kWordGroups);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int position = (warp % kWordGroups * 8 + lane / 4) * 4;  // its group: warp % kWordGroups; q = lane / 4
  int keys[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) keys[j] = warp % kWordGroups * kColumns + int(key_fields[j] >> (5 * (lane / 4)) & 31);
  std::uint8_t* v_codes = p.out.v_codes + head * p.padded_kv * HeadDim + v_code_offset(0, t0, HeadDim, kRows);
  for (int c = lane % 4 + 4 * (warp / kWordGroups); c < HeadDim; c += kChannelsPerRound) {
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = to_float(values[keys[j]][c]);
    *reinterpret_cast<std::uint32_t*>(v_codes + v_code_offset(c, position, HeadDim, kRows)) =
        e4m3_codes<kSmallScales>(v, channel[c], channel_inverse[c]);
  }
}

// The exponential steps with the recipe's exp2 (unit and polynomial) as a template parameter
// object: its coefficients and degree are then constants of the code (a function-local record
// would live in local memory and be read at run time).
template <steps::Exp2 Exp2>
__device__ inline float probability(float score, float offset) {
  return steps::probability(score, offset, Exp2);
}
template <steps::Exp2 Exp2>
__device__ inline float fused_probability(float acc, float scale, float offset) {
  return steps::fused_probability(acc, scale, offset, Exp2);
}
template <steps::Exp2 Exp2>
__device__ inline float rescale(float old_offset, float new_offset) {
  return steps::rescale(old_offset, new_offset, Exp2);
}

// ---- attention -----------------------------------------------------------------------------------
// How the units share the SM, per head dimension (chosen side by side on an H100,
// docs/attention-kernel-history.md): at d = 128, three warpgroups in one block share a ring of 4
// stages (the L2 then sends each K/V block once per 192 query rows, a third of the energy of one
// warpgroup per block; the kernel runs at the GPU's power limit); at d = 64, one warpgroup per
// block and four blocks per SM.
template <int HeadDim>
struct AttentionShape {
  static constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim);
  static constexpr int kUnitsPerQBlock = recipe.consumer_warps / 4;
  static constexpr int kUnitsPerBlock = HeadDim == 128 ? 3 : 1;
  static constexpr int kBlocksPerSm = HeadDim == 128 ? 1 : 4;
  static constexpr int kStages = HeadDim == 128 ? 4 : 2;
  // Where a unit refills the stage of the block before: while its P V runs at d = 128 (work in the
  // shorter Q K^T wait held the unit back: 2-3% of the kernel's time at N = 8K, runs 44-46 of
  // f6dfbb2:results/attention-gpu/runs/variants/2026-11-27/), while its Q K^T runs at d = 64 (2 stages:
  // refilled at P V, the ring holds too little ahead).
  static constexpr bool kRefillAtPv = HeadDim == 128;
  // Where a unit releases a stage: at d = 128 while its next Q K^T runs (`release` in the kernel);
  // at d = 64, one unit a block, right after the barrier that ends its P V (1-2% faster non-causal,
  // 2-4% causal: runs 46 and 49).
  static constexpr bool kReleaseAtBarrier = HeadDim == 64;
  // Whether a unit's warps meet at a named barrier after each P V, so that thread 0 releases the
  // stage for the unit (one arrival a unit), or each warp releases it on its own (its lane 0: 4
  // arrivals a unit) and the warps meet once, after the loop. Without the barrier the non-causal
  // d = 128 kernel was 1.5-1.6% faster at N = 8K and 0.4-0.8% at 16K, the causal ones 0.8-0.9%
  // slower, d = 64 0.5-0.9% slower (runs 59-60 of f6dfbb2:results/attention-gpu/runs/variants/2026-11-28/).
  static constexpr bool barrier_in_loop(bool causal) { return HeadDim == 64 || causal; }
  // What a block asks for before its loop. Non-causal at d = 128 (one block an SM, nothing else
  // running there while it starts): its units' Q tiles first, then stage 0, and stages 1 .. once
  // unit 0's Q tile landed. Asked for with the ring's 128 KB, the Q tiles that the first Q K^T
  // needs came later (a block's entry took 3929 cycles to its first KV block, 3263 this way), and
  // the kernel took 2.0-2.7% longer at N = 8K, 1.6-2.2% at 16K; asking for the Q tiles first but
  // all stages at once gains nothing (runs 53-55 of f6dfbb2:results/attention-gpu/runs/variants/2026-11-28/).
  // Causal (0.1-1.2% slower this way) and at d = 64 (four blocks an SM), the stages first.
  static constexpr bool q_tiles_first(bool causal) { return HeadDim == 128 && !causal; }
  static constexpr int stages_at_entry(bool causal) { return q_tiles_first(causal) ? 1 : kStages; }
  static constexpr int kThreads = 128 * kUnitsPerBlock;
  // Shared memory: the units' Q tiles (64 x d each), then kStages stages of the K tile (block_kv x d)
  // and of the V^T tile (d x block_kv), all K-major without swizzle (kernels/sm90/smem_layout.hpp).
  static constexpr int kQBytes = 64 * HeadDim;
  static constexpr int kKBytes = recipe.block_kv * HeadDim;
  static constexpr int kVBytes = HeadDim * recipe.block_kv;
  static constexpr int kBytes = kUnitsPerBlock * kQBytes + kStages * (kKBytes + kVBytes);
  // sm_90: 228 KiB of shared memory an SM, 1 KiB of it reserved per block; the kernel's static
  // shared memory (the stages' mbarriers and release counts) is under 1 KiB.
  static constexpr int kSmemPerSm = 228 * 1024, kSmemReservedPerBlock = 1024, kStaticBytes = 1024;
  static_assert(kBlocksPerSm * (kBytes + kStaticBytes + kSmemReservedPerBlock) <= kSmemPerSm, "the blocks fit the SM");
  // Named barrier kUnitDone + w: the 128 threads of warpgroup w (0 is __syncthreads').
  static constexpr int kUnitDone = 1;
  static_assert(kUnitDone + kUnitsPerBlock <= 16, "16 named barriers");
  // The stage of KV block i (i >= 0; unsigned, so the remainder is a mask), and the parity of the
  // phase of that stage's mbarrier the block is (the stage's (i / kStages)-th fill).
  static constexpr int stage_of(int i) { return int(unsigned(i) % kStages); }
  static constexpr std::uint32_t parity_of(int i) { return unsigned(i) / kStages % 2; }
};

// Rows x KBytes of row-major global bytes (rows `row_stride` apart) into a K-major tile, by the
// warpgroup's threads (its Q tile, once).
template <int Rows, int KBytes>
__device__ inline void load_tile_async(std::uint8_t* smem, const std::uint8_t* global, long long row_stride,
                                       int thread) {
  constexpr KMajorLayout layout{KBytes};
  constexpr int kPieces = Rows * KBytes / KMajorLayout::kCoreRowBytes;
  static_assert(kPieces % 128 == 0, "whole rounds of 16-byte copies");
#pragma unroll
  for (int piece = thread; piece < kPieces; piece += 128) {
    const int row = layout.piece_row(piece), k_byte = layout.piece_k_byte(piece);
    sm90::copy_16_async(smem + layout.offset(row, k_byte), global + row * row_stride + k_byte);
  }
}

// A unit's Q tile: the codes of its 64 rows from `first_row` of the Q codes into its tile, by its 128
// threads (cp.async, which needs no mbarrier).
template <int HeadDim>
__device__ inline void load_q_tile(std::uint8_t* tile, const AttentionParams& p, long long first_row, int thread) {
  load_tile_async<64, HeadDim>(tile, reinterpret_cast<const std::uint8_t*>(p.q_codes) + first_row * HeadDim, HeadDim, thread);
  sm90::commit_copies();
}

// A warpgroup's accumulator F: the first value of thread t (warp j, lane l) is in row 16 j + l / 4,
// and every other value in that row or 8 below it.
template <layout::Fragment F>
constexpr bool warp_holds_16_rows() {
  for (int t = 0; t < F.threads(); ++t) {
    const int first = t / 32 * 16 + t % 32 / 4;
    if (F(t, 0).row != first) return false;
    for (int v = 0; v < F.value_count; ++v)
      if (F(t, v).row != first && F(t, v).row != first + 8) return false;
  }
  return true;
}

template <class Out, int HeadDim, bool Causal, steps::Exp2Unit Exp2Unit>
__global__ void __launch_bounds__(AttentionShape<HeadDim>::kThreads, AttentionShape<HeadDim>::kBlocksPerSm)
    sage2_attention_kernel(const AttentionParams p) {
  using Shape = AttentionShape<HeadDim>;
  constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim, Exp2Unit);
  constexpr int kBlockQ = recipe.block_q, kBlockKv = recipe.block_kv, kUnits = Shape::kUnitsPerBlock;
  static_assert(kBlockQ == 64 * Shape::kUnitsPerQBlock && recipe.consumer_warps % 4 == 0,
                "one consumer warpgroup per 64 query rows");
  // Every unit reads the KV blocks in one order, so its block's units can share the ring.
  static_assert(recipe.kv_order == KvOrder::ascending, "the units of a block read the KV blocks in one order");
  using SWgmma = sm90::WgmmaS8<kBlockKv>;
  using PvWgmma = sm90::WgmmaE4m3<HeadDim>;
  constexpr layout::Fragment kS = SWgmma::accumulator;  // S: rows of a warpgroup x block_kv keys
  constexpr layout::Fragment kO = PvWgmma::accumulator;  // R and O: rows x head_dim channels
  constexpr auto s_values = sm90::value_offsets<kS>();
  constexpr auto o_values = sm90::value_offsets<kO>();
  constexpr sm90::AccumulatorRows s_rows = sm90::accumulator_rows(kBlockKv);
  constexpr sm90::AccumulatorToA8 p_map = sm90::accumulator_to_a8(kBlockKv);
  static_assert(s_rows.consistent && p_map.consistent, "fragment maps");
  constexpr int kSValues = SWgmma::kRegisters, kOValues = PvWgmma::kRegisters, kPerRow = s_rows.per_row;
  constexpr int kPGroups = p_map.groups;  // k32 steps of P·V
  constexpr KMajorLayout q_layout{HeadDim}, k_layout{HeadDim}, v_layout{kBlockKv};

  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* k_tiles = smem + kUnits * Shape::kQBytes;
  std::uint8_t* v_tiles = k_tiles + Shape::kStages * Shape::kKBytes;

  // This warpgroup's unit (broadcast from lane 0: the compiler then keeps what derives from it, the
  // wgmma descriptors, in uniform registers); blocks of the longest units first when causal.
  const int units = p.padded_q / 64, blocks = (units + kUnits - 1) / kUnits;
  const int block = Causal ? blocks - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int w = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0), thread = threadIdx.x % 128;
  const int unit = block * kUnits + w;
  const int q_block = unit / Shape::kUnitsPerQBlock, q0 = q_block * kBlockQ;
  const int unit_row = unit % Shape::kUnitsPerQBlock * 64;  // in the Q block
  const int hq = blockIdx.y, b = blockIdx.z, hkv = hq / (p.heads_q / p.heads_kv);
  const long long q_head = (long long)b * p.heads_q + hq, kv_head = (long long)b * p.heads_kv + hkv;
  const std::uint8_t* k_codes = reinterpret_cast<const std::uint8_t*>(p.k_codes) + kv_head * p.padded_kv * HeadDim;
  const std::uint8_t* v_codes = p.v_codes + kv_head * HeadDim * p.padded_kv;

  // KV blocks of unit u: every block with a key visible to some query of the unit (none past the
  // last unit). Causal, a later unit of the block sees as many blocks or more.
  const auto kv_count_of = [&](int u) {
    if (u >= units) return 0;
    return ((Causal ? min(p.tokens, u * 64 + 64) : p.tokens) - 1) / kBlockKv + 1;
  };
  // The block's last unit (of those not past the last unit of the head): it reads every KV block the
  // block loads (causal, a later unit sees as many blocks or more).
  const int last_unit = min(kUnits, units - block * kUnits) - 1;
  const int kv_count = kv_count_of(unit), block_kv_count = kv_count_of(block * kUnits + last_unit);
  const auto readers_of = [&](int i) {  // the units of the block that read KV block i
    int readers = 0;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) readers += kv_count_of(block * kUnits + u) > i;
    return readers;
  };

  // Stage s: its "full" mbarrier (one arrival, the refilling thread's, and the bytes of its bulk
  // copies) and its "empty" one (one arrival per unit of the block).
  __shared__ std::uint64_t full[Shape::kStages];
  __shared__ std::uint64_t empty[Shape::kStages];
  const auto load_kv = [&](int i) {  // one thread: KV block i into its stage
    const int stage = Shape::stage_of(i);
    sm90::mbarrier_expect_bytes(&full[stage], Shape::kKBytes + Shape::kVBytes);
    sm90::bulk_copy_async(k_tiles + stage * Shape::kKBytes, k_codes + k_code_offset(i * kBlockKv, 0, HeadDim, kBlockKv),
                          Shape::kKBytes, &full[stage]);
    sm90::bulk_copy_async(v_tiles + stage * Shape::kVBytes, v_codes + v_code_offset(0, i * kBlockKv, HeadDim, kBlockKv),
                          Shape::kVBytes, &full[stage]);
    sm90::mbarrier_arrive(&full[stage]);
  };
  // KV block i's stage is free for this unit once all its warps' P V waits returned (their wgmma
  // reads of it complete there): thread 0 releases it past the unit barrier that follows them, or,
  // without that barrier (Shape::barrier_in_loop), each warp's lane 0 releases it for its warp. At
  // d = 128 block i - 1 is released while Q K^T of block i runs, where every warp of the unit waits
  // anyway (each warp releasing block i right after its P V wait instead: 1.1% slower at N = 8K,
  // run60); thread 0's release right after the barrier held warp 0 some 300 cycles behind the unit's
  // other warps at the next Q K^T, a wgmma that starts when all 4 have issued it (run39-run42 of
  // f6dfbb2:results/attention-gpu/runs/variants/2026-11-27/); at d = 64, see Shape::kReleaseAtBarrier. The
  // release is an arrival on the stage's empty mbarrier, which returns nothing to wait for.
  constexpr bool kBarrierInLoop = Shape::barrier_in_loop(Causal);
  constexpr int kReleasesPerUnit = kBarrierInLoop ? 1 : 128 / 32;  // thread 0, or each warp's lane 0
  const auto release = [&](int i) {
    if (kBarrierInLoop ? thread == 0 : thread % 32 == 0) sm90::mbarrier_arrive(&empty[Shape::stage_of(i)]);
  };
  // Block i's stage takes block i + kStages once every unit reading block i released it. The units
  // take turns at refilling in order; a unit that does not read block i + kStages leaves its turn
  // to the block's last unit, which reads every block (causal, a later unit sees as many or more).
  // The refiller arrives for the units that do not read block i, then waits for the empty phase:
  // one block after its own release, so the others' releases have mostly landed. The wait cannot
  // deadlock: each reader releases block i by its block i + 1 (or after its last block), and the
  // data of block i + 1 was asked for before (by the first loads or an earlier refill).
  const auto refill = [&](int i) {
    const int next = i + Shape::kStages, turn = i % kUnits;
    if (thread != 0 || i < 0 || next >= block_kv_count) return;
    if (w != (kv_count_of(block * kUnits + turn) > next ? turn : last_unit)) return;
    const int stage = Shape::stage_of(i), readers = readers_of(i);
    if (readers < kUnits) sm90::mbarrier_arrive(&empty[stage], (kUnits - readers) * kReleasesPerUnit);
    sm90::mbarrier_wait(&empty[stage], Shape::parity_of(i));
    load_kv(next);
  };
  constexpr bool kQTilesFirst = Shape::q_tiles_first(Causal);
  constexpr int kStagesAtEntry = Shape::stages_at_entry(Causal);
  // The Q tile's address is written out at each of its two places: computed once above both, it
  // made ptxas allocate the d = 64 kernels' registers otherwise (one of them spilled, run54).
  if constexpr (kQTilesFirst) {
    if (kv_count > 0) load_q_tile<HeadDim>(smem + w * Shape::kQBytes, p, q_head * p.padded_q + q0 + unit_row, thread);
  }
  if (threadIdx.x == 0) {
    for (int s = 0; s < Shape::kStages; ++s) {
      sm90::mbarrier_init(&full[s], 1);
      sm90::mbarrier_init(&empty[s], kUnits * kReleasesPerUnit);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < kStagesAtEntry && i < block_kv_count; ++i) load_kv(i);
  if (kv_count == 0) return;  // a block's units past the last
  std::uint8_t* q_tile = smem + w * Shape::kQBytes;
  if constexpr (!kQTilesFirst) load_q_tile<HeadDim>(q_tile, p, q_head * p.padded_q + q0 + unit_row, thread);
  sm90::wait_copies<0>();
  sm90::fence_async_shared();
  sm90::barrier_sync(Shape::kUnitDone + w, 128);
  if (threadIdx.x == 0)
    for (int i = kStagesAtEntry; i < Shape::kStages && i < block_kv_count; ++i) load_kv(i);

  const layout::Offset base = sm90::thread_offset<kS>(thread);  // this thread's first row (of 64) and first key column
  const int row0 = unit_row + base.row;  // in the Q block; the thread also holds row0 + 8
  const quant::QkGroups& groups = groups_of(HeadDim);
  const float q_scale = p.q_scales[(q_head * (p.padded_q / kBlockQ) + q_block) * p.q_groups + groups.q.group_of_row[row0]];
  const int k_group = groups.k.group_of_row[base.col];
  const float* k_scales = p.k_scales + kv_head * (p.padded_kv / kBlockKv) * p.k_groups + k_group;

  float o[kOValues];
#pragma unroll
  for (int i = 0; i < kOValues; ++i) o[i] = 0.0f;
  float m[2] = {steps::kNegativeInfinity, steps::kNegativeInfinity};
  float offset[2] = {steps::kNegativeInfinity, steps::kNegativeInfinity};
  float l[2] = {0.0f, 0.0f};
  // The descriptors of the Q tile and of stage 0's K and V^T tiles; a k32 slice or a stage further
  // is sm90::advance of them.
  const std::uint64_t q_descriptor = sm90::matrix_descriptor(q_tile, q_layout);
  const std::uint64_t k_descriptor = sm90::matrix_descriptor(k_tiles, k_layout);
  const std::uint64_t v_descriptor = sm90::matrix_descriptor(v_tiles, v_layout);

  for (int i = 0; i < kv_count; ++i) {
    const int stage = Shape::stage_of(i), kv0 = i * kBlockKv;
    // The block's K scale is read before the waits (which the compiler cannot move a load across).
    const float k_scale = k_scales[(long long)i * p.k_groups];
    sm90::mbarrier_wait(&full[stage], Shape::parity_of(i));

    // S = Q K'^T over head_dim / 32 k32 steps (exact s32).
    std::int32_t s_acc[kSValues];
    sm90::wgmma_fence();
#pragma unroll
    for (int step = 0; step < HeadDim / SWgmma::kK; ++step)
      SWgmma::mma(s_acc, sm90::advance(q_descriptor, q_layout.slice_offset(step, SWgmma::kK)),
                  sm90::advance(k_descriptor, stage * Shape::kKBytes + k_layout.slice_offset(step, SWgmma::kK)), step > 0);
    sm90::wgmma_commit();
    if (i > 0 && !Shape::kReleaseAtBarrier) release(i - 1);
    if (!Shape::kRefillAtPv) refill(i - 1);
    sm90::wgmma_wait<0>();
    sm90::fence_registers(s_acc);

    // Steps 1-7 of kernel_steps.hpp on this thread's two rows.
    // Step 2 first takes the lane's maximum of each row, in kMaxChains interleaved chains. Without
    // masked keys it runs over the integer accumulators: step 1 is monotone in them (scale >= 0), so
    // the largest score is the score of the largest accumulator, and the chains need not wait for
    // step 1 (nor keep its results beside the accumulators).
    constexpr int kMaxChains = 4;
    static_assert(kPerRow % kMaxChains == 0, "whole chains");
    const auto lane_max = [&](const auto& values, int h) {
      std::remove_cvref_t<decltype(values[0])> chains[kMaxChains];
#pragma unroll
      for (int c = 0; c < kMaxChains; ++c) chains[c] = values[s_rows.value[h][c]];
#pragma unroll
      for (int k = kMaxChains; k < kPerRow; ++k) chains[k % kMaxChains] = max(chains[k % kMaxChains], values[s_rows.value[h][k]]);
      return max(max(chains[0], chains[1]), max(chains[2], chains[3]));
    };
    // Fused (sage2-8b-ex2): x keeps the accumulators, and step 5 takes the scale in its fma.
    constexpr bool kFused = recipe.exp_argument == steps::ExpArgument::fused;
    const float pair_scale = steps::score_scale(q_scale, k_scale);
    const float scale = kFused ? steps::fused_scale(pair_scale) : pair_scale;
    const bool masked = kv0 + kBlockKv > p.tokens || (Causal && kv0 + kBlockKv - 1 > q0 + unit_row);
    float block_max[2];
    if (!masked)
#pragma unroll
      for (int h = 0; h < 2; ++h) block_max[h] = steps::dequantize_score(lane_max(s_acc, h), scale);
    float x[kSValues];
#pragma unroll
    for (int v = 0; v < kSValues; ++v) x[v] = kFused ? float(s_acc[v]) : steps::dequantize_score(s_acc[v], scale);
    if (masked) {
#pragma unroll
      for (int v = 0; v < kSValues; ++v) {
        const int key = kv0 + base.col + s_values[v].col, query = q0 + row0 + s_values[v].row;
        if (key >= p.tokens || (Causal && key > query)) x[v] = steps::kNegativeInfinity;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
        block_max[h] = kFused ? steps::dequantize_score(lane_max(x, h), scale) : lane_max(x, h);
    }
#pragma unroll
    for (int lanes = 1; lanes <= 2; lanes *= 2)
#pragma unroll
      for (int h = 0; h < 2; ++h) block_max[h] = fmaxf(block_max[h], __shfl_xor_sync(0xffffffffu, block_max[h], lanes));
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = fmaxf(m[h], block_max[h]);
      const float new_offset = steps::row_offset(m[h], recipe.p_log2_scale);
      alpha[h] = rescale<recipe.exp2>(offset[h], new_offset);
      offset[h] = new_offset;
      float p_row[kPerRow];
#pragma unroll
      for (int k = 0; k < kPerRow; ++k) {
        const int v = s_rows.value[h][k];
        x[v] = kFused ? fused_probability<recipe.exp2>(x[v], scale, new_offset)
                      : probability<recipe.exp2>(x[v], new_offset);
        p_row[k] = x[v];
      }
      l[h] = steps::update_row_sum(l[h], alpha[h], steps::tree_sum<kPerRow>(p_row));
    }
    std::uint32_t p_codes[kPGroups][4];
#pragma unroll
    for (int g = 0; g < kPGroups; ++g)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const auto& source = p_map.source[g];
        p_codes[g][r] = steps::e4m3_code_quad(x[source[4 * r]], x[source[4 * r + 1]], x[source[4 * r + 2]], x[source[4 * r + 3]]);
      }

    // Step 8: R = P V from +0 over the block's k32 steps (FP22). Keys within each group of 32 are
    // in the A fragment's order, V^T's rows in the same order (kernels/sm90/fragment.hpp).
    float r_acc[kOValues];
    sm90::wgmma_fence();
#pragma unroll
    for (int g = 0; g < kPGroups; ++g)
      PvWgmma::mma(r_acc, p_codes[g], sm90::advance(v_descriptor, stage * Shape::kVBytes + v_layout.slice_offset(g, PvWgmma::kK)),
                   g > 0);
    sm90::wgmma_commit();
    if (Shape::kRefillAtPv) refill(i - 1);
    sm90::wgmma_wait<0>();
    sm90::fence_registers(r_acc);
    if constexpr (kBarrierInLoop) sm90::barrier_sync(Shape::kUnitDone + w, 128);
    if (Shape::kReleaseAtBarrier) release(i);
    // Step 9: two-level accumulation.
#pragma unroll
    for (int v = 0; v < kOValues; ++v) o[v] = steps::accumulate_output(o[v], alpha[o_values[v].row / 8], r_acc[v]);
  }

  if (!Shape::kReleaseAtBarrier) release(kv_count - 1);
  if constexpr (!kBarrierInLoop) sm90::barrier_sync(Shape::kUnitDone + w, 128);  // the Q tile free

  // The end of the rows: l over the 4 lanes of a row, the normalization and the LSE.
  const int lane = threadIdx.x % 32, quad = lane & ~3;
  float inverse_l[2], lse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l0 = __shfl_sync(0xffffffffu, l[h], quad), l1 = __shfl_sync(0xffffffffu, l[h], quad + 1);
    const float l2 = __shfl_sync(0xffffffffu, l[h], quad + 2), l3 = __shfl_sync(0xffffffffu, l[h], quad + 3);
    const float row_sum = steps::combine_lanes(l0, l1, l2, l3);
    inverse_l[h] = steps::inverse_row_sum(row_sum);
    lse[h] = steps::log_sum_exp(offset[h], row_sum, p.q_bias[q_head * p.padded_q + q0 + row0 + 8 * h]);
  }
  // The V scales of this thread's channels, all read before the first output is stored (a load
  // after a store cannot move above it, so each would wait for its own round trip).
  const float* v_scales = p.v_scales + kv_head * HeadDim;
  const layout::Offset o_base = sm90::thread_offset<kO>(thread);
  float v_scale[kOValues];
#pragma unroll
  for (int v = 0; v < kOValues; ++v) v_scale[v] = v_scales[o_base.col + o_values[v].col];
  static_assert(kO.value_basis[0].col == 1 && kO.value_basis[0].row == 0, "values 2k, 2k + 1 are adjacent columns");
  const auto store_output_pair = [&](Out* at, int v) {
    const int h = o_values[v].row / 8;
    store_pair(at, steps::normalize_output(o[v], inverse_l[h], v_scale[v]),
               steps::normalize_output(o[v + 1], inverse_l[h], v_scale[v + 1]));
  };
  Out* out = static_cast<Out*>(p.out) + b * p.out_strides.batch + hq * p.out_strides.head;
  if (p.out_in_pieces) {
    // Through the unit's Q tile, free once every warp of the unit passed the loop's last barrier
    // (its last Q K'^T completed): per pass h, each warp stages its rows 8 h .. 8 h + 7 of 16 in the
    // K-major layout of 8 rows (the pairs' 4-byte writes conflict-free) and stores them as 16-byte
    // pieces, whole 32-byte sectors, where a pair's store wrote 16 bytes of each of 8 rows.
    constexpr KMajorLayout stage_layout{HeadDim * int(sizeof(Out))};
    constexpr int kStageBytes = KMajorLayout::kCoreRows * stage_layout.k_bytes;  // a warp's 8 rows
    constexpr int kPieces = kStageBytes / KMajorLayout::kCoreRowBytes, kRounds = kPieces / 32;
    static_assert(4 * kStageBytes == Shape::kQBytes && kPieces % 32 == 0, "the 4 warps' stages fill the Q tile");
    static_assert(warp_holds_16_rows<kO>(), "warp j holds rows 16 j + lane / 4 and the rows 8 below them");
    std::uint8_t* stage = q_tile + thread / 32 * kStageBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h > 0) __syncwarp();  // the first pass's pieces read
#pragma unroll
      for (int v = 0; v < kOValues; v += 2)
        if (o_values[v].row / 8 == h) {
          const int byte = (o_base.col + o_values[v].col) * int(sizeof(Out));
          store_output_pair(reinterpret_cast<Out*>(stage + stage_layout.offset(o_base.row % 8, byte)), v);
        }
      __syncwarp();
      uint4 pieces[kRounds];
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int piece = lane + 32 * r;
        pieces[r] = *reinterpret_cast<const uint4*>(
            stage + stage_layout.offset(stage_layout.piece_row(piece), stage_layout.piece_k_byte(piece)));
      }
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int piece = lane + 32 * r;
        const int query = q0 + unit_row + o_base.row / 8 * 8 + 8 * h + stage_layout.piece_row(piece);
        if (query < p.tokens)
          sm90::store_16(reinterpret_cast<std::uint8_t*>(out + query * p.out_strides.token) +
                             stage_layout.piece_k_byte(piece),
                         pieces[r]);
      }
    }
  } else {
#pragma unroll
    for (int v = 0; v < kOValues; v += 2) {
      const int query = q0 + unit_row + o_base.row + o_values[v].row;
      if (query < p.tokens) store_output_pair(out + query * p.out_strides.token + o_base.col + o_values[v].col, v);
    }
  }
  if (base.col == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = q0 + row0 + 8 * h;
      if (query < p.tokens) p.lse[q_head * p.tokens + query] = lse[h];
    }
}

void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

}  // namespace

void upload_groups(int head_dim) {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    quant::QkGroups both[2];
    for (int d : {64, 128}) {
      const Sage2HopperRecipe recipe = sage2_8b_hopper(d);
      if (auto why = recipe.validate()) {
        failure = "sage2-8b recipe for d=" + std::to_string(d) + ": " + *why;
        return;
      }
      const quant::QkGroups g = quant::derive_groups(recipe.qk_tiling(), quant::GroupScope::thread);
      // The attention kernel reads one Q scale and one K scale per thread.
      const layout::Fragment s = layout::wgmma_m64_d(recipe.block_kv);
      for (int unit = 0; unit < recipe.qk_tiling().units(); ++unit)
        for (int t = 0; t < s.threads(); ++t)
          for (int v = 0; v < s.value_count; ++v) {
            const layout::Offset at = s(t, v), first = s(t, 0);
            if (g.q.group_of_row[unit * 64 + at.row] != g.q.group_of_row[unit * 64 + first.row] ||
                g.k.group_of_row[at.col] != g.k.group_of_row[first.col])
              failure = "sage2-8b recipe for d=" + std::to_string(d) + ": thread " + std::to_string(t) +
                        " holds two Q or K groups; the kernel has one score scale per thread";
          }
      both[d == 128] = g;
    }
    if (failure.empty()) check_cuda(cudaMemcpyToSymbol(kGroups, both, sizeof(both)), "cudaMemcpyToSymbol (groups)");
  });
  if (!failure.empty()) throw std::logic_error(failure);
  (void)head_dim;
}

template <class T, int HeadDim>
void statistics_for(const QuantizeParams& p, cudaStream_t stream) {
  key_value_statistics<T, HeadDim><<<dim3((p.key_chunks + kStatisticsChunks - 1) / kStatisticsChunks, p.heads_kv, p.batch),
                                     HeadDim / 2 * kStatisticsChunks, 0, stream>>>(p);
  check_launch("key_value_statistics launch");
  key_mean_value_scales<HeadDim><<<dim3(p.heads_kv, p.batch), HeadDim, 0, stream>>>(p);
  check_launch("key_mean_value_scales launch");
}
template <class T, int HeadDim>
void quantize_for(const QuantizeParams& p, cudaStream_t stream) {
  constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim);
  const int blocks = std::max(p.padded_q / recipe.block_q, p.padded_kv / recipe.block_kv);
  quantize_block<T, HeadDim><<<dim3(blocks, p.heads_q + p.heads_kv, p.batch), kThreads, 0, stream>>>(p);
  check_launch("quantize_block launch");
}
template <class Out, int HeadDim, bool Causal, steps::Exp2Unit Exp2Unit>
void attention_for(const AttentionParams& p, cudaStream_t stream) {
  using Shape = AttentionShape<HeadDim>;
  const auto kernel = sage2_attention_kernel<Out, HeadDim, Causal, Exp2Unit>;
  static const bool configured = [&] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kBytes),
               "cudaFuncSetAttribute (attention shared memory)");
    return true;
  }();
  (void)configured;
  const int units = p.padded_q / 64, blocks = (units + Shape::kUnitsPerBlock - 1) / Shape::kUnitsPerBlock;
  kernel<<<dim3(blocks, p.heads_q, p.batch), Shape::kThreads, Shape::kBytes, stream>>>(p);
  check_launch("sage2_attention_kernel launch");
}
void launch_statistics(const QuantizeParams& p, DType dtype, int head_dim, std::uintptr_t stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (dtype == DType::fp16) head_dim == 64 ? statistics_for<__half, 64>(p, s) : statistics_for<__half, 128>(p, s);
  else head_dim == 64 ? statistics_for<__nv_bfloat16, 64>(p, s) : statistics_for<__nv_bfloat16, 128>(p, s);
}
void launch_quantize(const QuantizeParams& p, DType dtype, int head_dim, std::uintptr_t stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (dtype == DType::fp16) head_dim == 64 ? quantize_for<__half, 64>(p, s) : quantize_for<__half, 128>(p, s);
  else head_dim == 64 ? quantize_for<__nv_bfloat16, 64>(p, s) : quantize_for<__nv_bfloat16, 128>(p, s);
}
template <class Out, steps::Exp2Unit Exp2Unit>
void attention_for_dtype(const AttentionParams& p, int head_dim, bool causal, cudaStream_t s) {
  if (head_dim == 64) causal ? attention_for<Out, 64, true, Exp2Unit>(p, s) : attention_for<Out, 64, false, Exp2Unit>(p, s);
  else causal ? attention_for<Out, 128, true, Exp2Unit>(p, s) : attention_for<Out, 128, false, Exp2Unit>(p, s);
}
template <steps::Exp2Unit Exp2Unit>
void attention_for_unit(const AttentionParams& p, DType dtype, int head_dim, bool causal, cudaStream_t s) {
  if (dtype == DType::fp16) attention_for_dtype<__half, Exp2Unit>(p, head_dim, causal, s);
  else attention_for_dtype<__nv_bfloat16, Exp2Unit>(p, head_dim, causal, s);
}
void launch_attention(const AttentionParams& p, DType dtype, int head_dim, bool causal, steps::Exp2Unit exp2,
                      std::uintptr_t stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (exp2 == steps::Exp2Unit::sm90_ex2) attention_for_unit<steps::Exp2Unit::sm90_ex2>(p, dtype, head_dim, causal, s);
  else attention_for_unit<steps::Exp2Unit::polynomial>(p, dtype, head_dim, causal, s);
}

}  // namespace lowbit::kernels::attention::detail
