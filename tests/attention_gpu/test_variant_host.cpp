// The sage2-4b kernel family's host side without a GPU: which experiment variants (their Hopper
// twins) it runs and why not the others, refusals before any CUDA call (the launch record's
// validate included), and attention::prepare_operands against the operands forward() keeps.
#include <catch2/catch.hpp>

#include <bit>
#include <map>
#include <stdexcept>

#include "emulation/attention/forward_operands.hpp"
#include "kernels/attention/variant_attention.hpp"
#include "kernels/attention/variant_launch.hpp"
#include "numerics/synthetic.hpp"
#include "tests/attention_gpu/sage2_4b_variants.hpp"

using namespace lowbit;
using kernels::attention::variant_unsupported;

namespace {

Tensor4 heads_of(const std::vector<MatrixF>& heads, int count, int tokens, int d) {
  Tensor4 t(1, count, tokens, d);
  for (int h = 0; h < count; ++h)
    for (int i = 0; i < tokens; ++i)
      for (int c = 0; c < d; ++c) t.row(0, h, i)[c] = heads[std::size_t(h)](i, c);
  return t;
}

void check_same(const attention::QuantizedHead& a, const attention::QuantizedHead& b) {
  CHECK(a.tensor.codes == b.tensor.codes);
  CHECK(a.tensor.scale_codes == b.tensor.scale_codes);
  CHECK(a.tensor.scales == b.tensor.scales);
  CHECK(a.mean == b.mean);
}

}  // namespace

TEST_CASE("variant family: the experiments' sage2-4b variants run as Hopper twins but products of values") {
  std::map<std::string, std::string> refused;
  for (const tests::VariantSpec& v : tests::sage2_4b_experiment_variants()) {
    // The Ada pipeline itself is refused for its arithmetic.
    const auto ada = variant_unsupported(tests::variant_pipeline(v, 128, false));
    REQUIRE(ada);
    CHECK_THAT(*ada, Catch::Contains("arch sm_89") && Catch::Contains("arch=sm_90"));
    if (auto why = variant_unsupported(tests::variant_pipeline(v, 128, true))) refused[v.name] = *why;
  }
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused["formats: Q,K int8 | P,V e4m3 (products of values)"], Catch::Contains("qk fp32-fma:"));
}

TEST_CASE("variant family: other pipelines are refused with the stage that stops them") {
  const auto twin = [](const char* preset, std::vector<std::string> sets) {
    attention::Pipeline p = attention::preset(preset, 128);
    sets.push_back("arch=sm_90");
    for (const std::string& s : sets) REQUIRE_FALSE(attention::set_stage(p, s));
    return p;
  };
  CHECK_THAT(variant_unsupported(twin("sage2-8b", {})).value_or(""), Catch::Contains("tiling") || Catch::Contains("qk"));
  CHECK_THAT(variant_unsupported(twin("sage2-4b", {"exp2=exact"})).value_or(""), Catch::Contains("exp2 exact"));
  CHECK_THAT(variant_unsupported(twin("sage2-4b", {"block-kv=128"})).value_or(""), Catch::Contains("tiling"));
  CHECK_THAT(variant_unsupported(twin("sage2-4b", {"p=int8:127", "v=int8:per-channel",
                                                   "pv=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32",
                                                   "accumulation=in-place"}))
                 .value_or(""),
             Catch::Contains("in-place"));
  CHECK_THAT(variant_unsupported(twin("sage2-4b", {"p-keys=registers"})).value_or(""), Catch::Contains("p-keys"));
  CHECK_FALSE(variant_unsupported(twin("sage2-4b", {})));
}

TEST_CASE("variant_forward: refusals come before any CUDA call") {
  SyntheticAttentionSpec spec;
  spec.heads = 2;
  spec.tokens = 40;
  spec.dim = 96;
  const AttentionData data = make_synthetic_attention(spec);
  const Tensor4 q = heads_of(data.q, 2, 40, 96), k = heads_of(data.k, 2, 40, 96), v = heads_of(data.v, 2, 40, 96);
  attention::Pipeline ada = attention::preset("sage2-4b", 96);
  CHECK_THROWS_WITH(kernels::attention::variant_forward(ada, q, k, v), Catch::Contains("arch sm_89"));
  attention::Pipeline twin = ada;
  REQUIRE_FALSE(attention::set_stage(twin, "arch=sm_90"));
  CHECK_THROWS_WITH(kernels::attention::variant_forward(twin, q, k, v), Catch::Contains("head dimensions 64 and 128"));
}

