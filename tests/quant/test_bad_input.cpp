// Bad input: NaN/Inf reported (count and first index) and refused unless propagation is asked
// for, then carried per the formats' rules (emulation/quant/quantize.hpp); ragged shapes padded
// explicitly and never truncated; impossible specs and files named.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "emulation/quant/quantize.hpp"
#include "numerics/npy.hpp"
#include "numerics/synthetic.hpp"
#include "tensors.hpp"

using namespace lowbit;
using namespace lowbit::quant;

namespace {
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("lowbit_test_" + std::to_string(::getpid()) + "_" + name)).string();
}
}  // namespace

TEST_CASE("NaN and Inf are counted, located and refused by default", "[bad-input]") {
  MatrixF x = MatrixF::Ones(4, 8);
  x(2, 3) = kNaN;
  x(3, 1) = -kInf;
  x(3, 7) = kNaN;
  for (auto quantizer : {&quantize, &quantize_reference})
    CHECK_THROWS_WITH(quantizer(x, presets::int4(grouping::per_token()), "Q"),
                      Catch::Contains("Q: 3 non-finite values (2 NaN, 1 Inf), the first at [2, 3] (NaN)"));
}

TEST_CASE("an unsigned element format refuses negative values instead of clipping them", "[bad-input]") {
  QuantSpec s = presets::int8(grouping::per_channel());
  s.element = formats::uint4;
  MatrixF x = MatrixF::Ones(4, 8);
  x(1, 6) = -0.25f;
  x(3, 0) = -3.0f;
  for (auto quantizer : {&quantize, &quantize_reference})
    CHECK_THROWS_WITH(quantizer(x, s, "V"), Catch::Contains("V: 2 negative values, the first at [1, 6] (-0.25") &&
                                                Catch::Contains("unsigned uint4 cannot hold"));
  // Non-negative data (P, or -0) fits: 1 is the channel's amax, code 15.
  x(1, 6) = 0.0f;
  x(3, 0) = -0.0f;
  for (auto quantizer : {&quantize, &quantize_reference}) {
    const QuantizedTensor q = quantizer(x, s, "V");
    CHECK(q.codes(0, 0) == 15);
    CHECK(q.codes(1, 6) == 0);
    CHECK(q.codes(3, 0) == 0);
  }
}

namespace {
QuantSpec propagating(QuantSpec spec) {
  spec.nonfinite = NonFinitePolicy::propagate;
  return spec;
}

// quantize() and the element-by-element reference agree, and the report is the input's.
QuantizedTensor quantize_both(const MatrixF& x, const QuantSpec& spec) {
  const QuantizedTensor q = quantize(x, spec), reference = quantize_reference(x, spec);
  CHECK(q.codes == reference.codes);
  CHECK(q.scale_codes == reference.scale_codes);
  CHECK(q.outer_scales == reference.outer_scales);
  CHECK(q.nonfinite.count() == reference.nonfinite.count());
  CHECK(q.nonfinite.first_index == reference.nonfinite.first_index);
  return q;
}

bool all_nan(const MatrixF& m) { return m.array().isNaN().all(); }
}  // namespace

TEST_CASE("propagate, integers: no NaN code, so the group's fp32 scale is NaN and the group is NaN", "[bad-input]") {
  MatrixF x(3, 4);
  x << 1.0f, kNaN, -3.5f, 0.5f,  //
      1.0f, kInf, 2.0f, 0.0f,    //
      0.7f, -1.4f, 0.35f, 0.0f;
  const QuantizedTensor q = quantize_both(x, propagating(presets::int4(grouping::per_token())));
  CHECK(q.nonfinite.nan_count == 1);
  CHECK(q.nonfinite.inf_count == 1);
  CHECK(q.nonfinite.first_index == 1);
  CHECK(std::isnan(q.scales[0]));
  CHECK(std::isnan(q.scales[1]));
  for (int c = 0; c < 4; ++c) CHECK((q.codes(0, c) == 0 && q.codes(1, c) == 0));
  const MatrixF d = dequantize(q);
  CHECK(all_nan(d.topRows(2)));  // the finite neighbours too: the scale is their only carrier
  // Row 2 is quantized as if the others were absent: 1.4 / 7 = 0.2, codes 3.5, -7, 1.75 -> 4, -7, 2.
  CHECK(q.scales[2] == 1.4f / 7.0f);
  CHECK(d(2, 0) == 4 * (1.4f / 7.0f));
  CHECK(d(2, 1) == -7 * (1.4f / 7.0f));
  CHECK(d(2, 2) == 2 * (1.4f / 7.0f));
  CHECK(d(2, 3) == 0.0f);
  // Per tensor, one Inf takes the whole tensor.
  MatrixF y = MatrixF::Ones(4, 8);
  y(3, 7) = -kInf;
  CHECK(all_nan(dequantize(quantize_both(y, propagating(presets::int8(grouping::per_tensor()))))));
}

