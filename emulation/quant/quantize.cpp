#include "emulation/quant/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "emulation/sfu/rcp.hpp"
#include "numerics/nonfinite.hpp"

namespace lowbit::quant {

// ---- groupings ----------------------------------------------------------------------------

std::optional<std::string> Grouping::validate() const {
  const std::string where = "grouping '" + name + "': ";
  if (row_period < 0) return where + "row_period=" + std::to_string(row_period) + " is negative";
  if (groups_per_period < 1) return where + "groups_per_period must be >= 1";
  if (row_period == 0 && !row_group_of.empty()) return where + "row_group_of is given without a row_period";
  if (row_period > 0 && !row_group_of.empty() && int(row_group_of.size()) != row_period)
    return where + "row_group_of has " + std::to_string(row_group_of.size()) + " entries for row_period=" +
           std::to_string(row_period);
  for (std::size_t r = 0; r < row_group_of.size(); ++r)
    if (row_group_of[r] < 0 || row_group_of[r] >= groups_per_period)
      return where + "row " + std::to_string(r) + " is in group " + std::to_string(row_group_of[r]) +
             ", outside [0, " + std::to_string(groups_per_period) + ")";
  if (col_block < 0) return where + "col_block=" + std::to_string(col_block) + " is negative";
  if (col_multiple < 1) return where + "col_multiple=" + std::to_string(col_multiple) + " must be >= 1";
  return std::nullopt;
}

namespace grouping {

Grouping per_tensor() { return {"per-tensor", 0, {}, 1, 0, 1}; }
Grouping per_block(int rows) { return {"per-block(" + std::to_string(rows) + ")", rows, {}, 1, 0, 1}; }
Grouping per_token() { return {"per-token", 1, {}, 1, 0, 1}; }
Grouping per_channel() { return {"per-channel", 0, {}, 1, 1, 1}; }
Grouping per_channel_block(int rows) {
  return {"per-channel-block(" + std::to_string(rows) + ")", rows, {}, 1, 1, 1};
}
Grouping microscale(int block) { return {"1x" + std::to_string(block), 1, {}, 1, block, 1}; }

namespace {
Grouping from_tiling(const ThreadTiling& t, Operand operand, GroupScope scope) {
  if (auto why = t.validate()) throw std::invalid_argument("thread tiling: " + *why);
  const QkGroups groups = derive_groups(t, scope);
  const BlockGroups& b = operand == Operand::q ? groups.q : groups.k;
  Grouping g;
  g.name = std::string(scope == GroupScope::thread ? "per-thread" : "per-warp") + "(" + mma::short_name(t.atom) + ", " +
           std::to_string(t.warps) + " warps, " + std::to_string(t.block_q) + "x" + std::to_string(t.block_k) +
           ", " + (operand == Operand::q ? "Q" : "K") + ")";
  g.row_period = b.block_rows;
  g.row_group_of.assign(b.group_of_row.begin(), b.group_of_row.begin() + b.block_rows);
  g.groups_per_period = b.count;
  g.col_multiple = t.atom.k;  // the head dimension is padded to whole instructions
  return g;
}
}  // namespace

Grouping per_thread(const ThreadTiling& t, Operand operand) { return from_tiling(t, operand, GroupScope::thread); }
Grouping per_warp(const ThreadTiling& t, Operand operand) { return from_tiling(t, operand, GroupScope::warp); }

}  // namespace grouping

// ---- specs --------------------------------------------------------------------------------

double QuantSpec::target() const { return scale.target > 0 ? scale.target : max_finite(element); }

std::optional<std::string> QuantSpec::validate() const {
  if (auto why = lowbit::validate(element)) return "element format: " + *why;
  if (auto why = conversion.validate(element)) return "element conversion: " + *why;
  if (auto why = lowbit::validate(scale.format)) return "scale format: " + *why;
  if (auto why = grouping.validate()) return *why;
  if (scale.format.is_integer()) return "scale format " + format_name(scale.format) + " is an integer format";
  if (!(scale.target >= 0) || scale.target > max_finite(element))
    return "scale target " + std::to_string(scale.target) + " is outside (0, max_finite(" + format_name(element) +
           ")=" + std::to_string(max_finite(element)) + "]";
  if (scale.rule == ScaleRule::fixed) {
    if (!std::isfinite(scale.fixed_value) || scale.fixed_value <= 0)
      return "fixed scale " + std::to_string(scale.fixed_value) + " must be finite and positive";
    if (outer != OuterScale::none) return "an outer scale needs the amax rule, not a fixed scale";
  }
  if (scale.rounding == ScaleRounding::ocp_floor) {
    if (element.is_integer()) return "ocp_floor scale rounding needs a floating element format (OCP MXFP)";
    if (scale.format.mantissa_bits != 0)
      return "ocp_floor scale rounding gives powers of two: the scale format must be exponent-only (ue8m0), not " +
             format_name(scale.format);
  }
  if (outer != OuterScale::none && scale.format == formats::fp32)
    return "an outer scale is amax / (max_finite(scale format) * target): it needs a narrow scale format, not fp32";
  if (arithmetic != Arithmetic::ieee) {
    if (scale.rule != ScaleRule::amax || outer != OuterScale::none || scale.format != formats::fp32 ||
        scale.rounding != ScaleRounding::nearest_even)
      return "arithmetic " + std::string(to_string(arithmetic)) +
             " is a kernel's quantizer: the amax rule, an fp32 scale, no outer scale";
    if (multiply_by_reciprocal) return "multiply_by_reciprocal is the ieee arithmetic's";
  }
  if (arithmetic == Arithmetic::triton_div_full && (!element.is_integer() || conversion.rounding != Rounding::toward_zero))
    return "arithmetic triton_div_full adds one half and truncates: an integer element with toward_zero conversion";
  if (scale.epsilon != 0 && arithmetic != Arithmetic::triton_div_full)
    return "scale epsilon belongs to the triton_div_full arithmetic";
  if (scale.amax_floor != 0 && arithmetic != Arithmetic::cuda_fast_math)
    return "scale amax_floor belongs to the cuda_fast_math arithmetic";
  if (nonfinite == NonFinitePolicy::propagate && !element.has_nan() && !scale.format.has_nan())
    return "nonfinite=propagate: neither the element format " + format_name(element) + " nor the scale format " +
           format_name(scale.format) + " has a NaN to carry a non-finite input";
  return std::nullopt;
}

// ---- quantization -------------------------------------------------------------------------

namespace {

struct Shape {
  int padded_rows, padded_cols, col_groups, groups;
};

Shape padded_shape(const Grouping& g, int rows, int cols) {
  const auto round_up = [](int v, int m) { return m > 0 ? (v + m - 1) / m * m : v; };
  Shape s{};
  s.padded_rows = round_up(rows, g.row_period);
  s.padded_cols = round_up(cols, std::lcm(g.col_block > 0 ? g.col_block : 1, g.col_multiple));
  s.col_groups = g.col_block > 0 ? s.padded_cols / g.col_block : 1;
  const int periods = g.row_period > 0 ? s.padded_rows / g.row_period : 1;
  s.groups = periods * g.groups_per_period * s.col_groups;
  return s;
}

// Every scale rule is symmetric (amax / target, no zero point), so an unsigned element format would
// silently clip every negative value to 0: a finite negative input is refused, named with its place.
void refuse_negative(const MatrixF& x, const Format& element, const std::string& name) {
  const float* v = x.data();
  const std::size_t n = std::size_t(x.size()), cols = std::size_t(x.cols());
  std::size_t count = 0, first = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (v[i] < 0 && std::isfinite(v[i]) && count++ == 0) first = i;
  if (count == 0) return;
  throw std::invalid_argument(name + ": " + std::to_string(count) + " negative value" + (count == 1 ? "" : "s") +
                              ", the first at " + matrix_position(first, cols) + " (" + std::to_string(v[first]) +
                              "), which unsigned " + format_name(element) +
                              " cannot hold: the quantizers are symmetric (no zero point) and would clip them to 0");
}

// Validates, applies the padding policy, and shapes the result q (reusing its storage) and the
// zero-padded input (a copy only when padding is needed).
void prepare(const MatrixF& x, const QuantSpec& spec, std::string_view tensor, QuantizedTensor& q, MatrixF& padded) {
  const std::string name(tensor);
  if (auto why = spec.validate()) throw std::invalid_argument(name + ": " + *why);
  if (x.size() == 0) throw std::invalid_argument(name + ": empty tensor");
  if (!spec.element.is_signed) refuse_negative(x, spec.element, name);
  const Shape s = padded_shape(spec.grouping, int(x.rows()), int(x.cols()));
  if ((s.padded_rows != x.rows() || s.padded_cols != x.cols()) && spec.padding == Padding::refuse)
    throw std::invalid_argument(name + ": shape " + std::to_string(x.rows()) + "x" + std::to_string(x.cols()) +
                                " does not divide into " + spec.grouping.name + " blocks (it would pad to " +
                                std::to_string(s.padded_rows) + "x" + std::to_string(s.padded_cols) +
                                "); padding=refuse");
  q.spec = spec;
  q.rows = int(x.rows());
  q.cols = int(x.cols());
  q.padded_rows = s.padded_rows;
  q.padded_cols = s.padded_cols;
  q.col_groups = s.col_groups;
  q.codes.resize(s.padded_rows, s.padded_cols);
  q.scale_codes.assign(std::size_t(s.groups), 0);
  q.scales.assign(std::size_t(s.groups), 0.0f);
  q.outer_scales.clear();
  if (s.padded_rows != x.rows() || s.padded_cols != x.cols()) {
    padded = MatrixF::Zero(s.padded_rows, s.padded_cols);
    padded.topLeftCorner(x.rows(), x.cols()) = x;
  }
}

// Counts and locates NaN/Inf of the input; throws when the policy refuses them.
NonFiniteReport check_nonfinite(const MatrixF& x, const QuantSpec& spec, std::string_view tensor) {
  const auto report = scan_nonfinite(std::span<const float>(x.data(), std::size_t(x.size())));
  if (report.any() && spec.nonfinite == NonFinitePolicy::refuse)
    throw std::invalid_argument(report.describe(tensor, std::size_t(x.cols())) +
                                "; refusing to quantize (nonfinite=propagate passes them through)");
  return report;
}

// Whether the element format holds the non-finite value v in a code of its own: NaN needs a
// NaN code; Inf an Inf code or, failing that, a NaN code.
bool element_holds(const Format& element, float v) {
  return std::isnan(v) ? element.has_nan() : element.has_inf() || element.has_nan();
}

// The code of a non-finite value the element holds (its Inf, else its NaN).
Code nonfinite_code(const Format& element, float v) {
  return encode(element, double(v), {.overflow = element.has_inf() ? Overflow::inf : Overflow::nan});
}

// One float32 rounding each, never contracted into an fma (the kernels round each step).
inline float mul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float add_rn(float a, float b) { volatile float r = a + b; return r; }

// Marks a group whose values the element format cannot hold: NaN scale (zero codes follow).
void poison_scale(const QuantSpec& spec, Code& code, float& value) {
  code = encode(spec.scale.format, std::numeric_limits<double>::quiet_NaN());
  value = std::numeric_limits<float>::quiet_NaN();
}

// A group's amax as the kernel's arithmetic starts it (cuda_fast_math: from its floor).
inline float kernel_amax(const QuantSpec& spec, float amax) {
  return spec.arithmetic == Arithmetic::cuda_fast_math ? std::max(amax, spec.scale.amax_floor) : amax;
}

// The scale of a group from its amax (or the fixed scale).
void set_scale(const QuantSpec& spec, float amax, Code& code, float& value) {
  amax = kernel_amax(spec, amax);
  const ScaleSpec& s = spec.scale;
  double scale;
  // Narrow scale formats saturate (cvt ... satfinite); fp32 keeps an overflow as Inf.
  ConversionOptions to_scale{.rounding = Rounding::nearest_even,
                             .overflow = s.format.has_inf() ? Overflow::inf : Overflow::saturate};
  if (s.rule == ScaleRule::fixed) {
    scale = double(float(s.fixed_value));
  } else if (s.rounding == ScaleRounding::ocp_floor) {
    // OCP MX v1.0: shared exponent floor(log2(amax)) - emax_elem (amax = 0: the smallest scale).
    int exponent = 0;
    std::frexp(amax, &exponent);  // amax = f * 2^exponent, f in [0.5, 1)
    scale = amax > 0 ? std::ldexp(1.0, exponent - 1 - max_exponent(spec.element)) : 0.0;  // amax is finite
  } else if (spec.arithmetic != Arithmetic::ieee) {
    // The compilers turn amax / target into a product by the constant fl(1 / target).
    const float inverse_target = float(1.0 / spec.target());
    scale = spec.arithmetic == Arithmetic::triton_div_full ? std::fma(amax, inverse_target, s.epsilon)
                                                           : double(mul_rn(amax, inverse_target));
  } else {
    scale = double(amax / float(spec.target()));  // float32 division, as the kernels do
    to_scale.rounding = s.rounding == ScaleRounding::toward_positive ? Rounding::toward_positive
                        : s.rounding == ScaleRounding::toward_zero   ? Rounding::toward_zero
                                                                     : Rounding::nearest_even;
  }
  code = encode(s.format, scale, to_scale);
  value = float(decode(s.format, code));
}

// x1 / s as the spec's arithmetic computes it, before the element conversion; `factor` is
// quotient_factor's for the group.
inline float quotient(const QuantSpec& spec, float x, float s, float factor) {
  switch (spec.arithmetic) {
    case Arithmetic::ieee: return spec.multiply_by_reciprocal ? x * factor : x / s;
    case Arithmetic::triton_div_full: {
      const float y = mul_rn(x, factor);
      return add_rn(y, y >= 0.0f ? 0.5f : -0.5f);  // then truncated (cvt.rzi)
    }
    case Arithmetic::cuda_fast_math: return mul_rn(x, factor);
  }
  return x / s;
}
// What x1 is multiplied by in quotient(), once per group: fl(1 / s), rcp(s), fl(target * rcp(amax)).
inline float quotient_factor(const QuantSpec& spec, float s, float amax) {
  switch (spec.arithmetic) {
    case Arithmetic::ieee: return 1.0f / s;
    case Arithmetic::triton_div_full: return sfu::sm90_rcp(s);
    case Arithmetic::cuda_fast_math: return mul_rn(float(spec.target()), sfu::sm90_rcp(kernel_amax(spec, amax)));
  }
  return 1.0f / s;
}
// A zero scale gives zero codes, except where the kernel's arithmetic runs on (fast math: NaN).
inline bool zero_codes(const QuantSpec& spec, float s) { return s == 0 && spec.arithmetic != Arithmetic::cuda_fast_math; }

float outer_scale(const QuantSpec& spec, float amax) {
  const float divisor = float(max_finite(spec.scale.format) * spec.target());
  const float s = amax / divisor;
  return s > 0 ? s : 1.0f;  // an all-zero region keeps its zeros
}

// max(m, |v|) for finite v (vectorizable: maxps keeps m).
inline float abs_max_step(float m, float v) {
  const float a = std::fabs(v);
  return m < a ? a : m;
}

// max |v| over n values, and whether any is NaN or Inf (v * 0 is NaN exactly for those). The
// maximum is meaningful only when none is; Eigen's reductions are vectorized.
float abs_max(const float* v, int n, bool& nonfinite) {
  const Eigen::Map<const Eigen::ArrayXf> values(v, n);
  if (std::isnan((values * 0.0f).sum())) nonfinite = true;
  return values.abs().maxCoeff<Eigen::PropagateNumbers>();
}

// max |v| over the finite values among n (propagate), and whether some non-finite value is one
// the element format cannot hold (its group is poisoned).
float finite_abs_max(const float* v, int n, const Format& element, bool& unheld) {
  float m = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isfinite(v[i])) m = abs_max_step(m, v[i]);
    else if (!element_holds(element, v[i])) unheld = true;
  }
  return m;
}

}  // namespace

