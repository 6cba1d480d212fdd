// kernels/attention/gpu_forward.hpp: which pipelines, inputs and options the dispatcher says a
// kernel computes bit for bit, and the reason it gives where none does (gpu_forward refuses those
// before touching a GPU), without a GPU; on a Hopper GPU, the sage2-8b kernel's stage choices (in
// place, smooth V) against attention::forward, every output code and LSE bit (exit 77, skipped,
// elsewhere). The presets' kernels against the emulation are the other GPU ctests'.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "emulation/attention/pipeline.hpp"
#include "kernels/attention/gpu_forward.hpp"
#include "kernels/device.hpp"

namespace {

namespace la = lowbit::attention;
using lowbit::Tensor4;
using lowbit::kernels::attention::gpu_forward;
using lowbit::kernels::attention::gpu_unsupported;

// Values of fp16 and of bf16 alike (multiples of 1/8 below 16).
Tensor4 inputs(int heads, int tokens, int dim, int salt) {
  Tensor4 t(1, heads, tokens, dim);
  for (std::size_t i = 0; i < t.values.size(); ++i) t.values[i] = float(int((i * 37 + std::size_t(salt) * 11) % 97) - 48) / 8.0f;
  return t;
}

la::Pipeline with(const std::string& preset, int dim, const std::vector<const char*>& sets) {
  la::Pipeline p = la::preset(preset, dim);
  for (const char* s : sets) REQUIRE_FALSE(la::set_stage(p, s));
  return p;
}

const la::ForwardOptions kOptions{.causal = true, .threads = 1, .keep_operands = false};

// The sage2-8b kernel's stage choices beside the presets': in place, smooth V, both.
const std::vector<std::vector<const char*>> kStageChoices{
    {"accumulation=in-place"}, {"smooth-v=on"}, {"accumulation=in-place", "smooth-v=on"}};

std::string joined(const std::vector<const char*>& sets) {
  std::string out;
  for (const char* s : sets) out += (out.empty() ? "" : " ") + std::string(s);
  return out;
}

// fp16 values (multiples of 1/64 within +-8, plus `bias`) from a seeded generator: V with a bias
// over the keys is what smooth V takes out.
Tensor4 random_inputs(int batch, int heads, int tokens, int dim, std::uint64_t seed, float bias = 0.0f) {
  Tensor4 t(batch, heads, tokens, dim);
  std::uint64_t state = seed * 0x9e3779b97f4a7c15u + 1;
  for (float& x : t.values) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    x = float(int(state >> 33) % 1024 - 512) / 64.0f + bias;
  }
  return t;
}

// The kernels run on sm_90 only: elsewhere the test case exits 77, which ctest reports as skipped.
void require_hopper_gpu() {
  const auto gpu = lowbit::kernels::first_gpu();
  if (gpu && gpu->arch == "sm_90") return;
  std::puts("SKIPPED: no Hopper GPU (sm_90) found");
  std::exit(77);
}

}  // namespace

TEST_CASE("gpu_unsupported: the sage2-8b presets at d = 64 and 128 run on the kernel") {
  for (int d : {64, 128})
    for (const char* preset : {"sage2-8b", "sage2-8b-ex2"}) {
      INFO(preset << " d = " << d);
      const Tensor4 q = inputs(2, 130, d, 1), k = inputs(2, 130, d, 2), v = inputs(2, 130, d, 3);
      const auto why = gpu_unsupported(la::preset(preset, d), q, k, v, kOptions);
      CHECK_FALSE(why);
      if (why) FAIL(*why);
      // GQA (two Q heads per KV head), and not causal.
      CHECK_FALSE(gpu_unsupported(la::preset(preset, d), inputs(4, 130, d, 4), k, v, {.causal = false, .keep_operands = false}));
      // The bf16 kernel: the output (and so the inputs) in bf16, as follow_inputs makes it.
      la::Pipeline bf16 = la::preset(preset, d);
      la::follow_inputs(bf16, lowbit::formats::bf16);
      CHECK_FALSE(gpu_unsupported(bf16, q, k, v, kOptions));
      // A stage set to the preset's own value changes nothing.
      CHECK_FALSE(gpu_unsupported(with(preset, d, {"smooth-v=off"}), q, k, v, kOptions));
    }
}

