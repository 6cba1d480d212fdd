// The tiled forward pass against the plain one (plain_attention.hpp), bit for bit, for every preset
// on small shapes: GQA, ragged blocks, causal and not, more queries than keys; the sage2-8b
// preset against its recipe; the stages' names and errors.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "emulation/attention/pipeline.hpp"
#include "emulation/mma/gemm.hpp"
#include "tests/attention/plain_attention.hpp"

using namespace lowbit;
using namespace lowbit::attention;

namespace {

// Channel biases (what smoothing removes) plus noise, rounded to fp16 as a model's tensors are.
Tensor4 random_tensor(int batch, int heads, int tokens, int dim, std::uint64_t seed, double bias = 2.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  Tensor4 t(batch, heads, tokens, dim);
  std::vector<double> channel(static_cast<std::size_t>(dim));
  for (double& c : channel) c = bias * normal(rng);
  for (std::size_t i = 0; i < t.size(); ++i)
    t.values[i] = float(_Float16(channel[i % std::size_t(dim)] + normal(rng)));
  return t;
}

std::uint32_t bits(float x) { return std::bit_cast<std::uint32_t>(x); }

// Counts of differing elements between the tiled and the plain results, per stage.
struct Mismatches {
  std::size_t output = 0, lse = 0, rounded = 0, q_codes = 0, q_scales = 0, k_codes = 0, k_scales = 0, v_codes = 0,
              v_scales = 0, means = 0;
};

std::size_t differ(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  std::size_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += bits(a[i]) != bits(b[i]);
  return n;
}

void compare_heads(const std::vector<QuantizedHead>& a, const std::vector<QuantizedHead>& b, std::size_t& codes,
                   std::size_t& scales, std::size_t& means) {
  REQUIRE(a.size() == b.size());
  for (std::size_t h = 0; h < a.size(); ++h) {
    const auto& x = a[h].tensor;
    const auto& y = b[h].tensor;
    REQUIRE(x.codes.rows() == y.codes.rows());
    REQUIRE(x.codes.cols() == y.codes.cols());
    codes += std::size_t((x.codes.array() != y.codes.array()).count());
    scales += x.scale_codes != y.scale_codes || differ(x.scales, y.scales) || differ(x.outer_scales, y.outer_scales);
    means += differ(a[h].mean, b[h].mean);
  }
}

Mismatches compare(const ForwardResult& r, const test::PlainResult& p) {
  Mismatches m;
  m.output = differ(r.output, p.output);
  m.lse = differ(r.lse, p.lse);
  m.rounded = r.output_codes == p.output_codes ? 0 : std::max<std::size_t>(1, r.output_codes.size());
  compare_heads(r.q, p.q, m.q_codes, m.q_scales, m.means);
  compare_heads(r.k, p.k, m.k_codes, m.k_scales, m.means);
  compare_heads(r.v, p.v, m.v_codes, m.v_scales, m.means);
  return m;
}

void require_identical(const Mismatches& m) {
  CHECK(m.output == 0);
  CHECK(m.lse == 0);
  CHECK(m.rounded == 0);
  CHECK(m.q_codes == 0);
  CHECK(m.q_scales == 0);
  CHECK(m.k_codes == 0);
  CHECK(m.k_scales == 0);
  CHECK(m.v_codes == 0);
  CHECK(m.v_scales == 0);
  CHECK(m.means == 0);
}

struct Shape {
  int batch, heads, kv_heads, tokens, keys, dim;
};

// Q and K times qk_magnitude (a power of two: exact).
void differential(const Pipeline& pipeline, const Shape& s, bool causal, std::uint64_t seed, float qk_magnitude = 1.0f) {
  INFO("preset " << pipeline.name << ", shape [" << s.batch << ", " << s.heads << "/" << s.kv_heads << ", " << s.tokens
                 << " x " << s.keys << ", " << s.dim << "], causal " << causal << ", Q and K times " << qk_magnitude);
  Tensor4 q = random_tensor(s.batch, s.heads, s.tokens, s.dim, seed, 0.5);
  Tensor4 k = random_tensor(s.batch, s.kv_heads, s.keys, s.dim, seed + 1, 3.0);
  const Tensor4 v = random_tensor(s.batch, s.kv_heads, s.keys, s.dim, seed + 2, 2.0);
  for (float& x : q.values) x *= qk_magnitude;
  for (float& x : k.values) x *= qk_magnitude;
  const ForwardResult r = forward(pipeline, q, k, v, {.causal = causal, .threads = 2});
  const test::PlainResult p = test::plain_forward(pipeline, q, k, v, causal);
  require_identical(compare(r, p));
  // Not a vacuous agreement: the output is finite and not all zero.
  std::size_t finite = 0, nonzero = 0;
  for (float x : r.output) finite += std::isfinite(x), nonzero += x != 0;
  CHECK(finite == r.output.size());
  CHECK(nonzero > r.output.size() / 2);
}

}  // namespace

// A preset as the plain implementation runs it: the released FlashAttention-2's one-pass kernel
// (sms=0; its split-KV path and combine kernel are checked against the GPU's own outputs, ctest
// thirdparty_replay_sdpa_flash).
Pipeline one_pass(Pipeline p) {
  p.tiling.sms = 0;
  return p;
}

// The head dimension a preset runs at in the ragged shapes: d, or 64 where the preset models a
// released kernel at d = 64 and 128 only.
int ragged_dim(std::string_view name, int d) {
  return name.starts_with("sdpa-flash") || name.starts_with("fa3") ? 64 : d;
}