int QuantizedTensor::group_of(int row, int col) const {
  const Grouping& g = spec.grouping;
  const int period = g.row_period > 0 ? row / g.row_period : 0;
  const int row_group = g.row_period > 0 && !g.row_group_of.empty() ? g.row_group_of[std::size_t(row % g.row_period)] : 0;
  const int col_group = g.col_block > 0 ? col / g.col_block : 0;
  return (period * g.groups_per_period + row_group) * col_groups + col_group;
}

float QuantizedTensor::outer_of(int row) const {
  if (outer_scales.empty()) return 1.0f;
  return outer_scales.size() == 1 ? outer_scales[0] : outer_scales[std::size_t(row)];
}

QuantizedTensor quantize(const MatrixF& x, const QuantSpec& spec, std::string_view tensor) {
  QuantizedTensor q;
  quantize_into(x, spec, q, tensor);
  return q;
}

void quantize_into(const MatrixF& x, const QuantSpec& spec, QuantizedTensor& q, std::string_view tensor) {
  MatrixF padded;
  prepare(x, spec, tensor, q, padded);
  const MatrixF& xp = padded.size() ? padded : x;
  const int rows = q.padded_rows, cols = q.padded_cols;
  const int block = spec.grouping.col_block > 0 ? spec.grouping.col_block : cols;

  // Pass 1: amax of every (row, column group), and a non-finite check on the way. Non-finite
  // input (rare) takes a second, plain pass: finite amax and the segments it poisons.
  const std::size_t segments = std::size_t(rows) * std::size_t(q.col_groups);
  std::vector<float> segment_amax(segments);
  const auto segment_data = [&](std::size_t segment) {
    return xp.data() + segment / std::size_t(q.col_groups) * std::size_t(cols) +
           segment % std::size_t(q.col_groups) * std::size_t(block);
  };
  bool nonfinite = false;
  for (std::size_t i = 0; i < segments; ++i) segment_amax[i] = abs_max(segment_data(i), block, nonfinite);
  q.nonfinite = nonfinite ? check_nonfinite(x, spec, tensor) : NonFiniteReport{};
  std::vector<std::uint8_t> segment_unheld;  // propagate: a value the element cannot hold
  if (nonfinite) {
    segment_unheld.assign(segments, 0);
    for (std::size_t i = 0; i < segments; ++i) {
      bool unheld = false;
      segment_amax[i] = finite_abs_max(segment_data(i), block, spec.element, unheld);
      segment_unheld[i] = unheld;
    }
  }

  // Outer scales; amax(x / s_o) = amax(x) / s_o since rounding is monotonic.
  if (spec.outer == OuterScale::per_tensor) {
    float m = 0;
    for (float a : segment_amax) m = abs_max_step(m, a);
    q.outer_scales = {outer_scale(spec, m)};
  } else if (spec.outer == OuterScale::per_row) {
    q.outer_scales.resize(std::size_t(rows));
    for (int r = 0; r < rows; ++r) {
      float m = 0;
      for (int cg = 0; cg < q.col_groups; ++cg)
        m = abs_max_step(m, segment_amax[std::size_t(r) * std::size_t(q.col_groups) + std::size_t(cg)]);
      q.outer_scales[std::size_t(r)] = outer_scale(spec, m);
    }
  }

  // Group amax and scales.
  std::vector<float> group_amax(q.scales.size(), 0.0f);
  std::vector<std::uint8_t> group_poisoned(segment_unheld.empty() ? 0 : q.scales.size(), 0);
  for (int r = 0; r < rows; ++r)
    for (int cg = 0; cg < q.col_groups; ++cg) {
      const auto g = std::size_t(q.group_of(r, cg * block));
      const std::size_t segment = std::size_t(r) * std::size_t(q.col_groups) + std::size_t(cg);
      const float a = segment_amax[segment];
      group_amax[g] = abs_max_step(group_amax[g], spec.outer == OuterScale::none ? a : a / q.outer_of(r));
      if (!segment_unheld.empty() && segment_unheld[segment]) group_poisoned[g] = 1;
    }
  std::vector<float> group_factor(group_amax.size());
  for (std::size_t g = 0; g < group_amax.size(); ++g) {
    set_scale(spec, group_amax[g], q.scale_codes[g], q.scales[g]);
    if (!group_poisoned.empty() && group_poisoned[g]) poison_scale(spec, q.scale_codes[g], q.scales[g]);
    group_factor[g] = quotient_factor(spec, q.scales[g], group_amax[g]);
  }

  // Pass 2: scale into a row buffer (float32), then convert the span.
  std::vector<float> scaled(static_cast<std::size_t>(block));
  const Code zero_code = encode(spec.element, 0.0, spec.conversion);
  for (int r = 0; r < rows; ++r) {
    const float so = q.outer_of(r);
    for (int cg = 0; cg < q.col_groups; ++cg) {
      const float s = q.scales[std::size_t(q.group_of(r, cg * block))];
      const std::size_t first = std::size_t(r) * std::size_t(cols) + std::size_t(cg * block);
      const float* x_first = xp.data() + first;
      Code* out = q.codes.data() + first;
      if (zero_codes(spec, s) || std::isnan(s)) {  // all zero, or poisoned by a value the element cannot hold
        std::fill(out, out + block, zero_code);
      } else {
        const float* in = x_first;
        float* y = scaled.data();
        if (spec.outer != OuterScale::none) {
          for (int c = 0; c < block; ++c) y[c] = in[c] / so;
          in = y;
        }
        if (spec.multiply_by_reciprocal || spec.arithmetic != Arithmetic::ieee) {
          const float factor = group_factor[std::size_t(q.group_of(r, cg * block))];
          for (int c = 0; c < block; ++c) y[c] = quotient(spec, in[c], s, factor);
        } else {
          for (int c = 0; c < block; ++c) y[c] = in[c] / s;
        }
        encode(spec.element, std::span<const float>(scaled), std::span<Code>(out, std::size_t(block)),
               spec.conversion, first);
      }
      if (nonfinite && !std::isnan(s))  // propagate: what the element holds keeps its own code
        for (int c = 0; c < block; ++c)
          if (!std::isfinite(x_first[c])) out[c] = nonfinite_code(spec.element, x_first[c]);
    }
  }
}

