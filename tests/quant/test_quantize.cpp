// Every granularity: dequantize(quantize(x)) within half a step of x per element, and the fast
// quantizer bit for bit equal to the plain element-by-element reference.
#include <catch2/catch.hpp>
#include <bit>

#include <cmath>
#include <random>

#include "emulation/quant/quantize.hpp"

using namespace lowbit;
using namespace lowbit::quant;

namespace {

MatrixF random_tensor(int rows, int cols, std::uint64_t seed, float spread = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  MatrixF x(rows, cols);
  for (int r = 0; r < rows; ++r) {
    const float row_scale = std::exp(spread * 0.3f * normal(rng));
    for (int c = 0; c < cols; ++c) x(r, c) = row_scale * normal(rng) * (c % 17 == 3 ? 8.0f : 1.0f);
  }
  return x;
}

std::vector<Grouping> all_groupings() {
  const ThreadTiling mma{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64};
  const ThreadTiling wg{mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64};
  return {grouping::per_tensor(),
          grouping::per_block(128),
          grouping::per_block(64),
          grouping::per_token(),
          grouping::per_channel(),
          grouping::per_channel_block(64),
          grouping::per_thread(mma, Operand::q),
          grouping::per_thread(mma, Operand::k),
          grouping::per_warp(mma, Operand::q),
          grouping::per_warp(wg, Operand::q),
          grouping::per_thread(wg, Operand::q),
          grouping::per_thread(wg, Operand::k),
          grouping::microscale(16),
          grouping::microscale(32)};
}

void require_identical(const QuantizedTensor& a, const QuantizedTensor& b) {
  REQUIRE(a.padded_rows == b.padded_rows);
  REQUIRE(a.padded_cols == b.padded_cols);
  CHECK(a.scale_codes == b.scale_codes);
  CHECK(a.outer_scales == b.outer_scales);
  std::size_t differing = 0;
  for (Eigen::Index i = 0; i < a.codes.size(); ++i) differing += a.codes.data()[i] != b.codes.data()[i];
  CHECK(differing == 0);
}

// |x - x'| <= half a step of the element format at x / s, times s, plus the float32 rounding of
// x / s and of the dequantizing product (2^-24 relative each).
void check_half_step(const MatrixF& x, const QuantizedTensor& q) {
  const MatrixF d = dequantize(q);
  std::size_t violations = 0;
  for (int r = 0; r < q.rows; ++r)
    for (int c = 0; c < q.cols; ++c) {
      const double s = q.scales[std::size_t(q.group_of(r, c))];
      const double y = double(x(r, c)) / s;
      const double step = q.spec.element.is_integer() ? 1.0 : ulp(q.spec.element, y);
      const double bound = 0.5 * step * s + 0x1p-23 * (std::fabs(x(r, c)) + std::fabs(d(r, c)));
      violations += std::fabs(double(x(r, c)) - double(d(r, c))) > bound;
    }
  CHECK(violations == 0);
}

}  // namespace

TEST_CASE("INT8/INT4/FP8: every granularity round-trips within half a step", "[quantize]") {
  const MatrixF x = random_tensor(256, 128, 1);
  for (const Grouping& g : all_groupings())
    for (QuantSpec spec : {presets::int8(g), presets::int4(g), presets::fp8(formats::e4m3, g),
                           presets::fp8(formats::e5m2, g)}) {
      INFO(spec.name);
      const QuantizedTensor q = quantize(x, spec);
      check_half_step(x, q);
      // amax maps to the target: some element of the tensor reaches the largest code.
      double max_code = 0;
      for (Eigen::Index i = 0; i < q.codes.size(); ++i)
        max_code = std::max(max_code, std::fabs(decode(spec.element, q.codes.data()[i])));
      CHECK(max_code == max_finite(spec.element));
    }
}

TEST_CASE("scale = amax / 127, amax / 7, amax / 448, amax / 57344 in float32", "[quantize]") {
  MatrixF x(2, 4);
  x << 1.0f, -3.5f, 0.25f, 2.0f,  //
      0.1f, 0.2f, -0.3f, 0.05f;
  const auto per_token = grouping::per_token();
  CHECK(quantize(x, presets::int8(per_token)).scales[0] == 3.5f / 127.0f);
  CHECK(quantize(x, presets::int4(per_token)).scales[1] == 0.3f / 7.0f);
  CHECK(quantize(x, presets::fp8(formats::e4m3, per_token)).scales[0] == 3.5f / 448.0f);
  CHECK(quantize(x, presets::fp8(formats::e5m2, per_token)).scales[0] == 3.5f / 57344.0f);
  // INT4 codes of row 0: x / (3.5/7) = 2, -7, 0.5, 4 -> RNE 2, -7, 0 (tie to even), 4.
  const QuantizedTensor q = quantize(x, presets::int4(per_token));
  CHECK(q.codes(0, 0) == 0b0010);
  CHECK(q.codes(0, 1) == 0b1001);  // -7 in 4-bit two's complement
  CHECK(q.codes(0, 2) == 0b0000);
  CHECK(q.codes(0, 3) == 0b0100);
  // The rounding mode is explicit: nearest-away sends the tie 0.5 to 1.
  QuantSpec away = presets::int4(per_token);
  away.conversion.rounding = Rounding::nearest_away;
  CHECK(quantize(x, away).codes(0, 2) == 0b0001);
}

