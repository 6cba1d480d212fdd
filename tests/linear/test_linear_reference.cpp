// The float64 references of gated linear attention: the chunkwise form with secondary chunking
// against the plain recurrence, on random gated data across shapes (ragged last chunks and
// sub-chunks included), and their bad-input errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>

#include "numerics/gates.hpp"
#include "numerics/linear_attention.hpp"

using namespace lowbit;

namespace {

struct Head {
  MatrixD q, k, v, log_alpha;
};

// Gaussian q, k, v with channel offsets; gates from uniform log values in [-decay, 0].
Head random_head(int tokens, int dk, int dv, double decay, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uniform(-decay, 0.0);
  Head h{MatrixD(tokens, dk), MatrixD(tokens, dk), MatrixD(tokens, dv), MatrixD(tokens, dk)};
  for (int c = 0; c < dk; ++c) {
    const double k_offset = 3 * normal(rng);
    for (int t = 0; t < tokens; ++t) {
      h.q(t, c) = normal(rng);
      h.k(t, c) = k_offset + normal(rng);
      h.log_alpha(t, c) = uniform(rng);
    }
  }
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < dv; ++c) h.v(t, c) = normal(rng);
  return h;
}

double relative_error(const MatrixD& a, const MatrixD& reference) { return (a - reference).norm() / reference.norm(); }

}  // namespace

TEST_CASE("chunkwise GLA with secondary chunking equals the recurrence in float64", "[linear][reference]") {
  struct Case {
    int tokens, dk, dv, chunk, sub_chunk;
    double decay;
  };
  // Ragged last chunks (200 = 3 x 64 + 8, 300 = 256 + 44, 37) and ragged last sub-chunks (44 = 2 x 16 + 12);
  // decay up to 1 per token (gate products down to e^-255 within a chunk).
  const Case cases[] = {{256, 64, 64, 64, 16, 0.1},  {200, 64, 128, 64, 16, 0.5},  {300, 128, 256, 256, 16, 0.05},
                        {300, 96, 32, 128, 16, 1.0}, {37, 8, 5, 16, 4, 0.3},       {512, 128, 128, 128, 16, 0.02},
                        {64, 16, 16, 64, 64, 0.2},   {130, 32, 48, 64, 32, 0.7}};
  std::uint64_t seed = 1;
  for (const Case& c : cases) {
    INFO("tokens=" << c.tokens << " dk=" << c.dk << " dv=" << c.dv << " chunk=" << c.chunk << " sub=" << c.sub_chunk
                   << " decay=" << c.decay);
    const Head h = random_head(c.tokens, c.dk, c.dv, c.decay, seed++);
    const LinearAttentionResult rec = gla_recurrent(h.q, h.k, h.v, h.log_alpha);
    const LinearAttentionResult chk = gla_chunkwise(h.q, h.k, h.v, h.log_alpha, {c.chunk, c.sub_chunk});
    CHECK(relative_error(chk.output, rec.output) < 1e-12);
    CHECK(relative_error(chk.state, rec.state) < 1e-12);
    // Each token's output, not just the whole: the worst row.
    double worst = 0;
    for (int t = 0; t < c.tokens; ++t)
      worst = std::max(worst, (chk.output.row(t) - rec.output.row(t)).norm() / rec.output.row(t).norm());
    CHECK(worst < 1e-11);
  }
}

TEST_CASE("GLA with an initial state: chunkwise equals recurrence", "[linear][reference]") {
  const Head h = random_head(150, 32, 24, 0.2, 11);
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal;
  MatrixD s0(32, 24);
  for (Eigen::Index i = 0; i < s0.size(); ++i) s0.data()[i] = 5 * normal(rng);
  const auto rec = gla_recurrent(h.q, h.k, h.v, h.log_alpha, &s0);
  const auto chk = gla_chunkwise(h.q, h.k, h.v, h.log_alpha, {64, 16}, &s0);
  CHECK(relative_error(chk.output, rec.output) < 1e-12);
  CHECK(relative_error(chk.state, rec.state) < 1e-12);
  // The state matters: without it the output differs.
  const auto without = gla_recurrent(h.q, h.k, h.v, h.log_alpha);
  CHECK(relative_error(without.output, rec.output) > 1e-3);
}

TEST_CASE("GLA on the synthetic gates: chunkwise equals recurrence", "[linear][reference]") {
  SyntheticGateSpec spec;
  spec.temperature = 4;  // faster forgetting than GLA's 16
  const MatrixD g = make_log_gates(spec, 1, 384, 64)[0].cast<double>();
  Head h = random_head(384, 64, 64, 0, 21);
  h.log_alpha = g;
  const auto rec = gla_recurrent(h.q, h.k, h.v, h.log_alpha);
  for (int chunk : {64, 128, 256}) {
    const auto chk = gla_chunkwise(h.q, h.k, h.v, h.log_alpha, {chunk, 16});
    CHECK(relative_error(chk.output, rec.output) < 1e-12);
    CHECK(relative_error(chk.state, rec.state) < 1e-12);
  }
}

