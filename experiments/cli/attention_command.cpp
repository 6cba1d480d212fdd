// lowbit attention: one pipeline (a preset, stages changed with --set) on Q, K, V from files,
// against the float64 reference; prints and writes the error metrics. --device gpu runs the
// sage2-8b kernel of kernels/attention/ instead (and --check compares it with the emulated preset,
// bit for bit).
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulation/attention/compare.hpp"
#include "emulation/attention/pipeline.hpp"
#include "experiments/cli/command.hpp"
#include "experiments/common/results.hpp"
#include "numerics/attention_reference.hpp"
#include "numerics/metrics.hpp"
#include "numerics/npy.hpp"
#include "numerics/tensor_file.hpp"
#if defined(LOWBIT_HAVE_KERNELS)
#include "experiments/cli/gpu_run.hpp"
#include "kernels/attention/sage2_attention.hpp"
#include "verification/bit_compare.hpp"
#endif

namespace lowbit::cli {
namespace {

struct AttentionArgs {
  std::string command;
  std::string preset, q, k, v, out, metrics_json, out_lse, against, against_lse, descale, key_mean;
  std::vector<std::string> sets;
  bool causal = false;
  unsigned threads = 0;
  std::string device = "cpu";
  bool check = false;
};

// What one run produced, for the report: the output as written, and what made it.
struct AttentionRun {
  Tensor4 rounded;
  Format output;
  std::string title;                                   // "preset sage2-8b: ..." or the kernel's
  std::vector<std::pair<std::string, std::string>> stages;
  double seconds = 0;                                  // emulation or GPU (kernels and copies)
  std::string timing;                                  // what `seconds` measured
  nlohmann::json extra = nlohmann::json::object();     // --check's counts, the GPU
  std::vector<float> lse;                              // emulated: [batch, heads, tokens]
};

Format format_of(ElementType t) {
  switch (t) {
    case ElementType::f16: return formats::fp16;
    case ElementType::bf16: return formats::bf16;
    case ElementType::f32: return formats::fp32;
  }
  return formats::fp32;
}

std::string help_footer() {
  // Columns as wide as the longest name.
  std::size_t preset_width = 0, stage_width = 0;
  for (const auto& p : attention::preset_list()) preset_width = std::max(preset_width, p.name.size());
  for (const auto& st : attention::stage_list()) stage_width = std::max(stage_width, st.name.size());
  std::string s = "\nPresets (each follows a paper's kernel; `--set` changes one stage):\n";
  for (const auto& p : attention::preset_list()) s += fmt::format("  {:<{}} {}\n", p.name, preset_width, p.summary);
  s += "\nStages (--set STAGE=VALUE, repeatable, applied in order):\n";
  for (const auto& st : attention::stage_list())
    s += fmt::format("  {:<{}} {}\n  {:<{}}   {}\n", st.name, stage_width, st.values, "", stage_width, st.help);
  s += "\nInputs: .npy (float32 '<f4', float16 '<f2', bfloat16 '<V2' as ml_dtypes saves it) or FILE.safetensors:NAME\n"
       "(F32, F16, BF16), each [heads, tokens, dim] or [batch, heads, tokens, dim]; K and V heads divide Q heads (GQA).\n"
       "The output is rounded to the inputs' format (Q's) unless --set output=... says otherwise.\n";
  return s;
}

attention::Pipeline make_pipeline(const AttentionArgs& a, const TensorFile& q, const TensorFile& v) {
  attention::Pipeline pipeline = attention::preset(a.preset, q.tensor.dim);
  attention::follow_inputs(pipeline, format_of(q.type));
  for (const auto& s : a.sets)
    if (auto why = attention::set_stage(pipeline, s)) throw std::invalid_argument("--set " + s + ": " + *why);
  if (auto why = pipeline.validate(q.tensor.dim, v.tensor.dim))
    throw std::invalid_argument("preset " + a.preset + " with these stages cannot run on head dimension " +
                                std::to_string(q.tensor.dim) + ": " + *why);
  return pipeline;
}

attention::ForwardResult emulate(const AttentionArgs& a, const attention::Pipeline& pipeline, const TensorFile& q,
                                 const TensorFile& k, const TensorFile& v) {
  attention::ForwardOptions options{
      .causal = a.causal, .threads = a.threads, .keep_operands = false, .q_name = a.q, .k_name = a.k, .v_name = a.v};
  if (!a.descale.empty()) {
    NpyArray d = read_npy(a.descale);
    if (d.shape.size() != 3 || d.shape[0] != 3)
      throw std::invalid_argument("--descale " + a.descale + ": FlashAttention-3's descales are [3, batch, kv_heads] (q, k, v)");
    options.descales = std::move(d.data);
    options.descales_name = a.descale;
  }
  if (!a.key_mean.empty()) {  // [batch, kv_heads, 1, dim] as torch's keepdim mean, or [batch, kv_heads, dim]
    NpyArray m = read_npy(a.key_mean);
    options.key_means = std::move(m.data);
    options.key_means_name = "--key-mean " + a.key_mean;
  }
  return attention::forward(pipeline, q.tensor, k.tensor, v.tensor, options);
}

AttentionRun run_emulated(const AttentionArgs& a, const TensorFile& q, const TensorFile& k, const TensorFile& v) {
  const attention::Pipeline pipeline = make_pipeline(a, q, v);
  const auto start = std::chrono::steady_clock::now();
  const attention::ForwardResult r = emulate(a, pipeline, q, k, v);
  AttentionRun run{r.rounded_output(), pipeline.output, "preset " + pipeline.name + ": " + pipeline.follows,
                   attention::stage_values(pipeline),
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), "emulated"};
  run.lse = r.lse;
  return run;
}

#if defined(LOWBIT_HAVE_KERNELS)
// The sage2-8b kernel (sage2-8b-ex2: with MUFU.EX2) on the GPU; nothing when there is none (the
// caller exits 77).
std::optional<AttentionRun> run_gpu(const AttentionArgs& a, const TensorFile& q, const TensorFile& k, const TensorFile& v) {
  namespace ka = kernels::attention;
  namespace st = attention::steps;
  const std::string polynomial = attention::sage2_8b_preset(st::Exp2Unit::polynomial),
                    ex2 = attention::sage2_8b_preset(st::Exp2Unit::sm90_ex2);
  if (a.preset != polynomial && a.preset != ex2)
    throw std::invalid_argument("--device gpu runs the sage2-8b kernels (kernels/attention/: presets sage2-8b and "
                                "sage2-8b-ex2); preset " + a.preset + " has no kernel here");
  if (!a.sets.empty()) throw std::invalid_argument("--device gpu: --set changes an emulated stage; the kernel runs its recipe");
  for (const auto& [file, name] : {std::pair{&q, &a.q}, std::pair{&k, &a.k}, std::pair{&v, &a.v}})
    if (file->type != ElementType::f16 && file->type != ElementType::bf16)
      throw std::invalid_argument(*name + ": --device gpu takes float16 or bfloat16 tensors (the kernel's inputs), not " +
                                  std::string(to_string(file->type)));
  if (k.type != q.type || v.type != q.type)
    throw std::invalid_argument("--device gpu: Q, K and V must share one format (" + std::string(to_string(q.type)) + ", " +
                                std::string(to_string(k.type)) + ", " + std::string(to_string(v.type)) + ")");
  const Tensor4 &tq = q.tensor, &tk = k.tensor, &tv = v.tensor;
  if (tk.batch != tq.batch || tv.batch != tq.batch || tk.heads != tv.heads || tk.tokens != tq.tokens ||
      tv.tokens != tq.tokens || tk.dim != tq.dim || tv.dim != tq.dim)
    throw std::invalid_argument("--device gpu: the kernel takes Q " + tq.shape_text() + ", K and V of the same batch, tokens " +
                                "and dimension (K " + tk.shape_text() + ", V " + tv.shape_text() + ")");
  ka::Sage2Problem p;
  p.batch = tq.batch;
  p.heads_q = tq.heads;
  p.heads_kv = tk.heads;
  p.tokens = tq.tokens;
  p.head_dim = tq.dim;
  p.causal = a.causal;
  p.dtype = q.type == ElementType::f16 ? ka::DType::fp16 : ka::DType::bf16;
  p.exp2 = a.preset == ex2 ? st::Exp2Unit::sm90_ex2 : st::Exp2Unit::polynomial;
  if (auto why = p.validate()) throw std::invalid_argument("--device gpu: " + *why);
  const auto gpu = require_gpu("attention --device gpu");
  if (!gpu) return std::nullopt;
  const Format& f = format_of(q.type);
  const auto codes = [&](const Tensor4& t) {  // exact: the values came from f
    std::vector<std::uint16_t> c(t.values.size());
    for (std::size_t i = 0; i < c.size(); ++i) c[i] = std::uint16_t(encode(f, t.values[i]));
    return c;
  };
  const std::vector<std::uint16_t> cq = codes(tq), ck = codes(tk), cv = codes(tv);
  const auto start = std::chrono::steady_clock::now();
  const ka::Sage2HostResult r = ka::sage2_attention_host(p, cq, ck, cv);
  AttentionRun run{Tensor4(tq.batch, tq.heads, tq.tokens, tq.dim), f,
                   "the " + a.preset + " kernel (kernels/attention/, recipe sage2_hopper.hpp) on " + gpu->name,
                   {},
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                   "on the GPU, copies included"};
  for (std::size_t i = 0; i < r.out.size(); ++i) run.rounded.values[i] = float(decode(f, r.out[i]));
  run.extra["gpu"] = gpu_provenance(*gpu);
  if (a.check) {  // the emulated preset on the same tensors: every output code and LSE
    const attention::ForwardResult e = emulate(a, make_pipeline(a, q, v), q, k, v);
    const verification::BitComparison outputs = verification::compare_bits(r.out, e.output_codes),
                                      lse = verification::compare_bits(r.lse, e.lse);
    fmt::print("--check against the emulated {}: {} of {} output codes and {} of {} LSE differ\n", a.preset,
               outputs.mismatches, outputs.compared, lse.mismatches, lse.compared);
    run.extra["check"] = {{"outputs_compared", outputs.compared}, {"mismatches", outputs.mismatches},
                          {"lse_compared", lse.compared}, {"lse_mismatches", lse.mismatches}};
  }
  return run;
}
#endif

// --against: a kernel's output (and LSE) against the emulated one, every code (attention/compare.hpp):
// prints the count that differ, their ulp distances, the first differing element and whether its
// row's LSE differs too; returns the count of output and LSE values that differ.
std::uint64_t compare_with_kernel(const AttentionArgs& a, const AttentionRun& run) {
  const Tensor4 kernel = read_tensor_file(a.against).tensor;
  const Tensor4& emulated = run.rounded;
  if (kernel.batch != emulated.batch || kernel.heads != emulated.heads || kernel.tokens != emulated.tokens ||
      kernel.dim != emulated.dim)
    throw std::invalid_argument("--against " + a.against + ": shape " + kernel.shape_text() +
                                ", the emulated output is " + emulated.shape_text());
  std::vector<float> kernel_lse;
  if (!a.against_lse.empty()) {
    kernel_lse = read_npy(a.against_lse).data;
    if (kernel_lse.size() != run.lse.size())
      throw std::invalid_argument(fmt::format("--against-lse {}: {} values, the emulated LSE has {} ([batch, heads, tokens])",
                                              a.against_lse, kernel_lse.size(), run.lse.size()));
  }
  const attention::KernelComparison c = attention::compare_with_kernel(
      run.output, emulated.batch, emulated.heads, emulated.tokens, emulated.dim, kernel.values, emulated.values, kernel_lse,
      kernel_lse.empty() ? std::span<const float>() : std::span<const float>(run.lse));
  fmt::print("against {}: {} of {} output codes differ\n", a.against, c.differ, c.compared);
  if (c.lse_compared) fmt::print("against {}: {} of {} LSE values differ\n", a.against_lse, c.lse_differ, c.lse_compared);
  for (const auto& [distance, count] : c.ulps)
    fmt::print("  {:>12} codes {}\n", count, distance < 0 ? std::string("NaN/Inf on one side") : fmt::format("{} ulp apart", distance));
  if (c.first) {
    const auto& f = *c.first;
    fmt::print("  first: [batch {}, head {}, row {}, column {}]: kernel {} emulated {}", f.batch, f.head, f.row, f.column,
               f.kernel, f.emulated);
    if (!f.row_lse_differs)
      fmt::print("\n");
    else if (*f.row_lse_differs)
      fmt::print("; the row's LSE differs too (the softmax statistics)\n");
    else
      fmt::print("; the row's LSE agrees (the P V product differs)\n");
  }
  return c.differ + c.lse_differ;
}

int run_attention(const AttentionArgs& a) {
  const TensorFile q = read_tensor_file(a.q), k = read_tensor_file(a.k), v = read_tensor_file(a.v);
  AttentionRun run;
  if (a.device == "gpu") {
#if defined(LOWBIT_HAVE_KERNELS)
    auto gpu = run_gpu(a, q, k, v);
    if (!gpu) return kSkipped;
    run = std::move(*gpu);
#else
    fmt::print(stderr, "lowbit attention --device gpu: this build has no CUDA kernels; skipped\n");
    return 77;
#endif
  } else {
    if (a.check) throw std::invalid_argument("--check compares the GPU kernel with the emulation: it needs --device gpu");
    run = run_emulated(a, q, k, v);
  }
  if (a.device == "gpu" && (!a.against.empty() || !a.out_lse.empty())) {
    throw std::invalid_argument("--against and --out-lse compare and write the emulated preset: leave out --device gpu");
  }
  const auto start = std::chrono::steady_clock::now();
  const ReferenceAttention ref = reference_attention(q.tensor, k.tensor, v.tensor, {.causal = a.causal, .threads = a.threads});
  const double reference_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double> approximation(run.rounded.values.begin(), run.rounded.values.end());
  const ErrorMetrics m = compare(ref.output, approximation);

  fmt::print("{}\n", run.title);
  for (const auto& [stage, value] : run.stages) fmt::print("  {:<15} {}\n", stage, value);
  fmt::print("Q {} {} ({}), K {} {}, V {} {}; {}; output {}\n", q.tensor.shape_text(), to_string(q.type), a.q,
             k.tensor.shape_text(), to_string(k.type), v.tensor.shape_text(), to_string(v.type),
             a.causal ? "causal" : "not causal", format_name(run.output));
  fmt::print("against float64 attention: cosine {:.8f}  rel_l1 {:.6g}  rmse {:.6g}  max_abs {:.6g}\n", m.cosine,
             m.relative_l1, m.rmse, m.max_abs);
  fmt::print("({:.2f} s {}, {:.2f} s with the reference)\n", run.seconds, run.timing, reference_seconds);

  if (!a.out.empty()) {
    std::vector<std::size_t> shape{std::size_t(run.rounded.batch), std::size_t(run.rounded.heads),
                                   std::size_t(run.rounded.tokens), std::size_t(run.rounded.dim)};
    write_npy(a.out, shape, run.rounded.values);
    fmt::print("wrote {} (float32 holding the {} output)\n", a.out, format_name(run.output));
  }
  if (!a.out_lse.empty()) {
    write_npy(a.out_lse, {std::size_t(run.rounded.batch), std::size_t(run.rounded.heads), std::size_t(run.rounded.tokens)},
              run.lse);
    fmt::print("wrote {} (the emulated log-sum-exp, float32 [batch, heads, tokens])\n", a.out_lse);
  }
  const std::uint64_t against_differ = a.against.empty() ? 0 : compare_with_kernel(a, run);
  if (!a.metrics_json.empty()) {
    nlohmann::json stages = nlohmann::json::object();
    for (const auto& [stage, value] : run.stages) stages[stage] = value;
    experiments::RunInfo info;
    info.program = "lowbit attention";
    info.command = a.command;
    info.inputs = {a.q, a.k, a.v};
    info.formats = {{"q", to_string(q.type)}, {"k", to_string(k.type)}, {"v", to_string(v.type)},
                    {"output", format_name(run.output)}};
    info.config = {{"preset", a.preset}, {"stages", stages}, {"causal", a.causal}, {"device", a.device}};
    const std::filesystem::path path(a.metrics_json);
    experiments::ResultDirectory folder(path.parent_path().empty() ? "." : path.parent_path(), info);
    nlohmann::json doc{{"cosine", m.cosine}, {"rel_l1", m.relative_l1}, {"rmse", m.rmse},
                       {"max_abs", m.max_abs}, {"count", m.count},       {"run", info.to_json()}};
    for (const auto& [key, value] : run.extra.items()) doc[key] = value;
    folder.json(path.filename().string(), doc);
    fmt::print("wrote {}\n", a.metrics_json);
  }
  if (run.extra.contains("check") &&
      (run.extra["check"]["mismatches"].get<std::uint64_t>() || run.extra["check"]["lse_mismatches"].get<std::uint64_t>()))
    return 1;
  return against_differ ? 1 : 0;
}

}  // namespace

