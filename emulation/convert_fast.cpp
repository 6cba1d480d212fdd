#include "emulation/convert_fast.hpp"

// GCC 12 warns that AVX-512 intrinsics' deliberately undefined pass-through operand "may be used
// uninitialized" (GCC bug 105593, fixed in 13); the warning points into the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

// The split algorithm works on GCC vector types passed between always-inline functions, never
// across a call; GCC's note that their ABI differs without AVX is moot here.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "emulation/convert_fast_algorithms.hpp"

namespace lowbit {
namespace {

// ---- Both algorithms, per instruction set ----------------------------------------------------

// Everything a kernel may need for (format, options); the split part exists where it can serve.
struct Plan {
  BitFieldPlan bit_fields;
  std::optional<SplitPlan> split;
};

enum class Output : std::uint8_t { code32, code16, code8, packed4 };
template <Output O> using OutputType = std::conditional_t<O == Output::code32, Code,
                                       std::conditional_t<O == Output::code16, std::uint16_t, std::uint8_t>>;
// Index of the output element (byte, for packed codes) that input i starts.
template <Output O> constexpr std::size_t output_index(std::size_t i) { return O == Output::packed4 ? i / 2 : i; }

[[gnu::always_inline]] inline std::uint32_t bits_of(float x) { return std::bit_cast<std::uint32_t>(x); }
[[gnu::always_inline]] inline std::uint32_t bits_of(Bf16Bits x) { return std::uint32_t(x.bits) << 16; }

// `streaming`: the split algorithm's narrow outputs take streaming stores (the others ignore it).
using Kernel = void (*)(const Plan&, const void* in, std::size_t n, void* out, bool streaming);
// Indexed by [input: float32, bf16][output].
using KernelTable = std::array<std::array<Kernel, 4>, 2>;

// The vocabulary of the split loops for one instruction set: its vectors of 32-bit lanes, loads
// of float32 or bfloat16 bit patterns, and stores of four vectors of codes in each output width,
// regular or streaming (then `out` is aligned to the store's width). Codes are below 2^16 (2^8,
// 2^4 for the narrower outputs), so unsigned saturating packs are exact narrowing.
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
struct Avx2Lanes {
  static constexpr std::size_t count = 8;
  typedef std::uint32_t U32 __attribute__((vector_size(32)));
  typedef std::int32_t I32 __attribute__((vector_size(32)));
  typedef float F32 __attribute__((vector_size(32)));

