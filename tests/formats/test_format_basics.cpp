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
  CHECK(max_finite(formats::int8) == 127.0);
  CHECK(lowest_finite(formats::int8) == -128.0);
  CHECK(max_finite(formats::int4) == 7.0);
  CHECK(lowest_finite(formats::int4) == -8.0);
  CHECK(max_finite(formats::uint4) == 15.0);
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
