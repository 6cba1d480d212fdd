// encode and decode against the host-side conversion functions of CUDA 13's cuda_fp8.h,
// cuda_fp6.h, cuda_fp4.h, cuda_bf16.h and cuda_fp16.h, compiled by the host compiler (no GPU).
// The GPU side is checked apart: `lowbit verify-cvt` found an H100's conversions (cvt
// instructions, or the headers' device code where sm_90 has none) equal to encode on all 2^32
// float32 inputs for e4m3/e5m2 (satfinite and not), e2m3, e3m2, e2m1, bf16 and f16 to nearest,
// and ue8m0 toward zero and toward +inf satfinite (results/gpu/cvt-exhaustive.json,
// docs/gpu-probes.md); where both hold, host functions, hardware and encode agree.
//
// Mapping of CUDA's options onto ours:
//   __NV_SATFINITE -> Overflow::saturate; e4m3 __NV_NOSAT -> Overflow::nan (no Inf);
//   e5m2 __NV_NOSAT -> Overflow::inf; bf16/fp16 conversions -> Overflow::inf;
//   fp6/fp4 (always saturating; NaN -> +max) -> Overflow::saturate;
//   cudaRoundNearest/Zero/PosInf -> Rounding::nearest_even/toward_zero/toward_positive;
//   __float2bfloat16_rz/_rd/_ru -> toward_zero/toward_negative/toward_positive, Overflow::inf:
//   they are IEEE 754 directed roundings (Inf stays Inf; a finite value overflows to Inf only
//   when rounding away from zero, else gives max finite, as our rule for every policy does).
//
// Every float32 test walks all 2^32 bit patterns, NaNs included, and compares codes bit for bit.
// Mismatching inputs are written to <case>.mismatches.txt in the working directory.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/pack.hpp"
#include "tests/formats/format_reference.hpp"

using namespace lowbit;

namespace {

struct Mismatches {
  std::uint64_t checked = 0;
  std::uint64_t count = 0;
  std::vector<std::string> lines;  // the first 2^16, written to the file

  void add(std::string line) {
    if (lines.size() < (1u << 16)) lines.push_back(std::move(line));
    ++count;
  }
  // Writes the failing inputs for a later look; returns the first few for the test's message.
  std::string report(const std::string& name) const {
    if (count == 0) return "";
    const std::string file = name + ".mismatches.txt";
    if (std::FILE* out = std::fopen(file.c_str(), "w")) {
      for (const auto& line : lines) std::fprintf(out, "%s\n", line.c_str());
      std::fclose(out);
    }
    std::string first;
    for (std::size_t i = 0; i < lines.size() && i < 10; ++i) first += lines[i] + "\n";
    return fmt::format("{} mismatches (inputs in {}); first:\n{}", count, file, first);
  }
};

// Every float32 bit pattern through encode's span entry point and through the oracle.
template <typename Oracle>
Mismatches compare_all_float32(const Format& f, const ConversionOptions& options, Oracle oracle) {
  constexpr std::size_t kChunk = 1 << 16;
  std::vector<float> in(kChunk);
  std::vector<Code> out(kChunk);
  Mismatches m;
  for (std::uint64_t high = 0; high < (std::uint64_t{1} << 32); high += kChunk) {
    for (std::size_t i = 0; i < kChunk; ++i) in[i] = std::bit_cast<float>(std::uint32_t(high + i));
    encode(f, in, out, options, high);
    for (std::size_t i = 0; i < kChunk; ++i) {
      const Code expected = oracle(in[i]);
      ++m.checked;
      if (out[i] != expected)
        m.add(fmt::format("0x{:08x} ({}) ours 0x{:x} cuda 0x{:x}", std::uint32_t(high + i), in[i], out[i], expected));
    }
  }
  return m;
}

template <typename Oracle>
void check_all_float32(const std::string& name, const Format& f, const ConversionOptions& options, Oracle oracle) {
  const Mismatches m = compare_all_float32(f, options, oracle);
  INFO(m.report(name));
  fmt::print("{}: {} float32 inputs compared, {} mismatches\n", name, m.checked, m.count);
  CHECK(m.checked == (std::uint64_t{1} << 32));
  CHECK(m.count == 0);
}

std::uint16_t bits_of(__nv_bfloat16 h) { return std::bit_cast<std::uint16_t>(h); }
std::uint16_t bits_of(__half h) { return std::bit_cast<std::uint16_t>(h); }

const ConversionOptions kSaturate{.rounding = Rounding::nearest_even, .overflow = Overflow::saturate};
const ConversionOptions kToNan{.rounding = Rounding::nearest_even, .overflow = Overflow::nan};
const ConversionOptions kToInf{.rounding = Rounding::nearest_even, .overflow = Overflow::inf};

ConversionOptions with(Rounding r, Overflow o) { return {.rounding = r, .overflow = o}; }

}  // namespace

