#include "tests/formats/format_reference.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace lowbit::testing {

ReferenceFormat::ReferenceFormat(const Format& f) : format_(f) {
  if (f.code_bits() > 16) throw std::invalid_argument("ReferenceFormat: " + format_name(f) + " has more than 16 bits");
  struct Entry {
    double value;
    Code code;
  };
  std::vector<Entry> entries;
  bool have_nan_code = false;
  for (Code c = 0; c <= f.code_count_minus_one(); ++c) {
    const double v = decode(f, c);
    if (std::isnan(v)) {
      // The positive NaN with the most bits set, or the only (negative) NaN code.
      const bool positive = (c & f.sign_mask()) == 0;
      if (!have_nan_code || positive) nan_code_ = c;
      have_nan_code = has_nan_ = true;
    } else if (std::isinf(v)) {
      has_inf_ = true;
      (v > 0 ? positive_inf_code_ : negative_inf_code_) = c;
    } else if (v == 0 && std::signbit(v)) {
      // The format has -0 when the code of the sign bit alone is -0 (not NaN); flushed codes
      // of a no-subnormals fnuz format decode to -0 too, but are no -0 of the format.
      if (c == f.sign_mask()) {
        negative_zero_code_ = c;
        has_negative_zero_ = true;
      }
    } else {
      entries.push_back({v, c});
    }
  }
  // Two's complement codes do not ascend with the value; sort, keeping the smallest code of each value.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.value < b.value; });
  for (const auto& e : entries) {
    if (!values_.empty() && values_.back() == e.value) continue;
    values_.push_back(e.value);
    codes_.push_back(e.code);
  }
  if (!f.is_integer()) {
    const double max = values_.back();
    beyond_ = max + std::ldexp(1.0, std::ilogb(max) - f.mantissa_bits);
  }
}

Code ReferenceFormat::code_of(double value, bool negative) const {
  if (value == 0 && negative && has_negative_zero_) return negative_zero_code_;
  const auto it = std::lower_bound(values_.begin(), values_.end(), value);
  if (it == values_.end() || *it != value)
    throw std::logic_error(fmt::format("ReferenceFormat::code_of: {} is not a value of {}", value, format_name(format_)));
  return codes_[std::size_t(it - values_.begin())];
}

std::vector<double> ReferenceFormat::extended_values() const {
  std::vector<double> line = values_;
  if (format_.is_integer()) {
    line.insert(line.begin(), values_.front() - 1);
    line.push_back(values_.back() + 1);
  } else {
    line.insert(line.begin(), -beyond_);
    line.push_back(beyond_);
  }
  return line;
}

Code ReferenceFormat::zero_code(bool negative) const { return code_of(0.0, negative); }

bool ReferenceFormat::code_is_odd(double value) const {
  if (std::fabs(value) == beyond_) return ((code_of(values_.back(), false) + 1) & 1) != 0;
  return (code_of(value, false) & 1) != 0;
}

Code ReferenceFormat::overflow_result(bool negative, Rounding rounding, Overflow overflow) const {
  const bool toward_zero = rounding == Rounding::toward_zero || (rounding == Rounding::toward_negative && !negative) ||
                           (rounding == Rounding::toward_positive && negative);
  const double max = values_.back();
  if (toward_zero || overflow == Overflow::saturate) return code_of(negative ? -max : max, false);
  if (overflow == Overflow::inf) return negative ? negative_inf_code_ : positive_inf_code_;
  // NaN keeps the sign where the format has NaNs of both signs.
  const bool signed_nan = format_.is_signed && format_.nan != NanEncoding::negative_zero;
  return negative && signed_nan ? (nan_code_ | format_.sign_mask()) : nan_code_;
}

Expected ReferenceFormat::expected_integer(double x, Rounding rounding) const {
  const double lowest = values_.front(), max = values_.back();
  const auto code_clamped = [&](double v) { return code_of(std::clamp(v, lowest, max), false); };
  if (std::isnan(x)) return {code_of(0.0, false), code_of(0.0, false), 0};
  if (!format_.is_signed && std::signbit(x)) return {code_of(0.0, false), code_of(0.0, false), 0};
  if (std::isinf(x)) {
    const Code c = code_clamped(x);
    return {c, c, 0};
  }
  const double toward_zero = std::trunc(x);
  const double fraction = std::fabs(x - toward_zero);  // exact
  const double away = toward_zero + (x < 0 ? -1.0 : 1.0);
  const bool odd = std::fmod(toward_zero, 2.0) != 0;
  double chosen = toward_zero;
  if (fraction != 0) switch (rounding) {
      case Rounding::nearest_even: chosen = fraction > 0.5 || (fraction == 0.5 && odd) ? away : toward_zero; break;
      case Rounding::nearest_away: chosen = fraction >= 0.5 ? away : toward_zero; break;
      case Rounding::toward_zero: chosen = toward_zero; break;
      case Rounding::toward_positive: chosen = std::ceil(x); break;
      case Rounding::toward_negative: chosen = std::floor(x); break;
      case Rounding::odd: chosen = odd ? toward_zero : away; break;
      case Rounding::stochastic: return {code_clamped(toward_zero), code_clamped(away), fraction};
    }
  const Code c = code_clamped(chosen);
  return {c, c, 0};
}

