// What every `lowbit run` experiment shares, so that an experiment is only its question: the
// options (output folder, datasets, the user's tensors, threads), the datasets (synthetic
// presets, the committed SmolLM2 sample, Q/K/V files), the float64 reference of each, one
// pipeline run on a dataset with per-head metrics and the per-element error distribution,
// progress on stderr, and the result files written through experiments/common:
//
//   metrics.csv       experiment,variant,dataset,head,metric,value: cosine, rel_l1, rmse, max_abs
//                     and the quantiles nerr_p50, nerr_p90, nerr_p99, nerr_p999 of the per-element
//                     |error| over the RMS of the head's float64 output, for every head (heads of the
//                     SmolLM2 sample are labelled L<layer>H<head>), by variant and dataset
//   summary.csv       mean and worst over the heads (and layers) of each variant and dataset
//   distribution.csv  the histogram of those normalized per-element errors of each variant and
//                     dataset (all heads; log10 bins of numerics/error_distribution.hpp)
//   table.md          the summary as tables, the papers' numbers beside ours where given
//   provenance.json   git SHA, command, inputs, pipelines (every stage), seeds, machine
//
// An experiment: parse its options with add_common_options, load_datasets, then run its sweep:
// each evaluation of a variant on a part of a dataset (Dataset::parts: a layer of SmolLM2, else
// every head), or a few made together, is a work item, results.item(...), which adds it to the
// results; then `if (results.finish_shard()) return;`, then the summaries, headline and
// results.write().
//
// Sweeps that split (--shard I/N, --merge DIR...): every run of the same options enumerates the
// same items in the same order. A shard runs the items i (0-based) with i % N == I - 1
// (round-robin: the sweeps nest layers in variants in datasets, so each shard gets a share of
// every dataset and of every costly variant) and writes their results exactly, with a manifest
// (shard.json: the experiment, the options, I/N, the git SHA, every item's key), and its items'
// metrics.csv rows. A merge runs the same experiment with every item read from the shards instead
// of computed, after checking that they are one sweep (experiment, options, datasets, SHA) and
// cover every item once: its summaries, tables, headline and plots are then those of one whole
// run, byte for byte, because the same values are added in the same order. No item's data or seed
// depends on the shard: the datasets are made from the options alone, and every pipeline's
// randomness (Hadamard's seed) is its own.
//
// The GPU beside the emulation (--device gpu): every evaluation the harness makes (evaluate())
// runs on Q, K, V rounded to fp16, the kernels' input format (the emulation sees the same values;
// the float64 reference stays that of the dataset as given), and where a kernel computes the
// variant's pipeline bit for bit (kernels/attention/gpu_forward.hpp: gpu_unsupported) on the GPU
// as well: the GPU's output against the reference is the variant "NAME (GPU)", and its output codes
// and LSE are compared with the emulation's, every bit, head by head. Evaluations no kernel
// computes run emulated as before, "emulated only: REASON" (gpu_unsupported's), never counted as
// checked. --no-check runs the GPU alone (no emulation; the variant's rows are the GPU's, labelled
// "NAME (GPU)" in the files), for sweeps too large to emulate: there an evaluation no kernel
// computes is left out, not emulated (at 8K tokens on every head that would take hours): it has no
// rows in metrics.csv, summary.csv, distribution.csv or table.md's tables (summary() gives NaN),
// and stderr, gpu-check.json and table.md's GPU table list it, "left out: REASON", never counted as
// checked. gpu-check.json and a table in table.md record each variant and dataset (ran_on, codes
// and LSE values compared and differing, the reason) with the GPU and git SHA; a run (a shard, a
// merge) in which any differ fails after writing its files, naming the first. Shards carry every
// evaluation's GPU results in their records, so a merge writes what one whole run does.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "emulation/attention/backward.hpp"
#include "emulation/attention/pipeline.hpp"
#include "experiments/common/results.hpp"
#include "numerics/attention_backward_reference.hpp"
#include "numerics/attention_reference.hpp"
#include "numerics/error_distribution.hpp"
#include "numerics/metrics.hpp"
#include "numerics/synthetic.hpp"

