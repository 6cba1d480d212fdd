// The emulated chunkwise GLA: every preset (and stage variants) against a plain row-by-row
// implementation bit for bit, the fp32 and quantized pipelines against the float64 reference,
// per-thread groups of the score tiles, and the errors for bad pipelines and bad input.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>

#include "emulation/linear/gla.hpp"
#include "numerics/gates.hpp"
#include "numerics/metrics.hpp"
#include "numerics/synthetic.hpp"
#include "tests/linear/plain_gla.hpp"

using namespace lowbit;
using namespace lowbit::linear;

namespace {

struct Head {
  MatrixF q, k, v, log_alpha;
};

// Synthetic Q, K, V with channel outliers and a K channel bias (numerics/synthetic), GLA gates
// that forget faster than GLA's default (temperature 4).
Head head(int tokens, int dk, int dv, std::uint64_t seed) {
  SyntheticAttentionSpec s;
  s.heads = 1;
  s.tokens = tokens;
  s.dim = std::max(dk, dv);
  s.seed = seed;
  const AttentionData d = make_synthetic_attention(s);
  SyntheticGateSpec g;
  g.temperature = 4;
  g.seed = seed;
  return {d.q[0].leftCols(dk), d.k[0].leftCols(dk), d.v[0].leftCols(dv), make_log_gates(g, 1, tokens, dk)[0]};
}

std::size_t bit_mismatches(const MatrixF& a, const MatrixF& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return std::size_t(-1);
  std::size_t n = 0;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    n += std::bit_cast<std::uint32_t>(a.data()[i]) != std::bit_cast<std::uint32_t>(b.data()[i]);
  return n;
}

double relative_error(const MatrixF& a, const MatrixD& reference) {
  return (a.cast<double>() - reference).norm() / reference.norm();
}

void check_equal(const ForwardResult& fast, const ForwardResult& plain) {
  CHECK(bit_mismatches(fast.scores, plain.scores) == 0);
  CHECK(bit_mismatches(fast.intra, plain.intra) == 0);
  CHECK(bit_mismatches(fast.output, plain.output) == 0);
  CHECK(bit_mismatches(fast.state, plain.state) == 0);
}

}  // namespace

TEST_CASE("every GLA preset equals the plain implementation bit for bit", "[linear][differential]") {
  // 100 tokens: a full chunk of 64 and a ragged one of 36 (2 full sub-chunks and one of 4).
  const Head h = head(100, 64, 40, 3);
  for (const PresetInfo& info : preset_list()) {
    INFO("preset " << info.name);
    const Pipeline p = preset(info.name, {64, 16});
    check_equal(forward(p, h.q, h.k, h.v, h.log_alpha), test::plain_gla(p, h.q, h.k, h.v, h.log_alpha));
  }
}

TEST_CASE("GLA stage variants equal the plain implementation bit for bit", "[linear][differential]") {
  const Head h = head(80, 128, 24, 5);
  MatrixF s0(128, 24);
  for (Eigen::Index i = 0; i < s0.size(); ++i) s0.data()[i] = float(std::sin(0.37 * double(i)));
  std::vector<Pipeline> variants;
  for (Granularity g : {Granularity::per_block, Granularity::per_token}) {
    Pipeline p = preset("int4-smooth", {32, 16});
    p.scores.granularity = g;
    variants.push_back(p);
  }
  {
    Pipeline p = preset("int4-smooth-fp8", {64, 16});
    p.values.p = Granularity::per_block;
    variants.push_back(p);
  }
  for (int flush : {0, 1}) {
    Pipeline p = preset("int8-smooth-fp8", {64, 16});
    p.values.mmas_per_flush = flush;
    variants.push_back(p);
  }
  {
    Pipeline p = preset("int8-smooth", {64, 16});
    p.scores.correction = quant::ScoreCorrection::softmax;  // the row bias dropped
    variants.push_back(p);
  }
  {
    Pipeline p = preset("int8", {64, 32});  // sub-chunks of 32: two warps' per-thread groups
    variants.push_back(p);
  }
  {
    Pipeline p = preset("fp32", {64, 16});
    p.scores.smooth = true;  // fp32 scores of the smoothed operands, corrected
    variants.push_back(p);
  }
  for (const Pipeline& p : variants) {
    INFO("pipeline " << p.name << " chunk " << p.shape.chunk << " sub " << p.shape.sub_chunk << " scores "
                     << to_string(p.scores.granularity) << " p " << to_string(p.values.p) << " flush "
                     << p.values.mmas_per_flush);
    check_equal(forward(p, h.q, h.k, h.v, h.log_alpha, &s0), test::plain_gla(p, h.q, h.k, h.v, h.log_alpha, &s0));
  }
}

