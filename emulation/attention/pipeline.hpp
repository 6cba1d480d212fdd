// A quantized attention forward pass as data, run the way a FlashAttention-style GPU kernel runs
// it, so that a disagreement with the kernel points at one stage.
//
// A Pipeline is a record of stages (each a choice with validate()); the presets name the kernels
// of the papers (presets.cpp says which kernel each follows and what is assumed). forward() runs
// one on [batch, heads, tokens, dim] tensors:
//
// Per (batch, KV head), then per Q head h (KV head h / (heads / kv_heads), GQA):
//   a. transform Q, K (SmoothAttn migration or a random Hadamard rotation; off in most presets)
//   b. smooth: K minus its mean over all keys, V minus its mean over all keys (double sums over
//      runs of key_mean_chunk keys, quant/smoothing.hpp), Q minus its mean per block of block_q
//      queries; one fp32 subtraction per element
//   c. quantize Q, K, V (quant::quantize): the head dimension zero-padded to the QK instruction's
//      k, tokens to whole blocks (zero codes); Q's row scale takes the softmax scale once
//      (steps::fold_softmax_scale)
// Per block of block_q queries, for each KV block of block_kv keys in kv_order (blocks whose keys
// are all masked skipped), the steps of kernel_steps.hpp, rows independent:
//   1. S = Q K^T through the QK instruction (integers: the exact s32 sum; floating: its model via
//      mma::gemm, chained over the head dimension from +0); s = dequantize_score(S, score_scale),
//      + add_score_correction(qbar . k') with Q smoothed; masked keys (causal: key > query, keys
//      past the last) -inf
//   2-6. m, offset (P's static scale folded into the exponent), alpha, p, the 4 lanes' row sums
//      (row-sum=pv: none here; step 8's instruction sums P's codes, Pipeline::row_sum)
//   7. P codes in P's format and scale
//   8-9. two-level: R = P V through the PV instruction, a fresh accumulator (+0) per flush
//      interval, o = accumulate_output(o, alpha, R) (later intervals of the block: alpha = 1);
//      in place (FlashAttention-2/3): o = alpha o, then o = the PV instruction from C = o
// The softmax stage flash2 replaces steps 2-6 and the end of each row by PyTorch's FlashAttention-2
// (flash2_steps.hpp); flash3 and sage2-sm90 by FlashAttention-3's and SageAttention2's Hopper kernels
// as released (flash3_steps.hpp, sage2_sm90_steps.hpp; sage2-sm90 also step 1's dequantization).
// After the last block: l = combine_lanes (row-sum=pv: l itself), out = normalize_output(o, 1/l, V's channel scale)
// (+ the V mean), rounded to the output format; lse = log_sum_exp(offset, l, bias), bias the row
// bias K smoothing removed (steps::smoothing_bias of the row, as the scores see it, and K's mean).
//
// Causal masks are top-left (key j visible to query i when j <= i, PyTorch's is_causal).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "emulation/format.hpp"
#include "emulation/mma/instruction.hpp"
#include "emulation/quant/quantize.hpp"
#include "emulation/quant/thread_groups.hpp"
#include "numerics/tensor.hpp"

namespace lowbit::attention {

// ---- stages -------------------------------------------------------------------------------------

enum class Role : std::uint8_t { q, k, v };
std::string_view to_string(Role r);

// Which values share a quantization scale. Q and K are quantized along the head dimension (their
// rows are tokens); V along the tokens (the P V reduction), so its groups run down the keys.
enum class Granularity : std::uint8_t {
  none,        // no scale: the values cast (round to nearest even) to the element format (fp32, fp16, bf16)
  per_tensor,  // one scale per (batch, head)
  per_block,   // Q: block_q queries; K: block_kv keys (SageAttention)
  per_warp,    // Q, K: what one warp holds in the QK instruction's accumulator fragment
  per_thread,  // Q, K: what one thread holds (SageAttention2 §3.3)
  per_token,   // Q, K: one scale per token
  per_channel, // V: one scale per channel over all keys (SageAttention2)
  nvfp4,       // e2m1 in 1x16 blocks with UE4M3 scales, inside a block-scaled MMA (SageAttention3)
  mx,          // 1x32 blocks with UE8M0 scales, inside a block-scaled MMA (OCP MX)
};
std::string_view to_string(Granularity g);

struct OperandStage {
  Format element = formats::fp16;
  Granularity granularity = Granularity::none;
  double target = 0;  // a group's amax maps to this code magnitude (0: the element's max finite)

