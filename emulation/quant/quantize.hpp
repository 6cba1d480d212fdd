// Tensor quantization: a float tensor -> element codes + scales, the way a kernel does it, with
// granularity, element format and scale format each a piece of data (swap one at a time).
//
// Quantizing x (rows x cols, float32), in float32 arithmetic throughout:
//  1. Outer scale (optional second level, SageAttention3 / NVFP4 per-tensor scale):
//       s_o = amax(region) / (max_finite(scale.format) * target)   (region: tensor or row)
//       x1  = x / s_o                                                (s_o = 1 where amax = 0)
//  2. Group scale, for each group of the Grouping:
//       amax rule:  s = amax(x1 over the group) / target, stored in scale.format with
//                   scale.rounding (fp32: kept as is; ue4m3: RNE as cvt.rn.satfinite;
//                   ue8m0: round-up as cvt.rp.satfinite.ue8m0, or the OCP MX floor
//                   2^(floor(log2 amax) - emax(element)), which ignores target). Narrow
//                   scale formats saturate.
//       fixed rule: s = scale.fixed_value (P in SageAttention2: 1/448)
//  3. Codes: c = encode(element, x1 / s) with the conversion options (rounding, saturation);
//     x1 * (1/s) instead when multiply_by_reciprocal. A group whose s is 0 gets zero codes.
//  Arithmetic (steps 2 and 3 as a released kernel's quantizer computes them; ieee above):
//     triton_div_full  SageAttention's Triton quantizers on sm_90, whose x / y is div.full.f32 and
//                      which ptxas folds with the + epsilon into one FFMA by the constant 1 / target:
//                      s = fma(amax, fl(1 / target), epsilon), y = fl(x1 * rcp(s)) with MUFU.RCP
//                      (sfu/rcp.hpp), c = encode(element, fl(y + (y >= 0 ? 0.5 : -0.5))) truncated
//                      (conversion toward_zero, as cvt.rzi).
//     cuda_fast_math   SageAttention's fused CUDA quantizers (nvcc --use_fast_math): amax = max(amax,
//                      scale.amax_floor), s = fl(amax * fl(1 / target)), y = fl(x1 * fl(target *
//                      rcp(amax))), c by the conversion options; no zero-scale case: an all-zero group
//                      without a floor gets 0 * inf = NaN, the element's NaN code, as on the GPU.
// Dequantization (mirrors the GPU, float32): x' = (decode(c) * s) * s_o, two float32 products
// in that order. A matmul of two row-scaled operands dequantizes once per thread:
//       S = float(exact integer or float sum of code products) * float(s_a * s_b).
//
// Target: amax maps to this code magnitude (default max_finite(element): 127 for INT8, 7 for
// INT4, 448 for E4M3, 57344 for E5M2, 6 for E2M1).
//
// NaN and Inf in the input are counted and located in both policies (QuantizedTensor::nonfinite).
// NonFinitePolicy::refuse throws. NonFinitePolicy::propagate never lets a non-finite input
// dequantize to a finite value, and never lets it change another group:
//   * every amax (group and outer) is over the finite values only;
//   * a value the element format can hold stays in its element, whatever the conversion's
//     overflow rule does to finite values: NaN -> the NaN code (e4m3, e5m2), +-Inf -> the Inf
//     code (e5m2) or, without one, the NaN code (e4m3, as OFP8's non-saturating conversion);
//   * a value it cannot hold (integers, e2m1, e2m3, e3m2 have no NaN or Inf) poisons its group:
//     the group's scale is the scale format's NaN (fp32 NaN, UE4M3 0x7F, E8M0 0xFF) and its
//     codes are zero, so the whole group dequantizes to NaN. With an fp32 scale (INT8/INT4 per
//     token, per thread, ...) the scale is the only place a NaN can live; for block scales this
//     is the MX rule (OCP MX v1.0 §5.3, as we read it: a block whose scale is NaN is NaN, and
//     with a finite scale an element's own NaN/Inf code stands for itself), and the
//     block-scaled MMAs give NaN for every product with a NaN scale (emulation/mma).
//   So INT8 per-tensor with one Inf is NaN everywhere; NVFP4 with one Inf is NaN in that 1x16
//   block only (the FP32 tensor scale is the finite amax's), not in the whole tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emulation/convert.hpp"
#include "emulation/format.hpp"
#include "emulation/quant/thread_groups.hpp"
#include "numerics/matrix.hpp"
#include "numerics/nonfinite.hpp"