TEST_CASE("every preset: the tiled forward equals the plain row-by-row one bit for bit", "[attention][differential]") {
  // GQA (4 Q heads on 2 KV heads), two batches, ragged last blocks, head dim 64.
  for (const auto& info : preset_list()) {
    const Pipeline p = one_pass(preset(info.name, 64));
    if (!test::plain_supports(p)) {
      WARN("skipped: " << info.name << " (the plain implementation has no per-block P scale)");
      continue;
    }
    for (bool causal : {false, true}) differential(p, {2, 4, 2, 200, 200, 64}, causal, 11);
  }
}

TEST_CASE("FlashAttention-3's presets at d = 128, with the causal tile and descales: tiled equals plain",
          "[attention][differential][flash3]") {
  for (const char* name : {"fa3-fp8", "fa3-bf16"}) {
    Pipeline p = preset(name, 128);
    for (bool causal : {false, true}) differential(p, {1, 4, 2, 300, 300, 128}, causal, 61);
  }
  // The kernel's own operands: E4M3 values as they are, with descales folded into the scale and output.
  Pipeline p = preset("fa3-fp8", 64);
  for (const char* s : {"q=e4m3:none", "k=e4m3:none", "v=e4m3:none", "descale=0.0625,0.5,3"}) REQUIRE_FALSE(set_stage(p, s));
  differential(p, {2, 4, 1, 250, 250, 64}, true, 62);
  CHECK(p.tiling.kv_block(true) == 160);
  CHECK(preset("fa3-bf16", 64).tiling.kv_block(true) == 128);
  CHECK(preset("fa3-bf16", 64).tiling.kv_block(false) == 192);
}

TEST_CASE("causal masks aligned bottom-right (FlashAttention-3) with fewer or more queries than keys",
          "[attention][differential][flash3]") {
  for (const char* name : {"fa3-fp8", "fa3-bf16"}) {
    const Pipeline p = preset(name, 64);
    differential(p, {1, 2, 1, 150, 400, 64}, true, 81);  // decode-like: the queries are the last 150 keys'
    differential(p, {1, 2, 2, 300, 200, 64}, true, 82);  // more queries: the first 100 rows see no key
  }
  // Bottom-right equals top-left where queries and keys are as many, and shifts the mask otherwise.
  Pipeline top = preset("fa3-bf16", 64);
  REQUIRE_FALSE(set_stage(top, "causal-align=top-left"));
  const Tensor4 q = random_tensor(1, 2, 100, 64, 83, 0.5), k = random_tensor(1, 1, 100, 64, 84, 3.0),
                v = random_tensor(1, 1, 100, 64, 85, 2.0), k2 = random_tensor(1, 1, 180, 64, 86, 3.0),
                v2 = random_tensor(1, 1, 180, 64, 87, 2.0);
  CHECK(forward(top, q, k, v, {.causal = true}).output_codes == forward(preset("fa3-bf16", 64), q, k, v, {.causal = true}).output_codes);
  CHECK(forward(top, q, k2, v2, {.causal = true}).output_codes != forward(preset("fa3-bf16", 64), q, k2, v2, {.causal = true}).output_codes);
  // A row with no visible key: output 0 and LSE -inf, as the kernel writes it.
  const ForwardResult r = forward(preset("fa3-bf16", 64), random_tensor(1, 1, 30, 64, 88, 0.5), random_tensor(1, 1, 20, 64, 89, 3.0),
                                  random_tensor(1, 1, 20, 64, 90, 2.0), {.causal = true});
  CHECK(r.lse[0] == -INFINITY);
  CHECK(r.lse[9] == -INFINITY);
  CHECK(std::isfinite(r.lse[10]));
  CHECK(std::all_of(r.output.begin(), r.output.begin() + 10 * 64, [](float x) { return x == 0.0f; }));
}

TEST_CASE("FlashAttention-3's descales per (batch, KV head): applied per head, bad ones named", "[attention][flash3]") {
  Pipeline p = preset("fa3-fp8", 64);
  for (const char* s : {"q=e4m3:none", "k=e4m3:none", "v=e4m3:none"}) REQUIRE_FALSE(set_stage(p, s));
  Tensor4 q = random_tensor(1, 4, 100, 64, 71, 0.5), k = random_tensor(1, 2, 100, 64, 72, 3.0);
  const Tensor4 v = random_tensor(1, 2, 100, 64, 73, 2.0);
  // Per-head descales equal the stage's where they are the same numbers: KV head 1 against a run with
  // descale=0.25,0.5,2 on its heads alone.
  const std::vector<float> descales{1, 0.25f, 1, 0.5f, 1, 2};  // [3, 1, 2]
  const ForwardResult r = forward(p, q, k, v, {.descales = descales});
  Pipeline staged = p;
  REQUIRE_FALSE(set_stage(staged, "descale=0.25,0.5,2"));
  Tensor4 q1(1, 2, 100, 64), k1(1, 1, 100, 64), v1(1, 1, 100, 64);
  std::copy(q.values.begin() + 2 * 100 * 64, q.values.end(), q1.values.begin());
  std::copy(k.values.begin() + 100 * 64, k.values.end(), k1.values.begin());
  std::copy(v.values.begin() + 100 * 64, v.values.end(), v1.values.begin());
  const ForwardResult r1 = forward(staged, q1, k1, v1);
  CHECK(std::equal(r1.output_codes.begin(), r1.output_codes.end(), r.output_codes.begin() + 2 * 100 * 64));
  CHECK(std::equal(r1.lse.begin(), r1.lse.end(), r.lse.begin() + 2 * 100));
  CHECK_THROWS_WITH(forward(p, q, k, v, {.descales = {1, 2, 3}}), Catch::Contains("[3, batch, kv_heads] = [3, 1, 2]"));
  CHECK_THROWS_WITH(forward(p, q, k, v, {.descales = {1, 1, 1, 0, 1, 1}}), Catch::Contains("at [1, 0, 1]"));
  CHECK_THROWS_WITH(forward(staged, q, k, v, {.descales = descales}), Catch::Contains("given twice"));
  CHECK_THROWS_WITH(forward(preset("fa3-fp8", 64), q, k, v, {.descales = descales}), Catch::Contains("granularity none"));
}

