#include "emulation/convert.hpp"

#include <bit>
#include <cmath>
#include <stdexcept>

#include "emulation/convert_fast.hpp"

namespace lowbit {
namespace {

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

struct Truncated {
  std::uint64_t kept;  // floor(|x| / 2^q)
  bool round;          // the first discarded bit, of weight 2^(q-1)
  bool sticky;         // whether any discarded bit below it is set
  std::uint64_t fraction_top;  // floor(discarded fraction * 2^random_bits), for stochastic rounding
};

// Truncates significand * 2^exponent at the bit of weight 2^q; random_bits <= 63. Without
// branches on the discarded bits: they change from one input to the next.
Truncated truncate_at(Exact v, int q, int random_bits) {
  const int shift = q - v.exponent;
  if (shift <= 0) return {v.significand << -shift, false, false, 0};
  if (shift >= 64) {
    // All discarded, and below half: the significand is below 2^53 < 2^(shift - 1).
    const int down = shift - random_bits;  // >= 1
    return {0, false, v.significand != 0, down >= 64 ? 0 : v.significand >> down};
  }
  const std::uint64_t discarded = v.significand & ((std::uint64_t{1} << shift) - 1);
  const bool round = (discarded >> (shift - 1)) & 1;
  const bool sticky = (discarded & ((std::uint64_t{1} << (shift - 1)) - 1)) != 0;
  // discarded < 2^shift, so the left shift stays below 2^random_bits.
  const std::uint64_t fraction_top = random_bits == 0        ? 0
                                     : shift >= random_bits ? discarded >> (shift - random_bits)
                                                            : discarded << (random_bits - shift);
  return {v.significand >> shift, round, sticky, fraction_top};
}

int random_bits_for(const ConversionOptions& o) { return o.rounding == Rounding::stochastic ? o.random_bits : 0; }

// Whether the result is the neighbour away from zero rather than the truncated code, whose last
// bit is `odd` (ties-to-even and round-to-odd look at the code, as P3109 defines them).
bool rounds_away(const Truncated& t, bool odd, bool negative, const ConversionOptions& o, std::uint64_t index) {
  const bool inexact = t.round | t.sticky;
  switch (o.rounding) {
    case Rounding::nearest_even: return t.round & (t.sticky | odd);
    case Rounding::nearest_away: return t.round;
    case Rounding::toward_zero: return false;
    case Rounding::toward_positive: return inexact & !negative;
    case Rounding::toward_negative: return inexact & negative;
    case Rounding::odd: return inexact & !odd;
    case Rounding::stochastic: return inexact && stochastic_bits(o.seed, index, o.random_bits) < t.fraction_top;
  }
  return false;
}

// A rounding direction toward zero for this sign never overflows to Inf/NaN (IEEE 754 §7.4).
bool rounds_toward_zero(Rounding mode, bool negative) {
  return mode == Rounding::toward_zero || (mode == Rounding::toward_negative && !negative) ||
         (mode == Rounding::toward_positive && negative);
}

Code overflow_code(const Format& f, bool negative, Overflow policy) {
  const Code sign = negative ? f.sign_mask() : 0;
  switch (policy) {
    case Overflow::saturate: return sign | f.max_finite_magnitude();
    case Overflow::inf: return f.inf_code(negative);
    case Overflow::nan: return f.nan == NanEncoding::negative_zero ? f.sign_mask() : sign | f.canonical_nan();
  }
  return sign | f.max_finite_magnitude();
}

// Zero with the sign of x, except where the negative-zero code is NaN (fnuz, P3109 signed).
// Formats without zero: their smallest value of that sign.
Code zero_code(const Format& f, bool negative) {
  return negative && f.nan != NanEncoding::negative_zero ? f.sign_mask() : 0;
}

Code encode_integer(const Format& f, double x, const ConversionOptions& o, std::uint64_t index) {
  if (std::isnan(x)) return 0;
  const bool negative = std::signbit(x);
  if (negative && !f.is_signed) return 0;
  const std::uint64_t positive_limit = f.max_finite_magnitude();
  const std::uint64_t limit = negative ? positive_limit + 1 : positive_limit;
  const double magnitude = std::fabs(x);
  std::uint64_t n = limit;
  if (magnitude < 0x1p62) {
    // Two's complement keeps the magnitude's last bit, so its parity is the code's.
    const Truncated t = truncate_at(decompose(magnitude), 0, random_bits_for(o));
    n = t.kept + (rounds_away(t, t.kept & 1, negative, o, index) ? 1 : 0);
  }
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
  const bool negative = f.is_signed && std::signbit(x);  // unsigned floating formats encode |x|
  if (std::isinf(x)) return overflow_code(f, negative, o.overflow);
  if (x == 0) return zero_code(f, negative);

  // Step 1: truncate |x| toward zero to a magnitude code. Field 0 holds the subnormals (or,
  // without subnormals, only zero; without zero it is the lowest binade).
  const Exact v = decompose(std::fabs(x));
  const int exponent = (63 - std::countl_zero(v.significand)) + v.exponent;  // floor(log2 |x|)
  const int m = f.mantissa_bits;
  const int emin = f.min_exponent();
  const int random_bits = random_bits_for(o);
  Truncated t;
  std::uint64_t truncated;   // magnitude code of the value toward zero (may lie past max finite)
  std::uint64_t step = 1;    // code distance to the next value away from zero
  if (exponent >= emin) {
    t = truncate_at(v, exponent - m, random_bits);  // kept = 1.mantissa, m + 1 bits
    const std::uint64_t field = std::uint64_t(exponent - emin) + (f.has_zero ? 1 : 0);
    truncated = (field << m) | (t.kept & f.mantissa_mask());
  } else if (!f.has_zero) {
    return zero_code(f, negative);  // below the smallest value: clipped to it
  } else if (f.subnormals) {
    t = truncate_at(v, emin - m, random_bits);
    truncated = t.kept;
  } else {
    t = truncate_at(v, emin, random_bits);  // kept 0: between zero and min normal
    truncated = 0;
    step = std::uint64_t{1} << m;
  }

  // Step 2: round. Stepping a magnitude code by one reaches the next value, across binades too.
  const std::uint64_t magnitude = truncated + (rounds_away(t, truncated & 1, negative, o, index) ? step : 0);

  // Step 3: past max finite is overflow (the exponent was unbounded until here).
  if (magnitude > f.max_finite_magnitude())
    return rounds_toward_zero(o.rounding, negative) ? (negative ? f.sign_mask() : 0) | f.max_finite_magnitude()
                                                    : overflow_code(f, negative, o.overflow);
  if (magnitude == 0) return zero_code(f, negative);
  return (negative ? f.sign_mask() : 0) | Code(magnitude);
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