TEST_CASE("P with SageAttention2's static scale 1/448 in E4M3", "[quantize]") {
  MatrixF p(1, 4);
  p << 1.0f, 0.5f, 0.0f, 0.001f;
  const QuantizedTensor q = quantize(p, presets::fp8_static(formats::e4m3, 1.0 / 448, grouping::per_block(64)));
  CHECK(q.scales[0] == float(1.0 / 448));
  CHECK(q.codes(0, 0) == 0b0'1111'110);  // 448
  CHECK(q.codes(0, 1) == 0b0'1110'110);  // 224
  CHECK(q.codes(0, 2) == 0);
  CHECK(q.codes(0, 3) == 0b0'0101'110);  // 0.448 -> 0.4375 (step 2^-5 in [0.25, 0.5))
}

TEST_CASE("the fast quantizer equals the element-by-element reference, bit for bit", "[quantize][differential]") {
  int cases = 0;
  QuantizedTensor reused;
  for (std::uint64_t seed : {2u, 3u})
    for (const Grouping& g : all_groupings()) {
      std::vector<QuantSpec> specs{presets::int8(g), presets::int4(g), presets::fp8(formats::e4m3, g),
                                   presets::fp8(formats::e5m2, g), presets::fp8_static(formats::e4m3, 1.0 / 448, g)};
      QuantSpec stochastic = presets::int4(g);
      stochastic.conversion = {.rounding = Rounding::stochastic, .random_bits = 8, .seed = seed};
      QuantSpec reciprocal = presets::int8(g);
      reciprocal.multiply_by_reciprocal = true;
      QuantSpec fp4 = presets::nvfp4(false);
      fp4.grouping = g;
      QuantSpec fp4_outer = fp4;
      fp4_outer.outer = OuterScale::per_row;
      QuantSpec mx_up = presets::mx(formats::e2m1, ScaleRounding::toward_positive);
      mx_up.grouping = g;
      QuantSpec triton = presets::int8(g);  // SageAttention2's Q, K quantizer
      triton.arithmetic = Arithmetic::triton_div_full;
      triton.scale.epsilon = 1e-7f;
      triton.conversion.rounding = Rounding::toward_zero;
      QuantSpec fast_math = presets::fp8(formats::e4m3, g);  // its V quantizer
      fast_math.arithmetic = Arithmetic::cuda_fast_math;
      specs.insert(specs.end(), {stochastic, reciprocal, fp4, fp4_outer, mx_up, triton, fast_math});
      for (const QuantSpec& spec : specs) {
        INFO(spec.name << " seed " << seed);
        const MatrixF x = random_tensor(seed == 2 ? 200 : 130, 100, seed);  // ragged: padded for most groupings
        const QuantizedTensor expect = quantize_reference(x, spec);
        require_identical(quantize(x, spec), expect);
        quantize_into(x, spec, reused, "x");  // storage left from other specs and shapes
        require_identical(reused, expect);
        ++cases;
      }
    }
  // Exact ties: multiples of half a step, where RNE must pick the even code.
  MatrixF ties(64, 64);
  for (int i = 0; i < ties.size(); ++i) ties.data()[i] = float((i % 29) - 14) * 0.5f;
  for (const Grouping& g : all_groupings()) {
    require_identical(quantize(ties, presets::int4(g)), quantize_reference(ties, presets::int4(g)));
    ++cases;
  }
  CHECK(cases == 2 * 14 * 12 + 14);
}

