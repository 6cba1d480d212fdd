#include "experiments/run/harness.hpp"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "numerics/provenance.hpp"
#include "numerics/tensor_file.hpp"

namespace lowbit::experiments {
namespace {

Tensor4 stack(const std::vector<MatrixF>& heads) {
  Tensor4 t(1, int(heads.size()), int(heads.front().rows()), int(heads.front().cols()));
  for (std::size_t h = 0; h < heads.size(); ++h)
    std::copy(heads[h].data(), heads[h].data() + heads[h].size(), t.values.begin() + std::ptrdiff_t(t.offset(0, int(h), 0)));
  return t;
}

double cpu_now() { return double(std::clock()) / CLOCKS_PER_SEC; }

// A table cell: '|' escaped (variant names such as "Q,K int4 | P,V e4m3").
std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string join(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

}  // namespace

std::string percent(double cosine, int decimals) { return fmt::format("{:.{}f}%", 100 * cosine, decimals); }

// ---- datasets ---------------------------------------------------------------------------------

std::vector<std::string> dataset_names() {
  return {"synthetic", "synthetic-smollm2", "smollm2", "synthetic-flat", "synthetic-sink"};
}

Dataset synthetic_dataset(const std::string& name, const std::string& preset, int heads, int tokens, int dim,
                          std::uint64_t seed, bool causal) {
  SyntheticAttentionSpec spec = synthetic_preset(preset);
  spec.heads = heads;
  spec.tokens = tokens;
  spec.dim = dim;
  spec.seed = seed;
  if (auto why = spec.validate()) throw std::invalid_argument("dataset " + name + ": " + *why);
  const AttentionData data = make_synthetic_attention(spec);
  Dataset d;
  d.name = name;
  d.q = stack(data.q);
  d.k = stack(data.k);
  d.v = stack(data.v);
  d.causal = causal;
  for (int h = 0; h < heads; ++h) d.head_labels.push_back("h" + std::to_string(h));
  d.spec = {{"synthetic", spec.to_json()}, {"causal", causal}};
  d.description = fmt::format("synthetic, preset `{}` (numerics/synthetic.hpp), seed {}: {} heads x {} tokens x d = {}, {}",
                              preset, seed, heads, tokens, dim, causal ? "causal" : "not causal");
  return d;
}

Dataset smollm2_dataset(const std::string& dir, const std::vector<int>& layers, const std::vector<int>& heads, int tokens) {
  std::vector<MatrixF> q, k, v;
  Dataset d;
  d.name = "smollm2";
  for (int layer : layers) {
    const auto file = [&](const char* t) { return (std::filesystem::path(dir) / fmt::format("layer{:02}_{}.npy", layer, t)).string(); };
    const TensorFile fq = read_tensor_file(file("q")), fk = read_tensor_file(file("k")), fv = read_tensor_file(file("v"));
    for (const auto* f : {&fq, &fk, &fv}) d.inputs.push_back(f->source);
    if (fq.tensor.heads % fk.tensor.heads != 0 || fk.tensor.heads != fv.tensor.heads)
      throw std::runtime_error(fmt::format("{}: {} Q heads do not group over {} K and {} V heads", dir, fq.tensor.heads,
                                           fk.tensor.heads, fv.tensor.heads));
    const int group = fq.tensor.heads / fk.tensor.heads;
    const int n = tokens > 0 ? std::min(tokens, fq.tensor.tokens) : fq.tensor.tokens;
    for (int h : heads) {
      if (h < 0 || h >= fq.tensor.heads)
        throw std::invalid_argument(fmt::format("{}: no Q head {} (it has {})", file("q"), h, fq.tensor.heads));
      q.push_back(fq.tensor.head(0, h).topRows(n));
      k.push_back(fk.tensor.head(0, h / group).topRows(n));
      v.push_back(fv.tensor.head(0, h / group).topRows(n));
      d.head_labels.push_back(fmt::format("L{}H{}", layer, h));
    }
  }
  d.q = stack(q);
  d.k = stack(k);
  d.v = stack(v);
  d.causal = true;
  d.spec = {{"dir", repository_relative(dir)}, {"layers", layers}, {"q_heads", heads}, {"tokens", d.q.tokens},
            {"causal", true}};
  d.description = fmt::format(
      "SmolLM2-135M-Instruct's Q (after RoPE), K, V captured on our own prose ({}): layers {}, Q heads {} of each with "
      "their KV heads, {} tokens, d = 64, causal",
      repository_relative(dir), join(layers), join(heads), d.q.tokens);
  return d;
}

Dataset long_dataset(const std::string& name, const std::string& preset, int heads, int queries, int keys, std::uint64_t seed) {
  // Only the first queries are kept: a row's error depends on the keys it attends to, and the
  // emulated pipeline's time on queries x keys.
  Dataset d = slice(synthetic_dataset(name, preset, heads, keys, 128, seed, false), 0, std::min(queries, keys), keys);
  d.description += fmt::format("; the first {} queries against all {} keys", std::min(queries, keys), keys);
  return d;
}

Dataset file_dataset(const std::string& name, const std::string& q_spec, const std::string& k_spec,
                     const std::string& v_spec, bool causal) {
  const TensorFile fq = read_tensor_file(q_spec), fk = read_tensor_file(k_spec), fv = read_tensor_file(v_spec);
  const Tensor4 &q = fq.tensor, &k = fk.tensor, &v = fv.tensor;
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(fmt::format("--q {} {}, --k {} {}, --v {} {}: {}", q_spec, q.shape_text(), k_spec,
                                            k.shape_text(), v_spec, v.shape_text(), why));
  };
  if (k.batch != q.batch || v.batch != q.batch) fail("batch sizes differ");
  if (k.heads != v.heads) fail("K and V head counts differ");
  if (q.heads % k.heads != 0) fail("K's heads do not divide Q's (grouped-query attention)");
  if (k.tokens != v.tokens) fail("K and V token counts differ");
  if (q.dim != k.dim) fail("Q and K head dimensions differ");
  const int group = q.heads / k.heads;
  std::vector<MatrixF> qs, ks, vs;
  Dataset d;
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h) {
      qs.push_back(q.head(b, h));
      ks.push_back(k.head(b, h / group));
      vs.push_back(v.head(b, h / group));
      d.head_labels.push_back(q.batch > 1 ? fmt::format("b{}h{}", b, h) : fmt::format("h{}", h));
    }
  d.name = name.empty() ? std::filesystem::path(q_spec.substr(0, q_spec.find(':'))).stem().string() : name;
  d.q = stack(qs);
  d.k = stack(ks);
  d.v = stack(vs);
  d.causal = causal;
  d.inputs = {fq.source, fk.source, fv.source};
  d.spec = {{"q", repository_relative(q_spec)}, {"k", repository_relative(k_spec)}, {"v", repository_relative(v_spec)},
            {"causal", causal}};
  d.description = fmt::format("the user's tensors: Q {} {} ({}), K {}, V {}, {}", q_spec, q.shape_text(), to_string(fq.type),
                              k.shape_text(), v.shape_text(), causal ? "causal" : "not causal");
  return d;
}

