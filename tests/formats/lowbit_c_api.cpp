// A C entry point to encode and decode, loaded through ctypes by cross_check.py (the ml_dtypes and
// gfloat cross-checks). Each call parses the spec and options; errors come back as text.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "emulation/convert.hpp"

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
