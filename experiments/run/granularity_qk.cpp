// lowbit run granularity-qk: the shape of SageAttention2's Table 3 (INT4 Q, K at per-token /
// per-thread / per-block / per-tensor granularity, metrics of the attention output against
// float64) with and without Q+K smoothing, and of its Table 9 (smoothing methods at per-thread
// granularity), with QK^T alone quantized (P and V in float64: quantized_qk_attention), on the
// synthetic generator (every parameter an option) or on .npy tensors. `lowbit run granularity`
// measures the same granularities through the whole sage2-4b pipeline; this one isolates Q's and
// K's groups. Its files are its own (granularity.csv, summary.csv, granularity.json, table.md),
// so `lowbit run all` leaves it out; plots/plot_granularity.py draws them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "emulation/attention/qk_attention.hpp"
#include "experiments/common/results.hpp"
#include "experiments/run/registry.hpp"
#include "numerics/attention.hpp"
#include "numerics/metrics.hpp"
#include "numerics/provenance.hpp"
#include "numerics/synthetic.hpp"

namespace lowbit::experiments {
namespace {

using namespace lowbit::quant;
using namespace lowbit::attention;

// The tables, by the key --tables selects them with.
struct Table {
  std::string_view key, title;
};
constexpr Table kTables[]{{"smooth", "granularity, smooth Q+K"},
                          {"raw", "granularity, no smoothing"},
                          {"methods", "smoothing methods, per-thread"}};

struct Method {
  std::string table, name;
  QkAttentionConfig config;
  std::string skipped;  // why it cannot run on this data (empty: it runs)
};

struct Row {
  std::string table, method;
  int head;
  ErrorMetrics m;
  double q_scale, k_scale;
};

// --instruction names the per-thread groups' instruction by its short name ("mma.m16n8k64.s4").
mma::Atom parse_instruction(const std::string& name) {
  const mma::Atom candidates[]{mma::atoms::mma_m16n8k64_s32_s4_s4, mma::atoms::mma_m16n8k32_s32_s8_s8,
                               mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), mma::atoms::wgmma_m64nNk32_s32_s8_s8(128)};
  std::string known;
  for (const mma::Atom& a : candidates) {
    if (name == mma::short_name(a)) return a;
    known += (known.empty() ? "" : ", ") + mma::short_name(a);
  }
  throw std::invalid_argument("unknown instruction '" + name + "' (" + known + ")");
}

std::vector<Method> methods(const ThreadTiling& t, const Format& element) {
  const auto spec = [&](Grouping g) {
    QuantSpec s;
    s.name = format_name(element) + " " + g.name;
    s.element = element;
    s.grouping = std::move(g);
    return s;
  };
  const std::vector<std::pair<std::string, std::pair<Grouping, Grouping>>> granularities{
      {"per-token", {grouping::per_token(), grouping::per_token()}},
      {"per-thread", {grouping::per_thread(t, Operand::q), grouping::per_thread(t, Operand::k)}},
      {"per-block", {grouping::per_block(t.block_q), grouping::per_block(t.block_k)}},
      {"per-tensor", {grouping::per_tensor(), grouping::per_tensor()}},
      // Ablations: which operand's per-thread groups cost accuracy against per-token.
      {"per-thread Q, per-token K", {grouping::per_thread(t, Operand::q), grouping::per_token()}},
      {"per-token Q, per-thread K", {grouping::per_token(), grouping::per_thread(t, Operand::k)}},
  };
  std::vector<Method> out;
  for (bool smoothing : {true, false})
    for (const auto& [name, groups] : granularities) {
      QkAttentionConfig c{spec(groups.first), spec(groups.second), smoothing, smoothing, t.block_q};
      out.push_back({std::string(kTables[smoothing ? 0 : 1].title), name, c, ""});
    }
  const QkAttentionConfig per_thread{spec(grouping::per_thread(t, Operand::q)),
                                     spec(grouping::per_thread(t, Operand::k)), false, false, t.block_q};
  const auto variant = [&](std::string name, bool q, bool k, QkBaseline b) {
    QkAttentionConfig c = per_thread;
    c.smooth_q = q;
    c.smooth_k = k;
    c.baseline = b;
    out.push_back({std::string(kTables[2].title), std::move(name), c, ""});
  };
  variant("None", false, false, QkBaseline::none);
  variant("HadmdAttn", false, false, QkBaseline::hadamard);
  variant("SmoothAttn (alpha=0.5)", false, false, QkBaseline::smooth_attn);
  variant("Smooth K", false, true, QkBaseline::none);
  variant("Smooth Q", true, false, QkBaseline::none);
  variant("Smooth Q+K", true, true, QkBaseline::none);
  return out;
}

struct Summary {
  ErrorMetrics mean, worst;
  double q_scale = 0, k_scale = 0;
};

Summary summarize(const std::vector<Row>& rows, const std::string& table, const std::string& method) {
  Summary s;
  s.worst.cosine = 2;
  int n = 0;
  for (const Row& r : rows) {
    if (r.table != table || r.method != method) continue;
    ++n;
    s.mean.cosine += r.m.cosine;
    s.mean.relative_l1 += r.m.relative_l1;
    s.mean.rmse += r.m.rmse;
    s.q_scale += r.q_scale;
    s.k_scale += r.k_scale;
    s.worst.cosine = std::min(s.worst.cosine, r.m.cosine);
    s.worst.relative_l1 = std::max(s.worst.relative_l1, r.m.relative_l1);
    s.worst.rmse = std::max(s.worst.rmse, r.m.rmse);
  }
  s.mean.cosine /= n;
  s.mean.relative_l1 /= n;
  s.mean.rmse /= n;
  s.q_scale /= n;
  s.k_scale /= n;
  return s;
}

}  // namespace

