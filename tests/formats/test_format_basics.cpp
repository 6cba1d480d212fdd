// Golden constants of the presets, written in binary with their values (from the OCP FP8/MX
// specifications, IEEE 754 and the CUDA headers' documentation).
#include <catch2/catch.hpp>

#include <cmath>

#include "emulation/convert.hpp"
#include "emulation/format.hpp"

using namespace lowbit;

TEST_CASE("preset limits are derived from the records", "[format]") {
  CHECK(max_finite(formats::e4m3) == 448.0);            // 0b0'1111'110
  CHECK(formats::e4m3.max_finite_magnitude() == 0b0'1111'110);
  CHECK(min_positive(formats::e4m3) == std::ldexp(1.0, -9));  // 0b0'0000'001
  CHECK(min_normal(formats::e4m3) == std::ldexp(1.0, -6));    // 0b0'0001'000
  CHECK(max_finite(formats::e5m2) == 57344.0);          // 0b0'11110'11
  CHECK(min_positive(formats::e5m2) == std::ldexp(1.0, -16));
  CHECK(max_finite(formats::e4m3fnuz) == 240.0);        // 0b0'1111'111
  CHECK(max_finite(formats::e5m2fnuz) == 57344.0);      // 0b0'11111'11
  CHECK(max_finite(formats::e3m4) == 15.5);             // 0b0'110'1111
  CHECK(max_finite(formats::e2m3) == 7.5);              // 0b0'11'111
  CHECK(max_finite(formats::e3m2) == 28.0);             // 0b0'111'11
  CHECK(max_finite(formats::e2m1) == 6.0);              // 0b0'11'1
  CHECK(min_positive(formats::e2m1) == 0.5);            // 0b0'00'1
  CHECK(max_finite(formats::ue8m0) == std::ldexp(1.0, 127));   // 0b1111'1110
  CHECK(decode(formats::ue8m0, 0) == std::ldexp(1.0, -127));   // 0b0000'0000: no zero
  CHECK(max_finite(formats::ue4m3) == 448.0);
  CHECK(max_finite(formats::fp16) == 65504.0);
  CHECK(max_finite(formats::bf16) == 0x1.FEp127);
  CHECK(max_finite(formats::fp32) == 0x1.FFFFFEp127);
  CHECK(max_finite(formats::e8m13) == 0x1.FFF8p127);
  CHECK(max_finite(formats::int8) == 127.0);      // 0b0111'1111
  CHECK(lowest_finite(formats::int8) == -128.0);  // 0b1000'0000
  CHECK(decode(formats::int8, 0b1000'0000) == -128.0);
  CHECK(max_finite(formats::int4) == 7.0);        // 0b0111
  CHECK(lowest_finite(formats::int4) == -8.0);    // 0b1000
  CHECK(decode(formats::int4, 0b1000) == -8.0);
  CHECK(max_finite(formats::uint8) == 255.0);     // 0b1111'1111
  CHECK(lowest_finite(formats::uint8) == 0.0);
  CHECK(max_finite(formats::uint4) == 15.0);      // 0b1111
  CHECK(lowest_finite(formats::uint4) == 0.0);
}

TEST_CASE("special codes", "[format]") {
  CHECK(formats::e4m3.is_nan_code(0b0'1111'111));
  CHECK(formats::e4m3.is_nan_code(0b1'1111'111));
  CHECK_FALSE(formats::e4m3.is_nan_code(0b0'1111'110));
  CHECK(formats::e5m2.is_inf_code(0b0'11111'00));
  CHECK(formats::e5m2.is_nan_code(0b1'11111'01));
  CHECK(formats::e4m3fnuz.is_nan_code(0b1'0000'000));
  CHECK_FALSE(formats::e4m3fnuz.is_nan_code(0b0'0000'000));
  CHECK(formats::ue8m0.is_nan_code(0b1111'1111));
  CHECK(std::isnan(decode(formats::ue4m3, 0b1111'111)));
}

TEST_CASE("rounding at the e4m3 overflow boundary follows the unbounded-exponent rule", "[convert]") {
  ConversionOptions nosat{.overflow = Overflow::nan};
  CHECK(encode(formats::e4m3, 464.0, nosat) == 0b0'1111'110);  // tie -> even 448
  CHECK(encode(formats::e4m3, 465.0, nosat) == 0b0'1111'111);  // NaN
  CHECK(encode(formats::e4m3, -465.0, nosat) == 0b1'1111'111);
  CHECK(encode(formats::e4m3, 465.0) == 0b0'1111'110);          // saturate
  ConversionOptions toward_zero{.rounding = Rounding::toward_zero, .overflow = Overflow::nan};
  CHECK(encode(formats::e4m3, 1000.0, toward_zero) == 0b0'1111'110);
}

TEST_CASE("formats whose negative-zero code is NaN encode -0 and negative underflow as +0", "[convert]") {
  CHECK(encode(formats::e4m3fnuz, -0.0) == 0b0'0000'000);
  CHECK(encode(formats::e4m3fnuz, -1e-30) == 0b0'0000'000);
  CHECK(encode(formats::e5m2fnuz, -0x1p-18) == 0b0'00000'00);  // half of min subnormal 2^-17: tie to +0
  const ConversionOptions down{.rounding = Rounding::toward_negative};
  CHECK(encode(formats::e5m2fnuz, -1e-30, down) == 0b1'00000'01);  // -2^-17
  const ConversionOptions up{.rounding = Rounding::toward_positive};
  CHECK(encode(formats::e4m3fnuz, -1e-30, up) == 0b0'0000'000);
  CHECK(encode(format_from_string("p3109:k=8:p=3"), -0.0) == 0b0'00000'00);
  CHECK(encode(formats::e4m3, -0.0) == 0b1'0000'000);  // formats with -0 keep it
}

TEST_CASE("ties and round-to-odd of formats without mantissa bits go by the code's last bit", "[convert]") {
  // ue8m0: 2^e has code e + 127. A tie between 2^e and 2^(e+1) goes to the even code.
  CHECK(encode(formats::ue8m0, 1.5) == 0b1000'0000);  // 1 (code 127, odd) or 2 (128): 2
  CHECK(encode(formats::ue8m0, 3.0) == 0b1000'0000);  // 2 (128) or 4 (129): 2
  CHECK(encode(formats::ue8m0, 6.0) == 0b1000'0010);  // 4 (129) or 8 (130): 8
  const ConversionOptions odd{.rounding = Rounding::odd};
  CHECK(encode(formats::ue8m0, 3.0, odd) == 0b1000'0001);  // 2 (128, even) is left for 4 (129)
  CHECK(encode(formats::ue8m0, 5.0, odd) == 0b1000'0001);  // 4 (129, odd) is kept
  // P3109 K8P1 (bias 64); the values gfloat 0.5.2's round_float gives.
  const Format k8p1 = format_from_string("p3109:k=8:p=1");
  CHECK(decode(k8p1, encode(k8p1, 0.75)) == 1.0);
  CHECK(decode(k8p1, encode(k8p1, 1.5)) == 1.0);
  CHECK(decode(k8p1, encode(k8p1, 3.0)) == 4.0);
  CHECK(decode(k8p1, encode(k8p1, 6.0)) == 4.0);
  CHECK(decode(k8p1, encode(k8p1, 12.0)) == 16.0);
}

TEST_CASE("32-bit formats whose magnitude fills all 32 bits", "[format]") {
  const Format uint32 = format_from_string("uint32");
  CHECK(uint32.magnitude_mask() == 0xFFFF'FFFFu);
  CHECK(max_finite(uint32) == 4294967295.0);
  CHECK(encode(uint32, 4e9) == 4'000'000'000u);
  CHECK(encode(uint32, 1e20) == 0xFFFF'FFFFu);  // saturates
  const Format int32 = format_from_string("int32");
  CHECK(max_finite(int32) == 2147483647.0);
  CHECK(lowest_finite(int32) == -2147483648.0);
  CHECK(encode(int32, -3e9) == 0x8000'0000u);
  // Unsigned, 8 exponent and 24 mantissa bits, IEEE specials: NaN is 0xFF'FFFFFF.
  const Format ue8m24 = format_from_string("ue8m24");
  CHECK(ue8m24.is_nan_code(0xFFFF'FFFFu));
  CHECK(max_finite(ue8m24) == 0x1.FFFFFFp127);
  CHECK(encode(ue8m24, 1.0) == 0x7F00'0000u);  // 0b0111'1111'0000...
}

TEST_CASE("P3109 K8P4 and K8P3 finite are the fnuz formats", "[format]") {
  // Same records, so the ml_dtypes cross-checks of float8_e4m3fnuz / e5m2fnuz cover them.
  CHECK(format_from_string("p3109:k=8:p=4:finite") == formats::e4m3fnuz);
  CHECK(format_from_string("p3109:k=8:p=3:finite") == formats::e5m2fnuz);
  CHECK(format_name(format_from_string("p3109:k=8:p=4:finite")) == "e4m3fnuz");
}
