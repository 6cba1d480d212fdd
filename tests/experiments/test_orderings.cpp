// The orderings the experiments report, pinned where they hold on 5 synthetic seeds and on the
// committed SmolLM2 sample: each experiment runs as `lowbit run NAME` runs it (its entry point,
// small sizes), and its summary.csv is read back. An ordering that fails on one seed or on the
// real sample is not claimed (results/experiments/README.md says which ones do not hold).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "experiments/run/registry.hpp"
#include "tests/cli_run.hpp"

namespace fs = std::filesystem;
using namespace lowbit::experiments;

namespace {

struct Row {
  double cosine_mean, rel_l1_mean;
};
using Summary = std::map<std::pair<std::string, std::string>, Row>;  // (variant, dataset)

using lowbit::testing::csv_fields;

Summary read_summary(const fs::path& file) {
  std::ifstream in(file);
  REQUIRE(in);
  Summary s;
  std::string line;
  std::vector<std::string> header;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = csv_fields(line);
    if (header.empty()) {
      header = f;
      continue;
    }
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size() && i < f.size(); ++i) row[header[i]] = f[i];
    s[{row["variant"], row["dataset"]}] = {std::stod(row["cosine_mean"]), std::stod(row["rel_l1_mean"])};
  }
  REQUIRE_FALSE(s.empty());
  return s;
}

// Runs experiment `name` with `args` into a fresh folder, returns its summary.
Summary run(const std::string& name, std::vector<std::string> args) {
  const fs::path out = fs::path(LOWBIT_TEST_OUT) / (name + "-" + std::to_string(std::hash<std::string>{}(
                                                                      [&] {
                                                                        std::string s;
                                                                        for (const auto& a : args) s += a + " ";
                                                                        return s;
                                                                      }())));
  fs::remove_all(out);
  args.insert(args.begin(), "lowbit run " + name);
  args.insert(args.end(), {"--out", out.string(), "--threads", "2"});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  const Experiment* e = nullptr;
  for (const auto& x : experiment_registry())
    if (x.name == name) e = &x;
  REQUIRE(e != nullptr);
  INFO("lowbit run " << name);
  REQUIRE(e->run(int(argv.size()), argv.data()) == 0);
  return read_summary(out / "summary.csv");
}

// The datasets: 5 synthetic seeds (2 heads x 512 tokens) and the SmolLM2 sample (its 4 layers,
// every head, first 512 tokens).
std::vector<std::pair<std::string, Summary>> runs(const std::string& name, const std::vector<std::string>& extra = {}) {
  std::vector<std::pair<std::string, Summary>> out;
  for (int seed = 1; seed <= 5; ++seed) {
    std::vector<std::string> args{"--datasets", "synthetic", "--seed", std::to_string(seed), "--heads", "2", "--tokens", "512"};
    args.insert(args.end(), extra.begin(), extra.end());
    out.emplace_back("synthetic", run(name, args));
  }
  std::vector<std::string> args{"--datasets", "smollm2", "--tokens", "512"};
  args.insert(args.end(), extra.begin(), extra.end());
  out.emplace_back("smollm2", run(name, args));
  return out;
}

// better's cosine is above worse's in every run.
void require_better(const std::vector<std::pair<std::string, Summary>>& all, const std::string& better, const std::string& worse) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& [dataset, s] = all[i];
    INFO(better << " vs " << worse << " on " << dataset << " (run " << i << ")");
    REQUIRE(s.count({better, dataset}));
    REQUIRE(s.count({worse, dataset}));
    CHECK(s.at({better, dataset}).cosine_mean > s.at({worse, dataset}).cosine_mean);
  }
}

}  // namespace

// Not pinned, because they fail on a synthetic seed (results/experiments/README.md): smooth Q
// over smooth K (seed 3: 99.55% vs 99.60%), HadmdAttn over none (seed 2), SmoothAttn over none
// (seeds 1, 2, 3, 5).
TEST_CASE("smoothing: smooth Q+K beats every other method, smooth Q and smooth K each beat none",
          "[experiments][orderings]") {
  const auto all = runs("smoothing");
  for (const char* other : {"None", "HadmdAttn", "SmoothAttn", "Smooth K", "Smooth Q"})
    require_better(all, "Smooth Q+K (SageAttn2-4b)", other);
  for (const char* other : {"Smooth K", "Smooth Q"}) require_better(all, other, "None");
}

TEST_CASE("granularity: per token > per thread > per block > per tensor, with P and V in FP16 and in FP8",
          "[experiments][orderings]") {
  const auto all = runs("granularity");
  for (const char* pv : {"P, V FP16", "P, V FP8"}) {
    const auto v = [&](const char* g) { return std::string(g) + " (" + pv + ")"; };
    require_better(all, v("per-token"), v("per-thread"));
    require_better(all, v("per-thread"), v("per-block"));
    require_better(all, v("per-block"), v("per-tensor"));
  }
}