TEST_CASE("ragged shapes: head dims padded to the instruction's k, more queries than keys, descending KV order",
          "[attention][differential]") {
  // d = 80 pads to 96 (k32) or 128 (k64); 150 keys for 200 queries; Hadamard needs a power of two.
  for (const auto& info : preset_list()) {
    if (info.name == std::string_view("hadamard")) continue;
    const int d = ragged_dim(info.name, 80);
    Pipeline p = one_pass(preset(info.name, d));
    differential(p, {1, 2, 1, 200, 150, d}, true, 21);
    differential(p, {1, 2, 2, 70, 150, d}, false, 22);
    REQUIRE_FALSE(set_stage(p, "kv-order=descending"));
    if (p.validate(d, d)) {  // SageAttention2's released kernel runs its KV blocks ascending, and says so
      CHECK(sage2_released(p.softmax));
      continue;
    }
    differential(p, {1, 2, 1, 200, 150, d}, true, 23);
  }
  Pipeline h = preset("hadamard", 128);
  differential(h, {1, 2, 1, 130, 150, 128}, true, 24);
  // d = 100: V's 100 columns run on the wgmma n = 104 instruction.
  const Pipeline s8 = preset("sage2-8b", 100);
  CHECK(s8.pv_instruction(100).atom.n == 104);
  differential(s8, {1, 1, 1, 160, 160, 100}, true, 25);
}

TEST_CASE("stage variants: flush intervals, Q and V smoothing, other granularities and exponentials", "[attention][differential]") {
  const std::vector<std::pair<const char*, std::vector<const char*>>> variants{
      {"sage2-8b", {"accumulation=two-level:1"}},
      {"sage2-8b", {"accumulation=two-level:2", "smooth-v=on", "smooth-q=on"}},
      {"sage2-8b", {"q=int8:per-warp", "k=int8:per-token", "exp2=poly6", "key-mean-chunk=0"}},
      {"sage2-8b", {"q=int8:per-block", "k=int8:per-tensor", "exp2=exact", "block-q=64"}},
      {"sage2-8b", {"v=e4m3:per-tensor", "p=e4m3:256", "accumulation=in-place"}},
      {"sage2-4b", {"smooth-v=on", "accumulation=two-level:1"}},
      {"fa2-fp16", {"accumulation=two-level:0", "exp2=poly5"}},
      {"fp32", {"accumulation=two-level", "block-kv=32"}},
      {"sage3", {"p=e2m1:microscale"}},
      {"fa3-fp8", {"softmax=contract", "block-kv=128", "v=e4m3:per-channel", "accumulation=two-level:2", "p=e4m3:448"}},
      {"smoothattn", {"transform=smoothattn:0.3", "smooth-k=on"}},
      // The fused exponent argument on the other units and accumulators (sage2-8b-ex2 has it with MUFU.EX2).
      {"sage2-8b", {"exp2-argument=fused"}},
      {"sage2-8b", {"exp2-argument=fused", "exp2=exact", "kv-order=descending"}},
      {"fa2-fp16", {"exp2-argument=fused", "exp2=sm90-ex2"}},
      // The row sums by the P V instruction, over whole blocks and per flush interval.
      {"sage2-8b-ex2", {"row-sum=pv"}},
      {"sage2-8b", {"row-sum=pv", "accumulation=two-level:1", "kv-order=descending", "p-keys=registers"}},
      {"sage2-4b", {"row-sum=pv"}},
  };
  for (const auto& [name, sets] : variants) {
    Pipeline p = preset(name, 64);
    for (const char* s : sets) {
      INFO(s);
      REQUIRE_FALSE(set_stage(p, s));
    }
    differential(p, {1, 4, 1, 190, 190, 64}, true, 31);
  }
}

