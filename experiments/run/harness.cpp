#include "experiments/run/harness.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <span>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "emulation/convert.hpp"
#include "numerics/parallel.hpp"
#include "numerics/provenance.hpp"
#include "numerics/tensor_file.hpp"
#if defined(LOWBIT_HAVE_KERNELS)
#include "experiments/cli/gpu_run.hpp"
#include "kernels/attention/gpu_forward.hpp"
#include "kernels/attention/sage_bwd_gpu.hpp"
#endif

namespace lowbit::experiments {
namespace {

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

// ---- a work item's results as a shard records them ----------------------------------------------
// Exactly: JSON numbers round-trip doubles; NaN and the infinities (which JSON lacks) as text.

nlohmann::json exact(double x) {
  if (std::isfinite(x)) return x;
  return std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
}

double exact_value(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::nan("");
  return s == "inf" ? HUGE_VAL : -HUGE_VAL;
}

nlohmann::json to_json(const Evaluation& e);

nlohmann::json to_json(const DeviceRun& r) {
  nlohmann::json heads = nlohmann::json::array();
  for (const HeadCheck& h : r.heads)
    heads.push_back({{"label", h.label}, {"codes_compared", h.codes_compared}, {"codes_differ", h.codes_differ},
                     {"lse_compared", h.lse_compared}, {"lse_differ", h.lse_differ}});
  return {{"ran_on", r.ran_on}, {"reason", r.reason}, {"heads", heads}, {"first_difference", r.first_difference},
          {"gpu", to_json(Evaluation{r.gpu, r.gpu_histogram, {}, std::nullopt})}};
}

nlohmann::json to_json(const Evaluation& e) {
  nlohmann::json heads = nlohmann::json::array();
  for (const HeadError& h : e.heads) {
    const ErrorMetrics& m = h.metrics;
    const ErrorQuantiles& q = h.quantiles;
    heads.push_back({{"label", h.label}, {"cosine", exact(m.cosine)}, {"relative_l1", exact(m.relative_l1)},
                     {"rmse", exact(m.rmse)}, {"max_abs", exact(m.max_abs)}, {"count", m.count},
                     {"p50", exact(q.p50)}, {"p90", exact(q.p90)}, {"p99", exact(q.p99)}, {"p999", exact(q.p999)},
                     {"max", exact(q.max)}});
  }
  nlohmann::json bins = nlohmann::json::object();  // the nonzero ones
  for (int i = 0; i < ErrorHistogram::kBins; ++i)
    if (e.histogram.counts[std::size_t(i)]) bins[std::to_string(i)] = e.histogram.counts[std::size_t(i)];
  nlohmann::json j{{"heads", heads}, {"histogram", {{"below", e.histogram.below}, {"above", e.histogram.above}, {"bins", bins}}}};
  if (e.device) j["device"] = to_json(*e.device);
  return j;
}

Evaluation evaluation_from_json(const nlohmann::json& j) {
  Evaluation e;
  for (const auto& h : j.at("heads")) {
    const auto v = [&](const char* key) { return exact_value(h.at(key)); };
    e.heads.push_back({h.at("label").get<std::string>(),
                       {v("cosine"), v("relative_l1"), v("rmse"), v("max_abs"), h.at("count").get<std::size_t>()},
                       {v("p50"), v("p90"), v("p99"), v("p999"), v("max")}});
  }
  const auto& hist = j.at("histogram");
  e.histogram.below = hist.at("below").get<std::uint64_t>();
  e.histogram.above = hist.at("above").get<std::uint64_t>();
  for (const auto& [bin, count] : hist.at("bins").items()) e.histogram.counts.at(std::stoul(bin)) = count.get<std::uint64_t>();
  if (j.contains("device")) {
    const nlohmann::json& d = j.at("device");
    DeviceRun r;
    r.ran_on = d.at("ran_on").get<std::string>();
    r.reason = d.at("reason").get<std::string>();
    r.first_difference = d.at("first_difference").get<std::string>();
    for (const auto& h : d.at("heads"))
      r.heads.push_back({h.at("label").get<std::string>(), h.at("codes_compared").get<std::uint64_t>(),
                         h.at("codes_differ").get<std::uint64_t>(), h.at("lse_compared").get<std::uint64_t>(),
                         h.at("lse_differ").get<std::uint64_t>()});
    Evaluation gpu = evaluation_from_json(d.at("gpu"));
    r.gpu = std::move(gpu.heads);
    r.gpu_histogram = gpu.histogram;
    e.device = std::move(r);
  }
  return e;
}

// The options of `app` that decide the results, by long name: the value given, else the default.
nlohmann::json sweep_options(const CLI::App& app) {
  // --device and --no-check neither: each item's record says where it ran, which a merge checks.
  static const std::vector<std::string> kNotTheSweeps{"help",     "out",    "shard",   "merge",
                                                      "threads",  "data-dir", "device", "no-check"};
  nlohmann::json sweep = nlohmann::json::object();
  for (const CLI::Option* opt : app.get_options()) {
    const std::string name = opt->get_single_name();
    if (std::find(kNotTheSweeps.begin(), kNotTheSweeps.end(), name) != kNotTheSweeps.end()) continue;
    std::string value;
    for (const auto& r : opt->reduced_results()) value += (value.empty() ? "" : ",") + r;
    sweep[name] = opt->count() ? value : opt->get_default_str();
  }
  return sweep;
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
  d.q = Tensor4::from_heads(data.q);
  d.k = Tensor4::from_heads(data.k);
  d.v = Tensor4::from_heads(data.v);
  d.causal = causal;
  for (int h = 0; h < heads; ++h) d.head_labels.push_back("h" + std::to_string(h));
  d.spec = {{"synthetic", spec.to_json()}, {"causal", causal}};
  d.description = fmt::format("synthetic, preset `{}` (numerics/synthetic.hpp), seed {}: {} heads x {} tokens x d = {}, {}",
                              preset, seed, heads, tokens, dim, causal ? "causal" : "not causal");
  return d;
}

std::optional<std::vector<int>> parse_indices(std::string_view text) {
  std::vector<int> out;
  while (true) {
    const std::string_view item = text.substr(0, text.find(','));
    int x = 0;
    const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), x);
    if (item.empty() || error != std::errc() || end != item.data() + item.size() || x < 0 ||
        std::find(out.begin(), out.end(), x) != out.end())
      return std::nullopt;
    out.push_back(x);
    if (item.size() == text.size()) return out;
    text.remove_prefix(item.size() + 1);
  }
}

std::vector<int> capture_layers(const std::string& dir) {
  std::vector<int> layers;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string file = entry.path().filename().string();
    int layer = 0;
    if (file.size() == std::string_view("layerLL_q.npy").size() && file.starts_with("layer") && file.ends_with("_q.npy") &&
        std::from_chars(file.data() + 5, file.data() + 7, layer).ptr == file.data() + 7)
      layers.push_back(layer);
  }
  if (error) throw std::invalid_argument(fmt::format("--layers all: {}: {}", dir, error.message()));
  if (layers.empty()) throw std::invalid_argument(fmt::format("--layers all: {} has no layerLL_q.npy", dir));
  std::sort(layers.begin(), layers.end());
  return layers;
}

