// The experiments of run_linear.hpp. Every case is one GLA head: Q, K, V of a data set (synthetic
// or captured) and its own random gates (numerics/gates, GLA's parametrization); the float64
// chunkwise reference is computed once per case and every pipeline of the experiment is measured
// against it.
//
// Experiments (variant names: a preset of emulation/linear/gla.hpp, plus the swept setting):
//   accuracy     every preset
//   temperature  int8/int4 with and without smoothing, the proposal, bf16: gate temperature tau
//                (1: fast forgetting ... 64: slow); GLA uses 16
//   chunk        chunk size C = 64, 128, 256 (sub-chunk 16)
//   flush        FP8 P V at C = 256: MMAs per fresh FP22 accumulator (0: one accumulator)
//   ablation     INT4 score scales per thread / per sub-chunk block / per token; P per token / per
//                chunk; smoothing with the row bias Q~ kbar dropped (as softmax attention may drop it)
// The sweeps (all but accuracy) run on the first --sweep-seeds seeds of every data set.
// Metrics (each against float64):
//   scores_*        the inter-sub-chunk entries of the intra-chunk P (the quantized blocks, after
//                   gating): the proposal's cosine criterion
//   chunk_scores_*  every entry of P (diagonal blocks too)
//   intra_*         the intra-chunk output P V alone
//   output_*        the output (inter + intra);  state_*  the state after the last chunk
#include "experiments/linear/run_linear.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <regex>

#include <nlohmann/json.hpp>

#include "emulation/linear/gla.hpp"
#include "experiments/common/results.hpp"
#include "experiments/linear/run_linear_records.hpp"
#include "experiments/linear/run_linear_summary.hpp"
#include "numerics/gates.hpp"
#include "numerics/linear_attention.hpp"
#include "numerics/metrics.hpp"
#include "numerics/parallel.hpp"
#include "numerics/provenance.hpp"
#include "numerics/synthetic.hpp"
#include "numerics/tensor_file.hpp"