TEST_CASE("fused exponent argument: a pair's scale that rounds to 0 leaves masked keys at 0, as the rounded steps",
          "[attention][differential][sage2-8b]") {
  // Q and K near 2^-124: q_scale k_scale is about 2^-258, 0 in fp32. The rounded steps score every
  // key 0, so P is 448 on every visible key; the fused ones must agree (fused_scale keeps a masked
  // key's -inf from turning into NaN), and tiled and plain must agree with each other.
  const float tiny = 0x1p-124f;
  const Pipeline fused = preset("sage2-8b-ex2", 64);
  Pipeline rounded = preset("sage2-8b", 64);
  REQUIRE_FALSE(set_stage(rounded, "exp2=sm90-ex2"));
  for (bool causal : {false, true}) {
    differential(fused, {1, 2, 1, 150, 150, 64}, causal, 51, tiny);
    Tensor4 q = random_tensor(1, 2, 150, 64, 52, 0.5), k = random_tensor(1, 1, 150, 64, 53, 3.0);
    const Tensor4 v = random_tensor(1, 1, 150, 64, 54, 2.0);
    for (float& x : q.values) x *= tiny;
    for (float& x : k.values) x *= tiny;
    const ForwardResult a = forward(fused, q, k, v, {.causal = causal}), b = forward(rounded, q, k, v, {.causal = causal});
    CHECK(differ(a.output, b.output) == 0);
    CHECK(differ(a.lse, b.lse) == 0);
  }
}

TEST_CASE("products of values, integer P, MX P: the tiled forward equals the plain one bit for bit",
          "[attention][differential]") {
  const std::vector<std::pair<const char*, std::vector<const char*>>> variants{
      // Error attribution: one operand quantized, the other exact, the instruction's groups kept.
      {"sage2-8b", {"k=fp32:none", "qk=fp32-fma:wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8"}},
      {"sage2-8b", {"q=fp32:none", "qk=wide:wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8"}},
      {"sage2-8b-ex2", {"k=fp32:none", "qk=fp32-fma:wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8"}},
      // The FP22 accumulator alone (P, V exact), flushed per block and per MMA, and in place.
      {"sage2-8b", {"p=fp32:1", "v=fp32:none", "pv=wide:wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3"}},
      {"sage2-8b", {"p=fp32:1", "pv=wide:wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3", "accumulation=two-level:1"}},
      {"fa3-fp8", {"softmax=contract", "block-kv=128", "v=fp32:none", "pv=wide:wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3"}},
      {"sage2-4b", {"pv=wide:mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"}},
      {"sage2pp", {"pv=wide:mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16"}},
      // Quantized P and V with exact products; NVFP4 Q, K on fp32 fmas (block scales folded in).
      {"sage2-8b", {"pv=fp32-fma:wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3", "accumulation=two-level:2"}},
      {"sage3", {"qk=fp32-fma", "pv=fp32-fma"}},
      {"sage3", {"k=fp32:none", "p=e2m1:microscale", "qk=fp32-fma", "pv=wide:mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"}},
      // INT8 P at 127 and INT8 V on the integer MMA (SageAttention2 Table 6's INT8 row).
      {"sage2-4b", {"p=int8:127", "v=int8:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"}},
      {"sage2-4b", {"p=int8:127", "v=int8:per-channel", "pv=fp32-fma"}},
      // ... with P truncated (a C cast) instead of rounded.
      {"sage2-4b", {"p=int8:127:toward-zero", "v=int8:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"}},
      // MXFP4 Q, K, P, V (SageAttention3 Table 1a's MXFP4).
      {"sage3",
       {"q=e2m1:mx", "k=e2m1:mx", "v=e2m1:mx", "p=e2m1:mx",
        "qk=mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
        "pv=mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"}},
  };
  for (const auto& [name, sets] : variants) {
    Pipeline p = preset(name, 64);
    for (const char* s : sets) {
      INFO(name << ": " << s);
      REQUIRE_FALSE(set_stage(p, s));
    }
    INFO(name);
    REQUIRE_FALSE(p.validate(64, 64));
    differential(p, {1, 4, 2, 190, 190, 64}, true, 41);
  }
}

TEST_CASE("products of values: what cannot run is named", "[attention][stages]") {
  Pipeline p = preset("sage2-8b", 64);
  REQUIRE_FALSE(set_stage(p, "qk=fp32-fma"));
  const auto why = p.validate(64, 64);
  REQUIRE(why);
  CHECK(why->find("per-thread/per-warp groups come from the QK instruction") != std::string::npos);
  Pipeline q = preset("sage2-8b", 64);
  REQUIRE_FALSE(set_stage(q, "p=int8:127"));
  REQUIRE(q.validate(64, 64));
  CHECK(q.validate(64, 64)->find("but P is int8") != std::string::npos);
  Pipeline r = preset("sage3", 64);
  CHECK(set_stage(r, "p=e2m1:two-level") == std::nullopt);
  REQUIRE_FALSE(set_stage(r, "pv=fp32-fma:x"));
  CHECK(r.validate(64, 64));  // an unknown instruction is named, not thrown
  CHECK(set_stage(r, "qk=wide:"));
  CHECK(set_stage(r, "pv=fp32-fma:fp32-fma"));
  Pipeline m = preset("sage3", 64);
  REQUIRE_FALSE(set_stage(m, "p=e2m1:mx"));
  CHECK(m.validate(64, 64)->find("P's mx blocks are 1x32 in ue8m0") != std::string::npos);
  Pipeline t = preset("sage3", 64);
  REQUIRE_FALSE(set_stage(t, "p=e4m3:mx"));
  REQUIRE_FALSE(set_stage(t, "pv=fp32-fma"));
  CHECK_FALSE(t.validate(64, 64));
  for (const auto& [stage, value] : stage_values(t))
    if (stage == "p") CHECK(value == "e4m3:mx");
    else if (stage == "pv") CHECK(value == "fp32-fma");
}

