// The experiment programs as a user runs them: bad input is named and the exit status says so.
// The programs' paths come from the build (LOWBIT_CLI, LOWBIT_BENCH_QUANTIZE, LOWBIT_CHANNEL_STATS).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "numerics/npy.hpp"
#include "tensors.hpp"
#include "tests/cli_run.hpp"

using namespace lowbit;

namespace {

using Run = testing::CliRun;

Run run(const std::string& command) { return testing::run_command(command); }

// A fresh folder for one test's files.
std::filesystem::path scratch(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("lowbit_cli_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_tensor(const std::filesystem::path& path, const MatrixF& x) {
  write_npy(path.string(), {std::size_t(x.rows()), std::size_t(x.cols())},
            std::span<const float>(x.data(), std::size_t(x.size())));
}

const std::string kExp = std::string(LOWBIT_CLI) + " run granularity-qk";
const std::string kChannelStats = LOWBIT_CHANNEL_STATS;

}  // namespace

TEST_CASE("lowbit run granularity-qk --data: a NaN in a file is named with the file, count and index", "[cli]") {
  const auto dir = scratch("nan");
  MatrixF q = test::normal_tensor(256, 64, 1);
  q(130, 5) = std::numeric_limits<float>::quiet_NaN();
  write_tensor(dir / "q.npy", q);
  write_tensor(dir / "k.npy", test::normal_tensor(256, 64, 2));
  write_tensor(dir / "v.npy", test::normal_tensor(256, 64, 3));
  const Run r = run(kExp + " --data " + (dir / "q.npy").string() + " " + (dir / "k.npy").string() + " " +
                    (dir / "v.npy").string() + " --out " + (dir / "out").string());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("lowbit run granularity-qk: error: " + (dir / "q.npy").string() +
                                       " head 0: 1 non-finite value (1 NaN, 0 Inf), the first at [130, 5] (NaN)"));
  CHECK_FALSE(std::filesystem::exists(dir / "out" / "granularity.csv"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("lowbit run granularity-qk: --element must be what --instruction multiplies", "[cli]") {
  const auto dir = scratch("element");
  const Run r = run(kExp + " --instruction mma.m16n8k64.s4 --element int8 --heads 1 --tokens 128 --dim 64 --out " +
                    (dir / "out").string());
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("--element int8 does not fit --instruction mma.m16n8k64.s4, which multiplies "
                                       "int4 operands"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("lowbit run granularity-qk --dim 96: HadmdAttn is skipped with a note, the rest runs", "[cli]") {
  const auto dir = scratch("dim96");
  const Run r = run(kExp + " --dim 96 --heads 1 --tokens 256 --tables methods --out " + (dir / "out").string());
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string why = "the random Hadamard rotation needs a power-of-two head dimension (d = 96)";
  CHECK_THAT(r.output, Catch::Contains("note: HadmdAttn skipped: " + why));
  const auto read = [&](const char* name) {
    std::ifstream in(dir / "out" / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  CHECK_THAT(read("summary.csv"), Catch::Contains("\"smoothing methods, per-thread\",\"HadmdAttn\",skipped,,,") &&
                                      Catch::Contains("\"Smooth Q+K\",mean,"));
  CHECK_THAT(read("granularity.csv"), Catch::Contains("# skipped: smoothing methods, per-thread / HadmdAttn: " + why) &&
                                          !Catch::Contains("\"HadmdAttn\",0,"));
  CHECK_THAT(read("granularity.json"), Catch::Contains("\"skipped\": \"" + why + "\""));
  CHECK_THAT(read("table.md"), Catch::Contains("| HadmdAttn | skipped: " + why));
  std::filesystem::remove_all(dir);
}

TEST_CASE("bench_quantize: counts below 1 and unwritable output are errors, not NaN or an abort", "[cli]") {
  const std::string bench = LOWBIT_BENCH_QUANTIZE;
  for (const char* option : {"--heads", "--tokens", "--dim", "--repeats"}) {
    const Run r = run(bench + " " + option + " 0");
    INFO(r.output);
    CHECK(r.status != 0);
    CHECK(r.status < 128);  // an error exit, not a signal (abort)
    CHECK_THAT(r.output, Catch::Contains(std::string(option) + ": must be a whole number >= 1, got 0"));
  }
  const Run r = run(bench + " --heads 1 --tokens 64 --dim 64 --repeats 1 --out /proc/lowbit-bench.csv");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("bench_quantize: error: /proc/lowbit-bench.csv: cannot write"));
}

TEST_CASE("channel_stats --dir: a NaN is named with the file, head and index, missing and mismatched files too", "[cli]") {
  const auto dir = scratch("stats");
  const auto write_heads = [&](const std::string& name, int heads, std::uint64_t seed, bool nan) {
    std::vector<float> values;
    for (int h = 0; h < heads; ++h) {
      const MatrixF x = test::normal_tensor(128, 16, seed + std::uint64_t(h));
      values.insert(values.end(), x.data(), x.data() + x.size());
    }
    if (nan) values[1 * 128 * 16 + 7 * 16 + 3] = std::numeric_limits<float>::quiet_NaN();  // head 1, token 7, channel 3
    write_npy((dir / name).string(), {1, std::size_t(heads), 128, 16}, values);
  };
  write_heads("layer03_q.npy", 4, 1, false);
  write_heads("layer03_k.npy", 2, 10, false);
  write_heads("layer03_v.npy", 2, 20, false);
  Run r = run(kChannelStats + " --dir " + dir.string() + " --out " + (dir / "out").string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(std::filesystem::exists(dir / "out" / "stats.json"));

  write_heads("layer03_k.npy", 2, 10, true);
  r = run(kChannelStats + " --dir " + dir.string() + " --out " + (dir / "out2").string());
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("channel_stats: error: " + (dir / "layer03_k.npy").string() +
                                       " head 1: 1 non-finite value (1 NaN, 0 Inf), the first at [7, 3] (NaN)"));
  write_heads("layer03_k.npy", 3, 10, false);  // 4 query heads over 3 key heads
  r = run(kChannelStats + " --dir " + dir.string() + " --out " + (dir / "out3").string());
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("layer03: 4 query heads, 3 key heads, 2 value heads"));
  std::filesystem::remove(dir / "layer03_v.npy");
  r = run(kChannelStats + " --dir " + dir.string() + " --out " + (dir / "out4").string());
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains((dir / "layer03_v.npy").string() + ": cannot open"));
  std::filesystem::remove_all(dir);
}