namespace lowbit::quant {

// Which Q K^T operand a per-thread/per-warp grouping is for.
enum class Operand : std::uint8_t { q, k };

// Which scale each element (r, c) uses, as data:
//   period = row_period ? r / row_period : 0,   row_group = row_period ? row_group_of[r % row_period] : 0
//   col_group = col_block ? c / col_block : 0
//   group = (period * groups_per_period + row_group) * col_groups + col_group
// Rows are padded to a multiple of row_period, columns to a multiple of col_block and of
// col_multiple (an instruction's k), with zeros, as the kernels pad.
struct Grouping {
  std::string name;
  int row_period = 0;             // 0: the whole tensor is one period
  std::vector<int> row_group_of;  // size row_period (empty: every row in group 0 of its period)
  int groups_per_period = 1;
  int col_block = 0;              // 0: the whole row shares the scale
  int col_multiple = 1;

  std::optional<std::string> validate() const;
  // True when every row has one scale along its columns (the layout a row-scaled matmul needs).
  bool row_constant() const { return col_block == 0; }
};

namespace grouping {
Grouping per_tensor();
Grouping per_block(int rows);  // b consecutive rows (tokens) share a scale (SageAttention)
Grouping per_token();          // one scale per row
Grouping per_channel();        // one scale per column over all rows
Grouping per_channel_block(int rows);  // one scale per column within each block of rows
Grouping per_thread(const ThreadTiling& tiling, Operand operand);
Grouping per_warp(const ThreadTiling& tiling, Operand operand);
Grouping microscale(int block);  // 1 x block consecutive values along a row (NVFP4: 16, MX: 32)
}  // namespace grouping

enum class ScaleRule : std::uint8_t { amax, fixed };

// How amax / target becomes a stored scale.
enum class ScaleRounding : std::uint8_t {
  nearest_even,     // convert to scale.format, RNE (NVFP4 ue4m3 scales; fp32: exact division result)
  toward_positive,  // round up: no element clips (cvt.rp.satfinite.ue8m0x2.f32 for MX)
  toward_zero,      // round down
  ocp_floor,        // OCP MX v1.0 §6.3: 2^(floor(log2(amax)) - emax(element)); may clip the top
};

struct ScaleSpec {
  ScaleRule rule = ScaleRule::amax;
  double fixed_value = 1.0;  // rule fixed
  double target = 0;         // 0: max_finite(element)
  float epsilon = 0;         // arithmetic triton_div_full: added in the scale's fma (SageAttention: 1e-7)
  float amax_floor = 0;      // arithmetic cuda_fast_math: where amax starts (SageAttention's INT8 kernels: 1e-7)
  Format format = formats::fp32;
  ScaleRounding rounding = ScaleRounding::nearest_even;
};

enum class OuterScale : std::uint8_t { none, per_tensor, per_row };

// How a group's scale and the quotients x1 / s are computed (the header's steps 2 and 3).
enum class Arithmetic : std::uint8_t { ieee, triton_div_full, cuda_fast_math };

enum class NonFinitePolicy : std::uint8_t {
  refuse,     // NaN/Inf in the input: std::invalid_argument with count and first index
  propagate,  // carried by the element's NaN/Inf codes, or by a NaN group scale (see above)
};

enum class Padding : std::uint8_t {
  zero,    // pad ragged shapes with zeros up to whole blocks (recorded in the result)
  refuse,  // ragged shapes are an error
};

struct QuantSpec {
  std::string name;
  Format element = formats::int8;
  Grouping grouping = grouping::per_tensor();
  ScaleSpec scale;
  OuterScale outer = OuterScale::none;
  ConversionOptions conversion;  // element rounding (GPU cvt.rni: nearest_even) and overflow
  bool multiply_by_reciprocal = false;
  Arithmetic arithmetic = Arithmetic::ieee;
  NonFinitePolicy nonfinite = NonFinitePolicy::refuse;
  Padding padding = Padding::zero;