TEST_CASE("sage2-8b reads the Hopper recipe: tiling, thread groups, K mean chunks, exp2, P's scale", "[attention][sage2-8b]") {
  for (int d : {64, 128}) {
    const Sage2HopperRecipe r = sage2_8b_hopper(d);
    const Pipeline p = preset("sage2-8b", d);
    REQUIRE_FALSE(p.validate(d, d));
    CHECK(p.tiling.block_q == r.block_q);
    CHECK(p.tiling.block_kv == r.block_kv);
    CHECK(p.tiling.warps == r.consumer_warps);
    CHECK(p.tiling.kv_order == r.kv_order);
    CHECK(p.smoothing.key_mean_chunk == r.key_mean_chunk);
    CHECK(p.exponential.exact == false);
    CHECK(p.exponential.exp2.unit == r.exp2.unit);
    CHECK(p.exponential.exp2.poly.degree == r.exp2.poly.degree);
    CHECK(std::memcmp(p.exponential.exp2.poly.c, r.exp2.poly.c, sizeof r.exp2.poly.c) == 0);
    CHECK(bits(p.p.log2_scale) == bits(r.p_log2_scale));
    // The per-thread groups the pipeline quantizes with are the recipe's tiling's.
    const quant::ThreadTiling mine = p.qk_tiling(), recipe = r.qk_tiling();
    for (auto scope : {quant::GroupScope::thread, quant::GroupScope::warp}) {
      const quant::QkGroups a = quant::derive_groups(mine, scope), b = quant::derive_groups(recipe, scope);
      CHECK(a.q.count == b.q.count);
      CHECK(a.k.count == b.k.count);
      CHECK(a.q.group_of_row == b.q.group_of_row);
      CHECK(a.k.group_of_row == b.k.group_of_row);
    }
    CHECK(p.quant_spec(Role::q).grouping.row_group_of == quant::grouping::per_thread(recipe, quant::Operand::q).row_group_of);
    CHECK(p.quant_spec(Role::k).grouping.row_group_of == quant::grouping::per_thread(recipe, quant::Operand::k).row_group_of);
    // Its instructions are the recorded Hopper ones.
    CHECK(p.qk_instruction().atom.name.view() == "wgmma.mma_async.sync.aligned.m" + std::to_string(64) + "n" +
                                              std::to_string(r.block_kv) + "k32.s32.s8.s8");
    CHECK(p.pv_instruction(d).atom.name.view() ==
          "wgmma.mma_async.sync.aligned.m64n" + std::to_string(d) + "k32.f32.e4m3.e4m3");
    CHECK(p.pv_instruction(d).model.fused.rounding == mma::OutputRounding::rz_e8m13);
  }
}

TEST_CASE("The kernels' exp2 names select the same unit in the recipe, the presets and --set exp2=", "[attention][sage2-8b]") {
  for (const auto& [name, unit] : kKernelExp2Units) {
    INFO(name);
    CHECK(kernel_exp2_unit(name) == unit);
    CHECK(kernel_exp2_name(unit) == name);
    for (int d : {64, 128}) {
      const Pipeline named = preset(sage2_8b_preset(unit), d);
      CHECK(named.exponential.exp2.unit == unit);
      CHECK(sage2_8b_hopper(d, unit).exp2.unit == unit);
      Pipeline set = preset("sage2-8b", d);
      REQUIRE_FALSE(set_stage(set, "exp2=" + std::string(name)));
      CHECK(set.exponential.exact == named.exponential.exact);
      CHECK(set.exponential.exp2.unit == named.exponential.exp2.unit);
      CHECK(set.exponential.exp2.poly.degree == named.exponential.exp2.poly.degree);
      // The exponent's argument is the recipe's too: fused with MUFU.EX2 (SageAttention2's kernel),
      // the rounded score with the polynomial; with it set, the stages read the same.
      CHECK(named.exponential.argument == sage2_8b_hopper(d, unit).exp_argument);
      CHECK(named.exponential.fused() == (unit == steps::Exp2Unit::sm90_ex2));
      REQUIRE_FALSE(set_stage(set, named.exponential.fused() ? "exp2-argument=fused" : "exp2-argument=rounded"));
      CHECK(stage_values(set) == stage_values(named));
    }
  }
  CHECK(kernel_exp2_names() == std::vector<std::string>{"poly5", "sm90-ex2"});
  CHECK_FALSE(kernel_exp2_unit("poly6"));  // the pipeline's, not a kernel's
  CHECK_FALSE(kernel_exp2_unit("exact"));
  CHECK_FALSE(kernel_exp2_unit(""));
}