Dataset smollm2_dataset(const std::string& dir, const std::vector<int>& layers, const std::optional<std::vector<int>>& q_heads,
                        int tokens) {
  std::vector<MatrixF> q, k, v;
  std::optional<std::vector<int>> heads_read;  // the same in every layer: every head of each file must agree
  Dataset d;
  d.name = "smollm2";
  for (int layer : layers) {
    const auto file = [&](const char* t) { return (std::filesystem::path(dir) / fmt::format("layer{:02}_{}.npy", layer, t)).string(); };
    if (!std::filesystem::is_regular_file(file("q")))
      throw std::invalid_argument(fmt::format("layer {}: {} has no {} (--layers picks others; --layers all: every one there)",
                                              layer, dir, std::filesystem::path(file("q")).filename().string()));
    const TensorFile fq = read_tensor_file(file("q")), fk = read_tensor_file(file("k")), fv = read_tensor_file(file("v"));
    for (const auto* f : {&fq, &fk, &fv}) d.inputs.push_back(f->source);
    if (fq.tensor.heads % fk.tensor.heads != 0 || fk.tensor.heads != fv.tensor.heads)
      throw std::runtime_error(fmt::format("{}: {} Q heads do not group over {} K and {} V heads", dir, fq.tensor.heads,
                                           fk.tensor.heads, fv.tensor.heads));
    const int group = fq.tensor.heads / fk.tensor.heads;
    const int n = tokens > 0 ? std::min(tokens, fq.tensor.tokens) : fq.tensor.tokens;
    std::vector<int> heads(std::size_t(fq.tensor.heads));
    std::iota(heads.begin(), heads.end(), 0);
    if (q_heads) heads = *q_heads;
    if (heads_read && *heads_read != heads)
      throw std::invalid_argument(fmt::format("--q-heads all: {} has {} Q heads, the layers before it {}", file("q"),
                                              fq.tensor.heads, heads_read->size()));
    heads_read = heads;
    for (int h : heads) {
      if (h < 0 || h >= fq.tensor.heads)
        throw std::invalid_argument(fmt::format("Q head {}: {} has {} (0 to {}; --q-heads picks others)", h, file("q"),
                                                fq.tensor.heads, fq.tensor.heads - 1));
      q.push_back(fq.tensor.head(0, h).topRows(n));
      k.push_back(fk.tensor.head(0, h / group).topRows(n));
      v.push_back(fv.tensor.head(0, h / group).topRows(n));
      d.head_labels.push_back(fmt::format("L{}H{}", layer, h));
    }
    d.parts.push_back({int(q.size() - heads.size()), int(heads.size()), fmt::format("layer {}", layer)});
  }
  d.q = Tensor4::from_heads(q);
  d.k = Tensor4::from_heads(k);
  d.v = Tensor4::from_heads(v);
  d.causal = true;
  const std::vector<int> heads = heads_read.value_or(std::vector<int>{});
  d.spec = {{"dir", repository_relative(dir)}, {"layers", layers}, {"q_heads", heads}, {"tokens", d.q.tokens},
            {"causal", true}};
  d.description = fmt::format(
      "SmolLM2-135M-Instruct's Q (after RoPE), K, V captured on our own prose ({}): layers {}, Q heads {} of each with "
      "their KV heads ({} heads in all), {} tokens, d = 64, causal",
      repository_relative(dir), join(layers), join(heads), d.q.heads, d.q.tokens);
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
  d.q = Tensor4::from_heads(qs);
  d.k = Tensor4::from_heads(ks);
  d.v = Tensor4::from_heads(vs);
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
  s.q = Tensor4::from_heads(q);
  s.k = Tensor4::from_heads(k);
  s.v = Tensor4::from_heads(v);
  s.causal = false;
  s.spec["slice"] = {{"first_query", first_query}, {"queries", queries}, {"keys", keys}};
  return s;
}

Tensor4 head_range(const Tensor4& t, int first, int count) {
  if (t.batch != 1 || first < 0 || count < 1 || first + count > t.heads)
    throw std::invalid_argument(fmt::format("heads [{}, {}) of {}", first, first + count, t.shape_text()));
  Tensor4 out(1, count, t.tokens, t.dim);
  std::copy(t.values.begin() + std::ptrdiff_t(t.offset(0, first, 0)), t.values.begin() + std::ptrdiff_t(t.offset(0, first + count, 0)),
            out.values.begin());
  return out;
}

std::vector<HeadRange> parts_of(const Dataset& d) {
  return d.parts.empty() ? std::vector<HeadRange>{{0, d.q.heads, ""}} : d.parts;
}

Dataset part(const Dataset& d, const HeadRange& r) {
  if (d.parts.empty()) return d;
  Dataset p = d;
  p.q = head_range(d.q, r.first, r.count);
  p.k = head_range(d.k, r.first, r.count);
  p.v = head_range(d.v, r.first, r.count);
  p.head_labels.assign(d.head_labels.begin() + r.first, d.head_labels.begin() + r.first + r.count);
  p.spec["part"] = {{"first_head", r.first}, {"heads", r.count}};
  p.parts.clear();
  return p;
}

std::string part_name(const Dataset& d, const HeadRange& r) { return r.name.empty() ? d.name : d.name + ", " + r.name; }

// ---- options ------------------------------------------------------------------------------------

std::optional<Shard> Shard::parse(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  const auto integer = [](std::string_view t, int& out) {
    const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), out);
    return error == std::errc() && end == t.data() + t.size() && !t.empty();
  };
  Shard s;
  if (!integer(text.substr(0, slash), s.index) || !integer(text.substr(slash + 1), s.count)) return std::nullopt;
  return s;
}

std::optional<std::string> Shard::validate() const {
  if (count < 1) return fmt::format("N = {}: a sweep splits into N >= 1 parts", count);
  if (index < 1 || index > count)
    return fmt::format("I = {}: shards count from 1 to N = {} (a Slurm array: --array=1-{})", index, count, count);
  return std::nullopt;
}

nlohmann::json read_shard(const std::string& dir) {
  const std::filesystem::path file = std::filesystem::path(dir) / "shard.json";
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": no shard here (lowbit run NAME --shard I/N writes shard.json when it ends)");
  try {
    nlohmann::json m = nlohmann::json::parse(in);
    for (const char* key : {"experiment", "shard", "git_sha", "options", "args", "datasets", "machine", "items", "records"})
      if (!m.contains(key)) throw std::runtime_error(std::string("no ") + key);
    const Shard part{m.at("shard").at("index").get<int>(), m.at("shard").at("count").get<int>()};
    if (auto why = part.validate()) throw std::runtime_error("shard " + part.text() + ": " + *why);
    return m;
  } catch (const std::exception& e) {
    throw std::runtime_error(file.string() + ": not a shard's manifest: " + e.what());
  }
}