namespace lowbit::experiments {

// ---- datasets ---------------------------------------------------------------------------------

// Heads [first, first + count) of a dataset that one launch runs together: a layer of a model.
struct HeadRange {
  int first = 0, count = 0;
  std::string name;  // "layer 10"; empty: every head
};

// Attention inputs with a name (metrics.csv's dataset) and a label per Q head. Layers of a model
// are stacked as heads (the labels say which); K and V carry one head per Q head (GQA expanded),
// so a subset of heads needs no bookkeeping.
struct Dataset {
  std::string name;
  std::string description;  // for table.md: where the tensors come from, shape, causal
  Tensor4 q, k, v;          // batch 1
  bool causal = false;
  std::vector<std::string> head_labels;
  std::vector<std::string> inputs;  // files read
  nlohmann::json spec;              // how it was made (generator spec, files, layers, heads)
  // The launches a sweep's work items run, in head order: each layer of a model; empty: one, every
  // head. The pipelines run each head on its own, so the parts give the whole's numbers.
  std::vector<HeadRange> parts;

  int head_dim() const { return q.dim; }
};

// The default sizes of the named datasets in one experiment.
struct DatasetSizes {
  int synthetic_heads = 8, synthetic_tokens = 1024, synthetic_dim = 128;
  int llm_heads = 9;                          // synthetic-smollm2 (1024 tokens, d = 64, causal)
  std::vector<int> real_layers{0, 10, 20, 29};
  std::vector<int> real_heads{0, 1, 2, 3, 4, 5, 6, 7, 8};  // Q heads of each layer
  int real_tokens = 1024;
  int long_heads = 2, long_queries = 128, long_keys = 16384;  // synthetic-flat, synthetic-sink
};

// Datasets by name:
//   synthetic          the generator's default preset (numerics/synthetic.hpp), not causal
//   synthetic-smollm2  the preset matched to SmolLM2-135M's statistics, causal
//   smollm2            the committed capture (experiments/data/smollm2-135m), causal
//   synthetic-flat     the preset `flat` (long flat rows, V dominated by its means): the first
//                      long_queries queries against long_keys keys (--tokens), d = 128, not causal
//   synthetic-sink     the same of the preset `sink` (the flat rows under one attention sink)
// and the user's --q --k --v files (named by --dataset-name, default the Q file's name).
std::vector<std::string> dataset_names();
// The indices of --layers and --q-heads: "L,L,..." (distinct, >= 0) as given; nullopt when the
// text is not such a list.
std::optional<std::vector<int>> parse_indices(std::string_view text);
// The layers L of a capture's folder, from its files layerLL_q.npy, in order. Throws naming the
// folder when it has none.
std::vector<int> capture_layers(const std::string& dir);
Dataset synthetic_dataset(const std::string& name, const std::string& preset, int heads, int tokens, int dim,
                          std::uint64_t seed, bool causal);
// The capture in dir (layerLL_{q,k,v}.npy): these layers, these Q heads of each (nullopt: every
// one of its file) with their KV heads, the first `tokens` tokens (0 or more than the files': all).
// Throws naming the layer whose file is missing or the head a file lacks.
Dataset smollm2_dataset(const std::string& dir, const std::vector<int>& layers, const std::optional<std::vector<int>>& q_heads,
                        int tokens);
// synthetic-flat, synthetic-sink: the preset's first `queries` queries against `keys` keys, d = 128.
Dataset long_dataset(const std::string& name, const std::string& preset, int heads, int queries, int keys, std::uint64_t seed);
Dataset file_dataset(const std::string& name, const std::string& q, const std::string& k, const std::string& v,
                     bool causal);
// Queries [first, first + count) against keys [0, keys) (keys 0: all), not causal.
Dataset slice(const Dataset& d, int first_query, int queries, int keys);
// Heads [first, first + count) of batch 1.
Tensor4 head_range(const Tensor4& t, int first, int count);
// The parts of d (d.parts, or every head as one); each as a dataset of its own (d itself when d
// has no parts): the same name and description, its heads, its range in the spec (so that
// References tells the parts apart); and its name in progress and work items ("smollm2, layer 10").
std::vector<HeadRange> parts_of(const Dataset& d);
Dataset part(const Dataset& d, const HeadRange& r);
std::string part_name(const Dataset& d, const HeadRange& r);

// ---- options ------------------------------------------------------------------------------------

// --shard I/N: the part I of N of a sweep, 1-based (Slurm's --array=1-N gives
// $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT).
struct Shard {
  int index = 1, count = 1;