TEST_CASE("sage2-8b stages hold what the contract says: K mean, INT8 codes, P at 448, LSE", "[attention][sage2-8b]") {
  const int d = 64, n = 300;
  const Tensor4 q = random_tensor(1, 1, n, d, 41, 0.5), k = random_tensor(1, 1, n, d, 42, 3.0),
                v = random_tensor(1, 1, n, d, 43, 2.0);
  const Pipeline p = preset("sage2-8b", d);
  const ForwardResult r = forward(p, q, k, v);
  // MACs: 300 query rows x 3 KV blocks of 128 keys x (64 for Q K^T + 64 for P V).
  CHECK(r.macs == 300u * 384u * 128u);
  CHECK(forward(p, q, k, v, {.causal = true}).macs == (128u * 128u + 128u * 256u + 44u * 384u) * 128u);
  // The K mean: double sums over runs of key_mean_chunk keys, added in order, rounded once.
  const int chunk = sage2_8b_hopper(d).key_mean_chunk;
  REQUIRE(r.k[0].mean.size() == std::size_t(d));
  for (int c = 0; c < d; ++c) {
    double sum = 0;
    for (int start = 0; start < n; start += chunk) {
      double part = 0;
      for (int t = start; t < std::min(n, start + chunk); ++t) part += k.row(0, 0, t)[c];
      sum += part;
    }
    CHECK(bits(r.k[0].mean[std::size_t(c)]) == bits(float(sum / n)));
  }
  // Q, K codes are INT8 within [-127, 127], K's padded keys zero; V's scales amax / 448 per channel.
  const auto& kc = r.k[0].tensor;
  CHECK(kc.codes.rows() == 384);  // 300 keys in blocks of 128
  CHECK((kc.codes.bottomRows(84).array() == 0).all());
  for (int c = 0; c < d; ++c) {
    float amax = 0;
    for (int t = 0; t < n; ++t) amax = std::max(amax, std::fabs(v.row(0, 0, t)[c]));
    CHECK(r.v[0].tensor.scales[std::size_t(c)] == amax / 448.0f);
  }
  // The LSE is ln(sum_j exp(q.k_j / sqrt(d))) (K smoothed: the row bias q.kbar / sqrt(d) put back) up
  // to the quantization: within 0.02 of float64's.
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    double m = -1e300;
    std::vector<double> s(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      double dot = 0;
      for (int c = 0; c < d; ++c)
        dot += double(q.row(0, 0, i)[c]) * double(k.row(0, 0, j)[c]);
      s[std::size_t(j)] = dot / std::sqrt(double(d));
      m = std::max(m, s[std::size_t(j)]);
    }
    double sum = 0;
    for (double x : s) sum += std::exp(x - m);
    worst = std::max(worst, std::fabs(double(r.lse[std::size_t(i)]) - (m + std::log(sum))));
  }
  CHECK(worst < 0.02);
}

// One query, two keys: scores 0 and -x / sqrt(64) with x = 7.35, so the smaller probability is
// 127 exp(-0.91875) = 50.67 of 127 (or its block's amax 1 is 127 codes). V's rows are one-hot, so
// INT8 per-channel V is exact and the output's channels 1 and 0 stand in the ratio of P's two codes:
// 51 : 127 rounded to nearest, 50 : 127 truncated (the maximum itself may truncate to 126: exp2 of
// the rounded log2 127 can fall under 127).
TEST_CASE("INT8 P rounded or truncated, static or per block: the output carries the codes 51 or 50", "[attention][stages]") {
  Tensor4 q(1, 1, 1, 64), k(1, 1, 2, 64), v(1, 1, 2, 64);
  q.values[0] = 7.35f;
  k.values[64] = -1.0f;
  v.values[0] = 1.0f;
  v.values[64 + 1] = 1.0f;
  const double p1 = 127 * std::exp(-7.35 / 8);
  REQUIRE(p1 == Approx(50.67).margin(0.01));  // far from 50, 50.5 and 51: rounding decides the code
  for (const char* scale : {"127", "per-block"}) {
    for (const char* rounding : {"", ":toward-zero"}) {
      Pipeline p = preset("fp32", 64);
      for (const std::string s : {std::string("p=int8:") + scale + rounding, std::string("v=int8:per-channel"),
                                  std::string("pv=fp32-fma"), std::string("accumulation=two-level"),
                                  std::string("output=fp32")})
        REQUIRE_FALSE(set_stage(p, s));
      REQUIRE_FALSE(p.validate(64, 64));
      const ForwardResult r = forward(p, q, k, v, {.threads = 1});
      const double ratio = double(r.output[1]) / double(r.output[0]);
      INFO("p=int8:" << scale << rounding << ": output " << r.output[0] << ", " << r.output[1]);
      if (*rounding == '\0') {
        CHECK(ratio == Approx(51.0 / 127).epsilon(1e-6));
      } else {
        const bool truncated = ratio == Approx(50.0 / 127).epsilon(1e-6) || ratio == Approx(50.0 / 126).epsilon(1e-6);
        CHECK(truncated);
      }
    }
  }
}

TEST_CASE("stages by name: every preset's values read back to the same pipeline", "[attention][stages]") {
  for (const auto& info : preset_list()) {
    INFO(info.name);
    const Pipeline p = preset(info.name, 64);
    REQUIRE_FALSE(p.validate(64, 64));
    Pipeline q = preset("fp32", 64);
    for (const auto& [stage, value] : stage_values(p)) {
      INFO(stage << "=" << value);
      CHECK_FALSE(set_stage(q, stage + "=" + value));
    }
    CHECK(stage_values(q) == stage_values(p));
    CHECK(bits(q.p.log2_scale) == bits(p.p.log2_scale));
    CHECK(q.q.target == p.q.target);
    CHECK(q.v.target == p.v.target);
    CHECK(q.exponential.exp2.unit == p.exponential.exp2.unit);
    CHECK(std::memcmp(q.exponential.exp2.poly.c, p.exponential.exp2.poly.c, sizeof p.exponential.exp2.poly.c) == 0);
  }
}