TEST_CASE("SageAttention2's quantizers: Triton's div.full and add-half truncation, the fused fast-math FP8", "[quantize]") {
  // The constants of the Triton kernel's SASS (quant_per_thread.py built for sm_90): amax / 127. + 1e-7
  // is one FFMA by 0x3c010204 plus 0x33d6bf95.
  CHECK(std::bit_cast<std::uint32_t>(float(1.0 / 127)) == 0x3c010204u);  // 0.0078740157
  CHECK(std::bit_cast<std::uint32_t>(1e-7f) == 0x33d6bf95u);              // 1.0000000117e-07
  QuantSpec triton = presets::int8(grouping::per_token());
  triton.arithmetic = Arithmetic::triton_div_full;
  triton.scale.epsilon = 1e-7f;
  triton.conversion.rounding = Rounding::toward_zero;
  REQUIRE_FALSE(triton.validate());
  MatrixF x(2, 4);
  x << 127.0f, std::bit_cast<float>(0x3f000001u), -2.5f, 0.0f,  // amax 127: s = fl(0.99999999627 + 1e-7) = 1 + 2^-23
      0.0f, 0.0f, 0.0f, 0.0f;                                     // amax 0: s = 1e-7, codes 0
  const QuantizedTensor q = quantize(x, triton);
  CHECK(std::bit_cast<std::uint32_t>(q.scales[0]) == 0x3f800001u);
  CHECK(q.scales[1] == 1e-7f);
  // rcp(1 + 2^-23) = 1 - 2^-23 (MUFU.RCP); 127 (1 - 2^-23) + 0.5 truncates to 127.
  CHECK(decode(formats::int8, q.codes(0, 0)) == 127);
  // (0.5 + 2^-24)(1 - 2^-23) rounds to 0.5, + 0.5 = 1: code 1, where x / s = 0.49999997 rounds to 0.
  CHECK(decode(formats::int8, q.codes(0, 1)) == 1);
  CHECK(std::nearbyint(double(std::bit_cast<float>(0x3f000001u)) / double(q.scales[0])) == 0.0);
  // -2.5 (1 - 2^-23) - 0.5 = -2.9999998: truncated to -2 (away from zero from -2.4999998).
  CHECK(decode(formats::int8, q.codes(0, 2)) == -2);
  CHECK(q.codes.row(1).isZero());

  // V: s = fl(amax fl(1 / 448)), values times fl(448 rcp(amax)); an all-zero channel has s = 0 and
  // 0 * inf = NaN codes, as the GPU's fast-math kernel writes them.
  QuantSpec fast_math = presets::fp8(formats::e4m3, grouping::per_channel());
  fast_math.arithmetic = Arithmetic::cuda_fast_math;
  REQUIRE_FALSE(fast_math.validate());
  MatrixF v(2, 2);
  v << 448.0f, 0.0f, -224.0f, 0.0f;
  const QuantizedTensor qv = quantize(v, fast_math);
  CHECK(qv.scales[0] == 448.0f * float(1.0 / 448));
  CHECK(qv.codes(0, 0) == 0b0'1111'110);  // 448 (448 rcp(448) rounds to 1)
  CHECK(qv.codes(1, 0) == 0b1'1110'110);  // -224
  CHECK(qv.scales[1] == 0.0f);
  CHECK(qv.codes(0, 1) == 0x7f);  // NaN
  CHECK(qv.codes(1, 1) == 0x7f);

  QuantSpec bad = triton;
  bad.conversion.rounding = Rounding::nearest_even;
  CHECK(bad.validate().value_or("").find("truncates") != std::string::npos);
  bad = fast_math;
  bad.scale.epsilon = 1e-7f;
  CHECK(bad.validate().value_or("").find("epsilon") != std::string::npos);
}

