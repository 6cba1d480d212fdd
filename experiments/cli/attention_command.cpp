// lowbit attention: one pipeline (a preset, stages changed with --set) on Q, K, V from files,
// against the float64 reference; prints and writes the error metrics.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "emulation/attention/pipeline.hpp"
#include "experiments/cli/command.hpp"
#include "experiments/common/results.hpp"
#include "numerics/attention_reference.hpp"
#include "numerics/metrics.hpp"
#include "numerics/npy.hpp"
#include "numerics/tensor_file.hpp"

namespace lowbit::cli {
namespace {

struct AttentionArgs {
  std::string command;
  std::string preset, q, k, v, out, metrics_json;
  std::vector<std::string> sets;
  bool causal = false;
  unsigned threads = 0;
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
  std::string s = "\nPresets (each follows a paper's kernel; `--set` changes one stage):\n";
  for (const auto& p : attention::preset_list()) s += fmt::format("  {:<11} {}\n", p.name, p.summary);
  s += "\nStages (--set STAGE=VALUE, repeatable, applied in order):\n";
  for (const auto& st : attention::stage_list()) s += fmt::format("  {:<15} {}\n  {:<15}   {}\n", st.name, st.values, "", st.help);
  s += "\nInputs: .npy (float32 '<f4', float16 '<f2', bfloat16 '<V2' as ml_dtypes saves it) or FILE.safetensors:NAME\n"
       "(F32, F16, BF16), each [heads, tokens, dim] or [batch, heads, tokens, dim]; K and V heads divide Q heads (GQA).\n"
       "The output is rounded to the inputs' format (Q's) unless --set output=... says otherwise.\n";
  return s;
}

int run_attention(const AttentionArgs& a) {
  const TensorFile q = read_tensor_file(a.q), k = read_tensor_file(a.k), v = read_tensor_file(a.v);
  attention::Pipeline pipeline = attention::preset(a.preset, q.tensor.dim);
  pipeline.output = format_of(q.type);
  for (const auto& s : a.sets)
    if (auto why = attention::set_stage(pipeline, s)) throw std::invalid_argument("--set " + s + ": " + *why);
  if (auto why = pipeline.validate(q.tensor.dim, v.tensor.dim))
    throw std::invalid_argument("preset " + a.preset + " with these stages cannot run on head dimension " +
                                std::to_string(q.tensor.dim) + ": " + *why);

  const auto start = std::chrono::steady_clock::now();
  const attention::ForwardResult r = attention::forward(
      pipeline, q.tensor, k.tensor, v.tensor,
      {.causal = a.causal, .threads = a.threads, .keep_operands = false, .q_name = a.q, .k_name = a.k, .v_name = a.v});
  const double emulated = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const ReferenceAttention ref = reference_attention(q.tensor, k.tensor, v.tensor, {.causal = a.causal, .threads = a.threads});
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const Tensor4 rounded = r.rounded_output();
  const std::vector<double> approximation(rounded.values.begin(), rounded.values.end());
  const ErrorMetrics m = compare(ref.output, approximation);

  fmt::print("preset {}: {}\n", pipeline.name, pipeline.follows);
  for (const auto& [stage, value] : attention::stage_values(pipeline)) fmt::print("  {:<15} {}\n", stage, value);
  fmt::print("Q {} {} ({}), K {} {}, V {} {}; {}; output {}\n", q.tensor.shape_text(), to_string(q.type), a.q,
             k.tensor.shape_text(), to_string(k.type), v.tensor.shape_text(), to_string(v.type),
             a.causal ? "causal" : "not causal", format_name(pipeline.output));
  fmt::print("against float64 attention: cosine {:.8f}  rel_l1 {:.6g}  rmse {:.6g}  max_abs {:.6g}\n", m.cosine,
             m.relative_l1, m.rmse, m.max_abs);
  fmt::print("({:.2f} s emulated, {:.2f} s with the reference)\n", emulated, total - emulated);

  if (!a.out.empty()) {
    std::vector<std::size_t> shape{std::size_t(rounded.batch), std::size_t(rounded.heads), std::size_t(rounded.tokens),
                                   std::size_t(rounded.dim)};
    write_npy(a.out, shape, rounded.values);
    fmt::print("wrote {} (float32 holding the {} output)\n", a.out, format_name(pipeline.output));
  }
  if (!a.metrics_json.empty()) {
    nlohmann::json stages = nlohmann::json::object();
    for (const auto& [stage, value] : attention::stage_values(pipeline)) stages[stage] = value;
    experiments::RunInfo run;
    run.program = "lowbit attention";
    run.command = a.command;
    run.inputs = {a.q, a.k, a.v};
    run.formats = {{"q", to_string(q.type)}, {"k", to_string(k.type)}, {"v", to_string(v.type)},
                   {"output", format_name(pipeline.output)}};
    run.config = {{"preset", pipeline.name}, {"stages", stages}, {"causal", a.causal}};
    const std::filesystem::path path(a.metrics_json);
    experiments::ResultDirectory folder(path.parent_path().empty() ? "." : path.parent_path(), run);
    folder.json(path.filename().string(), {{"cosine", m.cosine},
                                          {"rel_l1", m.relative_l1},
                                          {"rmse", m.rmse},
                                          {"max_abs", m.max_abs},
                                          {"count", m.count},
                                          {"run", run.to_json()}});
    fmt::print("wrote {}\n", a.metrics_json);
  }
  return 0;
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
  cmd->add_option("--out", args->out, "write the rounded output here (.npy, float32, [batch, heads, tokens, dim])");
  cmd->add_option("--metrics-json", args->metrics_json, "write cosine, rel_l1, rmse, max_abs (and the run) as JSON");
  cmd->add_option("--threads", args->threads, "threads (0: every core)")->capture_default_str();
  cmd->footer(help_footer());
  cmd->callback([&exit_code, args] { exit_code = run_attention(*args); });
}

}  // namespace lowbit::cli