std::optional<std::string> CommonOptions::validate() const {
  if (shard)
    if (auto why = shard->validate()) return "--shard " + shard->text() + ": " + *why;
  if (shard && !merge.empty()) return "--shard and --merge go apart: run the shards, then merge their folders";
  if (!check && !on_gpu()) return "--no-check runs the GPU alone, without the emulation beside it: it needs --device gpu";
  for (const auto& [option, value] : {std::pair{"--layers", &layers}, {"--q-heads", &q_heads}})
    if (!value->empty() && *value != "all" && !parse_indices(*value))
      return fmt::format("{} '{}': not 'all' or a comma-separated list of distinct indices from 0 (0,10,20)", option, *value);
  return std::nullopt;
}

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
  app.add_option("--layers", o.layers,
                 fmt::format("the smollm2 dataset's layers: all (every layerLL_q.npy in --data-dir) or L,L,... (default: the "
                             "experiment's, {})",
                             join(o.sizes.real_layers)));
  app.add_option("--q-heads", o.q_heads,
                 fmt::format("the Q heads of each of those layers, with their KV heads: all (every one of the files) or H,H,... "
                             "(default: the experiment's, {})",
                             join(o.sizes.real_heads)));
  app.add_option_function<std::string>(
      "--shard",
      [&o](const std::string& text) {
        o.shard = Shard::parse(text);
        if (!o.shard) throw CLI::ValidationError("--shard", "'" + text + "' is not I/N (part I of N, 1-based: 1/4 ... 4/4)");
      },
      "run part I of N of the sweep (1-based; its work items i with i % N == I - 1) into --out: their results and "
      "shard.json; lowbit run-merge OUT DIR... joins the parts")
      ->type_name("I/N");
  app.add_option("--merge", o.merge,
                 "join the shards in these folders (every part of one sweep, the same options) into --out instead of "
                 "running; lowbit run-merge OUT DIR... passes the shards' options and these")
      ->type_name("DIR ...");
  app.add_option("--device", o.device,
                 "cpu: every variant emulated; gpu: every variant on Q, K, V rounded to fp16 (the kernels' inputs; the "
                 "float64 reference stays the dataset's), and each variant a kernel computes bit for bit "
                 "(kernels/attention/gpu_forward.hpp: sage2-8b and sage2-8b-ex2, every stage the preset's; the sage2-4b "
                 "family's variants, an Ada pipeline as its Hopper twin, arch=sm_90; d = 64 or 128) also on the GPU: its metrics as the variant 'NAME (GPU)', every output code and "
                 "LSE value compared with the emulation's, gpu-check.json and a table in table.md; exits 1 after writing "
                 "them if any differ, 77 where there is no GPU. Variants no kernel computes run emulated, 'emulated only: "
                 "REASON' (under --no-check: left out)")
      ->check(CLI::IsMember({"cpu", "gpu"}))
      ->capture_default_str();
  app.add_flag_callback(
      "--no-check", [&o] { o.check = false; },
      "with --device gpu: the GPU alone, no emulation beside it (sweeps too large to emulate); the rows of the variants it "
      "runs are the GPU's, named 'NAME (GPU)'; variants no kernel computes are left out, not emulated: no rows, listed "
      "'left out: REASON' on stderr, in gpu-check.json and in table.md's GPU table");
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
    else if (name == "smollm2") {
      const std::vector<int> layers = o.layers.empty() ? s.real_layers
                                      : o.layers == "all" ? capture_layers(o.data_dir)
                                                          : *parse_indices(o.layers);
      const std::optional<std::vector<int>> heads = o.q_heads.empty() ? std::optional(s.real_heads)
                                                    : o.q_heads == "all" ? std::nullopt
                                                                         : parse_indices(o.q_heads);
      out.push_back(smollm2_dataset(o.data_dir, layers, heads, o.tokens ? o.tokens : s.real_tokens));
      if (o.tokens > out.back().q.tokens)
        throw std::invalid_argument(fmt::format("--tokens {}: the capture in {} has {} tokens", o.tokens, o.data_dir,
                                                out.back().q.tokens));
    }
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
                         const std::vector<std::string>& labels, unsigned threads) {
  if (reference.size() != output.size() || heads < 1 || reference.size() % std::size_t(heads) != 0)
    throw std::invalid_argument("compare_heads: sizes do not fit");
  const std::size_t per_head = reference.size() / std::size_t(heads);
  std::vector<HeadError> errors(std::size_t(heads), HeadError{});
  std::vector<ErrorHistogram> histograms(static_cast<std::size_t>(heads));
  parallel_for(std::size_t(heads), threads, [&](std::size_t item, unsigned) {
    const int h = int(item);
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
    errors[item] = {labels.at(item), m, dist.quantiles};
    histograms[item] = dist.histogram;
  });
  Evaluation e;
  e.heads = std::move(errors);
  for (const ErrorHistogram& h : histograms) e.histogram.merge(h);  // in head order, as a serial loop would
  return e;
}

namespace {

// The metrics of a forward pass's rounded output against the reference; `who` names it in errors.
Evaluation metrics_of(attention::ForwardResult r, const std::string& who, const Dataset& d,
                      const ReferenceAttention& reference, unsigned threads) {
  const Tensor4 rounded = r.rounded_output();
  // A format or scale the fp32 arithmetic cannot carry gives Inf or NaN: an error, never a metric.
  const auto bad = std::find_if(rounded.values.begin(), rounded.values.end(), [](float x) { return !std::isfinite(x); });
  if (bad != rounded.values.end())
    throw std::runtime_error(fmt::format("{} on {}: the output has non-finite values (the first: {} at flat index {})", who,
                                         d.name, *bad, bad - rounded.values.begin()));
  Evaluation e = compare_heads(reference.output, std::vector<double>(rounded.values.begin(), rounded.values.end()),
                               d.q.heads, d.head_labels, threads);
  e.forward = std::move(r);
  return e;
}

// Every value rounded to f (nearest even), as a kernel that reads f's codes sees it; on `threads`
// threads (a dataset of 8K tokens on every head is hundreds of millions of values).
Tensor4 rounded_to(const Tensor4& t, const Format& f, unsigned threads) {
  Tensor4 out = t;
  constexpr std::size_t kChunk = std::size_t(1) << 16;
  parallel_for((out.values.size() + kChunk - 1) / kChunk, threads, [&](std::size_t chunk, unsigned) {
    const std::size_t end = std::min(out.values.size(), (chunk + 1) * kChunk);
    for (std::size_t i = chunk * kChunk; i < end; ++i) out.values[i] = float(decode(f, encode(f, double(out.values[i]))));
  });
  return out;
}

}  // namespace

#if defined(LOWBIT_HAVE_KERNELS)
namespace {
std::string twin_text(const std::string& hopper_arch, const std::string& arch) {
  return fmt::format("its Hopper twin: arch={} (the variant's {} emulated beside)", hopper_arch, arch);
}
}  // namespace

GpuPlan plan_gpu(const attention::Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                 const attention::ForwardOptions& options) {
  namespace ka = kernels::attention;
  GpuPlan plan{pipeline, "", ka::gpu_unsupported(pipeline, q, k, v, options)};
  const std::string hopper_arch = attention::Pipeline{}.arch;
  if (!plan.why || pipeline.arch == hopper_arch) return plan;
  attention::Pipeline hopper = pipeline;
  if (attention::set_stage(hopper, "arch=" + hopper_arch) || hopper.validate(q.dim, v.dim) ||
      ka::gpu_unsupported(hopper, q, k, v, options))
    return plan;
  plan.twin = twin_text(hopper_arch, pipeline.arch);
  plan.pipeline = std::move(hopper);
  plan.why.reset();
  return plan;
}

BackwardGpuPlan plan_gpu_backward(const attention::SageBwdConfig& config, const Tensor4& q, const Tensor4& k,
                                  const Tensor4& v, const Tensor4& d_out) {
  namespace ka = kernels::attention;
  BackwardGpuPlan plan{config, "", ka::gpu_sage_bwd_unsupported(config, q, k, v, d_out)};
  const attention::SageBwdConfig twin = ka::sage_bwd_hopper_twin(config);
  if (!plan.why || twin.arch == config.arch) return plan;
  if (auto why = ka::gpu_sage_bwd_unsupported(twin, q, k, v, d_out)) {
    plan.why = why;  // the twin's reason: the arch is not what stops it
    return plan;
  }
  plan.twin = twin_text(twin.arch, config.arch);
  plan.config = twin;
  plan.why.reset();
  return plan;
}
#endif

