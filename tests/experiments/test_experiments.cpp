// `lowbit run NAME` as a user runs it (LOWBIT_CLI is the program), at tiny sizes: every
// experiment writes metrics.csv (the columns, the four metrics for every variant, dataset
// and head), provenance.json and table.md; the attribution's Shapley values add up to the error of
// the full pipeline above the exact one, recomputed here from metrics.csv, and a source that
// changes nothing gets 0; the user's --q/--k/--v tensors run and name the dataset; --layers and
// --q-heads pick the SmolLM2 capture's heads; bad input (missing file, NaN, shape mismatch, unknown
// experiment or dataset, impossible format, a layer, head or length the capture lacks) exits
// non-zero with a message naming the problem.
#include <catch2/catch.hpp>


#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "numerics/npy.hpp"
#include "tests/cli_run.hpp"
#include "tests/experiments/tiny_sweeps.hpp"

namespace fs = std::filesystem;

namespace {

using Run = lowbit::testing::CliRun;
using lowbit::testing::csv_fields;

Run run_cli(const std::string& arguments) {
  return lowbit::testing::run_command(std::string(LOWBIT_CLI) + " " + arguments);
}

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(LOWBIT_TEST_OUT) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A CSV file written through experiments/common: '#' provenance lines, a header, rows.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};

Csv read_csv(const fs::path& file) {
  std::ifstream in(file);
  INFO(file.string());
  REQUIRE(in);
  Csv csv;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto f = csv_fields(line);
    if (csv.header.empty()) {
      csv.header = f;
      continue;
    }
    REQUIRE(f.size() == csv.header.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < f.size(); ++i) row[csv.header[i]] = f[i];
    csv.rows.push_back(row);
  }
  return csv;
}

// metrics.csv as (variant, dataset, head) -> metric -> value, checked for the columns,
// the experiment's name and the four metrics on every row's key.
using Metrics = std::map<std::tuple<std::string, std::string, std::string>, std::map<std::string, double>>;

Metrics read_metrics(const fs::path& dir, const std::string& experiment) {
  const Csv csv = read_csv(dir / "metrics.csv");
  REQUIRE(csv.header == std::vector<std::string>{"experiment", "variant", "dataset", "head", "metric", "value"});
  REQUIRE_FALSE(csv.rows.empty());
  Metrics m;
  for (const auto& row : csv.rows) {
    CHECK(row.at("experiment") == experiment);
    m[{row.at("variant"), row.at("dataset"), row.at("head")}][row.at("metric")] = std::stod(row.at("value"));
  }
  for (const auto& [key, metrics] : m) {
    INFO(experiment << ": " << std::get<0>(key) << " on " << std::get<1>(key) << " head " << std::get<2>(key));
    for (const char* name : {"cosine", "rel_l1", "rmse", "max_abs"}) {
      REQUIRE(metrics.count(name));
      CHECK(std::isfinite(metrics.at(name)));
    }
    CHECK(metrics.at("cosine") <= 1.0 + 1e-12);
    CHECK(metrics.at("cosine") > 0.5);  // tiny inputs, every variant a sane pipeline
    CHECK(metrics.at("rel_l1") >= 0);
    CHECK(metrics.at("rmse") >= 0);
    CHECK(metrics.at("max_abs") >= metrics.at("rmse"));
  }
  return m;
}

std::set<std::string> datasets_of(const Metrics& m) {
  std::set<std::string> s;
  for (const auto& [key, _] : m) s.insert(std::get<1>(key));
  return s;
}

void check_provenance_and_table(const fs::path& dir, const std::string& experiment) {
  std::ifstream in(dir / "provenance.json");
  REQUIRE(in);
  const nlohmann::json p = nlohmann::json::parse(in);
  for (const char* key : {"git_sha", "command", "inputs", "formats", "seeds", "machine"}) {
    INFO(experiment << ": provenance.json lacks " << key);
    CHECK(p.contains(key));
  }
  CHECK(p.at("command").get<std::string>().find("lowbit run " + experiment) != std::string::npos);
  CHECK_FALSE(p.at("formats").empty());
  std::ifstream table(dir / "table.md");
  REQUIRE(table);
  std::stringstream text;
  text << table.rdbuf();
  CHECK(text.str().find("\n# ") != std::string::npos);  // the title, after the provenance comments
  CHECK(text.str().find("|---") != std::string::npos);
}