TEST_CASE("prepare_operands: the operands that forward prepares to every code and scale and mean") {
  SyntheticAttentionSpec spec;
  spec.heads = 4;
  spec.tokens = 300;
  spec.dim = 64;
  spec.outlier_bias = 40;
  const AttentionData data = make_synthetic_attention(spec);
  const Tensor4 q = heads_of(data.q, 4, 300, 64), k = heads_of(data.k, 2, 300, 64), v = heads_of(data.v, 2, 300, 64);
  for (const tests::VariantSpec& variant : tests::sage2_4b_experiment_variants()) {
    INFO(variant.name);
    const attention::Pipeline p = tests::variant_pipeline(variant, 64, true);
    attention::ForwardOptions options;
    options.causal = true;
    const attention::ForwardResult r = attention::forward(p, q, k, v, options);
    const attention::PreparedOperands ops = attention::prepare_operands(p, q, k, v, options);
    REQUIRE(ops.groups.size() == 2);
    for (std::size_t g = 0; g < 2; ++g) {
      check_same(ops.groups[g].kv.k, r.k[g]);
      check_same(ops.groups[g].kv.v, r.v[g]);
      REQUIRE(ops.groups[g].q.size() == 2);
      for (std::size_t i = 0; i < 2; ++i) check_same(ops.groups[g].q[i].q, r.q[g * 2 + i]);
    }
  }
}

TEST_CASE("prepare_operands: refuses as forward does") {
  SyntheticAttentionSpec spec;
  spec.heads = 3;
  spec.tokens = 20;
  spec.dim = 64;
  const AttentionData data = make_synthetic_attention(spec);
  const Tensor4 q = heads_of(data.q, 3, 20, 64), k = heads_of(data.k, 2, 20, 64), v = heads_of(data.v, 2, 20, 64);
  const attention::Pipeline p = attention::preset("sage2-4b", 64);
  CHECK_THROWS_AS(attention::prepare_operands(p, q, k, v), std::invalid_argument);
  CHECK_THROWS_WITH(attention::prepare_operands(p, q, k, v), Catch::Contains("do not divide"));
}

TEST_CASE("VariantLaunch: validate names the choice or the operand that does not fit") {
  using kernels::attention::PvInstruction;
  using kernels::attention::VariantLaunch;
  VariantLaunch l;
  l.head_dim = 64;
  l.batch = 1;
  l.heads = 2;
  l.kv_heads = 1;
  l.tokens = 130;
  l.keys = 70;
  l.tokens_padded = 256;
  l.keys_padded = 128;
  l.q.resize(2 * 256 * 64);
  l.k.resize(128 * 64);
  l.q_scale.resize(2 * 256);
  l.k_scale.resize(128);
  l.v.resize(128 * 64);
  l.v_scale.resize(64);
  l.lse_bias.resize(2 * 130);
  CHECK_FALSE(l.validate());
  VariantLaunch bad = l;
  bad.head_dim = 96;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("head_dim 96"));
  bad = l;
  bad.pv = PvInstruction::s8;
  bad.in_place = true;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("in_place"));
  bad = l;
  bad.p_per_block = true;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("p_target"));
  bad.p_target = 127;
  CHECK_FALSE(bad.validate());
  bad.in_place = true;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("p_per_block: two-level"));
  bad = l;
  bad.mmas_per_flush = 3;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("mmas_per_flush 3"));
  bad = l;
  bad.keys_padded = 64;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("keys 70 (padded 64)"));
  bad = l;
  bad.smooth_q = true;
  CHECK_THAT(bad.validate().value_or(""), Catch::Contains("q_means: 0 values"));
  CHECK_THROWS_WITH(kernels::attention::run_variant(bad), Catch::Contains("q_means"));
}
