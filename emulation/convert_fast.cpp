#include "emulation/convert_fast.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace lowbit {
namespace {

// Everything the conversion needs to know about (format, options), as plain integers so one
// loop body serves every format and the compiler can vectorize it.
struct FastPlan {
  std::uint32_t sign_matters;     // 0x8000'0000, or 0 when the format encodes |x| (unsigned floating)
  std::int32_t origin;            // float32 biased exponent of the format's smallest normal binade
  std::uint32_t normal_shift;     // significand bits dropped in and above that binade: 23 - m
  std::uint32_t below_shift;      // below it, bits dropped plus binades below: 23 - m, or 23 without subnormals
  std::uint32_t below_scale;      // left shift of a rounded value below it: 0, or m without subnormals
  std::uint32_t mantissa_bits;    // m
  std::int32_t no_zero_offset;    // 2^m when field 0 is an ordinary binade (no zero), else 0
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
};

// condition ? if_true : if_false as masks: a nest of ?: on the same values can merge into one
// multi-way branch that GCC then neither if-converts nor vectorizes.
[[gnu::always_inline]] inline std::uint32_t select(bool condition, std::uint32_t if_true, std::uint32_t if_false) {
  const std::uint32_t mask = 0u - std::uint32_t(condition);
  return (if_true & mask) | (if_false & ~mask);
}

// The one conversion, branch-free (every ?: is a select) and exact for every float32 input.
[[gnu::always_inline]] inline Code encode_one(const FastPlan& p, std::uint32_t bits) {
  // 1. Sign and magnitude bits.
  const bool negative = (bits & p.sign_matters) != 0;
  const std::uint32_t magnitude = bits & 0x7fff'ffff;

  // 2. |x| = significand * 2^(exponent - 150) with the significand's top bit at 2^23. A float32
  //    subnormal is normalized by finding its top bit through an exact int -> float conversion
  //    (formats such as ue8m0 have normal binades down there).
  const std::int32_t biased = std::int32_t(magnitude >> 23);
  const std::uint32_t fraction = magnitude & 0x7f'ffff;
  const std::int32_t fraction_top = std::int32_t(std::bit_cast<std::uint32_t>(float(std::int32_t(fraction))) >> 23) - 127;
  const std::int32_t normalize = std::min(23 - fraction_top, 31);  // 31 (any) for +-0
  const bool input_normal = biased != 0;
  const std::int32_t exponent = std::int32_t(select(input_normal, std::uint32_t(biased), std::uint32_t(1 - normalize)));
  const std::uint32_t significand = select(input_normal, fraction | 0x80'0000, fraction << normalize);

  // 3. Binades above the format's smallest normal binade (negative: below it).
  const std::int32_t above = exponent - p.origin;
  const bool in_normal_range = above >= 0;

  // 4. Significand bits to drop: 23 - m from the smallest normal binade up; below it one more
  //    per binade (subnormals keep a fixed spacing), or every bit up to the smallest normal
  //    (without subnormals the only values there are 0 and min normal). Past 31 the kept part
  //    is 0 and below half anyway.
  const std::uint32_t shift =
      select(in_normal_range, p.normal_shift, std::uint32_t(std::min(std::int32_t(p.below_shift) - above, 31)));

  // 5. Round the kept part: nearest-even adds half an ulp minus one, plus the kept lsb (a tie
  //    then carries only from an odd kept part); toward zero adds nothing.
  const std::uint32_t kept_lsb = (significand >> shift) & 1;
  const std::uint32_t half_minus_one = (std::uint32_t{1} << (shift - 1)) - 1;
  const std::uint32_t rounded = (significand + ((half_minus_one + kept_lsb) & p.nearest)) >> shift;

  // 6. Magnitude code. From the smallest normal binade up, `rounded` is 1.mantissa (its 2^m bit
  //    is exponent field 1) and each binade above adds 1 to the field; a carry out of the
  //    mantissa moves to the next binade by itself. Below, `rounded` is the subnormal code (or
  //    0/1 times min normal). Formats without zero start field 0 one binade lower and clip
  //    what lies below their smallest value to code 0.
  const std::int32_t assembled =
      std::int32_t(select(in_normal_range, rounded + (std::uint32_t(above) << p.mantissa_bits), rounded << p.below_scale)) -
      p.no_zero_offset;
  const std::uint32_t magnitude_code = std::uint32_t(std::max(assembled, 0));

  // 7. Sign: sign-magnitude for floating formats, two's complement for integers.
  const Code code = select(negative, ((magnitude_code ^ p.negative_flip) + p.negative_add) & p.code_mask, magnitude_code);

  // 8. Overflow, Inf and NaN take the codes the plan holds for them.
  const bool overflows = magnitude_code > select(negative, p.limit_negative, p.limit_positive);
  const Code finite = select(overflows, select(negative, p.overflow_negative, p.overflow_positive), code);
  const Code finite_or_inf = select(magnitude == 0x7f80'0000, select(negative, p.inf_negative, p.inf_positive), finite);
  return select(magnitude > 0x7f80'0000, p.nan, finite_or_inf);
}

struct Kernels {
  void (*code32)(const FastPlan&, const float*, Code*, std::size_t);
  void (*code16)(const FastPlan&, const float*, std::uint16_t*, std::size_t);
  void (*code8)(const FastPlan&, const float*, std::uint8_t*, std::size_t);
  void (*packed4)(const FastPlan&, const float*, std::uint8_t*, std::size_t);
};

constexpr std::size_t kPackBlock = 256;  // even

// The loops, compiled once per instruction set (TARGET: a GCC target attribute, or nothing).
#define LOWBIT_FASTCONV_KERNELS(NAME, TARGET)                                                                 \
  namespace NAME {                                                                                            \
  template <class Out>                                                                                        \
  TARGET void encode_block(const FastPlan& shared, const float* in, Out* out, std::size_t n) {               \
    const FastPlan p = shared; /* a local copy: stores to out cannot change it */                             \
    for (std::size_t i = 0; i < n; ++i) out[i] = Out(encode_one(p, std::bit_cast<std::uint32_t>(in[i])));     \
  }                                                                                                           \
  TARGET void encode_packed4_block(const FastPlan& p, const float* in, std::uint8_t* out, std::size_t n) {   \
    std::uint8_t codes[kPackBlock];                                                                           \
    for (std::size_t start = 0; start < n; start += kPackBlock) {                                             \
      const std::size_t count = std::min(kPackBlock, n - start);                                              \
      encode_block(p, in + start, codes, count);                                                              \
      if (count % 2) codes[count] = 0;                                                                        \
      for (std::size_t j = 0; j < (count + 1) / 2; ++j)                                                       \
        out[start / 2 + j] = std::uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));                            \
    }                                                                                                         \
  }                                                                                                           \
  constexpr Kernels kernels{encode_block<Code>, encode_block<std::uint16_t>, encode_block<std::uint8_t>,      \
                            encode_packed4_block};                                                            \
  }

LOWBIT_FASTCONV_KERNELS(baseline, )
LOWBIT_FASTCONV_KERNELS(avx2, [[gnu::target("arch=x86-64-v3")]])
LOWBIT_FASTCONV_KERNELS(avx512, [[gnu::target("arch=x86-64-v4")]])
#undef LOWBIT_FASTCONV_KERNELS

constexpr std::array kIsas{fastconv::Isa::baseline, fastconv::Isa::avx2, fastconv::Isa::avx512};
constexpr std::array kKernels{baseline::kernels, avx2::kernels, avx512::kernels};

std::optional<FastPlan> make_plan(const Format& f, const ConversionOptions& o) {
  if (fast_encode_unsupported(f, o)) return std::nullopt;
  const std::uint32_t m = std::uint32_t(f.mantissa_bits);
  FastPlan p{};
  p.mantissa_bits = m;
  // An integer is a floating format whose subnormal spacing is 1 and whose "normal" binades
  // start at 2^m, where every value already overflows (or is the lowest negative one).
  const int min_exponent = f.is_integer() ? f.mantissa_bits : f.min_exponent();
  const bool subnormals = f.is_integer() || f.subnormals;
  p.origin = 127 + min_exponent;
  p.normal_shift = 23 - m;
  p.below_shift = subnormals ? 23 - m : 23;
  p.below_scale = subnormals ? 0 : m;
  p.no_zero_offset = f.has_zero ? 0 : std::int32_t(1) << m;
  p.nearest = o.rounding == Rounding::nearest_even ? ~std::uint32_t{0} : 0;
  p.sign_matters = f.is_signed || f.is_integer() ? 0x8000'0000 : 0;
  p.code_mask = f.code_count_minus_one();
  p.limit_positive = f.max_finite_magnitude();
  if (f.is_integer()) {
    p.negative_flip = f.is_signed ? ~std::uint32_t{0} : 0;
    p.negative_add = f.is_signed ? 1 : 0;
    p.limit_negative = f.is_signed ? f.max_finite_magnitude() + 1 : 0;  // unsigned: every negative clamps to 0
  } else {
    p.negative_add = f.sign_mask();
    p.limit_negative = f.max_finite_magnitude();
  }
  // The special results are whatever the scalar conversion's rules give (convert.hpp); each is
  // the same for every input of its class, which the exhaustive tests confirm.
  const double huge = std::numeric_limits<double>::max();  // overflows every valid format
  const double inf = std::numeric_limits<double>::infinity();
  p.overflow_positive = encode(f, huge, o);
  p.overflow_negative = encode(f, -huge, o);
  p.inf_positive = encode(f, inf, o);
  p.inf_negative = encode(f, -inf, o);
  p.nan = encode(f, std::numeric_limits<double>::quiet_NaN(), o);
  return p;
}

// The plan for (f, o), remembered per thread: quantizers encode many short spans in a row.
const FastPlan* cached_plan(const Format& f, const ConversionOptions& o) {
  thread_local struct {
    Format format;
    Rounding rounding;
    Overflow overflow;
    std::optional<FastPlan> plan;
    bool filled = false;
  } last;
  if (!last.filled || !(last.format == f) || last.rounding != o.rounding || last.overflow != o.overflow) {
    last.plan = make_plan(f, o);
    last.format = f;
    last.rounding = o.rounding;
    last.overflow = o.overflow;
    last.filled = true;
  }
  return last.plan ? &*last.plan : nullptr;
}

// Checks shared by every entry point with an output of bits_per_code bits per code (4: packed).
void check_call(const Format& f, const ConversionOptions& o, std::size_t inputs, std::size_t outputs,
                int bits_per_code) {
  const std::string what = "encode " + format_name(f) + " into " +
                           (bits_per_code == 4 ? std::string("packed 4-bit codes") : std::to_string(bits_per_code) + "-bit codes");
  if (auto why = o.validate(f)) throw std::invalid_argument(what + ": " + *why);
  if (f.code_bits() > bits_per_code)
    throw std::invalid_argument(what + ": its codes have " + std::to_string(f.code_bits()) + " bits");
  const std::size_t expected = bits_per_code == 4 ? (inputs + 1) / 2 : inputs;
  if (outputs != expected)
    throw std::invalid_argument(what + ": " + std::to_string(inputs) + " inputs need " + std::to_string(expected) +
                                " outputs, got " + std::to_string(outputs));
}

template <class Out>
void run_kernel(const Kernels& k, const FastPlan& p, std::span<const float> in, std::span<Out> out, bool packed) {
  if constexpr (sizeof(Out) == sizeof(Code)) k.code32(p, in.data(), out.data(), in.size());
  else if constexpr (sizeof(Out) == 2) k.code16(p, in.data(), out.data(), in.size());
  else if (packed) k.packed4(p, in.data(), out.data(), in.size());
  else k.code8(p, in.data(), out.data(), in.size());
}

// The narrow encoders: fast when supported, else the scalar codes, narrowed.
template <class Out>
void encode_narrow(const Format& f, std::span<const float> in, std::span<Out> out, const ConversionOptions& o,
                   std::uint64_t first_index, int bits_per_code) {
  check_call(f, o, in.size(), out.size(), bits_per_code);
  const bool packed = bits_per_code == 4;
  if (const FastPlan* plan = cached_plan(f, o)) {
    run_kernel(kKernels[std::size_t(fastconv::best_available())], *plan, in, out, packed);
    return;
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Code c = encode(f, double(in[i]), o, first_index + i);
    if (packed) out[i / 2] = Out(i % 2 ? out[i / 2] | (c << 4) : c);
    else out[i] = Out(c);
  }
}

template <class Out>
void encode_with_isa(fastconv::Isa isa, const Format& f, std::span<const float> in, std::span<Out> out,
                     const ConversionOptions& o, int bits_per_code) {
  if (!fastconv::available(isa))
    throw std::invalid_argument("fast encode: the " + std::string(fastconv::to_string(isa)) +
                                " variant needs instructions this CPU lacks");
  check_call(f, o, in.size(), out.size(), bits_per_code);
  if (auto why = fast_encode_unsupported(f, o)) throw std::invalid_argument("fast encode: " + *why);
  run_kernel(kKernels[std::size_t(isa)], *make_plan(f, o), in, out, bits_per_code == 4);
}

}  // namespace

std::optional<std::string> fast_encode_unsupported(const Format& f, const ConversionOptions& o) {
  if (auto why = o.validate(f)) return why;
  if (f.code_bits() > 16) return format_name(f) + ": codes wider than 16 bits";
  if (o.rounding != Rounding::nearest_even && o.rounding != Rounding::toward_zero)
    return "rounding " + std::string(to_string(o.rounding)) + ": only nearest-even and toward-zero";
  return std::nullopt;
}

void encode(const Format& f, std::span<const float> in, std::span<std::uint8_t> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, 8);
}
void encode(const Format& f, std::span<const float> in, std::span<std::uint16_t> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, 16);
}
void encode_packed4(const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                    const ConversionOptions& o, std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, 4);
}

