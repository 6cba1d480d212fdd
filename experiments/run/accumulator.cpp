// lowbit run accumulator: SageAttention2 §3.4 and Table 13: the P V accumulator. sage2-8b on Hopper
// (E4M3 P and V on wgmma, whose accumulator is FP22) with its two-level accumulation (a fresh
// FP22 register per KV block, flushed into the fp32 o), with o kept in the FP22 register across
// the whole sequence (in place, as FlashAttention-3 does), and with the same E4M3 products summed
// in fp32; each with V smoothed (minus its mean over the keys) or not; against the number of keys
// a query attends to, 1K to 32K on synthetic data (128 queries, the error grows with the keys,
// not the queries: the same first 128 queries at every length). Table 13's rows: sage2-4b with and without smooth V on the whole datasets,
// with its two-level accumulation and with o kept in the FP22 register (the paper says smooth V
// matters because of the FP22 accumulator; its two-level buffer may hide that).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::experiments {

int run_accumulator(int argc, char** argv) {
  const std::string name = "accumulator";
  std::vector<int> lengths{1024, 2048, 4096, 8192, 16384, 32768}, real_lengths{256, 512, 1024};
  int queries = 128, long_heads = 2;
  const CLI::Option* real_lengths_option = nullptr;
  return experiment_main(
      argc, argv, name, "FP22 vs fp32 P V accumulation, two-level or in place, smooth V, 1K-32K keys (SageAttention2 §3.4, Table 13)",
      {"synthetic", "smollm2"}, DatasetSizes{},
      [&](CLI::App& app) {
        app.add_option("--lengths", lengths, "keys per query on synthetic data")->delimiter(',')->capture_default_str();
        real_lengths_option =
            app.add_option("--real-lengths", real_lengths,
                           "keys per query on the SmolLM2 sample and your tensors (at most their tokens, --tokens; of the "
                           "default, those within them)")
                ->delimiter(',')
                ->capture_default_str();
        app.add_option("--queries", queries, "queries (the first ones) at every length")->capture_default_str();
        app.add_option("--long-heads", long_heads, "synthetic heads of the length sweep")->capture_default_str();
      },
      [&](const CommonOptions& o) {
        ExperimentResults results(name, o, argc, argv);
        const std::vector<Dataset> datasets = load_datasets(o);
        // The whole pipeline, then the accumulator alone: every other stage exact (fp32 Q, K, P, V,
        // exp2 correctly rounded, fp32 output), P V summed by the wgmma's FP22 accumulation on
        // the fp32 values (pv=wide:, emulation/mma/wide.hpp), P at 448 as the kernel's.
        constexpr const char* kWgmma = "wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3";
        const std::vector<std::string> exact{"q=fp32:none", "k=fp32:none", "qk=fp32-fma", "p=fp32:448", "v=fp32:none",
                                             "exp2=exact", "output=fp32"};
        const auto alone = [&](std::vector<std::string> more) {
          std::vector<std::string> sets = exact;
          sets.insert(sets.end(), more.begin(), more.end());
          return sets;
        };
        const std::vector<std::pair<std::string, std::vector<std::string>>> accumulators{
            {"fp32 sums of the E4M3 products", {std::string("pv=fp32-fma:") + kWgmma}},
            {"FP22, two-level per KV block", {}},
            {"FP22, in place", {"accumulation=in-place"}},
            {"accumulator alone: FP22, two-level per KV block", alone({std::string("pv=wide:") + kWgmma})},
            {"accumulator alone: FP22, in place", alone({std::string("pv=wide:") + kWgmma, "accumulation=in-place"})},
            {"accumulator alone: fp32 (the exact pipeline)", alone({"pv=fp32-fma"})},
        };
        // The sweeps: a long synthetic sequence and each dataset's own windows.
        struct Sweep {
          Dataset base;
          std::vector<int> lengths;
        };
        std::vector<Sweep> sweeps;
        for (const Dataset& d : datasets) {
          if (d.name == "synthetic") {
            const int longest = *std::max_element(lengths.begin(), lengths.end());
            sweeps.push_back({synthetic_dataset("synthetic", "default", o.heads ? o.heads : long_heads, longest, 128, o.seed, false),
                              lengths});
          } else {
            std::vector<int> mine;
            for (int n : real_lengths) {
              if (n > d.k.tokens && real_lengths_option->count())
                throw std::invalid_argument(fmt::format("--real-lengths {}: dataset {} has {} tokens (--tokens, the capture's)", n,
                                                        d.name, d.k.tokens));
              if (n <= d.k.tokens && n >= queries) mine.push_back(n);
            }
            sweeps.push_back({d, mine});
          }
        }
        const auto sweep_variant = [](const std::string& label, bool smooth_v, int keys) {
          return fmt::format("{}, smooth V {} @ {} keys", label, smooth_v ? "on" : "off", keys);
        };
        std::size_t steps = 0;
        for (const Dataset& d : datasets) steps += 4 * parts_of(d).size();
        for (const Sweep& s : sweeps) steps += s.lengths.size() * accumulators.size() * 2 * parts_of(s.base).size();
        Progress progress(name, int(steps));
        References references(o.threads);
        // Each variant on each part of the dataset (a work item each).
        const auto run = [&](const Variant& v, const Dataset& d) {
          const attention::Pipeline p = build(v, d.q.dim, d.v.dim);
          results.record_pipeline(v.name, p);
          for (const HeadRange& range : parts_of(d)) {
            const std::string where = part_name(d, range);
            const auto r = results.item(d, v.name + " on " + where, [&] {
              const Dataset dp = part(d, range);
              return ItemResult{{{v.name, evaluate(p, dp, references.of(dp), o)}}, {}};
            });
            if (!r) {
              progress.skip();
              continue;
            }
            progress.step(r->evaluations.front().second.heads.empty()
                              ? fmt::format("{} on {}: left out", v.name, where)
                              : fmt::format("{} on {}: rel L1 {:.4g}", v.name, where, results.summary(v.name, d.name).rel_l1_mean));
          }
        };
        for (const Sweep& s : sweeps)
          for (int n : s.lengths) {
            // The same queries at every length: only the keys they attend to change.
            Dataset window = slice(s.base, 0, std::min(queries, n), n);
            window.description = s.base.description + fmt::format("; the first {} queries against the first N keys, "
                                                                  "not causal",
                                                                  queries);
            for (bool smooth_v : {false, true})
              for (const auto& [label, sets] : accumulators) {
                Variant v{sweep_variant(label, smooth_v, n), "sage2-8b", sets};
                v.sets.push_back(smooth_v ? "smooth-v=on" : "smooth-v=off");
                run(v, window);
              }
          }
        // Table 13: sage2-4b with and without smooth V, on the whole datasets.
        const std::string source = "SageAttention2 Table 13, CogVideoX";
        const double nan = std::nan("");
        const auto table13_variant = [](bool smooth_v, bool in_place = false) {
          return fmt::format("Table 13: sage2-4b{}, smooth V {}", in_place ? ", FP22 in place" : "", smooth_v ? "on" : "off");
        };
        for (bool in_place : {false, true}) {
          results.paper(table13_variant(false, in_place), {source, 0.9825, 0.1980, 0.2387, nan, nan, nan});
          results.paper(table13_variant(true, in_place), {source, 0.9975, 0.0406, 0.0773, nan, nan, nan});
        }
        for (const Dataset& d : datasets)
          for (bool in_place : {false, true})
            for (bool smooth_v : {false, true}) {
              Variant v{table13_variant(smooth_v, in_place), "sage2-4b", {smooth_v ? "smooth-v=on" : "smooth-v=off"}};
              if (in_place) v.sets.push_back("accumulation=in-place");
              run(v, d);
            }
        if (results.finish_shard()) return;

        std::string headline;
        for (const Sweep& s : sweeps) {
          if (s.lengths.empty()) continue;
          const int n = s.lengths.back();
          const auto l1 = [&](const std::string& label) {
            return results.summary(sweep_variant(label, false, n), s.base.name).rel_l1_mean;
          };
          // Under --device gpu --no-check the accumulator alone (emulation only) is left out: the whole
          // pipelines' then.
          const bool alone_ran = !std::isnan(l1(accumulators[3].first));
          headline += fmt::format("{}{} at {} keys, rel L1 of {}: FP22 two-level {:.3g}, in place {:.3g}",
                                  headline.empty() ? "" : "; ", s.base.name, n,
                                  alone_ran ? "the accumulator alone" : "the whole pipeline",
                                  l1(accumulators[alone_ran ? 3 : 1].first), l1(accumulators[alone_ran ? 4 : 2].first));
        }
        results.directory().text("headline.txt", headline + "\n");
        // The per-variant plots show each sweep's longest window and Table 13 (error_vs_length.png has
        // every length): one bar per variant and length would make them pages tall.
        std::vector<std::string> shown;
        for (const Sweep& s : sweeps)
          if (!s.lengths.empty())
            for (bool smooth_v : {false, true})
              for (const auto& accumulator : accumulators) shown.push_back(sweep_variant(accumulator.first, smooth_v, s.lengths.back()));
        for (bool in_place : {false, true})
          for (bool smooth_v : {false, true}) shown.push_back(table13_variant(smooth_v, in_place));
        results.directory().json("plot_variants.json", shown);
        results.note(
            "Sweep pipeline: sage2-8b (SageAttention2-8b on Hopper: per-thread INT8 Q, K with smooth K, E4M3 P at 448 "
            "folded into the exponent, per-channel E4M3 V, wgmma m64nNk32 e4m3 whose accumulator is FP22 (1+8+13 "
            "bits, truncated; verified on an H100), 64-key KV blocks). \"fp32 sums\": the same E4M3 products summed "
            "with fp32 fmas (no FP22). \"two-level\": a fresh FP22 register per KV block flushed into the fp32 o "
            "(SageAttention2's FP32 buffer); \"in place\": o rescaled and fed back as the wgmma's C for the whole "
            "sequence. \"accumulator alone\": Q, K, P, V in fp32, exp2 correctly rounded, fp32 output, and the P V sums "
            "made by the wgmma's FP22 accumulation (its chunks, truncation and rounding) on the fp32 values "
            "(pv=wide:, emulation/mma/wide.hpp): the error the accumulator adds by itself. Smooth V: V minus its mean "
            "over the keys, added back after normalization. Variants are named "
            "\"... @ N keys\" (error_vs_length.png; metrics.png and the error distributions show each sweep's longest "
            "window). Table 13 rows: sage2-4b (INT4 Q, K, Ada's FP22 mma.sync, MMA-Sim's "
            "published model) on the whole datasets, two-level as the kernel or with o accumulated in place in the "
            "FP22 register (\"FP22 in place\").\n");
        results.write("SageAttention2 §3.4 and Table 13: the P V accumulator against sequence length");
      });
}

}  // namespace lowbit::experiments
