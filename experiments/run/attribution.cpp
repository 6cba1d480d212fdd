// lowbit run attribution: where a quantized kernel's error comes from. The error sources of a
// pipeline (default sage2-8b and sage3) are switched on (as the preset has them) or off (exact:
// fp32, no rounding) in every combination, each combination run on the datasets; then for each
// source (numerics/attribution.hpp)
//   alone     its error injected into the otherwise exact pipeline (the per-stage error budget),
//   Shapley   its average marginal effect over every order of switching the sources on,
//   removed   what switching it off in the full pipeline saves,
// of the output's mean squared error (MSE; errors from independent sources add in it), relative L1
// and 1 - cosine, each the mean over heads.
//
// The sources: q, k, v (the operand's quantizer: format, scale groups, scale rule; off: fp32),
// p (P's format and scale; off: fp32), accumulator (the QK and PV instructions' sums: their
// chunks, truncation, rounding; off: fp32 fmas of exact products), exp2 (the polynomial; off:
// correctly rounded), output (the output format; off: fp32). With an operand off, the products
// run on values: the instruction's accumulation on them (wide:) when the accumulator is on, fp32
// fmas (fp32-fma:) when off, so every combination runs and the full one is the preset itself.
// Smoothing, tiling and block orders stay the preset's in every combination. A source the preset
// does not have (exp2 already exact, fp32 output) is left out.
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"
#include "numerics/attribution.hpp"