using lowbit::testing::kTinySweeps;

// [1, heads, tokens, dim] of fp16-representable normal values, saved as float32.
std::vector<float> write_tensor(const fs::path& file, int heads, int tokens, int dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(std::size_t(heads) * std::size_t(tokens) * std::size_t(dim));
  for (float& e : x) e = float(_Float16(normal(rng)));
  lowbit::write_npy(file.string(), {1, std::size_t(heads), std::size_t(tokens), std::size_t(dim)}, x);
  return x;
}

struct UserTensors {
  fs::path dir;
  std::string q, k, v;
  explicit UserTensors(const std::string& name) : dir(fresh(name)) {
    q = (dir / "myq.npy").string();
    k = (dir / "myk.npy").string();
    v = (dir / "myv.npy").string();
    write_tensor(q, 2, 96, 64, 1);
    write_tensor(k, 1, 96, 64, 2);  // grouped-query attention: 2 Q heads share K and V
    write_tensor(v, 1, 96, 64, 3);
  }
  std::string args() const { return "--q " + q + " --k " + k + " --v " + v; }
};

}  // namespace

TEST_CASE("every experiment runs at a tiny size and writes metrics.csv, provenance.json and table.md",
          "[experiments][cli]") {
  const Run list = run_cli("run --list");
  REQUIRE(list.status == 0);
  for (const auto& [name, tiny] : kTinySweeps) {
    SECTION(name) {
      REQUIRE(list.output.find("  " + name + " ") != std::string::npos);
      const fs::path out = fresh("tiny-" + name);
      const Run r = run_cli("run " + name + " --datasets synthetic,smollm2 --heads 2 --tokens 128 --threads 2 --no-plots " + tiny +
                           " --out " + out.string());
      INFO(r.output);
      REQUIRE(r.status == 0);
      const Metrics m = read_metrics(out, name);
      CHECK(datasets_of(m).count("smollm2"));
      CHECK(datasets_of(m).count("synthetic"));
      check_provenance_and_table(out, name);
      CHECK(fs::exists(out / "headline.txt"));
      // The committed sample is recorded relative to the repository root, as on every checkout.
      std::ifstream in(out / "provenance.json");
      const nlohmann::json p = nlohmann::json::parse(in);
      CHECK(p.at("config").at("datasets").at("smollm2").at("dir") == "experiments/data/smollm2-135m");
      REQUIRE_FALSE(p.at("inputs").empty());
      for (const auto& file : p.at("inputs"))
        CHECK(file.get<std::string>().rfind("experiments/data/smollm2-135m/layer", 0) == 0);
      // The variants an experiment's per-variant plots show (where it names them) are its own.
      if (name == "accumulator" || name == "attribution") {
        std::ifstream shown_file(out / "plot_variants.json");
        const nlohmann::json shown = nlohmann::json::parse(shown_file);
        REQUIRE_FALSE(shown.empty());
        std::set<std::string> variants;
        for (const auto& [key, _] : m) variants.insert(std::get<0>(key));
        for (const auto& v : shown) CHECK(variants.count(v.get<std::string>()) == 1);
        if (name == "accumulator")  // each sweep's longest window only (synthetic: --lengths 256,512)
          for (const auto& v : shown) CHECK(v.get<std::string>().find("@ 256 keys") == std::string::npos);
      }
    }
  }
}

