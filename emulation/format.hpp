// A number format is a small constexpr record; every limit is derived from it.
//
// Codes are the compact bit patterns [sign][exponent][mantissa] (no sign bit for unsigned
// formats), at most 32 bits, held in a Code. Integer formats are two's complement
// (signed) or plain binary (unsigned) in code_bits() bits.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define LOWBIT_HD __host__ __device__
#else
#define LOWBIT_HD
#endif

namespace lowbit {

using Code = std::uint32_t;

enum class FormatKind : std::uint8_t { floating, integer };

// Which codes are NaN.
enum class NanEncoding : std::uint8_t {
  none,           // no NaN: e2m1, e2m3, e3m2, integers
  ieee,           // exponent all ones, mantissa non-zero: fp32, fp16, bf16, e5m2
  top_code,       // only the largest magnitude code: OCP e4m3 "fn" (0x7F/0xFF), ue8m0 (0xFF)
  negative_zero,  // only the negative-zero code: the "fnuz" variants, P3109 signed (0x80)
};

// Which codes are infinite.
enum class InfEncoding : std::uint8_t {
  none,
  ieee,      // exponent all ones, mantissa zero
  top_code,  // the largest magnitude code that is not NaN: P3109 extended domain
};

struct Format {
  FormatKind kind = FormatKind::floating;
  int exponent_bits = 0;  // integers: 0
  int mantissa_bits = 0;  // stored fraction bits; integers: magnitude bits (int8: 7, uint8: 8)
  int bias = 0;
  bool is_signed = true;
  NanEncoding nan = NanEncoding::none;
  InfEncoding inf = InfEncoding::none;
  bool subnormals = true;
  // false for formats whose all-zero exponent field is an ordinary binade (ue8m0: code 0 is
  // 2^-127); such formats have neither zero nor subnormals.
  bool has_zero = true;
  // Width of the container in packed storage (4: two codes per byte; 6: four codes in three
  // bytes; else one code per ceil(bits/8) bytes). Never narrower than code_bits().
  int storage_bits = 0;

  friend constexpr bool operator==(const Format&, const Format&) = default;

  LOWBIT_HD constexpr bool is_integer() const { return kind == FormatKind::integer; }
  LOWBIT_HD constexpr int code_bits() const { return (is_signed ? 1 : 0) + exponent_bits + mantissa_bits; }
  LOWBIT_HD constexpr Code sign_mask() const { return is_signed ? Code{1} << (code_bits() - 1) : 0; }
  // The low n bits set, 0 <= n <= 32 (a shift by 32 would be undefined).
  LOWBIT_HD static constexpr Code low_bits(int n) { return n >= 32 ? ~Code{0} : (Code{1} << n) - 1; }
  LOWBIT_HD constexpr Code magnitude_mask() const { return low_bits(exponent_bits + mantissa_bits); }
  LOWBIT_HD constexpr Code mantissa_mask() const { return low_bits(mantissa_bits); }
  LOWBIT_HD constexpr Code code_count_minus_one() const { return low_bits(code_bits()); }
  LOWBIT_HD constexpr int exponent_field_max() const { return (1 << exponent_bits) - 1; }
  // Exponent of the smallest normal binade.
  LOWBIT_HD constexpr int min_exponent() const { return (has_zero ? 1 : 0) - bias; }
  LOWBIT_HD constexpr bool has_nan() const { return nan != NanEncoding::none; }
  LOWBIT_HD constexpr bool has_inf() const { return inf != InfEncoding::none; }