TEST_CASE("propagate, FP8: NaN and Inf stay in their elements, the scale is the finite values'", "[bad-input]") {
  MatrixF x(2, 4);
  x << 1.0f, kNaN, -3.5f, 0.5f,  //
      1.0f, kInf, -kInf, 0.0f;
  // E4M3 has NaN (S.1111.111) but no Inf: Inf becomes NaN, as OFP8's non-saturating conversion
  // does, although the spec's conversion saturates finite values.
  const QuantizedTensor e4m3 = quantize_both(x, propagating(presets::fp8(formats::e4m3, grouping::per_token())));
  REQUIRE(e4m3.spec.conversion.overflow == Overflow::saturate);
  CHECK(e4m3.scales[0] == 3.5f / 448.0f);  // = 2^-7
  CHECK(e4m3.codes(0, 1) == 0b0'1111'111);
  CHECK(e4m3.codes(1, 1) == 0b0'1111'111);
  CHECK(e4m3.codes(1, 2) == 0b1'1111'111);
  const MatrixF d = dequantize(e4m3);
  CHECK(d(0, 0) == 1.0f);
  CHECK(std::isnan(d(0, 1)));
  CHECK(d(0, 2) == -3.5f);
  CHECK(d(0, 3) == 0.5f);
  CHECK(e4m3.scales[1] == 1.0f / 448.0f);
  CHECK(d(1, 0) == float(decode(formats::e4m3, encode(formats::e4m3, 448.0))) * (1.0f / 448.0f));
  CHECK((std::isnan(d(1, 1)) && std::isnan(d(1, 2))));
  // E5M2 has both: +-Inf codes 0.11111.00 and 1.11111.00, dequantized +-Inf.
  const QuantizedTensor e5m2 = quantize_both(x, propagating(presets::fp8(formats::e5m2, grouping::per_token())));
  CHECK(e5m2.codes(1, 1) == 0b0'11111'00);
  CHECK(e5m2.codes(1, 2) == 0b1'11111'00);
  const MatrixF d5 = dequantize(e5m2);
  CHECK(d5(1, 1) == kInf);
  CHECK(d5(1, 2) == -kInf);
  CHECK(std::isnan(d5(0, 1)));
  CHECK(d5(0, 2) == -3.5f);
}