  static std::optional<Shard> parse(std::string_view text);  // "I/N"; nullopt unless two integers
  std::optional<std::string> validate() const;
  bool owns(std::size_t item) const { return item % std::size_t(count) == std::size_t(index - 1); }
  std::string text() const { return std::to_string(index) + "/" + std::to_string(count); }
};

// The manifest of the shard in `dir` (its shard.json). Throws naming the file when there is none
// or it lacks a field.
nlohmann::json read_shard(const std::string& dir);

struct CommonOptions {
  std::string out;                      // default LOWBIT_DEFAULT_RESULTS_DIR/NAME
  std::string device = "cpu";           // --device cpu | gpu (the header's "The GPU beside the emulation")
  bool check = true;                    // --no-check clears it: with --device gpu, the GPU alone
  nlohmann::json gpu;                   // --device gpu: the GPU's provenance (experiment_main; empty when merging)
  std::vector<std::string> datasets;    // names from dataset_names()
  std::string q, k, v, dataset_name;    // the user's tensors
  bool causal = false;
  int heads = 0, tokens = 0;            // synthetic sizes (0: the experiment's; synthetic-flat, -sink: keys)
  std::uint64_t seed = 1;
  unsigned threads = 0;
  std::string data_dir;                 // the SmolLM2 sample
  // --layers, --q-heads: the smollm2 dataset's; "" the experiment's (sizes.real_layers,
  // real_heads), "all" every layer of --data-dir / every Q head of its files, or "L,L,...".
  std::string layers, q_heads;
  DatasetSizes sizes;
  std::optional<Shard> shard;           // run this part of the sweep only
  std::vector<std::string> merge;       // the shards' folders: join them
  // Every option that decides the results, by name (set by experiment_main; not --out, --shard,
  // --merge, --threads, nor --data-dir, whose datasets are compared by their records): what the
  // shards of one sweep share.
  nlohmann::json sweep = nlohmann::json::object();

  bool on_gpu() const { return device == "gpu"; }
  std::optional<std::string> validate() const;
};

// Registers --out, --datasets, --q/--k/--v, --causal, --dataset-name, --heads, --tokens, --seed,
// --threads, --data-dir, --layers, --q-heads, --shard, --merge, --device, --no-check on `app`.
void add_common_options(CLI::App& app, CommonOptions& options, const std::string& experiment);
// The datasets the options name (the user's tensors alone when --q is given). Throws naming the
// file, the name or the option that is wrong (--tokens beyond the SmolLM2 capture's tokens: its
// default, the experiment's, is cut to them).
std::vector<Dataset> load_datasets(const CommonOptions& options);

// ---- runs ---------------------------------------------------------------------------------------

// A named pipeline: a preset and --set assignments, built for each dataset's head dimension.
struct Variant {
  std::string name;
  std::string preset;
  std::vector<std::string> sets;
};
// Throws std::invalid_argument naming the variant and the stage when it cannot be built or run.
attention::Pipeline build(const Variant& variant, int head_dim, int value_dim);

struct HeadError {
  std::string label;
  ErrorMetrics metrics;
  ErrorQuantiles quantiles;
};
// ---- the GPU beside the emulation -------------------------------------------------------------

inline constexpr const char* kRanOnBoth = "gpu+emulation";
inline constexpr const char* kRanOnGpu = "gpu";
inline constexpr const char* kRanOnEmulation = "emulation only";
inline constexpr const char* kLeftOut = "left out";  // --no-check: no kernel computes it, and it is not emulated

// One head's GPU output codes and LSE values against the emulation's.
struct HeadCheck {
  std::string label;
  std::uint64_t codes_compared = 0, codes_differ = 0, lse_compared = 0, lse_differ = 0;
};

// Where one evaluation ran under --device gpu, and what the GPU gave.
struct DeviceRun {
  std::string ran_on;            // kRanOnBoth, kRanOnGpu, kRanOnEmulation, kLeftOut
  std::string reason;            // emulation only, left out: why no kernel computes it; on the GPU, an Ada pipeline's Hopper twin
  std::vector<HeadCheck> heads;  // gpu+emulation: every head compared
  std::string first_difference;  // gpu+emulation: the first differing output code (else LSE value); "" when none
  std::vector<HeadError> gpu;    // gpu+emulation: the GPU's output against the reference
  ErrorHistogram gpu_histogram;

