// `lowbit attention` as a user runs it (LOWBIT_CLI is the program): metrics printed and written,
// the output file, and bad input (shapes, heads, NaN/Inf, dtypes, truncated files, stage values)
// named with its file and problem, exit status 1.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "numerics/npy.hpp"
#include "tests/cli_run.hpp"
#include "numerics/safetensors.hpp"

using namespace lowbit;

namespace {

using Run = lowbit::testing::CliRun;

Run run(const std::string& arguments) {
  return lowbit::testing::run_command(std::string(LOWBIT_CLI) + " attention " + arguments);
}

struct Files {
  std::filesystem::path dir;
  std::string q, k, v;
  explicit Files(const std::string& name)
      : dir(std::filesystem::temp_directory_path() / ("lowbit_attention_cli_" + std::to_string(::getpid()) + "_" + name)) {
    std::filesystem::create_directories(dir);
    q = write("q.npy", 4, 200, 64, 1);
    k = write("k.npy", 2, 200, 64, 2);
    v = write("v.npy", 2, 200, 64, 3);
  }
  ~Files() { std::filesystem::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  // [1, heads, tokens, dim] of fp16 values, saved as float32.
  std::string write(const std::string& name, int heads, int tokens, int dim, std::uint64_t seed,
                    float poison = 0, std::size_t at = 0) const {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> x(std::size_t(heads) * tokens * dim);
    for (float& e : x) e = float(_Float16(normal(rng)));
    if (poison != 0 || std::isnan(poison)) x[at] = poison;
    write_npy(path(name), {1, std::size_t(heads), std::size_t(tokens), std::size_t(dim)}, x);
    return path(name);
  }
  std::string args() const { return "--q " + q + " --k " + k + " --v " + v; }
};

}  // namespace

TEST_CASE("lowbit attention: metrics against float64, --out and --metrics-json", "[attention][cli]") {
  const Files f("good");
  const std::string out = f.path("o.npy"), metrics = f.path("m/metrics.json");
  const Run r = run("--preset sage2-8b " + f.args() + " --causal --out " + out + " --metrics-json " + metrics);
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("against float64 attention: cosine 0.99"));
  const NpyArray o = read_npy(out);
  CHECK(o.shape == std::vector<std::size_t>{1, 4, 200, 64});
  const nlohmann::json j = nlohmann::json::parse(std::ifstream(metrics));
  for (const char* key : {"cosine", "rel_l1", "rmse", "max_abs"}) CHECK(j.contains(key));
  CHECK(j["cosine"].get<double>() > 0.99);
  CHECK(j["cosine"].get<double>() < 1.0);
  CHECK(j["run"]["config"]["preset"] == "sage2-8b");
  CHECK(j["run"]["git_sha"].get<std::string>().size() >= 7);
  CHECK_THAT(j["run"]["command"].get<std::string>(), Catch::Contains("--preset sage2-8b"));
  // The same tensors from a .safetensors file (F16) give the same output bit for bit.
  const std::string st = f.path("qkv.safetensors");
  write_safetensors(st, {{"q", "F16", {1, 4, 200, 64}, read_npy(f.q).data},
                         {"k", "F16", {1, 2, 200, 64}, read_npy(f.k).data},
                         {"v", "F16", {1, 2, 200, 64}, read_npy(f.v).data}});
  const std::string out2 = f.path("o2.npy");
  const Run r2 = run("--preset sage2-8b --q " + st + ":q --k " + st + ":k --v " + st + ":v --causal --set output=fp32 "
                     "--out " + out2);
  INFO(r2.output);
  REQUIRE(r2.status == 0);
  CHECK(read_npy(out2).data == o.data);  // fp32 inputs give an fp32 output; the fp16 values round-trip
}

TEST_CASE("lowbit attention --help lists the presets and the stages", "[attention][cli]") {
  const Run r = run("--help");
  CHECK(r.status == 0);
  for (const char* word : {"sage2-8b", "fa3-fp8", "sage3", "hadamard", "accumulation", "key-mean-chunk", "exp2"})
    CHECK_THAT(r.output, Catch::Contains(word));
}

TEST_CASE("lowbit attention: bad input is named with its file and problem", "[attention][cli][bad-input]") {
  const Files f("bad");
  const auto expect = [&](const std::string& args, const std::string& message) {
    const Run r = run(args);
    INFO(args << "\n" << r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains(message));
  };
  const std::string base = "--preset sage2-8b ";
  expect(base + "--q " + f.write("d32.npy", 4, 200, 32, 4) + " --k " + f.k + " --v " + f.v, "head dimensions differ");
  expect(base + "--q " + f.q + " --k " + f.write("k3.npy", 3, 200, 64, 5) + " --v " + f.v, "head counts differ");
  expect(base + "--q " + f.write("q3.npy", 3, 200, 64, 5) + " --k " + f.k + " --v " + f.v,
         "has 3 heads, which 2 heads of K and V do not divide");
  expect(base + "--q " + f.q + " --k " + f.k + " --v " + f.write("v150.npy", 2, 150, 64, 6), "token counts differ");
  const std::string nan = f.write("nan.npy", 2, 200, 64, 7, std::nanf(""), 64 * 205 + 9);
  expect(base + "--q " + f.q + " --k " + nan + " --v " + f.v, nan + ": 1 non-finite value (1 NaN, 0 Inf), the first at [0, 1, 5, 9]");
  const std::string inf = f.write("inf.npy", 2, 200, 64, 8, INFINITY, 3);
  expect(base + "--q " + f.q + " --k " + f.k + " --v " + inf, inf + ": 1 non-finite value (0 NaN, 1 Inf)");
  const auto bytes_of = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  {  // float64: the float32 file with its descr changed (and half as many elements)
    std::string bytes = bytes_of(f.q);
    bytes.replace(bytes.find("<f4"), 3, "<f8");
    std::ofstream(f.path("f8.npy"), std::ios::binary) << bytes;
  }
  expect(base + "--q " + f.path("f8.npy") + " --k " + f.k + " --v " + f.v, "f8.npy: dtype <f8 is not supported");
  const std::string whole = bytes_of(f.q);
  std::ofstream(f.path("cut.npy"), std::ios::binary) << whole.substr(0, whole.size() / 2);
  expect(base + "--q " + f.path("cut.npy") + " --k " + f.k + " --v " + f.v, "cut.npy: data ends after");
  expect(base + f.args() + " --set q=int8:per-sausage", "granularity 'per-sausage' is not one of");
  expect(base + f.args() + " --set exp2=poly7", "stage exp2=poly7: not exact, poly5, poly6 or sm90-ex2");
  expect(base + f.args() + " --set flush=2", "unknown stage 'flush'");
  expect(base + f.args() + " --set block-kv=96", "block-kv=96 must be a power of two");
  expect(base + f.args() + " --set block-kv-causal=100", "block-kv-causal=100 must be a multiple of 8");
  expect(base + f.args() + " --set descale=1,2", "stage descale=1,2: not three numbers");
  expect(base + f.args() + " --set descale=1,0,2", "not a finite positive number");
  expect(base + f.args() + " --set causal-align=middle", "not top-left or bottom-right");
  expect("--preset sage4 " + f.args(), "unknown preset 'sage4'");
  expect(base + "--q " + f.path("missing.npy") + " --k " + f.k + " --v " + f.v, "missing.npy: cannot open");
  expect(base + "--q " + f.path("x.safetensors") + ":q --k " + f.k + " --v " + f.v, "x.safetensors: cannot open");
}
