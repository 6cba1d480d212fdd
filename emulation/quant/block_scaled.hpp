// Block-scaled quantized tensors through the emulator's block-scaled MMA, as a Blackwell kernel
// multiplies them: SageAttention3's P V is
//     O = FP4MM(P^2, s_P2, V^, s_V) x s_P1
// with P^2, s_P2 the NVFP4 codes and UE4M3 block scales of P / s_P1, and s_P1 the per-row FP32
// scale, applied once per thread in float32 after the MMA.
//
// a (M x K) and b (N x K) are quantized along the reduction axis K, the way the instruction's
// scale factors run: for P V, a is P and b is V^T. Both must be microscaled (Grouping
// microscale(scale_block)) in the instruction's element and scale formats:
//   NVFP4        e2m1 + ue4m3, 1x16: mma.sync ... kind::mxf4nvf4.block_scale.scale_vec::4X ... ue4m3
//   MXFP4        e2m1 + ue8m0, 1x32: mma.sync ... kind::mxf4.block_scale.scale_vec::2X ... ue8m0
//   MXFP8/6/4    e4m3, e5m2, e3m2, e2m3, e2m1 + ue8m0, 1x32: mma.sync ... kind::mxf8f6f4.block_scale ... ue8m0
// (and their tcgen05 forms on sm_100). In this order:
//   1. D = the instruction's GEMM (emulation/mma/gemm.hpp) of A = a's codes, B = b's codes
//      transposed, with their block scale codes, from C = +0 and the given K loop: the block
//      scales act inside the instruction (the model's per-product or per-group scaling) and the
//      accumulation is the model's. K is padded with +0 codes to whole instructions (zero
//      scale codes for the padded blocks: their products are zero terms whatever the scale).
//   2. out[i][j] = D[i][j] * (outer_a(i) * outer_b(j)) in float32: the product of the outer
//      scales (s_P1 per row of a; the NVFP4 FP32 tensor scales) rounded first, then one multiply,
//      as dequantize_product does for row-scaled operands. With one outer scale, out = D x s_P1.
#pragma once

#include "emulation/mma/gemm.hpp"
#include "emulation/mma/instruction.hpp"
#include "emulation/quant/quantize.hpp"
#include "numerics/matrix.hpp"

namespace lowbit::quant {

// a.rows x b.rows. Throws std::invalid_argument naming what does not fit: an instruction without
// block scales, an element or scale format or block size other than the instruction's, or
// reduction lengths that differ.
MatrixF block_scaled_matmul(const QuantizedTensor& a, const QuantizedTensor& b, const mma::Instruction& instruction,
                            const mma::KLoop& loop = {});

}  // namespace lowbit::quant