  std::optional<std::string> validate(Role role) const;
  std::string text() const;  // FORMAT:GRANULARITY[:TARGET], as set_stage reads it
};

enum class Transform : std::uint8_t { none, smooth_attn, hadamard };

struct SmoothingStage {
  bool q = false;  // Q minus its mean per block of block_q queries; the scores take qbar . k' back
  bool k = false;  // K minus its mean over all keys (softmax removes the row bias it leaves)
  bool v = false;  // V minus its mean over all keys; the output takes it back
  int key_mean_chunk = 0;  // keys per double partial sum of the K and V means (0: one sum in order)
  // fp32: K's mean is float(double sum / keys); fp16 or bf16: rounded to it, as PyTorch's k.mean() on a
  // half tensor (SageAttention2's wrapper). K' = k - mean in fp32, rounded to key_residual_format (a
  // half format: PyTorch's k - km, SageAttention2's per-thread path; fp32: its fused per-warp kernel).
  Format key_mean_format = formats::fp32;
  Format key_residual_format = formats::fp32;
  Transform transform = Transform::none;  // applied to Q and K before smoothing
  double smooth_attn_alpha = 0.5;         // SmoothAttn: factor_c = max|Q_c|^a / max|K_c|^(1-a)
  std::uint64_t hadamard_seed = 0;

  std::optional<std::string> validate() const;
};

enum class PScale : std::uint8_t {
  static_exponent,  // P = exp2(s - m + log2_scale) in [0, 2^log2_scale], cast to P's format (SageAttention2: 448;
                    // an integer format rounds to nearest even, saturating: INT8 P at 127)
  per_block,        // s_P = amax(P block) / max_finite, P / s_P cast, R times s_P
  two_level,        // SageAttention3: per row s_P1 = rowmax / (448 * 6), NVFP4 of P / s_P1, R times s_P1
  microscale,       // P in 1 x B blocks directly: NVFP4 (SageAttention3's "direct" ablation) or MX
};
std::string_view to_string(PScale s);

struct PStage {
  Format format = formats::fp16;  // fp32 only with products of values (fp32-fma, wide)
  PScale scale = PScale::static_exponent;
  float log2_scale = 0;  // static_exponent: steps::kLog2Of448 for E4M3 at 448; 0 for fp16
  Granularity blocks = Granularity::nvfp4;  // microscale: nvfp4 (1x16, UE4M3) or mx (1x32, UE8M0)
  // The cast of static and per-block P: nearest even (cvt.rni, cvt.rn), or toward zero (cvt.rzi,
  // cvt.rz: what a C cast of a float to an integer does, so a kernel that writes (int8_t)x truncates;
  // SageAttention2 does not say how its INT8 P was converted). FP8 and FP4 casts round to nearest only.
  Rounding rounding = Rounding::nearest_even;

  std::optional<std::string> validate() const;
  // The quantizer spec of the block-scaled modes (two_level, microscale).
  quant::QuantSpec block_spec() const;
};

// An MMA instruction of the registry (mma::find_instruction); "nN" in the name stands for the n
// the stage needs (QK: block_kv; P V: the value dimension rounded up to 8, V's columns padded). kFp32Fma is no tensor core: one fp32
// fma per product, in index order, from C (a SIMT kernel's loop).
//
// Products of operand values instead of codes (any operand format: an integer or floating code
// times its block scale, if any, as a float; row, channel and P factors applied after as with
// the instruction), for operands the instruction cannot take (error attribution: Q quantized, K
// exact):
//   fp32_fma  "fp32-fma:INSTRUCTION": one fp32 fma per product; the instruction still decides
//             the per-thread groups, the head dimension's padding and the flush interval's k
//   wide      "wide:INSTRUCTION": the instruction's accumulation on the values (chunks,
//             truncation, rounding, how C enters: emulation/mma/wide.hpp), the accumulator's
//             error alone
inline constexpr std::string_view kFp32Fma = "fp32-fma";
enum class Product : std::uint8_t { instruction, fp32_fma, wide };
struct MatmulStage {
  std::string instruction;  // a registry name, or kFp32Fma (fp32 fma, no instruction)
  Product product = Product::instruction;

