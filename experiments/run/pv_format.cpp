// lowbit run pv-format: SageAttention2's Tables 6 (mean) and 16 (worst): the format of P and V
// behind per-thread INT4 Q, K (smoothed): INT8 (P at 127, per-channel V, the integer MMA), E5M2
// and E4M3 (P at 448, per-channel V, the FP22 mma.sync), FP16 (P in [0, 1], V cast, fp32
// accumulators).
#include <algorithm>

#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::experiments {

int run_pv_format(int argc, char** argv) {
  const std::string name = "pv-format";
  int long_keys = 16384;
  return experiment_main(
      argc, argv, name, "P and V in INT8, E5M2, E4M3, FP16 behind INT4 Q, K (SageAttention2 Tables 6, 16)",
      {"synthetic", "synthetic-smollm2", "smollm2"}, DatasetSizes{},
      [&](CLI::App& app) {
        app.add_option("--long-keys", long_keys,
                       "with the synthetic dataset, also 128 queries of it against this many keys (0: none)")
            ->capture_default_str();
      },
      [&](const CommonOptions& o) {
        std::vector<Dataset> datasets = load_datasets(o);
        // Long sequences: where INT8 P loses the small probabilities (each key's share of a
        // query's attention shrinks with the keys).
        if (long_keys > 0 && o.q.empty() &&
            std::find(o.datasets.begin(), o.datasets.end(), "synthetic") != o.datasets.end()) {
          Dataset d = slice(synthetic_dataset(fmt::format("synthetic-{}k", long_keys / 1024), "default", 2, long_keys,
                                              o.sizes.synthetic_dim, o.seed, false),
                            0, 128, long_keys);
          d.description += fmt::format("; the first 128 queries against all {} keys, not causal", long_keys);
          datasets.push_back(std::move(d));
        }
        ExperimentResults results(name, o, argc, argv);
        const std::string source = "SageAttention2 Tables 6 (mean) and 16 (worst), CogVideoX";
        const std::vector<std::pair<Variant, PaperNumbers>> rows{
            {{"INT8", "sage2-4b", {"p=int8:127", "v=int8:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"}},
             {source, 0.7705, 0.5618, 0.5044, 0.1952, 0.9579, 1.4483}},
            {{"E5M2", "sage2-4b", {"p=e5m2:448", "v=e5m2:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"}},
             {source, 0.9920, 0.0905, 0.0903, 0.9494, 0.2327, 0.2361}},
            {{"E4M3", "sage2-4b", {}}, {source, 0.9944, 0.0683, 0.0347, 0.9670, 0.1956, 0.0779}},
            {{"FP16", "sage2-4b", {"p=fp16:1", "v=fp16:none", "pv=mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"}},
             {source, 0.9945, 0.0649, 0.0335, 0.9676, 0.1916, 0.0775}},
        };
        std::vector<Variant> variants;
        for (const auto& [v, paper] : rows) {
          variants.push_back(v);
          results.paper(v.name, paper);
        }
        run_variants(name, variants, datasets, results, o.threads);
        if (results.finish_shard()) return;
        std::string headline;
        for (const Dataset& d : datasets) {
          headline += fmt::format("{}{}:", headline.empty() ? "" : "; ", d.name);
          for (const auto& [v, paper] : rows) headline += fmt::format(" {} {}", v.name, percent(results.summary(v.name, d.name).cosine_mean));
        }
        results.directory().text("headline.txt", "cosine, P V format behind INT4 Q K: " + headline + "\n");
        results.note(
            "Pipeline: sage2-4b (per-thread INT4 Q, K, smoothed Q+K) with P and V replaced: INT8: P = exp2(s - m + "
            "log2 127) rounded to integers (static scale, as E4M3's 448), per-channel INT8 V, the exact integer "
            "mma.sync s8 (R = the s32 sum); E5M2: P at 448 like E4M3 (E5M2's 2 mantissa bits, not its range, decide "
            "its error), per-channel E5M2 V; E4M3: SageAttention2's choice; FP16: P in [0, 1] cast to fp16, V cast, "
            "mma.sync f16 with fp32 accumulators. Every P V is flushed into the fp32 o per KV block (64 keys). MMA "
            "models of sm_89: MMA-Sim's (published).\n");
        results.write("SageAttention2 Tables 6 and 16: the format of P and V");
      });
}

}  // namespace lowbit::experiments