int run_granularity_qk(int argc, char** argv) {
  CLI::App app{"lowbit run granularity-qk: SageAttention2 Table 3 (granularity) and Table 9 (smoothing) with QK^T alone "
               "quantized, on synthetic or .npy data"};
  std::string out_dir = LOWBIT_DEFAULT_RESULTS_DIR "/granularity-qk", instruction = "mma.m16n8k64.s4", element_name;
  std::vector<std::string> table_keys;
  for (const Table& t : kTables) table_keys.emplace_back(t.key);
  std::vector<std::string> data;
  // The options write into `given`; the data starts from --preset and takes the options given.
  SyntheticAttentionSpec given;
  std::string preset = "default";
  ThreadTiling tiling;
  std::uint64_t hadamard_seed = 0;
  app.add_option("--out", out_dir, "output folder (the committed record: results/granularity)")->capture_default_str();
  app.add_option("--data", data, "Q, K, V .npy files ([tokens, d] or [heads, tokens, d], float32/float16)")
      ->expected(3);
  std::vector<std::string> preset_names;
  std::string preset_help = "synthetic data preset; the options below change its values:";
  for (const SyntheticPreset& p : synthetic_presets()) {
    preset_names.emplace_back(p.name);
    preset_help += " " + std::string(p.name) + " (" + std::string(p.description) + ");";
  }
  app.add_option("--preset", preset, preset_help)->check(CLI::IsMember(preset_names))->capture_default_str();
  app.add_option("--seed", given.seed, "synthetic data seed")->capture_default_str();
  // Every generator parameter (numerics/synthetic.hpp documents the model); defaults shown are
  // the default preset's.
  using S = SyntheticAttentionSpec;
  const std::tuple<const char*, int S::*, const char*> int_options[]{
      {"--heads", &S::heads, "synthetic heads"},
      {"--tokens", &S::tokens, "synthetic tokens"},
      {"--dim", &S::dim, "synthetic head dimension"},
      {"--outlier-channels", &S::outlier_channels, "channels with outliers"},
      {"--q-segment-tokens", &S::q_segment_tokens, "tokens per Q (and K) offset segment"}};
  const std::tuple<const char*, double S::*, const char*> double_options[]{
      {"--token-scale-sigma", &S::token_scale_sigma, "log-sd of token magnitudes"},
      {"--token-scale-length", &S::token_scale_length, "correlation length of token magnitudes (tokens)"},
      {"--token-noise-length", &S::token_noise_length,
       "correlation length (tokens) of each channel's token-to-token variation: neighbouring tokens share their "
       "vectors and amax (0: independent)"},
      {"--outlier-token-fraction", &S::outlier_token_fraction, "fraction of tokens scaled up"},
      {"--outlier-token-scale", &S::outlier_token_scale, "their magnitude factor"},
      {"--outlier-std", &S::outlier_std, "spread of the outlier channels"},
      {"--outlier-bias", &S::outlier_bias, "bias of the outlier channels"},
      {"--outlier-bias-decay", &S::outlier_bias_decay, "the i-th outlier channel's bias is outlier-bias / (i+1)^decay"},
      {"--channel-std-log-sigma", &S::channel_std_log_sigma, "log-sd of the Q, K channel scales"},
      {"--v-channel-std-log-sigma", &S::v_channel_std_log_sigma, "log-sd of the V channel scales"},
      {"--k-bias-std", &S::k_bias_std, "spread of K's channel bias"},
      {"--q-bias-std", &S::q_bias_std, "spread of Q's channel bias"},
      {"--q-outlier-bias-scale", &S::q_outlier_bias_scale, "Q's outlier-channel bias over K's"},
      {"--q-segment-offset-std", &S::q_segment_offset_std, "spread of Q's per-segment channel offsets"},
      {"--k-segment-offset-std", &S::k_segment_offset_std, "spread of K's per-segment channel offsets"},
      {"--v-bias-std", &S::v_bias_std, "spread of V's channel bias"},
      {"--q-gain", &S::q_gain, "Q multiplier (attention sharpness)"}};
  const std::tuple<const char*, std::optional<double> S::*, const char*> optional_options[]{
      {"--v-token-scale-sigma", &S::v_token_scale_sigma, "V's own log-sd of token magnitudes (default: the shared one)"},
      {"--v-token-noise-length", &S::v_token_noise_length, "V's own token noise length (default: the shared one)"}};
  for (const auto& [flag, member, help] : int_options) app.add_option(flag, given.*member, help)->capture_default_str();
  for (const auto& [flag, member, help] : double_options) app.add_option(flag, given.*member, help)->capture_default_str();
  for (const auto& [flag, member, help] : optional_options) app.add_option(flag, given.*member, help);
  app.add_flag("--q-outlier-rope-partner", given.q_outlier_rope_partner,
               "Q's outlier biases on the rotary partner channel (c + dim/2) of K's");
  app.add_option("--instruction", instruction, "per-thread groups from this instruction")->capture_default_str();
  app.add_option("--element", element_name, "Q/K element format (default: the instruction's; no other is accepted)");
  app.add_option("--tables", table_keys,
                 "tables to run: smooth (granularity, smooth Q+K), raw (granularity, no smoothing), methods "
                 "(smoothing methods, per-thread)")
      ->delimiter(',')
      ->check(CLI::IsMember({"smooth", "raw", "methods"}))
      ->capture_default_str();
  app.add_option("--warps", tiling.warps, "warps per thread block")->capture_default_str();
  app.add_option("--block-q", tiling.block_q, "Q block (tokens)")->capture_default_str();
  app.add_option("--block-k", tiling.block_k, "K block (tokens)")->capture_default_str();
  app.add_option("--hadamard-seed", hadamard_seed, "HadmdAttn rotation seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  SyntheticAttentionSpec synthetic = synthetic_preset(preset);
  synthetic.seed = given.seed;
  for (const auto& [flag, member, help] : int_options)
    if (app.count(flag)) synthetic.*member = given.*member;
  for (const auto& [flag, member, help] : double_options)
    if (app.count(flag)) synthetic.*member = given.*member;
  for (const auto& [flag, member, help] : optional_options)
    if (app.count(flag)) synthetic.*member = given.*member;
  if (app.count("--q-outlier-rope-partner")) synthetic.q_outlier_rope_partner = true;

  try {
    tiling.atom = parse_instruction(instruction);
    if (auto why = tiling.validate()) throw std::invalid_argument("tiling: " + *why);
    const Format element = element_name.empty() ? tiling.atom.a : format_from_string(element_name);
    if (element != tiling.atom.a)
      throw std::invalid_argument("--element " + element_name + " does not fit --instruction " + instruction +
                                  ", which multiplies " + format_name(tiling.atom.a) + " operands");
    const AttentionData d = data.empty() ? make_synthetic_attention(synthetic)
                                         : load_attention_npy(data[0], data[1], data[2]);
    std::vector<Method> ms;
    for (Method& m : methods(tiling, element))
      for (const Table& t : kTables)
        if (m.table == t.title && std::find(table_keys.begin(), table_keys.end(), t.key) != table_keys.end())
          ms.push_back(std::move(m));
    const auto dim = d.q[0].cols();
    for (Method& m : ms) {
      m.config.hadamard_seed = hadamard_seed;
      if (m.config.baseline == QkBaseline::hadamard && (dim & (dim - 1)) != 0)
        m.skipped =
            "the random Hadamard rotation needs a power-of-two head dimension (d = " + std::to_string(dim) + ")";
      if (!m.skipped.empty()) std::cerr << "lowbit run granularity-qk: note: " << m.name << " skipped: " << m.skipped << "\n";
    }

    // The inputs are read: from here on the results folder is written (an unwritable one fails now).
    experiments::ResultDirectory out(out_dir, experiments::RunInfo::from_args(argc, argv));
    std::vector<Row> rows;
    for (int h = 0; h < d.heads(); ++h) {
      const MatrixD reference = attention_reference(d.q[h].cast<double>(), d.k[h].cast<double>(), d.v[h].cast<double>());
      const auto name = [&](int i, const char* tensor) {
        const std::string file = data.empty() ? std::string("synthetic ") + tensor : data[std::size_t(i)];
        return file + " head " + std::to_string(h);
      };
      const QkTensorNames names{name(0, "Q"), name(1, "K"), name(2, "V")};
      for (const Method& m : ms) {
        if (!m.skipped.empty()) continue;
        const QkAttentionResult r = quantized_qk_attention(d.q[h], d.k[h], d.v[h], m.config, names);
        rows.push_back({m.table, m.name, h, compare(reference, r.output), r.mean_q_scale, r.mean_k_scale});
      }
      std::cerr << "head " << h + 1 << "/" << d.heads() << " done\n";
    }

    nlohmann::json config{{"instruction", instruction},
                          {"element", format_name(element)},
                          {"tables", table_keys},
                          {"warps", tiling.warps},
                          {"block_q", tiling.block_q},
                          {"block_k", tiling.block_k},
                          {"rounding", "nearest-even"},
                          {"p_and_v", "float64"},
                          {"reference", "float64 softmax(Q K^T / sqrt(d)) V"},
                          {"hadamard_seed", hadamard_seed},
                          {"heads", d.heads()},
                          {"tokens", d.q[0].rows()},
                          {"dim", d.q[0].cols()}};
    if (data.empty()) config["synthetic"] = synthetic.to_json();
    for (const std::string& file : data) config["data"].push_back(repository_relative(file));
    out.run().inputs = data;
    out.run().formats = {{"element", format_name(element)}, {"instruction", instruction}};
    out.run().seeds = {{"hadamard", hadamard_seed}};
    if (data.empty()) out.run().seeds["synthetic"] = synthetic.seed;
    out.run().config = config;

    std::string csv;
    std::vector<std::string> skipped;
    for (const Method& m : ms)
      if (!m.skipped.empty()) skipped.push_back("skipped: " + m.table + " / " + m.name + ": " + m.skipped);
    csv += "table,method,head,cosine,relative_l1,rmse,max_abs,mean_q_scale,mean_k_scale\n";
    for (const Row& r : rows)
      csv += fmt::format("\"{}\",\"{}\",{},{:.8f},{:.8f},{:.8f},{:.8f},{:.8g},{:.8g}\n", r.table, r.method, r.head,
                         r.m.cosine, r.m.relative_l1, r.m.rmse, r.m.max_abs, r.q_scale, r.k_scale);
    out.csv("granularity.csv", csv, skipped);

    std::string summary_csv = "table,method,statistic,cosine,relative_l1,rmse\n";
    nlohmann::json summary = nlohmann::json::array();
    std::string markdown;
    std::vector<std::string> tables;
    for (const Method& m : ms)
      if (std::find(tables.begin(), tables.end(), m.table) == tables.end()) tables.push_back(m.table);
    for (const std::string& table : tables) {
      const bool granularity = table.rfind("granularity", 0) == 0;
      markdown += "\n### " + format_name(element) + " Q, K; P, V float64 — " + table + " (" + std::to_string(d.heads()) +
                  " heads)\n\n";
      markdown += "| Method | Cos Sim (mean) | Relative L1 (mean) | RMSE (mean) | Cos Sim (worst) | Relative L1 (worst) | "
                  "RMSE (worst) |";
      markdown += granularity ? " Q step / per-token | K step / per-token |\n" : "\n";
      markdown += granularity ? "|---|---|---|---|---|---|---|---|---|\n" : "|---|---|---|---|---|---|---|\n";
      const Summary token = summarize(rows, table, "per-token");
      for (const Method& m : ms) {
        if (m.table != table) continue;
        if (!m.skipped.empty()) {
          markdown += "| " + m.name + " | skipped: " + m.skipped + " | | | | | |" + (granularity ? " | |\n" : "\n");
          summary_csv += fmt::format("\"{}\",\"{}\",skipped,,,\n", table, m.name);
          summary.push_back({{"table", table}, {"method", m.name}, {"skipped", m.skipped}});
          continue;
        }
        const Summary s = summarize(rows, table, m.name);
        markdown += fmt::format("| {} | {:.2f}% | {:.4f} | {:.4f} | {:.2f}% | {:.4f} | {:.4f} |", m.name,
                                100 * s.mean.cosine, s.mean.relative_l1, s.mean.rmse, 100 * s.worst.cosine,
                                s.worst.relative_l1, s.worst.rmse);
        if (granularity) markdown += fmt::format(" {:.3f} | {:.3f} |", s.q_scale / token.q_scale, s.k_scale / token.k_scale);
        markdown += "\n";
        for (const auto& [stat, e] : {std::pair{"mean", s.mean}, std::pair{"worst", s.worst}})
          summary_csv += fmt::format("\"{}\",\"{}\",{},{:.8f},{:.8f},{:.8f}\n", table, m.name, stat, e.cosine,
                                     e.relative_l1, e.rmse);
        summary.push_back({{"table", table},
                           {"method", m.name},
                           {"q_spec", m.config.q_spec.name},
                           {"k_spec", m.config.k_spec.name},
                           {"mean", {{"cosine", s.mean.cosine}, {"relative_l1", s.mean.relative_l1}, {"rmse", s.mean.rmse}}},
                           {"worst", {{"cosine", s.worst.cosine}, {"relative_l1", s.worst.relative_l1}, {"rmse", s.worst.rmse}}},
                           {"mean_q_scale", s.q_scale},
                           {"mean_k_scale", s.k_scale}});
      }
    }
    out.csv("summary.csv", summary_csv);
    out.json("granularity.json", nlohmann::json{{"provenance", out.run().machine.to_json()},
                                                {"command", out.run().command},
                                                {"config", config},
                                                {"summary", summary}});
    out.markdown("table.md", markdown);
    out.write_provenance();
    std::cout << markdown;
    std::cout << "\nwrote " << out_dir << "/{granularity.csv, summary.csv, granularity.json, table.md, provenance.json}\n";
  } catch (const std::exception& e) {
    std::cerr << "lowbit run granularity-qk: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace lowbit::experiments
