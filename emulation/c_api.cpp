// A C entry point to encode and decode, loaded through ctypes by tests/formats/cross_check.py (the
// ml_dtypes and gfloat cross-checks) and experiments/bench/convert_peers.py (bench_convert's side
// by side timing against PyTorch and ml_dtypes). Each call parses the spec and options (about a
// microsecond); errors come back as text.
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"

namespace {

// Copies the message into the caller's buffer; returns false, for `return failed(...)`.
bool failed(const std::string& message, char* error, std::size_t error_size) {
  if (error_size > 0) {
    std::strncpy(error, message.c_str(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  return false;
}

// The format and options of a call, or false with the reason in `error`.
bool prepare(const char* spec, const char* rounding, const char* overflow, lowbit::Format& f,
             lowbit::ConversionOptions& options, char* error, std::size_t error_size) {
  const auto parsed = lowbit::parse_format(spec);
  if (!parsed.format) return failed(parsed.error, error, error_size);
  f = *parsed.format;
  const auto r = lowbit::parse_rounding(rounding);
  const auto o = lowbit::parse_overflow(overflow);
  if (!r || !o) return failed("unknown rounding or overflow name", error, error_size);
  options.rounding = *r;
  options.overflow = *o;
  if (auto why = options.validate(f)) return failed(*why, error, error_size);
  return true;
}

}  // namespace

extern "C" {

// Encodes n float32 values; returns 0, or -1 with a message in `error`.
int lowbit_encode_float32(const char* spec, const char* rounding, const char* overflow, const float* in,
                          std::uint32_t* out, std::uint64_t n, char* error, std::uint64_t error_size) {
  lowbit::Format f;
  lowbit::ConversionOptions options;
  if (!prepare(spec, rounding, overflow, f, options, error, error_size)) return -1;
  lowbit::encode(f, std::span(in, n), std::span(out, n), options);
  return 0;
}

// Encodes n values through the encoders of convert_fast.hpp (the fast path where it serves):
// input "float32" (n floats) or "bfloat16" (n 16-bit words, the top halves of float32), output
// "8", "16" or "32" (one code per byte, 16-bit word or 32-bit word) or "packed4" ((n + 1) / 2
// bytes, element 2i in the low nibble). Returns 0, or -1 with a message in `error`.
int lowbit_encode_into(const char* spec, const char* rounding, const char* overflow, const char* input,
                       const void* in, std::uint64_t n, const char* output, void* out, char* error,
                       std::uint64_t error_size) {
  lowbit::Format f;
  lowbit::ConversionOptions options;
  if (!prepare(spec, rounding, overflow, f, options, error, error_size)) return -1;
  const std::string in_kind = input, out_kind = output;
  const auto run = [&](auto in_span) {
    if (out_kind == "8") lowbit::encode(f, in_span, std::span(static_cast<std::uint8_t*>(out), n), options);
    else if (out_kind == "16") lowbit::encode(f, in_span, std::span(static_cast<std::uint16_t*>(out), n), options);
    else if (out_kind == "packed4")
      lowbit::encode_packed4(f, in_span, std::span(static_cast<std::uint8_t*>(out), (n + 1) / 2), options);
    else if constexpr (std::is_same_v<decltype(in_span), std::span<const float>>) {
      if (out_kind != "32") return failed("output '" + out_kind + "': expected 8, 16, 32 or packed4", error, error_size);
      lowbit::encode(f, in_span, std::span(static_cast<lowbit::Code*>(out), n), options);
    } else {
      return failed("output '" + out_kind + "' of input '" + in_kind + "': expected 8, 16 or packed4", error, error_size);
    }
    return true;
  };
  try {
    bool done;
    if (in_kind == "float32") done = run(std::span(static_cast<const float*>(in), n));
    else if (in_kind == "bfloat16") done = run(std::span(static_cast<const lowbit::Bf16Bits*>(in), n));
    else done = failed("input '" + in_kind + "': expected float32 or bfloat16", error, error_size);
    return done ? 0 : -1;
  } catch (const std::exception& e) {
    failed(e.what(), error, error_size);
    return -1;
  }
}

// What serves a combination: "<isa> <algorithm>" of the fast path (e.g. "avx512 split"), or
// "scalar" where it does not. Returns 0, or -1 with a message in `error`.
int lowbit_fast_variant(const char* spec, const char* rounding, const char* overflow, char* text,
                        std::uint64_t text_size, char* error, std::uint64_t error_size) {
  lowbit::Format f;
  lowbit::ConversionOptions options;
  if (!prepare(spec, rounding, overflow, f, options, error, error_size)) return -1;
  const auto isa = lowbit::fastconv::best_available();
  const auto algorithm = lowbit::fastconv::algorithm_used(f, options);
  failed(isa && algorithm ? lowbit::fastconv::to_string(lowbit::fastconv::Variant{*isa, *algorithm}) : "scalar", text,
         text_size);
  return 0;
}

// Decodes n codes to doubles; returns 0, or -1 with a message in `error`.
int lowbit_decode(const char* spec, const std::uint32_t* codes, double* out, std::uint64_t n, char* error,
                  std::uint64_t error_size) {
  const auto parsed = lowbit::parse_format(spec);
  if (!parsed.format) {
    failed(parsed.error, error, error_size);
    return -1;
  }
  for (std::uint64_t i = 0; i < n; ++i) out[i] = lowbit::decode(*parsed.format, codes[i]);
  return 0;
}
}