  bool has_instruction() const { return instruction != kFp32Fma; }
  bool fp32_fma() const { return !has_instruction() || product == Product::fp32_fma; }
  bool wide() const { return has_instruction() && product == Product::wide; }
  bool on_values() const { return fp32_fma() || wide(); }
  std::string text() const;  // as set_stage reads it
};

enum class Accumulation : std::uint8_t {
  two_level,  // fresh accumulator (+0) per flush interval, flushed into the fp32 o (SageAttention2 §3.4)
  in_place,   // o rescaled by alpha, then the MMA accumulates onto it (FlashAttention-2/3)
};
struct AccumulationStage {
  Accumulation mode = Accumulation::two_level;
  int mmas_per_flush = 0;  // two-level: MMAs (k steps) per fresh accumulator; 0: the whole KV block

  std::optional<std::string> validate() const;
};

// Correctly rounded exp2 and log2 of a float (the `exact` exponential; no GPU instruction computes
// it): the function in double (within an ulp of double), rounded to float; a result within 2^-50
// of a float midpoint is decided again in long double.
float exp2_exact(float x);
float log2_exact(float x);

// exp2 and log2 of the softmax: correctly rounded, or the contract's (steps::Exp2: the polynomial
// or sm_90's MUFU.EX2 bit for bit; log2 the polynomial), which the kernels run; and the exponent's
// argument: the rounded score minus the offset (steps 1 and 5), or one fma of the accumulator, its
// scale and the offset (fused: SageAttention2's kernel; kernel_steps.hpp).
struct ExponentialStage {
  bool exact = false;
  steps::Exp2 exp2;
  steps::ExpArgument argument = steps::ExpArgument::rounded_score;

  bool fused() const { return argument == steps::ExpArgument::fused; }
  float probability(float score, float offset) const {
    return exact ? exp2_exact(steps::sub_rn(score, offset)) : steps::probability(score, offset, exp2);
  }
  // Step 5' (fused): acc an exact accumulator or -inf, scale steps::fused_scale of the pair's.
  float fused_probability(float acc, float scale, float offset) const {
    return exact ? exp2_exact(steps::fma_rn(acc, scale, -offset)) : steps::fused_probability(acc, scale, offset, exp2);
  }
  float rescale(float old_offset, float new_offset) const {
    return exact ? exp2_exact(steps::sub_rn(old_offset, new_offset)) : steps::rescale(old_offset, new_offset, exp2);
  }
  // bias: steps::smoothing_bias with K smoothed, else 0.
  float log_sum_exp(float offset, float l, float bias) const {
    return exact ? steps::mul_rn(steps::add_rn(steps::add_rn(offset, log2_exact(l)), bias), steps::kLn2)
                 : steps::log_sum_exp(offset, l, bias);
  }
  std::string name() const;
};

// Which per-row softmax steps run: the contract of kernel_steps.hpp (lowbit's kernels and the papers'
// presets), PyTorch's FlashAttention-2 as released (flash2_steps.hpp: raw-score maxima, exp2f,
// running lane sums, 1 / l, MUFU.LG2 in the LSE), which takes unscaled fp16/bf16 Q, K, V, P and o in
// place, or FlashAttention-3's Hopper forward as released (flash3_steps.hpp: the same shape with fast
// math, P offset by 2^(p's log2) before its cast, and the kernel's descales), or SageAttention2's
// Hopper kernel as released (sage2_sm90_steps.hpp: per-thread scales fused into the exponent's fma,
// the last KV block dequantized first, P offset by p's log2 = 8.807, the kernel's log2 LSE), or its Ada
// kernel (the same steps on mma.sync tiles of 128 x 64, the last two KV blocks dequantized first).
enum class Softmax : std::uint8_t { contract, flash2, flash3, sage2_sm90, sage2_sm89 };
// P's keys within each 32-key k step of an instruction's P V: in key order, or as a kernel that keeps
// P in registers feeds them (layout::accumulator_to_a8: A column p holds key key_of_column[p], V's
// rows permuted alike). The order shows only where the instruction rounds parts of a k step apart.
enum class PKeys : std::uint8_t { natural, registers };
// SageAttention2's released kernels (sage2_sm90_steps.hpp).
inline bool sage2_released(Softmax s) { return s == Softmax::sage2_sm90 || s == Softmax::sage2_sm89; }

// Whose arithmetic the quantizers of Q, K and V run (quant/quantize.hpp's Arithmetic): lowbit's IEEE
// division, or SageAttention2's released quantizers (Triton per-thread INT8 for Q and K with MUFU.RCP
// and round-half-away by truncation; its fused fast-math CUDA kernel for V).
enum class Quantizers : std::uint8_t { ieee, sageattention2 };

// A causal mask with fewer queries than keys (or more): key j is visible to query i when j <= i
// (top-left: PyTorch's is_causal) or j <= i + keys - queries (bottom-right: FlashAttention-2 and 3's
// causal=True, the queries being the last of the keys' sequence). The same where they are as many.
enum class CausalAlign : std::uint8_t { top_left, bottom_right };

// softmax flash3: the kernel's q_descale, k_descale, v_descale (FlashAttention-3 FP8), multiplied into
// the operands' own per-tensor scales (1 for E4M3 values with amax 448).
struct DescaleStage {
  float q = 1.0f, k = 1.0f, v = 1.0f;
  std::optional<std::string> validate() const;
};

struct TilingStage {
  int block_q = 128;   // queries per thread block
  int block_kv = 64;   // keys per KV block
  int warps = 4;       // warps that compute S (the per-thread / per-warp groups)
  KvOrder kv_order = KvOrder::ascending;
  int sms = 0;         // softmax flash2: the GPU's multiprocessors, from which PyTorch picks its split-KV
                       // kernel (flash2_split.hpp); 0: never split
  int block_kv_causal = 0;  // keys per KV block under a causal mask (FlashAttention-3 picks its tile by
                            // it); 0: block_kv

