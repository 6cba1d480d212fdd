#include "emulation/convert_fast.hpp"

#include <algorithm>
#include <array>
#include <bit>
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
[[gnu::always_inline]] inline Code encode_one(const FastPlan& p, std::uint32_t bits) {
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

struct Kernels {
  void (*code32)(const FastPlan&, const float*, Code*, std::size_t);
  void (*code16)(const FastPlan&, const float*, std::uint16_t*, std::size_t);
  void (*code8)(const FastPlan&, const float*, std::uint8_t*, std::size_t);
  void (*packed4)(const FastPlan&, const float*, std::uint8_t*, std::size_t);
};

// Narrow outputs are written from 32-bit codes in a block that stays in L1: narrowing inside
// the conversion loop made GCC interleave four vectors of codes and spill the plan to the stack.
constexpr std::size_t kBlock = 512;  // even

// The loops, compiled once per instruction set (TARGET: a GCC target attribute). There is no
// plain x86-64 variant: without AVX2's per-lane variable shifts GCC's SSE2 code was no faster
// than the scalar encode (14 vs 17 ns per element), which then serves such CPUs.
#define LOWBIT_FASTCONV_KERNELS(NAME, TARGET)                                                                 \
  namespace NAME {                                                                                            \
  template <bool Exotic>                                                                                      \
  TARGET void encode_codes(const FastPlan& shared, const float* in, Code* out, std::size_t n) {              \
    const FastPlan p = shared; /* a local copy: stores to out cannot change it */                             \
    for (std::size_t i = 0; i < n; ++i) out[i] = encode_one<Exotic>(p, std::bit_cast<std::uint32_t>(in[i]));  \
  }                                                                                                           \
  template <bool Exotic, class Out>                                                                           \
  TARGET void encode_narrow(const FastPlan& p, const float* in, Out* out, std::size_t n) {                   \
    Code codes[kBlock];                                                                                       \
    for (std::size_t start = 0; start < n; start += kBlock) {                                                 \
      const std::size_t count = std::min(kBlock, n - start);                                                  \
      encode_codes<Exotic>(p, in + start, codes, count);                                                      \
      for (std::size_t i = 0; i < count; ++i) out[start + i] = Out(codes[i]);                                 \
    }                                                                                                         \
  }                                                                                                           \
  template <bool Exotic>                                                                                      \
  TARGET void encode_packed4(const FastPlan& p, const float* in, std::uint8_t* out, std::size_t n) {         \
    Code codes[kBlock];                                                                                       \
    for (std::size_t start = 0; start < n; start += kBlock) {                                                 \
      const std::size_t count = std::min(kBlock, n - start);                                                  \
      encode_codes<Exotic>(p, in + start, codes, count);                                                      \
      if (count % 2) codes[count] = 0;                                                                        \
      for (std::size_t j = 0; j < (count + 1) / 2; ++j)                                                       \
        out[start / 2 + j] = std::uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));                            \
    }                                                                                                         \
  }                                                                                                           \
  template <bool Exotic>                                                                                      \
  constexpr Kernels kernels{encode_codes<Exotic>, encode_narrow<Exotic, std::uint16_t>,                       \
                            encode_narrow<Exotic, std::uint8_t>, encode_packed4<Exotic>};                     \
  }

LOWBIT_FASTCONV_KERNELS(avx2, [[gnu::target("arch=x86-64-v3")]])
LOWBIT_FASTCONV_KERNELS(avx512, [[gnu::target("arch=x86-64-v4")]])
#undef LOWBIT_FASTCONV_KERNELS

constexpr std::array kIsas{fastconv::Isa::avx2, fastconv::Isa::avx512};
// Indexed by [isa][plan.exotic].
constexpr std::array kKernels{std::array{avx2::kernels<false>, avx2::kernels<true>},
                              std::array{avx512::kernels<false>, avx512::kernels<true>}};

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
  p.field_parity = m == 0 ? 1 : 0;
  p.exotic = m == 0 || f.nan == NanEncoding::negative_zero;
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
  p.negative_zero = encode(f, -0.0, o);
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
void run_kernel(fastconv::Isa isa, const FastPlan& p, std::span<const float> in, std::span<Out> out, bool packed) {
  const Kernels& k = kKernels[std::size_t(isa)][p.exotic];
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
  const FastPlan* plan = cached_plan(f, o);
  if (const auto isa = fastconv::best_available(); plan && isa) {
    run_kernel(*isa, *plan, in, out, packed);
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
  run_kernel(isa, *make_plan(f, o), in, out, bits_per_code == 4);
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
  const auto isa = best_available();
  if (!plan || !isa) return false;
  run_kernel(*isa, *plan, in, out, false);
  return true;
}

std::span<const Isa> all_isas() { return kIsas; }

std::string_view to_string(Isa isa) {
  switch (isa) {
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

bool available(Isa isa) {
  switch (isa) {
    case Isa::avx2: return __builtin_cpu_supports("x86-64-v3");
    case Isa::avx512: return __builtin_cpu_supports("x86-64-v4");
  }
  return false;
}

std::optional<Isa> best_available() {
  static const std::optional<Isa> best = available(Isa::avx512) ? std::optional(Isa::avx512)
                                         : available(Isa::avx2) ? std::optional(Isa::avx2)
                                                                : std::nullopt;
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