void add_attention_command(CLI::App& app, int& exit_code, std::string command) {
  auto args = std::make_shared<AttentionArgs>();
  args->command = std::move(command);
  auto* cmd = app.add_subcommand(
      "attention",
      "Run an emulated attention pipeline (a preset, stages changed with --set) on Q, K, V from files and compare its "
      "output, rounded as the kernel writes it, with exact attention in float64: cosine similarity, relative L1, RMSE, "
      "max absolute error. Exits 1 with a message naming the file and the problem on bad input.");
  cmd->add_option("--preset", args->preset, "pipeline preset (listed below)")->required();
  cmd->add_option("--q", args->q, "queries: FILE.npy or FILE.safetensors:NAME")->required();
  cmd->add_option("--k", args->k, "keys")->required();
  cmd->add_option("--v", args->v, "values")->required();
  cmd->add_flag("--causal", args->causal, "causal mask, top-left (key j visible to query i when j <= i)");
  cmd->add_option("--set", args->sets, "STAGE=VALUE: change one stage of the preset (repeatable)");
  cmd->add_option("--descale", args->descale,
                  "fa3-fp8: FlashAttention-3's q_descale, k_descale, v_descale tensors (.npy, [3, batch, kv_heads]) for "
                  "Q, K, V of E4M3 values as the kernel reads them (with --set q=e4m3:none --set k=e4m3:none --set "
                  "v=e4m3:none)");
  cmd->add_option("--key-mean", args->key_mean,
                  "sageattn2-*: K's mean as SageAttention2's wrapper computed it (.npy, [batch, kv_heads, 1, dim] or "
                  "[batch, kv_heads, dim]; torch's k.mean(), whose reduction order is not modelled), in place of the "
                  "emulated one");
  cmd->add_option("--out", args->out, "write the rounded output here (.npy, float32, [batch, heads, tokens, dim])");
  cmd->add_option("--out-lse", args->out_lse, "write the emulated log-sum-exp here (.npy, float32, [batch, heads, tokens])");
  cmd->add_option("--against", args->against,
                  "a kernel's output (.npy, [batch, heads, tokens, dim]) to compare with the preset's, every code: prints "
                  "the count that differ, their ulp distances and the first; exits 1 when any differ");
  cmd->add_option("--against-lse", args->against_lse, "with --against: the kernel's LSE (.npy, [batch, heads, tokens]), compared bit for bit");
  cmd->add_option("--metrics-json", args->metrics_json, "write cosine, rel_l1, rmse, max_abs (and the run) as JSON");
  cmd->add_option("--threads", args->threads, "threads (0: every core)")->capture_default_str();
  cmd->add_option("--device", args->device,
                  "cpu: the emulated pipeline; gpu: the sage2-8b kernel on a Hopper GPU (preset sage2-8b, or sage2-8b-ex2 for "
                  "SageAttention2's exponential, MUFU.EX2 of one fma; no --set; "
                  "float16/bfloat16 inputs, d 64 or 128; exits 77 where there is no GPU)")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_flag("--check", args->check,
                "with --device gpu: also run the emulated sage2-8b and count the output codes and LSE that differ "
                "(exit 1 if any)");
  cmd->footer(help_footer());
  cmd->callback([&exit_code, args] { exit_code = run_attention(*args); });
}

}  // namespace lowbit::cli