Evaluation evaluate(const attention::Pipeline& pipeline, const Dataset& d, const ReferenceAttention& reference,
                    const CommonOptions& o, bool keep_operands) {
  const attention::ForwardOptions options{.causal = d.causal, .threads = o.threads, .keep_operands = keep_operands,
                                          .q_name = d.name + " Q", .k_name = d.name + " K", .v_name = d.name + " V"};
  const std::string emulated = "pipeline " + pipeline.name;
  if (!o.on_gpu()) return metrics_of(attention::forward(pipeline, d.q, d.k, d.v, options), emulated, d, reference, o.threads);
#if defined(LOWBIT_HAVE_KERNELS)
  namespace ka = kernels::attention;
  const Tensor4 q = rounded_to(d.q, formats::fp16, o.threads), k = rounded_to(d.k, formats::fp16, o.threads),
                v = rounded_to(d.v, formats::fp16, o.threads);
  // Beside the emulation the GPU keeps no operands (the emulation's are kept); alone, it must.
  attention::ForwardOptions on_gpu = options;
  if (o.check) on_gpu.keep_operands = false;
  const std::string gpu = "the GPU's " + pipeline.name;
  const GpuPlan plan = plan_gpu(pipeline, q, k, v, on_gpu);
  if (plan.why && !o.check) {
    Evaluation e;
    e.device = DeviceRun{kLeftOut, *plan.why, {}, "", {}, {}};
    return e;
  }
  if (plan.why) {
    Evaluation e = metrics_of(attention::forward(pipeline, q, k, v, options), emulated, d, reference, o.threads);
    e.device = DeviceRun{kRanOnEmulation, *plan.why, {}, "", {}, {}};
    return e;
  }
  if (!o.check) {
    Evaluation e = metrics_of(ka::gpu_forward(plan.pipeline, q, k, v, on_gpu), gpu, d, reference, o.threads);
    e.device = DeviceRun{kRanOnGpu, plan.twin, {}, "", {}, {}};
    return e;
  }
  Evaluation e = metrics_of(attention::forward(pipeline, q, k, v, options), emulated, d, reference, o.threads);
  attention::ForwardResult g = ka::gpu_forward(plan.pipeline, q, k, v, on_gpu);
  DeviceRun run = check_device(g, plan.twin.empty() ? e.forward : attention::forward(plan.pipeline, q, k, v, on_gpu),
                               d.head_labels);
  run.reason = plan.twin;
  Evaluation ge = metrics_of(std::move(g), gpu, d, reference, o.threads);
  run.gpu = std::move(ge.heads);
  run.gpu_histogram = ge.histogram;
  e.device = std::move(run);
  return e;
#else
  throw std::logic_error("--device gpu in a build without the CUDA kernels (experiment_main refuses it)");
#endif
}

namespace {

using BackwardEvaluations = std::vector<std::pair<std::string, Evaluation>>;

// dK's and dV's head labels: d's where there are as many KV heads as Q heads (the datasets expand
// GQA), else "KV head G".
std::vector<std::string> kv_head_labels(const Dataset& d) {
  if (d.k.heads == d.q.heads) return d.head_labels;
  std::vector<std::string> labels;
  for (int g = 0; g < d.k.heads; ++g) labels.push_back(fmt::format("KV head {}", g));
  return labels;
}

BackwardEvaluations backward_metrics(const attention::BackwardResult& b, const Dataset& d, const ReferenceGradients& g,
                                     unsigned threads) {
  const auto widen = [](const std::vector<float>& x) { return std::vector<double>(x.begin(), x.end()); };
  const std::vector<std::string> kv_labels = kv_head_labels(d);
  BackwardEvaluations out;
  out.emplace_back("O", compare_heads(g.forward.output, widen(b.output), d.q.heads, d.head_labels, threads));
  out.emplace_back("dQ", compare_heads(g.dq, widen(b.dq), d.q.heads, d.head_labels, threads));
  out.emplace_back("dK", compare_heads(g.dk, widen(b.dk), d.k.heads, kv_labels, threads));
  out.emplace_back("dV", compare_heads(g.dv, widen(b.dv), d.v.heads, kv_labels, threads));
  return out;
}

}  // namespace

std::vector<std::pair<std::string, Evaluation>> evaluate_backward(const attention::SageBwdConfig& config, const Dataset& d,
                                                                  const Tensor4& d_out, const ReferenceGradients& reference,
                                                                  const CommonOptions& o) {
  if (!o.on_gpu())
    return backward_metrics(attention::sage_bwd(config, d.q, d.k, d.v, d_out, d.causal, o.threads), d, reference, o.threads);
#if defined(LOWBIT_HAVE_KERNELS)
  namespace ka = kernels::attention;
  const Tensor4 q = rounded_to(d.q, formats::fp16, o.threads), k = rounded_to(d.k, formats::fp16, o.threads),
                v = rounded_to(d.v, formats::fp16, o.threads);
  const BackwardGpuPlan plan = plan_gpu_backward(config, q, k, v, d_out);
  const auto ran = [](BackwardEvaluations evaluations, const DeviceRun& run) {
    for (auto& [tensor, e] : evaluations) e.device = run;
    return evaluations;
  };
  if (plan.why && !o.check) {
    BackwardEvaluations left_out;
    for (const char* tensor : {"O", "dQ", "dK", "dV"}) left_out.emplace_back(tensor, Evaluation{});
    return ran(std::move(left_out), DeviceRun{kLeftOut, *plan.why, {}, "", {}, {}});
  }
  if (plan.why)
    return ran(backward_metrics(attention::sage_bwd(config, q, k, v, d_out, d.causal, o.threads), d, reference, o.threads),
               DeviceRun{kRanOnEmulation, *plan.why, {}, "", {}, {}});
  const attention::BackwardResult g = ka::gpu_sage_bwd(plan.config, q, k, v, d_out, d.causal);
  BackwardEvaluations on_gpu = backward_metrics(g, d, reference, o.threads);
  if (!o.check) return ran(std::move(on_gpu), DeviceRun{kRanOnGpu, plan.twin, {}, "", {}, {}});
  const attention::BackwardResult b = attention::sage_bwd(config, q, k, v, d_out, d.causal, o.threads);
  BackwardEvaluations evaluations = backward_metrics(b, d, reference, o.threads);
  const attention::BackwardResult twin =
      plan.twin.empty() ? attention::BackwardResult{} : attention::sage_bwd(plan.config, q, k, v, d_out, d.causal, o.threads);
  const attention::BackwardResult& emulated = plan.twin.empty() ? b : twin;
  const std::vector<std::string> kv_labels = kv_head_labels(d);
  const std::vector<DeviceRun> runs{
      check_device_values("O", g.output, emulated.output, v.dim, d.head_labels, g.lse, emulated.lse),
      check_device_values("dQ", g.dq, emulated.dq, q.dim, d.head_labels),
      check_device_values("dK", g.dk, emulated.dk, k.dim, kv_labels),
      check_device_values("dV", g.dv, emulated.dv, v.dim, kv_labels)};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    DeviceRun run = runs[i];
    run.reason = plan.twin;
    run.gpu = std::move(on_gpu[i].second.heads);
    run.gpu_histogram = on_gpu[i].second.histogram;
    evaluations[i].second.device = std::move(run);
  }
  return evaluations;
#else
  throw std::logic_error("--device gpu in a build without the CUDA kernels (experiment_main refuses it)");