Dataset slice(const Dataset& d, int first_query, int queries, int keys) {
  if (keys <= 0) keys = d.k.tokens;
  if (first_query < 0 || queries < 1 || first_query + queries > d.q.tokens || keys > d.k.tokens)
    throw std::invalid_argument(fmt::format("dataset {}: cannot take queries [{}, {}) and {} keys of {} x {}", d.name,
                                            first_query, first_query + queries, keys, d.q.tokens, d.k.tokens));
  Dataset s = d;
  std::vector<MatrixF> q, k, v;
  for (int h = 0; h < d.q.heads; ++h) {
    q.push_back(d.q.head(0, h).middleRows(first_query, queries));
    k.push_back(d.k.head(0, h).topRows(keys));
    v.push_back(d.v.head(0, h).topRows(keys));
  }
  s.q = stack(q);
  s.k = stack(k);
  s.v = stack(v);
  s.causal = false;
  s.spec["slice"] = {{"first_query", first_query}, {"queries", queries}, {"keys", keys}};
  return s;
}

// ---- options ------------------------------------------------------------------------------------

void add_common_options(CLI::App& app, CommonOptions& o, const std::string& experiment) {
  o.out = std::string(LOWBIT_DEFAULT_RESULTS_DIR) + "/" + experiment;
  o.data_dir = std::string(LOWBIT_SOURCE_DIR) + "/experiments/data/smollm2-135m";
  app.add_option("--out", o.out, "output folder (the committed record: results/experiments/" + experiment + ")")->capture_default_str();
  std::string names;
  for (const auto& n : dataset_names()) names += (names.empty() ? "" : ", ") + n;
  app.add_option("--datasets", o.datasets,
                 "datasets to run (" + names +
                     "): synthetic = the generator's default preset; synthetic-smollm2 = the preset matched to SmolLM2's "
                     "statistics (causal); smollm2 = the committed SmolLM2-135M capture (causal); synthetic-flat, synthetic-sink = "
                     "the presets `flat` and `sink`, 128 queries against 16384 keys (--tokens), 2 heads (--heads)")
      ->delimiter(',')
      ->check(CLI::IsMember(dataset_names()))
      ->capture_default_str();
  app.add_option("--q", o.q, "your Q: FILE.npy or FILE.safetensors:NAME, [heads, tokens, d] or [batch, heads, tokens, d] "
                             "(float32, float16, bfloat16), as `lowbit attention` reads it; replaces --datasets");
  app.add_option("--k", o.k, "your K (its heads divide Q's: grouped-query attention)");
  app.add_option("--v", o.v, "your V");
  app.add_flag("--causal", o.causal, "your tensors' attention is causal (top-left mask)");
  app.add_option("--dataset-name", o.dataset_name, "the dataset column for your tensors (default: Q's file name)");
  app.add_option("--heads", o.heads, "synthetic heads (default: the experiment's)");
  app.add_option("--tokens", o.tokens,
                 "synthetic tokens; SmolLM2: its first TOKENS tokens; synthetic-flat, -sink: their keys (default: the experiment's)");
  app.add_option("--seed", o.seed, "synthetic data seed")->capture_default_str();
  app.add_option("--threads", o.threads, "threads (0: every core)")->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "the SmolLM2 capture's folder")->capture_default_str();
}