QuantizedTensor quantize_reference(const MatrixF& x, const QuantSpec& spec, std::string_view tensor) {
  MatrixF padded;
  QuantizedTensor q;
  prepare(x, spec, tensor, q, padded);
  q.nonfinite = check_nonfinite(x, spec, tensor);
  const MatrixF& xp = padded.size() ? padded : x;
  const int rows = q.padded_rows, cols = q.padded_cols;
  // Outer scale: amax over the finite values of its region, then x1 = x / s_o materialized.
  if (spec.outer != OuterScale::none) {
    const bool per_row = spec.outer == OuterScale::per_row;
    q.outer_scales.assign(per_row ? std::size_t(rows) : 1, 0.0f);
    std::vector<float> amax(q.outer_scales.size(), 0.0f);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        float& m = amax[per_row ? std::size_t(r) : 0];
        if (std::isfinite(xp(r, c)) && std::fabs(xp(r, c)) > m) m = std::fabs(xp(r, c));
      }
    for (std::size_t i = 0; i < amax.size(); ++i) q.outer_scales[i] = outer_scale(spec, amax[i]);
  }
  MatrixF x1(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) x1(r, c) = spec.outer == OuterScale::none ? xp(r, c) : xp(r, c) / q.outer_of(r);
  std::vector<float> amax(q.scales.size(), 0.0f);
  std::vector<bool> poisoned(q.scales.size(), false);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const auto g = std::size_t(q.group_of(r, c));
      if (!std::isfinite(x1(r, c))) poisoned[g] = poisoned[g] || !element_holds(spec.element, x1(r, c));
      else if (std::fabs(x1(r, c)) > amax[g]) amax[g] = std::fabs(x1(r, c));
    }
  for (std::size_t g = 0; g < amax.size(); ++g) {
    set_scale(spec, amax[g], q.scale_codes[g], q.scales[g]);
    if (poisoned[g]) poison_scale(spec, q.scale_codes[g], q.scales[g]);
  }
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const auto g = std::size_t(q.group_of(r, c));
      const float s = q.scales[g];
      if (!poisoned[g] && !std::isfinite(x1(r, c))) {
        q.codes(r, c) = nonfinite_code(spec.element, x1(r, c));
        continue;
      }
      const float y = zero_codes(spec, s) || poisoned[g] ? 0.0f : quotient(spec, x1(r, c), s, quotient_factor(spec, s, amax[g]));
      q.codes(r, c) = encode(spec.element, double(y), spec.conversion, std::uint64_t(r) * std::uint64_t(cols) + c);
    }
  return q;
}

