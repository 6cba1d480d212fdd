// The stages of a Pipeline: what each accepts (validate), how it is named (set_stage,
// stage_values), and what it asks of the quantizer and the MMA registry.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/pipeline.hpp"
#include "emulation/mma/wide.hpp"

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

std::string operand_text(const OperandStage& op) {
  std::string s = format_name(op.element) + ":" + std::string(to_string(op.granularity));
  if (op.target > 0) s += fmt::format(":{}", op.target);
  return s;
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
std::string p_text(const PStage& p) {
  std::string s = format_name(p.format) + ":";
  if (p.scale == PScale::microscale && p.blocks == Granularity::mx) return s + "mx";
  if (p.scale != PScale::static_exponent) return s + std::string(to_string(p.scale));
  const double max = std::round(std::exp2(double(p.log2_scale)));
  if (float(std::log2(max)) == p.log2_scale) return s + fmt::format("{}", max);
  return s + fmt::format("log2={:a}", double(p.log2_scale));
}

std::optional<std::string> parse_p(PStage& p, std::string_view value) {
  const auto parts = split(value, ':');
  if (parts.size() < 2) return "expected FORMAT:MAX, FORMAT:log2=X or FORMAT:per-block|two-level|microscale|mx";
  const ParsedFormat f = parse_format(format_part(value, 1));
  if (!f.format) return "format '" + std::string(format_part(value, 1)) + "': " + f.error;
  PStage out{*f.format, PScale::static_exponent, 0};
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

namespace {
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

std::string MatmulStage::text() const {
  if (!has_instruction()) return std::string(kFp32Fma);
  switch (product) {
    case Product::instruction: return instruction;
    case Product::fp32_fma: return std::string(kFp32Fma) + ":" + instruction;
    case Product::wide: return "wide:" + instruction;
  }
  return instruction;
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
  for (const int n : {block_kv, block_kv_causal})
    if (n != 0 && (n < 8 || n > 256 || n % 8 != 0))
      return fmt::format("block-kv={} must be a multiple of 8 in 8..256", n);
  if (block_kv_causal == 0 && block_kv == 0) return "block-kv must be set";
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
  s.name = std::string(to_string(role)) + " " + operand_text(op);
  return s;
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
      {"q", "FORMAT:GRANULARITY[:TARGET]",
       "Q's format and scale groups (none|per-tensor|per-block|per-warp|per-thread|per-token|nvfp4|mx); TARGET: the code "
       "amax maps to"},
      {"k", "FORMAT:GRANULARITY[:TARGET]", "K's, likewise"},
      {"v", "FORMAT:GRANULARITY[:TARGET]", "V's (none|per-tensor|per-channel|nvfp4|mx)"},
      {"smooth-q", "on|off", "Q minus its mean per block of block-q queries (the scores take qbar.k' back)"},
      {"smooth-k", "on|off", "K minus its mean over all keys"},
      {"smooth-v", "on|off", "V minus its mean over all keys (the output takes it back)"},
      {"key-mean-chunk", "N", "keys per double partial sum of the K and V means (0: one sum in order)"},
      {"transform", "none|smoothattn[:ALPHA]|hadamard[:SEED]", "Q, K transform before smoothing (SageAttention2 §4.1 baselines)"},
      {"qk", "INSTRUCTION|fp32-fma|fp32-fma:INSTRUCTION|wide:INSTRUCTION",
       "the QK^T instruction (registry name; nN: n = block-kv); fp32-fma: fp32 fmas of the operands' values; wide: the "
       "instruction's accumulation on the operands' values (error injection)"},
      {"pv", "INSTRUCTION|fp32-fma|fp32-fma:INSTRUCTION|wide:INSTRUCTION", "the P V instruction (nN: n = the value dimension, rounded up to 8); its accumulator is the instruction's: .f32 "
       "(fp32; FP22 for Hopper's wgmma FP8), .f16"},
      {"p", "FORMAT:MAX|FORMAT:log2=X|FORMAT:per-block|e2m1:two-level|e2m1:microscale|FORMAT:mx",
       "P's format and scale (MAX: static, folded into the exponent, e.g. e4m3:448, int8:127; microscale: NVFP4 "
       "blocks, mx: MX blocks)"},
      {"accumulation", "two-level[:F]|in-place", "P V into o: fresh accumulators flushed every F MMAs (0: per KV block), or in place"},
      {"exp2", "exact|poly5|poly6|sm90-ex2", "the softmax's exp2/log2: correctly rounded, the contract's polynomials, or MUFU.EX2 of sm_90 (bit for bit) with the polynomial log2"},
      {"exp2-argument", "rounded|fused",
       "exp2's argument: the rounded score minus the row offset (two roundings), or fma(accumulator, scale, -offset) "
       "(one; SageAttention2's kernel)"},
      {"softmax", "contract|flash2|flash3",
       "the per-row softmax steps: the contract's (kernel_steps.hpp), PyTorch's FlashAttention-2 as released "
       "(flash2_steps.hpp; unscaled Q, K, V, in-place accumulation; its exp2 and log2 are MUFU's), or FlashAttention-3's "
       "Hopper forward as released (flash3_steps.hpp; fast math, P offset by p's log2, the kernel's descales)"},
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
    if (value == "contract") pl.softmax = Softmax::contract;
    else if (value == "flash2") pl.softmax = Softmax::flash2;
    else if (value == "flash3") pl.softmax = Softmax::flash3;
    else return error("not contract, flash2 or flash3");
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
      {"q", operand_text(pl.q)},
      {"k", operand_text(pl.k)},
      {"v", operand_text(pl.v)},
      {"smooth-q", on(pl.smoothing.q)},
      {"smooth-k", on(pl.smoothing.k)},
      {"smooth-v", on(pl.smoothing.v)},
      {"key-mean-chunk", std::to_string(pl.smoothing.key_mean_chunk)},
      {"transform", transform},
      {"qk", pl.qk.text()},
      {"pv", pl.pv.text()},
      {"p", p_text(pl.p)},
      {"accumulation", pl.accumulation.mode == Accumulation::in_place
                           ? std::string("in-place")
                           : "two-level:" + std::to_string(pl.accumulation.mmas_per_flush)},
      {"exp2", pl.exponential.name()},
      {"exp2-argument", std::string(name_of(kExpArguments, pl.exponential.argument))},
      {"softmax", pl.softmax == Softmax::flash2 ? "flash2" : pl.softmax == Softmax::flash3 ? "flash3" : "contract"},
      {"descale", fmt::format("{},{},{}", pl.descale.q, pl.descale.k, pl.descale.v)},
      {"output", format_name(pl.output)},
  };
}

}  // namespace lowbit::attention