std::vector<Dataset> load_datasets(const CommonOptions& o) {
  if (!o.q.empty() || !o.k.empty() || !o.v.empty()) {
    if (o.q.empty() || o.k.empty() || o.v.empty()) throw std::invalid_argument("--q, --k and --v go together");
    return {file_dataset(o.dataset_name, o.q, o.k, o.v, o.causal)};
  }
  const DatasetSizes& s = o.sizes;
  std::vector<Dataset> out;
  for (const auto& name : o.datasets) {
    if (name == "synthetic")
      out.push_back(synthetic_dataset(name, "default", o.heads ? o.heads : s.synthetic_heads,
                                      o.tokens ? o.tokens : s.synthetic_tokens, s.synthetic_dim, o.seed, false));
    else if (name == "synthetic-smollm2")
      out.push_back(synthetic_dataset(name, "smollm2", o.heads ? o.heads : s.llm_heads, o.tokens ? o.tokens : 1024, 64,
                                      o.seed, true));
    else if (name == "smollm2")
      out.push_back(smollm2_dataset(o.data_dir, s.real_layers, s.real_heads, o.tokens ? o.tokens : s.real_tokens));
    else if (name == "synthetic-flat" || name == "synthetic-sink")
      out.push_back(long_dataset(name, name.substr(std::string_view("synthetic-").size()), o.heads ? o.heads : s.long_heads, s.long_queries,
                                 o.tokens ? o.tokens : s.long_keys, o.seed));
    else
      throw std::invalid_argument("unknown dataset '" + name + "'");
  }
  return out;
}

// ---- runs ---------------------------------------------------------------------------------------

attention::Pipeline build(const Variant& v, int head_dim, int value_dim) {
  attention::Pipeline p = attention::preset(v.preset, head_dim);
  for (const auto& s : v.sets)
    if (auto why = attention::set_stage(p, s)) throw std::invalid_argument("variant '" + v.name + "': " + *why);
  if (auto why = p.validate(head_dim, value_dim))
    throw std::invalid_argument(fmt::format("variant '{}' (preset {}) cannot run on d = {}: {}", v.name, v.preset, head_dim, *why));
  return p;
}

const ReferenceAttention& References::of(const Dataset& d) {
  const std::string key = fmt::format("{} {} {} {}", d.name, d.q.shape_text(), d.k.shape_text(), d.spec.dump());
  auto it = cache_.find(key);
  if (it == cache_.end())
    it = cache_.emplace(key, reference_attention(d.q, d.k, d.v, {.causal = d.causal, .threads = threads_})).first;
  return it->second;
}