  std::optional<std::string> validate() const;
  double target() const;  // scale.target, or max_finite(element)
};

struct QuantizedTensor {
  QuantSpec spec;
  int rows = 0, cols = 0;                // the input's shape
  int padded_rows = 0, padded_cols = 0;  // the shape of codes
  MatrixCode codes;                      // padded_rows x padded_cols, in spec.element
  std::vector<Code> scale_codes;         // one per group, in spec.scale.format
  std::vector<float> scales;             // their float32 values
  std::vector<float> outer_scales;       // per padded row, or one; empty without an outer scale
  int col_groups = 1;
  NonFiniteReport nonfinite;             // NaN/Inf of the input (empty unless propagated)

  int group_of(int row, int col) const;
  float outer_of(int row) const;
  int group_count() const { return int(scales.size()); }
};

// Throws std::invalid_argument naming `tensor` for an invalid spec, refused non-finite input,
// a refused ragged shape, or negative input to an unsigned element format (every scale rule is
// symmetric: it would clip those values to 0).
QuantizedTensor quantize(const MatrixF& x, const QuantSpec& spec, std::string_view tensor = "tensor");
// The same into `out`, reusing its storage: no allocation when the shape repeats (as a kernel
// writes into preallocated buffers).
void quantize_into(const MatrixF& x, const QuantSpec& spec, QuantizedTensor& out, std::string_view tensor = "tensor");
// The same result, computed element by element with the scalar encode(): the plain reference
// the tests and the benchmark compare quantize() with, bit for bit.
QuantizedTensor quantize_reference(const MatrixF& x, const QuantSpec& spec, std::string_view tensor = "tensor");

MatrixF dequantize(const QuantizedTensor& q);         // rows x cols
MatrixF dequantize_padded(const QuantizedTensor& q);  // padded_rows x padded_cols

// a and b row-scaled (Grouping::row_constant, no outer scale) integer codes, same column count:
// S[i][j] = float(sum_c a_ic b_jc) * float(s_a(i) * s_b(j)), the sum exact as every integer MMA
// computes it (exact in double below 2^53). Returns a.rows x b.rows. Floating codes are refused:
// a tensor core rounds their sums (FP22, f16 accumulators, truncation), so they go through an
// instruction's model and K loop (mma::gemm; block-scaled tensors: block_scaled_matmul in
// block_scaled.hpp; attention: the pipelines of emulation/attention/).
MatrixF scaled_matmul(const QuantizedTensor& a, const QuantizedTensor& b);

// One float32 dequantization of an accumulator value: acc * (s_a * s_b), the product of the
// two scales rounded to float32 first (once per thread, as SageAttention2's kernels do).
inline float dequantize_product(float acc, float scale_a, float scale_b) { return acc * (scale_a * scale_b); }

namespace presets {
// Symmetric integer: scale = amax / 127 (INT8) or amax / 7 (INT4), codes RNE.
QuantSpec int8(Grouping g);
QuantSpec int4(Grouping g);
// FP8 with a dynamic scale amax / 448 (E4M3) or amax / 57344 (E5M2).
QuantSpec fp8(const Format& element, Grouping g);
// FP8 with a static scale (SageAttention2's P: E4M3 with s = 1/448, per-block).
QuantSpec fp8_static(const Format& element, double scale, Grouping g);
// NVFP4: E2M1 in 1x16 blocks, UE4M3 scale amax/6 (RNE), optional FP32 per-tensor scale
// amax_tensor / (448 * 6).
QuantSpec nvfp4(bool tensor_scale);
// MX (OCP v1.0): element format in 1x32 blocks, E8M0 scale with the named rounding.
QuantSpec mx(const Format& element, ScaleRounding rounding = ScaleRounding::ocp_floor);
// SageAttention3's P: per-row s_P1 = rowmax / (448 * 6), then NVFP4 of P / s_P1.
QuantSpec sage3_p_two_level();
// The direct variant: NVFP4 of P with no second level.
QuantSpec sage3_p_direct();
}  // namespace presets

std::string_view to_string(ScaleRounding r);
std::string_view to_string(Arithmetic a);

}  // namespace lowbit::quant