// Issue 38's guessed settings: Q and K per token in Tables 6 and 9, INT8 P truncated or per block,
// the long flat dataset. What each variant ran is what provenance.json records of its stages.
TEST_CASE("per-token Q and K (option qk-granularity), INT8 P's variants and the synthetic-flat dataset run as asked", "[experiments][cli]") {
  for (const std::string name : {"pv-format", "smoothing"}) {
    SECTION(name) {
      const fs::path out = fresh("per-token-flat-" + name);
      const Run r = run_cli("run " + name + " --datasets synthetic-flat --heads 1 --tokens 512 --qk-granularity per-token "
                            "--threads 2 --no-plots --out " + out.string());
      INFO(r.output);
      REQUIRE(r.status == 0);
      const Metrics m = read_metrics(out, name);
      CHECK(datasets_of(m) == std::set<std::string>{"synthetic-flat"});
      std::ifstream in(out / "provenance.json");
      const nlohmann::json p = nlohmann::json::parse(in);
      const nlohmann::json& slice = p.at("config").at("datasets").at("synthetic-flat").at("slice");
      CHECK(slice.at("queries") == 128);
      CHECK(slice.at("keys") == 512);
      REQUIRE(p.at("formats").size() >= 6);
      for (const auto& [variant, pipeline] : p.at("formats").items()) {
        INFO(variant);
        CHECK(pipeline.at("stages").at("q") == "int4:per-token");
        CHECK(pipeline.at("stages").at("k") == "int4:per-token");
      }
      if (name == "pv-format") {
        CHECK(p.at("formats").at("INT8").at("stages").at("p") == "int8:127");
        CHECK(p.at("formats").at("INT8, P truncated").at("stages").at("p") == "int8:127:toward-zero");
        CHECK(p.at("formats").at("INT8, P per block").at("stages").at("p") == "int8:per-block");
        CHECK(p.at("formats").at("INT8, P per block, truncated").at("stages").at("p") == "int8:per-block:toward-zero");
      }
    }
  }
}