  HeadCheck totals() const;  // the heads' sums (label empty)
};

// The GPU's output codes and LSE against the emulation's, every bit, head by head (batch 1, one
// label per head): a DeviceRun of kRanOnBoth without the GPU's metrics. Throws std::invalid_argument
// when the shapes differ.
DeviceRun check_device(const attention::ForwardResult& gpu, const attention::ForwardResult& emulated,
                       const std::vector<std::string>& labels);

// fp32 results of the GPU against the emulation's, every bit pattern, head by head (one label per
// head, each head's values contiguous in rows of `dim`): a DeviceRun of kRanOnBoth without the
// GPU's metrics, the values counted as its codes (SageBwd's O, dQ, dK, dV), and the LSE values
// where given (one per row). `tensor` names the values in first_difference. Throws
// std::invalid_argument when the sizes do not fit.
DeviceRun check_device_values(const std::string& tensor, std::span<const float> gpu, std::span<const float> emulated,
                              int dim, const std::vector<std::string>& labels, std::span<const float> gpu_lse = {},
                              std::span<const float> emulated_lse = {});

// One evaluation's DeviceRun in a run's results: its variant, dataset and work item.
struct DeviceRecord {
  std::string variant, dataset, item;
  DeviceRun run;
};

// gpu-check.json: the experiment, the mode (check: GPU and emulation; else the GPU alone), the
// git SHA, the GPUs (this run's provenance, or each merged shard's), the totals, the first
// difference, and per variant and dataset (records summed over the dataset's parts): ran_on,
// codes_compared, codes_differ, lse_compared, lse_differ, and the reason where emulated only or
// left out.
nlohmann::ordered_json gpu_check_json(const std::string& experiment, bool check, const std::string& git_sha,
                                      const nlohmann::json& gpus, const std::vector<DeviceRecord>& records);
// table.md's section of the same (markdown).
std::string gpu_check_markdown(bool check, const nlohmann::json& gpus, const std::vector<DeviceRecord>& records);
// Why the run fails (any output code or LSE value differs: the counts, and the first difference
// with its variant, dataset and head), or nothing.
std::optional<std::string> gpu_check_failure(const std::vector<DeviceRecord>& records);

// What the GPU runs for a pipeline under --device gpu: the pipeline itself where a kernel computes it,
// else an Ada pipeline's Hopper twin (the same stages at arch=sm_90, which is what the GPU computes;
// `twin` says so) where a kernel computes that, else nothing and `why` (gpu_unsupported's reasons).
// Host code; in builds with the kernels.
struct GpuPlan {
  attention::Pipeline pipeline;
  std::string twin;
  std::optional<std::string> why;
};
// The same for SageBwd (kernels/attention/sage_bwd_gpu.hpp): the config, or its Hopper twin where a
// product is FP16 on another arch, or nothing and why.
struct BackwardGpuPlan {
  attention::SageBwdConfig config;
  std::string twin;
  std::optional<std::string> why;
};
#if defined(LOWBIT_HAVE_KERNELS)
GpuPlan plan_gpu(const attention::Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                 const attention::ForwardOptions& options);
BackwardGpuPlan plan_gpu_backward(const attention::SageBwdConfig& config, const Tensor4& q, const Tensor4& k,
                                  const Tensor4& v, const Tensor4& d_out);
#endif

struct Evaluation {
  std::vector<HeadError> heads;  // --device gpu --no-check, where the GPU ran: the GPU's; left out: none
  ErrorHistogram histogram;
  attention::ForwardResult forward;  // with the quantized operands when asked for
  std::optional<DeviceRun> device;   // --device gpu
};

// What one work item of a sweep adds to the results: the evaluations of the variants it runs, in
// the order added (mostly one; backward's four: O, dQ, dK, dV of one pass), and what the
// experiment keeps of it beyond the metrics (smoothing: its operands' INT4 code counts), which a
// shard records with it. The evaluations' quantized operands are not kept.
struct ItemResult {
  std::vector<std::pair<std::string, Evaluation>> evaluations;  // variant, evaluation
  nlohmann::json extra;
};

// The float64 reference of each dataset, computed once.
class References {
 public:
  explicit References(unsigned threads) : threads_(threads) {}
  const ReferenceAttention& of(const Dataset& d);

