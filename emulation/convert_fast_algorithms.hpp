// The two algorithms of the fast conversion (convert_fast.cpp, its only includer): the bit-fields
// algorithm (every format, one loop body over plain integers) and the split algorithm (float-like
// formats, on vector lanes), each with the plan it reads. The kernels that run them per
// instruction set are convert_fast.cpp's.
#pragma once

#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "emulation/convert_fast.hpp"

namespace lowbit {
namespace {

// ---- The bit-fields algorithm ----------------------------------------------------------------

// Everything it needs to know about (format, options), as plain integers so one
// loop body serves every format and the compiler can vectorize it.
struct BitFieldPlan {
  std::uint32_t sign_matters;     // 0x8000'0000, or 0 when the format encodes |x| (unsigned floating)
  std::int32_t origin;            // float32 biased exponent of the format's smallest normal binade
  std::uint32_t normal_shift;     // significand bits dropped in and above that binade: 23 - m
  std::uint32_t below_shift;      // below it, bits dropped plus binades below: 23 - m, or 23 without subnormals
  std::uint32_t below_scale;      // left shift of a rounded value below it: 0, or m without subnormals
  std::uint32_t mantissa_bits;    // m
  std::int32_t no_zero_offset;    // 2^m when field 0 is an ordinary binade (no zero), else 0
  std::uint32_t field_parity;     // 1 when m = 0 (each binade steps the code's lsb), else 0
  bool exotic;                    // m = 0, or the negative-zero code is NaN (encode_one<true>)
  std::uint32_t nearest;          // all ones for nearest-even, 0 for toward zero
  std::uint32_t negative_flip;    // negative codes: ((magnitude ^ flip) + add) & code_mask
  std::uint32_t negative_add;     //   sign-magnitude: flip 0, add sign bit; two's complement: ~0, 1
  std::uint32_t code_mask;
  std::uint32_t limit_positive;   // largest magnitude code before overflow, per sign
  std::uint32_t limit_negative;
  Code overflow_positive;         // what a finite overflow becomes, per sign
  Code overflow_negative;
  Code inf_positive;              // what +-Inf becomes
  Code inf_negative;
  Code nan;                       // what every NaN becomes
  Code negative_zero;             // what -0 and negative values rounding to zero become
};

// condition ? if_true : if_false as masks: a nest of ?: on the same values can merge into one
// multi-way branch that GCC then neither if-converts nor vectorizes.
[[gnu::always_inline]] inline std::uint32_t select(bool condition, std::uint32_t if_true, std::uint32_t if_false) {
  const std::uint32_t mask = 0u - std::uint32_t(condition);
  return (if_true & mask) | (if_false & ~mask);
}

// The one conversion, branch-free (every ?: is a select) and exact for every float32 input.
// `Exotic`: the rules only formats without mantissa bits or with a NaN at the negative-zero code
// need, compiled apart so that the common formats do not pay for them (about 20%).
template <bool Exotic>
[[gnu::always_inline]] inline Code encode_one(const BitFieldPlan& p, std::uint32_t bits) {
  // 1. Sign and magnitude bits.
  const bool negative = (bits & p.sign_matters) != 0;
  const std::uint32_t magnitude = bits & 0x7fff'ffff;

  // 2. |x| = significand * 2^(exponent - 150), the significand's top bit at 2^23. A float32
  //    subnormal is normalized by an exact int -> float conversion: float(fraction) is
  //    |x| * 2^149 in normal form, so its bits less 149 binades are those of |x| with an
  //    exponent below 1 (formats such as ue8m0 have normal binades down there).
  const std::uint32_t subnormal_normalized =
      std::bit_cast<std::uint32_t>(float(std::int32_t(magnitude & 0x7f'ffff))) - (std::uint32_t{149} << 23);
  const std::int32_t normalized = std::int32_t(select(magnitude >= 0x80'0000, magnitude, subnormal_normalized));
  const std::int32_t exponent = normalized >> 23;  // arithmetic shift
  const std::uint32_t significand = select(magnitude != 0, (std::uint32_t(normalized) & 0x7f'ffff) | 0x80'0000, 0);

  // 3. Binades above the format's smallest normal binade (negative: below it).
  const std::int32_t above = exponent - p.origin;
  const bool in_normal_range = above >= 0;

  // 4. Significand bits to drop: 23 - m from the smallest normal binade up; below it one more
  //    per binade (subnormals keep a fixed spacing), or every bit up to the smallest normal
  //    (without subnormals the only values there are 0 and min normal). Past 31 the kept part
  //    is 0 and below half anyway.
  const std::uint32_t shift =
      select(in_normal_range, p.normal_shift, std::uint32_t(std::min(std::int32_t(p.below_shift) - above, 31)));

  // 5. Round the kept part: nearest-even adds half an ulp minus one, plus the truncated code's
  //    lsb (a tie then carries only from an odd code); toward zero adds nothing. The code's lsb
  //    is the kept part's, except that with no mantissa bits (exotic) each binade above and the
  //    offset of formats without zero (step 6) step the code too; below the smallest normal
  //    binade such formats keep nothing.
  std::uint32_t truncated_lsb = (significand >> shift) & 1;
  if constexpr (Exotic)
    truncated_lsb ^= ((std::uint32_t(above) & p.field_parity & (0u - std::uint32_t(in_normal_range))) ^
                      std::uint32_t(p.no_zero_offset)) & 1;
  const std::uint32_t half_minus_one = (std::uint32_t{1} << (shift - 1)) - 1;
  const std::uint32_t rounded = (significand + ((half_minus_one + truncated_lsb) & p.nearest)) >> shift;

  // 6. Magnitude code. From the smallest normal binade up, `rounded` is 1.mantissa (its 2^m bit
  //    is exponent field 1) and each binade above adds 1 to the field; a carry out of the
  //    mantissa moves to the next binade by itself. Below, `rounded` is the subnormal code (or
  //    0/1 times min normal). Formats without zero start field 0 one binade lower and clip
  //    what lies below their smallest value to code 0.
  const std::int32_t assembled =
      std::int32_t(select(in_normal_range, rounded + (std::uint32_t(above) << p.mantissa_bits), rounded << p.below_scale)) -
      p.no_zero_offset;
  const std::uint32_t magnitude_code = std::uint32_t(std::max(assembled, 0));

  // 7. Sign: sign-magnitude for floating formats, two's complement for integers. A negative
  //    value that rounds to zero takes the plan's negative zero (exotic: code 0 where the
  //    negative-zero code is NaN; elsewhere the rule above gives it).
  Code code = select(negative, ((magnitude_code ^ p.negative_flip) + p.negative_add) & p.code_mask, magnitude_code);
  if constexpr (Exotic) code = select(negative && magnitude_code == 0, p.negative_zero, code);

  // 8. Overflow, Inf and NaN take the codes the plan holds for them.
  const bool overflows = magnitude_code > select(negative, p.limit_negative, p.limit_positive);
  const Code finite = select(overflows, select(negative, p.overflow_negative, p.overflow_positive), code);
  const Code finite_or_inf = select(magnitude == 0x7f80'0000, select(negative, p.inf_negative, p.inf_positive), finite);
  return select(magnitude > 0x7f80'0000, p.nan, finite_or_inf);
}

// ---- The split algorithm ---------------------------------------------------------------------

struct SplitPlan {
  std::uint32_t origin_bits;    // float32 bits of the smallest normal 2^emin
  std::uint32_t shift;          // 23 - m: significand bits below the code's mantissa
  std::uint32_t normal_bias;    // exponent field 1 at 2^emin (1 << 23), plus half an ulp less one for nearest-even,
                                // less origin_bits (mod 2^32): magnitude + normal_bias = rebased + offset
  std::uint32_t lsb_mask;       // 1 for nearest-even (a tie rounds up only from an odd code), 0 toward zero
  float below_scale;            // nearest-even: 2^(emin - m + 23), whose ulp is the subnormal spacing 2^(emin - m);
                                // toward zero: 2^(m - emin), the spacing's inverse
  std::uint32_t below_scale_bits;
  std::int32_t limit;           // largest finite magnitude code
  std::int32_t overflow;        // magnitude code of a finite overflow
  std::int32_t inf;             // magnitude code of Inf (toward zero: may differ from `overflow`)
  std::uint32_t sign_shift;     // float32's sign bit to the code's: 32 - code bits
  std::uint32_t sign_bit;       // the code's sign bit; 0 for unsigned formats (they encode |x|)
  std::int32_t nan;             // the canonical NaN code
};

// The split algorithm on one vector of float32 bit patterns; Lanes holds the vector types of
// one instruction set. Every ?: is a lane-wise select.
template <class Lanes, bool Nearest>
[[gnu::always_inline]] inline typename Lanes::U32 encode_split(const SplitPlan& p, typename Lanes::U32 bits) {
  using U32 = typename Lanes::U32;
  using I32 = typename Lanes::I32;
  using F32 = typename Lanes::F32;
  constexpr std::int32_t kInfBits = 0x7f80'0000;

  // 1. Magnitude bits.
  const U32 magnitude = bits & 0x7fff'ffffu;

  // 2. From the smallest normal binade up, the magnitude rebased on it is (binades above it,
  //    23-bit significand): an offset makes the first field the code's exponent field and rounds
  //    the bits the shift drops (nearest-even: half an ulp less one, plus the kept lsb). A carry
  //    out of the mantissa moves to the next binade by itself. The plan's bias rebases and adds
  //    the offset in one add.
  const U32 normal = (magnitude + p.normal_bias + ((magnitude >> p.shift) & p.lsb_mask)) >> p.shift;

  // 3. Below it the code is |x| / spacing, rounded. Nearest-even: adding below_scale leaves a
  //    float whose ulp is the spacing, rounded by the add itself, and subtracting its bits
  //    leaves the code. Toward zero: scaling by a power of two is exact, and the conversion to
  //    int truncates.
  U32 subnormal;
  if constexpr (Nearest) subnormal = U32(F32(magnitude) + p.below_scale) - p.below_scale_bits;
  else subnormal = U32(__builtin_convertvector(F32(magnitude) * p.below_scale, I32));
  I32 code = magnitude < p.origin_bits ? I32(subnormal) : I32(normal);

  // 4. Overflow (Inf's bits overflow too: the format's range lies inside float32's); toward
  //    zero saturates finite values, while Inf follows the policy.
  code = code > p.limit ? p.overflow : code;
  if constexpr (!Nearest) code = I32(magnitude) == kInfBits ? p.inf : code;

  // 5. Sign-magnitude, then every NaN to the canonical NaN.
  code |= I32((bits >> p.sign_shift) & p.sign_bit);
  return U32(I32(magnitude) > kInfBits ? p.nan : code);
}

// Why the split algorithm cannot serve (f, o), or nothing; `o` is valid for f and the rounding
// is nearest-even or toward zero.
std::optional<std::string> split_unsupported(const Format& f, const ConversionOptions& o) {
  const int m = f.mantissa_bits, emin = f.min_exponent();
  if (f.is_integer()) return "integer formats";
  if (m < 1 || m > 22) return std::to_string(m) + " mantissa bits (it needs 1 to 22)";
  if (!f.has_zero || !f.subnormals) return "formats without zero or subnormals";
  if (f.nan == NanEncoding::negative_zero) return "the negative-zero code is NaN";
  if (emin < -126 || max_exponent(f) > 127 || emin - m + 23 > 127) return "a range beyond float32's normal range";
  if (o.rounding == Rounding::toward_zero && m - emin > 127)
    return "toward zero: the inverse subnormal spacing 2^" + std::to_string(m - emin) + " is no float32";
  return std::nullopt;
}

// The special codes the scalar rules (convert.hpp) give, checked to have the shape the split
// algorithm assumes: overflow and Inf codes are magnitudes with the sign bit or-ed in for
// negative values, -0 is the sign bit alone, and under nearest-even Inf is encoded as an overflow.
std::optional<SplitPlan> make_split_plan(const Format& f, const ConversionOptions& o) {
  if (split_unsupported(f, o)) return std::nullopt;
  const int m = f.mantissa_bits, emin = f.min_exponent();
  const bool nearest = o.rounding == Rounding::nearest_even;
  SplitPlan p{};
  p.origin_bits = std::uint32_t(127 + emin) << 23;
  p.shift = std::uint32_t(23 - m);
  p.normal_bias = (std::uint32_t{1} << 23) + (nearest ? (std::uint32_t{1} << (p.shift - 1)) - 1 : 0) - p.origin_bits;
  p.lsb_mask = nearest ? 1 : 0;
  p.below_scale = float(nearest ? pow2(emin - m + 23) : pow2(m - emin));
  p.below_scale_bits = std::bit_cast<std::uint32_t>(p.below_scale);
  p.limit = std::int32_t(f.max_finite_magnitude());
  p.sign_shift = std::uint32_t(32 - f.code_bits());
  p.sign_bit = f.sign_mask();
  const double huge = std::numeric_limits<double>::max(), inf = std::numeric_limits<double>::infinity();
  const Code overflow = encode(f, huge, o), inf_code = encode(f, inf, o);
  p.overflow = std::int32_t(overflow);
  p.inf = std::int32_t(inf_code);
  p.nan = std::int32_t(encode(f, std::numeric_limits<double>::quiet_NaN(), o));
  const bool shaped = (overflow & f.sign_mask()) == 0 && (inf_code & f.sign_mask()) == 0 &&
                      encode(f, -huge, o) == (overflow | f.sign_mask()) &&
                      encode(f, -inf, o) == (inf_code | f.sign_mask()) && encode(f, -0.0, o) == f.sign_mask() &&
                      (!nearest || inf_code == overflow);
  if (!shaped) return std::nullopt;
  return p;
}

}  // namespace
}  // namespace lowbit