// ---- float32 -> format, all 2^32 inputs ----

TEST_CASE("e4m3 satfinite: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e4m3_satfinite", formats::e4m3, kSaturate,
                    [](float x) { return Code(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3)); });
}
TEST_CASE("e4m3 nosat: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e4m3_nosat", formats::e4m3, kToNan,
                    [](float x) { return Code(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3)); });
}
TEST_CASE("e5m2 satfinite: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e5m2_satfinite", formats::e5m2, kSaturate,
                    [](float x) { return Code(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2)); });
}
TEST_CASE("e5m2 nosat: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e5m2_nosat", formats::e5m2, kToInf,
                    [](float x) { return Code(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2)); });
}
TEST_CASE("e2m3 round to nearest: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e2m3_rn", formats::e2m3, kSaturate,
                    [](float x) { return Code(__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest)); });
}
TEST_CASE("e3m2 round to nearest: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e3m2_rn", formats::e3m2, kSaturate,
                    [](float x) { return Code(__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest)); });
}
TEST_CASE("e2m1 round to nearest: every float32", "[cuda-oracle][float32]") {
  check_all_float32("e2m1_rn", formats::e2m1, kSaturate,
                    [](float x) { return Code(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)); });
}
TEST_CASE("bf16 round to nearest: every float32", "[cuda-oracle][float32]") {
  check_all_float32("bf16_rn", formats::bf16, kToInf, [](float x) { return Code(bits_of(__float2bfloat16_rn(x))); });
}
TEST_CASE("bf16 toward zero: every float32", "[cuda-oracle][float32]") {
  check_all_float32("bf16_rz", formats::bf16, with(Rounding::toward_zero, Overflow::inf),
                    [](float x) { return Code(bits_of(__float2bfloat16_rz(x))); });
}
TEST_CASE("bf16 toward -inf: every float32", "[cuda-oracle][float32]") {
  check_all_float32("bf16_rd", formats::bf16, with(Rounding::toward_negative, Overflow::inf),
                    [](float x) { return Code(bits_of(__float2bfloat16_rd(x))); });
}
TEST_CASE("bf16 toward +inf: every float32", "[cuda-oracle][float32]") {
  check_all_float32("bf16_ru", formats::bf16, with(Rounding::toward_positive, Overflow::inf),
                    [](float x) { return Code(bits_of(__float2bfloat16_ru(x))); });
}
TEST_CASE("ue8m0 toward zero satfinite: every float32", "[cuda-oracle][float32]") {
  check_all_float32("ue8m0_rz_satfinite", formats::ue8m0, with(Rounding::toward_zero, Overflow::saturate),
                    [](float x) { return Code(__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero)); });
}
TEST_CASE("ue8m0 toward zero nosat: every float32", "[cuda-oracle][float32]") {
  check_all_float32("ue8m0_rz_nosat", formats::ue8m0, with(Rounding::toward_zero, Overflow::nan),
                    [](float x) { return Code(__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero)); });
}
TEST_CASE("ue8m0 toward +inf satfinite: every float32", "[cuda-oracle][float32]") {
  check_all_float32("ue8m0_rp_satfinite", formats::ue8m0, with(Rounding::toward_positive, Overflow::saturate),
                    [](float x) { return Code(__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)); });
}
TEST_CASE("ue8m0 toward +inf nosat: every float32", "[cuda-oracle][float32]") {
  check_all_float32("ue8m0_rp_nosat", formats::ue8m0, with(Rounding::toward_positive, Overflow::nan),
                    [](float x) { return Code(__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf)); });
}