#endif
}

// ---- the GPU beside the emulation -------------------------------------------------------------

HeadCheck DeviceRun::totals() const {
  HeadCheck t;
  for (const HeadCheck& h : heads) {
    t.codes_compared += h.codes_compared;
    t.codes_differ += h.codes_differ;
    t.lse_compared += h.lse_compared;
    t.lse_differ += h.lse_differ;
  }
  return t;
}

namespace {

// The heads' values (codes) and LSE values of the GPU against the emulation's, in order: `differs(i)`
// whether value i differs, `describe(label, at, i)` the text of the first that does (at: its index
// in its head). Each head has `per_head` values and `rows` LSE values (none where the spans are empty).
template <class Differs, class Describe>
DeviceRun compare_heads_bitwise(const std::vector<std::string>& labels, std::size_t per_head, std::size_t rows,
                                std::span<const float> gpu_lse, std::span<const float> emulated_lse, Differs differs,
                                Describe describe) {
  DeviceRun run;
  run.ran_on = kRanOnBoth;
  std::string first_lse;
  for (std::size_t h = 0; h < labels.size(); ++h) {
    HeadCheck c{labels[h]};
    for (std::size_t i = h * per_head; i < (h + 1) * per_head; ++i) {
      ++c.codes_compared;
      if (!differs(i)) continue;
      if (c.codes_differ++ == 0 && run.first_difference.empty()) run.first_difference = describe(labels[h], i - h * per_head, i);
    }
    for (std::size_t i = h * rows; i < (h + 1) * rows && !emulated_lse.empty(); ++i) {
      ++c.lse_compared;
      const std::uint32_t a = std::bit_cast<std::uint32_t>(gpu_lse[i]), b = std::bit_cast<std::uint32_t>(emulated_lse[i]);
      if (a == b) continue;
      if (c.lse_differ++ == 0 && first_lse.empty())
        first_lse = fmt::format("head {}, LSE of row {} (index {} of the head's {}): GPU {} ({:#010x}), emulated {} ({:#010x})",
                                labels[h], i - h * rows, i - h * rows, rows, gpu_lse[i], a, emulated_lse[i], b);
    }
    run.heads.push_back(c);
  }
  if (run.first_difference.empty()) run.first_difference = first_lse;
  return run;
}

}  // namespace

DeviceRun check_device(const attention::ForwardResult& gpu, const attention::ForwardResult& emulated,
                       const std::vector<std::string>& labels) {
  const auto shape = [](const attention::ForwardResult& r) {
    return fmt::format("[{}, {}, {}, {}] ({} codes, {} LSE)", r.batch, r.heads, r.tokens, r.value_dim, r.output_codes.size(),
                       r.lse.size());
  };
  const std::size_t rows = std::size_t(emulated.tokens), dim = std::size_t(emulated.value_dim);
  if (gpu.batch != emulated.batch || gpu.heads != emulated.heads || gpu.tokens != emulated.tokens ||
      gpu.value_dim != emulated.value_dim || gpu.output_codes.size() != emulated.output_codes.size() ||
      gpu.lse.size() != emulated.lse.size() || emulated.batch != 1 || labels.size() != std::size_t(emulated.heads) ||
      emulated.output_codes.size() != std::size_t(emulated.heads) * rows * dim ||
      emulated.lse.size() != std::size_t(emulated.heads) * rows)
    throw std::invalid_argument(fmt::format("check_device: the GPU's output {} and the emulation's {} ({} head labels) do not "
                                            "fit one batch-1 problem",
                                            shape(gpu), shape(emulated), labels.size()));
  return compare_heads_bitwise(
      labels, rows * dim, rows, gpu.lse, emulated.lse,
      [&](std::size_t i) { return gpu.output_codes[i] != emulated.output_codes[i]; },
      [&](const std::string& label, std::size_t at, std::size_t i) {
        return fmt::format("head {}, output row {}, column {} (index {} of the head's {} codes): GPU code {:#x}, emulated {:#x}",
                           label, at / dim, at % dim, at, rows * dim, gpu.output_codes[i], emulated.output_codes[i]);
      });
}

DeviceRun check_device_values(const std::string& tensor, std::span<const float> gpu, std::span<const float> emulated,
                              int dim, const std::vector<std::string>& labels, std::span<const float> gpu_lse,
                              std::span<const float> emulated_lse) {
  const std::size_t heads = labels.size(), per_head = heads ? emulated.size() / heads : 0, columns = std::size_t(dim);
  if (heads == 0 || dim < 1 || gpu.size() != emulated.size() || per_head * heads != emulated.size() || per_head % columns ||
      gpu_lse.size() != emulated_lse.size() || (!emulated_lse.empty() && emulated_lse.size() != heads * (per_head / columns)))
    throw std::invalid_argument(fmt::format("check_device_values: the GPU's {} ({} values, {} LSE) and the emulation's ({} "
                                            "values, {} LSE) do not fit {} heads of rows of {}",
                                            tensor, gpu.size(), gpu_lse.size(), emulated.size(), emulated_lse.size(), heads, dim));
  const auto bits = [](float x) { return std::bit_cast<std::uint32_t>(x); };
  return compare_heads_bitwise(
      labels, per_head, per_head / columns, gpu_lse, emulated_lse, [&](std::size_t i) { return bits(gpu[i]) != bits(emulated[i]); },
      [&](const std::string& label, std::size_t at, std::size_t i) {
        return fmt::format("head {}, {} row {}, column {} (index {} of the head's {} values): GPU {} ({:#010x}), emulated {} "
                           "({:#010x})",
                           label, tensor, at / columns, at % columns, at, per_head, gpu[i], bits(gpu[i]), emulated[i],
                           bits(emulated[i]));
      });
}

namespace {

// The records summed over each dataset's parts: one per (variant, dataset, ran_on, reason), in the
// order first seen.
struct DeviceRow {
  std::string variant, dataset, ran_on, reason, first_difference;
  HeadCheck totals;
  int items = 0;
};

std::vector<DeviceRow> device_rows(const std::vector<DeviceRecord>& records) {
  std::vector<DeviceRow> rows;
  for (const DeviceRecord& r : records) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const DeviceRow& x) {
      return x.variant == r.variant && x.dataset == r.dataset && x.ran_on == r.run.ran_on && x.reason == r.run.reason;
    });
    if (it == rows.end()) it = rows.insert(rows.end(), DeviceRow{r.variant, r.dataset, r.run.ran_on, r.run.reason, "", {}, 0});
    const HeadCheck t = r.run.totals();
    it->totals.codes_compared += t.codes_compared;
    it->totals.codes_differ += t.codes_differ;
    it->totals.lse_compared += t.lse_compared;
    it->totals.lse_differ += t.lse_differ;
    if (it->first_difference.empty()) it->first_difference = r.run.first_difference;
    ++it->items;
  }
  return rows;
}

// "NVIDIA H100 80GB HBM3 (sm_90, driver ...)" of each GPU provenance given, once each.
std::string gpu_names(const nlohmann::json& gpus) {
  std::vector<std::string> names;
  for (const auto& g : gpus) {
    const std::string name = fmt::format("{} ({}, driver {})", g.value("gpu", std::string("?")), g.value("gpu_arch", std::string("?")),
                                         g.value("gpu_driver", std::string("?")));
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  return names.empty() ? std::string("no GPU recorded") : fmt::format("{}", fmt::join(names, "; "));
}

}  // namespace