Evaluation compare_heads(const std::vector<double>& reference, const std::vector<double>& output, int heads,
                         const std::vector<std::string>& labels) {
  if (reference.size() != output.size() || heads < 1 || reference.size() % std::size_t(heads) != 0)
    throw std::invalid_argument("compare_heads: sizes do not fit");
  Evaluation e;
  const std::size_t per_head = reference.size() / std::size_t(heads);
  for (int h = 0; h < heads; ++h) {
    const std::span<const double> r(reference.data() + std::size_t(h) * per_head, per_head);
    const std::span<const double> a(output.data() + std::size_t(h) * per_head, per_head);
    // The distribution in units of the head's output RMS, so that heads and layers of different
    // scales can share a histogram.
    const ErrorMetrics m = compare(r, a);
    double sum = 0;
    for (double x : r) sum += x * x;
    const double rms = std::sqrt(sum / double(r.size()));
    std::vector<double> rn(r.size()), an(a.size());
    for (std::size_t i = 0; i < r.size(); ++i) rn[i] = r[i] / rms, an[i] = a[i] / rms;
    const ErrorDistribution dist = error_distribution(rn, an);
    e.heads.push_back({labels.at(std::size_t(h)), m, dist.quantiles});
    e.histogram.merge(dist.histogram);
  }
  return e;
}

Evaluation evaluate(const attention::Pipeline& pipeline, const Dataset& d, const ReferenceAttention& reference,
                    unsigned threads, bool keep_operands) {
  attention::ForwardResult r = attention::forward(
      pipeline, d.q, d.k, d.v,
      {.causal = d.causal, .threads = threads, .keep_operands = keep_operands, .q_name = d.name + " Q",
       .k_name = d.name + " K", .v_name = d.name + " V"});
  const Tensor4 rounded = r.rounded_output();
  // A format or scale the fp32 arithmetic cannot carry gives Inf or NaN: an error, never a metric.
  const auto bad = std::find_if(rounded.values.begin(), rounded.values.end(), [](float x) { return !std::isfinite(x); });
  if (bad != rounded.values.end())
    throw std::runtime_error(fmt::format("pipeline {} on {}: the output has non-finite values (the first: {} at flat index {})",
                                         pipeline.name, d.name, *bad, bad - rounded.values.begin()));
  Evaluation e = compare_heads(reference.output, std::vector<double>(rounded.values.begin(), rounded.values.end()),
                               d.q.heads, d.head_labels);
  e.forward = std::move(r);
  return e;
}

void Progress::step(const std::string& what) {
  ++done_;
  std::cerr << fmt::format("[{}] ({}/{}) {}  [{:.1f} CPU s]", experiment_, done_, steps_, what, cpu_seconds()) << std::endl;
}

double Progress::cpu_seconds() const { return cpu_now(); }

void run_variants(const std::string& experiment, const std::vector<Variant>& variants, const std::vector<Dataset>& datasets,
                  ExperimentResults& results, unsigned threads, bool keep_operands,
                  const std::function<void(const Variant&, const Dataset&, const Evaluation&)>& each) {
  Progress progress(experiment, int(variants.size() * datasets.size()));
  References references(threads);
  for (const Dataset& d : datasets)
    for (const Variant& v : variants) {
      const attention::Pipeline p = build(v, d.q.dim, d.v.dim);
      results.record_pipeline(v.name, p);
      const Evaluation e = evaluate(p, d, references.of(d), threads, keep_operands);
      results.add(v.name, d, e);
      if (each) each(v, d, e);
      double cosine = 0;
      for (const auto& h : e.heads) cosine += h.metrics.cosine / double(e.heads.size());
      progress.step(fmt::format("{} on {} ({} heads): cosine {}", v.name, d.name, e.heads.size(), percent(cosine, 3)));
    }
}