TEST_CASE("the intra-chunk scores reproduce the output of a single chunk", "[linear][reference]") {
  // With one chunk and no initial state, o = P V exactly (no inter-chunk term).
  const Head h = random_head(100, 16, 12, 0.3, 31);
  const MatrixD p = gla_chunk_scores(h.q, h.k, h.log_alpha, 128);
  REQUIRE(p.rows() == 100);
  REQUIRE(p.cols() == 128);
  const auto rec = gla_recurrent(h.q, h.k, h.v, h.log_alpha);
  CHECK(relative_error(p.leftCols(100) * h.v, rec.output) < 1e-12);
  for (int t = 0; t < 100; ++t)
    for (int s = t + 1; s < 128; ++s) REQUIRE(p(t, s) == 0);
}

TEST_CASE("score_block classifies the chunk score layout", "[linear][reference]") {
  const ChunkShape shape{64, 16};
  CHECK(score_block(0, 0, 100, shape) == ScoreBlock::diagonal);
  CHECK(score_block(15, 0, 100, shape) == ScoreBlock::diagonal);
  CHECK(score_block(16, 15, 100, shape) == ScoreBlock::inter_sub_chunk);
  CHECK(score_block(16, 16, 100, shape) == ScoreBlock::diagonal);
  CHECK(score_block(16, 17, 100, shape) == ScoreBlock::none);
  CHECK(score_block(70, 3, 100, shape) == ScoreBlock::diagonal);   // chunk 2 starts at 64: key 67
  CHECK(score_block(90, 3, 100, shape) == ScoreBlock::inter_sub_chunk);
  CHECK(score_block(99, 40, 100, shape) == ScoreBlock::none);       // key 104 past the end
}

TEST_CASE("GLA references refuse bad input with the reason", "[linear][reference][bad-input]") {
  const Head h = random_head(20, 4, 3, 0.1, 41);
  const auto fails_with = [](auto&& call, const std::string& text) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find(text) != std::string::npos);
      return;
    }
    FAIL("no error for: " << text);
  };
  MatrixD bad = h.log_alpha;
  bad(3, 2) = 0.25;
  fails_with([&] { gla_recurrent(h.q, h.k, h.v, bad); }, "log_alpha (3, 2) is 0.25");
  bad(3, 2) = std::numeric_limits<double>::quiet_NaN();
  fails_with([&] { gla_chunkwise(h.q, h.k, h.v, bad, {16, 4}); }, "log_alpha (3, 2) is nan");
  MatrixD q_inf = h.q;
  q_inf(0, 1) = std::numeric_limits<double>::infinity();
  fails_with([&] { gla_recurrent(q_inf, h.k, h.v, h.log_alpha); }, "Q (0, 1) is inf");
  fails_with([&] { gla_recurrent(h.q, h.k.leftCols(3), h.v, h.log_alpha); }, "K is 20 x 3, Q is 20 x 4");
  fails_with([&] { gla_recurrent(h.q, h.k, h.v.topRows(19), h.log_alpha); }, "V is 19 x 3");
  fails_with([&] { gla_chunkwise(h.q, h.k, h.v, h.log_alpha, {24, 16}); }, "chunk = 24: must be a positive multiple");
  fails_with([&] { gla_chunkwise(h.q, h.k, h.v, h.log_alpha, {16, 0}); }, "sub_chunk = 0");
  const MatrixD s0 = MatrixD::Zero(3, 3);
  fails_with([&] { gla_recurrent(h.q, h.k, h.v, h.log_alpha, &s0); }, "the initial state is 3 x 3, expected d_k x d_v = 4 x 3");
  fails_with([&] { make_log_gates({.temperature = 0}, 1, 4, 4); }, "temperature = 0");
  fails_with([&] { make_log_gates({}, 1, 0, 4); }, "tokens = 0");
}

TEST_CASE("synthetic gates: log values at most 0, fixed by the seed, per-channel rates", "[linear][gates]") {
  const SyntheticGateSpec spec;
  const auto a = make_log_gates(spec, 2, 300, 32), b = make_log_gates(spec, 2, 300, 32);
  REQUIRE(a.size() == 2);
  CHECK(a[0] == b[0]);
  CHECK(a[0] != a[1]);
  CHECK(a[0].maxCoeff() <= 0);
  // Channels differ in their mean rate (the bias spread): the slowest channel forgets at least 4x
  // slower than the fastest on average.
  const Eigen::RowVectorXf mean = a[0].colwise().mean();
  CHECK(mean.maxCoeff() / mean.minCoeff() < 0.25);
  CHECK(log_sigmoid(-800) == -800);
  CHECK(log_sigmoid(800) == 0);
  CHECK(std::abs(log_sigmoid(0) + std::log(2.0)) < 1e-15);
}
