// Sweeps that split (experiments/run/harness.hpp): --shard I/N gives every work item to exactly one
// shard (round-robin); every experiment run whole and run in 3 shards joined by `lowbit run-merge`
// writes the same files, byte for byte below their provenance lines (metrics.csv, summary.csv,
// distribution.csv, table.md, headline.txt and each experiment's own: int4_codes.csv, heatmaps,
// attribution.csv, plot_variants.json), and the same provenance.json but for the command, the
// machine and the shards merged; a merge of shards that are not one whole sweep (one missing,
// one twice, other options, another split, another commit, a damaged manifest) fails naming the
// shard.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/run/harness.hpp"
#include "tests/cli_run.hpp"
#include "tests/experiments/tiny_sweeps.hpp"

namespace fs = std::filesystem;
using lowbit::experiments::Shard;
using Run = lowbit::testing::CliRun;

namespace {

Run run_cli(const std::string& arguments) { return lowbit::testing::run_command(std::string(LOWBIT_CLI) + " " + arguments); }

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(LOWBIT_TEST_OUT) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every result file of `dir` by name, each without the provenance lines that open it ("# git=...",
// "# command: ..." in CSV files, the same as HTML comments in markdown), which name the command
// and the machine; not provenance.json (compared apart), the plots or a shard's manifest.
std::map<std::string, std::string> results_of(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& f : fs::directory_iterator(dir)) {
    const std::string name = f.path().filename().string(), ext = f.path().extension().string();
    if (name == "provenance.json" || name == "shard.json" || ext == ".png") continue;
    std::string text = read(f.path());
    if (ext == ".csv" || ext == ".md")
      for (const char* lead : {"# git=", "# command: ", "<!-- # git=", "<!-- command: "})
        if (text.rfind(lead, 0) == 0) text.erase(0, text.find('\n') + 1);
    out[name] = text;
  }
  return out;
}

nlohmann::json provenance_of(const fs::path& dir) {
  nlohmann::json p = nlohmann::json::parse(read(dir / "provenance.json"));
  for (const char* key : {"command", "machine"}) p.erase(key);
  p.at("config").erase("merged_from");
  return p;
}

// The tiny sizes of test_experiments.cpp, both datasets, and each experiment's own sweep shrunk.
const std::string kSizes = "--datasets synthetic,smollm2 --heads 2 --tokens 128 --threads 2 --no-plots";
using lowbit::testing::kTinySweeps;

// Runs `experiment` as shards 1/n ... n/n into base/shard-I; returns their folders.
std::vector<std::string> run_shards(const fs::path& base, const std::string& experiment, const std::string& options, int n,
                                    const std::string& env = "") {
  std::vector<std::string> dirs;
  for (int i = 1; i <= n; ++i) {
    const fs::path dir = base / ("shard-" + std::to_string(i));
    const Run r = lowbit::testing::run_command(env + std::string(LOWBIT_CLI) + " run " + experiment + " " + options + " --shard " +
                                               std::to_string(i) + "/" + std::to_string(n) + " --out " + dir.string());
    INFO(r.output);
    REQUIRE(r.status == 0);
    REQUIRE(fs::exists(dir / "shard.json"));
    CHECK_FALSE(fs::exists(dir / "summary.csv"));  // a part has no summaries
    dirs.push_back(dir.string());
  }
  return dirs;
}

std::string joined(const std::vector<std::string>& dirs) {
  std::string s;
  for (const auto& d : dirs) s += " " + d;
  return s;
}

// Merges the shards (in the order given) into base/merged; the files of base/whole and of the merge.
std::pair<std::map<std::string, std::string>, std::map<std::string, std::string>> whole_and_merged(
    const fs::path& base, const std::vector<std::string>& shards) {
  const Run merge = run_cli("run-merge --no-plots " + (base / "merged").string() + joined(shards));
  INFO(merge.output);
  REQUIRE(merge.status == 0);
  return {results_of(base / "whole"), results_of(base / "merged")};
}

}  // namespace