  static U32 load(const float* in) {
    U32 v;
    std::memcpy(&v, in, sizeof v);
    return v;
  }
  static U32 load(const Bf16Bits* in) {
    return U32(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in))), 16));
  }
  template <bool Streaming>
  static void put(void* out, __m256i v) {
    if constexpr (Streaming) _mm256_stream_si256(static_cast<__m256i*>(out), v);
    else _mm256_storeu_si256(static_cast<__m256i*>(out), v);
  }
  template <bool Streaming>
  static void put(void* out, __m128i v) {
    if constexpr (Streaming) _mm_stream_si128(static_cast<__m128i*>(out), v);
    else _mm_storeu_si128(static_cast<__m128i*>(out), v);
  }
  template <bool Streaming>
  static void store(const U32 (&codes)[4], Code* out) {
    static_assert(!Streaming, "32-bit codes take regular stores");
    std::memcpy(out, codes, sizeof codes);
  }
  // packus interleaves the two 128-bit halves; the permutes restore element order.
  static __m256i words(U32 a, U32 b) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi32(__m256i(a), __m256i(b)), 0b11'01'10'00);
  }
  template <bool Streaming>
  static void store(const U32 (&codes)[4], std::uint16_t* out) {
    put<Streaming>(out, words(codes[0], codes[1]));
    put<Streaming>(out + count * 2, words(codes[2], codes[3]));
  }
  static __m256i bytes(const U32 (&codes)[4]) {
    const __m256i interleaved = _mm256_packus_epi16(_mm256_packus_epi32(__m256i(codes[0]), __m256i(codes[1])),
                                                    _mm256_packus_epi32(__m256i(codes[2]), __m256i(codes[3])));
    return _mm256_permutevar8x32_epi32(interleaved, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
  template <bool Streaming>
  static void store(const U32 (&codes)[4], std::uint8_t* out) {
    put<Streaming>(out, bytes(codes));
  }
  // Byte pairs as 16-bit words: low | high << 4 lands in the word's low byte.
  template <bool Streaming>
  static void store_packed4(const U32 (&codes)[4], std::uint8_t* out) {
    const __m256i b = bytes(codes);
    const __m256i pairs = _mm256_and_si256(_mm256_or_si256(b, _mm256_srli_epi16(b, 4)), _mm256_set1_epi16(0xff));
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(pairs, pairs), 0b00'00'10'00);
    put<Streaming>(out, _mm256_castsi256_si128(packed));
  }
};
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
struct Avx512Lanes {
  static constexpr std::size_t count = 16;
  typedef std::uint32_t U32 __attribute__((vector_size(64)));
  typedef std::int32_t I32 __attribute__((vector_size(64)));
  typedef float F32 __attribute__((vector_size(64)));

  static U32 load(const float* in) {
    U32 v;
    std::memcpy(&v, in, sizeof v);
    return v;
  }
  static U32 load(const Bf16Bits* in) {
    return U32(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in))), 16));
  }
  template <bool Streaming>
  static void put(void* out, __m512i v) {
    if constexpr (Streaming) _mm512_stream_si512(static_cast<__m512i*>(out), v);
    else _mm512_storeu_si512(out, v);
  }
  template <bool Streaming>
  static void put(void* out, __m256i v) {
    if constexpr (Streaming) _mm256_stream_si256(static_cast<__m256i*>(out), v);
    else _mm256_storeu_si256(static_cast<__m256i*>(out), v);
  }
  template <bool Streaming>
  static void store(const U32 (&codes)[4], Code* out) {
    static_assert(!Streaming, "32-bit codes take regular stores");
    std::memcpy(out, codes, sizeof codes);
  }
  // Packs interleave the four 128-bit lanes; one permute restores element order (fewer
  // instructions than narrowing each vector, 2 per vpmovdb).
  static __m512i words(U32 a, U32 b) {
    return _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7),
                                    _mm512_packus_epi32(__m512i(a), __m512i(b)));
  }
  template <bool Streaming>
  static void store(const U32 (&codes)[4], std::uint16_t* out) {
    put<Streaming>(out, words(codes[0], codes[1]));
    put<Streaming>(out + count * 2, words(codes[2], codes[3]));
  }
  static __m512i bytes(const U32 (&codes)[4]) {
    const __m512i interleaved = _mm512_packus_epi16(_mm512_packus_epi32(__m512i(codes[0]), __m512i(codes[1])),
                                                    _mm512_packus_epi32(__m512i(codes[2]), __m512i(codes[3])));
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                    interleaved);
  }
  template <bool Streaming>
  static void store(const U32 (&codes)[4], std::uint8_t* out) {
    put<Streaming>(out, bytes(codes));
  }
  // Byte pairs as 16-bit words: low | high << 4 lands in the word's low byte, which the
  // truncating narrow keeps.
  template <bool Streaming>
  static void store_packed4(const U32 (&codes)[4], std::uint8_t* out) {
    const __m512i b = bytes(codes);
    put<Streaming>(out, _mm512_cvtepi16_epi8(_mm512_or_si512(b, _mm512_srli_epi16(b, 4))));
  }
};
#pragma GCC pop_options

// Narrow outputs of the bit fields are written from 32-bit codes in a block that stays in L1:
// narrowing inside the conversion loop made GCC interleave four vectors of codes and spill the
// plan to the stack.
constexpr std::size_t kBlock = 512;  // even