TEST_CASE("gpu_unsupported: a changed stage has no kernel, and the reason names the stage") {
  const Tensor4 q = inputs(2, 128, 128, 1), k = inputs(2, 128, 128, 2), v = inputs(2, 128, 128, 3);
  const auto exact_exp2 = gpu_unsupported(with("sage2-8b", 128, {"exp2=exact"}), q, k, v, kOptions);
  REQUIRE(exact_exp2);
  CHECK_THAT(*exact_exp2, Catch::Contains("sage2-8b kernel") && Catch::Contains("stage exp2 is 'exact'"));
  const auto fp32_sums = gpu_unsupported(
      with("sage2-8b", 128, {"pv=fp32-fma:wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3"}), q, k, v, kOptions);
  REQUIRE(fp32_sums);
  CHECK_THAT(*fp32_sums, Catch::Contains("stage pv is 'fp32-fma:"));
  const auto flush = gpu_unsupported(with("sage2-8b", 128, {"accumulation=two-level:1"}), q, k, v, kOptions);
  REQUIRE(flush);
  CHECK_THAT(*flush, Catch::Contains("stage accumulation is 'two-level:1', the kernel's 'two-level:0'"));
  // In place and smooth V are built for sage2-8b with fp16 output only: elsewhere the closest
  // configuration is the preset, and the reason names the stage.
  const auto ex2_in_place = gpu_unsupported(with("sage2-8b-ex2", 128, {"accumulation=in-place"}), q, k, v, kOptions);
  REQUIRE(ex2_in_place);
  CHECK_THAT(*ex2_in_place, Catch::Contains("against sage2-8b-ex2 with fp16 output: stage accumulation is 'in-place', the "
                                            "kernel's 'two-level:0'"));
  la::Pipeline bf16_smooth_v = with("sage2-8b", 128, {"smooth-v=on"});
  la::follow_inputs(bf16_smooth_v, lowbit::formats::bf16);
  const auto bf16 = gpu_unsupported(bf16_smooth_v, q, k, v, kOptions);
  REQUIRE(bf16);
  CHECK_THAT(*bf16, Catch::Contains("against sage2-8b with bf16 output: stage smooth-v is 'on', the kernel's 'off'"));
  // Beside a stage choice, another stage: the closest configuration has the choice.
  const auto in_place_exact = gpu_unsupported(with("sage2-8b", 128, {"accumulation=in-place", "exp2=exact"}), q, k, v, kOptions);
  REQUIRE(in_place_exact);
  CHECK_THAT(*in_place_exact, Catch::Contains("against sage2-8b with fp16 output, accumulation in-place: stage exp2 is 'exact'"));
  // Another preset altogether: every stage that differs is named.
  const auto other = gpu_unsupported(la::preset("sage2-4b", 128), q, k, v, kOptions);
  REQUIRE(other);
  CHECK_THAT(*other, Catch::Contains("stage q is") && Catch::Contains("stage qk is"));
  // gpu_forward refuses it with the same reason, before any GPU is touched.
  CHECK_THROWS_WITH(gpu_forward(with("sage2-8b", 128, {"exp2=exact"}), q, k, v, kOptions),
                    Catch::Contains("no GPU kernel computes pipeline sage2-8b") && Catch::Contains("stage exp2"));
}

TEST_CASE("gpu_unsupported: sage2-8b with fp16 output in place, with smooth V and with both runs on the kernel") {
  for (int d : {64, 128})
    for (const auto& sets : kStageChoices) {
      INFO(joined(sets) << " d = " << d);
      const la::Pipeline p = with("sage2-8b", d, sets);
      const Tensor4 q = inputs(2, 300, d, 1), k = inputs(2, 300, d, 2), v = inputs(2, 300, d, 3);
      const auto why = gpu_unsupported(p, q, k, v, kOptions);
      CHECK_FALSE(why);
      if (why) FAIL(*why);
      // GQA and not causal; fewer queries than keys.
      CHECK_FALSE(gpu_unsupported(p, inputs(4, 300, d, 4), k, v, {.causal = false, .keep_operands = false}));
      CHECK_FALSE(gpu_unsupported(p, inputs(2, 100, d, 4), k, v, kOptions));
      // Operands kept are refused as for the presets.
      CHECK_THAT(gpu_unsupported(p, q, k, v, {.causal = true, .keep_operands = true}).value_or(""),
                 Catch::Contains("keep_operands"));
    }
}

