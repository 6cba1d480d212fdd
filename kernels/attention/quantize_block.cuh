// SageAttention2-8b on Hopper, the quantization of Q, K and V by blocks of tokens (quantize_block):
// int8 codes of Q and of smoothed K with their group scales, the LSE's row bias, V's e4m3 codes
// stored as V^T in the order of P's A fragment. Launched by quantize.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <type_traits>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "kernels/attention/groups.cuh"
#include "kernels/attention/sage2_device.cuh"
#include "kernels/attention/sage2_kernels.cuh"
#include "kernels/quant_codes.cuh"
#include "kernels/sm90/fragment.hpp"

namespace lowbit::kernels::attention::detail {
namespace {

constexpr int kThreads = 256;  // threads of the quantization kernel
constexpr float kInt8Target = 127.0f;   // max_finite(int8): Q and K scales are amax / 127

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
    // for its load, kept too few bytes in flight for the DRAM.
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

}  // namespace
}  // namespace lowbit::kernels::attention::detail
