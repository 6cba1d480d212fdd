// The stages by name: the names of their values (to_string, text()), how set_stage reads
// STAGE=VALUE and stage_values writes every stage back in the same words, and stage_list, the
// table `lowbit attention --help` prints. What each stage accepts is stages.cpp's (validate).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/pipeline.hpp"

namespace lowbit::attention {
namespace {

template <class Enum>
struct Named {
  Enum value;
  std::string_view name;
};

constexpr Named<Granularity> kGranularities[]{
    {Granularity::none, "none"},           {Granularity::per_tensor, "per-tensor"},
    {Granularity::per_block, "per-block"}, {Granularity::per_warp, "per-warp"},
    {Granularity::per_thread, "per-thread"}, {Granularity::per_token, "per-token"},
    {Granularity::per_channel, "per-channel"}, {Granularity::nvfp4, "nvfp4"},
    {Granularity::mx, "mx"}};
constexpr Named<PScale> kPScales[]{{PScale::static_exponent, "static"},
                                   {PScale::per_block, "per-block"},
                                   {PScale::two_level, "two-level"},
                                   {PScale::microscale, "microscale"}};
constexpr Named<Transform> kTransforms[]{
    {Transform::none, "none"}, {Transform::smooth_attn, "smoothattn"}, {Transform::hadamard, "hadamard"}};
constexpr Named<Role> kRoles[]{{Role::q, "Q"}, {Role::k, "K"}, {Role::v, "V"}};
constexpr Named<steps::ExpArgument> kExpArguments[]{{steps::ExpArgument::rounded_score, "rounded"},
                                                    {steps::ExpArgument::fused, "fused"}};
constexpr Named<Softmax> kSoftmaxes[]{{Softmax::contract, "contract"},
                                      {Softmax::flash2, "flash2"},
                                      {Softmax::flash3, "flash3"},
                                      {Softmax::sage2_sm90, "sage2-sm90"},
                                      {Softmax::sage2_sm89, "sage2-sm89"}};
constexpr Named<PKeys> kPKeys[]{{PKeys::natural, "natural"}, {PKeys::registers, "registers"}};
constexpr Named<steps::RowSum> kRowSums[]{{steps::RowSum::lanes, "lanes"}, {steps::RowSum::pv, "pv"}};
constexpr Named<Quantizers> kQuantizers[]{{Quantizers::ieee, "ieee"}, {Quantizers::sageattention2, "sageattention2"}};

template <class Enum, std::size_t n>
std::string_view name_of(const Named<Enum> (&table)[n], Enum value) {
  for (const auto& e : table)
    if (e.value == value) return e.name;
  return "?";
}

template <class Enum, std::size_t n>
std::optional<Enum> parse_enum(const Named<Enum> (&table)[n], std::string_view text) {
  for (const auto& e : table)
    if (e.name == text) return e.value;
  return std::nullopt;
}

template <class Enum, std::size_t n>
std::string names_of(const Named<Enum> (&table)[n]) {
  std::string s;
  for (const auto& e : table) s += (s.empty() ? "" : "|") + std::string(e.name);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const auto at = s.find(separator, start);
    parts.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return parts;
    start = at + 1;
  }
}

template <class T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The format's own options may hold ':' (p3109:k=8:p=4, e4m3:bias=8), so the last parts are
// read first: [TARGET,] GRANULARITY, and the rest is the format.
std::string_view format_part(std::string_view value, std::size_t last_parts) {
  std::size_t end = value.size();
  for (std::size_t i = 0; i < last_parts && end != std::string_view::npos; ++i) {
    end = value.rfind(':', end - 1);
    if (end == std::string_view::npos) return {};
  }
  return value.substr(0, end);
}

std::optional<std::string> parse_operand(OperandStage& op, std::string_view value) {
  const auto parts = split(value, ':');
  if (parts.size() < 2) return "expected FORMAT:GRANULARITY[:TARGET], e.g. int8:per-thread";
  double target = 0;
  std::size_t tail = 1;
  if (parts.size() >= 3 && !parse_enum(kGranularities, parts.back()) && parse_enum(kGranularities, parts[parts.size() - 2])) {
    const auto t = parse_number<double>(parts.back());
    if (!t || !(*t > 0)) return "target '" + std::string(parts.back()) + "' is not a positive number";
    target = *t;
    tail = 2;
  }
  const std::string_view granularity = parts[parts.size() - tail], format = format_part(value, tail);
  const auto g = parse_enum(kGranularities, granularity);
  if (!g) return "granularity '" + std::string(granularity) + "' is not one of " + names_of(kGranularities);
  const ParsedFormat f = parse_format(format);
  if (!f.format) return "format '" + std::string(format) + "': " + f.error;
  op = {*f.format, *g, target};
  return std::nullopt;
}

// P's maximum as the user writes it: the integer whose log2, rounded to float, is log2_scale, else
// the log2 itself in hex.
// ...[:ROUNDING] only where it is not nearest-even.
std::string p_text(const PStage& p) {
  const std::string rounding = p.rounding == Rounding::nearest_even ? "" : ":" + std::string(to_string(p.rounding));
  std::string s = format_name(p.format) + ":";
  if (p.scale == PScale::microscale && p.blocks == Granularity::mx) return s + "mx";
  if (p.scale != PScale::static_exponent) return s + std::string(to_string(p.scale)) + rounding;
  const double max = std::round(std::exp2(double(p.log2_scale)));
  if (float(std::log2(max)) == p.log2_scale) return s + fmt::format("{}", max) + rounding;
  return s + fmt::format("log2={:a}", double(p.log2_scale)) + rounding;
}

std::optional<std::string> parse_p(PStage& p, std::string_view value) {
  // A trailing rounding (int8:127:toward-zero) first; the rest is FORMAT:SCALE.
  Rounding rounding = Rounding::nearest_even;
  if (const auto at = value.rfind(':'); at != std::string_view::npos)
    if (const auto r = parse_rounding(value.substr(at + 1))) {
      rounding = *r;
      value = value.substr(0, at);
    }
  const auto parts = split(value, ':');
  if (parts.size() < 2) return "expected FORMAT:MAX, FORMAT:log2=X or FORMAT:per-block|two-level|microscale|mx, then :ROUNDING";
  const ParsedFormat f = parse_format(format_part(value, 1));
  if (!f.format) return "format '" + std::string(format_part(value, 1)) + "': " + f.error;
  PStage out{*f.format, PScale::static_exponent, 0};
  out.rounding = rounding;
  if (parts.back().starts_with("log2=")) {
    const std::string text(parts.back().substr(5));
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !std::isfinite(v)) return "log2 '" + text + "' is not a number";
    out.log2_scale = float(v);
  } else if (const auto max = parse_number<double>(parts.back())) {
    if (!(*max >= 1) || !std::isfinite(*max)) return fmt::format("P's maximum {} must be >= 1", *max);
    out.log2_scale = float(std::log2(*max));  // rounded once: 448 gives steps::kLog2Of448
  } else if (const auto s = parse_enum(kPScales, parts.back()); s && *s != PScale::static_exponent) {
    out.scale = *s;
  } else if (parts.back() == "mx") {
    out.scale = PScale::microscale;
    out.blocks = Granularity::mx;
  } else {
    return "'" + std::string(parts.back()) + "' is not P's maximum, log2=X, per-block, two-level, microscale or mx";
  }
  p = out;
  return std::nullopt;
}

