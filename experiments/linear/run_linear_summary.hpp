// run_linear.cpp's summaries: the rows' statistics per experiment, variant, data set and metric,
// and the Markdown tables made of them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <algorithm>

#include "experiments/linear/run_linear_records.hpp"

namespace lowbit::experiments::run_linear_detail {

// ---- summaries -----------------------------------------------------------------------------------

struct Stat {
  double mean = 0, min = 0, max = 0;
  int count = 0;
};

using StatKey = std::tuple<std::string, std::string, std::string, std::string>;  // experiment, variant, dataset, metric

inline std::map<StatKey, Stat> summarize(const std::vector<Row>& rows) {
  std::map<StatKey, std::vector<double>> values;
  for (const Row& r : rows) values[{r.experiment, r.variant, r.dataset, r.metric}].push_back(r.value);
  std::map<StatKey, Stat> out;
  for (const auto& [key, v] : values) {
    Stat s;
    s.count = int(v.size());
    s.min = *std::min_element(v.begin(), v.end());
    s.max = *std::max_element(v.begin(), v.end());
    for (double x : v) s.mean += x / double(v.size());
    out[key] = s;
  }
  return out;
}

class Tables {
 public:
  Tables(const std::map<StatKey, Stat>& stats, const std::vector<Dataset>& datasets) : stats_(stats) {
    for (const Dataset& d : datasets) datasets_.push_back(d.name);
  }

  const Stat* find(const std::string& experiment, const std::string& variant, const std::string& dataset,
                   const std::string& metric) const {
    const auto it = stats_.find({experiment, variant, dataset, metric});
    return it == stats_.end() ? nullptr : &it->second;
  }

  // Variants of an experiment in the order they first appear.
  std::vector<std::string> variants(const std::string& experiment, const std::vector<std::string>& order) const {
    std::vector<std::string> out;
    for (const std::string& v : order)
      for (const auto& [key, s] : stats_)
        if (std::get<0>(key) == experiment && std::get<1>(key) == v) {
          out.push_back(v);
          break;
        }
    return out;
  }

