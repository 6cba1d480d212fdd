// The fast float32 -> code path: one branch-free conversion over float32 bit patterns whose
// constants come from the Format record at run time, compiled for several x86-64 instruction
// sets and picked at run time. It gives the scalar `encode` result bit for bit (tests/fastconv
// compares them on all 2^32 inputs) and serves every format of at most 16 code bits under
// nearest-even or toward-zero rounding with any overflow policy the format allows.
//
// The span encoder `encode(Format, span<const float>, span<Code>, ...)` in convert.hpp takes this
// path by itself whenever it supports the combination. The narrow outputs below write 1 or 2
// bytes per code (or half a byte, packed) instead of 4.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "emulation/convert.hpp"
#include "emulation/format.hpp"

namespace lowbit {

// Why the fast path cannot encode float32 into f under o, or nothing when it can.
std::optional<std::string> fast_encode_unsupported(const Format& f, const ConversionOptions& o);

// One code per element, in a byte or a 16-bit word. Combinations the fast path does not support
// go through the scalar encode. Throws std::invalid_argument when the code is wider than the
// output, when out.size() != in.size(), or when o is invalid for f.
void encode(const Format& f, std::span<const float> in, std::span<std::uint8_t> out, const ConversionOptions& o = {},
            std::uint64_t first_index = 0);
void encode(const Format& f, std::span<const float> in, std::span<std::uint16_t> out, const ConversionOptions& o = {},
            std::uint64_t first_index = 0);
// Two codes of at most 4 bits per byte, element 2i in the low nibble and 2i+1 in the high one
// (the order of CUDA's __nv_fp4x2_storage_t); an odd last element leaves the high nibble 0.
// out.size() must be (in.size() + 1) / 2.
void encode_packed4(const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                    const ConversionOptions& o = {}, std::uint64_t first_index = 0);

// The instruction-set variants, exposed so the differential tests check each one the CPU has
// and the benchmark can name the one it timed.
namespace fastconv {

enum class Isa : std::uint8_t {
  baseline,  // x86-64 as compiled (SSE2); no variable per-lane shifts, so mostly scalar
  avx2,      // x86-64-v3
  avx512,    // x86-64-v4
};
std::span<const Isa> all_isas();
std::string_view to_string(Isa isa);
bool available(Isa isa);
Isa best_available();

// What the span encoder of convert.hpp calls (it checks out.size() == in.size()): encodes with
// the best variant and returns true, or returns false, writing nothing, when the fast path does
// not support (f, o).
bool encode_if_supported(const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o);

// The fast path with a chosen variant. Throw std::invalid_argument when the variant is not
// available, the combination is unsupported (fast_encode_unsupported), the code is wider than
// the output or the sizes differ (as the narrow encoders).
void encode_with(Isa isa, const Format& f, std::span<const float> in, std::span<Code> out, const ConversionOptions& o);
void encode_with(Isa isa, const Format& f, std::span<const float> in, std::span<std::uint16_t> out,
                 const ConversionOptions& o);
void encode_with(Isa isa, const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                 const ConversionOptions& o);
void encode_packed4_with(Isa isa, const Format& f, std::span<const float> in, std::span<std::uint8_t> out,
                         const ConversionOptions& o);

}  // namespace fastconv
}  // namespace lowbit