TEST_CASE("Shard I/N: parsed and checked, and every item in exactly one shard", "[experiments][shard]") {
  CHECK(Shard::parse("2/3").value().index == 2);
  CHECK(Shard::parse("2/3").value().count == 3);
  for (const char* bad : {"", "2", "2/", "/3", "a/3", "2/3/4", "2 /3", "-/3"}) {
    INFO(bad);
    CHECK_FALSE(Shard::parse(bad));
  }
  CHECK_FALSE(Shard{1, 1}.validate());
  CHECK_FALSE(Shard{3, 3}.validate());
  CHECK(Shard{0, 3}.validate().value().find("count from 1") != std::string::npos);
  CHECK(Shard{4, 3}.validate().value().find("count from 1 to N = 3") != std::string::npos);
  CHECK(Shard{1, 0}.validate().value().find("N >= 1") != std::string::npos);
  for (int n : {1, 2, 3, 7})
    for (std::size_t item = 0; item < 50; ++item) {
      int owners = 0;
      for (int i = 1; i <= n; ++i) owners += Shard{i, n}.owns(item);
      CHECK(owners == 1);
    }
  // Round-robin: sizes differ by one at most.
  int first = 0, last = 0;
  for (std::size_t item = 0; item < 10; ++item) first += Shard{1, 3}.owns(item), last += Shard{3, 3}.owns(item);
  CHECK(first == 4);
  CHECK(last == 3);
}

TEST_CASE("every experiment in 3 shards, merged, writes the files of one whole run", "[experiments][shard]") {
  for (const auto& [name, tiny] : kTinySweeps) {
    SECTION(name) {
      const fs::path base = fresh("shards-" + name);
      const std::string options = kSizes + " " + tiny;
      const Run whole = run_cli("run " + name + " " + options + " --out " + (base / "whole").string());
      INFO(whole.output);
      REQUIRE(whole.status == 0);
      std::vector<std::string> shards = run_shards(base, name, options, 3);
      // Every item in exactly one shard, the manifests agreeing on the sweep.
      std::vector<int> owner;
      for (std::size_t s = 0; s < shards.size(); ++s) {
        const nlohmann::json m = nlohmann::json::parse(read(fs::path(shards[s]) / "shard.json"));
        CHECK(m.at("experiment") == name);
        CHECK(m.at("shard").at("index") == s + 1);
        CHECK(m.at("shard").at("count") == 3);
        owner.resize(m.at("items").size(), 0);
        for (const auto& record : m.at("records")) ++owner.at(record.at("item").get<std::size_t>());
      }
      REQUIRE(owner.size() >= 3);
      for (int n : owner) CHECK(n == 1);
      // The SmolLM2 sample's layers are items of their own.
      const nlohmann::json items = nlohmann::json::parse(read(fs::path(shards[0]) / "shard.json")).at("items");
      CHECK(items.dump().find("on smollm2, layer 29") != std::string::npos);
      // In any order.
      std::swap(shards[0], shards[2]);
      const fs::path merged = base / "merged";
      const auto [expected, got] = whole_and_merged(base, shards);
      REQUIRE(expected.count("metrics.csv"));
      REQUIRE(expected.count("summary.csv"));
      REQUIRE(expected.count("table.md"));
      REQUIRE(expected.count("headline.txt"));
      for (const auto& [file, text] : expected) {
        INFO(file);
        REQUIRE(got.count(file));
        CHECK(got.at(file) == text);
      }
      CHECK(got.size() == expected.size());
      CHECK(provenance_of(merged) == provenance_of(base / "whole"));
      const nlohmann::json p = nlohmann::json::parse(read(merged / "provenance.json"));
      CHECK(p.at("config").at("merged_from").size() == 3);
    }
  }
}

TEST_CASE("SmolLM2 heads picked by --layers and --q-heads, in 3 shards merged, write the files of one whole run",
          "[experiments][shard]") {
  const fs::path base = fresh("shards-layers");
  const std::string options = "--datasets smollm2 --layers 20,0 --q-heads all --tokens 64 --threads 2 --no-plots";
  const Run whole = run_cli("run granularity " + options + " --out " + (base / "whole").string());
  INFO(whole.output);
  REQUIRE(whole.status == 0);
  const std::vector<std::string> shards = run_shards(base, "granularity", options, 3);
  const nlohmann::json items = nlohmann::json::parse(read(fs::path(shards[0]) / "shard.json")).at("items");
  CHECK(items.size() == 16);  // 8 variants x layers 20 and 0
  CHECK(items.at(0) == "per-token (P, V FP16) on smollm2, layer 20");
  CHECK(nlohmann::json::parse(read(fs::path(shards[1]) / "shard.json")).at("options").at("layers") == "20,0");
  const fs::path merged = base / "merged";
  const auto [expected, got] = whole_and_merged(base, shards);
  REQUIRE(expected.count("metrics.csv"));
  CHECK(expected.at("metrics.csv").find(",L20H8,") != std::string::npos);
  CHECK(got == expected);
  CHECK(provenance_of(merged) == provenance_of(base / "whole"));
  // Shards of other layers are another sweep.
  const fs::path other = base / "other-layers";
  REQUIRE(run_cli("run granularity " + options.substr(0, options.find("20,0")) + "20,10" +
                  options.substr(options.find("20,0") + 4) + " --shard 2/3 --out " + other.string())
              .status == 0);
  const Run mixed = run_cli("run-merge --no-plots " + (base / "mixed").string() + " " + shards[0] + " " + other.string() + " " + shards[2]);
  CHECK(mixed.status != 0);
  CHECK_THAT(mixed.output, Catch::Contains("--layers '20,10'") && Catch::Contains("not one sweep"));
}