// ---- decode: every code against CUDA's conversion to half / bfloat16 / float ----

namespace {
template <typename CudaDecode>
void check_every_code_decodes(const Format& f, CudaDecode cuda_decode) {
  int mismatches = 0;
  for (Code c = 0; c <= f.code_count_minus_one(); ++c) {
    const double ours = decode(f, c);
    const double theirs = cuda_decode(c);
    const bool same = (std::isnan(ours) && std::isnan(theirs)) ||
                      (ours == theirs && std::signbit(ours) == std::signbit(theirs));
    if (!same && ++mismatches <= 8) UNSCOPED_INFO(fmt::format("code {:#x}: ours {}, cuda {}", c, ours, theirs));
  }
  fmt::print("{} decode: {} codes compared, {} mismatches\n", format_name(f), std::uint64_t(f.code_count_minus_one()) + 1,
             mismatches);
  CHECK(mismatches == 0);
}
float half_bits_to_float(std::uint16_t bits) { return __half2float(std::bit_cast<__half>(bits)); }
float bf16_bits_to_float(std::uint16_t bits) { return __bfloat162float(std::bit_cast<__nv_bfloat16>(bits)); }
}  // namespace

TEST_CASE("every code decodes as CUDA decodes it", "[cuda-oracle][decode]") {
  check_every_code_decodes(formats::e4m3, [](Code c) {
    return half_bits_to_float(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E4M3).x);
  });
  check_every_code_decodes(formats::e5m2, [](Code c) {
    return half_bits_to_float(__nv_cvt_fp8_to_halfraw(__nv_fp8_storage_t(c), __NV_E5M2).x);
  });
  check_every_code_decodes(formats::e2m3, [](Code c) {
    return half_bits_to_float(__nv_cvt_fp6_to_halfraw(__nv_fp6_storage_t(c), __NV_E2M3).x);
  });
  check_every_code_decodes(formats::e3m2, [](Code c) {
    return half_bits_to_float(__nv_cvt_fp6_to_halfraw(__nv_fp6_storage_t(c), __NV_E3M2).x);
  });
  check_every_code_decodes(formats::e2m1, [](Code c) {
    return half_bits_to_float(__nv_cvt_fp4_to_halfraw(__nv_fp4_storage_t(c), __NV_E2M1).x);
  });
  check_every_code_decodes(formats::ue8m0, [](Code c) {
    return bf16_bits_to_float(__nv_cvt_e8m0_to_bf16raw(__nv_fp8_storage_t(c)).x);
  });
  check_every_code_decodes(formats::bf16, [](Code c) { return bf16_bits_to_float(std::uint16_t(c)); });
  check_every_code_decodes(formats::fp16, [](Code c) { return half_bits_to_float(std::uint16_t(c)); });
}

// ---- float64 -> format: the direct (single-rounding) double entry points ----
//
// 2^32 doubles would not be exhaustive anyway; instead: random doubles across and beyond each
// format's range, random bit patterns, and every value and midpoint of the format with its
// nearest doubles and small relative offsets (where rounding through float32 first would differ).
// CUDA's double functions keep the sign (and for e5m2 a payload bit) of a NaN input, where ours
// give the canonical NaN of the float32 path; for NaN inputs both must be NaN codes.