int experiment_main(int argc, char** argv, const std::string& name, const std::string& description,
                    const std::vector<std::string>& default_datasets, const DatasetSizes& sizes,
                    const std::function<void(CLI::App&)>& own_options, const std::function<void(const CommonOptions&)>& body) {
  CLI::App app{"lowbit run " + name + ": " + description};
  app.name("lowbit run " + name);
  CommonOptions options;
  options.datasets = default_datasets;
  options.sizes = sizes;
  add_common_options(app, options, name);
  if (own_options) own_options(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    body(options);
  } catch (const std::exception& e) {
    std::cerr << "lowbit run " << name << ": error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

// ---- results ------------------------------------------------------------------------------------

ExperimentResults::ExperimentResults(std::string experiment, const CommonOptions& options, int argc, char** argv)
    : experiment_(std::move(experiment)), out_(options.out, RunInfo::from_args(argc, argv)) {
  out_.run().config["experiment"] = experiment_;
  out_.run().seeds["synthetic"] = options.seed;
}

void ExperimentResults::record_dataset(const Dataset& d) {
  if (descriptions_.count(d.name)) return;
  descriptions_[d.name] = d.description;
  out_.run().config["datasets"][d.name] = d.spec;
  for (const auto& f : d.inputs) out_.run().inputs.push_back(f);
}

void ExperimentResults::record_pipeline(const std::string& variant, const attention::Pipeline& p) {
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [stage, value] : attention::stage_values(p)) stages[stage] = value;
  out_.run().formats[variant] = {{"preset", p.name}, {"stages", stages}};
}

void ExperimentResults::add_metric(const std::string& variant, const std::string& dataset, const std::string& head,
                                   const std::string& metric, double value) {
  rows_.push_back({variant, dataset, head, metric, value});
  if (std::find(variants_.begin(), variants_.end(), variant) == variants_.end()) variants_.push_back(variant);
  if (std::find(datasets_.begin(), datasets_.end(), dataset) == datasets_.end()) datasets_.push_back(dataset);
}

void ExperimentResults::add(const std::string& variant, const Dataset& d, const Evaluation& e) {
  record_dataset(d);
  Summary& s = summaries_[{variant, d.name}];
  for (const HeadError& h : e.heads) {
    const ErrorMetrics& m = h.metrics;
    for (const auto& [metric, value] :
         {std::pair{"cosine", m.cosine}, {"rel_l1", m.relative_l1}, {"rmse", m.rmse}, {"max_abs", m.max_abs},
          {"nerr_p50", h.quantiles.p50}, {"nerr_p90", h.quantiles.p90}, {"nerr_p99", h.quantiles.p99},
          {"nerr_p999", h.quantiles.p999}})
      add_metric(variant, d.name, h.label, metric, value);
    const double n = ++s.heads;
    s.cosine_mean += (m.cosine - s.cosine_mean) / n;
    s.rel_l1_mean += (m.relative_l1 - s.rel_l1_mean) / n;
    s.rmse_mean += (m.rmse - s.rmse_mean) / n;
    s.p99_mean += (h.quantiles.p99 - s.p99_mean) / n;
    s.cosine_worst = std::min(s.cosine_worst, m.cosine);
    s.rel_l1_worst = std::max(s.rel_l1_worst, m.relative_l1);
    s.rmse_worst = std::max(s.rmse_worst, m.rmse);
    s.max_abs_worst = std::max(s.max_abs_worst, m.max_abs);
  }
  histograms_[{variant, d.name}].merge(e.histogram);
}

const Summary& ExperimentResults::summary(const std::string& variant, const std::string& dataset) const {
  const auto it = summaries_.find({variant, dataset});
  if (it == summaries_.end()) throw std::logic_error("no results for " + variant + " on " + dataset);
  return it->second;
}

void ExperimentResults::write(const std::string& title, const std::string& extra_tables) {
  std::string metrics = "experiment,variant,dataset,head,metric,value\n";
  for (const Row& r : rows_)
    metrics += fmt::format("{},{},{},{},{},{:.9g}\n", csv_field(experiment_), csv_field(r.variant), csv_field(r.dataset),
                           csv_field(r.head), r.metric, r.value);
  out_.csv("metrics.csv", metrics);

  std::string summary =
      "experiment,variant,dataset,heads,cosine_mean,cosine_worst,rel_l1_mean,rel_l1_worst,rmse_mean,rmse_worst,"
      "max_abs_worst,nerr_p99_mean\n";
  std::string distribution = "experiment,variant,dataset,log10_low,log10_high,count\n";
  for (const auto& d : datasets_)
    for (const auto& v : variants_) {
      if (const auto it = summaries_.find({v, d}); it != summaries_.end()) {
        const Summary& s = it->second;
        summary += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", csv_field(experiment_),
                               csv_field(v), csv_field(d), s.heads, s.cosine_mean, s.cosine_worst, s.rel_l1_mean,
                               s.rel_l1_worst, s.rmse_mean, s.rmse_worst, s.max_abs_worst, s.p99_mean);
      }
      if (const auto it = histograms_.find({v, d}); it != histograms_.end()) {
        const ErrorHistogram& h = it->second;
        const auto row = [&](const std::string& low, const std::string& high, std::uint64_t count) {
          distribution += fmt::format("{},{},{},{},{},{}\n", csv_field(experiment_), csv_field(v), csv_field(d), low, high, count);
        };
        row("-inf", fmt::format("{}", ErrorHistogram::kLowestDecade), h.below);
        for (int i = 0; i < ErrorHistogram::kBins; ++i)
          if (h.counts[std::size_t(i)])
            row(fmt::format("{:.1f}", ErrorHistogram::bin_low(i)), fmt::format("{:.1f}", ErrorHistogram::bin_low(i + 1)),
                h.counts[std::size_t(i)]);
        row(fmt::format("{}", ErrorHistogram::kHighestDecade), "inf", h.above);
      }
    }
  out_.csv("summary.csv", summary);
  out_.csv("distribution.csv", distribution);

  std::string md = "# " + title + "\n\n" +
                   (intro_.empty() ? "Mean and worst over the heads (and layers) of each dataset; every metric of the "
                                     "rounded output against float64 attention (metrics.csv has every head; "
                                     "distribution.csv the per-element error histograms). p99 err/RMS: the 99th "
                                     "percentile of |error| over the RMS of the head's float64 output, mean over heads.\n"
                                   : intro_);
  const std::vector<std::string>& variants = table_variants_.empty() ? variants_ : table_variants_;
  for (const auto& d : datasets_) {
    bool any_summary = false;
    for (const auto& v : variants) any_summary = any_summary || summaries_.count({v, d});
    if (!any_summary) continue;
    md += "\n## " + d + "\n\n" + (descriptions_.count(d) ? descriptions_[d] + "\n\n" : "");
    bool with_paper = false;
    for (const auto& v : variants) with_paper = with_paper || (summaries_.count({v, d}) && papers_.count(v));
    md += "| variant | cos mean | cos worst | rel L1 mean | rel L1 worst | RMSE mean | RMSE worst | max abs | p99 err/RMS |";
    md += with_paper ? " paper cos mean | paper cos worst | paper rel L1 | paper RMSE |\n" : "\n";
    md += std::string("|---|---|---|---|---|---|---|---|---|") + (with_paper ? "---|---|---|---|\n" : "\n");
    for (const auto& v : variants) {
      const auto it = summaries_.find({v, d});
      if (it == summaries_.end()) continue;
      const Summary& s = it->second;
      md += fmt::format("| {} | {} | {} | {:.4f} | {:.4f} | {:.4g} | {:.4g} | {:.3g} | {:.3g} |", markdown_cell(v), percent(s.cosine_mean),
                        percent(s.cosine_worst), s.rel_l1_mean, s.rel_l1_worst, s.rmse_mean, s.rmse_worst, s.max_abs_worst,
                        s.p99_mean);
      if (with_paper) {
        if (const auto p = papers_.find(v); p != papers_.end()) {
          const auto cell = [](double x, bool pct) {
            return std::isnan(x) ? std::string("-") : pct ? percent(x) : fmt::format("{:.4f}", x);
          };
          md += fmt::format(" {} | {} | {} | {} |", cell(p->second.cosine_mean, true), cell(p->second.cosine_worst, true),
                            cell(p->second.rel_l1_mean, false), cell(p->second.rmse_mean, false));
        } else {
          md += " | | | |";
        }
      }
      md += "\n";
    }
  }
  std::string sources;
  for (const auto& [v, p] : papers_)
    if (sources.find(p.source) == std::string::npos) sources += (sources.empty() ? "" : "; ") + p.source;
  if (!sources.empty()) md += "\nPaper columns: " + sources + " (their data, not ours: results/experiments/README.md says where and why ours differ).\n";
  md += extra_tables;
  if (!notes_.empty()) md += "\n" + notes_;
  out_.markdown("table.md", md);
  out_.write_provenance();
  std::cout << md << "\nwrote " << out_.dir().string() << "/{metrics.csv, summary.csv, distribution.csv, table.md, provenance.json}\n";
}

}  // namespace lowbit::experiments