nlohmann::ordered_json gpu_check_json(const std::string& experiment, bool check, const std::string& git_sha,
                                      const nlohmann::json& gpus, const std::vector<DeviceRecord>& records) {
  nlohmann::ordered_json doc;
  doc["experiment"] = experiment;
  doc["what"] = check ? "each variant a kernel computes run on the GPU and in emulation on the same inputs (Q, K, V rounded "
                        "to fp16); every output code and LSE value compared, bit for bit"
                      : "--no-check: each variant a kernel computes run on the GPU alone (nothing compared); the others "
                        "left out (not run)";
  doc["device"] = check ? "gpu" : "gpu --no-check";
  doc["git_sha"] = git_sha;
  doc["gpus"] = gpus;
  HeadCheck total;
  std::uint64_t both = 0, alone = 0, emulated = 0, left_out = 0;
  std::string first;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const DeviceRow& r : device_rows(records)) {
    nlohmann::ordered_json row;
    row["variant"] = r.variant;
    row["dataset"] = r.dataset;
    row["work_items"] = r.items;
    row["ran_on"] = r.ran_on;
    row["codes_compared"] = r.totals.codes_compared;
    row["codes_differ"] = r.totals.codes_differ;
    row["lse_compared"] = r.totals.lse_compared;
    row["lse_differ"] = r.totals.lse_differ;
    if (!r.reason.empty()) row["reason"] = r.reason;  // emulated only, left out: why; on the GPU: as which twin
    if (!r.first_difference.empty()) row["first_difference"] = r.first_difference;
    rows.push_back(row);
    (r.ran_on == kRanOnBoth ? both : r.ran_on == kRanOnGpu ? alone : r.ran_on == kLeftOut ? left_out : emulated) += std::uint64_t(r.items);
    total.codes_compared += r.totals.codes_compared;
    total.codes_differ += r.totals.codes_differ;
    total.lse_compared += r.totals.lse_compared;
    total.lse_differ += r.totals.lse_differ;
  }
  doc["totals"] = {{"work_items_checked", both},      {"work_items_gpu_alone", alone},
                   {"work_items_emulated_only", emulated}, {"work_items_left_out", left_out},
                   {"codes_compared", total.codes_compared},
                   {"codes_differ", total.codes_differ}, {"lse_compared", total.lse_compared},
                   {"lse_differ", total.lse_differ}};
  const std::optional<std::string> failure = gpu_check_failure(records);
  doc["passed"] = !failure.has_value();
  if (failure) doc["failure"] = *failure;
  doc["evaluations"] = rows;
  return doc;
}

std::string gpu_check_markdown(bool check, const nlohmann::json& gpus, const std::vector<DeviceRecord>& records) {
  std::string md = fmt::format(
      "\n## GPU check\n\n`--device gpu{}` on {}. Every variant ran on Q, K, V rounded to fp16 (the kernels' input "
      "format). {}\n\n",
      check ? "" : " --no-check", gpu_names(gpus),
      check ? "Where a kernel computes the variant bit for bit it ran on the GPU and in emulation on the same inputs: "
              "\"NAME (GPU)\" rows are the GPU's output against float64, and every output code and LSE value of the GPU "
              "is compared with the emulation's (gpu-check.json)."
            : "Where a kernel computes the variant it ran on the GPU alone (its rows are \"NAME (GPU)\"); nothing was "
              "compared. Variants no kernel computes were left out (not run, not emulated: no rows above).");
  md += "| variant | dataset | ran on | output codes compared | differ | LSE values compared | differ |\n|---|---|---|---|---|---|---|\n";
  for (const DeviceRow& r : device_rows(records)) {
    const std::string where = r.ran_on == kRanOnEmulation ? "emulated only: " + r.reason
                              : r.ran_on == kLeftOut      ? "left out: " + r.reason
                              : r.reason.empty()          ? r.ran_on
                                                          : r.ran_on + ", " + r.reason;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", markdown_cell(r.variant), markdown_cell(r.dataset),
                      markdown_cell(where), r.totals.codes_compared, r.totals.codes_differ, r.totals.lse_compared,
                      r.totals.lse_differ);
  }
  return md;
}

std::optional<std::string> gpu_check_failure(const std::vector<DeviceRecord>& records) {
  HeadCheck total;
  const DeviceRecord* first = nullptr;
  for (const DeviceRecord& r : records) {
    const HeadCheck t = r.run.totals();
    total.codes_compared += t.codes_compared;
    total.codes_differ += t.codes_differ;
    total.lse_compared += t.lse_compared;
    total.lse_differ += t.lse_differ;
    if (!first && (t.codes_differ || t.lse_differ)) first = &r;
  }
  if (!first) return std::nullopt;
  return fmt::format("--device gpu: the GPU differs from the emulation in {} of {} output codes and {} of {} LSE values; the "
                     "first: variant '{}' on {} ({}): {}",
                     total.codes_differ, total.codes_compared, total.lse_differ, total.lse_compared, first->variant,
                     first->dataset, first->item, first->run.first_difference);
}

void Progress::step(const std::string& what) {
  ++done_;
  std::cerr << fmt::format("[{}] ({}/{}) {}  [{:.1f} CPU s]", experiment_, done_, steps_, what, cpu_seconds()) << std::endl;
}

double Progress::cpu_seconds() const { return cpu_now(); }

