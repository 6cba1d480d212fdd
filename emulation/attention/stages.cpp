// The stages of a Pipeline: what each accepts (validate) and what it asks of the quantizer and the
// MMA registry. How each is named (set_stage, stage_values, to_string) is stage_names.cpp's.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/pipeline.hpp"
#include "emulation/layout.hpp"
#include "emulation/mma/wide.hpp"

namespace lowbit::attention {
namespace {

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// "m64nNk32" -> "m64n<n>k32".
std::string resolve_n(std::string_view name, int n) {
  std::string s(name);
  if (const auto at = s.find("nNk"); at != std::string::npos) s.replace(at, 3, "n" + std::to_string(n) + "k");
  return s;
}

// The registry's record of an instruction is the atom the quantizer's thread groups read.
mma::Atom quantizer_atom(const mma::Instruction& in) {
  if (in.atom.c_fragment.empty())
    throw std::invalid_argument(std::string(in.atom.name.view()) + " has no register accumulator fragment");
  return in.atom;
}

bool block_scaled(Granularity g) { return g == Granularity::nvfp4 || g == Granularity::mx; }
bool amax_scaled(Granularity g) { return g != Granularity::none; }

// The block scale format and block an instruction's scale factors use.
std::optional<std::string> fits_block_scales(const OperandStage& op, const mma::Atom& at, std::string_view role) {
  const bool wants = at.block_scaled();
  if (wants != block_scaled(op.granularity))
    return fmt::format("{}: {} {} block scales, but {}'s granularity is {}", at.name.view(), role,
                       wants ? "takes" : "takes no", role, to_string(op.granularity));
  if (!wants) return std::nullopt;
  const bool nvfp4 = op.granularity == Granularity::nvfp4;
  const Format scale = nvfp4 ? formats::ue4m3 : formats::ue8m0;
  const int block = nvfp4 ? 16 : 32;
  if (at.scale != scale || at.scale_block != block)
    return fmt::format("{} scales 1x{} blocks in {}; {} granularity is 1x{} in {}", at.name.view(), at.scale_block,
                       format_name(at.scale), to_string(op.granularity), block, format_name(scale));
  return std::nullopt;
}

float round_to_float(double y, float x, long double (*wide)(long double)) {
  const float r = float(y);
  if (!std::isfinite(r) || r == 0) return r;
  const float neighbour = std::nextafter(r, y > double(r) ? HUGE_VALF : -HUGE_VALF);
  const double midpoint = (double(r) + double(neighbour)) / 2;  // exact
  if (std::fabs(y - midpoint) > std::fabs(midpoint) * 0x1p-50) return r;
  return float(wide(static_cast<long double>(x)));
}
}  // namespace

float exp2_exact(float x) {
  return round_to_float(std::exp2(double(x)), x, [](long double v) { return std::exp2(v); });
}
float log2_exact(float x) {
  return round_to_float(std::log2(double(x)), x, [](long double v) { return std::log2(v); });
}

std::string ExponentialStage::name() const {
  if (exact) return "exact";
  if (exp2.unit == steps::Exp2Unit::sm90_ex2) return "sm90-ex2";
  return "poly" + std::to_string(exp2.poly.degree);
}

// ---- validation -----------------------------------------------------------------------------------

std::optional<std::string> OperandStage::validate(Role role) const {
  const std::string who(to_string(role));
  if (auto why = lowbit::validate(element)) return who + " format: " + *why;
  const bool v = role == Role::v;
  const bool allowed = v ? (granularity == Granularity::none || granularity == Granularity::per_tensor ||
                            granularity == Granularity::per_channel || block_scaled(granularity))
                         : granularity != Granularity::per_channel;
  if (!allowed)
    return fmt::format("{} cannot be quantized {}: {}", who, to_string(granularity),
                       v ? "V's scales must be constant along the keys it is summed over (none, per-tensor, "
                           "per-channel, nvfp4, mx)"
                         : "a score's scale must be one product per (query, key); per-channel scales run along the "
                           "head dimension it is summed over");
  if (granularity == Granularity::none && element.is_integer())
    return who + ": integer " + format_name(element) + " needs a scale (granularity none casts)";
  if (granularity == Granularity::nvfp4 && element != formats::e2m1)
    return who + ": nvfp4 blocks hold e2m1, not " + format_name(element);
  if (granularity == Granularity::mx && (element.is_integer() || element.code_bits() > 8))
    return who + ": mx blocks hold an 8-bit or narrower float (e4m3, e5m2, e3m2, e2m3, e2m1), not " +
           format_name(element);
  if (target != 0 && (!amax_scaled(granularity) || !(target > 0) || target > max_finite(element)))
    return fmt::format("{}: target {} must lie in (0, {}] and needs a scaled granularity", who, target,
                       max_finite(element));
  return std::nullopt;
}

std::optional<std::string> SmoothingStage::validate() const {
  if (key_mean_chunk < 0) return fmt::format("key-mean-chunk={} is negative", key_mean_chunk);
  if (transform == Transform::smooth_attn && !(smooth_attn_alpha > 0 && smooth_attn_alpha <= 1))
    return fmt::format("smoothattn alpha={} is outside (0, 1]", smooth_attn_alpha);
  return std::nullopt;
}

std::optional<std::string> PStage::validate() const {
  if (auto why = lowbit::validate(format)) return "P format: " + *why;
  if (scale == PScale::two_level || scale == PScale::microscale) {
    if (blocks != Granularity::nvfp4 && blocks != Granularity::mx)
      return "P's blocks must be nvfp4 or mx, not " + std::string(to_string(blocks));
    if (blocks == Granularity::nvfp4 && format != formats::e2m1)
      return "P: " + std::string(to_string(scale)) + " scaling in NVFP4 blocks needs e2m1, got " + format_name(format);
    if (blocks == Granularity::mx && (format.is_integer() || format.code_bits() > 8))
      return "P: mx blocks hold an 8-bit or narrower float, not " + format_name(format);
    if (scale == PScale::two_level && blocks != Granularity::nvfp4)
      return std::string("P: two-level scaling is NVFP4's (its E4M3 block scales need the per-row first level)");
  }
  if (rounding != Rounding::nearest_even) {
    if (rounding != Rounding::toward_zero)
      return "P's cast rounds to nearest-even or toward-zero (cvt's rn and rz), not " + std::string(to_string(rounding));
    if (scale != PScale::static_exponent && scale != PScale::per_block)
      return "P's rounding applies to a static or per-block scale, not " + std::string(to_string(scale));
    if (!format.is_integer() && format.code_bits() <= 8)
      return "P in " + format_name(format) + ": the FP8 and FP4 casts (cvt.rn.satfinite) round to nearest only";
  }
  if (scale == PScale::static_exponent &&
      (!std::isfinite(log2_scale) || log2_scale < 0 || double(log2_scale) > std::log2(max_finite(format)) + 1e-6))
    return fmt::format("P's static scale 2^{} lies outside [1, max finite of {} = {}]", log2_scale,
                       format_name(format), max_finite(format));
  return std::nullopt;
}

quant::QuantSpec PStage::block_spec() const {
  if (scale == PScale::two_level) return quant::presets::sage3_p_two_level();
  if (blocks == Granularity::mx) return quant::presets::mx(format);
  return quant::presets::sage3_p_direct();
}

std::optional<std::string> AccumulationStage::validate() const {
  if (mmas_per_flush < 0) return fmt::format("flush interval {} is negative", mmas_per_flush);
  if (mode == Accumulation::in_place && mmas_per_flush != 0)
    return std::string("in-place accumulation has no flush interval");
  return std::nullopt;
}

std::optional<std::string> TilingStage::validate() const {
  if (block_q < 1 || block_q > quant::kMaxBlockRows)
    return fmt::format("block-q={} lies outside 1..{}", block_q, quant::kMaxBlockRows);
  // Each of the 4 lanes of a row holds 2 of every 8 columns (the MMA accumulator's layout).
  const auto keys_per_block = [](const char* name, int n) -> std::optional<std::string> {
    if (n < 8 || n > 256 || n % 8 != 0) return fmt::format("{}={} must be a multiple of 8 in 8..256", name, n);
    return std::nullopt;
  };
  if (auto why = keys_per_block("block-kv", block_kv)) return why;
  if (block_kv_causal != 0) return keys_per_block("block-kv-causal", block_kv_causal);
  if (warps < 1) return fmt::format("warps={} must be >= 1", warps);
  if (sms < 0) return fmt::format("sms={} must be >= 0", sms);
  return std::nullopt;
}

std::optional<std::string> DescaleStage::validate() const {
  for (const float d : {q, k, v})
    if (!(d > 0.0f) || !std::isfinite(d)) return fmt::format("descale {} is not a finite positive number", d);
  return std::nullopt;
}

std::optional<std::string> Pipeline::validate(int head_dim, int value_dim) const {
  if (head_dim < 1 || value_dim < 1) return fmt::format("head dimensions {} and {} must be >= 1", head_dim, value_dim);
  for (auto why : {tiling.validate(), smoothing.validate(), q.validate(Role::q), k.validate(Role::k),
                   v.validate(Role::v), p.validate(), accumulation.validate()})
    if (why) return why;
  if (auto why = lowbit::validate(output)) return "output format: " + *why;
  if (output.is_integer()) return "output format " + format_name(output) + " is an integer format";
  if (softmax == Softmax::flash2) {
    for (const auto* op : {&q, &k, &v})
      if (op->granularity != Granularity::none)
        return "softmax=flash2 takes unscaled Q, K, V (granularity none: fp16 or bf16 values, as FlashAttention-2 reads them)";
    if (smoothing.q || smoothing.k || smoothing.v || smoothing.transform != Transform::none)
      return "softmax=flash2 has no smoothing or transform (FlashAttention-2 has none)";
    if (accumulation.mode != Accumulation::in_place) return "softmax=flash2 accumulates P V in place (accumulation=in-place)";
    if (p.scale != PScale::static_exponent || p.log2_scale != 0)
      return "softmax=flash2 casts P in [0, 1] as it is (p=FORMAT:log2=0)";
  }
  if (softmax == Softmax::flash3) {
    for (const auto* op : {&q, &k, &v})
      if (op->granularity != Granularity::none && op->granularity != Granularity::per_tensor)
        return "softmax=flash3 takes Q, K, V unscaled or with one scale each (granularity none or per-tensor), as "
               "FlashAttention-3 reads them";
    if (smoothing.q || smoothing.k || smoothing.v || smoothing.transform != Transform::none)
      return "softmax=flash3 has no smoothing or transform (FlashAttention-3 has none)";
    if (accumulation.mode != Accumulation::in_place) return "softmax=flash3 accumulates P V in place (accumulation=in-place)";
    if (p.scale != PScale::static_exponent || p.log2_scale != std::floor(p.log2_scale) || p.log2_scale < 0)
      return "softmax=flash3 offsets the row maximum by a whole power of two (p=FORMAT:log2=N, N >= 0)";
  }
  if (sage2_released(softmax)) {
    const bool sm90 = softmax == Softmax::sage2_sm90;
    const char* kernel = sm90 ? "softmax=sage2-sm90 is SageAttention2's sm90 kernel: " : "softmax=sage2-sm89 is SageAttention2's sm89 kernel: ";
    if (q.element != formats::int8 || k.element != formats::int8 || q.granularity != k.granularity ||
        (q.granularity != Granularity::per_thread && q.granularity != Granularity::per_warp))
      return std::string(kernel) + "INT8 Q and K per thread or per warp (q=int8:per-thread, k=int8:per-thread, or per-warp)";
    if (v.element != formats::e4m3 || v.granularity != Granularity::per_channel)
      return std::string(kernel) + "per-channel E4M3 V (v=e4m3:per-channel)";
    const int block_q = sm90 ? 64 : 128, block_kv = sm90 ? 128 : 64;
    if (tiling.block_q != block_q || tiling.block_kv != block_kv || tiling.warps != 4 ||
        tiling.kv_order != KvOrder::ascending || tiling.block_kv_causal != 0)
      return fmt::format("{}{} x {} tiles of 4 warps, KV blocks ascending", kernel, block_q, block_kv);
    if (smoothing.q || smoothing.v || smoothing.transform != Transform::none)
      return std::string(kernel) + "K smoothing alone (smooth-k), no Q or V smoothing or transform";
    if (qk.on_values() || pv.on_values() || accumulation.mode != Accumulation::two_level ||
        (accumulation.mmas_per_flush != 0 && accumulation.mmas_per_flush != tiling.block_kv / 32))
      return std::string(kernel) + "integer Q K^T, P V on codes, flushed into o once per KV block (two-level)";
    if (p.format != formats::e4m3 || p.scale != PScale::static_exponent)
      return std::string(kernel) + "E4M3 P offset by a static log2 (p=e4m3:log2=8.807)";
    if (head_dim > 128 || value_dim != head_dim)
      return fmt::format("{}head dimensions up to 128 (its wrapper's 'Unsupported head_dim'), V's as Q's and K's, not {} "
                         "and {}", kernel, head_dim, value_dim);
  }
  if (quantizers == Quantizers::sageattention2) {
    if (!q.element.is_integer() || !k.element.is_integer() || v.element.is_integer())
      return "quantizers=sageattention2 are SageAttention2's integer Q, K and floating V quantizers";
    for (const auto* op : {&q, &k, &v})
      if (op->granularity == Granularity::nvfp4 || op->granularity == Granularity::mx)
        return "quantizers=sageattention2 have fp32 scales, not block scales (nvfp4, mx)";
  }
  if ((smoothing.key_mean_format != formats::fp32 || smoothing.key_residual_format != formats::fp32) && !smoothing.k)
    return "key-mean-format and key-residual-format round K's mean and K - mean: they need smooth-k=on";
  if (auto why = descale.validate()) return why;
  if (softmax != Softmax::flash3 && (descale.q != 1.0f || descale.k != 1.0f || descale.v != 1.0f))
    return "descale is FlashAttention-3's (softmax=flash3)";
  // The contract's lanes sum their block_kv / 4 columns as a balanced tree.
  if (softmax == Softmax::contract && !power_of_two(tiling.block_kv))
    return fmt::format("block-kv={} must be a power of two for softmax=contract (a lane's row sum is a tree of "
                       "block_kv/4 columns)", tiling.block_kv);
  if (exponential.fused() && smoothing.q)
    return "exp2-argument=fused: Q smoothing corrects the scaled score before the exponent; fused needs smooth-q=off";
  if (smoothing.transform == Transform::hadamard && !power_of_two(head_dim))
    return fmt::format("the random Hadamard rotation needs a power-of-two head dimension (d = {})", head_dim);
  try {
    // QK^T
    const auto groups_need_instruction = [&]() -> std::optional<std::string> {
      for (const auto* op : {&q, &k})
        if (op->granularity == Granularity::per_thread || op->granularity == Granularity::per_warp) {
          if (!qk.has_instruction())
            return std::string("per-thread/per-warp groups come from the QK instruction: name one (fp32-fma:INSTRUCTION)");
          if (auto why = qk_tiling().validate()) return "per-thread/per-warp groups: " + *why;
        }
      return std::nullopt;
    };
    if (qk.has_instruction() && qk.on_values()) {
      const mma::Instruction in = qk_instruction();
      if (qk.wide()) mma::WideAccumulation{in};  // throws for a model it cannot run
      if (in.atom.issue == mma::Issue::wgmma && in.atom.n != tiling.block_kv)
        return fmt::format("{} computes {} keys per instruction; block-kv is {}", in.atom.name.view(), in.atom.n, tiling.block_kv);
      if (auto why = groups_need_instruction()) return why;
    } else if (qk.on_values()) {
      if (auto why = groups_need_instruction()) return why;
    } else {
      const mma::Instruction in = qk_instruction();
      const mma::Atom& at = in.atom;
      if (at.a != q.element || at.b != k.element)
        return fmt::format("QK instruction {} multiplies {} x {}, but Q is {} and K {}", at.name.view(), format_name(at.a),
                           format_name(at.b), format_name(q.element), format_name(k.element));
      for (const auto& [op, who] : {std::pair{&q, "Q"}, std::pair{&k, "K"}})
        if (auto why = fits_block_scales(*op, at, who)) return why;
      if (at.issue == mma::Issue::wgmma && at.n != tiling.block_kv)
        return fmt::format("{} computes {} keys per instruction; block-kv is {}", at.name.view(), at.n, tiling.block_kv);
      if (at.d == formats::s32) {
        const int depth = (head_dim + at.k - 1) / at.k * at.k;
        const auto largest = [](const Format& f) { return std::max(max_finite(f), -lowest_finite(f)); };
        if (largest(q.element) * largest(k.element) * depth >= 0x1p24)
          return fmt::format("{} x {} sums over d = {} could reach 2^24, where float(S) is no longer exact",
                             format_name(q.element), format_name(k.element), depth);
      }
      if (auto why = groups_need_instruction()) return why;
    }
    // P V
    const bool p_blocks = p.scale == PScale::two_level || p.scale == PScale::microscale;
    if (accumulation.mode == Accumulation::in_place && p.scale != PScale::static_exponent)
      return std::string("in-place accumulation needs P's static scale (a per-block or per-row factor multiplies R first)");
    if (row_sum == steps::RowSum::pv && (softmax != Softmax::contract || accumulation.mode != Accumulation::two_level ||
                                  pv.on_values() || p.scale != PScale::static_exponent))
      return std::string("row-sum=pv sums P's codes through the P V instruction, flushed as o is: it needs "
                         "softmax=contract, accumulation=two-level, P V on codes (an instruction) and P's static scale");
    if (p_keys == PKeys::registers) {
      constexpr int kStep = layout::AccumulatorToA8::kGroupColumns;
      if (pv.on_values() || pv_instruction(value_dim).atom.k != kStep || tiling.block_kv % kStep != 0)
        return fmt::format("p-keys=registers is the order of an instruction's {}-key k steps (an 8-bit P V instruction "
                           "with k = {}, block-kv a multiple of {})", kStep, kStep, kStep);
    }
    if (pv.on_values()) {
      if (pv.has_instruction()) {
        const mma::Instruction in = pv_instruction(value_dim);
        if (pv.wide()) mma::WideAccumulation{in};
        if (tiling.block_kv % in.atom.k != 0)
          return fmt::format("block-kv={} is not a multiple of {}'s k = {}", tiling.block_kv, in.atom.name.view(), in.atom.k);
        if (pv.wide() && accumulation.mode == Accumulation::in_place && in.atom.c != formats::fp32)
          return in.atom.name.str() + " accumulates in " + format_name(in.atom.c) + "; in-place accumulation needs an fp32 C";
      } else if (accumulation.mmas_per_flush != 0) {
        return std::string("fp32-fma P V has no MMAs to flush: name an instruction (fp32-fma:INSTRUCTION) or set "
                           "accumulation=two-level or in-place");
      }
    } else {
      const mma::Instruction in = pv_instruction(value_dim);
      const mma::Atom& at = in.atom;
      if (at.a != p.format || at.b != v.element)
        return fmt::format("PV instruction {} multiplies {} x {}, but P is {} and V {}", at.name.view(), format_name(at.a),
                           format_name(at.b), format_name(p.format), format_name(v.element));
      if (auto why = fits_block_scales(v, at, "V")) return why;
      if (at.block_scaled() != p_blocks)
        return fmt::format("{} {} block scales, but P's scale is {}", at.name.view(),
                           at.block_scaled() ? "takes" : "takes no", to_string(p.scale));
      if (at.block_scaled()) {
        const bool nvfp4 = p.blocks == Granularity::nvfp4;
        if (at.scale != (nvfp4 ? formats::ue4m3 : formats::ue8m0) || at.scale_block != (nvfp4 ? 16 : 32))
          return fmt::format("{} scales 1x{} blocks in {}; P's {} blocks are 1x{} in {}", at.name.view(), at.scale_block,
                             format_name(at.scale), to_string(p.blocks), nvfp4 ? 16 : 32, nvfp4 ? "ue4m3" : "ue8m0");
      }
      if ((at.d == formats::s32) != p.format.is_integer())
        return at.name.str() +
               (at.d == formats::s32 ? " is an integer instruction; P is " : " is a floating instruction; P is ") +
               format_name(p.format);
      if (tiling.block_kv % at.k != 0)
        return fmt::format("block-kv={} is not a multiple of {}'s k = {}", tiling.block_kv, at.name.view(), at.k);
      if (accumulation.mode == Accumulation::in_place && at.c != formats::fp32)
        return at.name.str() + " accumulates in " + format_name(at.c) + "; in-place accumulation needs an fp32 C";
    }
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

mma::Instruction Pipeline::qk_instruction() const {
  return mma::find_instruction(arch, resolve_n(qk.instruction, tiling.block_kv));
}

mma::Instruction Pipeline::pv_instruction(int value_dim) const {
  // A kernel pads V's columns with zeros to whole 8-column tiles; the columns are independent.
  return mma::find_instruction(arch, resolve_n(pv.instruction, (value_dim + 7) / 8 * 8));
}

quant::ThreadTiling Pipeline::qk_tiling() const {
  return quant::ThreadTiling{quantizer_atom(qk_instruction()), tiling.warps, tiling.block_q, tiling.block_kv};
}

int Pipeline::qk_depth(int head_dim) const {
  int multiple = 1;
  if (qk.has_instruction()) {
    multiple = qk_instruction().atom.k;
  } else {
    for (const OperandStage* op : {&q, &k})
      if (op->granularity == Granularity::nvfp4 || op->granularity == Granularity::mx)
        multiple = std::max(multiple, op->granularity == Granularity::nvfp4 ? 16 : 32);
  }
  return (head_dim + multiple - 1) / multiple * multiple;
}

quant::QuantSpec Pipeline::quant_spec(Role role) const {
  const OperandStage& op = role == Role::q ? q : role == Role::k ? k : v;
  const int k_depth = role == Role::v ? 1 : qk_depth(1);
  quant::QuantSpec s;
  s.element = op.element;
  s.scale.target = op.target;
  switch (op.granularity) {
    case Granularity::none:
      s.scale.rule = quant::ScaleRule::fixed;
      s.scale.fixed_value = 1;
      break;
    case Granularity::per_tensor: s.grouping = quant::grouping::per_tensor(); break;
    case Granularity::per_block:
      s.grouping = quant::grouping::per_block(role == Role::q ? tiling.block_q : tiling.block_kv);
      break;
    case Granularity::per_warp:
    case Granularity::per_thread: {
      const auto operand = role == Role::q ? quant::Operand::q : quant::Operand::k;
      s.grouping = op.granularity == Granularity::per_thread ? quant::grouping::per_thread(qk_tiling(), operand)
                                                             : quant::grouping::per_warp(qk_tiling(), operand);
      break;
    }
    case Granularity::per_token: s.grouping = quant::grouping::per_token(); break;
    case Granularity::per_channel: s.grouping = quant::grouping::per_channel(); break;
    case Granularity::nvfp4:
      s = quant::presets::nvfp4(false);
      break;
    case Granularity::mx:
      s = quant::presets::mx(op.element);
      break;
  }
  s.grouping.col_multiple = role == Role::v && block_scaled(op.granularity) ? tiling.block_kv : k_depth;
  if (quantizers == Quantizers::sageattention2 && op.granularity != Granularity::none) {
    if (role == Role::v) {
      s.arithmetic = quant::Arithmetic::cuda_fast_math;  // per_channel_fp8's scale_fuse_quant_cuda
    } else if (op.granularity != Granularity::per_thread) {
      s.arithmetic = quant::Arithmetic::cuda_fast_math;  // per_warp_int8's QuantInt8Kernel: amax from 1e-7
      s.scale.amax_floor = 1e-7f;
    } else {
      s.arithmetic = quant::Arithmetic::triton_div_full;  // quant_per_thread.py: amax / 127. + 0.0000001
      s.scale.epsilon = 1e-7f;
      s.conversion.rounding = Rounding::toward_zero;
    }
  }
  s.name = std::string(to_string(role)) + " " + op.text();
  return s;
}

void follow_inputs(Pipeline& pipeline, const Format& inputs) {
  if (!pipeline.kernel_output) pipeline.output = inputs;
  for (Format* f : {&pipeline.smoothing.key_mean_format, &pipeline.smoothing.key_residual_format})
    if (*f != formats::fp32 && (inputs == formats::fp16 || inputs == formats::bf16)) *f = inputs;
}

}  // namespace lowbit::attention