  std::string hypotheses() const {
    std::string md =
        "## The proposal's hypotheses, measured\n\n"
        "Scores: the inter-sub-chunk blocks of the intra-chunk Q K^T after gating (the quantized part), cosine "
        "similarity against float64; mean and worst over heads and seeds.\n\n"
        "| claim | data | measured: mean [lowest, highest head] | verdict |\n|---|---|---|---|\n";
    const auto cosine_claim = [&](const std::string& claim, const std::string& variant, double threshold, bool above) {
      for (const std::string& d : datasets_) {
        const Stat* s = find("accuracy", variant, d, "scores_cosine");
        if (!s) continue;
        const bool mean_ok = above ? s->mean > threshold : s->mean < threshold;
        const bool all_ok = above ? s->min > threshold : s->max < threshold;
        const std::string verdict = all_ok ? "held on every head" : mean_ok ? "held on average, not on every head" : "failed";
        md += fmt::format("| {} | {} | {:.3f}% [{:.3f}%, {:.3f}%] | {} |\n", claim, d, 100 * s->mean, 100 * s->min,
                          100 * s->max, verdict);
      }
    };
    cosine_claim("INT4 per-thread + smoothing: scores cosine > 99%", "int4-smooth", 0.99, true);
    cosine_claim("INT4 per-thread, no smoothing: scores cosine < 85%", "int4", 0.85, false);
    cosine_claim("INT8 per-thread + smoothing (Hopper's fast path): scores cosine > 99%", "int8-smooth", 0.99, true);
    for (const std::string& d : datasets_) {
      const Stat *raw = find("accuracy", "int4", d, "scores_cosine"), *smooth = find("accuracy", "int4-smooth", d, "scores_cosine");
      if (raw && smooth)
        md += fmt::format("| smoothing removes most INT4 score error | {} | 1 - cos: {:.2e} -> {:.2e} ({:.1f}x less) | {} |\n", d,
                          1 - raw->mean, 1 - smooth->mean, (1 - raw->mean) / (1 - smooth->mean),
                          (1 - raw->mean) > 2 * (1 - smooth->mean) ? "held" : "failed");
    }
    for (const std::string& d : datasets_) {
      const Stat *full = find("ablation", "int4-smooth scores=per-thread", d, "scores_cosine"),
                 *dropped = find("ablation", "int4-smooth row-bias-dropped", d, "scores_cosine");
      if (full && dropped)
        md += fmt::format("| the smoothing correction's row bias vanishes under the gate mask (as under softmax) | {} | "
                          "int4-smooth scores cosine (sweep seeds): both terms {:.3f}%, row bias dropped {:.3f}% [{:.3f}%, {:.3f}%] | {} |\n",
                          d, 100 * full->mean, 100 * dropped->mean, 100 * dropped->min, 100 * dropped->max,
                          (1 - dropped->mean) < 1.5 * (1 - full->mean) ? "held" : "failed: it must be added");
    }
    for (const std::string& d : datasets_) {
      const Stat *bf16 = find("accuracy", "bf16", d, "output_rel_l1"),
                 *prop = find("accuracy", "int4-smooth-fp8", d, "output_rel_l1"),
                 *fp8 = find("accuracy", "bf16-fp8", d, "output_rel_l1");
      if (bf16 && prop && fp8)
        md += fmt::format("| INT4+smoothing+FP8 output close to bf16's | {} | output rel. L1: bf16 {:.2e}, bf16 scores + FP8 P V {:.2e}, "
                          "the proposal {:.2e} ({:.1f}x bf16's) | measured (the proposal sets no bound on the output) |\n",
                          d, bf16->mean, fp8->mean, prop->mean, prop->mean / bf16->mean);
    }
    for (const std::string& d : datasets_) {
      const Stat *state_bf16 = find("accuracy", "bf16", d, "state_rel_l1"), *state_prop = find("accuracy", "int4-smooth-fp8", d, "state_rel_l1");
      if (state_bf16 && state_prop)
        md += fmt::format("| the final state is untouched by the intra-chunk quantization | {} | state rel. L1: bf16 {:.3e}, the proposal {:.3e} | {} |\n",
                          d, state_bf16->mean, state_prop->mean, state_bf16->mean == state_prop->mean ? "held (identical)" : "failed");
    }
    // Gating as regularization: faster forgetting (smaller tau) should not hurt if it bounds the range.
    for (const std::string& d : datasets_) {
      const Stat *fast = nullptr, *slow = nullptr;
      double tau_fast = 0, tau_slow = 0;
      for (const auto& [key, s] : stats_) {
        const auto& [e, v, ds, m] = key;
        if (e != "temperature" || ds != d || m != "scores_cosine" || v.rfind("int4-smooth tau=", 0) != 0) continue;
        const double tau = std::stod(v.substr(v.find('=') + 1));
        if (!fast || tau < tau_fast) fast = &s, tau_fast = tau;
        if (!slow || tau > tau_slow) slow = &s, tau_slow = tau;
      }
      if (fast && slow && tau_fast < tau_slow)
        md += fmt::format("| gating bounds the range (faster forgetting does not hurt INT4) | {} | int4-smooth cosine: tau={} "
                          "{:.3f}%, tau={} {:.3f}% | {} |\n",
                          d, tau_fast, 100 * fast->mean, tau_slow, 100 * slow->mean,
                          fast->mean >= slow->mean ? "held" : "failed: faster gates hurt");
    }
    return md + "\n";
  }

  // Rows: variants; per data set, the metrics' mean (and the worst where asked).
  std::string table(const std::string& title, const std::string& experiment, const std::vector<std::string>& order,
                    const std::vector<std::tuple<std::string, std::string, bool>>& columns) const {
    std::string md = "## " + title + "\n";
    for (const std::string& d : datasets_) {
      std::string body;
      for (const std::string& v : variants(experiment, order)) {
        if (!find(experiment, v, d, "output_rel_l1")) continue;
        body += "| " + v + " |";
        for (const auto& [metric, label, worst] : columns) {
          const Stat* s = find(experiment, v, d, metric);
          const bool cosine = metric.find("cosine") != std::string::npos;
          const auto text = [&](double x) { return cosine ? fmt::format("{:.4f}%", 100 * x) : fmt::format("{:.3e}", x); };
          if (!s) body += " |";
          else if (worst) body += fmt::format(" {} ({}) |", text(s->mean), text(cosine ? s->min : s->max));
          else body += fmt::format(" {} |", text(s->mean));
        }
        body += "\n";
      }
      if (body.empty()) continue;
      md += fmt::format("\n### {}\n\n| variant |", d);
      for (const auto& [metric, label, worst] : columns) md += " " + label + (worst ? ": mean (worst)" : ": mean") + " |";
      md += "\n|---|";
      for (std::size_t i = 0; i < columns.size(); ++i) md += "---|";
      md += "\n" + body;
    }
    return md + "\n";
  }

 private:
  const std::map<StatKey, Stat>& stats_;
  std::vector<std::string> datasets_;
};

}  // namespace lowbit::experiments::run_linear_detail