  LOWBIT_HD constexpr bool is_nan_code(Code c) const {
    const Code mag = c & magnitude_mask();
    switch (nan) {
      case NanEncoding::none: return false;
      case NanEncoding::ieee: return (mag >> mantissa_bits) == Code(exponent_field_max()) && (mag & mantissa_mask()) != 0;
      case NanEncoding::top_code: return mag == magnitude_mask();
      case NanEncoding::negative_zero: return c == sign_mask() && is_signed;
    }
    return false;
  }
  // Largest magnitude code that is not NaN (may be Inf).
  LOWBIT_HD constexpr Code top_non_nan_magnitude() const {
    switch (nan) {
      case NanEncoding::ieee: return Code(exponent_field_max()) << mantissa_bits;
      case NanEncoding::top_code: return magnitude_mask() - 1;
      default: return magnitude_mask();
    }
  }
  LOWBIT_HD constexpr bool is_inf_code(Code c) const {
    const Code mag = c & magnitude_mask();
    switch (inf) {
      case InfEncoding::none: return false;
      case InfEncoding::ieee: return mag == Code(exponent_field_max()) << mantissa_bits;
      case InfEncoding::top_code: return mag == top_non_nan_magnitude() && !is_nan_code(c);
    }
    return false;
  }
  // Largest finite magnitude code.
  LOWBIT_HD constexpr Code max_finite_magnitude() const {
    if (is_integer()) return magnitude_mask();
    if (inf == InfEncoding::ieee) return top_non_nan_magnitude() - 1;
    return top_non_nan_magnitude() - (has_inf() ? 1 : 0);
  }
  // The canonical NaN a conversion produces: positive, every other bit set (as CUDA's
  // cuda_bf16.h / cuda_fp8.h conversions produce), or the negative-zero code.
  LOWBIT_HD constexpr Code canonical_nan() const {
    return nan == NanEncoding::negative_zero ? sign_mask() : magnitude_mask();
  }
  LOWBIT_HD constexpr Code inf_code(bool negative) const {
    return (negative ? sign_mask() : 0) | top_non_nan_magnitude();
  }
};

// 2^e, exact for -1074 <= e <= 1023 (validate() keeps every format inside that range).
LOWBIT_HD constexpr double pow2(int e) {
  double result = 1.0;
  double base = e >= 0 ? 2.0 : 0.5;
  for (unsigned n = unsigned(e >= 0 ? e : -e); n != 0; n >>= 1, base *= base)
    if (n & 1u) result *= base;
  return result;
}

// Exact decode of a code to double (validate() guarantees every value fits). Integer formats
// decode to their integer value.
LOWBIT_HD constexpr double decode(const Format& f, Code code) {
  code &= f.code_count_minus_one();
  if (f.is_integer()) {
    if (f.is_signed && (code & f.sign_mask())) return double(std::int64_t(code) - (std::int64_t(1) << f.code_bits()));
    return double(code);
  }
  const bool negative = (code & f.sign_mask()) != 0;
  const double sign = negative ? -1.0 : 1.0;
  if (f.is_nan_code(code)) return __builtin_nan("");
  if (f.is_inf_code(code)) return sign * __builtin_inf();
  const Code mag = code & f.magnitude_mask();
  const int exponent_field = int(mag >> f.mantissa_bits);
  const Code mantissa = mag & f.mantissa_mask();
  if (exponent_field == 0 && f.has_zero) {
    // Without subnormals the whole field-0 binade reads as zero (flushed).
    if (!f.subnormals) return sign * 0.0;
    return sign * double(mantissa) * pow2(f.min_exponent() - f.mantissa_bits);
  }
  return sign * double(mantissa | (Code{1} << f.mantissa_bits)) * pow2(exponent_field - f.bias - f.mantissa_bits);
}

// Derived limits (never typed twice).
LOWBIT_HD constexpr double max_finite(const Format& f) { return decode(f, f.max_finite_magnitude()); }
LOWBIT_HD constexpr double lowest_finite(const Format& f) {
  if (!f.is_signed) return f.has_zero ? 0.0 : decode(f, 0);
  return f.is_integer() ? decode(f, f.sign_mask()) : -max_finite(f);
}
LOWBIT_HD constexpr double min_normal(const Format& f) { return f.is_integer() ? 1.0 : pow2(f.min_exponent()); }
LOWBIT_HD constexpr double min_positive(const Format& f) {
  if (f.is_integer()) return 1.0;
  return f.subnormals ? pow2(f.min_exponent() - f.mantissa_bits) : min_normal(f);
}
// Exponent of the largest finite binade.
LOWBIT_HD constexpr int max_exponent(const Format& f) {
  return int(f.max_finite_magnitude() >> f.mantissa_bits) - f.bias;
}
// Spacing of representable values in the binade holding |x| (x finite, within range).
double ulp(const Format& f, double x);

// Presets. Each comment gives the encoding; the golden constants in tests restate them.
namespace formats {
// IEEE binary32: s eeeeeeee mmm...(23); bias 127; Inf/NaN in exponent 255.
inline constexpr Format fp32{FormatKind::floating, 8, 23, 127, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 32};
// TF32: s e8 m10 (19 significant bits, stored in a 32-bit word on the GPU).
inline constexpr Format tf32{FormatKind::floating, 8, 10, 127, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 32};
// bfloat16: s e8 m7, bias 127, IEEE specials.
inline constexpr Format bf16{FormatKind::floating, 8, 7, 127, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 16};
// IEEE binary16: s e5 m10, bias 15, IEEE specials.
inline constexpr Format fp16{FormatKind::floating, 5, 10, 15, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 16};
// OCP FP8 E4M3 ("e4m3fn"): bias 7, no Inf, NaN = S.1111.111, max 0b0'1111'110 = 448.
inline constexpr Format e4m3{FormatKind::floating, 4, 3, 7, true, NanEncoding::top_code, InfEncoding::none, true, true, 8};
// E4M3 "fnuz" (Graphcore/AMD): bias 8, no Inf, NaN = 0x80 (negative zero), max 240.
inline constexpr Format e4m3fnuz{FormatKind::floating, 4, 3, 8, true, NanEncoding::negative_zero, InfEncoding::none, true, true, 8};
// OCP FP8 E5M2: bias 15, IEEE specials, max 0b0'11110'11 = 57344.
inline constexpr Format e5m2{FormatKind::floating, 5, 2, 15, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 8};
// E5M2 "fnuz": bias 16, no Inf, NaN = 0x80, max 57344.
inline constexpr Format e5m2fnuz{FormatKind::floating, 5, 2, 16, true, NanEncoding::negative_zero, InfEncoding::none, true, true, 8};
// E3M4 (ml_dtypes float8_e3m4): bias 3, IEEE specials, max 15.5.
inline constexpr Format e3m4{FormatKind::floating, 3, 4, 3, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 8};
// OCP FP6 E2M3: bias 1, no Inf/NaN, max 0b0'11'111 = 7.5; one code per byte on the GPU.
inline constexpr Format e2m3{FormatKind::floating, 2, 3, 1, true, NanEncoding::none, InfEncoding::none, true, true, 8};
// OCP FP6 E3M2: bias 3, no Inf/NaN, max 0b0'111'11 = 28.
inline constexpr Format e3m2{FormatKind::floating, 3, 2, 3, true, NanEncoding::none, InfEncoding::none, true, true, 8};
// OCP FP4 E2M1: bias 1, no Inf/NaN, values 0 0.5 1 1.5 2 3 4 6; two codes per byte.
inline constexpr Format e2m1{FormatKind::floating, 2, 1, 1, true, NanEncoding::none, InfEncoding::none, true, true, 4};
// OCP E8M0 scale: unsigned, 2^(code-127), no zero, NaN = 0xFF.
inline constexpr Format ue8m0{FormatKind::floating, 8, 0, 127, false, NanEncoding::top_code, InfEncoding::none, false, false, 8};
// NVFP4 scale: unsigned E4M3 (bias 7, NaN 0x7F, max 448) in a byte whose top bit is 0.
inline constexpr Format ue4m3{FormatKind::floating, 4, 3, 7, false, NanEncoding::top_code, InfEncoding::none, true, true, 8};
// "FP22": the Hopper FP8 tensor-core accumulator, s e8 m13, bias 127, IEEE specials.
inline constexpr Format e8m13{FormatKind::floating, 8, 13, 127, true, NanEncoding::ieee, InfEncoding::ieee, true, true, 32};
// int8: two's complement in 8 bits, -128 (0b1000'0000) .. 127 (0b0111'1111); no NaN/Inf.
inline constexpr Format int8{FormatKind::integer, 0, 7, 0, true, NanEncoding::none, InfEncoding::none, false, true, 8};
// int4: two's complement in 4 bits, -8 (0b1000) .. 7 (0b0111); no NaN/Inf; two codes per byte.
inline constexpr Format int4{FormatKind::integer, 0, 3, 0, true, NanEncoding::none, InfEncoding::none, false, true, 4};
// uint8: plain binary in 8 bits, 0 .. 255 (0b1111'1111); no NaN/Inf.
inline constexpr Format uint8{FormatKind::integer, 0, 8, 0, false, NanEncoding::none, InfEncoding::none, false, true, 8};
// uint4: plain binary in 4 bits, 0 .. 15 (0b1111); no NaN/Inf; two codes per byte.
inline constexpr Format uint4{FormatKind::integer, 0, 4, 0, false, NanEncoding::none, InfEncoding::none, false, true, 4};
// s32: two's complement in 32 bits, the accumulator of integer tensor-core instructions.
inline constexpr Format s32{FormatKind::integer, 0, 31, 0, true, NanEncoding::none, InfEncoding::none, false, true, 32};
}  // namespace formats

struct NamedFormat {
  std::string_view name;
  Format format;
  // Where the format comes from, without its limits: those are derived from `format` wherever
  // they are shown (lowbit formats, lowbit format NAME).
  std::string_view origin;
};

// Every preset, in the order `lowbit formats` lists them.
std::span<const NamedFormat> presets();

// Why a Format record is impossible, or nothing when it is valid.
std::optional<std::string> validate(const Format& f);

// Parses a preset name or a spec: "e3m4", "e5m2fnuz", "ue4m3", "e4m3:bias=8:no-subnormals",
// "p3109:k=8:p=3", "int6", "uint3". Never throws; the error names the field that is wrong.
struct ParsedFormat {
  std::optional<Format> format;
  std::string error;
};
ParsedFormat parse_format(std::string_view spec);
// Like parse_format, but throws std::invalid_argument with the message.
Format format_from_string(std::string_view spec);

// The preset name when f is a preset, else a spec that parse_format reads back to f.
std::string format_name(const Format& f);

}  // namespace lowbit