MatrixF dequantize_padded(const QuantizedTensor& q) {
  MatrixF x(q.padded_rows, q.padded_cols);
  for (int r = 0; r < q.padded_rows; ++r) {
    const float so = q.outer_of(r);
    for (int c = 0; c < q.padded_cols; ++c)
      x(r, c) = (float(decode(q.spec.element, q.codes(r, c))) * q.scales[std::size_t(q.group_of(r, c))]) * so;
  }
  return x;
}

MatrixF dequantize(const QuantizedTensor& q) { return dequantize_padded(q).topLeftCorner(q.rows, q.cols); }

MatrixF scaled_matmul(const QuantizedTensor& a, const QuantizedTensor& b) {
  for (const QuantizedTensor* t : {&a, &b})
    if (!t->spec.grouping.row_constant() || t->spec.outer != OuterScale::none)
      throw std::invalid_argument("scaled_matmul: " + t->spec.name +
                                  " is not row-scaled (one scale per row, no outer scale); block-scaled tensors "
                                  "go through block_scaled_matmul (emulation/quant/block_scaled.hpp)");
  for (const QuantizedTensor* t : {&a, &b})
    if (!t->spec.element.is_integer())
      throw std::invalid_argument("scaled_matmul: " + t->spec.name + " holds " + format_name(t->spec.element) +
                                  " codes; a floating product is rounded by the tensor core, so it goes through an "
                                  "instruction's model and K loop (mma::gemm, or block_scaled_matmul)");
  if (a.cols != b.cols)
    throw std::invalid_argument("scaled_matmul: reduction lengths differ (" + std::to_string(a.cols) + " vs " +
                                std::to_string(b.cols) + ")");
  const auto values = [](const QuantizedTensor& t) {  // padding columns hold zeros: left out
    MatrixD v(t.rows, t.cols);
    for (int r = 0; r < t.rows; ++r)
      for (int c = 0; c < t.cols; ++c) v(r, c) = decode(t.spec.element, t.codes(r, c));
    return v;
  };
  const MatrixD acc = values(a) * values(b).transpose();
  MatrixF s(a.rows, b.rows);
  for (int i = 0; i < a.rows; ++i) {
    const float sa = a.scales[std::size_t(a.group_of(i, 0))];
    for (int j = 0; j < b.rows; ++j)
      s(i, j) = dequantize_product(float(acc(i, j)), sa, b.scales[std::size_t(b.group_of(j, 0))]);
  }
  return s;
}

