#include "experiments/run/registry.hpp"

#if defined(LOWBIT_HAVE_EXP_LINEAR)
#include "experiments/linear/run_linear.hpp"
#endif

namespace lowbit::experiments {

const std::vector<Experiment>& experiment_registry() {
  static const std::vector<Experiment> list{
      {"granularity", "INT4 Q, K per token / thread / block / tensor, with P, V in FP16 and in FP8 (SageAttention2 Tables 3, 15)",
       &run_granularity},
      {"granularity-qk",
       "the same and the smoothing methods with QK^T alone quantized, P, V float64, on the synthetic generator's knobs "
       "(SageAttention2 Tables 3, 9; results/granularity)",
       &run_granularity_qk, false},
      {"smoothing", "none, Hadamard, SmoothAttn, smooth K, smooth Q, smooth Q+K at per-thread INT4 (SageAttention2 Tables 9, 17)",
       &run_smoothing},
      {"pv-format", "P and V in INT8, E5M2, E4M3, FP16 behind INT4 Q, K (SageAttention2 Tables 6, 16)", &run_pv_format},
      {"accumulator", "FP22 vs fp32 P V accumulation, two-level or in place, smooth V, 1K to 32K keys (SageAttention2 §3.4, Table 13)",
       &run_accumulator},
      {"fp4", "NVFP4 vs MXFP4, P two-level vs direct (SageAttention3 Tables 1a, 1b)", &run_fp4},
      {"backward", "SageBwd's INT8 backward with dO V^T in FP16 or INT8: dQ, dK, dV against float64 (SageAttention3 Table 1c)",
       &run_backward},
      {"attribution", "each stage's share of the output error: one at a time, Shapley values, per-stage budget", &run_attribution},
      {"formats", "any Q/K and P/V format in place of INT4/E4M3 (--qk-format, --pv-format)", &run_formats},
#if defined(LOWBIT_HAVE_EXP_LINEAR)
      {"linear", "INT4/FP8 smoothing for chunkwise linear attention (GLA)", &run_linear},
#endif
  };
  return list;
}

}  // namespace lowbit::experiments