TEST_CASE("the inter-chunk part depends on the state stage only", "[linear][split]") {
  // exp_linear computes it once per state stage and shares it between pipelines.
  const Head h = head(130, 64, 32, 13);
  const InterResult a = inter_chunk(preset("int4-smooth-fp8"), h.q, h.k, h.v, h.log_alpha);
  const InterResult b = inter_chunk(preset("bf16"), h.q, h.k, h.v, h.log_alpha);
  CHECK(bit_mismatches(a.inter, b.inter) == 0);
  CHECK(bit_mismatches(a.state, b.state) == 0);
  const InterResult fp32 = inter_chunk(preset("fp32"), h.q, h.k, h.v, h.log_alpha);
  CHECK(bit_mismatches(a.state, fp32.state) > 0);
}

TEST_CASE("emulated GLA follows the float64 reference", "[linear][accuracy]") {
  const Head h = head(256, 64, 64, 7);
  const ChunkShape shape{64, 16};
  const MatrixD q = h.q.cast<double>(), k = h.k.cast<double>(), v = h.v.cast<double>(), g = h.log_alpha.cast<double>();
  const LinearAttentionResult ref = gla_chunkwise(q, k, v, g, shape);
  const MatrixD ref_scores = gla_chunk_scores(q, k, g, shape.chunk);
  const auto run = [&](std::string_view name) { return forward(preset(name, shape), h.q, h.k, h.v, h.log_alpha); };

  const ForwardResult fp32 = run("fp32");
  CHECK(relative_error(fp32.output, ref.output) < 1e-5);
  CHECK(relative_error(fp32.state, ref.state) < 1e-5);
  CHECK(relative_error(fp32.scores, ref_scores) < 1e-5);

  const ForwardResult bf16 = run("bf16");
  CHECK(relative_error(bf16.output, ref.output) < 2e-2);
  CHECK(relative_error(bf16.state, ref.state) < 2e-2);

  // K carries a large channel bias: without the row-bias term Q~ kbar the smoothed scores would be
  // off by about the whole score; with both terms INT8 stays close.
  const ForwardResult int8s = run("int8-smooth");
  CHECK(relative_error(int8s.scores, ref_scores) < 2e-2);
  CHECK(relative_error(int8s.output, ref.output) < 2e-2);
  // The quantized stage touches the intra-chunk scores only: the state is bf16's, bit for bit.
  CHECK(bit_mismatches(int8s.state, bf16.state) == 0);
}

TEST_CASE("per-thread groups of the score tiles follow the m16n8 accumulator fragment", "[linear][groups]") {
  // A thread holds rows g and g + 8 of a 16-row tile, and keys 2l, 2l + 1 of each 8-key tile.
  const quant::QuantSpec q = *preset("int4").score_spec(quant::Operand::q);
  const quant::QuantSpec k = *preset("int4").score_spec(quant::Operand::k);
  REQUIRE(q.grouping.row_period == 16);
  REQUIRE(k.grouping.row_period == 16);
  CHECK(q.grouping.groups_per_period == 8);
  CHECK(k.grouping.groups_per_period == 4);
  for (int r = 0; r < 8; ++r) CHECK(q.grouping.row_group_of[std::size_t(r)] == q.grouping.row_group_of[std::size_t(r + 8)]);
  for (int l = 0; l < 4; ++l)
    for (int key : {2 * l + 1, 2 * l + 8, 2 * l + 9})
      CHECK(k.grouping.row_group_of[std::size_t(key)] == k.grouping.row_group_of[std::size_t(2 * l)]);
  CHECK(q.grouping.col_multiple == 64);  // d_k padded to whole k64 instructions
  CHECK(preset("int8").score_spec(quant::Operand::q)->grouping.col_multiple == 32);
}

