// The fast float32 (and bfloat16) -> code path: branch-free conversions whose constants come
// from the Format record at run time, compiled for several x86-64 instruction sets and picked at
// run time. It gives the scalar `encode` result bit for bit (tests/fastconv compares them on all
// 2^32 float32 inputs and all 2^16 bfloat16 inputs) on CPUs with AVX2 (x86-64-v3).
//
// Two algorithms, each one piece of code for every format it serves:
//  * bit fields: integer arithmetic on float32's sign, exponent and significand with per-lane
//    shifts. Every format of at most 16 code bits under nearest-even or toward-zero rounding,
//    with any overflow policy the format allows.
//  * split: from the format's smallest normal binade up, float32's exponent and significand
//    already are the code's fields once rebased, so one add and one fixed shift round them (the
//    carry of a round-up moves to the next binade by itself); below it, one float add (or a
//    multiply and a truncating conversion) rounds |x| to the subnormal spacing. About half the
//    instructions of the bit fields, for floating formats with zero, subnormals, 1..22 mantissa
//    bits, a range inside float32's and sign-magnitude specials (e4m3, e5m2, e2m1, e2m3, e3m2,
//    fp16, bf16, ...). Its float arithmetic needs the default floating-point environment (round
//    to nearest, denormal inputs not treated as zero); the encoders check MXCSR on every call
//    and take the bit fields where it differs.
//
// The span encoder `encode(Format, span<const float>, span<Code>, ...)` in convert.hpp takes this
// path by itself whenever it supports the combination. The narrow outputs below write 1 or 2
// bytes per code (or half a byte, packed) instead of 4. From fastconv::kStreamingBytes of narrow
// output up, the split algorithm writes whole cache lines with streaming (non-temporal) stores:
// an output that large leaves the caches anyway, and a line written whole is not read first
// (5 bytes of memory traffic per float32 -> 8-bit code instead of 6).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "emulation/convert.hpp"
#include "emulation/format.hpp"