TEST_CASE("stages: unknown names and values, impossible combinations", "[attention][stages][bad-input]") {
  Pipeline p = preset("sage2-8b", 128);
  CHECK_THAT(*set_stage(p, "nonsense"), Catch::Contains("is not STAGE=VALUE"));
  CHECK_THAT(*set_stage(p, "flush=1"), Catch::Contains("unknown stage 'flush'"));
  CHECK_THAT(*set_stage(p, "block-q=-3"), Catch::Contains("not a whole number >= 1"));
  CHECK_THAT(*set_stage(p, "q=int8"), Catch::Contains("expected FORMAT:GRANULARITY"));
  CHECK_THAT(*set_stage(p, "q=int9x:per-token"), Catch::Contains("format 'int9x'"));
  CHECK_THAT(*set_stage(p, "p=e4m3:lots"), Catch::Contains("is not P's maximum"));
  CHECK_THAT(*set_stage(p, "accumulation=sideways"), Catch::Contains("not two-level[:F] or in-place"));
  CHECK_THAT(*set_stage(p, "smooth-k=maybe"), Catch::Contains("not on or off"));
  CHECK_THAT(*set_stage(p, "output=int8"), Catch::Contains("not fp32, fp16 or bf16"));
  CHECK_THAT(*set_stage(p, "exp2-argument=fma"), Catch::Contains("not rounded or fused"));
  const auto invalid = [](std::vector<const char*> sets, const char* why) {
    Pipeline x = preset("sage2-8b", 128);
    for (const char* s : sets) REQUIRE_FALSE(set_stage(x, s));
    const auto error = x.validate(128, 128);
    REQUIRE(error);
    CHECK_THAT(*error, Catch::Contains(why));
  };
  invalid({"q=int8:per-channel"}, "Q cannot be quantized per-channel");
  invalid({"v=e4m3:per-token"}, "V cannot be quantized per-token");
  invalid({"q=int8:none"}, "needs a scale");
  invalid({"qk=wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8"}, "computes 64 keys per instruction; block-kv is 128");
  invalid({"pv=mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"}, "multiplies fp16 x fp16, but P is e4m3");
  invalid({"qk=wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s9"}, "not modeled");
  invalid({"p=e2m1:two-level"}, "multiplies e4m3 x e4m3, but P is e2m1");
  invalid({"p=fp16:1"}, "but P is fp16");
  invalid({"accumulation=in-place", "p=e4m3:per-block"}, "in-place accumulation needs P's static scale");
  invalid({"p=e4m3:448:toward-zero"}, "the FP8 and FP4 casts (cvt.rn.satfinite) round to nearest only");
  invalid({"p=int8:127:toward-positive"}, "rounds to nearest-even or toward-zero");
  invalid({"p=e2m1:two-level:toward-zero"}, "P's rounding applies to a static or per-block scale");
  // A rounding reads back as written; nearest-even is the default, left out.
  for (const char* text : {"int8:127:toward-zero", "int8:per-block:toward-zero", "fp16:1:toward-zero", "int8:127"}) {
    Pipeline x = preset("sage2-4b", 64);
    REQUIRE_FALSE(set_stage(x, std::string("p=") + text));
    for (const auto& [stage, value] : stage_values(x))
      if (stage == "p") CHECK(value == text);
  }
  CHECK_THAT(*set_stage(p, "p=int8:toward-zero"), Catch::Contains("expected FORMAT:MAX"));
  invalid({"exp2-argument=fused", "smooth-q=on"}, "fused needs smooth-q=off");
  CHECK_THAT(*preset("hadamard", 80).validate(80, 80), Catch::Contains("power-of-two head dimension (d = 80)"));
  CHECK_THROWS_WITH(preset("sage9", 64), Catch::Contains("unknown preset 'sage9' (presets: fp32, fa2-fp16"));
}

TEST_CASE("forward: shapes that do not fit and NaN/Inf are named", "[attention][bad-input]") {
  const Pipeline p = preset("sage2-8b", 64);
  const Tensor4 q = random_tensor(1, 4, 100, 64, 1), k = random_tensor(1, 2, 100, 64, 2), v = random_tensor(1, 2, 100, 64, 3);
  const ForwardOptions named{.q_name = "q.npy", .k_name = "k.npy", .v_name = "v.npy"};
  CHECK_THROWS_WITH(forward(p, q, random_tensor(2, 2, 100, 64, 2), v, named), Catch::Contains("batch sizes differ"));
  CHECK_THROWS_WITH(forward(p, q, random_tensor(1, 3, 100, 64, 2), v, named),
                    Catch::Contains("head counts differ: k.npy [1, 3, 100, 64], v.npy [1, 2, 100, 64]"));
  CHECK_THROWS_WITH(forward(p, random_tensor(1, 3, 100, 64, 1), random_tensor(1, 2, 100, 64, 2), v, named),
                    Catch::Contains("q.npy has 3 heads, which 2 heads of K and V do not divide"));
  CHECK_THROWS_WITH(forward(p, q, k, random_tensor(1, 2, 99, 64, 3), named), Catch::Contains("token counts differ"));
  CHECK_THROWS_WITH(forward(p, random_tensor(1, 4, 100, 32, 1), k, v, named), Catch::Contains("head dimensions differ"));
  Tensor4 bad = k;
  bad.row(0, 1, 7)[5] = std::nanf("");
  bad.row(0, 0, 9)[0] = -INFINITY;
  CHECK_THROWS_WITH(forward(p, q, bad, v, named),
                    Catch::Contains("k.npy: 2 non-finite values (1 NaN, 1 Inf), the first at [0, 0, 9, 0] (Inf)"));
  Tensor4 ragged = v;
  ragged.values.pop_back();
  CHECK_THROWS_WITH(forward(p, q, k, ragged, named), Catch::Contains("v.npy: empty, or holds 12799 values"));
  Pipeline broken = p;
  REQUIRE_FALSE(set_stage(broken, "q=int4:per-thread"));
  CHECK_THROWS_WITH(forward(broken, q, k, v, named), Catch::Contains("pipeline sage2-8b: QK instruction"));
  // An unsigned V format would clip every negative value to 0 (cosine 0.15 before it was refused).
  Pipeline unsigned_v = p;
  REQUIRE_FALSE(set_stage(unsigned_v, "pv=fp32-fma"));
  REQUIRE_FALSE(set_stage(unsigned_v, "v=uint3:per-channel"));
  REQUIRE_FALSE(unsigned_v.validate(64, 64));
  CHECK_THROWS_WITH(forward(unsigned_v, q, k, v, named),
                    Catch::Contains("V: ") && Catch::Contains("negative values") && Catch::Contains("unsigned uint3"));
}