// The loops, compiled once per instruction set (TARGET: a GCC target attribute; LANES: its
// vocabulary). There is no plain x86-64 variant: without AVX2's per-lane variable shifts GCC's
// SSE2 code of the bit fields was no faster than the scalar encode (14 vs 17 ns per element),
// which then serves such CPUs.
#define LOWBIT_FASTCONV_KERNELS(NAME, TARGET, LANES)                                                          \
  namespace NAME {                                                                                            \
  template <bool Exotic, class In>                                                                            \
  TARGET void bit_field_codes(const BitFieldPlan& shared, const In* in, Code* out, std::size_t n) {           \
    const BitFieldPlan p = shared; /* a local copy: stores to out cannot change it */                         \
    for (std::size_t i = 0; i < n; ++i) out[i] = encode_one<Exotic>(p, bits_of(in[i]));                       \
  }                                                                                                           \
  template <bool Exotic, class In, Output O>                                                                  \
  TARGET void bit_fields(const Plan& plan, const void* input, std::size_t n, void* output, bool) {            \
    const In* in = static_cast<const In*>(input);                                                             \
    auto* out = static_cast<OutputType<O>*>(output);                                                          \
    if constexpr (O == Output::code32) {                                                                      \
      bit_field_codes<Exotic>(plan.bit_fields, in, out, n);                                                   \
    } else {                                                                                                  \
      Code codes[kBlock];                                                                                     \
      for (std::size_t start = 0; start < n; start += kBlock) {                                               \
        const std::size_t count = std::min(kBlock, n - start);                                                \
        bit_field_codes<Exotic>(plan.bit_fields, in + start, codes, count);                                   \
        if constexpr (O == Output::packed4) {                                                                 \
          if (count % 2) codes[count] = 0;                                                                    \
          for (std::size_t j = 0; j < (count + 1) / 2; ++j)                                                   \
            out[start / 2 + j] = std::uint8_t(codes[2 * j] | (codes[2 * j + 1] << 4));                        \
        } else {                                                                                              \
          for (std::size_t i = 0; i < count; ++i) out[start + i] = OutputType<O>(codes[i]);                   \
        }                                                                                                     \
      }                                                                                                       \
    }                                                                                                         \
  }                                                                                                           \
  /* Four vectors of inputs to codes in the output's width. */                                                \
  template <bool Nearest, class In, Output O, bool Streaming, bool Prefetch = true>                           \
  [[gnu::always_inline]] TARGET inline void split_step(const SplitPlan& p, const In* in, OutputType<O>* out) { \
    typename LANES::U32 codes[4];                                                                             \
    if constexpr (Prefetch && fastconv::kPrefetchBytes > 0) /* not the tail's local copy */                   \
      for (std::size_t line = 0; line < 4 * LANES::count * sizeof(In); line += 64)                            \
        _mm_prefetch(reinterpret_cast<const char*>(in) + fastconv::kPrefetchBytes + line, _MM_HINT_T0);       \
    for (std::size_t j = 0; j < 4; ++j) codes[j] = encode_split<LANES, Nearest>(p, LANES::load(in + j * LANES::count)); \
    if constexpr (O == Output::packed4) LANES::template store_packed4<Streaming>(codes, out);                 \
    else LANES::template store<Streaming>(codes, out);                                                        \
  }                                                                                                           \
  /* Whole steps with regular stores, then the tail through padded copies; +0 pads, and its code 0 */         \
  /* leaves an odd packed tail's high nibble 0. */                                                             \
  template <bool Nearest, class In, Output O>                                                                 \
  TARGET void split_regular(const SplitPlan& p, const In* in, std::size_t n, OutputType<O>* out) {            \
    constexpr std::size_t step = 4 * LANES::count;                                                            \
    std::size_t i = 0;                                                                                        \
    for (; i + step <= n; i += step) split_step<Nearest, In, O, false>(p, in + i, out + output_index<O>(i));  \
    if (i == n) return;                                                                                       \
    In tail_in[step] = {};                                                                                    \
    OutputType<O> tail_out[step];                                                                             \
    std::copy(in + i, in + n, tail_in);                                                                       \
    split_step<Nearest, In, O, false, false>(p, tail_in, tail_out);                                           \
    const std::size_t tail_outputs = O == Output::packed4 ? (n - i + 1) / 2 : n - i;                          \
    std::copy_n(tail_out, tail_outputs, out + output_index<O>(i));                                            \
  }                                                                                                           \
  /* Streaming: regular stores up to the output's first 64-byte boundary (an even number of inputs */         \
  /* when packed), streaming ones for the whole steps after it, regular ones for the tail. */                 \
  template <bool Nearest, class In, Output O>                                                                 \
  TARGET void split(const Plan& plan, const void* input, std::size_t n, void* output, bool streaming) {       \
    const SplitPlan p = *plan.split;                                                                          \
    const In* in = static_cast<const In*>(input);                                                             \
    auto* out = static_cast<OutputType<O>*>(output);                                                          \
    std::size_t i = 0;                                                                                        \
    if constexpr (O != Output::code32) {                                                                      \
      if (streaming) {                                                                                        \
        constexpr std::size_t step = 4 * LANES::count, inputs_per_byte = O == Output::packed4 ? 2 : 1;        \
        const std::size_t to_boundary = (64 - reinterpret_cast<std::uintptr_t>(out) % 64) % 64;              \
        i = std::min(n, to_boundary / sizeof(OutputType<O>) * inputs_per_byte);                               \
        split_regular<Nearest, In, O>(p, in, i, out);                                                         \
        for (; i + step <= n; i += step) split_step<Nearest, In, O, true>(p, in + i, out + output_index<O>(i)); \
        _mm_sfence(); /* the streaming stores are ordered before whatever the caller does next */             \
      }                                                                                                       \
    }                                                                                                         \
    split_regular<Nearest, In, O>(p, in + i, n - i, out + output_index<O>(i));                                \
  }                                                                                                           \
  template <bool Exotic>                                                                                      \
  constexpr KernelTable bit_field_kernels{                                                                    \
      {{bit_fields<Exotic, float, Output::code32>, bit_fields<Exotic, float, Output::code16>,                 \
        bit_fields<Exotic, float, Output::code8>, bit_fields<Exotic, float, Output::packed4>},                \
       {bit_fields<Exotic, Bf16Bits, Output::code32>, bit_fields<Exotic, Bf16Bits, Output::code16>,           \
        bit_fields<Exotic, Bf16Bits, Output::code8>, bit_fields<Exotic, Bf16Bits, Output::packed4>}}};        \
  template <bool Nearest>                                                                                     \
  constexpr KernelTable split_kernels{                                                                        \
      {{split<Nearest, float, Output::code32>, split<Nearest, float, Output::code16>,                         \
        split<Nearest, float, Output::code8>, split<Nearest, float, Output::packed4>},                        \
       {split<Nearest, Bf16Bits, Output::code32>, split<Nearest, Bf16Bits, Output::code16>,                   \
        split<Nearest, Bf16Bits, Output::code8>, split<Nearest, Bf16Bits, Output::packed4>}}};                \
  /* Indexed by KernelFamily. */                                                                              \
  constexpr std::array<KernelTable, 4> kernels{bit_field_kernels<false>, bit_field_kernels<true>,             \
                                               split_kernels<true>, split_kernels<false>};                    \
  }