 private:
  unsigned threads_;
  std::map<std::string, ReferenceAttention> cache_;
};

// The pipeline's rounded output on every head against the reference, with o.threads; with
// --device gpu (o.on_gpu()) on the GPU as well, or alone (--no-check), where a kernel computes it,
// and under --no-check nothing where none does (left out: no heads; the header's "The GPU beside
// the emulation"; Evaluation::device).
Evaluation evaluate(const attention::Pipeline& pipeline, const Dataset& d, const ReferenceAttention& reference,
                    const CommonOptions& o, bool keep_operands = false);
// SageBwd (attention::sage_bwd) of `config` on d with dO against the float64 gradients: the
// evaluations "O", "dQ", "dK", "dV" in that order (dK, dV by KV head: d's labels where there are as
// many KV as Q heads). With --device gpu as evaluate() does it: Q, K, V rounded to fp16 for both
// sides (dO as given), the GPU's run (plan_gpu_backward) beside the emulation, every fp32 bit of O
// with its LSE, of dQ, dK and dV compared with the emulated config's (its Hopper twin's where the
// GPU runs that, emulated beside); emulated only where no kernel computes it; --no-check: the GPU
// alone, or left out.
std::vector<std::pair<std::string, Evaluation>> evaluate_backward(const attention::SageBwdConfig& config, const Dataset& d,
                                                                  const Tensor4& d_out, const ReferenceGradients& reference,
                                                                  const CommonOptions& o);
// Per-head metrics and distribution of any output against a reference ([heads, tokens, dim]), the
// heads on `threads` threads (0: every core; the result does not depend on them).
Evaluation compare_heads(const std::vector<double>& reference, const std::vector<double>& output, int heads,
                         const std::vector<std::string>& labels, unsigned threads = 1);

// "[name] message", with the process CPU time so far, on stderr.
class Progress {
 public:
  Progress(std::string experiment, int steps) : experiment_(std::move(experiment)), steps_(steps) {}
  void step(const std::string& what);
  void skip() { ++done_; }  // a step another shard runs: counted, not printed
  double cpu_seconds() const;

 private:
  std::string experiment_;
  int steps_, done_ = 0;
};

// ---- results ------------------------------------------------------------------------------------

class ExperimentResults;

// Every variant on every dataset, in that order, on each part of the dataset (a work item each)
// into `results` (pipelines and datasets recorded), with progress. `keep` (optional) sees each
// evaluation this run computes with its quantized operands and returns what the experiment keeps of
// them (ItemResult::extra); `each` (optional) sees every item's result this run has (all of them but
// another shard's).
void run_variants(const std::string& experiment, const std::vector<Variant>& variants,
                  const std::vector<Dataset>& datasets, ExperimentResults& results, const CommonOptions& options,
                  const std::function<nlohmann::json(const Variant&, const Dataset&, const Evaluation&)>& keep = {},
                  const std::function<void(const Variant&, const Dataset&, const ItemResult&)>& each = {});

// An experiment's program: options (the common ones with these defaults, then the experiment's
// own), then body; errors print "lowbit run NAME: error: ..." and return 1; bad options 2 (CLI11,
// CommonOptions::validate); --device gpu without a GPU (or in a build without the kernels) prints
// that it is skipped and returns 77 (a merge needs no GPU: its items are read).
int experiment_main(int argc, char** argv, const std::string& name, const std::string& description,
                    const std::vector<std::string>& default_datasets, const DatasetSizes& sizes,
                    const std::function<void(CLI::App&)>& own_options,
                    const std::function<void(const CommonOptions&)>& body);

// The papers' numbers for a variant (NaN: not given).
struct PaperNumbers {
  std::string source;  // "SageAttention2 Tables 3/15"
  double cosine_mean, rel_l1_mean, rmse_mean, cosine_worst, rel_l1_worst, rmse_worst;
};

struct Summary {
  double cosine_mean = 0, cosine_worst = 2, rel_l1_mean = 0, rel_l1_worst = 0, rmse_mean = 0, rmse_worst = 0,
         max_abs_worst = 0, p99_mean = 0;
  int heads = 0;
};

class ExperimentResults {
 public:
  ExperimentResults(std::string experiment, const CommonOptions& options, int argc, char** argv);