TEST_CASE("synthetic-sink: the preset sink's spec, one sink key, recorded with the dataset", "[experiments][cli]") {
  const fs::path out = fresh("sink");
  const Run r = run_cli("run fp4 --datasets synthetic-sink --heads 1 --tokens 256 --threads 2 --no-plots --out " + out.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(datasets_of(read_metrics(out, "fp4")) == std::set<std::string>{"synthetic-sink"});
  std::ifstream in(out / "provenance.json");
  const nlohmann::json spec = nlohmann::json::parse(in).at("config").at("datasets").at("synthetic-sink");
  CHECK(spec.at("synthetic").at("preset") == "sink");
  CHECK(spec.at("synthetic").at("sink_tokens") == 1);
  CHECK(spec.at("synthetic").at("tokens") == 256);
  CHECK(spec.at("slice").at("queries") == 128);
}

TEST_CASE("a copy of the SmolLM2 capture given by --data-dir is read from where it is, and named so", "[experiments][cli]") {
  // Outside the repository (a path inside it would be recorded relative to its root): as given.
  const fs::path copy = fs::temp_directory_path() / ("lowbit-smollm2-copy-" + std::to_string(::getpid()));
  fs::remove_all(copy);
  fs::copy(fs::path(LOWBIT_SOURCE_DIR) / "experiments/data/smollm2-135m", copy);
  const fs::path out = fresh("data-dir");
  const Run r = run_cli("run granularity --datasets smollm2 --heads 2 --tokens 128 --threads 2 --no-plots --data-dir " +
                        copy.string() + " --out " + out.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream in(out / "provenance.json");
  const nlohmann::json p = nlohmann::json::parse(in);
  CHECK(p.at("config").at("datasets").at("smollm2").at("dir") == copy.string());
  for (const auto& file : p.at("inputs")) CHECK(file.get<std::string>().rfind(copy.string() + "/layer", 0) == 0);
  std::ifstream table_file(out / "table.md");
  const std::string table((std::istreambuf_iterator<char>(table_file)), std::istreambuf_iterator<char>());
  CHECK(table.find("captured on our own prose (" + copy.string() + ")") != std::string::npos);
  CHECK(table.find("experiments/data/smollm2-135m") == std::string::npos);
  fs::remove_all(copy);
}

TEST_CASE("the user's tensors run through every experiment and name the dataset", "[experiments][cli]") {
  const UserTensors files("user-tensors");
  for (const auto& [name, tiny] : kTinySweeps) {
    SECTION(name) {
      const fs::path out = fresh("user-" + name);
      // accumulator: windows of the user's 96 keys.
      const std::string own = name == "accumulator" ? "--real-lengths 64,96 --queries 32" : tiny;
      const Run r = run_cli("run " + name + " " + files.args() + " --dataset-name my-model --causal --threads 2 --no-plots " +
                           own + " --out " + out.string());
      INFO(r.output);
      REQUIRE(r.status == 0);
      const Metrics m = read_metrics(out, name);
      CHECK(datasets_of(m) == std::set<std::string>{"my-model"});
      std::set<std::string> heads;
      for (const auto& [key, _] : m) heads.insert(std::get<2>(key));
      CHECK(heads == std::set<std::string>{"h0", "h1"});
      std::ifstream in(out / "provenance.json");
      const nlohmann::json p = nlohmann::json::parse(in);
      CHECK(p.at("inputs").dump().find("myq.npy") != std::string::npos);
    }
  }
  SECTION("without --dataset-name the dataset is Q's file name") {
    const fs::path out = fresh("user-default-name");
    const Run r = run_cli("run granularity " + files.args() + " --threads 2 --no-plots --out " + out.string());
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(datasets_of(read_metrics(out, "granularity")) == std::set<std::string>{"myq"});
  }
}

// The attribution of sage2-8b over q, p, output: the value of each combination is the mean over
// heads of the MSE (rmse^2 from metrics.csv); with three sources the Shapley value of i is
// (1/3) [v(i) - v()] + (1/6) sum over j != i [v(i,j) - v(j)] + (1/3) [v(all) - v(all but i)].
TEST_CASE("attribution: the Shapley values recomputed from metrics.csv, summing to the total", "[experiments][attribution]") {
  const fs::path out = fresh("attribution-shapley");
  const Run r = run_cli("run attribution --datasets synthetic --heads 2 --tokens 128 --threads 2 --no-plots --pipelines sage2-8b "
                       "--sources q,p,output --out " +
                       out.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  const Metrics m = read_metrics(out, "attribution");
  // v(S) by the variant's name: "sage2-8b: exact", "sage2-8b: q+p", "sage2-8b: all (the preset)".
  const std::vector<std::string> sources{"q", "p", "output"};
  const auto value = [&](unsigned mask) {
    std::string name;
    if (mask == 0) name = "sage2-8b: exact";
    else if (mask == 7) name = "sage2-8b: all (the preset)";
    else
      for (int i = 0; i < 3; ++i)
        if (mask >> i & 1) name += (name.empty() ? "sage2-8b: " : "+") + sources[std::size_t(i)];
    double sum = 0;
    int heads = 0;
    for (const auto& [key, metrics] : m)
      if (std::get<0>(key) == name && std::get<1>(key) == "synthetic") sum += metrics.at("rmse") * metrics.at("rmse"), ++heads;
    INFO(name);
    REQUIRE(heads == 2);
    return sum / heads;
  };
  std::vector<double> v(8);
  for (unsigned mask = 0; mask < 8; ++mask) v[mask] = value(mask);
  const double total = v[7] - v[0];
  REQUIRE(total > 0);

  const Csv csv = read_csv(out / "attribution.csv");
  double shapley_sum = 0;
  int found = 0;
  for (const auto& row : csv.rows) {
    if (row.at("metric") != "mse" || row.at("dataset") != "synthetic") continue;
    const std::string& factor = row.at("factor");
    const unsigned bit = factor == "q" ? 1 : factor == "p" ? 2 : factor == "output" ? 4 : 0;
    REQUIRE(bit != 0);
    const unsigned others = 7 & ~bit;
    double expected = (v[bit] - v[0]) / 3 + (v[7] - v[others]) / 3;
    for (unsigned j : {1u, 2u, 4u})
      if (j != bit) expected += (v[bit | j] - v[j]) / 6;
    INFO(factor);
    // metrics.csv prints 9 significant digits, so the recomputation agrees to about 1e-8 of the total.
    CHECK(std::stod(row.at("shapley")) == Approx(expected).margin(1e-7 * total));
    CHECK(std::stod(row.at("added")) == Approx(v[bit] - v[0]).margin(1e-7 * total));
    CHECK(std::stod(row.at("removed")) == Approx(v[7] - v[others]).margin(1e-7 * total));
    CHECK(std::stod(row.at("total")) == Approx(total).epsilon(1e-7));
    shapley_sum += std::stod(row.at("shapley"));
    ++found;
  }
  CHECK(found == 3);
  CHECK(shapley_sum == Approx(total).epsilon(1e-6));
}

// fa2-fp16 quantizes Q, K and V to fp16: on inputs that are fp16 values already, those
// quantizers change nothing, so each of q, k, v must get exactly 0 (alone, Shapley, removed),
// while P's fp16 cast and the fp16 output are real sources.
TEST_CASE("attribution: a source that changes nothing gets 0", "[experiments][attribution]") {
  const UserTensors files("attribution-inert");
  const fs::path out = fresh("attribution-inert-out");
  const Run r = run_cli("run attribution " + files.args() + " --dataset-name fp16-values --pipelines fa2-fp16 "
                       "--sources q,k,v,p,output --threads 2 --no-plots --out " + out.string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  const Csv csv = read_csv(out / "attribution.csv");
  int checked = 0;
  double p_and_output = 0;
  for (const auto& row : csv.rows) {
    const std::string& factor = row.at("factor");
    INFO(row.at("metric") << " " << factor);
    if (factor == "q" || factor == "k" || factor == "v") {
      CHECK(std::stod(row.at("added")) == 0);
      CHECK(std::stod(row.at("shapley")) == 0);
      CHECK(std::stod(row.at("removed")) == 0);
      ++checked;
    } else if (row.at("metric") == "mse") {
      p_and_output += std::stod(row.at("shapley"));
      CHECK(std::stod(row.at("shapley")) > 0);
    }
  }
  CHECK(checked == 9);  // 3 sources x 3 metrics
  CHECK(p_and_output > 0);
}

TEST_CASE("bad input: a clear error and a non-zero exit", "[experiments][cli]") {
  const UserTensors files("bad-input");
  const fs::path out = fresh("bad-input-out");
  const auto fails = [&](const std::string& arguments, const std::vector<std::string>& says) {
    const Run r = run_cli(arguments + " --no-plots --out " + out.string());
    INFO(arguments << "\n" << r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);  // an exit, not a crash
    for (const auto& s : says) CHECK(r.output.find(s) != std::string::npos);
  };
  SECTION("a missing file") {
    fails("run granularity --q " + (files.dir / "nothere.npy").string() + " --k " + files.k + " --v " + files.v,
          {"nothere.npy", "cannot open"});
  }
  SECTION("NaN in Q") {
    std::vector<float> q = write_tensor(files.dir / "nan.npy", 2, 96, 64, 1);
    q[1000] = std::nanf("");
    lowbit::write_npy((files.dir / "nan.npy").string(), {1, 2, 96, 64}, q);
    fails("run smoothing --q " + (files.dir / "nan.npy").string() + " --k " + files.k + " --v " + files.v, {"nan", "NaN"});
  }
  SECTION("Q and K head dimensions differ") {
    write_tensor(files.dir / "k32.npy", 1, 96, 32, 2);
    fails("run pv-format --q " + files.q + " --k " + (files.dir / "k32.npy").string() + " --v " + files.v,
          {"k32.npy", "head dimensions differ"});
  }
  SECTION("K's heads do not divide Q's") {
    write_tensor(files.dir / "k3.npy", 3, 96, 64, 2);
    write_tensor(files.dir / "v3.npy", 3, 96, 64, 3);
    fails("run fp4 --q " + files.q + " --k " + (files.dir / "k3.npy").string() + " --v " + (files.dir / "v3.npy").string(),
          {"do not divide"});
  }
  SECTION("--q without --k and --v") { fails("run granularity --q " + files.q, {"--q, --k and --v go together"}); }
  SECTION("an unknown experiment") { fails("run no-such-experiment", {"unknown experiment 'no-such-experiment'"}); }
  SECTION("an unknown dataset") { fails("run backward --datasets imagenet", {"imagenet"}); }
  SECTION("an impossible format") {
    fails("run formats --datasets synthetic --heads 1 --tokens 64 --qk-format int0", {"int0", "2..32"});
    fails("run formats --datasets synthetic --heads 1 --tokens 64 --pv-format e4m99", {"e4m99"});
    fails("run formats --datasets synthetic --heads 1 --tokens 64 --pv-format p3109:k=3:p=5", {"p3109:k=3:p=5", "p=5"});
    fails("run formats --datasets synthetic --heads 1 --tokens 64 --qk-format e0m3", {"e0m3", "exponent"});
  }
  SECTION("an unknown pipeline to attribute") { fails("run attribution --pipelines sage9", {"sage9"}); }
  SECTION("--layers, --q-heads, --tokens, --real-lengths beyond the SmolLM2 capture, or malformed") {
    const std::string smollm2 = "run granularity --datasets smollm2 --tokens 64 --threads 2";
    fails(smollm2 + " --layers 0,5", {"layer 5", "layer05_q.npy", "--layers"});
    fails(smollm2 + " --q-heads 3,9", {"Q head 9", "layer00_q.npy has 9 (0 to 8", "--q-heads"});
    fails(smollm2 + " --layers 0,,10", {"--layers '0,,10'", "comma-separated"});
    fails(smollm2 + " --layers 10,10", {"--layers '10,10'", "distinct"});
    fails(smollm2 + " --q-heads -1", {"--q-heads '-1'"});
    fails(smollm2 + " --layers al", {"--layers 'al'", "'all'"});
    fails("run granularity --datasets smollm2 --tokens 2048 --threads 2", {"--tokens 2048", "has 1024 tokens"});
    fails("run accumulator --datasets smollm2 --layers 0 --q-heads 0 --tokens 256 --real-lengths 128,512 --threads 2",
          {"--real-lengths 512", "smollm2 has 256 tokens"});
  }
}

TEST_CASE("smollm2: --layers and --q-heads pick the dataset's heads, and all of them with all", "[experiments][cli]") {
  const fs::path out = fresh("layers-heads");
  const Run picked = run_cli("run granularity --datasets smollm2 --layers 29,0 --q-heads 8,3 --tokens 64 --threads 2 --no-plots --out " +
                             (out / "picked").string());
  INFO(picked.output);
  REQUIRE(picked.status == 0);
  const std::string metrics = read_text(out / "picked" / "metrics.csv");
  for (const char* label : {",L29H8,", ",L29H3,", ",L0H8,", ",L0H3,"}) CHECK(metrics.find(label) != std::string::npos);
  for (const char* label : {",L10H", ",L0H0,", ",L29H4,"}) CHECK(metrics.find(label) == std::string::npos);
  const nlohmann::json spec =
      nlohmann::json::parse(read_text(out / "picked" / "provenance.json")).at("config").at("datasets").at("smollm2");
  CHECK(spec.at("layers") == nlohmann::json({29, 0}));
  CHECK(spec.at("q_heads") == nlohmann::json({8, 3}));
  CHECK(spec.at("tokens") == 64);
  CHECK_THAT(read_text(out / "picked" / "table.md"), Catch::Contains("layers 29,0, Q heads 8,3 of each") &&
                                                        Catch::Contains("(4 heads in all), 64 tokens"));

  const Run all = run_cli("run pv-format --long-keys 0 --datasets smollm2 --layers all --q-heads all --tokens 32 --threads 2 "
                          "--no-plots --out " + (out / "all").string());
  INFO(all.output);
  REQUIRE(all.status == 0);
  const nlohmann::json every =
      nlohmann::json::parse(read_text(out / "all" / "provenance.json")).at("config").at("datasets").at("smollm2");
  CHECK(every.at("layers") == nlohmann::json({0, 10, 20, 29}));  // the committed capture's files
  CHECK(every.at("q_heads") == nlohmann::json({0, 1, 2, 3, 4, 5, 6, 7, 8}));
  CHECK(read_text(out / "all" / "metrics.csv").find(",L20H7,") != std::string::npos);

  // The accumulator's windows up to the tokens read.
  const Run lengths = run_cli("run accumulator --datasets smollm2 --layers 0 --q-heads 0 --tokens 512 --real-lengths 128,512 "
                              "--queries 64 --threads 2 --no-plots --out " + (out / "lengths").string());
  INFO(lengths.output);
  REQUIRE(lengths.status == 0);
  CHECK(read_text(out / "lengths" / "metrics.csv").find("@ 512 keys") != std::string::npos);
}