namespace {

std::vector<double> float64_samples(const Format& f) {
  std::vector<double> xs;
  std::mt19937_64 rng(20250101);
  const int low = f.min_exponent() - f.mantissa_bits - 4, high = max_exponent(f) + 4;
  std::uniform_int_distribution<int> exponent(low, high);
  for (int i = 0; i < (1 << 21); ++i) {
    const double significand = 1.0 + double(rng() >> 12) * 0x1p-52;
    xs.push_back((rng() & 1 ? -1.0 : 1.0) * std::ldexp(significand, exponent(rng)));
  }
  for (int i = 0; i < (1 << 20); ++i) xs.push_back(std::bit_cast<double>(rng()));
  const lowbit::testing::ReferenceFormat reference(f);
  std::vector<double> line = reference.values();
  line.push_back(reference.beyond());
  for (std::size_t i = 0; i + 1 < line.size(); ++i) {
    for (double v : {line[i], (line[i] + line[i + 1]) / 2}) {
      double up = v, down = v;
      for (int k = 0; k < 2; ++k) xs.push_back(up = std::nextafter(up, INFINITY)), xs.push_back(down = std::nextafter(down, -INFINITY));
      for (int shift : {-25, -26, -30, -45}) xs.push_back(v + std::ldexp(v, shift)), xs.push_back(v - std::ldexp(v, shift));
      xs.push_back(v);
    }
  }
  const std::size_t n = xs.size();
  for (std::size_t i = 0; i < n; ++i) xs.push_back(-xs[i]);
  for (double special : {0.0, -0.0, double(INFINITY), -double(INFINITY), double(NAN), -double(NAN)}) xs.push_back(special);
  return xs;
}

template <typename Oracle>
void check_float64(const std::string& name, const Format& f, const ConversionOptions& options, Oracle oracle) {
  Mismatches m;
  std::uint64_t nan_inputs = 0;
  for (double x : float64_samples(f)) {
    const Code ours = encode(f, x, options), theirs = oracle(x);
    ++m.checked;
    if (std::isnan(x) && f.has_nan()) {
      ++nan_inputs;
      if (!f.is_nan_code(ours) || !f.is_nan_code(theirs))
        m.add(fmt::format("{:a} (NaN) ours 0x{:x} cuda 0x{:x}: not both NaN", x, ours, theirs));
    } else if (ours != theirs) {
      m.add(fmt::format("{:a} ({}) ours 0x{:x} cuda 0x{:x}", x, x, ours, theirs));
    }
  }
  INFO(m.report(name));
  fmt::print("{}: {} float64 inputs ({} NaN) compared\n", name, m.checked, nan_inputs);
  CHECK(m.count == 0);
  CHECK(m.checked > 3'000'000);
}

}  // namespace

TEST_CASE("float64: e4m3 and e5m2, satfinite and nosat", "[cuda-oracle][float64]") {
  check_float64("e4m3_satfinite_f64", formats::e4m3, kSaturate,
                [](double x) { return Code(__nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E4M3)); });
  check_float64("e4m3_nosat_f64", formats::e4m3, kToNan,
                [](double x) { return Code(__nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E4M3)); });
  check_float64("e5m2_satfinite_f64", formats::e5m2, kSaturate,
                [](double x) { return Code(__nv_cvt_double_to_fp8(x, __NV_SATFINITE, __NV_E5M2)); });
  check_float64("e5m2_nosat_f64", formats::e5m2, kToInf,
                [](double x) { return Code(__nv_cvt_double_to_fp8(x, __NV_NOSAT, __NV_E5M2)); });
}

