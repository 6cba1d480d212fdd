// The pipeline variants the `lowbit run` experiments build on sage2-4b (its SmoothAttn and Hadamard
// baselines included), as their sources spell them (a preset and --set overrides), and their
// Hopper twins: the same pipeline with arch=sm_90 (the stage `arch` selects the instruction models;
// the GPU runs sm_90's arithmetic, so a kernel is compared with the twin, not with the Ada preset).
// Copied from experiments/run/{granularity,smoothing,pv_format,formats,accumulator}.cpp, whose
// variants are built inside their runs; tests/attention_gpu/test_variant_host.cpp checks which of
// them the family supports.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "emulation/attention/pipeline.hpp"

namespace lowbit::tests {

struct VariantSpec {
  std::string name;
  std::string preset;
  std::vector<std::string> sets;
};

inline std::vector<VariantSpec> sage2_4b_experiment_variants() {
  const std::string pv_f16 = "pv=mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32";
  const std::string pv_s8 = "pv=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
  std::vector<VariantSpec> all;
  for (const char* g : {"per-token", "per-thread", "per-block", "per-tensor"}) {
    const std::vector<std::string> qk{std::string("q=int4:") + g, std::string("k=int4:") + g};
    all.push_back({std::string("granularity: ") + g + " (P, V FP8)", "sage2-4b", qk});
    std::vector<std::string> fp16 = qk;
    fp16.insert(fp16.end(), {"p=fp16:1", "v=fp16:none", pv_f16});
    all.push_back({std::string("granularity: ") + g + " (P, V FP16)", "sage2-4b", fp16});
  }
  all.push_back({"smoothing: None", "sage2-4b", {"smooth-q=off", "smooth-k=off"}});
  all.push_back({"smoothing: HadmdAttn", "hadamard", {}});
  all.push_back({"smoothing: SmoothAttn", "smoothattn", {}});
  all.push_back({"smoothing: Smooth K", "sage2-4b", {"smooth-q=off"}});
  all.push_back({"smoothing: Smooth Q", "sage2-4b", {"smooth-k=off"}});
  all.push_back({"smoothing: Smooth Q+K (SageAttn2-4b)", "sage2-4b", {}});
  all.push_back({"pv-format: INT8", "sage2-4b", {"p=int8:127", "v=int8:per-channel", pv_s8}});
  all.push_back({"pv-format: INT8, P truncated", "sage2-4b", {"p=int8:127:toward-zero", "v=int8:per-channel", pv_s8}});
  all.push_back({"pv-format: INT8, P per block", "sage2-4b", {"p=int8:per-block", "v=int8:per-channel", pv_s8}});
  all.push_back({"pv-format: INT8, P per block, truncated", "sage2-4b",
                 {"p=int8:per-block:toward-zero", "v=int8:per-channel", pv_s8}});
  all.push_back({"pv-format: E5M2", "sage2-4b",
                 {"p=e5m2:448", "v=e5m2:per-channel", "pv=mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"}});
  all.push_back({"pv-format: FP16", "sage2-4b", {"p=fp16:1", "v=fp16:none", pv_f16}});
  all.push_back({"formats: Q,K int8 | P,V e4m3 (products of values)", "sage2-4b",
                 {"q=int8:per-thread:127", "k=int8:per-thread:127", "qk=fp32-fma:mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32",
                  "p=e4m3:448", "v=e4m3:per-channel:448", "pv=wide:mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"}});
  for (bool in_place : {false, true})
    for (bool smooth_v : {false, true}) {
      VariantSpec v{std::string("accumulator: Table 13, sage2-4b") + (in_place ? ", FP22 in place" : "") + ", smooth V " +
                        (smooth_v ? "on" : "off"),
                    "sage2-4b",
                    {smooth_v ? "smooth-v=on" : "smooth-v=off"}};
      if (in_place) v.sets.push_back("accumulation=in-place");
      all.push_back(v);
    }
  // Not an experiment's: the family's INT8 QK path, MUFU.EX2, descending KV blocks, a flush per MMA and
  // a float P per block.
  all.push_back({"family: INT8 Q, K (mma.sync s8)", "sage2-4b",
                 {"q=int8:per-thread", "k=int8:per-thread", "qk=mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"}});
  all.push_back({"family: exp2 sm90-ex2, KV blocks descending", "sage2-4b", {"exp2=sm90-ex2", "kv-order=descending"}});
  all.push_back({"family: a fresh P V accumulator per MMA", "sage2-4b", {"accumulation=two-level:1"}});
  all.push_back({"family: E4M3 P per block", "sage2-4b", {"p=e4m3:per-block"}});
  return all;
}

// The variant's pipeline for heads of dimension head_dim, and its Hopper twin (arch=sm_90).
inline attention::Pipeline variant_pipeline(const VariantSpec& v, int head_dim, bool hopper_twin) {
  attention::Pipeline p = attention::preset(v.preset, head_dim);
  std::vector<std::string> sets = v.sets;
  if (hopper_twin) sets.push_back("arch=sm_90");
  for (const std::string& s : sets)
    if (auto why = attention::set_stage(p, s)) throw std::invalid_argument(v.name + ": " + s + ": " + *why);
  return p;
}

}  // namespace lowbit::tests