TEST_CASE("propagate, MX: an FP4 block with NaN/Inf gets the E8M0 NaN scale 0xFF, FP8 elements keep theirs",
          "[bad-input]") {
  MatrixF x = test::normal_tensor(2, 64, 4);
  MatrixF clean = x;
  x(0, 40) = kNaN;  // block 1 of row 0
  x(1, 3) = kInf;   // block 0 of row 1
  clean(0, 40) = clean(1, 3) = 0;
  const QuantizedTensor fp4 = quantize_both(x, propagating(presets::mx(formats::e2m1)));
  CHECK(fp4.scale_codes[1] == 0xFF);
  CHECK(fp4.scale_codes[2] == 0xFF);
  const MatrixF d = dequantize(fp4), d_clean = dequantize(quantize(clean, presets::mx(formats::e2m1)));
  CHECK(all_nan(d.block(0, 32, 1, 32)));
  CHECK(all_nan(d.block(1, 0, 1, 32)));
  CHECK(d.block(0, 0, 1, 32) == d_clean.block(0, 0, 1, 32));  // the other blocks as without the bad values
  CHECK(d.block(1, 32, 1, 32) == d_clean.block(1, 32, 1, 32));
  for (const Format& e : {formats::e4m3, formats::e5m2}) {
    INFO(format_name(e));
    const QuantizedTensor fp8 = quantize_both(x, propagating(presets::mx(e)));
    const MatrixF d8 = dequantize(fp8);
    // The scale is the finite values' (as the clean block's); only the bad elements are non-finite.
    CHECK(fp8.scale_codes == quantize(clean, presets::mx(e)).scale_codes);
    CHECK(std::isnan(d8(0, 40)));
    CHECK((e.has_inf() ? d8(1, 3) == kInf : std::isnan(d8(1, 3))));
    CHECK(d8.array().isNaN().count() + d8.array().isInf().count() == 2);
  }
}

TEST_CASE("propagate, NVFP4: one Inf makes its block's UE4M3 scale NaN (0x7F), not the tensor scale Inf",
          "[bad-input]") {
  MatrixF x = test::normal_tensor(4, 64, 5);
  MatrixF clean = x;
  x(2, 21) = kInf;  // block 1 of row 2
  clean(2, 21) = 0;
  for (bool tensor_scale : {false, true}) {
    INFO("tensor scale " << tensor_scale);
    const QuantizedTensor q = quantize_both(x, propagating(presets::nvfp4(tensor_scale)));
    const QuantizedTensor expect = quantize(clean, presets::nvfp4(tensor_scale));
    CHECK(q.outer_scales == expect.outer_scales);  // the FP32 tensor scale is the finite amax's
    const int block = 2 * 4 + 1;
    CHECK(q.scale_codes[std::size_t(block)] == 0x7F);
    const MatrixF d = dequantize(q), d_clean = dequantize(expect);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 64; ++c) {
        if (r == 2 && c / 16 == 1) CHECK(std::isnan(d(r, c)));
        else CHECK(d(r, c) == d_clean(r, c));
      }
  }
  // A scale format with a NaN is what carries it; with neither, propagation is refused up front.
  QuantSpec no_nan = propagating(presets::int8(grouping::per_token()));
  no_nan.scale.format = formats::e3m2;
  CHECK_THAT(no_nan.validate().value_or(""), Catch::Contains("neither the element format int8 nor the scale format e3m2"));
}

TEST_CASE("ragged shapes are zero-padded to whole blocks, nothing is truncated", "[bad-input][padding]") {
  const ThreadTiling t{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64};
  const MatrixF k = test::normal_tensor(100, 70, 1);
  const QuantizedTensor q = quantize(k, presets::int4(grouping::per_thread(t, Operand::k)), "K");
  CHECK(q.rows == 100);
  CHECK(q.cols == 70);
  CHECK(q.padded_rows == 128);  // two K blocks of 64
  CHECK(q.padded_cols == 128);  // two k64 instructions
  const MatrixF back = dequantize(q);
  REQUIRE(back.rows() == 100);
  REQUIRE(back.cols() == 70);
  for (int r = 0; r < 100; ++r)
    for (int c = 0; c < 70; ++c)
      CHECK(std::fabs(back(r, c) - k(r, c)) <= 0.5f * q.scales[std::size_t(q.group_of(r, c))] * (1 + 1e-6f));
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 128; ++c)
      if (r >= 100 || c >= 70) CHECK(q.codes(r, c) == 0);
  QuantSpec strict = presets::int4(grouping::per_thread(t, Operand::k));
  strict.padding = Padding::refuse;
  CHECK_THROWS_WITH(quantize(k, strict, "K"), Catch::Contains("K: shape 100x70 does not divide") &&
                                                  Catch::Contains("pad to 128x128"));
  // Microscaling pads columns to whole 1x16 blocks.
  const QuantizedTensor fp4 = quantize(MatrixF::Constant(3, 20, 3.0f), presets::nvfp4(false));  // 3/6 = 0.5 exact
  CHECK(fp4.padded_cols == 32);
  CHECK(dequantize(fp4) == MatrixF::Constant(3, 20, 3.0f));
}