  // Work item `key` (unique in the sweep) on dataset d (the whole, whose name and record its
  // evaluations take; compute may run a part): `compute`d and add()ed when it is this run's, read
  // from its shard and add()ed when merging, nullopt when another shard runs it. Throws naming the
  // item when a merge's shards lack it.
  std::optional<ItemResult> item(const Dataset& d, const std::string& key, const std::function<ItemResult()>& compute);
  // In a shard run: writes the shard's items (shard.json, metrics.csv; gpu-check.json with --device
  // gpu) and returns true, and the experiment stops (its summaries need every item); throws, after
  // writing, when a GPU's code differs (gpu_check_failure). Otherwise false.
  bool finish_shard();

  void add(const std::string& variant, const Dataset& d, const Evaluation& e);
  void add_metric(const std::string& variant, const std::string& dataset, const std::string& head,
                  const std::string& metric, double value);
  void paper(const std::string& variant, const PaperNumbers& numbers) { papers_[variant] = numbers; }
  void note(const std::string& markdown) { notes_ += markdown; }  // table.md text after the tables
  void intro(const std::string& markdown) { intro_ = markdown; }  // table.md text before them
  // Only these variants in table.md's tables (metrics.csv and summary.csv keep every one).
  void table_variants(std::vector<std::string> variants) { table_variants_ = std::move(variants); }
  void record_pipeline(const std::string& variant, const attention::Pipeline& p);
  void record_dataset(const Dataset& d);
  // Throws std::logic_error when the variant has no results on the dataset; NaN metrics (heads 0)
  // where --no-check left it out on every part.
  const Summary& summary(const std::string& variant, const std::string& dataset) const;

  ResultDirectory& directory() { return out_; }
  // Writes metrics.csv, summary.csv, distribution.csv, table.md and provenance.json (and, with
  // --device gpu, gpu-check.json); prints the tables to stdout. `extra_tables` (markdown) go before
  // the notes. When merging, first checks that the shards' sweep is this one to the end (as many
  // items, the same datasets). Throws, after writing, when a GPU's code differs (gpu_check_failure).
  void write(const std::string& title, const std::string& extra_tables = "");

 private:
  struct ShardRecord {
    std::string dir;
    nlohmann::json manifest;
  };
  void load_shards(const CommonOptions& options);
  std::string metrics_csv() const;
  // The name a variant's rows on a dataset have in the files: "NAME (GPU)" where the GPU ran alone.
  std::string shown(const std::string& variant, const std::string& dataset) const;
  // --device gpu: the evaluations' DeviceRuns into the records and the results (the GPU's rows).
  void add_device(const std::string& variant, const Dataset& d, const std::string& item, const Evaluation& e);
  void write_gpu_check();
  // The GPUs of gpu-check.json: this run's provenance, or each merged shard's.
  nlohmann::json gpus() const;

  struct Row {
    std::string variant, dataset, head, metric;
    double value;
  };
  std::string experiment_;
  ResultDirectory out_;
  std::vector<Row> rows_;
  std::vector<std::string> variants_, datasets_;
  std::map<std::pair<std::string, std::string>, Summary> summaries_;
  std::map<std::pair<std::string, std::string>, ErrorHistogram> histograms_;
  std::map<std::string, PaperNumbers> papers_;
  std::map<std::string, std::string> descriptions_;
  std::string notes_, intro_;
  std::vector<std::string> table_variants_;
  // Sharding: this run's part (shard run), or the shards read (merge); the sweep's items so far.
  std::optional<Shard> shard_;
  nlohmann::json sweep_;
  std::vector<std::string> args_;    // the command's arguments, which lowbit run-merge runs again
  std::vector<ShardRecord> shards_;  // by index - 1
  std::vector<std::string> items_;
  nlohmann::json records_ = nlohmann::json::array();  // a shard's items' results
  // --device gpu (the options' device, check and GPU provenance); the evaluations' records; the
  // (variant, dataset) pairs the GPU ran alone, and those --no-check left out.
  bool on_gpu_ = false, check_ = true;
  nlohmann::json gpu_;
  std::vector<DeviceRecord> device_records_;
  std::set<std::pair<std::string, std::string>> gpu_alone_, left_out_;
};

std::string percent(double cosine, int decimals = 2);

}  // namespace lowbit::experiments
