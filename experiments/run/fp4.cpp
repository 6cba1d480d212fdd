// lowbit run fp4: SageAttention3's Tables 1a (NVFP4 vs MXFP4) and 1b (P two-level vs direct) on
// the sage3 pipeline: NVFP4 Q, K (smoothed), P, V on the block-scaled mma.sync of sm_120; MXFP4
// puts every operand in 1x32 blocks with E8M0 scales on the mxf4 instruction.
#include <cmath>

#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::experiments {

int run_fp4(int argc, char** argv) {
  const std::string name = "fp4";
  constexpr const char* kMxf4 =
      "mma.sync.aligned.m16n8k64.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0";
  return experiment_main(
      argc, argv, name, "NVFP4 vs MXFP4, P two-level vs direct (SageAttention3 Tables 1a, 1b)",
      {"synthetic", "synthetic-smollm2", "smollm2"}, DatasetSizes{}, nullptr, [&](const CommonOptions& o) {
        const std::vector<Dataset> datasets = load_datasets(o);
        ExperimentResults results(name, o, argc, argv);
        const double nan = std::nan("");
        const std::vector<std::pair<Variant, PaperNumbers>> rows{
            {{"NVFP4, P two-level (SageAttention3)", "sage3", {}},
             {"SageAttention3 Tables 1a, 1b, CogVideoX", 0.9952, 0.077, 0.201, nan, nan, nan}},
            {{"NVFP4, P direct", "sage3", {"p=e2m1:microscale"}},
             {"SageAttention3 Table 1b, CogVideoX", 0.9332, 0.193, 1.103, nan, nan, nan}},
            {{"MXFP4", "sage3",
              {"q=e2m1:mx", "k=e2m1:mx", "v=e2m1:mx", "p=e2m1:mx", std::string("qk=") + kMxf4, std::string("pv=") + kMxf4}},
             {"SageAttention3 Table 1a, CogVideoX", 0.9837, nan, nan, nan, nan, nan}},
        };
        std::vector<Variant> variants;
        for (const auto& [v, paper] : rows) {
          variants.push_back(v);
          results.paper(v.name, paper);
        }
        run_variants(name, variants, datasets, results, o);
        if (results.finish_shard()) return;
        std::string headline;
        for (const Dataset& d : datasets)
          headline += fmt::format("{}{}: NVFP4 two-level {}, direct {}, MXFP4 {}", headline.empty() ? "" : "; ", d.name,
                                  percent(results.summary(rows[0].first.name, d.name).cosine_mean),
                                  percent(results.summary(rows[1].first.name, d.name).cosine_mean),
                                  percent(results.summary(rows[2].first.name, d.name).cosine_mean));
        results.directory().text("headline.txt", "cosine: " + headline + "\n");
        results.note(
            "Pipeline: sage3 (SageAttention3 on sm_120: Q smoothed per block of 128 queries with the qbar.k' "
            "correction, K by its mean; NVFP4 Q, K, V (E2M1 in 1x16 blocks, UE4M3 scales; V along the keys) on the "
            "block-scaled mma.sync m16n8k64; P two-level: per row s_P1 = rowmax / (448 x 6), NVFP4 of P / s_P1, R "
            "times s_P1; 128 x 128 tiles). \"P direct\": NVFP4 of P with no first level. \"MXFP4\": Q, K, V and P in "
            "1x32 blocks with UE8M0 scales (OCP's floor rule) on kind::mxf4. The sm_120 models are MMA-Sim's "
            "(published). The paper gives the worst cases of none of these; its Table 1a gives only the cosine.\n");
        results.write("SageAttention3 Tables 1a and 1b: NVFP4 vs MXFP4, P two-level vs direct");
      });
}

}  // namespace lowbit::experiments
