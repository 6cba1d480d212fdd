#include "emulation/convert.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>

#include "emulation/convert_fast.hpp"

namespace lowbit {
namespace {

// Where the discarded bits lie relative to half an ulp of the kept part.
enum class Remainder { exact, below_half, half, above_half };

struct Split {
  std::uint64_t kept;  // |x| / 2^q, truncated
  Remainder remainder;
  std::uint64_t fraction_top;  // the first `random_bits` discarded bits (stochastic rounding)
};

// |x| = significand * 2^exponent exactly, significand < 2^53.
struct Exact {
  std::uint64_t significand;
  int exponent;
};

Exact decompose(double magnitude) {
  const auto bits = std::bit_cast<std::uint64_t>(magnitude);
  const int biased = int(bits >> 52) & 0x7ff;
  const std::uint64_t fraction = bits & ((std::uint64_t{1} << 52) - 1);
  if (biased == 0) return {fraction, -1074};
  return {fraction | (std::uint64_t{1} << 52), biased - 1075};
}

// Splits significand * 2^exponent at the bit of weight 2^q.
Split split_at(Exact v, int q, int random_bits) {
  const int shift = q - v.exponent;
  if (shift <= 0) return {v.significand << -shift, Remainder::exact, 0};
  using u128 = unsigned __int128;
  const u128 discarded_scale = u128{1} << (shift < 127 ? shift : 127);
  const std::uint64_t kept = shift >= 64 ? 0 : v.significand >> shift;
  const u128 remainder = shift >= 64 ? u128{v.significand} : u128{v.significand & ((std::uint64_t{1} << shift) - 1)};
  Remainder where = Remainder::exact;
  if (shift >= 127) {
    where = remainder ? Remainder::below_half : Remainder::exact;
  } else if (remainder != 0) {
    const u128 half = discarded_scale >> 1;
    where = remainder < half ? Remainder::below_half : remainder == half ? Remainder::half : Remainder::above_half;
  }
  std::uint64_t fraction_top = 0;
  if (random_bits > 0 && shift < 127) {
    // floor(remainder / 2^shift * 2^random_bits); random_bits <= 63 and remainder < 2^64.
    fraction_top = shift >= random_bits ? std::uint64_t(remainder >> (shift - random_bits))
                                        : std::uint64_t(remainder << (random_bits - shift));
  }
  return {kept, where, fraction_top};
}

int random_bits_for(const ConversionOptions& o) { return o.rounding == Rounding::stochastic ? o.random_bits : 0; }

bool rounds_up(const Split& s, Rounding mode, bool negative, const ConversionOptions& o, std::uint64_t index) {
  const bool inexact = s.remainder != Remainder::exact;
  switch (mode) {
    case Rounding::nearest_even:
      return s.remainder == Remainder::above_half || (s.remainder == Remainder::half && (s.kept & 1));
    case Rounding::nearest_away: return s.remainder == Remainder::above_half || s.remainder == Remainder::half;
    case Rounding::toward_zero: return false;
    case Rounding::toward_positive: return inexact && !negative;
    case Rounding::toward_negative: return inexact && negative;
    case Rounding::odd: return false;  // handled by the caller: the last bit is forced to 1
    case Rounding::stochastic: return inexact && stochastic_bits(o.seed, index, o.random_bits) < s.fraction_top;
  }
  return false;
}

std::uint64_t round_split(const Split& s, bool negative, const ConversionOptions& o, std::uint64_t index) {
  if (o.rounding == Rounding::odd) return s.remainder == Remainder::exact ? s.kept : (s.kept | 1);
  return s.kept + (rounds_up(s, o.rounding, negative, o, index) ? 1 : 0);
}

// A rounding direction toward zero for this sign never overflows to Inf/NaN (IEEE 754 §7.4).
bool rounds_toward_zero(Rounding mode, bool negative) {
  return mode == Rounding::toward_zero || (mode == Rounding::toward_negative && !negative) ||
         (mode == Rounding::toward_positive && negative);
}

Code signed_nan(const Format& f, bool negative) {
  if (f.nan == NanEncoding::negative_zero) return f.sign_mask();
  return (negative ? f.sign_mask() : 0) | f.canonical_nan();
}

Code overflow_code(const Format& f, bool negative, Overflow policy) {
  const Code sign = negative ? f.sign_mask() : 0;
  switch (policy) {
    case Overflow::saturate: return sign | f.max_finite_magnitude();
    case Overflow::inf: return f.inf_code(negative);
    case Overflow::nan: return signed_nan(f, negative);
  }
  return sign | f.max_finite_magnitude();
}

Code encode_integer(const Format& f, double x, const ConversionOptions& o, std::uint64_t index) {
  if (std::isnan(x)) return 0;
  const bool negative = std::signbit(x);
  if (negative && !f.is_signed) return 0;
  const std::uint64_t positive_limit = f.max_finite_magnitude();
  const std::uint64_t limit = negative ? positive_limit + 1 : positive_limit;
  const double magnitude = std::fabs(x);
  std::uint64_t n = limit;
  if (magnitude < 0x1p62) n = round_split(split_at(decompose(magnitude), 0, random_bits_for(o)), negative, o, index);
  if (n > limit) n = limit;
  const Code mask = f.code_count_minus_one();
  return negative ? Code((~n + 1) & mask) : Code(n);
}

}  // namespace

std::uint64_t stochastic_bits(std::uint64_t seed, std::uint64_t index, int bits) {
  const auto mix = [](std::uint64_t z) {  // SplitMix64 finaliser
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  const std::uint64_t z = mix(mix(seed + 0x9E3779B97F4A7C15ull) + index * 0x9E3779B97F4A7C15ull);
  return bits <= 0 ? 0 : z >> (64 - bits);
}

Code encode(const Format& f, double x, const ConversionOptions& o, std::uint64_t index) {
  if (f.is_integer()) return encode_integer(f, x, o, index);
  if (std::isnan(x)) return f.has_nan() ? f.canonical_nan() : f.max_finite_magnitude();
  bool negative = std::signbit(x);
  if (!f.is_signed) negative = false;  // unsigned floating formats encode |x|
  const Code sign = negative ? f.sign_mask() : 0;
  if (std::isinf(x)) return overflow_code(f, negative, o.overflow);
  const double magnitude = std::fabs(x);
  if (magnitude == 0) return sign;  // +-0, or the smallest value of a format without zero

  const Exact v = decompose(magnitude);
  const int exponent = (63 - std::countl_zero(v.significand)) + v.exponent;  // floor(log2 |x|)
  const int m = f.mantissa_bits;
  const int emin = f.min_exponent();
  const int q = exponent >= emin ? exponent - m : f.subnormals ? emin - m : emin;
  std::uint64_t n = round_split(split_at(v, q, random_bits_for(o)), negative, o, index);
  if (n == 0) return sign;

  // n * 2^q, put into [sign][exponent field][mantissa] form.
  const int top_bit = 63 - std::countl_zero(n);
  const int result_exponent = top_bit + q;
  std::uint64_t magnitude_code;
  if (result_exponent >= emin) {
    const int shift = m - top_bit;  // exact: a carry leaves a power of two
    const std::uint64_t significand = shift >= 0 ? n << shift : n >> -shift;
    const std::uint64_t field = std::uint64_t(result_exponent - emin) + (f.has_zero ? 1 : 0);
    if (field > std::uint64_t(f.exponent_field_max())) return rounds_toward_zero(o.rounding, negative)
                                                            ? sign | f.max_finite_magnitude()
                                                            : overflow_code(f, negative, o.overflow);
    magnitude_code = (field << m) | (significand & f.mantissa_mask());
  } else {
    magnitude_code = n;  // subnormal: q == emin - m
  }
  if (magnitude_code > f.max_finite_magnitude())
    return rounds_toward_zero(o.rounding, negative) ? sign | f.max_finite_magnitude()
                                                    : overflow_code(f, negative, o.overflow);
  return sign | Code(magnitude_code);
}

namespace {
void check_span_sizes(std::size_t inputs, std::size_t outputs) {
  if (inputs != outputs)
    throw std::invalid_argument("encode: " + std::to_string(inputs) + " inputs but " + std::to_string(outputs) +
                                " output codes");
}
}  // namespace

void encode(const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  check_span_sizes(in.size(), out.size());
  if (fastconv::encode_if_supported(f, in, out, o)) return;
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = encode(f, double(in[i]), o, first_index + i);
}

void encode(const Format& f, std::span<const double> in, std::span<Code> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  check_span_sizes(in.size(), out.size());
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = encode(f, in[i], o, first_index + i);
}

double round_to_format(const Format& f, double x, const ConversionOptions& o, std::uint64_t index) {
  return decode(f, encode(f, x, o, index));
}

std::optional<std::string> ConversionOptions::validate(const Format& f) const {
  if (auto why = lowbit::validate(f)) return why;
  if (rounding == Rounding::stochastic && (random_bits < 1 || random_bits > 63))
    return "random_bits=" + std::to_string(random_bits) + ": stochastic rounding takes 1..63 random bits";
  if (overflow == Overflow::inf && !f.has_inf())
    return "overflow=inf: " + format_name(f) + " has no Inf (use saturate" + (f.has_nan() ? " or nan)" : ")");
  if (overflow == Overflow::nan && !f.has_nan())
    return "overflow=nan: " + format_name(f) + " has no NaN (use saturate" + (f.has_inf() ? " or inf)" : ")");
  return std::nullopt;
}

namespace {
constexpr std::pair<Rounding, std::string_view> kRoundingNames[]{
    {Rounding::nearest_even, "nearest-even"},       {Rounding::nearest_away, "nearest-away"},
    {Rounding::toward_zero, "toward-zero"},         {Rounding::toward_positive, "toward-positive"},
    {Rounding::toward_negative, "toward-negative"}, {Rounding::odd, "odd"},
    {Rounding::stochastic, "stochastic"},
};
constexpr std::pair<Overflow, std::string_view> kOverflowNames[]{
    {Overflow::saturate, "saturate"}, {Overflow::inf, "inf"}, {Overflow::nan, "nan"}};
}  // namespace

std::string_view to_string(Rounding r) {
  for (auto [value, name] : kRoundingNames)
    if (value == r) return name;
  return "?";
}
std::string_view to_string(Overflow o) {
  for (auto [value, name] : kOverflowNames)
    if (value == o) return name;
  return "?";
}
std::optional<Rounding> parse_rounding(std::string_view s) {
  for (auto [value, name] : kRoundingNames)
    if (name == s) return value;
  return std::nullopt;
}
std::optional<Overflow> parse_overflow(std::string_view s) {
  for (auto [value, name] : kOverflowNames)
    if (name == s) return value;
  return std::nullopt;
}

}  // namespace lowbit