TEST_CASE("gpu_unsupported: inputs, shapes and options the kernel does not take") {
  const la::Pipeline p = la::preset("sage2-8b", 64);
  const Tensor4 q = inputs(2, 128, 64, 1), k = inputs(2, 128, 64, 2), v = inputs(2, 128, 64, 3);
  // A float32 value that is no fp16 value: the first one is named.
  Tensor4 q32 = q;
  q32.values[64 * 5 + 3] = 0.1f;
  const auto not_fp16 = gpu_unsupported(p, q32, k, v, kOptions);
  REQUIRE(not_fp16);
  CHECK_THAT(*not_fp16, Catch::Contains("Q[0, 0, 5, 3] = 0.1 is not a fp16 value"));
  // Fewer queries than keys run padded with zero rows; more do not.
  CHECK_FALSE(gpu_unsupported(p, inputs(2, 64, 64, 1), k, v, kOptions));
  const auto more = gpu_unsupported(p, inputs(2, 192, 64, 1), k, v, kOptions);
  REQUIRE(more);
  CHECK_THAT(*more, Catch::Contains("as many queries as keys, or fewer") && Catch::Contains("(here 192 queries, 128 keys)"));
  // A head dimension without a kernel (the preset's recipe, or the problem's check, refuses it).
  const Tensor4 q80 = inputs(1, 64, 80, 1), k80 = inputs(1, 64, 80, 2), v80 = inputs(1, 64, 80, 3);
  CHECK(gpu_unsupported(la::preset("sage2-8b", 64), q80, k80, v80, kOptions));
  // Operands kept, a split-KV pass, given K means: not what the kernel returns or takes.
  la::ForwardOptions keep = kOptions;
  keep.keep_operands = true;
  CHECK_THAT(gpu_unsupported(p, q, k, v, keep).value_or(""), Catch::Contains("keep_operands"));
  la::ForwardOptions split = kOptions;
  split.kv_block_end = 1;
  CHECK_THAT(gpu_unsupported(p, q, k, v, split).value_or(""), Catch::Contains("split-KV pass"));
  la::ForwardOptions means = kOptions;
  means.key_means.assign(2 * 64, 0.0f);
  CHECK_THAT(gpu_unsupported(p, q, k, v, means).value_or(""), Catch::Contains("K means"));
  // A bf16-output pipeline on values that are fp16 but no bf16 values.
  la::Pipeline bf16 = p;
  la::follow_inputs(bf16, lowbit::formats::bf16);
  Tensor4 q16 = q;
  q16.values[0] = 1.0f + 1.0f / 1024;  // fp16, not bf16
  CHECK_THAT(gpu_unsupported(bf16, q16, k, v, kOptions).value_or(""), Catch::Contains("is not a bf16 value"));
  CHECK_FALSE(gpu_unsupported(p, q16, k, v, kOptions));  // and an fp16 one
}

TEST_CASE("fewer queries than keys: the emulated window equals the first rows of the zero-padded problem") {
  // What sage2-8b's padded run rests on: the kernel equals the emulation on N x N (check_sage2_gpu;
  // with the stage choices, the GPU test case below), and the emulation of Q's first rows equals the
  // first rows of the emulation of Q padded with zero rows to N, every output code and LSE bit (a
  // partial Q block included).
  std::vector<std::pair<const char*, std::vector<const char*>>> pipelines{{"sage2-8b", {}}, {"sage2-8b-ex2", {}}};
  for (const auto& sets : kStageChoices) pipelines.emplace_back("sage2-8b", sets);
  for (const auto& [preset, sets] : pipelines)
    for (int d : {64, 128})
      for (bool causal : {false, true})
        for (int queries : {100, 128, 200}) {
          INFO(preset << " " << joined(sets) << " d = " << d << (causal ? " causal" : "") << ", " << queries << " queries");
          const la::Pipeline p = with(preset, d, sets);
          const Tensor4 k = inputs(2, 256, d, 2), v = inputs(2, 256, d, 3), full = inputs(2, 256, d, 1);
          Tensor4 window(1, 2, queries, d), padded(1, 2, 256, d);  // padded: zero rows past `queries`
          for (int h = 0; h < 2; ++h)
            for (int t = 0; t < queries; ++t)
              for (int c = 0; c < d; ++c) window.row(0, h, t)[c] = padded.row(0, h, t)[c] = full.row(0, h, t)[c];
          REQUIRE_FALSE(gpu_unsupported(p, window, k, v, {.causal = causal, .keep_operands = false}));
          const la::ForwardResult a = la::forward(p, window, k, v, {.causal = causal, .threads = 1, .keep_operands = false});
          const la::ForwardResult b = la::forward(p, padded, k, v, {.causal = causal, .threads = 1, .keep_operands = false});
          std::size_t codes_differ = 0, lse_differ = 0;
          for (int h = 0; h < 2; ++h)
            for (int t = 0; t < queries; ++t) {
              const std::size_t ra = std::size_t(h * queries + t), rb = std::size_t(h * 256 + t);
              lse_differ += std::bit_cast<std::uint32_t>(a.lse[ra]) != std::bit_cast<std::uint32_t>(b.lse[rb]);
              for (int c = 0; c < d; ++c)
                codes_differ += a.output_codes[ra * std::size_t(d) + std::size_t(c)] != b.output_codes[rb * std::size_t(d) + std::size_t(c)];
            }
          CHECK(codes_differ == 0);
          CHECK(lse_differ == 0);
        }
}