TEST_CASE("the int8 presets' score tiling is the one the GPU kernel hard-codes", "[linear][groups]") {
  // kernels/linear/gla_intra.cu derives its per-thread groups from this tiling in constant memory.
  for (const char* name : {"int8-smooth", "int8-smooth-fp8"}) {
    const quant::ThreadTiling t = preset(name, {64, 16}).score_tiling();
    CHECK(t.atom == mma::atoms::mma_m16n8k32_s32_s8_s8);
    CHECK(t.warps == 1);
    CHECK(t.block_q == 16);
    CHECK(t.block_k == 16);
  }
}

TEST_CASE("GLA pipelines that cannot run say why", "[linear][bad-input]") {
  const auto reason = [](Pipeline p, int dk = 64, int dv = 64) {
    auto why = p.validate(dk, dv);
    return why ? *why : std::string("(valid)");
  };
  Pipeline p = preset("int4");
  p.scores.granularity = Granularity::none;
  CHECK_THAT(reason(p), Catch::Contains("int4 operands need a scale"));
  p = preset("bf16");
  p.scores.granularity = Granularity::per_thread;
  CHECK_THAT(reason(p), Catch::Contains("bf16 operands are cast, not scaled"));
  p = preset("int8");
  p.scores.granularity = Granularity::per_channel;
  CHECK_THAT(reason(p), Catch::Contains("per-channel scales do not factor out"));
  p = preset("int8", {64, 8});
  CHECK_THAT(reason(p), Catch::Contains("not a whole number of 16 x 8 tiles"));
  p = preset("bf16");
  p.scores.instruction = "mma.sync.aligned.m16n8k99.row.col.f32.bf16.bf16.f32";
  CHECK_THAT(reason(p), Catch::StartsWith("scores: "));
  CHECK_THAT(reason(preset("bf16"), 64, 300), Catch::StartsWith("values (n = d_v = 300)"));
  p = preset("int4-smooth-fp8");
  p.values.p = Granularity::none;
  CHECK_THAT(reason(p), Catch::Contains("P in e4m3 needs a scale"));
  p = preset("int4-smooth-fp8");
  p.values.v = Granularity::per_token;
  CHECK_THAT(reason(p), Catch::Contains("V in e4m3 needs per-channel scales"));
  p = preset("int4-smooth-fp8");
  p.values.mmas_per_flush = -1;
  CHECK_THAT(reason(p), Catch::Contains("mmas_per_flush = -1"));
  p = preset("fp32");
  p.scores.granularity = Granularity::per_token;
  CHECK_THAT(reason(p), Catch::Contains("fp32-fma takes no scales"));
  p = preset("bf16");
  p.values.instruction = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
  CHECK_THAT(reason(p), Catch::Contains("multiplies integers"));
  CHECK_THAT(reason(preset("bf16", {48, 32})), Catch::Contains("chunk = 48"));
  CHECK_THROWS_WITH(preset("int2"), Catch::Contains("unknown linear-attention preset 'int2' (presets: fp32, bf16"));
  for (const PresetInfo& info : preset_list()) {
    INFO(info.name);
    CHECK(reason(preset(info.name)) == "(valid)");
  }
}

TEST_CASE("emulated GLA refuses bad input with the reason", "[linear][bad-input]") {
  Head h = head(40, 64, 16, 9);
  const Pipeline p = preset("int4-smooth-fp8");
  h.q(5, 7) = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(forward(p, h.q, h.k, h.v, h.log_alpha), Catch::Contains("Q (5, 7) is nan"));
  h = head(40, 64, 16, 9);
  h.log_alpha(2, 3) = 0.5f;
  CHECK_THROWS_WITH(forward(p, h.q, h.k, h.v, h.log_alpha), Catch::Contains("log_alpha (2, 3) is 0.5"));
  h = head(40, 64, 16, 9);
  CHECK_THROWS_WITH(forward(p, h.q, h.k, MatrixF(h.v.topRows(39)), h.log_alpha), Catch::Contains("V is 39 x 16"));
  CHECK_THROWS_WITH(forward(preset("int4", {64, 8}), h.q, h.k, h.v, h.log_alpha), Catch::Contains("pipeline int4: scores"));
}