// ---- presets ------------------------------------------------------------------------------

namespace presets {

namespace {
QuantSpec with_grouping(std::string prefix, const Format& element, Grouping g) {
  QuantSpec s;
  s.name = prefix + " " + g.name;
  s.element = element;
  s.grouping = std::move(g);
  return s;
}
}  // namespace

QuantSpec int8(Grouping g) { return with_grouping("int8", formats::int8, std::move(g)); }
QuantSpec int4(Grouping g) { return with_grouping("int4", formats::int4, std::move(g)); }
QuantSpec fp8(const Format& element, Grouping g) { return with_grouping(format_name(element), element, std::move(g)); }
QuantSpec fp8_static(const Format& element, double scale, Grouping g) {
  QuantSpec s = with_grouping(format_name(element) + " static", element, std::move(g));
  s.scale.rule = ScaleRule::fixed;
  s.scale.fixed_value = scale;
  return s;
}
QuantSpec nvfp4(bool tensor_scale) {
  QuantSpec s = with_grouping(tensor_scale ? "nvfp4+tensor-scale" : "nvfp4", formats::e2m1, grouping::microscale(16));
  s.scale.format = formats::ue4m3;
  s.scale.rounding = ScaleRounding::nearest_even;
  if (tensor_scale) s.outer = OuterScale::per_tensor;
  return s;
}
QuantSpec mx(const Format& element, ScaleRounding rounding) {
  QuantSpec s = with_grouping("mx" + format_name(element) + " scale=" + std::string(to_string(rounding)), element,
                              grouping::microscale(32));
  s.scale.format = formats::ue8m0;
  s.scale.rounding = rounding;
  return s;
}
QuantSpec sage3_p_two_level() {
  QuantSpec s = nvfp4(false);
  s.name = "sage3 P two-level (row s_P1, nvfp4)";
  s.outer = OuterScale::per_row;
  return s;
}
QuantSpec sage3_p_direct() {
  QuantSpec s = nvfp4(false);
  s.name = "sage3 P direct (nvfp4)";
  return s;
}

}  // namespace presets

namespace {
constexpr std::pair<ScaleRounding, std::string_view> kScaleRoundingNames[]{
    {ScaleRounding::nearest_even, "nearest-even"},
    {ScaleRounding::toward_positive, "up"},
    {ScaleRounding::toward_zero, "down"},
    {ScaleRounding::ocp_floor, "ocp-floor"},
};
constexpr std::pair<Arithmetic, std::string_view> kArithmeticNames[]{
    {Arithmetic::ieee, "ieee"},
    {Arithmetic::triton_div_full, "triton_div_full"},
    {Arithmetic::cuda_fast_math, "cuda_fast_math"},
};
}  // namespace

std::string_view to_string(Arithmetic a) {
  for (auto [value, name] : kArithmeticNames)
    if (value == a) return name;
  return "?";
}

std::string_view to_string(ScaleRounding r) {
  for (auto [value, name] : kScaleRoundingNames)
    if (value == r) return name;
  return "?";
}

}  // namespace lowbit::quant