std::optional<bool> parse_switch(std::string_view v) {
  if (v == "on") return true;
  if (v == "off") return false;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(Role r) { return name_of(kRoles, r); }
std::string_view to_string(Granularity g) { return name_of(kGranularities, g); }
std::string_view to_string(PScale s) { return name_of(kPScales, s); }

std::string OperandStage::text() const {
  std::string s = format_name(element) + ":" + std::string(to_string(granularity));
  if (target > 0) s += fmt::format(":{}", target);
  return s;
}

std::string MatmulStage::text() const {
  if (!has_instruction()) return std::string(kFp32Fma);
  switch (product) {
    case Product::instruction: return instruction;
    case Product::fp32_fma: return std::string(kFp32Fma) + ":" + instruction;
    case Product::wide: return "wide:" + instruction;
  }
  return instruction;
}

// ---- stages by name ---------------------------------------------------------------------------------

const std::vector<StageInfo>& stage_list() {
  static const std::vector<StageInfo> list{
      {"arch", "sm_80|sm_89|sm_90|sm_100|sm_120", "the architecture of the QK and PV instructions"},
      {"block-q", "N", "queries per thread block"},
      {"block-kv", "N (a multiple of 8 in 8..256; a power of two for softmax=contract)", "keys per KV block"},
      {"block-kv-causal", "N (0: block-kv)", "keys per KV block under a causal mask"},
      {"warps", "N", "warps computing S (per-thread / per-warp groups)"},
      {"sms", "N", "softmax flash2: the GPU's multiprocessors, from which PyTorch picks its split-KV path (0: never)"},
      {"kv-order", "ascending|descending", "order of the KV blocks"},
      {"causal-align", "top-left|bottom-right",
       "a causal mask where queries and keys differ in number: key j visible to query i when j <= i (top-left, PyTorch's "
       "is_causal) or j <= i + keys - queries (bottom-right, FlashAttention's causal=True)"},
      {"q", "FORMAT:GRANULARITY[:TARGET]",
       "Q's format and scale groups (none|per-tensor|per-block|per-warp|per-thread|per-token|nvfp4|mx); TARGET: the code "
       "amax maps to"},
      {"k", "FORMAT:GRANULARITY[:TARGET]", "K's, likewise"},
      {"v", "FORMAT:GRANULARITY[:TARGET]", "V's (none|per-tensor|per-channel|nvfp4|mx)"},
      {"smooth-q", "on|off", "Q minus its mean per block of block-q queries (the scores take qbar.k' back)"},
      {"smooth-k", "on|off", "K minus its mean over all keys"},
      {"smooth-v", "on|off", "V minus its mean over all keys (the output takes it back)"},
      {"key-mean-chunk", "N", "keys per double partial sum of the K and V means (0: one sum in order)"},
      {"key-mean-format", "fp32|fp16|bf16",
       "K's mean as fp32, or rounded to a half format as PyTorch's k.mean() (SageAttention2's wrapper; a half format "
       "follows the inputs')"},
      {"key-residual-format", "fp32|fp16|bf16",
       "K - mean as one fp32 subtraction, or rounded to a half format as PyTorch's k - km (a half format follows the "
       "inputs')"},
      {"transform", "none|smoothattn[:ALPHA]|hadamard[:SEED]", "Q, K transform before smoothing (SageAttention2 §4.1 baselines)"},
      {"qk", "INSTRUCTION|fp32-fma|fp32-fma:INSTRUCTION|wide:INSTRUCTION",
       "the QK^T instruction (registry name; nN: n = block-kv); fp32-fma: fp32 fmas of the operands' values; wide: the "
       "instruction's accumulation on the operands' values (error injection)"},
      {"pv", "INSTRUCTION|fp32-fma|fp32-fma:INSTRUCTION|wide:INSTRUCTION", "the P V instruction (nN: n = the value dimension, rounded up to 8); its accumulator is the instruction's: .f32 "
       "(fp32; FP22 for Hopper's wgmma FP8), .f16"},
      {"p-keys", "natural|registers",
       "P's keys within each 32-key k step of the P V instruction: in key order, or as a kernel keeping P in registers "
       "feeds them (layout::accumulator_to_a8; visible where the instruction rounds parts of a k step apart, as "
       "Hopper's software mma.sync FP8)"},
      {"p", "FORMAT:MAX|FORMAT:log2=X|FORMAT:per-block|e2m1:two-level|e2m1:microscale|FORMAT:mx, then :ROUNDING",
       "P's format and scale (MAX: static, folded into the exponent, e.g. e4m3:448, int8:127; per-block: amax / the "
       "format's max per block of P; microscale: NVFP4 blocks, mx: MX blocks); ROUNDING of a static or per-block "
       "cast: nearest-even (default) or toward-zero (truncation, e.g. int8:127:toward-zero)"},
      {"accumulation", "two-level[:F]|in-place", "P V into o: fresh accumulators flushed every F MMAs (0: per KV block), or in place"},
      {"row-sum", "lanes|pv",
       "the softmax's row sum: the 4 lanes' fp32 trees of p, or the P V instruction's sum of P's codes (a column of "
       "ones beside V, flushed as o is)"},
      {"exp2", "exact|poly5|poly6|sm90-ex2", "the softmax's exp2/log2: correctly rounded, the contract's polynomials, or MUFU.EX2 of sm_90 (bit for bit) with the polynomial log2"},
      {"exp2-argument", "rounded|fused",
       "exp2's argument: the rounded score minus the row offset (two roundings), or fma(accumulator, scale, -offset) "
       "(one; SageAttention2's kernel)"},
      {"softmax", "contract|flash2|flash3|sage2-sm90|sage2-sm89",
       "the per-row softmax steps: the contract's (kernel_steps.hpp), PyTorch's FlashAttention-2 as released "
       "(flash2_steps.hpp; unscaled Q, K, V, in-place accumulation; its exp2 and log2 are MUFU's), FlashAttention-3's "
       "Hopper forward as released (flash3_steps.hpp; fast math, P offset by p's log2, the kernel's descales), or "
       "SageAttention2's Hopper kernel as released (sage2_sm90_steps.hpp; per-thread scales in the exponent's fma, "
       "the kernel's log2 LSE), or its Ada kernel (mma.sync, 128 x 64; the last two KV blocks dequantized first)"},
      {"quantizers", "ieee|sageattention2",
       "the arithmetic of Q's, K's and V's quantizers: IEEE division, or SageAttention2's released ones (Triton's "
       "div.full with MUFU.RCP and add-half truncation for Q and K, fast-math CUDA for V)"},
      {"descale", "Q,K,V", "softmax flash3: the kernel's q_descale, k_descale, v_descale (three positive numbers)"},
      {"output", "fp32|fp16|bf16", "the output's format (rounded to nearest even)"},
  };
  return list;
}

std::optional<std::string> set_stage(Pipeline& pipeline, std::string_view assignment) {
  const auto equals = assignment.find('=');
  if (equals == std::string_view::npos) return "'" + std::string(assignment) + "' is not STAGE=VALUE";
  const std::string_view key = assignment.substr(0, equals), value = assignment.substr(equals + 1);
  const auto info = std::find_if(stage_list().begin(), stage_list().end(), [&](const StageInfo& s) { return s.name == key; });
  if (info == stage_list().end()) {
    std::string names;
    for (const auto& s : stage_list()) names += (names.empty() ? "" : ", ") + std::string(s.name);
    return "unknown stage '" + std::string(key) + "' (stages: " + names + ")";
  }
  const auto error = [&](const std::string& why) {
    return "stage " + std::string(key) + "=" + std::string(value) + ": " + why + " (accepts " +
           std::string(info->values) + ")";
  };
  const auto integer = [&](int& field, int lowest) -> std::optional<std::string> {
    const auto n = parse_number<int>(value);
    if (!n || *n < lowest) return error(fmt::format("not a whole number >= {}", lowest));
    field = *n;
    return std::nullopt;
  };
  Pipeline& pl = pipeline;
  if (key == "arch") {
    if (!value.starts_with("sm_")) return error("not an sm_NN architecture");
    pl.arch = value;
  } else if (key == "block-q") {
    return integer(pl.tiling.block_q, 1);
  } else if (key == "block-kv") {
    return integer(pl.tiling.block_kv, 1);
  } else if (key == "block-kv-causal") {
    return integer(pl.tiling.block_kv_causal, 0);
  } else if (key == "warps") {
    return integer(pl.tiling.warps, 1);
  } else if (key == "sms") {
    return integer(pl.tiling.sms, 0);
  } else if (key == "key-mean-chunk") {
    return integer(pl.smoothing.key_mean_chunk, 0);
  } else if (key == "causal-align") {
    if (value == "top-left") pl.causal_align = CausalAlign::top_left;
    else if (value == "bottom-right") pl.causal_align = CausalAlign::bottom_right;
    else return error("not top-left or bottom-right");
  } else if (key == "kv-order") {
    if (value == "ascending") pl.tiling.kv_order = KvOrder::ascending;
    else if (value == "descending") pl.tiling.kv_order = KvOrder::descending;
    else return error("not ascending or descending");
  } else if (key == "q" || key == "k" || key == "v") {
    OperandStage& op = key == "q" ? pl.q : key == "k" ? pl.k : pl.v;
    if (auto why = parse_operand(op, value)) return error(*why);
  } else if (key == "smooth-q" || key == "smooth-k" || key == "smooth-v") {
    const auto on = parse_switch(value);
    if (!on) return error("not on or off");
    (key == "smooth-q" ? pl.smoothing.q : key == "smooth-k" ? pl.smoothing.k : pl.smoothing.v) = *on;
  } else if (key == "transform") {
    const auto parts = split(value, ':');
    const auto t = parse_enum(kTransforms, parts[0]);
    if (!t || parts.size() > 2 || (*t == Transform::none && parts.size() > 1)) return error("not a transform");
    pl.smoothing.transform = *t;
    if (parts.size() == 2 && *t == Transform::smooth_attn) {
      const auto alpha = parse_number<double>(parts[1]);
      if (!alpha) return error("alpha '" + std::string(parts[1]) + "' is not a number");
      pl.smoothing.smooth_attn_alpha = *alpha;
    } else if (parts.size() == 2) {
      const auto seed = parse_number<std::uint64_t>(parts[1]);
      if (!seed) return error("seed '" + std::string(parts[1]) + "' is not a whole number");
      pl.smoothing.hadamard_seed = *seed;
    }
  } else if (key == "qk" || key == "pv") {
    MatmulStage m;
    std::string_view name = value;
    if (value.starts_with("wide:")) {
      m.product = Product::wide;
      name = value.substr(5);
    } else if (value.starts_with(std::string(kFp32Fma) + ":")) {
      m.product = Product::fp32_fma;
      name = value.substr(kFp32Fma.size() + 1);
    }
    if (name.empty()) return error("no instruction");
    if (name == kFp32Fma && m.product != Product::instruction) return error("fp32-fma takes an instruction after ':'");
    m.instruction = name;
    (key == "qk" ? pl.qk : pl.pv) = m;
  } else if (key == "p-keys") {
    const auto order = parse_enum(kPKeys, value);
    if (!order) return error("not natural or registers");
    pl.p_keys = *order;
  } else if (key == "p") {
    if (auto why = parse_p(pl.p, value)) return error(*why);
  } else if (key == "accumulation") {
    const auto parts = split(value, ':');
    if (parts[0] == "in-place" && parts.size() == 1) {
      pl.accumulation = {Accumulation::in_place, 0};
    } else if (parts[0] == "two-level" && parts.size() <= 2) {
      const auto flush = parts.size() == 2 ? parse_number<int>(parts[1]) : std::optional<int>(0);
      if (!flush || *flush < 0) return error("the flush interval is not a whole number >= 0");
      pl.accumulation = {Accumulation::two_level, *flush};
    } else {
      return error("not two-level[:F] or in-place");
    }
  } else if (key == "row-sum") {
    const auto row_sum = parse_enum(kRowSums, value);
    if (!row_sum) return error("not lanes or pv");
    pl.row_sum = *row_sum;
  } else if (key == "exp2") {
    ExponentialStage& e = pl.exponential;
    if (value == "exact") e.exact = true, e.exp2 = steps::exp2_polynomial();
    else if (value == "poly5") e.exact = false, e.exp2 = steps::exp2_polynomial(steps::exp2_degree5());
    else if (value == "poly6") e.exact = false, e.exp2 = steps::exp2_polynomial(steps::exp2_degree6());
    else if (value == "sm90-ex2") e.exact = false, e.exp2 = steps::exp2_sm90_ex2();
    else return error("not exact, poly5, poly6 or sm90-ex2");
  } else if (key == "exp2-argument") {
    const auto argument = parse_enum(kExpArguments, value);
    if (!argument) return error("not rounded or fused");
    pl.exponential.argument = *argument;
  } else if (key == "softmax") {
    const auto softmax = parse_enum(kSoftmaxes, value);
    if (!softmax) return error("not contract, flash2, flash3, sage2-sm90 or sage2-sm89");
    pl.softmax = *softmax;
  } else if (key == "quantizers") {
    const auto quantizers = parse_enum(kQuantizers, value);
    if (!quantizers) return error("not ieee or sageattention2");
    pl.quantizers = *quantizers;
  } else if (key == "key-mean-format" || key == "key-residual-format") {
    const ParsedFormat f = parse_format(value);
    if (!f.format || !(*f.format == formats::fp32 || *f.format == formats::fp16 || *f.format == formats::bf16))
      return error("not fp32, fp16 or bf16");
    (key == "key-mean-format" ? pl.smoothing.key_mean_format : pl.smoothing.key_residual_format) = *f.format;
  } else if (key == "descale") {
    const auto parts = split(value, ',');
    std::optional<float> d[3];
    for (std::size_t i = 0; i < parts.size() && i < 3; ++i) d[i] = parse_number<float>(parts[i]);
    if (parts.size() != 3 || !d[0] || !d[1] || !d[2]) return error("not three numbers");
    pl.descale = {*d[0], *d[1], *d[2]};
    if (auto why = pl.descale.validate()) return error(*why);
  } else if (key == "output") {
    const ParsedFormat f = parse_format(value);
    if (!f.format || !(*f.format == formats::fp32 || *f.format == formats::fp16 || *f.format == formats::bf16))
      return error("not fp32, fp16 or bf16");
    pl.output = *f.format;
  }
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>> stage_values(const Pipeline& pl) {
  const auto on = [](bool b) { return std::string(b ? "on" : "off"); };
  std::string transform(name_of(kTransforms, pl.smoothing.transform));
  if (pl.smoothing.transform == Transform::smooth_attn) transform += fmt::format(":{}", pl.smoothing.smooth_attn_alpha);
  if (pl.smoothing.transform == Transform::hadamard) transform += fmt::format(":{}", pl.smoothing.hadamard_seed);
  return {
      {"arch", pl.arch},
      {"block-q", std::to_string(pl.tiling.block_q)},
      {"block-kv", std::to_string(pl.tiling.block_kv)},
      {"block-kv-causal", std::to_string(pl.tiling.block_kv_causal)},
      {"warps", std::to_string(pl.tiling.warps)},
      {"sms", std::to_string(pl.tiling.sms)},
      {"kv-order", pl.tiling.kv_order == KvOrder::ascending ? "ascending" : "descending"},
      {"causal-align", pl.causal_align == CausalAlign::top_left ? "top-left" : "bottom-right"},
      {"q", pl.q.text()},
      {"k", pl.k.text()},
      {"v", pl.v.text()},
      {"smooth-q", on(pl.smoothing.q)},
      {"smooth-k", on(pl.smoothing.k)},
      {"smooth-v", on(pl.smoothing.v)},
      {"key-mean-chunk", std::to_string(pl.smoothing.key_mean_chunk)},
      {"key-mean-format", format_name(pl.smoothing.key_mean_format)},
      {"key-residual-format", format_name(pl.smoothing.key_residual_format)},
      {"transform", transform},
      {"qk", pl.qk.text()},
      {"pv", pl.pv.text()},
      {"p-keys", std::string(name_of(kPKeys, pl.p_keys))},
      {"p", p_text(pl.p)},
      {"accumulation", pl.accumulation.mode == Accumulation::in_place
                           ? std::string("in-place")
                           : "two-level:" + std::to_string(pl.accumulation.mmas_per_flush)},
      {"row-sum", std::string(name_of(kRowSums, pl.row_sum))},
      {"exp2", pl.exponential.name()},
      {"exp2-argument", std::string(name_of(kExpArguments, pl.exponential.argument))},
      {"softmax", std::string(name_of(kSoftmaxes, pl.softmax))},
      {"quantizers", std::string(name_of(kQuantizers, pl.quantizers))},
      {"descale", fmt::format("{},{},{}", pl.descale.q, pl.descale.k, pl.descale.v)},
      {"output", format_name(pl.output)},
  };
}

}  // namespace lowbit::attention
