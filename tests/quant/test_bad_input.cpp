// Bad input: NaN/Inf reported (count and first index) and refused unless propagation is asked
// for; ragged shapes padded explicitly and never truncated; impossible specs and files named.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "emulation/quant/qk_attention.hpp"
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

TEST_CASE("attention inputs are scanned as given: one NaN smoothed over a block is still one value", "[bad-input]") {
  // Smoothing Q with block 128 turns one NaN at [130, 5] into a NaN mean for channel 5 of rows
  // 128..255; the scan runs before it, so the report is the input's.
  MatrixF q = test::normal_tensor(256, 64, 1), k = test::normal_tensor(192, 64, 2), v = test::normal_tensor(192, 32, 3);
  const ThreadTiling t{atoms::mma_m16n8k64_s4, 4, 128, 64};
  QkAttentionConfig config{presets::int4(grouping::per_thread(t, Operand::q)),
                           presets::int4(grouping::per_thread(t, Operand::k))};
  REQUIRE(config.smooth_q);
  REQUIRE(config.q_smooth_block == 128);
  q(130, 5) = kNaN;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config),
                    Catch::Contains("Q: 1 non-finite value (1 NaN, 0 Inf), the first at [130, 5] (NaN)"));
  q(130, 5) = 0;
  k(7, 63) = -kInf;
  k(100, 0) = kInf;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config, {"q.npy", "k.npy head 2", "v.npy"}),
                    Catch::Contains("k.npy head 2: 2 non-finite values (0 NaN, 2 Inf), the first at [7, 63] (Inf)"));
  k = test::normal_tensor(192, 64, 2);
  v(191, 31) = kNaN;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config), Catch::Contains("V: 1 non-finite value") &&
                                                                 Catch::Contains("[191, 31]"));
  // One spec propagating is not enough: propagation is for the whole attention.
  config.q_spec.nonfinite = NonFinitePolicy::propagate;
  CHECK_THROWS_WITH(quantized_qk_attention(q, k, v, config), Catch::Contains("V: 1 non-finite value"));
  // Both propagate: the result carries the reports of the inputs as given.
  config.k_spec.nonfinite = NonFinitePolicy::propagate;
  q(130, 5) = kNaN;
  const QkAttentionResult r = quantized_qk_attention(q, k, v, config);
  CHECK(r.q_nonfinite.count() == 1);
  CHECK(r.q_nonfinite.first_index == 130 * 64 + 5);
  CHECK_FALSE(r.k_nonfinite.any());
  CHECK(r.v_nonfinite.nan_count == 1);
  CHECK(r.v_nonfinite.first_index == 191 * 32 + 31);
}

TEST_CASE("propagate: amax ignores NaN and keeps Inf; codes follow the element format", "[bad-input]") {
  MatrixF x(2, 4);
  x << 1.0f, kNaN, -3.5f, 0.5f,  //
      1.0f, kInf, 2.0f, 0.0f;
  QuantSpec int4 = presets::int4(grouping::per_token());
  int4.nonfinite = NonFinitePolicy::propagate;
  const QuantizedTensor q = quantize(x, int4);
  CHECK(q.scales[0] == 3.5f / 7.0f);  // NaN ignored by the amax
  CHECK(q.codes(0, 1) == 0);          // NaN -> 0 (integer conversion, as PTX cvt)
  CHECK(q.codes(0, 2) == 0b1001);     // -7
  CHECK(std::isinf(q.scales[1]));     // Inf amax -> Inf scale: finite values go to 0
  CHECK(q.codes(1, 0) == 0);
  QuantSpec e4m3 = presets::fp8(formats::e4m3, grouping::per_token());
  e4m3.nonfinite = NonFinitePolicy::propagate;
  const QuantizedTensor f = quantize(x, e4m3);
  CHECK(f.codes(0, 1) == 0b0'1111'111);  // NaN stays NaN in E4M3
  CHECK(std::isnan(dequantize(f)(0, 1)));
  CHECK(dequantize(f)(0, 2) == -3.5f);
  for (const QuantSpec& spec : {int4, e4m3}) {
    const QuantizedTensor a = quantize(x, spec), b = quantize_reference(x, spec);
    CHECK(a.codes == b.codes);
    CHECK(a.scale_codes == b.scale_codes);
  }
}

TEST_CASE("ragged shapes are zero-padded to whole blocks, nothing is truncated", "[bad-input][padding]") {
  const ThreadTiling t{atoms::mma_m16n8k64_s4, 4, 128, 64};
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
}