void run_variants(const std::string& experiment, const std::vector<Variant>& variants, const std::vector<Dataset>& datasets,
                  ExperimentResults& results, const CommonOptions& options,
                  const std::function<nlohmann::json(const Variant&, const Dataset&, const Evaluation&)>& keep,
                  const std::function<void(const Variant&, const Dataset&, const ItemResult&)>& each) {
  std::size_t steps = 0;
  for (const Dataset& d : datasets) steps += parts_of(d).size() * variants.size();
  Progress progress(experiment, int(steps));
  References references(options.threads);
  for (const Dataset& d : datasets) {
    const std::vector<HeadRange> ranges = parts_of(d);
    std::vector<Dataset> parts;
    for (const HeadRange& r : ranges) parts.push_back(part(d, r));
    for (const Variant& v : variants) {
      const attention::Pipeline p = build(v, d.q.dim, d.v.dim);
      results.record_pipeline(v.name, p);
      for (std::size_t i = 0; i < parts.size(); ++i) {
        const Dataset& dp = parts[i];
        const std::string where = part_name(d, ranges[i]);
        const std::optional<ItemResult> r = results.item(d, v.name + " on " + where, [&] {
          Evaluation e = evaluate(p, dp, references.of(dp), options, bool(keep));
          nlohmann::json extra = keep ? keep(v, dp, e) : nlohmann::json();
          return ItemResult{{{v.name, std::move(e)}}, std::move(extra)};
        });
        if (!r) {
          progress.skip();
          continue;
        }
        if (each) each(v, d, *r);
        const Evaluation& e = r->evaluations.front().second;
        double cosine = 0;
        for (const auto& h : e.heads) cosine += h.metrics.cosine / double(e.heads.size());
        progress.step(e.heads.empty() ? fmt::format("{} on {}: left out", v.name, where)
                                      : fmt::format("{} on {} ({} heads): cosine {}", v.name, where, e.heads.size(), percent(cosine, 3)));
      }
    }
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
  if (auto why = options.validate()) {
    std::cerr << "lowbit run " << name << ": error: " << *why << "\n";
    return 2;
  }
  if (options.on_gpu() && options.merge.empty()) {  // a merge reads its items: no GPU needed
#if defined(LOWBIT_HAVE_KERNELS)
    const auto gpu = cli::require_gpu("run");
    if (!gpu) return cli::kSkipped;
    options.gpu = cli::gpu_provenance(*gpu);
#else
    std::cerr << "lowbit run " << name << ": --device gpu: this build has no CUDA kernels; skipped\n";
    return 77;
#endif
  }
  options.sweep = sweep_options(app);
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
    : experiment_(std::move(experiment)),
      out_(options.out, RunInfo::from_args(argc, argv)),
      shard_(options.shard),
      sweep_(options.sweep),
      args_(argv + std::min(argc, 1), argv + argc) {
  out_.run().config["experiment"] = experiment_;
  out_.run().seeds["synthetic"] = options.seed;
  if (options.on_gpu()) {
    on_gpu_ = true;
    check_ = options.check;
    gpu_ = options.gpu;
    out_.run().config["device"] = check_ ? "gpu" : "gpu --no-check";
    if (!gpu_.is_null()) out_.run().config["gpu"] = gpu_;
  }
  if (!options.merge.empty()) load_shards(options);
}

void ExperimentResults::load_shards(const CommonOptions& options) {
  const std::string& sha = out_.run().machine.git_sha;
  for (const std::string& dir : options.merge) {
    ShardRecord s{dir, read_shard(dir)};
    const nlohmann::json& m = s.manifest;
    const Shard part{m.at("shard").at("index").get<int>(), m.at("shard").at("count").get<int>()};
    const int count = part.count, index = part.index;
    const std::string what = fmt::format("{} (shard {})", dir, part.text());
    if (m.at("experiment") != experiment_)
      throw std::runtime_error(fmt::format("{} is a shard of {}, not of {}", what, m.at("experiment").get<std::string>(), experiment_));
    if (m.at("git_sha") != sha)
      throw std::runtime_error(fmt::format("{} ran at git {}, this merge at {}: a sweep's shards and merge run one commit", what,
                                           m.at("git_sha").get<std::string>(), sha));
    for (const auto& [option, value] : sweep_.items())
      if (!m.at("options").contains(option) || m.at("options").at(option) != value)
        throw std::runtime_error(fmt::format("{} ran with --{} '{}', this merge with '{}': not one sweep", what, option,
                                             m.at("options").value(option, nlohmann::json("")).get<std::string>(),
                                             value.get<std::string>()));
    if (!shards_.empty() && int(shards_.size()) != count)
      throw std::runtime_error(
          fmt::format("{} is a part of {}, the first shard given a part of {}: not one split", what, count, shards_.size()));
    if (shards_.empty()) shards_.resize(std::size_t(count));
    ShardRecord& slot = shards_.at(std::size_t(index - 1));
    if (!slot.dir.empty())
      throw std::runtime_error(fmt::format("shard {}/{} is given twice: {} and {}", index, count, slot.dir, dir));
    out_.run().config["merged_from"].push_back({{"dir", dir}, {"shard", part.text()}, {"machine", m.at("machine")}});
    slot = std::move(s);
  }
  std::vector<std::string> missing, given;
  for (std::size_t i = 0; i < shards_.size(); ++i) {
    const std::string part = fmt::format("{}/{}", i + 1, shards_.size());
    if (shards_[i].dir.empty()) missing.push_back(part);
    else given.push_back(part + " " + shards_[i].dir);
  }
  if (!missing.empty())
    throw std::runtime_error(fmt::format("shard {} missing (given: {})", fmt::join(missing, ", "), fmt::join(given, ", ")));
  // The options agree, so the items should; a shard's own list is what its records follow.
  for (const ShardRecord& s : shards_)
    if (s.manifest.at("items") != shards_.front().manifest.at("items"))
      throw std::runtime_error(fmt::format("{} lists other work items than {}: not one sweep", s.dir, shards_.front().dir));
}

std::optional<ItemResult> ExperimentResults::item(const Dataset& d, const std::string& key,
                                                  const std::function<ItemResult()>& compute) {
  record_dataset(d);
  if (std::find(items_.begin(), items_.end(), key) != items_.end())
    throw std::logic_error(experiment_ + ": two work items are named '" + key + "'");
  const std::size_t i = items_.size();
  items_.push_back(key);
  ItemResult r;
  if (!shards_.empty()) {
    const std::size_t count = shards_.size();
    const ShardRecord& s = shards_[i % count];
    const nlohmann::json& listed = s.manifest.at("items");
    if (i >= listed.size() || listed[i] != key)
      throw std::runtime_error(fmt::format("work item {} of this merge, '{}', is not the shards' item {} ({}): not one sweep", i + 1,
                                           key, i + 1, i < listed.size() ? listed[i].get<std::string>() : "they have fewer"));
    const nlohmann::json& record = s.manifest.at("records").at(i / count);
    if (record.at("item") != i)
      throw std::runtime_error(fmt::format("{}: record {} is not of item {}", s.dir, i / count + 1, i + 1));
    for (const auto& e : record.at("evaluations")) {
      r.evaluations.emplace_back(e.at("variant").get<std::string>(), evaluation_from_json(e));
      // Where it ran must be this merge's mode: --device and --no-check are the shards' own.
      const std::optional<DeviceRun>& device = r.evaluations.back().second.device;
      const std::string ran = device ? device->ran_on : std::string("emulation (no --device gpu)");
      const bool fits = !on_gpu_ ? !device
                                 : device && (device->ran_on == kRanOnEmulation || device->ran_on == (check_ ? kRanOnBoth : kRanOnGpu) ||
                                              (!check_ && device->ran_on == kLeftOut));
      if (!fits)
        throw std::runtime_error(fmt::format("{}: item '{}' ran on {}, which this merge (--device {}) does not: its shards ran "
                                             "with other --device or --no-check options",
                                             s.dir, key, ran, !on_gpu_ ? "cpu" : check_ ? "gpu" : "gpu --no-check"));
    }
    r.extra = record.at("extra");
  } else if (shard_ && !shard_->owns(i)) {
    return std::nullopt;
  } else {
    r = compute();
    for (auto& [variant, e] : r.evaluations) {
      e.forward = {};  // the operands are large; `extra` keeps what is wanted of them
      if (on_gpu_ && !e.device)
        e.device = DeviceRun{kRanOnEmulation,
                             experiment_ + " computes this itself, not through the harness's forward pass (evaluate()): "
                                           "no kernel runs it",
                             {}, "", {}, {}};
    }
    if (shard_) {
      nlohmann::json evaluations = nlohmann::json::array();
      for (const auto& [variant, e] : r.evaluations) {
        evaluations.push_back(to_json(e));
        evaluations.back()["variant"] = variant;
      }
      records_.push_back({{"item", i}, {"key", key}, {"evaluations", evaluations}, {"extra", r.extra}});
    }
  }
  for (const auto& [variant, e] : r.evaluations) {
    if (e.device && e.device->ran_on == kLeftOut)
      std::cerr << fmt::format("[{}] {}: left out (--no-check: no kernel computes it, and it is not emulated): {}\n", experiment_,
                               key, e.device->reason);
    else
      add(variant, d, e);
    if (e.device) add_device(variant, d, key, e);
  }
  return r;
}

void ExperimentResults::add_device(const std::string& variant, const Dataset& d, const std::string& item, const Evaluation& e) {
  const DeviceRun& run = *e.device;
  device_records_.push_back({variant, d.name, item, run});
  if (run.ran_on == kRanOnGpu) gpu_alone_.insert({variant, d.name});
  if (run.ran_on == kLeftOut) left_out_.insert({variant, d.name});
  if (run.ran_on != kRanOnBoth) return;
  const std::string gpu = variant + " (GPU)";
  add(gpu, d, Evaluation{run.gpu, run.gpu_histogram, {}, std::nullopt});
  for (const HeadCheck& h : run.heads)
    for (const auto& [metric, value] : {std::pair{"codes_compared", h.codes_compared}, {"codes_differ", h.codes_differ},
                                        {"lse_compared", h.lse_compared}, {"lse_differ", h.lse_differ}})
      add_metric(gpu, d.name, h.label, metric, double(value));
}

std::string ExperimentResults::shown(const std::string& variant, const std::string& dataset) const {
  return gpu_alone_.count({variant, dataset}) ? variant + " (GPU)" : variant;
}

nlohmann::json ExperimentResults::gpus() const {
  nlohmann::json gpus = nlohmann::json::array();
  if (!gpu_.is_null()) gpus.push_back(gpu_);
  for (const ShardRecord& s : shards_)
    if (s.manifest.contains("gpu")) gpus.push_back(s.manifest.at("gpu"));
  return gpus;
}

void ExperimentResults::write_gpu_check() {
  out_.json("gpu-check.json", gpu_check_json(experiment_, check_, out_.run().machine.git_sha, gpus(), device_records_));
}

bool ExperimentResults::finish_shard() {
  if (!shard_) return false;
  nlohmann::json manifest{
      {"experiment", experiment_},
      {"shard", {{"index", shard_->index}, {"count", shard_->count}}},
      {"git_sha", out_.run().machine.git_sha},
      {"options", sweep_},
      {"args", args_},
      {"datasets", out_.run().config.value("datasets", nlohmann::json::object())},
      {"machine", out_.run().machine.to_json()},
      {"items", items_},
      {"records", records_}};
  if (on_gpu_) manifest["gpu"] = gpu_;  // the merge's gpu-check.json names each shard's GPU
  out_.json("shard.json", manifest);
  out_.csv("metrics.csv", metrics_csv());
  if (on_gpu_) write_gpu_check();
  out_.write_provenance();
  std::cout << fmt::format("shard {} of {}: {} of the sweep's {} work items; wrote {}/{{shard.json, metrics.csv, {}provenance.json}} "
                           "(lowbit run-merge OUT DIR... joins the shards)\n",
                           shard_->text(), experiment_, records_.size(), items_.size(), out_.dir().string(),
                           on_gpu_ ? "gpu-check.json, " : "");
  if (on_gpu_)
    if (auto failure = gpu_check_failure(device_records_)) throw std::runtime_error(*failure);
  return true;
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
  if (it != summaries_.end()) return it->second;
  const double nan = std::nan("");
  static const Summary kLeftOut{nan, nan, nan, nan, nan, nan, nan, nan, 0};
  if (left_out_.count({variant, dataset})) return kLeftOut;
  throw std::logic_error("no results for " + variant + " on " + dataset);
}

std::string ExperimentResults::metrics_csv() const {
  // Grouped by (variant, dataset) in the order first added, each group's rows in the order added:
  // an item that adds several variants part by part (backward: O, dQ, dK, dV of each layer) lists
  // each variant's heads together, as one item over all the heads would.
  std::map<std::pair<std::string, std::string>, std::size_t> group;
  std::vector<std::size_t> order(rows_.size());
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    group.emplace(std::pair{rows_[i].variant, rows_[i].dataset}, group.size());
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return group.at({rows_[a].variant, rows_[a].dataset}) < group.at({rows_[b].variant, rows_[b].dataset});
  });
  std::string metrics = "experiment,variant,dataset,head,metric,value\n";
  for (std::size_t i : order) {
    const Row& r = rows_[i];
    metrics += fmt::format("{},{},{},{},{},{:.9g}\n", csv_field(experiment_), csv_field(shown(r.variant, r.dataset)), csv_field(r.dataset),
                           csv_field(r.head), r.metric, r.value);
  }
  return metrics;
}