TEST_CASE("gpu_unsupported: the sage2-4b family runs the Hopper twins of the experiments' Ada pipelines") {
  const Tensor4 q = inputs(4, 200, 64, 1), k = inputs(2, 200, 64, 2), v = inputs(2, 200, 64, 3);
  // The preset is Ada's (arch sm_89): no kernel here computes its instructions' arithmetic.
  const auto ada = gpu_unsupported(la::preset("sage2-4b", 64), q, k, v, kOptions);
  REQUIRE(ada);
  CHECK_THAT(*ada, Catch::Contains("sage2-4b family kernel"));
  // Its Hopper twin, and the twins of variants the experiments run (lowbit run's --device gpu checks these).
  for (std::initializer_list<const char*> sets :
       {std::initializer_list<const char*>{"arch=sm_90"}, {"arch=sm_90", "smooth-q=off", "smooth-k=off"},
        {"arch=sm_90", "p=e5m2:448", "v=e5m2:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"},
        {"arch=sm_90", "accumulation=in-place"}}) {
    const la::Pipeline twin = with("sage2-4b", 64, sets);
    const auto why = gpu_unsupported(twin, q, k, v, kOptions);
    CHECK_FALSE(why);
    if (why) FAIL(*why);
  }
  // A head dimension the family has no tiles for is refused, with the reason.
  const Tensor4 q80 = inputs(2, 100, 80, 1), k80 = inputs(2, 100, 80, 2), v80 = inputs(2, 100, 80, 3);
  const auto d80 = gpu_unsupported(with("sage2-4b", 80, {"arch=sm_90"}), q80, k80, v80, kOptions);
  REQUIRE(d80);
  CHECK_THAT(*d80, Catch::Contains("64 or 128"));
}

TEST_CASE("gpu_forward on a Hopper GPU: sage2-8b in place, with smooth V and with both equal attention::forward bit for bit") {
  require_hopper_gpu();
  struct Shape {
    int batch, heads_q, heads_kv, queries, keys;
  };
  // GQA, ragged token counts (a partial Q block and a partial KV block), fewer queries than keys.
  const Shape shapes[] = {{1, 4, 2, 300, 300}, {2, 2, 1, 1000, 1000}, {1, 2, 2, 128, 1000}};
  std::uint64_t seed = 1;
  for (int d : {64, 128})
    for (bool causal : {false, true})
      for (const Shape& s : shapes)
        for (const auto& sets : kStageChoices) {
          INFO(joined(sets) << ", d = " << d << (causal ? ", causal" : "") << ", batch " << s.batch << ", " << s.heads_q
                            << " Q heads on " << s.heads_kv << " KV heads, " << s.queries << " queries, " << s.keys << " keys");
          la::Pipeline p = with("sage2-8b", d, sets);
          const Tensor4 q = random_inputs(s.batch, s.heads_q, s.queries, d, seed++);
          const Tensor4 k = random_inputs(s.batch, s.heads_kv, s.keys, d, seed++);
          const Tensor4 v = random_inputs(s.batch, s.heads_kv, s.keys, d, seed++, 3.0f);
          const la::ForwardOptions options{.causal = causal, .threads = 0, .keep_operands = false};
          REQUIRE_FALSE(gpu_unsupported(p, q, k, v, options));
          const la::ForwardResult gpu = gpu_forward(p, q, k, v, options);
          const la::ForwardResult emulated = la::forward(p, q, k, v, options);
          REQUIRE(gpu.output_codes.size() == emulated.output_codes.size());
          REQUIRE(gpu.lse.size() == emulated.lse.size());
          std::size_t codes_differ = 0, lse_differ = 0;
          std::string first;
          for (std::size_t i = 0; i < emulated.output_codes.size(); ++i)
            if (gpu.output_codes[i] != emulated.output_codes[i] && codes_differ++ == 0)
              first = "output code " + std::to_string(i) + ": GPU " + std::to_string(gpu.output_codes[i]) + ", emulated " +
                      std::to_string(emulated.output_codes[i]);
          for (std::size_t i = 0; i < emulated.lse.size(); ++i)
            if (std::bit_cast<std::uint32_t>(gpu.lse[i]) != std::bit_cast<std::uint32_t>(emulated.lse[i]) && lse_differ++ == 0 &&
                first.empty())
              first = "LSE " + std::to_string(i) + ": GPU " + std::to_string(gpu.lse[i]) + ", emulated " +
                      std::to_string(emulated.lse[i]);
          INFO("first difference: " << first);
          CHECK(codes_differ == 0);
          CHECK(lse_differ == 0);
        }
}
