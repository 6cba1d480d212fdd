// lowbit run backward: SageAttention3's Table 1c: SageBwd's 8-bit forward and backward pass
// (emulation/attention/backward.hpp) with dO V^T in FP16 (the paper's choice) or INT8, and every
// product in FP16 as the baseline: the output O and the gradients dQ, dK, dV against float64
// (numerics/attention_backward_reference.hpp). dO is Gaussian (seeded, rounded to fp16): the
// datasets hold no gradients. --device gpu runs each variant on the GPU beside its emulation
// (kernels/attention/sage_bwd_gpu.hpp, through harness.hpp's evaluate_backward), every fp32 bit of
// O, LSE, dQ, dK and dV compared (gpu-check.json).
#include <optional>
#include <random>

#include <fmt/format.h>

#include "emulation/attention/backward.hpp"
#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"
#include "numerics/attention_backward_reference.hpp"

namespace lowbit::experiments {
namespace {

Tensor4 gaussian_like(const Tensor4& shape, int dim, std::uint64_t seed) {
  Tensor4 t(shape.batch, shape.heads, shape.tokens, dim);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  for (float& x : t.values) x = float(_Float16(normal(rng)));
  return t;
}

}  // namespace

int run_backward(int argc, char** argv) {
  const std::string name = "backward";
  return experiment_main(
      argc, argv, name, "SageBwd's INT8 backward, dO V^T in FP16 or INT8 (SageAttention3 Table 1c)", {"synthetic", "smollm2"},
      DatasetSizes{}, nullptr, [&](const CommonOptions& o) {
        const std::vector<Dataset> datasets = load_datasets(o);
        ExperimentResults results(name, o, argc, argv);
        const std::vector<std::pair<std::string, std::string>> variants{
            {"sagebwd", "SageBwd (dO V^T FP16)"}, {"sagebwd-int8-dp", "dO V^T INT8"}, {"fp16", "FP16 (every product)"}};
        const double nan = std::nan("");
        results.paper("SageBwd (dO V^T FP16): dQ", {"SageAttention3 Table 1c", 0.9977, 0.039, 0.692, nan, nan, nan});
        results.paper("dO V^T INT8: dQ", {"SageAttention3 Table 1c", 0.9747, 0.171, 2.440, nan, nan, nan});
        std::size_t steps = 0;
        for (const Dataset& d : datasets) steps += parts_of(d).size() * (variants.size() + 1);
        Progress progress(name, int(steps));
        results.directory().run().seeds["dO"] = o.seed;
        for (const Dataset& d : datasets) {
          // dO of the whole dataset, so that each part's is the same whichever parts run.
          const Tensor4 d_out = gaussian_like(d.q, d.v.dim, o.seed * 0x9E3779B97F4A7C15ull + 7);
          struct Part {
            HeadRange range;
            std::optional<ReferenceGradients> reference;  // once, when a variant on the part runs here
          };
          std::vector<Part> parts;
          for (const HeadRange& r : parts_of(d)) parts.push_back({r, std::nullopt});
          for (const auto& [preset, label] : variants) {
            const attention::SageBwdConfig config = attention::sagebwd_preset(preset);
            const auto op = [](attention::BackwardOperands b) {
              return b == attention::BackwardOperands::fp16 ? "fp16" : "int8 per block";
            };
            results.directory().run().formats[label] = {{"preset", preset}, {"S=QK^T", op(config.qk)}, {"O+=PV", op(config.pv)},
                                                        {"dV+=P^T dO", op(config.dv)}, {"dP=dO V^T", op(config.dp)},
                                                        {"dQ+=dS K", op(config.dq)}, {"dK+=dS^T Q", op(config.dk)},
                                                        {"tiles", fmt::format("{} x {}", config.block_q, config.block_kv)}};
            for (Part& pt : parts) {
              const std::string where = part_name(d, pt.range);
              const auto r = results.item(d, label + " on " + where, [&] {
                const Dataset dp = part(d, pt.range);
                const Tensor4 dp_out = head_range(d_out, pt.range.first, pt.range.count);
                if (!pt.reference) {
                  pt.reference = reference_attention_backward(dp.q, dp.k, dp.v, dp_out, {.causal = dp.causal, .threads = o.threads});
                  progress.step("float64 gradients of " + where);
                }
                ItemResult item;
                for (auto& [tensor, e] : evaluate_backward(config, dp, dp_out, *pt.reference, o))
                  item.evaluations.emplace_back(label + ": " + tensor, std::move(e));
                return item;
              });
              if (!r) {
                progress.skip();
                continue;
              }
              progress.step(fmt::format("{} on {}: dQ cosine {}", label, where,
                                        percent(results.summary(label + ": dQ", d.name).cosine_mean, 3)));
            }
          }
          for (const Part& pt : parts)
            if (!pt.reference) progress.skip();  // every variant on it ran in other shards, or is merged
        }
        if (results.finish_shard()) return;
        std::string headline;
        for (const Dataset& d : datasets)
          headline += fmt::format("{}{}: dQ cosine dO V^T FP16 {} vs INT8 {}", headline.empty() ? "" : "; ", d.name,
                                  percent(results.summary("SageBwd (dO V^T FP16): dQ", d.name).cosine_mean),
                                  percent(results.summary("dO V^T INT8: dQ", d.name).cosine_mean));
        results.directory().text("headline.txt", headline + "\n");
        results.intro(
            "Mean and worst over the heads (and layers) of each dataset of the forward output O and the gradients dQ, "
            "dK, dV against float64 attention and its gradients (metrics.csv has every head). p99 err/RMS: the 99th "
            "percentile of |error| over the RMS of the head's float64 tensor, mean over heads.\n");
        results.note(
            "Emulation (emulation/attention/backward.hpp): SageBwd's forward (INT8 Q, K, V per 64 x 64 tile, P per row "
            "of its tile, exact integer sums dequantized once, fp32 online softmax with exp2 correctly rounded) and "
            "backward (FlashAttention-2's order: per KV tile, per Q tile: S and P = exp2(S - L) recomputed, dV += P^T "
            "dO, dP = dO V^T, dS = P (dP - D), dQ += dS K, dK += dS^T Q; INT8 per tile except dO V^T), dO V^T in FP16 "
            "through the f16 mma.sync (sm_89, MMA-Sim's model) or INT8. \"FP16 (every product)\" casts every operand "
            "to fp16 on that instruction. dO: Gaussian, rounded to fp16 (seed in provenance.json). Reference: float64 "
            "attention and its gradients.\n");
        if (o.on_gpu())
          results.note(
              "\nOn the GPU (kernels/attention/sage_bwd_gpu.hpp; the FP16 variants as their Hopper twins, arch=sm_90, "
              "the GPU's f16 mma.sync): the GPU table's output codes of a variant's O, dQ, dK and dV rows are those "
              "tensors' fp32 values, its LSE values O's, each compared bit for bit with the emulation's.\n");
        results.write("SageAttention3 Table 1c: SageBwd's gradients, dO V^T in FP16 or INT8");
      });
}

}  // namespace lowbit::experiments
