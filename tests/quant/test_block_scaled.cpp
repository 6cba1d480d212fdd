// QuantizedTensor -> the emulator's block-scaled MMAs (sm_120 mma.sync NVFP4, MXFP4, MXFP8), then
// the outer scale in float32: exact where the arithmetic is exact, within the model's own error
// bound on random data, and SageAttention3's two-level P beside the direct one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "emulation/mma/instruction.hpp"
#include "emulation/quant/block_scaled.hpp"
#include "emulation/quant/quantize.hpp"
#include "tensors.hpp"

using namespace lowbit;
using namespace lowbit::quant;

namespace {

const char* const kNvfp4 =
    "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3";
const char* const kMxfp4 = "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0";
const char* const kMxfp8E4m3 =
    "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.f32.ue8m0";
const char* const kMxfp8E5m2 =
    "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e5m2.e5m2.f32.ue8m0";

mma::Instruction sm120(const char* name) { return mma::find_instruction("sm_120", name); }

// Rows of 1 x block runs, each run `values` (drawn from `grid`) times 2^e (e drawn from
// `exponents`), with one element +-top: every block's amax is top * 2^e, which NVFP4's amax/6 and
// MX's OCP floor both turn into the scale 2^e exactly, so the codes are exact too.
MatrixF exact_operand(int rows, int cols, int block, const std::vector<float>& grid, float top,
                      const std::vector<int>& exponents, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  MatrixF x(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < cols / block; ++b) {
      const float scale = std::ldexp(1.0f, exponents[rng() % exponents.size()]);
      for (int c = 0; c < block; ++c) x(r, b * block + c) = (rng() % 2 ? -1.0f : 1.0f) * grid[rng() % grid.size()] * scale;
      x(r, b * block + int(rng() % std::uint64_t(block))) = (rng() % 2 ? -top : top) * scale;
    }
  return x;
}

const std::vector<float> kE2m1Grid{0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
const std::vector<float> kSmallIntegers{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16};

// Bound on |block_scaled_matmul - sum of the dequantized products| for one output, from the model's
// parameters (emulation/mma/instruction.hpp, FusedDotAdd). Every chunk of the K loop truncates each
// of its terms (the products, or for per-group scaling the group sums, plus the accumulator) to F
// bits below the largest term's exponent, at most 2^(2-F) of sum |a b| each (the 2 covers a group
// sum, whose exponent is its scales' while its smallest nonzero value is 1/4 of that), and rounds
// toward zero to fp32, under 2^-23 of a running sum that never exceeds sum |a b|. Then four float32
// roundings of 2^-24: the outer scales' product and the final multiply here, and dequantize()'s
// (code * s) * s_o of each operand in the reference.
double tolerance(const mma::Instruction& in, Eigen::Index K, double abs_sum) {
  const mma::FusedDotAdd& p = in.model.fused;
  const int terms = (p.scale_mode == mma::ScaleMode::per_group ? p.chunk / p.group : p.chunk) + 1;
  const Eigen::Index chunks = (K + in.atom.k - 1) / in.atom.k * in.atom.k / p.chunk;
  return abs_sum * (double(chunks) * (terms * std::ldexp(1.0, 2 - p.fraction_bits) + 0x1p-23) + 4 * 0x1p-24);
}

// Outputs farther from the float64 product of the dequantized operands than tolerance().
std::size_t outside_tolerance(const QuantizedTensor& a, const QuantizedTensor& b, const mma::Instruction& in,
                              const MatrixF& out) {
  const MatrixD da = dequantize(a).cast<double>(), db = dequantize(b).cast<double>();
  const MatrixD exact = da * db.transpose(), abs_sum = da.cwiseAbs() * db.cwiseAbs().transpose();
  std::size_t outside = 0;
  for (int i = 0; i < out.rows(); ++i)
    for (int j = 0; j < out.cols(); ++j)
      outside += !(std::fabs(double(out(i, j)) - exact(i, j)) <= tolerance(in, a.cols, abs_sum(i, j)));
  return outside;
}

}  // namespace

TEST_CASE("block_scaled_matmul equals the exact product where the arithmetic is exact", "[block-scaled]") {
  struct Case {
    const char* instruction;
    QuantSpec spec;
    const std::vector<float>* grid;
    std::vector<int> a_exponents, b_exponents;  // few enough bits for every sum to be exact in fp32
  };
  const std::vector<Case> cases{{kNvfp4, presets::nvfp4(false), &kE2m1Grid, {-3, -1, 0, 2}, {-2, 0, 1}},
                                {kMxfp4, presets::mx(formats::e2m1), &kE2m1Grid, {-3, -1, 0, 2}, {-2, 0, 1}},
                                {kMxfp8E4m3, presets::mx(formats::e4m3), &kSmallIntegers, {-1, 0}, {0, 1}}};
  for (const Case& c : cases) {
    INFO(c.instruction);
    const int block = c.spec.grouping.col_block;
    const float top = float(max_finite(c.spec.element));
    const MatrixF a = exact_operand(24, 128, block, *c.grid, top, c.a_exponents, 1);
    const MatrixF b = exact_operand(16, 128, block, *c.grid, top, c.b_exponents, 2);
    const QuantizedTensor qa = quantize(a, c.spec), qb = quantize(b, c.spec);
    REQUIRE(dequantize(qa) == a);  // the data is exact in the format
    REQUIRE(dequantize(qb) == b);
    const MatrixD exact = a.cast<double>() * b.cast<double>().transpose();
    REQUIRE(exact.cast<float>().cast<double>() == exact);  // and so is every sum in fp32
    CHECK(block_scaled_matmul(qa, qb, sm120(c.instruction)) == exact.cast<float>());
  }

  // SageAttention3's two-level P: a row max of 2688 * 2^-12 makes s_P1 = 2^-12, applied after the MMA.
  MatrixF x1 = exact_operand(16, 128, 16, kE2m1Grid, 6, {-2, 0, 3}, 3);
  x1.leftCols(16) = exact_operand(16, 16, 16, kE2m1Grid, 6, {0}, 4) * 448.0f;  // block 0: amax 6 * 448
  const MatrixF p = x1 * 0x1p-12f;
  const QuantizedTensor qp = quantize(p, presets::sage3_p_two_level());
  REQUIRE(qp.outer_scales[0] == 0x1p-12f);
  REQUIRE(dequantize(qp) == p);
  const MatrixF v_t = exact_operand(8, 128, 16, kE2m1Grid, 6, {-1, 1}, 5);
  const QuantizedTensor qv = quantize(v_t, presets::nvfp4(false));
  const MatrixD exact = p.cast<double>() * v_t.cast<double>().transpose();
  REQUIRE(exact.cast<float>().cast<double>() == exact);
  CHECK(block_scaled_matmul(qp, qv, sm120(kNvfp4)) == exact.cast<float>());
}

TEST_CASE("block_scaled_matmul on random data: within the model's error bound of the dequantized product",
          "[block-scaled]") {
  MatrixF a = test::normal_tensor(40, 256, 6), b = test::normal_tensor(24, 256, 7);
  for (int r = 0; r < a.rows(); ++r) a.row(r) *= std::exp(float(r % 7) - 3.0f);  // rows of different magnitude
  struct Case {
    const char* instruction;
    QuantSpec a_spec, b_spec;
  };
  const std::vector<Case> cases{
      {kNvfp4, presets::nvfp4(false), presets::nvfp4(false)},
      {kNvfp4, presets::nvfp4(true), presets::nvfp4(true)},  // FP32 tensor scales on both sides
      {kNvfp4, presets::sage3_p_two_level(), presets::nvfp4(false)},
      {kMxfp4, presets::mx(formats::e2m1), presets::mx(formats::e2m1, ScaleRounding::toward_positive)},
      {kMxfp8E4m3, presets::mx(formats::e4m3), presets::mx(formats::e4m3)},
      {kMxfp8E5m2, presets::mx(formats::e5m2), presets::mx(formats::e5m2)},
  };
  for (const Case& c : cases)
    for (int flush : {0, 2}) {
      INFO(c.instruction << " a: " << c.a_spec.name << " b: " << c.b_spec.name << " mmas_per_flush " << flush);
      const QuantizedTensor qa = quantize(a, c.a_spec), qb = quantize(b, c.b_spec);
      const mma::Instruction in = sm120(c.instruction);
      const MatrixF out = block_scaled_matmul(qa, qb, in, {.mmas_per_flush = flush});
      CHECK(outside_tolerance(qa, qb, in, out) == 0);
    }
  // A ragged K (200) is padded to whole k64 instructions with +0 codes and zero scales.
  const QuantizedTensor qa = quantize(MatrixF(a.leftCols(200)), presets::nvfp4(false));
  const QuantizedTensor qb = quantize(MatrixF(b.leftCols(200)), presets::nvfp4(false));
  REQUIRE(qa.padded_cols == 208);
  CHECK(outside_tolerance(qa, qb, sm120(kNvfp4), block_scaled_matmul(qa, qb, sm120(kNvfp4))) == 0);
}

TEST_CASE("SageAttention3 P V: the two-level P beats the direct P through the same FP4 MMA", "[block-scaled]") {
  // P_e of online softmax on a tile after the running max m has moved past it: exp(s - m) with
  // rows whose largest value is e^-1 .. e^-6. Direct NVFP4 then needs UE4M3 block scales of
  // amax/6 < 0.06, down where UE4M3 is subnormal (steps of 2^-9); the two-level P divides each
  // row by s_P1 = rowmax / (448 * 6) first (SageAttention3 §3.2, Table 1b).
  std::mt19937_64 rng(8);
  std::normal_distribution<double> normal(0.0, 2.0);
  MatrixF p(60, 256);
  for (int r = 0; r < p.rows(); ++r) {
    std::vector<double> s(256);
    for (double& v : s) v = normal(rng);
    const double m = *std::max_element(s.begin(), s.end()) + 1 + r % 6;
    for (int c = 0; c < 256; ++c) p(r, c) = float(std::exp(s[std::size_t(c)] - m));
  }
  const mma::Instruction in = sm120(kNvfp4);
  const QuantizedTensor qv = quantize(test::normal_tensor(64, 256, 9), presets::nvfp4(false));  // V^T
  // P's share of the error: against the exact P times the same quantized V, per row.
  const MatrixD reference = p.cast<double>() * dequantize(qv).cast<double>().transpose();
  double error[2];
  for (bool two_level : {false, true}) {
    const QuantizedTensor qp = quantize(p, two_level ? presets::sage3_p_two_level() : presets::sage3_p_direct());
    const MatrixF o = block_scaled_matmul(qp, qv, in);
    CHECK(outside_tolerance(qp, qv, in, o) == 0);
    // Per row: the kernel divides each row of O by its own softmax sum at the end.
    double sum = 0;
    for (int r = 0; r < p.rows(); ++r) {
      const double e = (o.row(r).cast<double>() - reference.row(r)).norm() / reference.row(r).norm();
      sum += e;
    }
    error[two_level] = sum / double(p.rows());
  }
  // Recorded: direct 0.39 (rows with max e^-6 lose every block: amax/6 rounds to a zero scale),
  // two-level 0.064.
  INFO("mean relative error per row: direct " << error[0] << ", two-level " << error[1]);
  CHECK(error[1] < 0.25 * error[0]);
}

TEST_CASE("block_scaled_matmul: a NaN block scale (propagate) makes its row NaN, as the MMA does", "[block-scaled]") {
  MatrixF p = test::normal_tensor(8, 64, 10).cwiseAbs();
  const QuantizedTensor qv = quantize(test::normal_tensor(16, 64, 11), presets::nvfp4(false));
  QuantSpec spec = presets::sage3_p_two_level();
  spec.nonfinite = NonFinitePolicy::propagate;
  const MatrixF clean = block_scaled_matmul(quantize(p, spec), qv, sm120(kNvfp4));
  p(5, 40) = std::numeric_limits<float>::quiet_NaN();
  const QuantizedTensor qp = quantize(p, spec);
  REQUIRE(qp.scale_codes[std::size_t(qp.group_of(5, 40))] == 0x7F);
  const MatrixF o = block_scaled_matmul(qp, qv, sm120(kNvfp4));
  for (int r = 0; r < 8; ++r) {
    INFO("row " << r);
    if (r == 5) CHECK(o.row(r).array().isNaN().all());
    else CHECK(o.row(r) == clean.row(r));
  }
}

TEST_CASE("block_scaled_matmul names what does not fit the instruction", "[block-scaled]") {
  const MatrixF x = test::normal_tensor(4, 64, 12);
  const QuantizedTensor nv = quantize(x, presets::nvfp4(false)), mx = quantize(x, presets::mx(formats::e2m1));
  CHECK_THROWS_WITH(block_scaled_matmul(nv, nv, mma::find_instruction("sm_90", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32")),
                    Catch::Contains("takes no block scales"));
  CHECK_THROWS_WITH(block_scaled_matmul(mx, nv, sm120(kNvfp4)), Catch::Contains("a (mxe2m1") &&
                                                                      Catch::Contains("has ue8m0 scales") &&
                                                                      Catch::Contains("takes ue4m3"));
  CHECK_THROWS_WITH(block_scaled_matmul(nv, quantize(x, presets::mx(formats::e4m3)), sm120(kMxfp4)),
                    Catch::Contains("a (nvfp4 1x16) has ue4m3 scales"));
  CHECK_THROWS_WITH(block_scaled_matmul(mx, quantize(x, presets::mx(formats::e4m3)), sm120(kMxfp4)),
                    Catch::Contains("b (mxe4m3") && Catch::Contains("holds e4m3 codes"));
  QuantSpec wide = presets::nvfp4(false);
  wide.grouping = grouping::microscale(32);
  CHECK_THROWS_WITH(block_scaled_matmul(quantize(x, wide), nv, sm120(kNvfp4)), Catch::Contains("is grouped 1x32") &&
                                                                                  Catch::Contains("1x16 blocks along K"));
  CHECK_THROWS_WITH(block_scaled_matmul(nv, quantize(MatrixF(x.leftCols(48)), presets::nvfp4(false)), sm120(kNvfp4)),
                    Catch::Contains("reduction lengths differ (64 vs 48)"));
}