namespace fastconv {

bool encode_if_supported(const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o) {
  const FastPlan* plan = cached_plan(f, o);
  if (!plan) return false;
  run_kernel(kKernels[std::size_t(best_available())], *plan, in, out, false);
  return true;
}

std::span<const Isa> all_isas() { return kIsas; }

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::baseline: return "baseline";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

bool available(Isa isa) {
  switch (isa) {
    case Isa::baseline: return true;
    case Isa::avx2: return __builtin_cpu_supports("x86-64-v3");
    case Isa::avx512: return __builtin_cpu_supports("x86-64-v4");
  }
  return false;
}

Isa best_available() {
  static const Isa best = available(Isa::avx512) ? Isa::avx512 : available(Isa::avx2) ? Isa::avx2 : Isa::baseline;
  return best;
}

void encode_with(Isa isa, const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o) {
  encode_with_isa(isa, f, in, out, o, 32);
}
void encode_with(Isa isa, const Format& f, std::span<const float> in, std::span<std::uint16_t> out,
                 const ConversionOptions& o) {
  encode_with_isa(isa, f, in, out, o, 16);
}
void encode_with(Isa isa, const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                 const ConversionOptions& o) {
  encode_with_isa(isa, f, in, out, o, 8);
}
void encode_packed4_with(Isa isa, const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                         const ConversionOptions& o) {
  encode_with_isa(isa, f, in, out, o, 4);
}

}  // namespace fastconv
}  // namespace lowbit