TEST_CASE("scaled_matmul: exact integer sums, then float(acc) * float(s_q * s_k)", "[quantize]") {
  const ThreadTiling t{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64};
  const MatrixF q = random_tensor(128, 128, 5), k = random_tensor(64, 128, 6);
  const QuantizedTensor qq = quantize(q, presets::int4(grouping::per_thread(t, Operand::q)));
  const QuantizedTensor kq = quantize(k, presets::int4(grouping::per_thread(t, Operand::k)));
  const MatrixF s = scaled_matmul(qq, kq);
  std::size_t mismatches = 0;
  for (int i = 0; i < 128; ++i)
    for (int j = 0; j < 64; ++j) {
      std::int64_t acc = 0;  // the mma's s32 sum, independently
      for (int c = 0; c < 128; ++c)
        acc += std::int64_t(decode(formats::int4, qq.codes(i, c))) * std::int64_t(decode(formats::int4, kq.codes(j, c)));
      const float scale_product = qq.scales[std::size_t(qq.group_of(i, 0))] * kq.scales[std::size_t(kq.group_of(j, 0))];
      mismatches += s(i, j) != float(acc) * scale_product;
    }
  CHECK(mismatches == 0);
  CHECK_THROWS_WITH(scaled_matmul(quantize(q, presets::nvfp4(false)), kq), Catch::Contains("not row-scaled"));
  // FP8 sums are the tensor core's (FP22 on Hopper), never exact: refused, pointing to mma::gemm.
  const QuantizedTensor q8 = quantize(q, presets::fp8(formats::e4m3, grouping::per_token()));
  CHECK_THROWS_WITH(scaled_matmul(q8, q8), Catch::Contains("holds e4m3 codes") && Catch::Contains("mma::gemm"));
  CHECK_THROWS_WITH(scaled_matmul(qq, q8), Catch::Contains("holds e4m3 codes"));
  // Different column padding (k64 instructions vs none) with d = 96: the zeros do not count.
  const MatrixF q96 = q.leftCols(96), k96 = k.leftCols(96);
  const QuantizedTensor a = quantize(q96, presets::int4(grouping::per_thread(t, Operand::q)));
  const QuantizedTensor b = quantize(k96, presets::int4(grouping::per_token()));
  REQUIRE(a.padded_cols == 128);
  REQUIRE(b.padded_cols == 96);
  const MatrixF s96 = scaled_matmul(a, b);
  const MatrixD exact = dequantize(a).cast<double>() * dequantize(b).cast<double>().transpose();
  CHECK((s96.cast<double>() - exact).cwiseAbs().maxCoeff() <= 1e-5 * exact.cwiseAbs().maxCoeff());
  CHECK_THROWS_WITH(scaled_matmul(a, kq), Catch::Contains("reduction lengths differ (96 vs 128)"));
}

TEST_CASE("NVFP4 on random data: half a step of the block's grid, or exactly +-6 s above 6", "[quantize]") {
  // The UE4M3 scale is amax/6 rounded to nearest even, so about half the blocks get a scale
  // below amax/6: their largest elements have |x / s| > 6 and saturate to the code 6.
  const MatrixF x = random_tensor(64, 256, 9);
  for (const QuantSpec& spec : {presets::nvfp4(false), presets::nvfp4(true), presets::sage3_p_two_level()}) {
    INFO(spec.name);
    const QuantizedTensor q = quantize(x, spec);
    const MatrixF d = dequantize(q);
    std::size_t clipped = 0, violations = 0;
    for (int r = 0; r < x.rows(); ++r)
      for (int c = 0; c < x.cols(); ++c) {
        const float so = q.outer_of(r), s = q.scales[std::size_t(q.group_of(r, c))];
        const float y = (spec.outer == OuterScale::none ? x(r, c) : x(r, c) / so) / s;  // float32, as quantized
        if (std::fabs(y) > 6.0f) {
          ++clipped;
          violations += d(r, c) != std::copysign((6.0f * s) * so, x(r, c));
        } else {
          // Half a step of E2M1 at y, in units of the block's scale; plus the float32 roundings of
          // x / s_o, of / s and of the product with s_o (2^-24 relative each).
          const double bound = 0.5 * ulp(formats::e2m1, y) * s * so + 0x1p-22 * (std::fabs(x(r, c)) + std::fabs(d(r, c)));
          violations += std::fabs(double(x(r, c)) - double(d(r, c))) > bound;
        }
      }
    CHECK(violations == 0);
    CHECK(clipped > 0);
  }
}

TEST_CASE("block-scaled: MX round-up stays within half a step, the OCP floor clips only above max", "[quantize]") {
  const MatrixF x = random_tensor(64, 256, 8);
  for (const Format& e : {formats::e2m1, formats::e4m3, formats::e5m2, formats::e2m3, formats::e3m2}) {
    INFO(format_name(e));
    check_half_step(x, quantize(x, presets::mx(e, ScaleRounding::toward_positive)));
    const QuantizedTensor floor = quantize(x, presets::mx(e, ScaleRounding::ocp_floor));
    const MatrixF d = dequantize(floor);
    std::size_t clipped = 0, violations = 0;
    for (int r = 0; r < x.rows(); ++r)
      for (int c = 0; c < x.cols(); ++c) {
        const double s = floor.scales[std::size_t(floor.group_of(r, c))];
        const double y = double(x(r, c)) / s;
        if (std::fabs(y) > max_finite(e)) {  // clamped to +-max, as OCP MX specifies
          ++clipped;
          violations += std::fabs(d(r, c)) != float(max_finite(e) * s);
        } else {
          violations += std::fabs(double(x(r, c)) - d(r, c)) > 0.5 * ulp(e, y) * s + 0x1p-23 * std::fabs(x(r, c));
        }
      }
    CHECK(violations == 0);
    if (e == formats::e2m1) CHECK(clipped > 0);  // amax/2^floor(log2 amax) in [4, 8) exceeds 6 often
  }
}