namespace lowbit::experiments {
namespace {

using namespace run_linear_detail;  // run_linear_records.hpp, run_linear_summary.hpp

// ---- data ----------------------------------------------------------------------------------------

Dataset synthetic(const Options& o, const std::string& preset_name) {
  Dataset d{"synthetic-" + preset_name, "", {}, {}};
  for (int seed = 1; seed <= o.seeds; ++seed) {
    SyntheticAttentionSpec s = synthetic_preset(preset_name);
    s.heads = o.heads;
    s.tokens = o.tokens;
    s.seed = std::uint64_t(seed);
    if (preset_name == "default") s.dim = o.dk;
    auto data = std::make_shared<AttentionData>(make_synthetic_attention(s));
    if (preset_name == "default" && o.dv != o.dk) {  // V of its own width, from an independent draw
      SyntheticAttentionSpec sv = s;
      sv.dim = o.dv;
      sv.seed = std::uint64_t(seed) + 1000;
      data->v = make_synthetic_attention(sv).v;
    }
    if (seed == 1)
      d.description = fmt::format("numerics/synthetic preset '{}': {} heads x {} tokens, d_k = {}, d_v = {}, seeds 1..{}",
                                  preset_name, s.heads, s.tokens, data->q[0].cols(), data->v[0].cols(), o.seeds);
    for (int h = 0; h < s.heads; ++h)
      d.cases.push_back({d.name, fmt::format("seed{}/head{}", seed, h), &data->q[std::size_t(h)],
                         &data->k[std::size_t(h)], &data->v[std::size_t(h)], seed, std::uint64_t(seed * 1009 + h)});
    d.data.push_back(std::move(data));
  }
  return d;
}

// One matrix per head of a [1, heads, tokens, d] (or [heads, tokens, d]) tensor file.
std::vector<MatrixF> file_heads(const std::string& path, std::vector<std::string>& inputs) {
  const TensorFile f = read_tensor_file(path);
  if (f.tensor.batch != 1) throw std::runtime_error(path + ": batch " + std::to_string(f.tensor.batch) + ", expected 1");
  inputs.push_back(path);
  std::vector<MatrixF> out;
  for (int h = 0; h < f.tensor.heads; ++h) out.push_back(f.tensor.head(0, h));
  return out;
}

// The captured layers: query head h attends with key/value head h / (query heads / KV heads); each
// query head, with its own gates, is one GLA head.
std::optional<Dataset> captured(const Options& o, std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  if (!o.real) return std::nullopt;
  if (!fs::is_directory(o.data_dir)) {
    std::cerr << "exp_linear: note: no captured data at " << o.data_dir << " (--data-dir); skipped\n";
    return std::nullopt;
  }
  std::vector<std::string> layers = o.real_layers;
  if (layers.empty()) {
    const std::regex name("layer([0-9]+)_q\\.npy");
    for (const auto& e : fs::directory_iterator(o.data_dir)) {
      std::smatch m;
      const std::string file = e.path().filename().string();
      if (std::regex_match(file, m, name)) layers.push_back(m[1]);
    }
    std::sort(layers.begin(), layers.end());
  }
  if (layers.empty()) throw std::runtime_error(o.data_dir + ": no layerNN_q.npy files");
  Dataset d{fs::path(o.data_dir).filename().string(), "", {}, {}};
  for (const std::string& layer : layers) {
    const std::string base = o.data_dir + "/layer" + layer + "_";
    auto data = std::make_shared<AttentionData>();
    data->q = file_heads(base + "q.npy", inputs);
    data->k = file_heads(base + "k.npy", inputs);
    data->v = file_heads(base + "v.npy", inputs);
    const std::size_t hq = data->q.size(), hkv = data->k.size();
    if (hkv == 0 || hq % hkv != 0 || data->v.size() != hkv)
      throw std::runtime_error(fmt::format("{}: {} query heads, {} key heads, {} value heads: query heads must be a "
                                           "multiple of the key/value heads",
                                           base + "*.npy", hq, hkv, data->v.size()));
    if (data->q[0].cols() != data->k[0].cols() || data->q[0].rows() != data->k[0].rows() ||
        data->k[0].rows() != data->v[0].rows())
      throw std::runtime_error(base + "*.npy: Q, K, V shapes do not fit together");
    const std::size_t heads = o.real_heads > 0 ? std::min<std::size_t>(hq, std::size_t(o.real_heads)) : hq;
    if (d.description.empty())
      d.description = fmt::format("{}: layers {}, {} of {} query heads (KV head h / {}), {} tokens, d = {}, gate seeds 1..{}",
                                  repository_relative(o.data_dir), fmt::join(layers, ", "), heads, hq, hq / hkv,
                                  data->q[0].rows(), data->q[0].cols(), o.seeds);
    for (int seed = 1; seed <= o.seeds; ++seed)
      for (std::size_t h = 0; h < heads; ++h) {
        const std::size_t kv = h / (hq / hkv);
        d.cases.push_back({d.name, fmt::format("layer{}/seed{}/head{}", layer, seed, h), &data->q[h], &data->k[kv],
                           &data->v[kv], seed, std::uint64_t(seed * 1009 + 37 * std::stoi(layer) + int(h))});
      }
    d.data.push_back(std::move(data));
  }
  return d;
}

// ---- measurement ---------------------------------------------------------------------------------

struct Reference {
  LinearAttentionResult result;
  MatrixD scores, intra;
};

Reference reference(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& g, const ChunkShape& shape) {
  Reference r{gla_chunkwise(q, k, v, g, shape), gla_chunk_scores(q, k, g, shape.chunk), MatrixD(q.rows(), v.cols())};
  for (int first = 0; first < q.rows(); first += shape.chunk) {
    const int L = std::min<int>(shape.chunk, int(q.rows()) - first);
    r.intra.middleRows(first, L) = r.scores.block(first, 0, L, L) * v.middleRows(first, L);
  }
  return r;
}

void add(std::vector<Row>& rows, const Job& job, const std::string& variant, const std::string& metric, double value) {
  rows.push_back({job.experiment, variant, job.c->dataset, job.c->head, metric, value});
}

std::vector<Row> run_job(const Job& job, const Options& o) {
  const Case& c = *job.c;
  SyntheticGateSpec gs = o.gates;
  gs.temperature = job.temperature;
  gs.seed = c.gate_seed;
  const MatrixF g = make_log_gates(gs, 1, int(c.q->rows()), int(c.q->cols()))[0];
  const MatrixD qd = c.q->cast<double>(), kd = c.k->cast<double>(), vd = c.v->cast<double>(), gd = g.cast<double>();
  const Reference ref = reference(qd, kd, vd, gd, job.shape);
  const int tokens = int(qd.rows());
  std::vector<Row> rows;
  // The inter-chunk part depends on the state stage only: computed once per stage and shared.
  std::map<std::string, linear::InterResult> inter;
  for (const auto& [variant, pipeline] : job.variants) {
    auto it = inter.find(pipeline.state.instruction);
    if (it == inter.end())
      it = inter.emplace(pipeline.state.instruction, linear::inter_chunk(pipeline, *c.q, *c.k, *c.v, g)).first;
    const linear::ForwardResult r = linear::combine(it->second, linear::intra_chunk(pipeline, *c.q, *c.k, *c.v, g));
    std::vector<double> inter_ref, inter, all_ref, all;
    for (int t = 0; t < tokens; ++t)
      for (int col = 0; col < job.shape.chunk; ++col) {
        const ScoreBlock b = score_block(t, col, tokens, job.shape);
        if (b == ScoreBlock::none) continue;
        all_ref.push_back(ref.scores(t, col));
        all.push_back(r.scores(t, col));
        if (b == ScoreBlock::inter_sub_chunk) {
          inter_ref.push_back(ref.scores(t, col));
          inter.push_back(r.scores(t, col));
        }
      }
    const auto both = [&](const std::string& name, const ErrorMetrics& m) {
      add(rows, job, variant, name + "_cosine", m.cosine);
      add(rows, job, variant, name + "_rel_l1", m.relative_l1);
    };
    if (!inter.empty()) both("scores", compare(inter_ref, inter));
    both("chunk_scores", compare(all_ref, all));
    both("intra", compare(ref.intra, r.intra.cast<double>()));
    both("output", compare(ref.result.output, r.output.cast<double>()));
    add(rows, job, variant, "output_rmse", compare(ref.result.output, r.output.cast<double>()).rmse);
    both("state", compare(ref.result.state, r.state.cast<double>()));
  }
  return rows;
}

std::vector<std::pair<std::string, Pipeline>> presets(const std::vector<std::string>& names, const ChunkShape& shape,
                                                      const std::string& suffix = "") {
  std::vector<std::pair<std::string, Pipeline>> out;
  for (const std::string& n : names) out.emplace_back(n + suffix, linear::preset(n, shape));
  return out;
}

std::vector<Job> plan(const Options& o, const std::vector<Dataset>& datasets) {
  const ChunkShape shape{o.chunk, o.sub_chunk};
  const auto selected = [&](std::string_view e) {
    return std::find(o.experiments.begin(), o.experiments.end(), e) != o.experiments.end();
  };
  std::vector<std::string> all;
  for (const auto& i : linear::preset_list()) all.emplace_back(i.name);
  std::vector<Job> jobs;
  for (const Dataset& d : datasets)
    for (const Case& c : d.cases) {
      if (selected("accuracy")) jobs.push_back({"accuracy", &c, o.gates.temperature, shape, presets(all, shape)});
      if (c.seed > o.sweep_seeds) continue;
      if (selected("temperature"))
        for (double tau : o.temperatures)
          jobs.push_back({"temperature", &c, tau, shape,
                          presets({"bf16", "int8", "int8-smooth", "int4", "int4-smooth"}, shape,
                                  fmt::format(" tau={}", tau))});
      if (selected("ablation")) {
        std::vector<std::pair<std::string, Pipeline>> v;
        for (const char* name : {"int4", "int4-smooth"})
          for (linear::Granularity g :
               {linear::Granularity::per_thread, linear::Granularity::per_block, linear::Granularity::per_token}) {
            Pipeline p = linear::preset(name, shape);
            p.scores.granularity = g;
            v.emplace_back(fmt::format("{} scores={}", name, attention::to_string(g)), p);
          }
        for (linear::Granularity g : {linear::Granularity::per_token, linear::Granularity::per_block}) {
          Pipeline p = linear::preset("int4-smooth-fp8", shape);
          p.values.p = g;
          v.emplace_back(fmt::format("int4-smooth-fp8 p={}", attention::to_string(g)), p);
        }
        for (const char* name : {"int8-smooth", "int4-smooth"}) {
          Pipeline p = linear::preset(name, shape);
          p.scores.correction = quant::ScoreCorrection::softmax;
          v.emplace_back(fmt::format("{} row-bias-dropped", name), p);
        }
        jobs.push_back({"ablation", &c, o.gates.temperature, shape, v});
      }
      if (d.name.rfind("synthetic-default", 0) != 0) continue;  // the sweeps of C on the d_v = 256 data
      if (selected("chunk"))
        for (int C : o.chunks) {
          const ChunkShape s{C, o.sub_chunk};
          jobs.push_back({"chunk", &c, o.gates.temperature, s,
                          presets({"bf16", "int4-smooth", "bf16-fp8", "int8-smooth-fp8", "int4-smooth-fp8"}, s,
                                  fmt::format(" C={}", C))});
        }
      if (selected("flush")) {
        const ChunkShape s{*std::max_element(o.chunks.begin(), o.chunks.end()), o.sub_chunk};
        std::vector<std::pair<std::string, Pipeline>> v;
        for (const char* name : {"bf16-fp8", "int4-smooth-fp8"})
          for (int f : o.flushes) {
            Pipeline p = linear::preset(name, s);
            p.values.mmas_per_flush = f;
            v.emplace_back(fmt::format("{} C={} flush={}", name, s.chunk, f), p);
          }
        jobs.push_back({"flush", &c, o.gates.temperature, s, v});
      }
    }
  return jobs;
}

}  // namespace

int run_linear(int argc, char** argv) {
  CLI::App app{"exp_linear: the INT4/FP8 smoothing proposal for chunkwise gated linear attention (issue 14), measured "
               "against float64 on synthetic and captured data with random GLA gates"};
  Options o;
  app.add_option("--out", o.out, "output folder")->capture_default_str();
  app.add_option("--experiments", o.experiments, "experiments to run: accuracy, temperature, ablation, chunk, flush")
      ->delimiter(',')
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kExperiments), std::end(kExperiments))))
      ->capture_default_str();
  app.add_option("--seeds", o.seeds, "seeds of the synthetic data and of the gates (1..N)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--sweep-seeds", o.sweep_seeds, "seeds the sweeps (temperature, ablation, chunk, flush) run on")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--heads", o.heads, "synthetic heads per seed")->check(CLI::Range(1, 1024))->capture_default_str();
  app.add_option("--tokens", o.tokens, "synthetic tokens")->check(CLI::Range(1, 1 << 20))->capture_default_str();
  app.add_option("--dk", o.dk, "key dimension of the default synthetic data")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--dv", o.dv, "value dimension of the default synthetic data")->check(CLI::Range(8, 256))->capture_default_str();
  app.add_option("--chunk", o.chunk, "chunk size C")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--sub-chunk", o.sub_chunk, "sub-chunk size c")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "captured layerNN_{q,k,v}.npy ([1, heads, tokens, d])")->capture_default_str();
  app.add_flag("!--no-real", o.real, "skip the captured data");
  app.add_option("--real-layers", o.real_layers, "captured layers to use, e.g. 00,20 (default: every layer found)")
      ->delimiter(',');
  app.add_option("--real-heads", o.real_heads, "query heads per captured layer (0: all)")->check(CLI::Range(0, 1024))->capture_default_str();
  app.add_option("--gate-temperature", o.gates.temperature, "gate temperature tau (GLA: 16)")->capture_default_str();
  app.add_option("--gate-bias-mean", o.gates.bias_mean, "mean of the per-channel gate logit bias")->capture_default_str();
  app.add_option("--gate-bias-std", o.gates.bias_std, "spread of the per-channel gate logit bias")->capture_default_str();
  app.add_option("--gate-noise-std", o.gates.noise_std, "per-token spread of the gate logits")->capture_default_str();
  app.add_option("--temperatures", o.temperatures, "temperature sweep")->delimiter(',')->capture_default_str();
  app.add_option("--chunks", o.chunks, "chunk-size sweep")->delimiter(',')->capture_default_str();
  app.add_option("--flushes", o.flushes, "flush sweep (MMAs per fresh FP22 accumulator)")->delimiter(',')->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    const auto start = std::chrono::steady_clock::now();
    if (auto why = ChunkShape{o.chunk, o.sub_chunk}.validate()) throw std::invalid_argument("--chunk/--sub-chunk: " + *why);
    for (int C : o.chunks)
      if (auto why = ChunkShape{C, o.sub_chunk}.validate()) throw std::invalid_argument("--chunks: " + *why);
    if (auto why = o.gates.validate()) throw std::invalid_argument("gates: " + *why);
    for (double tau : o.temperatures)
      if (!(tau > 0)) throw std::invalid_argument(fmt::format("--temperatures: {} is not positive", tau));
    for (int f : o.flushes)
      if (f < 0) throw std::invalid_argument(fmt::format("--flushes: {} is negative", f));

    std::vector<Dataset> datasets;
    datasets.push_back(synthetic(o, "default"));
    datasets.push_back(synthetic(o, "smollm2"));
    ResultDirectory out(o.out, RunInfo::from_args(argc, argv));
    if (auto d = captured(o, out.run().inputs)) datasets.push_back(std::move(*d));
    for (const Dataset& d : datasets)
      for (const auto& [name, p] : linear::preset_list())
        if (auto why = linear::preset(name, {o.chunk, o.sub_chunk}).validate(int(d.cases[0].q->cols()), int(d.cases[0].v->cols())))
          throw std::invalid_argument(fmt::format("{} on {}: {}", name, d.name, *why));

    const std::vector<Job> jobs = plan(o, datasets);
    std::vector<std::vector<Row>> results(jobs.size());
    std::mutex progress;
    std::size_t done = 0;
    const unsigned threads = worker_count();
    parallel_for(jobs.size(), [&](std::size_t i, unsigned) {
      results[i] = run_job(jobs[i], o);
      std::lock_guard lock(progress);
      if (++done % 20 == 0 || done == jobs.size())
        std::cerr << fmt::format("exp_linear: {}/{} cases ({} {} {})\n", done, jobs.size(), jobs[i].experiment,
                                 jobs[i].c->dataset, jobs[i].c->head);
    });
    std::vector<Row> rows;
    for (auto& r : results) rows.insert(rows.end(), r.begin(), r.end());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    std::string csv = "experiment,variant,dataset,head,metric,value\n";
    for (const Row& r : rows)
      csv += fmt::format("{},{},{},{},{},{:.10g}\n", csv_field(r.experiment), csv_field(r.variant), csv_field(r.dataset),
                         csv_field(r.head), r.metric, r.value);
    out.csv("metrics.csv", csv);
    nlohmann::json pipelines = nlohmann::json::array();
    for (const auto& [name, summary] : linear::preset_list()) {
      const Pipeline p = linear::preset(name, {o.chunk, o.sub_chunk});
      pipelines.push_back({{"name", name},
                           {"follows", summary},
                           {"scores", {{"instruction", p.scores.instruction},
                                       {"granularity", attention::to_string(p.scores.granularity)},
                                       {"smooth", p.scores.smooth}}},
                           {"values", {{"instruction", p.values.instruction},
                                       {"p", attention::to_string(p.values.p)},
                                       {"v", attention::to_string(p.values.v)},
                                       {"mmas_per_flush", p.values.mmas_per_flush}}},
                           {"state", {{"instruction", p.state.instruction}}}});
    }
    nlohmann::json data = nlohmann::json::array();
    for (const Dataset& d : datasets) data.push_back({{"name", d.name}, {"description", d.description}, {"heads", d.cases.size()}});
    RunInfo& run = out.run();
    run.formats = {{"presets", pipelines}};
    run.seeds = {{"seeds", o.seeds}, {"sweep_seeds", o.sweep_seeds},
                 {"rule", "synthetic data seed s; gates seed 1009 s + head (+ 37 layer for captured data)"}};
    run.config = {{"seconds", seconds},
                  {"threads", threads},
                  {"experiments", o.experiments},
                  {"chunk", o.chunk},
                  {"sub_chunk", o.sub_chunk},
                  {"gates", o.gates.to_json()},
                  {"temperatures", o.temperatures},
                  {"chunks", o.chunks},
                  {"flushes", o.flushes},
                  {"datasets", data},
                  {"reference", "float64 chunkwise GLA (numerics/linear_attention.hpp), checked against the recurrence"},
                  {"rows", rows.size()}};
    out.write_provenance();

    const auto stats = summarize(rows);
    const Tables t(stats, datasets);
    std::vector<std::string> order;
    for (const Row& r : rows)
      if (std::find(order.begin(), order.end(), r.variant) == order.end()) order.push_back(r.variant);
    std::string md = "# Chunkwise GLA with INT4/INT8 scores and FP8 P V: measured against float64\n\nData:\n";
    for (const Dataset& d : datasets) md += "- " + d.name + ": " + d.description + "\n";
    md += fmt::format("- gates: log alpha = log_sigmoid(b_c + {} z) / tau, b_c ~ N({}, {}^2), tau = {} unless swept\n\n",
                      o.gates.noise_std, o.gates.bias_mean, o.gates.bias_std, o.gates.temperature);
    if (t.variants("accuracy", order).size()) md += t.hypotheses();
    md += t.table(fmt::format("All presets (C = {}, c = {})", o.chunk, o.sub_chunk), "accuracy", order,
                  {{"scores_cosine", "scores cos", true},
                   {"scores_rel_l1", "scores rel L1", false},
                   {"intra_rel_l1", "intra-chunk output rel L1", true},
                   {"output_cosine", "output cos", false},
                   {"output_rel_l1", "output rel L1", true},
                   {"state_rel_l1", "state rel L1", false}});
    md += t.table("Gate temperature (smaller tau: faster forgetting)", "temperature", order,
                  {{"scores_cosine", "scores cos", true}, {"output_rel_l1", "output rel L1", false}});
    md += t.table("Ablations: score and P scale granularity, the row bias dropped", "ablation", order,
                  {{"scores_cosine", "scores cos", true}, {"intra_rel_l1", "intra-chunk output rel L1", true}});
    md += t.table("Chunk size", "chunk", order,
                  {{"scores_cosine", "scores cos", false},
                   {"intra_rel_l1", "intra-chunk output rel L1", true},
                   {"output_rel_l1", "output rel L1", false}});
    md += t.table("FP8 P V: MMAs per fresh FP22 accumulator (0: one accumulator for the chunk)", "flush", order,
                  {{"intra_rel_l1", "intra-chunk output rel L1", true}, {"output_rel_l1", "output rel L1", false}});
    out.markdown("table.md", md);
    std::cout << md << fmt::format("exp_linear: {} rows from {} cases in {:.0f} s; wrote {}/metrics.csv, provenance.json, table.md\n",
                                   rows.size(), jobs.size(), seconds, o.out);
  } catch (const std::exception& e) {
    std::cerr << "exp_linear: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace lowbit::experiments
