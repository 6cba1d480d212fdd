// Block-scaled formats, golden examples worked by hand.
// Sources: NVIDIA's NVFP4 description (E2M1 values, a UE4M3 scale amax/6 per 16 values, an
// optional FP32 per-tensor scale amax_tensor / (448 * 6)); OCP Microscaling Formats (MX) v1.0,
// §6.3 (shared exponent floor(log2(amax)) - emax_elem, E8M0 scale, elements clamped to the
// format's max); SageAttention3 §3.2 (s_P1 = rowmax / (448 * 6), then NVFP4 of P / s_P1).
#include <catch2/catch.hpp>

#include "emulation/quant/quantize.hpp"

using namespace lowbit;
using namespace lowbit::quant;

namespace {
MatrixF row_of(int cols, std::initializer_list<std::pair<int, float>> values) {
  MatrixF x = MatrixF::Zero(1, cols);
  for (auto [c, v] : values) x(0, c) = v;
  return x;
}
}  // namespace

TEST_CASE("NVFP4: scale amax/6 in UE4M3 (RNE), E2M1 elements (RNE, saturating)", "[microscale]") {
  const MatrixF x = row_of(32, {{0, 3.0f}, {1, -1.5f}, {2, 0.75f}, {3, 0.6f}, {4, 0.25f}, {5, 0.125f},
                                {6, -2.9f}, {7, 1.0f}, {16, 7.0f}, {17, 1.0f}, {18, -0.5f}});
  const QuantizedTensor q = quantize(x, presets::nvfp4(false));
  REQUIRE(q.group_count() == 2);
  // Block 0: amax 3 -> s = 0.5 = 0b0110'000; x / 0.5 = 6, -3, 1.5, 1.2, 0.5, 0.25, -5.8, 2.
  CHECK(q.scale_codes[0] == 0b0110'000);
  CHECK(q.scales[0] == 0.5f);
  CHECK(q.codes(0, 0) == 0b0'11'1);  // 6
  CHECK(q.codes(0, 1) == 0b1'10'1);  // -3
  CHECK(q.codes(0, 2) == 0b0'01'1);  // 1.5
  CHECK(q.codes(0, 3) == 0b0'01'0);  // 1.2 -> 1
  CHECK(q.codes(0, 4) == 0b0'00'1);  // 0.5
  CHECK(q.codes(0, 5) == 0b0'00'0);  // 0.25: tie between 0 and 0.5 -> even (0)
  CHECK(q.codes(0, 6) == 0b1'11'1);  // -5.8 -> -6
  CHECK(q.codes(0, 7) == 0b0'10'0);  // 2
  // Block 1: amax 7 -> 7/6 = 1.1667 -> UE4M3 1.125 = 0b0111'001 (rounded down), so 7 / 1.125
  // = 6.22 saturates to 6: NVFP4's RNE scale can clip the block maximum (dequantized 6.75).
  CHECK(q.scale_codes[1] == 0b0111'001);
  CHECK(q.scales[1] == 1.125f);
  CHECK(q.codes(0, 16) == 0b0'11'1);
  CHECK(dequantize(q)(0, 16) == 6.75f);
  CHECK(q.codes(0, 17) == 0b0'01'0);  // 0.889 -> 1
  CHECK(q.codes(0, 18) == 0b1'00'1);  // -0.444 -> -0.5
}

TEST_CASE("NVFP4 with the FP32 per-tensor scale amax / (448 * 6)", "[microscale]") {
  const MatrixF x = row_of(32, {{0, 7.0f}, {16, 1.0f}, {17, 0.25f}});
  const QuantizedTensor q = quantize(x, presets::nvfp4(true));
  const float s_o = 7.0f / 2688.0f;
  REQUIRE(q.outer_scales.size() == 1);
  CHECK(q.outer_scales[0] == s_o);
  // Block 0: x / s_o has amax 2688 -> block scale 448 = 0b1111'110, element 6.
  CHECK(q.scale_codes[0] == 0b1111'110);
  CHECK(q.codes(0, 0) == 0b0'11'1);
  // Block 1: amax 1 / s_o = 384 -> 64 = 0b1101'000; 0.25 / s_o / 64 = 1.5.
  CHECK(q.scale_codes[1] == 0b1101'000);
  CHECK(q.codes(0, 16) == 0b0'11'1);
  CHECK(q.codes(0, 17) == 0b0'01'1);
  // Dequantization order: (code * block scale) * tensor scale, in float32.
  CHECK(dequantize(q)(0, 17) == (1.5f * 64.0f) * s_o);
  CHECK(dequantize(q)(0, 0) == (6.0f * 448.0f) * s_o);
}

TEST_CASE("MXFP4: OCP floor scale, and the round-up and round-down variants", "[microscale]") {
  const MatrixF x = row_of(64, {{0, 5.0f}, {1, -0.7f}, {2, 1.25f}, {32, 7.0f}});
  const QuantizedTensor floor = quantize(x, presets::mx(formats::e2m1, ScaleRounding::ocp_floor));
  // Block 0: floor(log2 5) - emax(e2m1)=2 -> 2^0, E8M0 code 127.
  CHECK(floor.scale_codes[0] == 0b0111'1111);
  CHECK(floor.codes(0, 0) == 0b0'11'0);  // 5: tie between 4 and 6 -> 4 (even)
  CHECK(floor.codes(0, 1) == 0b1'00'1);  // -0.7 -> -0.5
  CHECK(floor.codes(0, 2) == 0b0'01'0);  // 1.25: tie between 1 and 1.5 -> 1 (even)
  // Block 1: amax 7 -> scale 2^0 again; 7 is clamped to 6 (the OCP floor scale may clip).
  CHECK(floor.scale_codes[1] == 0b0111'1111);
  CHECK(floor.codes(0, 32) == 0b0'11'1);
  CHECK(dequantize(floor)(0, 32) == 6.0f);

  // Round-up (cvt.rp.satfinite.ue8m0 of amax / 6): 7/6 -> 2, so nothing clips: 3.5 -> 4.
  const QuantizedTensor up = quantize(x, presets::mx(formats::e2m1, ScaleRounding::toward_positive));
  CHECK(up.scale_codes[0] == 0b0111'1111);  // 5/6 -> 1
  CHECK(up.scale_codes[1] == 0b1000'0000);  // 2
  CHECK(up.codes(0, 32) == 0b0'11'0);        // 3.5: tie between 3 and 4 -> 4 (even)
  CHECK(dequantize(up)(0, 32) == 8.0f);

  // Round-down of amax / 6 differs from the OCP floor: 5/6 -> 2^-1, so 5 / 0.5 = 10 clips to 6.
  const QuantizedTensor down = quantize(x, presets::mx(formats::e2m1, ScaleRounding::toward_zero));
  CHECK(down.scale_codes[0] == 0b0111'1110);
  CHECK(dequantize(down)(0, 0) == 3.0f);
}

TEST_CASE("MXFP8 and MXFP6: emax of the element format sets the OCP scale", "[microscale]") {
  const MatrixF x = row_of(32, {{0, 1000.0f}, {1, 3.0f}});
  const QuantizedTensor e4m3 = quantize(x, presets::mx(formats::e4m3));
  CHECK(e4m3.scale_codes[0] == 128);         // floor(log2 1000) = 9, emax 8 -> 2^1
  CHECK(e4m3.codes(0, 0) == 0b0'1111'110);   // 500 clamps to 448
  CHECK(e4m3.codes(0, 1) == 0b0'0111'100);   // 1.5
  const QuantizedTensor up = quantize(x, presets::mx(formats::e4m3, ScaleRounding::toward_positive));
  CHECK(up.scale_codes[0] == 129);           // 1000/448 = 2.23 -> 4
  CHECK(up.codes(0, 0) == 0b0'1111'000);     // 250 -> 256
  const QuantizedTensor e2m3 = quantize(row_of(32, {{0, 0.9f}}), presets::mx(formats::e2m3));
  CHECK(e2m3.scale_codes[0] == 124);         // floor(log2 0.9) = -1, emax 2 -> 2^-3
  CHECK(e2m3.codes(0, 0) == 0b0'11'110);     // 7.2 -> 7
}

TEST_CASE("user-defined block format: E3M2 elements, UE4M3 scales, blocks of 8", "[microscale]") {
  QuantSpec spec;
  spec.name = "custom";
  spec.element = format_from_string("e3m2");
  spec.grouping = grouping::microscale(8);
  spec.scale.format = formats::ue4m3;
  REQUIRE_FALSE(spec.validate());
  const MatrixF x = row_of(16, {{0, 2.8f}, {1, 0.1f}, {8, -28.0f}});
  const QuantizedTensor q = quantize(x, spec);
  CHECK(q.group_count() == 2);
  // Block 0: 2.8 / max(e3m2)=28 = 0.1 -> UE4M3 0.1015625 = 1.625 * 2^-4 = 0b0011'101.
  CHECK(q.scale_codes[0] == 0b0011'101);
  CHECK(q.codes(0, 0) == 0b0'111'11);  // 27.6 -> 28
  CHECK(q.codes(0, 1) == 0b0'011'00);  // 0.985 -> 1
  // Block 1: amax 28 -> scale 1 = 0b0111'000; -28 -> 0b1'111'11.
  CHECK(q.scale_codes[1] == 0b0111'000);
  CHECK(q.codes(0, 8) == 0b1'111'11);
}

TEST_CASE("SageAttention3 P: the two-level scale keeps the FP8 block scale precise", "[microscale]") {
  // One row of P: block 0 holds the row max 1, block 1 only small values.
  const MatrixF p = row_of(32, {{0, 1.0f}, {16, 0.01f}, {17, 0.004f}});
  const QuantizedTensor two = quantize(p, presets::sage3_p_two_level());
  const float s_p1 = 1.0f / 2688.0f;
  CHECK(two.outer_scales[0] == s_p1);
  CHECK(two.scale_codes[0] == 0b1111'110);  // 2688 / 6 = 448
  CHECK(two.scale_codes[1] == 0b1001'001);  // 26.88 / 6 = 4.48 -> 4.5 (0.4% off)
  CHECK(two.codes(0, 16) == 0b0'11'1);      // 26.88 / 4.5 = 5.97 -> 6
  CHECK(two.codes(0, 17) == 0b0'10'0);      // 10.75 / 4.5 = 2.39 -> 2

  const QuantizedTensor direct = quantize(p, presets::sage3_p_direct());
  CHECK(direct.outer_scales.empty());
  CHECK(direct.scale_codes[0] == 0b0100'011);  // 1/6 = 0.1667 -> 0.171875
  CHECK(direct.scale_codes[1] == 0b0000'001);  // 0.01/6 = 0.00167 -> 2^-9 = 0.00195 (17% off)
  CHECK(direct.codes(0, 16) == 0b0'11'1);      // 5.12 -> 6
  const double two_scale_error = std::fabs(4.5 - 0.01 / s_p1 / 6) / (0.01 / s_p1 / 6);
  const double direct_scale_error = std::fabs(0x1p-9 - 0.01 / 6) / (0.01 / 6);
  CHECK(two_scale_error < 0.005);
  CHECK(direct_scale_error > 0.15);
}
