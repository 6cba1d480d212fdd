// The MMA registry's models and the sources behind each (instruction.cpp, its only includer): the
// arithmetic parameters of every modeled instruction and what hardware or publication backs them.
#pragma once

#include <string_view>

#include "emulation/mma/instruction.hpp"

namespace lowbit::mma {
namespace {

// ---------------------------------------------------------------------------------------------
// Models and their sources (docs/mma-models.md explains each)
// ---------------------------------------------------------------------------------------------

constexpr std::string_view kMmaSim = "MMA-Sim (Xie et al., arXiv 2511.10909; microsoft/MMA-Sim)";

Model fused(int chunk, int fraction_bits, OutputRounding rounding, int zero_exponent) {
  Model m;
  m.fused.chunk = chunk;
  m.fused.fraction_bits = fraction_bits;
  m.fused.rounding = rounding;
  m.fused.zero_exponent = zero_exponent;
  return m;
}

Model integer(bool saturate) {
  Model m;
  m.arithmetic = Arithmetic::integer;
  m.integer.saturate = saturate;
  return m;
}

// The zero-term exponent on Hopper: -133 (MMA-Sim's; pinned for HMMA/HGMMA with an fp32
// accumulator by the tiny_products tiles of bf16; assumed for QGMMA, whose fp8 products never
// reach it), but -21 for HMMA/HGMMA with an f16 accumulator: there a zero C holds the sum's
// exponent at -21 or above, so no bit below 2^-46 (22 bits under f16's smallest subnormal) is
// kept. Of MMA-Sim's -133 and -30 .. -14, only -21 passes every recorded tile (docs/mma-models.md).
constexpr int kHopperZeroExponent = -133;
constexpr int kHopperF16AccumulatorZeroExponent = -21;

// Hopper mma.sync FP8 is software: F2FP unpacks the operands to f16 (exactly; an e4m3 subnormal
// becomes a normal f16 number), two HMMA.16816 over the k with k mod 4 in {0,1} and then {2,3}
// run the Hopper f16 model chained from +0, and C is added last by FADD (f32) or HADD2 (f16).
Model hopper_fp8_mma_sync(OutputRounding rounding) {
  Model m = fused(16, 25, rounding,
                  rounding == OutputRounding::rne_fp16 ? kHopperF16AccumulatorZeroExponent : kHopperZeroExponent);
  m.fused.interleave = 2;
  m.fused.c_entry = CEntry::added_after;
  m.fused.unpack_to = formats::fp16;
  return m;
}

Model block_scaled(ScaleMode mode, int chunk, int fraction_bits, int zero_exponent, int group) {
  Model m = fused(chunk, fraction_bits, OutputRounding::rz_fp32, zero_exponent);
  m.fused.scale_mode = mode;
  m.fused.group = group;
  return m;
}

const ModelSource kHopperF16{
    "MMA-Sim Hopper T-FDPA (L=16, F=25, C aligned, RZ fp32, e_zero=-133); recorded on an H200 and an H100",
    Verification::verified,
    "e_zero=-133 is pinned by the bf16 tiny_products tiles (they reject -134, -132, -126, -140, -1000); f16 "
    "products never reach it. A zero result is +0 (measured)."};
const ModelSource kHopperF16Out{
    "MMA-Sim Hopper T-FDPA with f16 accumulator (L=16, F=25, RNE fp16), zero terms at exponent -21 (measured); "
    "recorded on an H100",
    Verification::verified,
    "e_zero=-21: of -133 (MMA-Sim's) and -30 .. -14, only -21 passes every recorded tiny_products tile; a zero "
    "result is +0"};
const ModelSource kHopperFp8Sync{
    "measured by us (shared/notes/hopper-numerics-facts.md; docs/gpu-probes.md): F2FP unpacks fp8 to "
    "f16, two HMMA.16816.F32 over k mod 4 in {0,1} then {2,3} (Hopper f16 model), then an fp32 RNE "
    "add of C; recorded on an H200 and an H100",
    Verification::verified,
    "the final FADD keeps subnormal C (subnormal_c tiles); unpacking to f16 is pinned by mixed e4m3 x e5m2 "
    "tiles and cannot change e4m3 x e4m3 or e5m2 x e5m2 results"};
const ModelSource kHopperFp8SyncF16{
    "read off the SASS (docs/gpu-probes.md): F2FP unpacks fp8 to f16, two HMMA.16816.F16 from +0 over "
    "k mod 4 in {0,1} then {2,3} (Hopper f16 model, RNE fp16), then HADD2 of C; recorded on an H100",
    Verification::verified,
    "e_zero=-21 as HMMA.16816.F16 with f16 inputs (fp8 products cannot tell); HADD2 keeps subnormal C "
    "(subnormal_c tiles)"};
const ModelSource kHopperFp8Wgmma{
    "MMA-Sim Hopper wgmma FP8 (L=32, F=13, C aligned, RZ e8m13); recorded on an H200 and an H100",
    Verification::verified, "e_zero=-133 assumed (MMA-Sim's Hopper value): fp8 products never reach it"};
const ModelSource kHopperFp8WgmmaF16{
    "the Hopper wgmma FP8 model (L=32, F=13, C aligned) rounding to nearest even f16 "
    "(QGMMA...F16, docs/gpu-probes.md); recorded on an H100",
    Verification::verified,
    "e_zero=-133 assumed: unlike HGMMA.F16, the tiny_products tiles reject -14 and accept any e_zero <= -20"};
const ModelSource kHopperInteger{"exact s32 sum, wrapped or saturated (PTX ISA); recorded on an H100",
                                 Verification::verified, ""};
const ModelSource kExactInteger{"exact s32 sum (PTX ISA)", Verification::published, "no such GPU here"};
// Ampere, Ada, Volta and Blackwell mma.sync: tiles recorded by Khattak & Mikaitis
// (MATLAB-tensor-core, model_validation; verification/vectors/external/), one dot product per tile
// (D[0][0]); "pinned" means every neighbouring model fails some of them (verification/vectors/neighbours.txt).
const ModelSource kAmpereF16{
    "MMA-Sim Ampere/Ada T-FDPA (m16n8k16 in k halves: L=8, F=24, C aligned, RZ fp32); Khattak & Mikaitis' A100TC and "
    "AdaTC agree (fma 8, 1 extra alignment bit); recorded by Khattak & Mikaitis on an A100, an A2, an Ada GPU and an L40S",
    Verification::verified,
    "their tiles fill k 0..7 (the second chunk is zeros): F, L, the rounding and C's entry are pinned; e_zero=-132 and "
    "the sign of a rounded zero (MMA-Sim's sign-keeping rule) are assumed: no tile reaches them"};
const ModelSource kAmpereF16Out{
    "MMA-Sim Ampere/Ada T-FDPA with f16 accumulator (L=8, F=24, C aligned, RNE fp16); Khattak & Mikaitis' A100TC and "
    "AdaTC agree; recorded by Khattak & Mikaitis on an A100, an A2, an Ada GPU and an L40S",
    Verification::verified,
    "L and C's entry are pinned, F hardly (F=23 fails 1 of 5,000 sm_80 tiles, no sm_89 tile; F=25 none): rounding to 10 "
    "bits hides F's last bits; e_zero=-132 and the zero sign assumed"};
const ModelSource kAdaFp8{
    "MMA-Sim Ada T-FDPA FP8 (k32 in halves: L=16, F=13, C aligned, RZ e8m13); Khattak & Mikaitis' AdaTC and L40STC "
    "agree (fma 16, 10 bits fewer than fp32); recorded by Khattak & Mikaitis on an Ada GPU and an L40S",
    Verification::verified,
    "tiles of e4m3.e4m3 and e5m2.e5m2: F, L, C's entry and the e8m13 output are pinned; e_zero=-132 assumed (fp8 "
    "products never reach it)"};
const ModelSource kBlackwellF8f6f4{"MMA-Sim Blackwell T-FDPA f8f6f4 (L=32, F=25, RZ fp32)", Verification::published,
                                   "no such GPU here; e_zero=-133 assumed (MMA-Sim's Blackwell MXFP8 value)"};
const ModelSource kBlackwellMxf8{"MMA-Sim Blackwell ST-FDPA MXF8F6F4 (L=32, F=25, RZ fp32, e_zero=-133)",
                                 Verification::published, "no such GPU here"};
const ModelSource kBlackwellMxf4{
    "MMA-Sim Blackwell GST-FDPA MXF4/NVFP4 (groups of 16 exact, F=35, L=64, RZ fp32, e_zero=-139)",
    Verification::published, "no such GPU here; a UE4M3 scale's sign bit is ignored (as MMA-Sim does)"};

const ModelSource kAdaFp8F16{
    "MMA-Sim Ada FP8 with f16 accumulator (native QMMA; k32 in halves: L=16, F=13, C aligned, RNE fp16 of the truncated "
    "sum); recorded by Khattak & Mikaitis on an Ada GPU",
    Verification::verified,
    "tiles of e4m3.e4m3 and e5m2.e5m2: F (F=12 and 14 fail 353 and 133 of 2,500 e4m3 tiles), L and C's entry are "
    "pinned. Khattak & Mikaitis' AdaTC.m (through GEMM.m) keeps 10 - 10 = 0 fraction bits for an f16 output, which "
    "gives powers of two only: 2,493 of the 2,500 recorded e4m3 results are not; e_zero=-132 assumed"};
const ModelSource kAmpereTf32{
    "MMA-Sim Ampere/Ada (F=24; m16n8k8 in k halves) and Khattak & Mikaitis' A100TC, AdaTC (fma 4, 1 extra bit): L=4, "
    "F=24, C aligned, RZ fp32; recorded by Khattak & Mikaitis on an A100, an A2, an Ada GPU and an L40S",
    Verification::verified,
    "tiles of m16n8k4 (chained twice over K = 8, k 0..3 filled): F, L, the rounding and C's entry are pinned; m16n8k8 "
    "(two chunks of 4) shares the model; e_zero=-132 and the zero sign assumed"};
const ModelSource kHopperTf32{
    "MMA-Sim Hopper/Blackwell (F=25) and Khattak & Mikaitis' H100TC, B200TC (2 extra bits): m16n8k4 fuses its 4 products "
    "(L=4), C aligned, RZ fp32; recorded by Khattak & Mikaitis on an H100, an H200 and a B200",
    Verification::verified,
    "tiles of m16n8k4 (chained twice over K = 8, k 0..3 filled): F, L, the rounding and C's entry are pinned; e_zero=-133 "
    "and the zero sign (sm_90: +0, sm_100: sign kept) assumed"};
const ModelSource kHopperTf32K8{
    "MMA-Sim Hopper/Blackwell and Khattak & Mikaitis' H100TC, B200TC (fma 8): m16n8k8 fuses its 8 products (L=8, F=25, "
    "C aligned, RZ fp32)",
    Verification::published, "no tile of m16n8k8 (the recorded tf32 tiles are m16n8k4, L=4)"};
const ModelSource kVoltaF16{
    "MMA-Sim Volta (F=23) and Khattak & Mikaitis' V100TC (fma 4, no extra bit): m8n8k4 fuses its 4 products, C aligned, "
    "RZ fp32; recorded by Khattak & Mikaitis on a V100",
    Verification::verified,
    "tiles of a K = 16 chain of m8n8k4 (the least certain reading of how their WMMA code compiles for sm_70: CUDA 13 "
    "has no sm_70 target to check it) with k 0..3 filled: F, L, the rounding and C's entry are pinned; e_zero=-132 and the zero sign assumed"};
const ModelSource kVoltaF16Out{
    "MMA-Sim Volta and Khattak & Mikaitis' V100TC with f16 accumulator: L=4, F=23, C aligned, RNE fp16; recorded by "
    "Khattak & Mikaitis on a V100",
    Verification::verified,
    "L and C's entry are pinned, F is not (F=22 and 24 fail no tile: rounding to 10 bits hides it); e_zero=-132 and the "
    "zero sign assumed"};
const ModelSource kBlackwellF16{
    "MMA-Sim Blackwell (F=25) and Khattak & Mikaitis' B200TC (fma 16, 2 extra bits): L=16, F=25, C aligned, RZ fp32; "
    "recorded by Khattak & Mikaitis on a B200",
    Verification::verified,
    "F, L, the rounding and C's entry are pinned; e_zero=-133 and the sign of a rounded zero (MMA-Sim's sign-keeping "
    "rule; Hopper writes +0) assumed: no tile reaches them"};
const ModelSource kBlackwellF16Out{
    "MMA-Sim Blackwell and Khattak & Mikaitis' B200TC with f16 accumulator: L=16, F=25, C aligned, RNE fp16; recorded "
    "by Khattak & Mikaitis on a B200",
    Verification::verified,
    "L and C's entry are pinned, F hardly (F=24 fails 1 of 2,500 tiles, F=26 none); e_zero=-21 (Hopper's measured "
    "HMMA.F16 value; B200TC limits the alignment exponent at -15 for an f16 output) and the zero sign assumed: no tile "
    "reaches them"};
const ModelSource kBlackwellFp8Sync{
    "the Hopper mma.sync FP8 model (nvcc 13.0 compiles sm_100 and sm_100a mma.sync FP8 to F2FP + two HMMA.16816 + "
    "FADD/HADD2, as sm_90: verification/vectors/external/sass.txt): operands unpacked to f16, L=16 over k mod 4 in {0,1} then {2,3}, F=25, from +0, then an RNE add of C; "
    "recorded by Khattak & Mikaitis on a B200",
    Verification::verified,
    "tiles of e4m3.e4m3 and e5m2.e5m2: C added last is pinned (C aligned fails 924 to 1,123 of 2,500 tiles), and for "
    "f16 output L and the k interleave; for f32 output L, the interleave, F and the unpacking change no tile. Khattak "
    "& Mikaitis' B200TC (fma 32, C aligned, RZ) fails 919 of the 2,500 e4m3 -> f32 tiles; e_zero and the zero sign "
    "assumed"};

}  // namespace
}  // namespace lowbit::mma