TEST_CASE("parse_indices: distinct indices from 0, comma-separated", "[experiments][shard]") {
  using lowbit::experiments::parse_indices;
  CHECK(parse_indices("0").value() == std::vector<int>{0});
  CHECK(parse_indices("29,0,10").value() == std::vector<int>{29, 0, 10});
  for (const char* bad : {"", ",", "1,", ",1", "1,,2", "a", "1 ,2", "-1", "1,1", "all", "1.5"}) {
    INFO(bad);
    CHECK_FALSE(parse_indices(bad));
  }
}

TEST_CASE("a merge of shards that are not one whole sweep fails naming the shard", "[experiments][shard]") {
  const std::string options = "--datasets synthetic --heads 2 --tokens 64 --threads 2 --no-plots";
  const fs::path base = fresh("shards-bad");
  const std::vector<std::string> shards = run_shards(base, "granularity", options, 3);
  const fs::path out = base / "merged";
  const auto fails = [&](const std::string& arguments, const std::vector<std::string>& says) {
    const Run r = run_cli(arguments);
    INFO(arguments << "\n" << r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);  // an exit, not a crash
    for (const auto& s : says) CHECK(r.output.find(s) != std::string::npos);
    CHECK_FALSE(fs::exists(out / "summary.csv"));
  };
  SECTION("a shard missing") {
    fails("run-merge --no-plots " + out.string() + " " + shards[0] + " " + shards[2], {"shard 2/3 missing", shards[0]});
  }
  SECTION("a shard twice") {
    fails("run-merge --no-plots " + out.string() + joined(shards) + " " + shards[1],
          {"shard 2/3 is given twice", shards[1]});
  }
  SECTION("a shard run with other options") {
    const fs::path other = base / "other";
    const Run r = run_cli("run granularity --datasets synthetic --heads 1 --tokens 64 --threads 2 --no-plots --shard 2/3 --out " +
                          other.string());
    REQUIRE(r.status == 0);
    fails("run-merge --no-plots " + out.string() + " " + shards[0] + " " + other.string() + " " + shards[2],
          {other.string(), "--heads '1'", "'2'", "not one sweep"});
  }
  SECTION("a shard of another split") {
    const fs::path other = base / "other-split";
    REQUIRE(run_cli("run granularity " + options + " --shard 2/2 --out " + other.string()).status == 0);
    fails("run-merge --no-plots " + out.string() + " " + shards[0] + " " + other.string(), {other.string(), "not one split"});
  }
  SECTION("a shard run at another commit") {
    const std::vector<std::string> elsewhere = run_shards(base / "elsewhere", "granularity", options, 3, "LOWBIT_GIT_SHA=0123abcd ");
    fails("run-merge --no-plots " + out.string() + " " + shards[0] + " " + elsewhere[1] + " " + shards[2],
          {elsewhere[1], "ran at git 0123abcd"});
  }
  SECTION("a folder that holds no shard, or a damaged one") {
    fails("run-merge --no-plots " + out.string() + " " + base.string(), {"no shard here"});
    std::ofstream(fs::path(shards[1]) / "shard.json") << "{\"experiment\": \"granularity\"}";
    fails("run-merge --no-plots " + out.string() + joined(shards), {shards[1], "not a shard's manifest"});
    fails("run-merge --no-plots " + out.string() + " " + shards[1] + " " + shards[0] + " " + shards[2],
          {shards[1], "not a shard's manifest"});
  }
  SECTION("--shard out of range or malformed") {
    fails("run granularity " + options + " --shard 0/3 --out " + out.string(), {"--shard 0/3", "count from 1"});
    fails("run granularity " + options + " --shard 4/3 --out " + out.string(), {"--shard 4/3", "count from 1 to N = 3"});
    fails("run granularity " + options + " --shard 1/0 --out " + out.string(), {"N >= 1"});
    fails("run granularity " + options + " --shard 1of3 --out " + out.string(), {"'1of3' is not I/N"});
    fails("run granularity " + options + " --shard 1/3 --merge " + shards[0] + " --out " + out.string(),
          {"--shard and --merge"});
    fails("run all --shard 1/3 --out " + out.string(), {"lowbit run NAME --shard"});
  }
}