namespace lowbit::experiments {
namespace {

const std::vector<std::string> kSources{"q", "k", "p", "v", "accumulator", "exp2", "output"};

// The --set assignments of a combination of sources switched on (bit i: sources[i]).
std::vector<std::string> combination(const attention::Pipeline& full, const std::vector<std::string>& sources,
                                     unsigned mask) {
  const auto on = [&](const std::string& s) {
    for (std::size_t i = 0; i < sources.size(); ++i)
      if (sources[i] == s) return bool(mask >> i & 1);
    return true;  // a source left out stays as the preset has it
  };
  std::vector<std::string> sets;
  if (!on("q")) sets.push_back("q=fp32:none");
  if (!on("k")) sets.push_back("k=fp32:none");
  if (!on("p"))
    sets.push_back(fmt::format("p=fp32:log2={}", full.p.scale == attention::PScale::static_exponent ? full.p.log2_scale : 0.0f));
  if (!on("v")) sets.push_back("v=fp32:none");
  const bool accumulator = on("accumulator");
  if (!(on("q") && on("k") && accumulator)) {
    const bool integer = full.qk_instruction().atom.d == formats::s32;  // integer sums are exact either way
    sets.push_back((accumulator && !integer ? "qk=wide:" : "qk=fp32-fma:") + full.qk.instruction);
  }
  if (!(on("p") && on("v") && accumulator)) sets.push_back((accumulator ? "pv=wide:" : "pv=fp32-fma:") + full.pv.instruction);
  if (!on("exp2")) sets.push_back("exp2=exact");
  if (!on("output")) sets.push_back("output=fp32");
  return sets;
}

std::string combination_name(const std::string& pipeline, const std::vector<std::string>& sources, unsigned mask) {
  if (mask == 0) return pipeline + ": exact";
  if (mask == (1u << sources.size()) - 1) return pipeline + ": all (the preset)";
  std::string s;
  for (std::size_t i = 0; i < sources.size(); ++i)
    if (mask >> i & 1) s += (s.empty() ? "" : "+") + sources[i];
  return pipeline + ": " + s;
}

}  // namespace

int run_attribution(int argc, char** argv) {
  const std::string name = "attribution";
  std::vector<std::string> pipelines{"sage2-8b", "sage3"}, sources = kSources;
  DatasetSizes sizes;
  sizes.synthetic_heads = 2;
  sizes.synthetic_tokens = 512;
  sizes.real_heads = {0};
  sizes.real_tokens = 512;
  return experiment_main(
      argc, argv, name, "each stage's share of the output error: alone, Shapley values, removed",
      {"synthetic", "smollm2"}, sizes,
      [&](CLI::App& app) {
        std::vector<std::string> presets;
        for (const auto& p : attention::preset_list()) presets.emplace_back(p.name);
        app.add_option("--pipelines", pipelines, "presets to attribute")->delimiter(',')->check(CLI::IsMember(presets))->capture_default_str();
        app.add_option("--sources", sources, "error sources switched (2^n runs per pipeline and dataset)")
            ->delimiter(',')
            ->check(CLI::IsMember(kSources))
            ->capture_default_str();
      },
      [&](const CommonOptions& o) {
        const std::vector<Dataset> datasets = load_datasets(o);
        ExperimentResults results(name, o, argc, argv);
        // The sweep: every combination of every preset on every dataset; v(S) per metric: the mean over heads.
        struct Values {
          std::vector<double> mse, l1, one_minus_cos;
        };
        std::map<std::pair<std::string, std::string>, Values> sums;  // (preset, dataset)
        std::map<std::string, std::vector<std::string>> sources_of;     // the sources each preset has
        std::vector<std::string> shown;
        nlohmann::json sources_json = nlohmann::json::object();
        for (const std::string& preset : pipelines) {
          std::vector<std::string>& mine = sources_of[preset];
          for (const std::string& s : sources) {
            const attention::Pipeline full = attention::preset(preset, datasets.front().q.dim);
            if (s == "exp2" && full.exponential.exact) continue;
            if (s == "output" && full.output == formats::fp32) continue;
            mine.push_back(s);
          }
          sources_json[preset] = mine;
          const unsigned combos = 1u << mine.size();
          std::size_t steps = 0;
          for (const Dataset& d : datasets) steps += combos * parts_of(d).size();
          Progress progress(name + " " + preset, int(steps));
          References references(o.threads);
          for (const Dataset& d : datasets) {
            const attention::Pipeline full = attention::preset(preset, d.q.dim);
            const std::vector<HeadRange> ranges = parts_of(d);
            std::vector<Dataset> parts;
            for (const HeadRange& r : ranges) parts.push_back(part(d, r));
            Values& v_of = sums[{preset, d.name}];
            for (auto* v : {&v_of.mse, &v_of.l1, &v_of.one_minus_cos}) v->assign(combos, 0.0);
            const double heads = d.q.heads;
            for (unsigned mask = 0; mask < combos; ++mask) {
              const Variant v{combination_name(preset, mine, mask), preset, combination(full, mine, mask)};
              const attention::Pipeline p = build(v, d.q.dim, d.v.dim);
              results.record_pipeline(v.name, p);
              if (std::popcount(mask) <= 1 || std::popcount(mask) >= int(mine.size()) - 1)
                if (std::find(shown.begin(), shown.end(), v.name) == shown.end()) shown.push_back(v.name);
              for (std::size_t i = 0; i < parts.size(); ++i) {
                const std::string where = part_name(d, ranges[i]);
                const auto r = results.item(d, v.name + " on " + where, [&] {
                  return ItemResult{{{v.name, evaluate(p, parts[i], references.of(parts[i]), o)}}, {}};
                });
                if (!r) {
                  progress.skip();
                  continue;
                }
                for (const HeadError& h : r->evaluations.front().second.heads) {
                  v_of.mse[mask] += h.metrics.rmse * h.metrics.rmse / heads;
                  v_of.l1[mask] += h.metrics.relative_l1 / heads;
                  v_of.one_minus_cos[mask] += (1 - h.metrics.cosine) / heads;
                }
                progress.step(fmt::format("{} on {}: MSE {:.4g} so far", v.name, where, v_of.mse[mask]));
              }
            }
          }
        }
        if (results.finish_shard()) return;

        std::string csv = "pipeline,dataset,metric,factor,added,shapley,removed,total,exact\n";
        std::string tables, headline;
        for (const std::string& preset : pipelines) {
          const std::vector<std::string>& mine = sources_of.at(preset);
          const unsigned combos = 1u << mine.size();
          for (const Dataset& d : datasets) {
            const auto& [mse, l1, one_minus_cos] = sums.at({preset, d.name});
            tables += fmt::format("\n### {} on {}\n\nOutput MSE {:.4g} (exact pipeline: {:.3g}), relative L1 {:.4f}, "
                                  "1 - cosine {:.3g}. Shares of the MSE above the exact pipeline's, in %; relative L1 "
                                  "alone and by Shapley value.\n\n",
                                  preset, d.name, mse[combos - 1], mse[0], l1[combos - 1], one_minus_cos[combos - 1]);
            tables += "| source | alone (budget) | Shapley | removed | rel L1 alone | rel L1 Shapley |\n|---|---|---|---|---|---|\n";
            const Attribution a_mse = attribute(mse), a_l1 = attribute(l1), a_cos = attribute(one_minus_cos);
            const double total = mse[combos - 1] - mse[0];
            double sum_alone = 0;
            for (std::size_t i = 0; i < mine.size(); ++i) {
              tables += fmt::format("| {} | {:.1f} | {:.1f} | {:.1f} | {:.4f} | {:.4f} |\n", mine[i], 100 * a_mse.added[i] / total,
                                    100 * a_mse.shapley[i] / total, 100 * a_mse.removed[i] / total, a_l1.added[i],
                                    a_l1.shapley[i]);
              sum_alone += a_mse.added[i];
            }
            tables += fmt::format("| sum | {:.1f} | 100.0 | | | |\n", 100 * sum_alone / total);
            const auto largest = std::max_element(a_mse.shapley.begin(), a_mse.shapley.end()) - a_mse.shapley.begin();
            headline += fmt::format("{}{} on {}: {} {:.0f}% of the MSE", headline.empty() ? "" : "; ", preset, d.name,
                                    mine[std::size_t(largest)], 100 * a_mse.shapley[std::size_t(largest)] / total);
            for (const auto& [metric, a, values] :
                 {std::tuple{"mse", &a_mse, &mse}, std::tuple{"rel_l1", &a_l1, &l1}, std::tuple{"one_minus_cosine", &a_cos, &one_minus_cos}})
              for (std::size_t i = 0; i < mine.size(); ++i)
                csv += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n", preset, csv_field(d.name), metric, mine[i],
                                   a->added[i], a->shapley[i], a->removed[i], (*values)[combos - 1] - (*values)[0], (*values)[0]);
          }
        }
        results.directory().csv("attribution.csv", csv);
        results.directory().json("plot_variants.json", shown);
        results.table_variants(shown);
        results.directory().run().config["sources"] = sources_json;

        results.directory().text("headline.txt", "largest Shapley share: " + headline + "\n");
        results.note(
            "Sources: q, k, v: the operand's quantizer (off: fp32); p: P's format and scale (off: fp32 at the same "
            "static scale); accumulator: the QK and PV instructions' sums (off: fp32 fmas of the exact products; on "
            "with an operand off: the instruction's accumulation on fp32 values, pv=wide:); exp2: the contract's "
            "polynomial (off: correctly rounded); output: the output format (off: fp32). \"alone\" is the per-stage "
            "error budget (one source injected into the exact pipeline); Shapley values sum to the full pipeline's "
            "error above the exact one; \"removed\" is what switching the source off in the full pipeline saves. When "
            "the \"alone\" column sums to about 100%, the sources' errors are independent and add in the MSE; above "
            "or below, they interact. attribution.csv holds all three for MSE, relative L1 and 1 - cosine; "
            "metrics.csv every combination and head.\n");
        results.write("Error attribution: each stage's share of the output error", tables);
      });
}

}  // namespace lowbit::experiments
