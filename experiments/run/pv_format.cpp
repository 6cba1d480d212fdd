// lowbit run pv-format: SageAttention2's Tables 6 (mean) and 16 (worst): the format of P and V
// behind INT4 Q, K (smoothed; per thread, or per token with --qk-granularity): INT8 (P at 127,
// per-channel V, the integer MMA), E5M2 and E4M3 (P at 448, per-channel V, the FP22 mma.sync), FP16
// (P in [0, 1], V cast, fp32 accumulators). The paper does not say how its INT8 P was made, so INT8
// has three more rows, each a candidate for its collapse: P truncated to integers (a C cast) instead
// of rounded, P scaled per block (amax / 127), and both.
#include <algorithm>

#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::experiments {

int run_pv_format(int argc, char** argv) {
  const std::string name = "pv-format";
  int long_keys = 16384;
  std::string qk_granularity = "per-thread";
  return experiment_main(
      argc, argv, name, "P and V in INT8, E5M2, E4M3, FP16 behind INT4 Q, K (SageAttention2 Tables 6, 16)",
      {"synthetic", "synthetic-smollm2", "smollm2"}, DatasetSizes{},
      [&](CLI::App& app) {
        app.add_option("--long-keys", long_keys,
                       "with the synthetic dataset, also 128 queries of it against this many keys (0: none)")
            ->capture_default_str();
        app.add_option("--qk-granularity", qk_granularity,
                       "INT4 Q's and K's scale groups: per-thread (SageAttention2's kernel) or per-token (the paper's "
                       "FP16 row of Table 6 equals its per-token row of Table 3)")
            ->check(CLI::IsMember({"per-thread", "per-token"}))
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
        const PaperNumbers int8{source, 0.7705, 0.5618, 0.5044, 0.1952, 0.9579, 1.4483};
        const auto int8_row = [&](const char* label, const char* p) {
          return std::pair<Variant, PaperNumbers>{
              {label, "sage2-4b", {p, "v=int8:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"}}, int8};
        };
        std::vector<std::pair<Variant, PaperNumbers>> rows{
            int8_row("INT8", "p=int8:127"),
            int8_row("INT8, P truncated", "p=int8:127:toward-zero"),
            int8_row("INT8, P per block", "p=int8:per-block"),
            int8_row("INT8, P per block, truncated", "p=int8:per-block:toward-zero"),
            {{"E5M2", "sage2-4b", {"p=e5m2:448", "v=e5m2:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"}},
             {source, 0.9920, 0.0905, 0.0903, 0.9494, 0.2327, 0.2361}},
            {{"E4M3", "sage2-4b", {}}, {source, 0.9944, 0.0683, 0.0347, 0.9670, 0.1956, 0.0779}},
            {{"FP16", "sage2-4b", {"p=fp16:1", "v=fp16:none", "pv=mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"}},
             {source, 0.9945, 0.0649, 0.0335, 0.9676, 0.1916, 0.0775}},
        };
        std::vector<Variant> variants;
        for (auto& [v, paper] : rows) {
          if (qk_granularity != "per-thread")
            for (const char* t : {"q", "k"}) v.sets.push_back(fmt::format("{}=int4:{}", t, qk_granularity));
          variants.push_back(v);
          results.paper(v.name, paper);
        }
        run_variants(name, variants, datasets, results, o);
        if (results.finish_shard()) return;
        std::string headline;
        for (const Dataset& d : datasets) {
          headline += fmt::format("{}{}:", headline.empty() ? "" : "; ", d.name);
          for (const auto& [v, paper] : rows)
            if (v.name.find(',') == std::string::npos)
              headline += fmt::format(" {} {}", v.name, percent(results.summary(v.name, d.name).cosine_mean));
        }
        results.directory().text("headline.txt",
                                 fmt::format("cosine, P V format behind {} INT4 Q K: {}\n", qk_granularity, headline));
        results.note(fmt::format(
            "Pipeline: sage2-4b ({} INT4 Q, K, smoothed Q+K) with P and V replaced: INT8: P = exp2(s - m + "
            "log2 127) rounded to integers (static scale, as E4M3's 448), per-channel INT8 V, the exact integer "
            "mma.sync s8 (R = the s32 sum); \"P truncated\": the same P rounded toward zero (cvt.rzi: a C cast of "
            "the float), which loses every probability under 1/127 of the row's running maximum and half a code of "
            "each other on average; \"P per block\": P in [0, 1] scaled by its KV block's amax / 127 (one scale per "
            "block of queries and keys, R times it); E5M2: P at 448 like E4M3 (E5M2's 2 mantissa bits, not its range, "
            "decide its error), per-channel E5M2 V; E4M3: SageAttention2's choice; FP16: P in [0, 1] cast to fp16, V "
            "cast, mma.sync f16 with fp32 accumulators. Every P V is flushed into the fp32 o per KV block (64 keys). "
            "MMA models of sm_89: MMA-Sim's (published). The paper's INT8 numbers stand beside each INT8 row: it does "
            "not say which P its INT8 row had.\n",
            qk_granularity));
        results.write(fmt::format("SageAttention2 Tables 6 and 16: the format of P and V ({} INT4 Q, K)", qk_granularity));
      });
}

}  // namespace lowbit::experiments
