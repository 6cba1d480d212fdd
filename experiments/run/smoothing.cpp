// lowbit run smoothing: SageAttention2's Tables 9 (mean) and 17 (worst): the smoothing methods at
// per-thread (or, --qk-granularity, per-token) INT4 Q, K in the whole sage2-4b pipeline (E4M3 P and V): none, the random Hadamard
// rotation (HadmdAttn), SmoothQuant-style migration (SmoothAttn, alpha 0.5), smooth K, smooth Q,
// smooth Q+K (SageAttn2-4b). Beside the tables: |Q| and |K| per channel and token before and after
// smoothing (the papers' Figure 4) of the head that loses most without smoothing, and the INT4
// codes with and without smoothing (Figure 5).
#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "emulation/attention/sage2_hopper.hpp"
#include "emulation/quant/smoothing.hpp"
#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"
#include "numerics/npy.hpp"

namespace lowbit::experiments {
namespace {

constexpr int kTokensPerColumn = 8;  // heatmap columns: the largest |x| of 8 consecutive tokens

// max |x| over runs of kTokensPerColumn tokens: [columns, channels].
void write_heatmap(const std::string& path, const MatrixF& x) {
  const int columns = int(x.rows()) / kTokensPerColumn, channels = int(x.cols());
  std::vector<float> out(std::size_t(columns) * std::size_t(channels), 0.0f);
  for (int t = 0; t < columns * kTokensPerColumn; ++t)
    for (int c = 0; c < channels; ++c) {
      float& m = out[std::size_t(t / kTokensPerColumn) * std::size_t(channels) + std::size_t(c)];
      m = std::max(m, std::fabs(x(t, c)));
    }
  write_npy(path, {std::size_t(columns), std::size_t(channels)}, out);
}

}  // namespace

int run_smoothing(int argc, char** argv) {
  const std::string name = "smoothing";
  std::string qk_granularity = "per-thread";
  return experiment_main(
      argc, argv, name, "smoothing methods at per-thread INT4 Q, K (SageAttention2 Tables 9, 17)",
      {"synthetic", "synthetic-smollm2", "smollm2"}, DatasetSizes{},
      [&](CLI::App& app) {
        app.add_option("--qk-granularity", qk_granularity,
                       "INT4 Q's and K's scale groups: per-thread (SageAttention2's kernel) or per-token")
            ->check(CLI::IsMember({"per-thread", "per-token"}))
            ->capture_default_str();
      },
      [&](const CommonOptions& o) {
        const std::vector<Dataset> datasets = load_datasets(o);
        ExperimentResults results(name, o, argc, argv);
        const std::string source = "SageAttention2 Tables 9 (mean) and 17 (worst), CogVideoX";
        std::vector<std::pair<Variant, PaperNumbers>> rows{
            {{"None", "sage2-4b", {"smooth-q=off", "smooth-k=off"}}, {source, 0.8004, 0.3906, 0.2223, 0.0483, 0.9979, 0.7784}},
            {{"HadmdAttn", "hadamard", {}}, {source, 0.7977, 0.3782, 0.2180, 0.0485, 0.9978, 0.7785}},
            {{"SmoothAttn", "smoothattn", {}}, {source, 0.9021, 0.3383, 0.1952, 0.6449, 0.9262, 0.7204}},
            {{"Smooth K", "sage2-4b", {"smooth-q=off"}}, {source, 0.9807, 0.1493, 0.0743, 0.9086, 0.3565, 0.1464}},
            {{"Smooth Q", "sage2-4b", {"smooth-k=off"}}, {source, 0.9830, 0.1250, 0.0712, 0.9310, 0.2989, 0.2195}},
            {{"Smooth Q+K (SageAttn2-4b)", "sage2-4b", {}}, {source, 0.9946, 0.0648, 0.0334, 0.9671, 0.1956, 0.0779}},
        };
        std::vector<Variant> variants;
        for (auto& [v, paper] : rows) {
          if (qk_granularity != "per-thread")
            for (const char* t : {"q", "k"}) v.sets.push_back(fmt::format("{}=int4:{}", t, qk_granularity));
          variants.push_back(v);
          results.paper(v.name, paper);
        }
        const std::string none = "None", both = "Smooth Q+K (SageAttn2-4b)";
        std::map<std::string, std::pair<std::string, double>> worst_head;  // dataset -> (head, None's cosine)
        // Q's and K's INT4 code counts of every (variant, dataset, tensor) in the order first met,
        // summed over the dataset's parts.
        std::vector<std::array<std::string, 3>> counted;
        std::map<std::array<std::string, 3>, std::map<int, std::uint64_t>> counts;
        run_variants(
            name, variants, datasets, results, o,
            [&](const Variant& v, const Dataset&, const Evaluation& e) {
              // INT4 codes of Q and K over every head (padding left out): [{tensor, [[code, count], ...]}, ...].
              nlohmann::json kept = nlohmann::json::array();
              if (v.name != none && v.name != both) return kept;
              for (const auto& [tensor, heads] : {std::pair{"Q", &e.forward.q}, std::pair{"K", &e.forward.k}}) {
                std::map<int, std::uint64_t> count;
                for (const attention::QuantizedHead& qh : *heads)
                  for (int r = 0; r < qh.tensor.rows; ++r)
                    for (int c = 0; c < qh.tensor.cols; ++c) ++count[int(decode(qh.tensor.spec.element, qh.tensor.codes(r, c)))];
                kept.push_back({{"tensor", tensor}, {"counts", count}});
              }
              return kept;
            },
            [&](const Variant& v, const Dataset& d, const ItemResult& r) {
              const Evaluation& e = r.evaluations.front().second;
              if (v.name == none)
                for (const HeadError& h : e.heads)
                  if (!worst_head.count(d.name) || h.metrics.cosine < worst_head[d.name].second)
                    worst_head[d.name] = {h.label, h.metrics.cosine};
              for (const auto& t : r.extra) {
                const std::array<std::string, 3> key{v.name, d.name, t.at("tensor").get<std::string>()};
                if (!counts.count(key)) counted.push_back(key);
                for (const auto& [code, n] : t.at("counts").get<std::map<int, std::uint64_t>>()) counts[key][code] += n;
              }
            });
        if (results.finish_shard()) return;
        std::string codes = "variant,dataset,tensor,code,count\n";
        for (const auto& key : counted)
          for (const auto& [code, n] : counts.at(key))
            codes += fmt::format("{},{},{},{},{}\n", csv_field(key[0]), csv_field(key[1]), key[2], code, n);
        results.directory().csv("int4_codes.csv", codes);

        // Heatmaps of the head that loses most without smoothing.
        nlohmann::json index = nlohmann::json::array();
        const std::filesystem::path dir = results.directory().dir();
        for (const Dataset& d : datasets) {
          if (!worst_head.count(d.name)) continue;  // --no-check left None out: no worst head
          const int h = int(std::find(d.head_labels.begin(), d.head_labels.end(), worst_head.at(d.name).first) - d.head_labels.begin());
          const attention::Pipeline p = attention::preset("sage2-4b", d.q.dim);
          const MatrixF q = d.q.head(0, h), k = d.k.head(0, h);
          const quant::Smoothed<float> qs = quant::smooth(q, p.tiling.block_q, true);
          const quant::Smoothed<float> ks = quant::smooth(k, 0, true, p.smoothing.key_mean_chunk);
          nlohmann::json entry{{"dataset", d.name}, {"head", d.head_labels[std::size_t(h)]}, {"first_token", 0},
                               {"tokens_per_column", kTokensPerColumn},
                               {"q_smoothing", fmt::format("minus its mean per block of {} queries", p.tiling.block_q)},
                               {"k_smoothing", "minus its mean over all keys"}};
          for (const auto& [key, x] : {std::pair{"q_before", &q}, std::pair{"q_after", &qs.residual},
                                       std::pair{"k_before", &k}, std::pair{"k_after", &ks.residual}}) {
            const std::string file = fmt::format("heatmap_{}_{}.npy", d.name, key);
            write_heatmap((dir / file).string(), *x);
            entry[key] = file;
          }
          index.push_back(entry);
        }
        results.directory().json("heatmaps.json", index);

        std::string headline;
        for (const Dataset& d : datasets)
          headline += fmt::format("{}{}: none {} -> smooth Q+K {}", headline.empty() ? "" : "; ", d.name,
                                  percent(results.summary(none, d.name).cosine_mean),
                                  percent(results.summary(both, d.name).cosine_mean));
        results.directory().text("headline.txt", "cosine, " + qk_granularity + " INT4 Q K: " + headline + "\n");
        results.note(
            "Pipelines: sage2-4b (" +
            (qk_granularity == "per-thread" ? std::string("per-thread INT4 Q, K with the mma.m16n8k64 groups")
                                            : qk_granularity + " INT4 Q, K") +
            ", E4M3 P at 448, per-channel E4M3 V, "
            "FP22 mma.sync e4m3 flushed per KV block) with smooth Q (minus the mean of each block of 128 queries, the "
            "scores take qbar.k' back) and smooth K (minus the mean over all keys) switched; HadmdAttn: Q and K rotated "
            "by a random Hadamard matrix (seed 0), no smoothing; SmoothAttn: Q and K migrated per channel (alpha 0.5, "
            "after QServe), no smoothing. heatmaps.json names the heatmap files (max |x| of 8 consecutive tokens per "
            "column) of the head whose None cosine is lowest; int4_codes.csv counts Q's and K's INT4 codes.\n");
        results.write("SageAttention2 Tables 9 and 17: smoothing methods, " + qk_granularity + " INT4 Q, K, whole pipeline");
      });
}

}  // namespace lowbit::experiments