  int kv_block(bool causal) const { return causal && block_kv_causal ? block_kv_causal : block_kv; }

  std::optional<std::string> validate() const;
};

struct Pipeline {
  std::string name;     // the preset it started from
  std::string follows;  // which paper's kernel, and what is assumed
  std::string arch = "sm_90";  // the instructions' architecture
  TilingStage tiling;
  SmoothingStage smoothing;
  OperandStage q, k, v;
  MatmulStage qk, pv;
  PKeys p_keys = PKeys::natural;
  PStage p;
  // Step 6's row sum (steps::RowSum): pv sums P's codes as one more column of V whose codes are all
  // 1, through the P V instruction, flushed into l as o's columns are into o (every flush interval).
  steps::RowSum row_sum = steps::RowSum::lanes;
  AccumulationStage accumulation;
  ExponentialStage exponential;
  Softmax softmax = Softmax::contract;
  Quantizers quantizers = Quantizers::ieee;
  DescaleStage descale;
  CausalAlign causal_align = CausalAlign::top_left;
  Format output = formats::fp16;  // the format the output is rounded to (to nearest even)
  bool kernel_output = false;  // a released kernel's preset: the output format is the kernel's, whatever the inputs' are

  // Why this pipeline cannot run on heads of dimension head_dim (values: value_dim), or nothing.
  std::optional<std::string> validate(int head_dim, int value_dim) const;

