// variant_attention.hpp: which pipelines the sage2-4b family runs, and the host side of a run (the
// emulator's operands laid out as the kernel (variant_kernel.cuh) reads them, the output rounded as forward()).
#include "kernels/attention/variant_attention.hpp"

#include <chrono>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "emulation/attention/forward_operands.hpp"
#include "kernels/attention/variant_launch.hpp"

namespace lowbit::kernels::attention {
namespace {

namespace la = lowbit::attention;

constexpr std::string_view kQkS4 = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32";
constexpr std::string_view kQkS8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";

struct PvChoice {
  std::string_view instruction;
  PvInstruction pv;
  Format element;  // P's and V's
};
const PvChoice kPvChoices[] = {
    {"mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", PvInstruction::e4m3, formats::e4m3},
    {"mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32", PvInstruction::e5m2, formats::e5m2},
    {"mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", PvInstruction::s8, formats::int8},
    {"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", PvInstruction::f16, formats::fp16},
};

const PvChoice* pv_choice(const la::Pipeline& pl) {
  for (const PvChoice& c : kPvChoices)
    if (pl.pv.instruction == c.instruction) return &c;
  return nullptr;
}

bool block_scaled(la::Granularity g) { return g == la::Granularity::nvfp4 || g == la::Granularity::mx; }

}  // namespace

std::optional<std::string> VariantLaunch::validate() const {
  if (head_dim != 64 && head_dim != 128) return fmt::format("head_dim {}: 64 or 128", head_dim);
  if (in_place && pv == PvInstruction::s8) return std::string("in_place with P V on s8: an s32 accumulator cannot take fp32 o");
  if (p_per_block && (in_place || !(p_target > 0)))
    return fmt::format("p_per_block: two-level accumulation and a positive p_target ({}) only", p_target);
  const int pv_steps = pv == PvInstruction::f16 ? 4 : 2;  // k steps of a 64-key block
  if (mmas_per_flush < 0 || mmas_per_flush > pv_steps || (mmas_per_flush > 0 && pv_steps % mmas_per_flush != 0))
    return fmt::format("mmas_per_flush {}: 0 or a divisor of the block's {} P V k steps", mmas_per_flush, pv_steps);
  if (batch < 1 || heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
    return fmt::format("batch {}, heads {}, kv_heads {}: positive, heads a multiple of kv_heads", batch, heads, kv_heads);
  if (tokens < 1 || keys < 1 || tokens_padded != (tokens + 127) / 128 * 128 || keys_padded != (keys + 63) / 64 * 64)
    return fmt::format("tokens {} (padded {}), keys {} (padded {}): padded to 128 queries and 64 keys", tokens,
                       tokens_padded, keys, keys_padded);
  const auto bh = std::size_t(batch) * std::size_t(heads), bg = std::size_t(batch) * std::size_t(kv_heads);
  const auto d = std::size_t(head_dim), tq = std::size_t(tokens_padded), tk = std::size_t(keys_padded);
  const struct {
    const char* name;
    std::size_t have, want;
  } sizes[] = {
      {"q", q.size(), bh * tq * d},
      {"k", k.size(), bg * tk * d},
      {"q_scale", q_scale.size(), bh * tq},
      {"k_scale", k_scale.size(), bg * tk},
      {"q_means", q_means.size(), smooth_q ? bh * (tq / 128) * d : 0},
      {"k_smoothed", k_smoothed.size(), smooth_q ? bg * std::size_t(keys) * d : 0},
      {"v", v.size(), bg * tk * d},
      {"v_scale", v_scale.size(), bg * d},
      {"v_mean", v_mean.size(), smooth_v ? bg * d : 0},
      {"lse_bias", lse_bias.size(), bh * std::size_t(tokens)},
  };
  for (const auto& s : sizes)
    if (s.have != s.want) return fmt::format("{}: {} values, the shapes need {}", s.name, s.have, s.want);
  return std::nullopt;
}

std::optional<std::string> variant_unsupported(const la::Pipeline& pl) {
  if (pl.arch != "sm_90")
    return fmt::format("arch {}: the GPU runs sm_90's arithmetic; compare the Hopper twin (--set arch=sm_90)", pl.arch);
  if (pl.softmax != la::Softmax::contract) return std::string("softmax: the family runs the contract's steps only");
  if (pl.tiling.block_q != 128 || pl.tiling.block_kv != 64 || pl.tiling.warps != 4 ||
      (pl.tiling.block_kv_causal != 0 && pl.tiling.block_kv_causal != 64))
    return fmt::format("tiling {} x {}, {} warps: the family runs 128 x 64 tiles with 4 warps", pl.tiling.block_q,
                       pl.tiling.block_kv, pl.tiling.warps);
  if (pl.qk.product != la::Product::instruction || (pl.qk.instruction != kQkS4 && pl.qk.instruction != kQkS8))
    return "qk " + pl.qk.text() + ": the family runs QK^T on " + std::string(kQkS4) + " or " + std::string(kQkS8);
  if (block_scaled(pl.q.granularity) || block_scaled(pl.k.granularity))
    return std::string("Q, K block-scaled: the family's QK instructions take no block scales");
  const PvChoice* pv = pv_choice(pl);
  if (pl.pv.product != la::Product::instruction || !pv)
    return "pv " + pl.pv.text() + ": the family runs P V on mma.sync m16n8k32 e4m3, e5m2 or s8, or m16n8k16 f16 (f32 out)";
  if (pl.p.format != pv->element || pl.v.element != pv->element || block_scaled(pl.v.granularity))
    return fmt::format("P {}, V {}: the P V instruction takes {} P and V without block scales", format_name(pl.p.format),
                       pl.v.text(), format_name(pv->element));
  if (pl.p.scale != la::PScale::static_exponent && pl.p.scale != la::PScale::per_block)
    return fmt::format("p scale {}: the family casts P at its static scale or with one scale per block (block-scaled "
                       "P needs a block-scaled P V instruction)", la::to_string(pl.p.scale));
  if (pl.p.rounding != Rounding::nearest_even && pl.p.rounding != Rounding::toward_zero)
    return std::string("p rounding: nearest even or toward zero only");
  if (pl.p_keys != la::PKeys::natural)
    return std::string("p-keys registers: the family feeds P V its keys in order (P staged in shared memory)");
  if (pl.accumulation.mode == la::Accumulation::in_place && pv->pv == PvInstruction::s8)
    return std::string("accumulation in-place: an s32 P V accumulator cannot take the fp32 o");
  if (pl.exponential.exact) return std::string("exp2 exact: no GPU instruction computes it (poly5, poly6 or sm90-ex2)");
  if (pl.exponential.fused()) return std::string("exp-argument fused: the family rounds the score first (rounded-score)");
  if (pl.descale.q != 1.0f || pl.descale.k != 1.0f || pl.descale.v != 1.0f)
    return std::string("descale: FlashAttention-3's descales are not the family's");
  return std::nullopt;
}

la::ForwardResult variant_forward(const la::Pipeline& pl, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                  const la::ForwardOptions& options, VariantTiming* timing) {
  const auto start = std::chrono::steady_clock::now();
  if (auto why = variant_unsupported(pl)) throw std::invalid_argument("pipeline " + pl.name + ": " + *why);
  if (q.dim != v.dim || (q.dim != 64 && q.dim != 128))
    throw std::invalid_argument(fmt::format("{} {}, {} {}: the family runs head dimensions 64 and 128, the value dimension "
                                            "the same", options.q_name, q.shape_text(), options.v_name, v.shape_text()));
  la::PreparedOperands ops = la::prepare_operands(pl, q, k, v, options);
  const la::detail::Context& cx = ops.context;
  const la::detail::Shape& sh = cx.shape;
  if (sh.depth != sh.head_dim) throw std::logic_error("variant_forward: QK's depth is not the head dimension");
  const int d = sh.head_dim, group = q.heads / k.heads;

  VariantLaunch l;
  l.qk = pl.qk.instruction == kQkS4 ? QkInstruction::s4 : QkInstruction::s8;
  l.pv = pv_choice(pl)->pv;
  l.head_dim = d;
  l.in_place = pl.accumulation.mode == la::Accumulation::in_place;
  l.mmas_per_flush = pl.accumulation.mmas_per_flush;
  l.p_toward_zero = pl.p.rounding == Rounding::toward_zero;
  l.p_per_block = pl.p.scale == la::PScale::per_block;
  if (l.p_per_block) l.p_target = float(max_finite(pl.p.format));
  l.smooth_q = pl.smoothing.q;
  l.smooth_v = pl.smoothing.v;
  l.causal = cx.causal;
  l.causal_offset = cx.causal_offset;
  l.descending = pl.tiling.kv_order == la::KvOrder::descending;
  l.softmax_scale_log2 = cx.softmax_scale_log2;
  l.p_log2_scale = pl.p.log2_scale;
  l.exp2 = pl.exponential.exp2;
  l.batch = q.batch;
  l.heads = q.heads;
  l.kv_heads = k.heads;
  l.tokens = sh.tokens;
  l.keys = sh.keys;
  l.tokens_padded = sh.tokens_padded;
  l.keys_padded = sh.keys_padded;
  const int q_blocks = sh.tokens_padded / pl.tiling.block_q;
  for (const la::detail::PreparedGroup& g : ops.groups) {
    const la::detail::PreparedKv& kv = g.kv;
    for (int j = 0; j < sh.keys_padded; ++j) {
      for (int c = 0; c < d; ++c) {
        l.k.push_back(std::int8_t(kv.k_operand.ints[std::size_t(j) * std::size_t(d) + std::size_t(c)]));
        l.v.push_back(std::uint16_t(kv.v_operand.codes(j, c)));
      }
      l.k_scale.push_back(kv.k_scale[std::size_t(j)]);
    }
    if (pl.smoothing.q)
      for (int j = 0; j < sh.keys; ++j)
        for (int c = 0; c < d; ++c) l.k_smoothed.push_back(kv.k_smoothed(j, c));
    l.v_scale.insert(l.v_scale.end(), kv.v_scale.begin(), kv.v_scale.end());
    if (pl.smoothing.v) l.v_mean.insert(l.v_mean.end(), kv.v.mean.begin(), kv.v.mean.end());
  }
  // Q heads in (batch, head) order: group b * kv_heads + h / group, member h % group.
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) {
      const la::detail::PreparedQ& pq = ops.groups[std::size_t(b * k.heads + h / group)].q[std::size_t(h % group)];
      for (int i = 0; i < sh.tokens_padded; ++i)
        for (int c = 0; c < d; ++c) l.q.push_back(std::int8_t(pq.operand.ints[std::size_t(i) * std::size_t(d) + std::size_t(c)]));
      l.q_scale.insert(l.q_scale.end(), pq.row_scale.begin(), pq.row_scale.end());
      if (pl.smoothing.q)
        for (int blk = 0; blk < q_blocks; ++blk)
          for (int c = 0; c < d; ++c) l.q_means.push_back(pq.means(blk, c));
      l.lse_bias.insert(l.lse_bias.end(), pq.lse_bias.begin(), pq.lse_bias.end());
    }

  VariantOutput out = run_variant(l);

  la::ForwardResult result = la::ForwardResult::shaped(q, k, v, pl.output);
  result.output = std::move(out.output);
  result.lse = std::move(out.lse);
  la::detail::round_output(result);
  if (options.keep_operands) {
    result.q.resize(std::size_t(q.batch) * std::size_t(q.heads));
    result.k.resize(ops.groups.size());
    result.v.resize(ops.groups.size());
    for (std::size_t gi = 0; gi < ops.groups.size(); ++gi) {
      result.k[gi] = std::move(ops.groups[gi].kv.k);
      result.v[gi] = std::move(ops.groups[gi].kv.v);
      for (int i = 0; i < group; ++i)
        result.q[gi * std::size_t(group) + std::size_t(i)] = std::move(ops.groups[gi].q[std::size_t(i)].q);
    }
  }
  if (timing) {
    timing->total_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    timing->kernel_ms = out.kernel_ms;
  }
  return result;
}

}  // namespace lowbit::kernels::attention