namespace lowbit {

// A bfloat16 value by its 16 bits: the top half of the float32 with the same value. The input
// of the bfloat16 -> code encoders (for example bf16 activations to e4m3).
struct Bf16Bits {
  std::uint16_t bits;
};

// Why the fast path cannot encode float32 into f under o, or nothing when it can.
std::optional<std::string> fast_encode_unsupported(const Format& f, const ConversionOptions& o);

// One code per element, in a byte or a 16-bit word. Combinations the fast path does not support
// go through the scalar encode. Throws std::invalid_argument when the code is wider than the
// output, when out.size() != in.size(), or when o is invalid for f.
void encode(const Format& f, std::span<const float> in, std::span<std::uint8_t> out, const ConversionOptions& o = {},
            std::uint64_t first_index = 0);
void encode(const Format& f, std::span<const float> in, std::span<std::uint16_t> out, const ConversionOptions& o = {},
            std::uint64_t first_index = 0);
void encode(const Format& f, std::span<const Bf16Bits> in, std::span<std::uint8_t> out, const ConversionOptions& o = {},
            std::uint64_t first_index = 0);
void encode(const Format& f, std::span<const Bf16Bits> in, std::span<std::uint16_t> out,
            const ConversionOptions& o = {}, std::uint64_t first_index = 0);
// Two codes of at most 4 bits per byte, element 2i in the low nibble and 2i+1 in the high one
// (the order of CUDA's __nv_fp4x2_storage_t); an odd last element leaves the high nibble 0.
// out.size() must be (in.size() + 1) / 2.
void encode_packed4(const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                    const ConversionOptions& o = {}, std::uint64_t first_index = 0);
void encode_packed4(const Format& f, std::span<const Bf16Bits> in, std::span<std::uint8_t> out,
                    const ConversionOptions& o = {}, std::uint64_t first_index = 0);

// The instruction-set variants and algorithms, exposed so the differential tests check each one
// the CPU has and the benchmark can name the one it timed.
namespace fastconv {

enum class Isa : std::uint8_t {
  avx2,    // x86-64-v3
  avx512,  // x86-64-v4
};
std::span<const Isa> all_isas();
std::string_view to_string(Isa isa);
bool available(Isa isa);
// The variant the encoders use; none on a CPU without AVX2 (the scalar encode serves it).
std::optional<Isa> best_available();

enum class Algorithm : std::uint8_t {
  bit_fields,  // every format and rounding the fast path supports
  split,       // ordinary floating formats, in the default floating-point environment (see above)
};
std::span<const Algorithm> all_algorithms();
std::string_view to_string(Algorithm algorithm);
// Why `algorithm` cannot serve (f, o) (the floating-point environment aside), or nothing.
std::optional<std::string> algorithm_unsupported(Algorithm algorithm, const Format& f, const ConversionOptions& o);
// Whether this thread's floating-point environment is the one the split algorithm needs.
bool default_float_environment();
// The algorithm the encoders take for (f, o) now: split where it can serve, else bit fields;
// nothing where the fast path does not support (f, o) or the CPU has no variant.
std::optional<Algorithm> algorithm_used(const Format& f, const ConversionOptions& o);

// How the split algorithm writes narrow outputs (8-bit, 16-bit and packed codes; 32-bit codes and
// the bit fields always take regular stores).
enum class Stores : std::uint8_t {
  by_size,    // streaming from kStreamingBytes of output up, else regular: what the encoders do
  regular,
  streaming,  // regular stores up to the first 64-byte boundary of the output, then streaming ones
};
std::string_view to_string(Stores stores);
// Narrow outputs of at least this many bytes (32 MiB) take streaming stores under Stores::by_size:
// an output that large will not stay in most last-level caches, where a smaller one may and would
// be sent to memory by them. On the AVX-512 host of results/convert-avx512 (300 MiB of L3, the
// bench's 16 MiB outputs staying in it) the two kinds were within a few percent: the memory probe
// 4-9% faster with regular stores, the fast path 2-7% faster with streaming ones.
inline constexpr std::size_t kStreamingBytes = std::size_t{32} << 20;
// The split algorithm prefetches its input this many bytes ahead, every cache line of it (a hint:
// it changes no code). One core's hardware prefetchers leave a stream latency-bound: on the
// AVX-512 Xeon of results/convert-avx512, float32 -> e4m3 / e5m2 ran at 1.6-1.9e9/s without,
// 2.0-2.4e9/s with 1 KiB, 2.4-3.2e9/s with 4 KiB and 2.6-3.2e9/s with 16 KiB, side by side in two
// calls (scripts/device/convert_prefetch.sh); 4 KiB keeps the lines in flight well inside a 32 KiB L1.
inline constexpr std::size_t kPrefetchBytes = 4096;

// One way of running the fast path.
struct Variant {
  Isa isa;
  Algorithm algorithm;
  Stores stores = Stores::by_size;
};
std::string to_string(Variant v);

// What the span encoder of convert.hpp calls (it checks out.size() == in.size()): encodes with
// the best variant and returns true, or returns false, writing nothing, when the fast path does
// not support (f, o).
bool encode_if_supported(const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o);

// Whether the variant writes an output of `output_bytes` bytes (packed: true) in elements of
// `element_bytes` bytes with streaming stores.
bool streams(Variant v, std::size_t element_bytes, std::size_t output_bytes, bool packed);

// The fast path with a chosen variant. In is float or Bf16Bits; Out is Code, std::uint16_t or
// std::uint8_t (one code each). Throw std::invalid_argument when the ISA is not available, the
// algorithm cannot serve (f, o) or the floating-point environment (split), streaming stores are
// asked of the bit fields or of 32-bit codes, the code is wider than the output or the sizes
// differ (as the narrow encoders).
template <class In, class Out>
void encode_with(Variant v, const Format& f, std::span<const In> in, std::span<Out> out, const ConversionOptions& o);
template <class In>
void encode_packed4_with(Variant v, const Format& f, std::span<const In> in, std::span<std::uint8_t> out,
                         const ConversionOptions& o);

}  // namespace fastconv
}  // namespace lowbit