  // The instructions, with "nN" resolved (throws mma::UnknownInstruction).
  mma::Instruction qk_instruction() const;
  mma::Instruction pv_instruction(int value_dim) const;
  // The thread blocks' tiling of S that per-thread and per-warp groups come from (the QK
  // instruction's accumulator fragment).
  quant::ThreadTiling qk_tiling() const;
  // The quantizer spec of an operand (Q, K: along the head dimension padded to qk_depth; V:
  // along the keys).
  quant::QuantSpec quant_spec(Role role) const;
  // The head dimension as Q K^T reads it: padded to the QK instruction's k or, without one, to
  // Q's and K's scale blocks (zero columns).
  int qk_depth(int head_dim) const;
};

// ---- presets ------------------------------------------------------------------------------------

struct PresetInfo {
  std::string_view name;
  std::string_view summary;
};
const std::vector<PresetInfo>& preset_list();
// What follows the inputs' format (fp16, bf16, fp32) where a caller knows it (the CLI, Python): the
// output format, unless the preset's is a released kernel's (kernel_output), and a K mean rounded to a
// half format (the kernel's wrapper takes the mean of the tensor it is given).
void follow_inputs(Pipeline& pipeline, const Format& inputs);
// The named preset for heads of dimension head_dim (sage2-8b reads sage2_8b_hopper(head_dim)).
// Throws std::invalid_argument listing the presets for an unknown name.
Pipeline preset(std::string_view name, int head_dim);

// ---- stages by name (the CLI's --set STAGE=VALUE) -------------------------------------------------

struct StageInfo {
  std::string_view name;
  std::string_view values;  // what it accepts
  std::string_view help;
};
const std::vector<StageInfo>& stage_list();
// Applies "STAGE=VALUE"; the error names the stage and what it accepts.
std::optional<std::string> set_stage(Pipeline& pipeline, std::string_view assignment);
// Every stage's value, as set_stage reads it back.
std::vector<std::pair<std::string, std::string>> stage_values(const Pipeline& pipeline);

// ---- forward ------------------------------------------------------------------------------------

struct ForwardOptions {
  bool causal = false;
  unsigned threads = 0;       // 0: every core
  bool keep_operands = true;  // keep the quantized Q, K, V in the result
  std::string q_name = "Q", k_name = "K", v_name = "V";  // how errors name the inputs
  // One pass of a split-KV kernel (flash2_split.hpp): only the KV blocks [kv_block_begin, kv_block_end)
  // (-1: to the last), and a row none of whose keys is in them gets LSE -inf, as a split writes it.
  int kv_block_begin = 0, kv_block_end = -1;
  bool split_pass() const { return kv_block_begin != 0 || kv_block_end != -1; }
  // softmax flash3: FlashAttention-3's q_descale, k_descale and v_descale tensors as the kernel takes
  // them, [3, batch, kv_heads] row-major, for Q, K, V of E4M3 values as they are (granularity none);
  // empty: the pipeline's descale stage for every head.
  std::vector<float> descales;
  std::string descales_name = "descales";  // how errors name them
  // K's mean as the kernel's wrapper computed it, [batch, kv_heads, head_dim] row-major (SageAttention2:
  // torch's k.mean(), whose CUDA reduction order is not modelled), in place of the pipeline's; needs
  // smooth-k=on. Empty: the pipeline's.
  std::vector<float> key_means;
  std::string key_means_name = "key means";
};

// One (batch, head) of Q, K or V as the MMAs read it.
struct QuantizedHead {
  quant::QuantizedTensor tensor;  // Q, K: tokens x head_dim; V: keys x value_dim, or value_dim x keys
                                  // (V^T) where V's groups run along the keys (nvfp4, mx)
  std::vector<float> mean;        // smoothing means: Q: (blocks x head_dim), K, V: one row; empty when off
};

struct ForwardResult {
  int batch = 0, heads = 0, kv_heads = 0, tokens = 0, keys = 0, head_dim = 0, value_dim = 0;
  Format output_format = formats::fp16;
  std::vector<QuantizedHead> q;     // [batch * heads], with keep_operands
  std::vector<QuantizedHead> k, v;  // [batch * kv_heads], with keep_operands
  std::vector<float> lse;           // [batch, heads, tokens]: natural log of sum_j exp(q.k_j / sqrt(d))
                                    // (K smoothed: the smoothed scores' LSE plus the row bias q.kbar / sqrt(d));
                                    // softmax sage2-sm90/sm89: the kernel's own, log2 of the smoothed scores' sum
  std::vector<float> output;        // [batch, heads, tokens, value_dim]: before rounding
  std::vector<Code> output_codes;   // the same rounded to output_format
  // Multiply-accumulates emulated: QK^T over the padded head dimension and P V, per query row and
  // key of every KV block run (skipped blocks and padded query rows not counted).
  std::uint64_t macs = 0;

  Tensor4 rounded_output() const;  // output_codes' values
  // The shape fields of q, k, v's result (the arrays left empty), its output in output_format.
  static ForwardResult shaped(const Tensor4& q, const Tensor4& k, const Tensor4& v, const Format& output_format);
};

// Runs the pipeline. Throws std::invalid_argument naming the input for shapes that do not fit
// (batch, heads: K and V heads must divide Q heads, tokens, dimensions), NaN/Inf (count, first
// index) and pipelines that do not validate.
ForwardResult forward(const Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                      const ForwardOptions& options = {});

}  // namespace lowbit::attention