LOWBIT_FASTCONV_KERNELS(avx2, [[gnu::target("arch=x86-64-v3")]], Avx2Lanes)
LOWBIT_FASTCONV_KERNELS(avx512, [[gnu::target("arch=x86-64-v4")]], Avx512Lanes)
#undef LOWBIT_FASTCONV_KERNELS

enum class KernelFamily : std::uint8_t { bit_fields, bit_fields_exotic, split_nearest, split_toward_zero };
constexpr std::array kIsas{fastconv::Isa::avx2, fastconv::Isa::avx512};
constexpr std::array kAlgorithms{fastconv::Algorithm::bit_fields, fastconv::Algorithm::split};
// Indexed by [isa][family].
constexpr std::array kKernels{avx2::kernels, avx512::kernels};

std::optional<BitFieldPlan> make_bit_field_plan(const Format& f, const ConversionOptions& o) {
  const std::uint32_t m = std::uint32_t(f.mantissa_bits);
  BitFieldPlan p{};
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

std::optional<Plan> make_plan(const Format& f, const ConversionOptions& o) {
  if (fast_encode_unsupported(f, o)) return std::nullopt;
  return Plan{*make_bit_field_plan(f, o), make_split_plan(f, o)};
}

// The plan for (f, o), remembered per thread: quantizers encode many short spans in a row.
const Plan* cached_plan(const Format& f, const ConversionOptions& o) {
  thread_local struct {
    Format format;
    Rounding rounding;
    Overflow overflow;
    std::optional<Plan> plan;
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

fastconv::Algorithm best_algorithm(const Plan& plan) {
  return plan.split && fastconv::default_float_environment() ? fastconv::Algorithm::split
                                                              : fastconv::Algorithm::bit_fields;
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

template <class In, class Out>
void run_kernel(fastconv::Variant v, const Plan& plan, std::span<const In> in, std::span<Out> out, bool packed) {
  KernelFamily family;
  if (v.algorithm == fastconv::Algorithm::split)
    family = plan.bit_fields.nearest ? KernelFamily::split_nearest : KernelFamily::split_toward_zero;
  else family = plan.bit_fields.exotic ? KernelFamily::bit_fields_exotic : KernelFamily::bit_fields;
  const Output output = sizeof(Out) == 4 ? Output::code32 : sizeof(Out) == 2 ? Output::code16
                                                          : packed          ? Output::packed4
                                                                            : Output::code8;
  const std::size_t input = std::is_same_v<In, float> ? 0 : 1;
  const bool streaming = fastconv::streams(v, sizeof(Out), out.size_bytes(), packed);
  kKernels[std::size_t(v.isa)][std::size_t(family)][input][std::size_t(output)](plan, in.data(), in.size(), out.data(),
                                                                                 streaming);
}

int bits_per_code(std::size_t output_bytes, bool packed) { return packed ? 4 : int(8 * output_bytes); }

// The narrow encoders: fast when supported, else the scalar codes, narrowed.
template <class In, class Out>
void encode_narrow(const Format& f, std::span<const In> in, std::span<Out> out, const ConversionOptions& o,
                   std::uint64_t first_index, bool packed) {
  check_call(f, o, in.size(), out.size(), bits_per_code(sizeof(Out), packed));
  const Plan* plan = cached_plan(f, o);
  if (const auto isa = fastconv::best_available(); plan && isa) {
    run_kernel(fastconv::Variant{*isa, best_algorithm(*plan)}, *plan, in, out, packed);
    return;
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Code c = encode(f, double(std::bit_cast<float>(bits_of(in[i]))), o, first_index + i);
    if (packed) out[i / 2] = Out(i % 2 ? out[i / 2] | (c << 4) : c);
    else out[i] = Out(c);
  }
}

template <class In, class Out>
void encode_with_variant(fastconv::Variant v, const Format& f, std::span<const In> in, std::span<Out> out,
                         const ConversionOptions& o, bool packed) {
  if (!fastconv::available(v.isa))
    throw std::invalid_argument("fast encode: the " + std::string(fastconv::to_string(v.isa)) +
                                " variant needs instructions this CPU lacks");
  check_call(f, o, in.size(), out.size(), bits_per_code(sizeof(Out), packed));
  if (auto why = fastconv::algorithm_unsupported(v.algorithm, f, o))
    throw std::invalid_argument("fast encode, " + std::string(fastconv::to_string(v.algorithm)) + ": " + *why);
  if (v.algorithm == fastconv::Algorithm::split && !fastconv::default_float_environment())
    throw std::invalid_argument("fast encode, split: needs the default floating-point environment (MXCSR: round to "
                                "nearest, denormal inputs not zero)");
  if (v.stores == fastconv::Stores::streaming && (v.algorithm != fastconv::Algorithm::split || sizeof(Out) == 4))
    throw std::invalid_argument("fast encode: streaming stores serve only the split algorithm's 8-bit, 16-bit and "
                                "packed outputs");
  run_kernel(v, *make_plan(f, o), in, out, packed);
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
  encode_narrow(f, in, out, o, first_index, false);
}
void encode(const Format& f, std::span<const float> in, std::span<std::uint16_t> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, false);
}
void encode(const Format& f, std::span<const Bf16Bits> in, std::span<std::uint8_t> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, false);
}
void encode(const Format& f, std::span<const Bf16Bits> in, std::span<std::uint16_t> out, const ConversionOptions& o,
            std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, false);
}
void encode_packed4(const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                    const ConversionOptions& o, std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, true);
}
void encode_packed4(const Format& f, std::span<const Bf16Bits> in, std::span<std::uint8_t> out,
                    const ConversionOptions& o, std::uint64_t first_index) {
  encode_narrow(f, in, out, o, first_index, true);
}