void ExperimentResults::write(const std::string& title, const std::string& extra_tables) {
  if (shard_) throw std::logic_error(experiment_ + " does not stop a shard run at finish_shard() after its sweep");
  if (!shards_.empty()) {
    const nlohmann::json datasets = out_.run().config.value("datasets", nlohmann::json::object());
    for (const ShardRecord& s : shards_) {
      if (items_.size() != s.manifest.at("items").size())
        throw std::runtime_error(fmt::format("this merge's sweep has {} work items, {}'s {}: not one sweep", items_.size(), s.dir,
                                             s.manifest.at("items").size()));
      if (s.manifest.at("datasets") != datasets)
        throw std::runtime_error(fmt::format("{}'s datasets ({}) are not this merge's ({}): not one sweep", s.dir,
                                             s.manifest.at("datasets").dump(), datasets.dump()));
    }
  }
  out_.csv("metrics.csv", metrics_csv());

  std::string summary =
      "experiment,variant,dataset,heads,cosine_mean,cosine_worst,rel_l1_mean,rel_l1_worst,rmse_mean,rmse_worst,"
      "max_abs_worst,nerr_p99_mean\n";
  std::string distribution = "experiment,variant,dataset,log10_low,log10_high,count\n";
  for (const auto& d : datasets_)
    for (const auto& v : variants_) {
      if (const auto it = summaries_.find({v, d}); it != summaries_.end()) {
        const Summary& s = it->second;
        summary += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", csv_field(experiment_),
                               csv_field(shown(v, d)), csv_field(d), s.heads, s.cosine_mean, s.cosine_worst, s.rel_l1_mean,
                               s.rel_l1_worst, s.rmse_mean, s.rmse_worst, s.max_abs_worst, s.p99_mean);
      }
      if (const auto it = histograms_.find({v, d}); it != histograms_.end()) {
        const ErrorHistogram& h = it->second;
        const auto row = [&](const std::string& low, const std::string& high, std::uint64_t count) {
          distribution += fmt::format("{},{},{},{},{},{}\n", csv_field(experiment_), csv_field(shown(v, d)), csv_field(d), low, high,
                                      count);
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
  std::vector<std::string> variants = table_variants_.empty() ? variants_ : table_variants_;
  if (!table_variants_.empty() && on_gpu_) {  // each shown variant's GPU rows beside it
    variants.clear();
    for (const std::string& v : table_variants_) {
      variants.push_back(v);
      if (std::find(variants_.begin(), variants_.end(), v + " (GPU)") != variants_.end()) variants.push_back(v + " (GPU)");
    }
  }
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
      md += fmt::format("| {} | {} | {} | {:.4f} | {:.4f} | {:.4g} | {:.4g} | {:.3g} | {:.3g} |", markdown_cell(shown(v, d)), percent(s.cosine_mean),
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
  if (on_gpu_) md += gpu_check_markdown(check_, gpus(), device_records_);
  if (!notes_.empty()) md += "\n" + notes_;
  out_.markdown("table.md", md);
  if (on_gpu_) write_gpu_check();
  out_.write_provenance();
  std::cout << md << "\nwrote " << out_.dir().string() << "/{metrics.csv, summary.csv, distribution.csv, table.md, "
            << (on_gpu_ ? "gpu-check.json, " : "") << "provenance.json}\n";
  if (on_gpu_)
    if (auto failure = gpu_check_failure(device_records_)) throw std::runtime_error(*failure);
}

}  // namespace lowbit::experiments