TEST_CASE("float64: e2m3, e3m2 and e2m1, to nearest and toward zero", "[cuda-oracle][float64]") {
  for (auto [rounding, cuda_rounding] : {std::pair{Rounding::nearest_even, cudaRoundNearest},
                                         std::pair{Rounding::toward_zero, cudaRoundZero}}) {
    const auto options = with(rounding, Overflow::saturate);
    const auto r = cuda_rounding;
    check_float64(fmt::format("e2m3_{}_f64", to_string(rounding)), formats::e2m3, options,
                  [r](double x) { return Code(__nv_cvt_double_to_fp6(x, __NV_E2M3, r)); });
    check_float64(fmt::format("e3m2_{}_f64", to_string(rounding)), formats::e3m2, options,
                  [r](double x) { return Code(__nv_cvt_double_to_fp6(x, __NV_E3M2, r)); });
    check_float64(fmt::format("e2m1_{}_f64", to_string(rounding)), formats::e2m1, options,
                  [r](double x) { return Code(__nv_cvt_double_to_fp4(x, __NV_E2M1, r)); });
  }
}

TEST_CASE("float64: ue8m0 toward zero and toward +inf, satfinite and nosat", "[cuda-oracle][float64]") {
  for (auto [rounding, cuda_rounding] : {std::pair{Rounding::toward_zero, cudaRoundZero},
                                         std::pair{Rounding::toward_positive, cudaRoundPosInf}})
    for (auto [overflow, saturation] : {std::pair{Overflow::saturate, __NV_SATFINITE}, std::pair{Overflow::nan, __NV_NOSAT}}) {
      const auto r = cuda_rounding;
      const auto s = saturation;
      check_float64(fmt::format("ue8m0_{}_{}_f64", to_string(rounding), to_string(overflow)), formats::ue8m0,
                    with(rounding, overflow), [r, s](double x) { return Code(__nv_cvt_double_to_e8m0(x, s, r)); });
    }
}

TEST_CASE("float64: bf16 and fp16 round to nearest", "[cuda-oracle][float64]") {
  check_float64("bf16_rn_f64", formats::bf16, kToInf, [](double x) { return Code(bits_of(__double2bfloat16(x))); });
  check_float64("fp16_rn_f64", formats::fp16, kToInf, [](double x) { return Code(bits_of(__double2half(x))); });
}

// ---- packed storage: the order of codes in CUDA's x2 types ----

TEST_CASE("pack puts codes where cuda_fp4.h, cuda_fp6.h and cuda_fp8.h x2 conversions do", "[cuda-oracle][pack]") {
  const auto packed = [](const Format& f, Code first, Code second) {
    std::vector<std::uint8_t> bytes(packed_bytes(f, 2));
    pack(f, std::vector<Code>{first, second}, bytes);
    std::uint32_t word = 0;
    for (std::size_t i = 0; i < bytes.size(); ++i) word |= std::uint32_t(bytes[i]) << (8 * i);
    return word;
  };
  int mismatches = 0;
  for (Code a = 0; a < 256; ++a)
    for (Code b = 0; b < 256; ++b) {
      const float2 e4m3_pair{float(decode(formats::e4m3, a)), float(decode(formats::e4m3, b))};
      if (!formats::e4m3.is_nan_code(a) && !formats::e4m3.is_nan_code(b))
        mismatches += packed(formats::e4m3, a, b) != __nv_cvt_float2_to_fp8x2(e4m3_pair, __NV_SATFINITE, __NV_E4M3);
      if (a < 64 && b < 64) {
        const float2 e2m3_pair{float(decode(formats::e2m3, a)), float(decode(formats::e2m3, b))};
        mismatches += packed(formats::e2m3, a, b) != __nv_cvt_float2_to_fp6x2(e2m3_pair, __NV_E2M3, cudaRoundNearest);
      }
      if (a < 16 && b < 16) {
        const float2 e2m1_pair{float(decode(formats::e2m1, a)), float(decode(formats::e2m1, b))};
        mismatches += packed(formats::e2m1, a, b) != __nv_cvt_float2_to_fp4x2(e2m1_pair, __NV_E2M1, cudaRoundNearest);
      }
    }
  CHECK(mismatches == 0);
}