namespace fastconv {

bool encode_if_supported(const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o) {
  const Plan* plan = cached_plan(f, o);
  const auto isa = best_available();
  if (!plan || !isa) return false;
  run_kernel(Variant{*isa, best_algorithm(*plan)}, *plan, in, out, false);
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

std::span<const Algorithm> all_algorithms() { return kAlgorithms; }

std::string_view to_string(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::bit_fields: return "bit fields";
    case Algorithm::split: return "split";
  }
  return "?";
}

std::optional<std::string> algorithm_unsupported(Algorithm algorithm, const Format& f, const ConversionOptions& o) {
  if (auto why = fast_encode_unsupported(f, o)) return why;
  if (algorithm == Algorithm::bit_fields) return std::nullopt;
  if (auto why = split_unsupported(f, o)) return why;
  if (!make_split_plan(f, o)) return format_name(f) + ": special codes of another shape";
  return std::nullopt;
}

bool default_float_environment() {
  constexpr unsigned kRoundingControl = 0x6000, kDenormalsAreZero = 0x0040;
  return (_mm_getcsr() & (kRoundingControl | kDenormalsAreZero)) == 0;
}

std::optional<Algorithm> algorithm_used(const Format& f, const ConversionOptions& o) {
  const Plan* plan = cached_plan(f, o);
  if (!plan || !best_available()) return std::nullopt;
  return best_algorithm(*plan);
}

std::string_view to_string(Stores stores) {
  switch (stores) {
    case Stores::by_size: return "stores by size";
    case Stores::regular: return "regular stores";
    case Stores::streaming: return "streaming stores";
  }
  return "?";
}

bool streams(Variant v, std::size_t element_bytes, std::size_t output_bytes, bool packed) {
  if (v.algorithm != Algorithm::split || (element_bytes == sizeof(Code) && !packed)) return false;
  switch (v.stores) {
    case Stores::by_size: return output_bytes >= kStreamingBytes;
    case Stores::regular: return false;
    case Stores::streaming: return true;
  }
  return false;
}

// The stores are named only when chosen, so that the encoders' variant reads "avx512 split".
std::string to_string(Variant v) {
  std::string name = std::string(to_string(v.isa)) + " " + std::string(to_string(v.algorithm));
  if (v.stores != Stores::by_size) name += ", " + std::string(to_string(v.stores));
  return name;
}

template <class In, class Out>
void encode_with(Variant v, const Format& f, std::span<const In> in, std::span<Out> out, const ConversionOptions& o) {
  encode_with_variant(v, f, in, out, o, false);
}
template <class In>
void encode_packed4_with(Variant v, const Format& f, std::span<const In> in, std::span<std::uint8_t> out,
                         const ConversionOptions& o) {
  encode_with_variant(v, f, in, out, o, true);
}
template void encode_with(Variant, const Format&, std::span<const float>, std::span<Code>, const ConversionOptions&);
template void encode_with(Variant, const Format&, std::span<const float>, std::span<std::uint16_t>,
                          const ConversionOptions&);
template void encode_with(Variant, const Format&, std::span<const float>, std::span<std::uint8_t>,
                          const ConversionOptions&);
template void encode_with(Variant, const Format&, std::span<const Bf16Bits>, std::span<Code>, const ConversionOptions&);
template void encode_with(Variant, const Format&, std::span<const Bf16Bits>, std::span<std::uint16_t>,
                          const ConversionOptions&);
template void encode_with(Variant, const Format&, std::span<const Bf16Bits>, std::span<std::uint8_t>,
                          const ConversionOptions&);
template void encode_packed4_with(Variant, const Format&, std::span<const float>, std::span<std::uint8_t>,
                                  const ConversionOptions&);
template void encode_packed4_with(Variant, const Format&, std::span<const Bf16Bits>, std::span<std::uint8_t>,
                                  const ConversionOptions&);

}  // namespace fastconv
}  // namespace lowbit