TEST_CASE("descending KV blocks: a causal row meets its masked blocks first and scales its empty sums by 0, not NaN",
          "[attention][kernel-steps]") {
  // Row 0 sees key 0 alone, scored q.k / sqrt(d) log2(e) = -4096 / 8 * 1.44 = -739 in log2 units. Run
  // descending, its first blocks are all masked; were their offset carried (0 - log2 448), the block
  // of key 0 would rescale by exp2(739) = +inf (MUFU.EX2) and 0 * inf would give NaN sums.
  constexpr int d = 64, n = 200;
  Tensor4 q = random_tensor(1, 1, n, d, 41, 0.0), k = random_tensor(1, 1, n, d, 42, 0.0), v = random_tensor(1, 1, n, d, 43);
  for (int c = 0; c < d; ++c) q.values[std::size_t(c)] = 8.0f, k.values[std::size_t(c)] = -8.0f;
  for (const char* exp2 : {"exp2=sm90-ex2", "exp2=poly5", "exp2=exact"}) {
    INFO(exp2);
    Pipeline ascending = preset("sage2-4b", d);
    REQUIRE_FALSE(set_stage(ascending, exp2));
    Pipeline descending = ascending;
    REQUIRE_FALSE(set_stage(descending, "kv-order=descending"));
    ForwardOptions causal;
    causal.causal = true;
    const ForwardResult up = forward(ascending, q, k, v, causal);
    const ForwardResult down = forward(descending, q, k, v, causal);
    CHECK(std::isfinite(down.lse[0]));
    CHECK(std::bit_cast<std::uint32_t>(down.lse[0]) == std::bit_cast<std::uint32_t>(up.lse[0]));
    for (std::size_t c = 0; c < std::size_t(d); ++c) CHECK(down.output_codes[c] == up.output_codes[c]);
  }
}

TEST_CASE("row-sum=pv: l from the P V instruction's sum of P's codes, not the lanes', and only where it is defined",
          "[attention][sage2-8b]") {
  const Tensor4 q = random_tensor(1, 2, 300, 128, 91, 0.5), k = random_tensor(1, 1, 300, 128, 92, 3.0),
                v = random_tensor(1, 1, 300, 128, 93, 2.0);
  const Pipeline lanes = preset("sage2-8b-ex2", 128);
  Pipeline pv = lanes;
  REQUIRE_FALSE(set_stage(pv, "row-sum=pv"));
  CHECK(stage_values(pv) != stage_values(lanes));
  for (bool causal : {false, true}) {
    const ForwardResult a = forward(lanes, q, k, v, {.causal = causal}), b = forward(pv, q, k, v, {.causal = causal});
    // Another l, so other outputs and LSEs; the outputs' numerators (o) are the same P V either way.
    std::size_t outputs = 0, lses = 0;
    for (std::size_t i = 0; i < a.output_codes.size(); ++i) outputs += a.output_codes[i] != b.output_codes[i];
    for (std::size_t i = 0; i < a.lse.size(); ++i) lses += bits(a.lse[i]) != bits(b.lse[i]);
    CHECK(outputs > a.output_codes.size() / 10);
    CHECK(lses > a.lse.size() / 10);
    // Both are attention: the sums differ by P's rounding to E4M3 (at most 2^-4 relative, every p rounded
    // the same way) and the FP22 sum's truncations (2^-13 relative a k step, 4 steps a block).
    const float bound = float(std::log1p(0x1p-4) + 4 * 0x1p-13);
    float largest = 0;
    for (std::size_t i = 0; i < a.lse.size(); ++i) largest = std::max(largest, std::abs(a.lse[i] - b.lse[i]));
    CHECK(largest < bound);
    CHECK(largest > 0);
  }
  for (const char* other : {"accumulation=in-place", "pv=fp32-fma:wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3",
                            "p=e4m3:per-block"}) {
    Pipeline p = pv;
    INFO(other);
    REQUIRE_FALSE(set_stage(p, other));
    const auto why = p.validate(128, 128);
    REQUIRE(why);
    CHECK_THAT(*why, Catch::Contains("row-sum=pv"));
  }
  Pipeline fa3 = preset("fa3-fp8", 128);
  REQUIRE_FALSE(set_stage(fa3, "row-sum=pv"));
  CHECK(fa3.validate(128, 128));
  CHECK(set_stage(pv, "row-sum=quad"));
}
