// lowbit run formats: any number format in place of SageAttention2-4b's INT4 Q, K or E4M3 P, V,
// including formats no GPU has (eXmY, P3109, intN): the path to explore formats without hardware.
// Q and K keep the per-thread groups of mma.m16n8k64 (scale: the group's amax to the format's
// largest value, at most 2^16 for floating formats); P keeps a static scale at that value, V
// per-channel scales. No
// instruction multiplies these formats, so every variant, the INT4/E4M3 one included, multiplies the
// operands' values: exact products summed in fp32 (--pv-accumulator fp22: the FP22 accumulator of
// the E4M3 mma.sync on the values instead). The sage2-4b row is the real pipeline, its MMA models.
#include <algorithm>

#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::experiments {
namespace {

constexpr const char* kQkInstruction = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32";
constexpr const char* kPvInstruction = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";

// A format's largest value, the code every scale maps the amax to (P: 1), capped for floating
// formats at 2^16: beyond it the pipeline's fp32 scales (amax / MAX) underflow and P's fp32 row
// sums overflow (bf16's P at 3.4e38 makes every output NaN); a power-of-two scale leaves a floating
// format's relative precision as it is. Integer formats keep theirs (a cap would drop bits).
constexpr double kFloatTargetCap = 65536.0;  // 2^16, above fp16's 65504

struct CheckedFormat {
  std::string name;
  double target;
};

CheckedFormat checked_format(const std::string& spec) {
  const ParsedFormat f = parse_format(spec);
  if (!f.format) throw std::invalid_argument("format '" + spec + "': " + f.error);
  const double max = max_finite(*f.format);
  if (max < 1) throw std::invalid_argument("format '" + spec + "': its largest value is below 1");
  return {format_name(*f.format), f.format->is_integer() ? max : std::min(max, kFloatTargetCap)};
}

}  // namespace

int run_formats(int argc, char** argv) {
  const std::string name = "formats";
  std::vector<std::string> qk_formats, pv_formats;
  std::string accumulator = "exact";
  return experiment_main(
      argc, argv, name, "any Q/K and P/V format in place of INT4/E4M3 (--qk-format, --pv-format)", {"synthetic", "smollm2"},
      DatasetSizes{},
      [&](CLI::App& app) {
        app.add_option("--qk-format", qk_formats,
                       "Q and K formats (comma-separated; any `lowbit format` spec: e3m4, int6, p3109:k=8:p=4, ...); "
                       "with --pv-format: every pairing")
            ->delimiter(',');
        app.add_option("--pv-format", pv_formats, "P and V formats (comma-separated)")->delimiter(',');
        app.add_option("--pv-accumulator", accumulator,
                       "P V sums: exact (fp32 fmas of exact products) or fp22 (the E4M3 mma.sync's FP22 accumulation)")
            ->check(CLI::IsMember({"exact", "fp22"}))
            ->capture_default_str();
      },
      [&](const CommonOptions& o) {
        const std::vector<Dataset> datasets = load_datasets(o);
        ExperimentResults results(name, o, argc, argv);
        const std::string pv_product = (accumulator == "exact" ? "pv=fp32-fma:" : "pv=wide:") + std::string(kPvInstruction);
        const auto variant = [&](const std::string& qk, const std::string& pv) {
          const CheckedFormat q = checked_format(qk), p = checked_format(pv);
          return Variant{fmt::format("Q,K {} | P,V {}", q.name, p.name), "sage2-4b",
                         {fmt::format("q={}:per-thread:{}", q.name, q.target), fmt::format("k={}:per-thread:{}", q.name, q.target),
                          std::string("qk=fp32-fma:") + kQkInstruction, fmt::format("p={}:{}", p.name, p.target),
                          fmt::format("v={}:per-channel:{}", p.name, p.target), pv_product}};
        };
        std::vector<Variant> variants{{"sage2-4b (INT4, E4M3 on the MMA models)", "sage2-4b", {}}};
        if (qk_formats.empty() && pv_formats.empty()) {
          for (const char* f : {"int4", "int8", "e2m1", "e2m3", "e3m2", "e4m3", "e5m2"}) variants.push_back(variant(f, "e4m3"));
          for (const char* f : {"e5m2", "e3m4", "p3109:k=8:p=4", "e2m3", "e3m2", "e2m1", "int8"}) variants.push_back(variant("int4", f));
        } else {
          if (qk_formats.empty()) qk_formats = {"int4"};
          if (pv_formats.empty()) pv_formats = {"e4m3"};
          variants.push_back(variant("int4", "e4m3"));
          for (const auto& q : qk_formats)
            for (const auto& p : pv_formats)
              if (!(checked_format(q).name == "int4" && checked_format(p).name == "e4m3")) variants.push_back(variant(q, p));
        }
        run_variants(name, variants, datasets, results, o);
        if (results.finish_shard()) return;
        std::string headline;
        for (const Dataset& d : datasets) {
          const Variant* best = nullptr;
          for (const Variant& v : variants)
            if (v.name.rfind("Q,K", 0) == 0 &&
                (!best || results.summary(v.name, d.name).cosine_mean > results.summary(best->name, d.name).cosine_mean))
              best = &v;
          headline += fmt::format("{}{}: best {} {}", headline.empty() ? "" : "; ", d.name, best->name,
                                  percent(results.summary(best->name, d.name).cosine_mean));
        }
        results.directory().text("headline.txt", "cosine: " + headline + "\n");
        results.note(fmt::format(
            "Every \"Q,K | P,V\" variant: sage2-4b's smoothing and tiling; Q, K quantized per thread (groups of {}) to the "
            "named format with the group's amax at MAX, multiplied as values (exact products, fp32 sums); "
            "P = exp2(s - m + log2 MAX), cast (nearest even, saturating); V per channel, its amax at MAX; MAX is "
            "the format's largest value, for floating formats at most 2^16 (wider ranges would underflow the fp32 "
            "scales and overflow P's fp32 row sums; a power-of-two scale keeps a floating format's precision); P V products of values summed {}. So the rows differ in the formats only; the "
            "first row is the hardware pipeline (INT4 on the integer MMA, E4M3 on the FP22 mma.sync).\n",
            kQkInstruction,
            accumulator == "exact" ? "in fp32 (fmas)" : std::string("by the FP22 accumulation of ") + kPvInstruction));
        results.write("Formats in place of INT4 (Q, K) and E4M3 (P, V)");
      });
}

}  // namespace lowbit::experiments