TEST_CASE("validate() names what is impossible", "[bad-input][validate]") {
  const auto why = [](const QuantSpec& s) { return s.validate().value_or(""); };
  QuantSpec s = presets::int4(grouping::per_token());
  s.scale.target = 8;
  CHECK_THAT(why(s), Catch::Contains("scale target 8") && Catch::Contains("max_finite(int4)=7"));
  s = presets::mx(formats::e2m1);
  s.scale.format = formats::ue4m3;
  CHECK_THAT(why(s), Catch::Contains("exponent-only"));
  s = presets::int8(grouping::per_tensor());
  s.outer = OuterScale::per_row;
  CHECK_THAT(why(s), Catch::Contains("narrow scale format"));
  s = presets::fp8_static(formats::e4m3, 0.0, grouping::per_block(64));
  CHECK_THAT(why(s), Catch::Contains("fixed scale 0"));
  s = presets::int8(grouping::per_token());
  s.conversion.overflow = Overflow::inf;
  CHECK_THAT(why(s), Catch::Contains("int8 has no Inf"));
  s = presets::int8(Grouping{"broken", 4, {0, 1, 5, 0}, 2, 0, 1});
  CHECK_THAT(why(s), Catch::Contains("row 2 is in group 5"));
  s = presets::int8(grouping::per_token());
  CHECK_THROWS_WITH(quantize(MatrixF(0, 4), s, "V"), Catch::Contains("V: empty tensor"));
  s.scale.target = -1;
  CHECK_THROWS_WITH(quantize(MatrixF::Ones(2, 2), s, "V"), Catch::Contains("V: scale target -1"));
}

TEST_CASE(".npy files: round trip, float16, and clear errors", "[bad-input][npy]") {
  const std::string path = temp_path("a.npy");
  const std::vector<float> data{1.0f, -2.5f, 3.25f, 0.0f, 5.0f, 6.0f};
  write_npy(path, {1, 2, 3}, data);
  const NpyArray a = read_npy(path);
  CHECK(a.shape == std::vector<std::size_t>{1, 2, 3});
  CHECK(a.data == data);

  // float16, written by hand: header dict, then 1.0 (0x3C00) and -0.5 (0xB800).
  const std::string half_path = temp_path("h.npy");
  {
    std::string header = "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }";
    while ((10 + header.size() + 1) % 64) header += ' ';
    header += '\n';
    std::ofstream out(half_path, std::ios::binary);
    out.write("\x93NUMPY\x01\x00", 8);
    out.put(char(header.size()));
    out.put(0);
    out << header;
    out.write("\x00\x3C\x00\xB8", 4);
  }
  CHECK(read_npy(half_path).data == std::vector<float>{1.0f, -0.5f});

  const auto write_raw = [](const std::string& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; };
  const std::string bad = temp_path("bad.npy");
  write_raw(bad, "hello");
  CHECK_THROWS_WITH(read_npy(bad), Catch::Contains(bad + ": not a .npy file"));
  std::string header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n";
  write_raw(bad, std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header);
  CHECK_THROWS_WITH(read_npy(bad), Catch::Contains("dtype <f8 is not supported"));
  header = "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }\n";
  write_raw(bad, std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header);
  CHECK_THROWS_WITH(read_npy(bad), Catch::Contains("Fortran-order"));
  header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }\n";
  write_raw(bad, std::string("\x93NUMPY\x01\x00", 8) + char(header.size()) + '\0' + header + "abcd");
  CHECK_THROWS_WITH(read_npy(bad), Catch::Contains("data ends after 4 of 16 bytes"));
  CHECK_THROWS_WITH(read_npy(temp_path("missing.npy")), Catch::Contains("cannot open"));

  // Q, K, V that do not fit together.
  const std::string q = temp_path("q.npy"), k = temp_path("k.npy"), v = temp_path("v.npy");
  write_npy(q, {4, 8}, std::vector<float>(32, 1.0f));
  write_npy(k, {4, 8}, std::vector<float>(32, 1.0f));
  write_npy(v, {5, 8}, std::vector<float>(40, 1.0f));
  CHECK_THROWS_WITH(load_attention_npy(q, k, v), Catch::Contains("token counts differ"));
  write_npy(v, {4, 8}, std::vector<float>(32, 1.0f));
  CHECK(load_attention_npy(q, k, v).heads() == 1);
  write_npy(k, {2, 4, 8}, std::vector<float>(64, 1.0f));
  CHECK_THROWS_WITH(load_attention_npy(q, k, v), Catch::Contains("head counts differ"));
  for (const auto& p : {path, half_path, bad, q, k, v}) std::remove(p.c_str());
}

