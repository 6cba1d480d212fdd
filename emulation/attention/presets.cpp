// The named pipelines: which paper's kernel each follows, and what is assumed where the paper or
// the registry does not say. Every value can be changed stage by stage (set_stage).
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/pipeline.hpp"

namespace lowbit::attention {
namespace {

constexpr const char* kHmmaF16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
constexpr const char* kHmmaBf16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
constexpr const char* kHmmaF16Acc = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16";
constexpr const char* kImmaS8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
constexpr const char* kImmaS4 = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32";
constexpr const char* kFp8MmaF32 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
constexpr const char* kFp8MmaF16 = "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16";
constexpr const char* kWgmmaS8 = "wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8";
constexpr const char* kWgmmaE4m3 = "wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3";
constexpr const char* kWgmmaBf16 = "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16";
constexpr const char* kNvfp4Mma =
    "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3";

const OperandStage kFp16{formats::fp16, Granularity::none};
const OperandStage kE4m3PerChannel{formats::e4m3, Granularity::per_channel};
const OperandStage kNvfp4{formats::e2m1, Granularity::nvfp4};

Pipeline fp32() {
  Pipeline p;
  p.name = "fp32";
  p.follows =
      "no paper: the float32 baseline, FlashAttention-2's tiled online softmax on CUDA cores. Every product is one fp32 "
      "fma in index order (QK^T over the head dimension; P V over the keys, in place onto the rescaled o); P, V "
      "unquantized; exp2 and log2 correctly rounded";
  p.q = p.k = p.v = {formats::fp32, Granularity::none};
  p.qk.instruction = p.pv.instruction = std::string(kFp32Fma);
  p.p = {formats::fp32, PScale::static_exponent, 0};
  p.accumulation = {Accumulation::in_place, 0};
  p.exponential.exact = true;
  p.output = formats::fp32;
  return p;
}

Pipeline fa2(bool bf16) {
  Pipeline p;
  p.name = bf16 ? "fa2-bf16" : "fa2-fp16";
  p.follows = std::string("FlashAttention-2 (Dao, 2023), forward on Hopper's mma.sync: ") + (bf16 ? "bf16" : "fp16") +
              " Q, K, V and P, fp32 accumulators, O kept in the P V accumulator and rescaled by alpha in place. Assumed: "
              "128 x 64 tiles with 4 warps (FA2's head-dim-128 forward); the softmax steps are the contract's with a "
              "correctly rounded exp2 (FA2 runs MUFU.EX2: --set exp2=sm90-ex2 gives its model)";
  const Format f = bf16 ? formats::bf16 : formats::fp16;
  p.q = p.k = p.v = {f, Granularity::none};
  p.qk.instruction = p.pv.instruction = bf16 ? kHmmaBf16 : kHmmaF16;
  p.p = {f, PScale::static_exponent, 0};
  p.accumulation = {Accumulation::in_place, 0};
  p.exponential.exact = true;
  p.output = f;
  return p;
}

// PyTorch 2.11's flash backend on Hopper (flash2_steps.hpp): FlashAttention-2's forward with the tiles
// flash_fwd_launch_template.h picks on sm_90 (the names are in libtorch_cuda.so's sm_90 kernels).
Pipeline sdpa_flash(bool bf16, int head_dim) {
  if (head_dim != 64 && head_dim != 128)
    throw std::invalid_argument(fmt::format(
        "preset sdpa-flash-{}: head dimension {} is not modelled (PyTorch's flash kernels are modelled at d = 64 and "
        "128: 128 x 128 and 128 x 64 tiles)", bf16 ? "bf16" : "fp16", head_dim));
  Pipeline p = fa2(bf16);
  p.name = bf16 ? "sdpa-flash-bf16" : "sdpa-flash-fp16";
  p.follows = std::string("PyTorch 2.11's scaled_dot_product_attention, flash backend (the FlashAttention-2 kernel it "
                          "vendors, aten::_scaled_dot_product_flash_attention), ") + (bf16 ? "bf16" : "fp16") +
              ", on Hopper as torch 2.11.0+cu130's sm_90 code runs it (flash2_steps.hpp); tiles 128 x " +
              (head_dim == 64 ? "128" : "64") + ", 4 warps, KV blocks last to first. Where batch x heads x ceil(N / 64) "
              "< 0.8 x 2 x the GPU's SMs (stage sms: 132, an H100 SXM or H200), PyTorch splits the keys: 64-query "
              "tiles, its split passes and combine kernel (flash2_split.hpp). Checked on an H100 "
              "(verification/captures/sdpa-flash)";
  p.tiling = {128, head_dim == 64 ? 128 : 64, 4, KvOrder::descending, 132};
  p.softmax = Softmax::flash2;
  p.exponential.exact = false;
  p.kernel_output = true;
  return p;
}

Pipeline sage1() {
  Pipeline p;
  p.name = "sage1";
  p.follows =
      "SageAttention (Zhang et al., ICLR 2025) on Ada (RTX 4090, sm_89): K smoothed by its mean, INT8 per-block Q (128 "
      "queries) and K (64 keys) on mma.sync s8, fp16 P and V with an fp16-accumulator mma.sync (MMA-Sim's Ada model, "
      "published only). Assumed: the fp16 accumulator starts fresh per KV block and is flushed into the fp32 o; the "
      "contract's softmax steps with a correctly rounded exp2 (the Triton kernel runs MUFU.EX2)";
  p.arch = "sm_89";
  p.q = {formats::int8, Granularity::per_block};
  p.k = {formats::int8, Granularity::per_block};
  p.v = kFp16;
  p.smoothing.k = true;
  p.qk.instruction = kImmaS8;
  p.pv.instruction = kHmmaF16Acc;
  p.p = {formats::fp16, PScale::static_exponent, 0};
  p.exponential.exact = true;
  return p;
}

// SageAttention2-8b on Hopper: every tiling, grouping, mean and exponential value is the recipe's.
Pipeline sage2_8b(int head_dim, steps::Exp2Unit exp2) {
  const Sage2HopperRecipe r = sage2_8b_hopper(head_dim, exp2);
  Pipeline p;
  p.name = sage2_8b_preset(exp2);
  p.follows =
      "SageAttention2-8b (Zhang et al., ICML 2025) as the Hopper kernel of kernels/ runs it (sage2_hopper.hpp): K "
      "smoothed by its chunked mean, per-thread INT8 Q and K with the wgmma s8 groups, E4M3 P at 448 folded into the "
      "exponent, per-channel E4M3 V, wgmma e4m3 (FP22) chained over each KV block from +0 and flushed into the fp32 o "
      "with one fma; exp2: " +
      std::string(exp2 == steps::Exp2Unit::sm90_ex2
                      ? "MUFU.EX2 of sm_90 bit for bit (emulation/sfu/ex2.hpp) of fma(accumulator, scale, -offset), as "
                        "SageAttention2's kernel"
                      : "the contract's polynomial of the rounded score minus the offset");
  p.arch = "sm_90";
  p.tiling = {r.block_q, r.block_kv, r.consumer_warps, r.kv_order};
  p.smoothing.k = true;
  p.smoothing.key_mean_chunk = r.key_mean_chunk;
  p.q = p.k = {formats::int8, Granularity::per_thread};
  p.v = kE4m3PerChannel;
  p.qk.instruction = kWgmmaS8;
  p.pv.instruction = kWgmmaE4m3;
  p.p = {formats::e4m3, PScale::static_exponent, r.p_log2_scale};
  p.accumulation = {Accumulation::two_level, 0};
  p.exponential = {false, r.exp2, r.exp_argument};
  return p;
}

// The Ada kernels of SageAttention2 and the Table 9 baselines share everything but Q and K.
Pipeline sage2_ada(const char* name) {
  Pipeline p;
  p.name = name;
  p.arch = "sm_89";
  p.tiling = {128, 64, 4, KvOrder::ascending};
  p.q = p.k = {formats::int4, Granularity::per_thread};
  p.v = kE4m3PerChannel;
  p.qk.instruction = kImmaS4;
  p.pv.instruction = kFp8MmaF32;
  p.p = {formats::e4m3, PScale::static_exponent, steps::kLog2Of448};
  return p;
}

Pipeline sage2_4b() {
  Pipeline p = sage2_ada("sage2-4b");
  p.follows =
      "SageAttention2-4b (Zhang et al., ICML 2025) on Ada (sm_89): Q smoothed per block of 128 queries (the scores take "
      "qbar.k' back, an fp32 fma chain over the head dimension) and K by its mean, per-thread INT4 Q and K with the "
      "mma.m16n8k64 groups (4 warps, 128 x 64), E4M3 P at 448, per-channel E4M3 V, mma.sync e4m3 with MMA-Sim's Ada FP22 "
      "model (published only) flushed into fp32 per KV block. Assumed: the contract's softmax steps and polynomial exp2 "
      "(the paper's kernel runs MUFU.EX2)";
  p.smoothing.q = p.smoothing.k = true;
  return p;
}

Pipeline smoothattn() {
  Pipeline p = sage2_ada("smoothattn");
  p.follows =
      "SageAttention2's SmoothAttn baseline (§4.1, after QServe): Q and K migrated per channel with alpha = 0.5 (over "
      "all Q heads of a KV head under GQA) and not smoothed, otherwise sage2-4b";
  p.smoothing.transform = Transform::smooth_attn;
  return p;
}

Pipeline hadamard() {
  Pipeline p = sage2_ada("hadamard");
  p.follows =
      "SageAttention2's HadmdAttn baseline (§4.1, after QuaRot): Q and K rotated by a random Hadamard matrix (seed 0; "
      "power-of-two head dimensions) and not smoothed, otherwise sage2-4b";
  p.smoothing.transform = Transform::hadamard;
  return p;
}

Pipeline sage2pp() {
  Pipeline p;
  p.name = "sage2pp";
  p.follows =
      "SageAttention2++ (Zhang et al., arXiv 2505.21136), 8-bit QK: FP8 P V on mma.sync with an fp16 accumulator, P "
      "and V narrowed so 32 products stay in fp16 (P in [0, 224], V's channel amax at 9: 224 x 9 x 32 <= 65504), each "
      "MMA's fp16 result flushed into fp32. Assumed: the paper's Ada/Blackwell instruction is run through the Hopper "
      "model of the same PTX (verified on an H100; no sm_89 f16-accumulator FP8 model is recorded); Pr = 224, Vr = 9 "
      "as we read the paper (not re-checked against its text here); per-thread INT8 Q, K with the mma.m16n8k32 groups "
      "(4 warps, 128 x 64), K smoothed; the contract's polynomial exp2";
  p.arch = "sm_90";
  p.tiling = {128, 64, 4, KvOrder::ascending};
  p.smoothing.k = true;
  p.q = p.k = {formats::int8, Granularity::per_thread};
  p.v = {formats::e4m3, Granularity::per_channel, 9};
  p.qk.instruction = kImmaS8;
  p.pv.instruction = kFp8MmaF16;
  p.p = {formats::e4m3, PScale::static_exponent, float(std::log2(224.0))};
  p.accumulation = {Accumulation::two_level, 1};
  return p;
}

Pipeline sage3() {
  Pipeline p;
  p.name = "sage3";
  p.follows =
      "SageAttention3 (Zhang et al., arXiv 2505.11594) on Blackwell (sm_120): NVFP4 Q, K (Q smoothed per block with the "
      "qbar.k' correction, K by its mean) on the block-scaled mma.sync (MMA-Sim's model, published only), P two-level "
      "(per row and KV block s_P1 = rowmax / (448 x 6), NVFP4 of P / s_P1, R times s_P1), V NVFP4 in 1x16 blocks along "
      "the keys, flushed into fp32 per KV block. Assumed: 128 x 128 tiles, the contract's polynomial exp2";
  p.arch = "sm_120";
  p.tiling = {128, 128, 4, KvOrder::ascending};
  p.smoothing.q = p.smoothing.k = true;
  p.q = p.k = p.v = kNvfp4;
  p.qk.instruction = p.pv.instruction = kNvfp4Mma;
  p.p = {formats::e2m1, PScale::two_level, 0};
  return p;
}

// FlashAttention-3's Hopper forward as the PyPI wheel fa3-fwd 0.0.3 runs it (flash3_steps.hpp), with the
// tiles hopper/tile_size.h picks (the names of the wheel's sm_90a kernels): E4M3 128 x 224 at d = 128,
// 192 x 160 at d = 64; bf16 128 x 176 (128 causal) at d = 128, 192 x 192 (128 causal) at d = 64.
Pipeline fa3(bool fp8, int head_dim) {
  const char* name = fp8 ? "fa3-fp8" : "fa3-bf16";
  if (head_dim != 64 && head_dim != 128)
    throw std::invalid_argument(fmt::format(
        "preset {}: head dimension {} is not modelled (FlashAttention-3's kernels are modelled at d = 64 and 128)", name,
        head_dim));
  Pipeline p;
  p.name = name;
  p.follows =
      std::string("FlashAttention-3's Hopper forward (Shah et al., 2024) as released: PyPI fa3-fwd 0.0.3 "
                  "(flash_attn_func, num_splits=1), its sm_90a SASS (flash3_steps.hpp). ") +
      (fp8 ? "E4M3 Q, K, V as the kernel takes them: E4M3 values (one scale per (batch, head), amax / 448: 1 for values "
             "with amax 448) times the stage descale (the kernel's q_descale, k_descale, v_descale); wgmma e4m3 for "
             "Q K^T and P V, P offset by 2^8 before its cast, bf16 output. "
           : "bf16 Q, K, V; wgmma bf16 for Q K^T and P V, P cast to bf16, bf16 output. ") +
      "Tiles " + (head_dim == 128 ? "128 x " : "192 x ") +
      (fp8 ? (head_dim == 128 ? "224" : "160") : (head_dim == 128 ? "176 (128 causal)" : "192 (128 causal)")) +
      ", KV blocks last to first, O rescaled in place. Checked on an H100 (verification/captures/" + name +
      "). Causal: aligned bottom-right, as FlashAttention-3's causal=True (the queries the last of the keys' sequence)";
  p.arch = "sm_90";
  const int block_q = head_dim == 128 ? 128 : 192;
  if (fp8) {
    p.tiling = {block_q, head_dim == 128 ? 224 : 160, 8, KvOrder::descending};
    p.q = p.k = p.v = {formats::e4m3, Granularity::per_tensor};
    p.qk.instruction = p.pv.instruction = kWgmmaE4m3;
    p.p = {formats::e4m3, PScale::static_exponent, 8};
  } else {
    p.tiling = {block_q, head_dim == 128 ? 176 : 192, 8, KvOrder::descending};
    p.tiling.block_kv_causal = 128;
    p.q = p.k = p.v = {formats::bf16, Granularity::none};
    p.qk.instruction = p.pv.instruction = kWgmmaBf16;
    p.p = {formats::bf16, PScale::static_exponent, 0};
  }
  p.accumulation = {Accumulation::in_place, 0};
  p.softmax = Softmax::flash3;
  p.causal_align = CausalAlign::bottom_right;
  p.output = formats::bf16;
  p.kernel_output = true;
  return p;
}

// What SageAttention2's wrapper and kernels share, on sm90 and sm89 alike: K minus torch's half k.mean()
// (k - km in half, or in fp32 in the fused per-warp quantizer), INT8 Q and K per thread or per warp by
// its quantizers, P offset by S_FP8_OFFSET (attn_utils.cuh) in E4M3, P V flushed once per KV block,
// run on sm_90 (the Ada kernels too: setup.py builds them for it).
void sageattn2_wrapper(Pipeline& p, bool per_warp) {
  p.arch = "sm_90";
  p.smoothing.k = true;
  p.smoothing.key_mean_format = formats::fp16;
  p.smoothing.key_residual_format = per_warp ? formats::fp32 : formats::fp16;
  p.q = p.k = {formats::int8, per_warp ? Granularity::per_warp : Granularity::per_thread};
  p.p = {formats::e4m3, PScale::static_exponent, 8.807f};
  p.accumulation = {Accumulation::two_level, 0};
  p.quantizers = Quantizers::sageattention2;
}

// SageAttention2's Hopper path as released: thu-ml/SageAttention d1a57a5, sageattention/core.py's
// sageattn_qk_int8_pv_fp8_cuda_sm90 with its defaults (per_thread, smooth_k, "fp32+fp32"), the kernel
// qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf (sage2_sm90_steps.hpp) behind the wrapper's
// quantizers (quantizers=sageattention2). The wrapper pads d < 64 to 64 and 64 < d < 128 to 128 with
// zero channels, which change no score and no kept output: the emulation runs on d itself.
Pipeline sageattn2_sm90(bool per_warp) {
  Pipeline p;
  p.name = per_warp ? "sageattn2-sm90-per-warp" : "sageattn2-sm90";
  p.follows =
      "SageAttention2's Hopper kernel as released (thu-ml/SageAttention d1a57a5, sageattn_qk_int8_pv_fp8_cuda_sm90 "
      "with its defaults; csrc/qattn/qk_int_sv_f8_cuda_sm90.cu built with setup.py's flags, --use_fast_math): K minus "
      "torch's fp16/bf16 k.mean() (its reduction order not modelled: --key-mean gives it), per-thread INT8 Q and K "
      "by the Triton quantizers (div.full: MUFU.RCP; + 1e-7; add one half and truncate), per-channel E4M3 V by the "
      "fused fast-math kernel, 64 x 128 tiles, the scales fused into the exponent's fma but the last KV block's "
      "scores dequantized first, P = 2^(s - m + 8.807) in E4M3, wgmma e4m3 chained over each KV block and flushed "
      "into the fp32 o with one FFMA, out = o rcp(l) v_scale, LSE the kernel's (log2, before core.py's correction). "
      "Checked on an H100 (verification/captures/" + p.name + ")" +
      (per_warp ? ". qk_quant_gran=per_warp: Q per warp (16 rows), K per 128-key block by the fused fast-math CUDA "
                  "quantizers (amax from 1e-7, x times fl(127 rcp(amax)) rounded to nearest even), K - km in fp32"
                : "");
  sageattn2_wrapper(p, per_warp);
  p.tiling = {64, 128, 4, KvOrder::ascending};
  p.v = kE4m3PerChannel;
  p.qk.instruction = kWgmmaS8;
  p.pv.instruction = kWgmmaE4m3;
  p.softmax = Softmax::sage2_sm90;
  return p;
}

// SageAttention2's Ada path as released, which setup.py also builds for sm90: thu-ml/SageAttention
// d1a57a5, sageattention/core.py's sageattn_qk_int8_pv_fp8_cuda with its defaults (per_thread,
// smooth_k, pv_accum_dtype "fp32+fp16": V's channels quantized to 2.25 so 32 products of P <= 448 stay in
// fp16), the kernel qk_int8_sv_f8_accum_f16_fuse_v_scale_attn_inst_buf (qk_int_sv_f8_cuda_sm89.cuh;
// sage2_sm90_steps.hpp), or "fp32+fp32" (V at 448, ..._accum_f32_..., FP22). The wrapper pads as on sm90.
enum class Sage2Ada : std::uint8_t { fp16_buffer, fp16_buffer_per_warp, fp32_buffer };
Pipeline sageattn2_sm89(Sage2Ada variant) {
  const bool per_warp = variant == Sage2Ada::fp16_buffer_per_warp, fp32 = variant == Sage2Ada::fp32_buffer;
  Pipeline p;
  p.name = per_warp ? "sageattn2-sm89-per-warp" : fp32 ? "sageattn2-sm89-fp32" : "sageattn2-sm89";
  p.follows =
      "SageAttention2's Ada kernel as released, run on Hopper (thu-ml/SageAttention d1a57a5, sageattn_qk_int8_pv_fp8_cuda "
      "with its defaults" + std::string(per_warp ? " but qk_quant_gran=per_warp" : fp32 ? " but pv_accum_dtype=fp32+fp32" : "") +
      "; csrc/qattn/qk_int_sv_f8_cuda_sm89.cuh built with setup.py's flags for sm90): K minus torch's k.mean(), " +
      (per_warp ? "INT8 Q per warp (32 rows) and K per 64-key block by the fused fast-math CUDA quantizers"
                : "per-thread INT8 Q and K by the Triton quantizers (BLKQ 128, WARPQ 32, BLKK 64, WARPK 64)") +
      ", per-channel E4M3 V at " + (fp32 ? "448" : "2.25") +
      " by the fused fast-math kernel, 128 x 64 tiles of 4 warps on mma.sync (INT8 m16n8k32), the scales fused into the "
      "exponent's fma but the last two KV blocks' scores dequantized first, P = 2^(s - m + 8.807) in E4M3, P V on "
      "mma.sync e4m3 chained over each 64-key block in " + (fp32 ? "FP22" : "an fp16 accumulator") +
      " and flushed into the fp32 o with one FFMA, out = o rcp(l) v_scale, LSE the kernel's (log2)";
  sageattn2_wrapper(p, per_warp);
  p.tiling = {128, 64, 4, KvOrder::ascending};
  p.v = fp32 ? kE4m3PerChannel : OperandStage{formats::e4m3, Granularity::per_channel, 2.25};  // core.py's quant_v_scale_max
  p.qk.instruction = kImmaS8;
  p.pv.instruction = fp32 ? kFp8MmaF32 : kFp8MmaF16;
  p.p_keys = PKeys::registers;  // RS_32_to_8: P stays in registers
  p.softmax = Softmax::sage2_sm89;
  return p;
}

}  // namespace

const std::vector<PresetInfo>& preset_list() {
  static const std::vector<PresetInfo> list{
      {"fp32", "every stage fp32 (fma chains, no quantization)"},
      {"fa2-fp16", "FlashAttention-2, fp16, mma.sync (Hopper)"},
      {"fa2-bf16", "FlashAttention-2, bf16, mma.sync (Hopper)"},
      {"sdpa-flash-fp16", "PyTorch 2.11's SDPA flash kernel (FlashAttention-2), fp16, as released: bit for bit on an H100"},
      {"sdpa-flash-bf16", "the same, bf16"},
      {"sage1", "SageAttention: INT8 per-block QK, smooth K, fp16 P V with fp16 accumulator (Ada)"},
      {"sage2-8b", "SageAttention2-8b on Hopper: the kernel's recipe (sage2_hopper.hpp)"},
      {"sage2-8b-ex2", "sage2-8b with SageAttention2's kernel's exponential: MUFU.EX2 (emulated bit for bit) of one "
                       "fma of the score's accumulator, scale and offset"},
      {"sage2-4b", "SageAttention2-4b on Ada: per-thread INT4 QK, smooth Q+K, FP8 P V (FP22)"},
      {"sage2pp", "SageAttention2++: FP8 P V with fp16 accumulators, narrowed P and V"},
      {"sage3", "SageAttention3 on Blackwell: NVFP4 Q, K, P (two-level), V"},
      {"fa3-fp8", "FlashAttention-3's FP8 forward (PyPI fa3-fwd 0.0.3) on Hopper, as released: E4M3 with descales"},
      {"fa3-bf16", "the same kernel family, bf16"},
      {"sageattn2-sm90", "SageAttention2's Hopper kernel as released (thu-ml/SageAttention d1a57a5, its defaults), "
                         "its quantizers included: bit for bit on an H100"},
      {"sageattn2-sm90-per-warp", "the same with qk_quant_gran=\"per_warp\" (Q per warp, K per block)"},
      {"sageattn2-sm89", "SageAttention2's Ada kernel as released (sageattn_qk_int8_pv_fp8_cuda, its defaults: "
                         "mma.sync, fp16 P V buffer), run on Hopper, its quantizers included"},
      {"sageattn2-sm89-per-warp", "the same with qk_quant_gran=\"per_warp\""},
      {"sageattn2-sm89-fp32", "the same with pv_accum_dtype=\"fp32+fp32\" (V at 448, FP22 P V)"},
      {"smoothattn", "SageAttention2's SmoothAttn baseline (migration, alpha 0.5), otherwise sage2-4b"},
      {"hadamard", "SageAttention2's HadmdAttn baseline (random Hadamard), otherwise sage2-4b"},
  };
  return list;
}

Pipeline preset(std::string_view name, int head_dim) {
  if (name == "fp32") return fp32();
  if (name == "fa2-fp16") return fa2(false);
  if (name == "fa2-bf16") return fa2(true);
  if (name == "sdpa-flash-fp16") return sdpa_flash(false, head_dim);
  if (name == "sdpa-flash-bf16") return sdpa_flash(true, head_dim);
  if (name == "sage1") return sage1();
  if (name == "sage2-8b") return sage2_8b(head_dim, steps::Exp2Unit::polynomial);
  if (name == "sage2-8b-ex2") return sage2_8b(head_dim, steps::Exp2Unit::sm90_ex2);
  if (name == "sage2-4b") return sage2_4b();
  if (name == "sage2pp") return sage2pp();
  if (name == "sage3") return sage3();
  if (name == "fa3-fp8") return fa3(true, head_dim);
  if (name == "fa3-bf16") return fa3(false, head_dim);
  if (name == "sageattn2-sm90") return sageattn2_sm90(false);
  if (name == "sageattn2-sm90-per-warp") return sageattn2_sm90(true);
  if (name == "sageattn2-sm89") return sageattn2_sm89(Sage2Ada::fp16_buffer);
  if (name == "sageattn2-sm89-per-warp") return sageattn2_sm89(Sage2Ada::fp16_buffer_per_warp);
  if (name == "sageattn2-sm89-fp32") return sageattn2_sm89(Sage2Ada::fp32_buffer);
  if (name == "smoothattn") return smoothattn();
  if (name == "hadamard") return hadamard();
  std::string names;
  for (const auto& p : preset_list()) names += (names.empty() ? "" : ", ") + std::string(p.name);
  throw std::invalid_argument("unknown preset '" + std::string(name) + "' (presets: " + names + ")");
}

}  // namespace lowbit::attention
