// lowbit run granularity: SageAttention2's Tables 3 (mean) and 15 (worst): INT4 Q and K, smoothed
// (Q per block, K by its mean) and quantized per token, per thread, per block or per tensor, through
// the whole sage2-4b pipeline: once with P and V in FP16 (the paper's setting: its per-token row
// equals its FP16 row of Table 6) and once with SageAttention2's FP8 P and V.
#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::experiments {

int run_granularity(int argc, char** argv) {
  const std::string name = "granularity";
  return experiment_main(
      argc, argv, name, "INT4 Q, K per token / thread / block / tensor (SageAttention2 Tables 3, 15)",
      {"synthetic", "synthetic-smollm2", "smollm2"}, DatasetSizes{}, nullptr, [&](const CommonOptions& o) {
        const std::vector<Dataset> datasets = load_datasets(o);
        ExperimentResults results(name, o, argc, argv);
        // The paper's numbers: Table 3 (mean over CogVideoX's layers), Table 15 (worst).
        const struct {
          const char* granularity;
          PaperNumbers paper;
        } rows[]{
            {"per-token", {"SageAttention2 Tables 3 (mean) and 15 (worst), CogVideoX", 0.9945, 0.0649, 0.0335, 0.9676, 0.1916, 0.0775}},
            {"per-thread", {"SageAttention2 Tables 3 (mean) and 15 (worst), CogVideoX", 0.9945, 0.0622, 0.0313, 0.9672, 0.1932, 0.0776}},
            {"per-block", {"SageAttention2 Tables 3 (mean) and 15 (worst), CogVideoX", 0.9803, 0.1492, 0.0744, 0.9068, 0.3615, 0.1490}},
            {"per-tensor", {"SageAttention2 Tables 3 (mean) and 15 (worst), CogVideoX", 0.9715, 0.1800, 0.0865, 0.8585, 0.4687, 0.2261}},
        };
        std::vector<Variant> variants;
        for (const auto* pv : {"P, V FP16", "P, V FP8"})
          for (const auto& r : rows) {
            Variant v{fmt::format("{} ({})", r.granularity, pv), "sage2-4b",
                      {fmt::format("q=int4:{}", r.granularity), fmt::format("k=int4:{}", r.granularity)}};
            if (std::string(pv) == "P, V FP16") {
              for (const char* s : {"p=fp16:1", "v=fp16:none", "pv=mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"})
                v.sets.push_back(s);
              results.paper(v.name, r.paper);
            }
            variants.push_back(v);
          }
        run_variants(name, variants, datasets, results, o);
        if (results.finish_shard()) return;
        std::string headline;
        for (const Dataset& d : datasets)
          headline += fmt::format("{}{}: per-token {} per-thread {} per-block {} per-tensor {}", headline.empty() ? "" : "; ",
                                  d.name, percent(results.summary("per-token (P, V FP16)", d.name).cosine_mean),
                                  percent(results.summary("per-thread (P, V FP16)", d.name).cosine_mean),
                                  percent(results.summary("per-block (P, V FP16)", d.name).cosine_mean),
                                  percent(results.summary("per-tensor (P, V FP16)", d.name).cosine_mean));
        results.directory().text("headline.txt", "cosine, INT4 Q K with P V FP16: " + headline + "\n");
        results.note(
            "Pipeline: sage2-4b (SageAttention2-4b on Ada: Q smoothed per block of 128 queries, K by its mean, INT4 Q and "
            "K with the groups of mma.m16n8k64, 4 warps, 128 x 64 tiles), with Q's and K's granularity set per row. "
            "\"P, V FP16\": P in [0, 1] and V cast to fp16, mma.sync f16 with fp32 accumulators; \"P, V FP8\": E4M3 P at "
            "448 and per-channel E4M3 V on the FP22 mma.sync e4m3. MMA models of sm_89 are MMA-Sim's (published).\n");
        results.write("SageAttention2 Tables 3 and 15: INT4 Q, K granularity, whole pipeline");
      });
}

}  // namespace lowbit::experiments