TEST_CASE("half_to_float agrees with the fp16 format record on all 65536 codes", "[npy]") {
  std::size_t mismatches = 0;
  for (std::uint32_t c = 0; c < 65536; ++c) {
    const double expect = decode(formats::fp16, c);
    const float got = half_to_float(std::uint16_t(c));
    mismatches += std::isnan(expect) ? !std::isnan(got) : (double(got) != expect || std::signbit(got) != std::signbit(expect));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("synthetic data: deterministic per seed, validated spec", "[synthetic]") {
  SyntheticAttentionSpec s;
  s.heads = 2;
  s.tokens = 256;
  s.dim = 64;
  const AttentionData a = make_synthetic_attention(s), b = make_synthetic_attention(s);
  CHECK(a.q[1] == b.q[1]);
  s.seed = 2;
  CHECK(make_synthetic_attention(s).q[1] != a.q[1]);
  // K carries a channel bias much larger than its token-to-token spread.
  const Eigen::RowVectorXf mean = a.k[0].colwise().mean();
  CHECK(mean.cwiseAbs().maxCoeff() > 4 * (a.k[0].rowwise() - mean).cwiseAbs().colwise().mean().minCoeff());
  s.outlier_channels = 65;
  CHECK_THROWS_WITH(make_synthetic_attention(s), Catch::Contains("outlier_channels=65"));
  s.outlier_channels = 4;
  s.token_noise_length = -1;
  CHECK_THROWS_WITH(make_synthetic_attention(s), Catch::Contains("token_noise_length=-1"));
}

TEST_CASE("synthetic data: token_noise_length correlates neighbouring tokens as exp(-lag / length)", "[synthetic]") {
  SyntheticAttentionSpec s;
  s.heads = 1;
  s.tokens = 4096;
  s.dim = 128;
  s.token_scale_sigma = 0;  // unit token magnitudes, so K - mean(K) is std[c] * z
  s.outlier_token_fraction = 0;
  // Correlation at lag `lag` of K's channels, pooled over channels.
  const auto correlation = [](const MatrixF& k, int lag) {
    const MatrixD z = k.cast<double>().rowwise() - k.cast<double>().colwise().mean();
    const Eigen::Index n = z.rows() - lag;
    const double cross = (z.topRows(n).array() * z.bottomRows(n).array()).sum();
    return cross / std::sqrt(z.topRows(n).array().square().sum() * z.bottomRows(n).array().square().sum());
  };
  const MatrixF independent = make_synthetic_attention(s).k[0];
  CHECK(std::fabs(correlation(independent, 1)) < 0.02);
  s.token_noise_length = 16;
  const MatrixF correlated = make_synthetic_attention(s).k[0];
  for (int lag : {1, 8, 24}) {
    INFO("lag " << lag);
    CHECK(correlation(correlated, lag) == Approx(std::exp(-lag / 16.0)).margin(0.05));
  }
  // The bias and the channel profile are drawn before z: only the token-to-token part changes.
  CHECK((correlated.colwise().mean() - independent.colwise().mean()).cwiseAbs().maxCoeff() < 0.5);
}