Expected ReferenceFormat::expected(double x, Rounding rounding, Overflow overflow) const {
  const Format& f = format_;
  if (f.is_integer()) return expected_integer(x, rounding);
  const auto single = [](Code c) { return Expected{c, c, 0}; };
  const double max = values_.back();
  if (std::isnan(x)) return single(has_nan_ ? nan_code_ : code_of(max, false));
  const double a = f.is_signed ? x : std::fabs(x);  // unsigned formats encode |x|
  const bool negative = std::signbit(a);
  if (std::isinf(a)) {
    // Infinite inputs follow the overflow policy whatever the rounding direction.
    if (overflow == Overflow::saturate) return single(code_of(negative ? -max : max, false));
    return single(overflow_result(negative, Rounding::nearest_even, overflow));
  }
  const double smallest_positive = *std::upper_bound(values_.begin(), values_.end(), 0.0);
  const bool has_zero = std::binary_search(values_.begin(), values_.end(), 0.0);
  // Formats without zero clip everything below their smallest value to it.
  if (!has_zero && std::fabs(a) < smallest_positive)
    return single(code_of(negative ? -smallest_positive : smallest_positive, false));
  if (a == 0) return single(zero_code(negative));
  if (std::fabs(a) >= beyond_) return single(overflow_result(negative, rounding, overflow));
  if (std::binary_search(values_.begin(), values_.end(), a)) return single(code_of(a, negative));

  // lo < a < hi, neighbours in the value set extended by -beyond and +beyond.
  const auto it = std::upper_bound(values_.begin(), values_.end(), a);
  const double hi = it == values_.end() ? beyond_ : *it;
  const double lo = it == values_.begin() ? -beyond_ : *(it - 1);
  const double toward_zero = negative ? hi : lo;
  const double away = negative ? lo : hi;
  const double midpoint = (lo + hi) / 2;  // exact: neighbours have few significant bits
  const double distance = std::fabs(a) - std::fabs(midpoint);  // only its sign is used: always right
  const auto result = [&](double v) {
    if (std::fabs(v) == beyond_) return overflow_result(negative, rounding, overflow);
    if (v == 0) return zero_code(negative);
    return code_of(v, false);
  };
  double chosen = toward_zero;
  switch (rounding) {
    case Rounding::nearest_even:
      chosen = distance < 0 ? toward_zero : distance > 0 ? away : code_is_odd(toward_zero) ? away : toward_zero;
      break;
    case Rounding::nearest_away: chosen = distance < 0 ? toward_zero : away; break;
    case Rounding::toward_zero: chosen = toward_zero; break;
    case Rounding::toward_positive: chosen = hi; break;
    case Rounding::toward_negative: chosen = lo; break;
    case Rounding::odd: chosen = code_is_odd(toward_zero) ? toward_zero : away; break;
    case Rounding::stochastic: {
      // |a| - |T| is exact (T = 0, or T >= |a|/2) and the gap is a power of two.
      const double fraction = (std::fabs(a) - std::fabs(toward_zero)) / (std::fabs(away) - std::fabs(toward_zero));
      return {result(toward_zero), result(away), fraction};
    }
  }
  return single(result(chosen));
}

std::vector<std::string> small_format_specs() {
  std::vector<std::string> specs;
  for (const auto& p : presets())
    if (p.format.code_bits() <= 16) specs.emplace_back(p.name);
  for (const char* spec : {"e3m4", "e5m2fnuz", "e4m3:bias=8:no-subnormals", "e4m3:nan=none:inf=none", "ue5m3", "e6m9",
                           "e5m2:no-subnormals", "e4m3fnuz:no-subnormals", "e2m1:no-subnormals", "e3m2:no-zero",
                           "ue4m3:no-zero", "e5m0", "ue5m0", "e4m3:bias=-3", "e4m3:bias=20", "e3m4fnuz", "e4m3fnuz:bias=11",
                           "ue4m4fnu", "e4m3:nan=ieee:inf=ieee", "p3109:k=4:p=2", "p3109:k=6:p=3",
                           "p3109:k=16:p=11", "p3109:k=16:p=8:unsigned", "int2", "int3", "int6", "int12", "int16",
                           "uint2", "uint3", "uint6", "uint16"})
    specs.emplace_back(spec);
  for (int p = 1; p <= 7; ++p)
    for (const char* variant : {"", ":unsigned", ":finite", ":unsigned:finite"})
      specs.push_back(fmt::format("p3109:k=8:p={}{}", p, variant));
  specs.emplace_back("p3109:k=8:p=8:unsigned");
  specs.emplace_back("p3109:k=8:p=8:unsigned:finite");
  return specs;
}

std::string describe(const Format& f, double x, const ConversionOptions& options) {
  std::string text = fmt::format("{} x={:a} ({}) rounding={} overflow={}", format_name(f), x, x, to_string(options.rounding),
                                 to_string(options.overflow));
  if (options.rounding == Rounding::stochastic)
    text += fmt::format(" random_bits={} seed={}", options.random_bits, options.seed);
  return text;
}

}  // namespace lowbit::testing
