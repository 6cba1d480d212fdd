// `lowbit attention --device gpu` refuses what the kernel cannot run before it looks for a GPU,
// each with a message naming the problem (LOWBIT_CLI is the program; inputs in tests/data/attention).
// The GPU run itself is the ctest gpu:lowbit-attention-check (exit 77 where there is no GPU).
#include <catch2/catch.hpp>


#include <cstdio>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "numerics/npy.hpp"
#include "tests/cli_run.hpp"

namespace {

using Run = lowbit::testing::CliRun;

Run run(const std::string& arguments) {
  return lowbit::testing::run_command(std::string(LOWBIT_CLI) + " attention " + arguments);
}

const std::string kData = std::string(LOWBIT_SOURCE_DIR) + "/tests/data/attention/";
const std::string kInputs = "--q " + kData + "q_fp16.npy --k " + kData + "k_fp16.npy --v " + kData + "v_fp16.npy";

}  // namespace

TEST_CASE("lowbit attention --device gpu: what the kernel cannot run is refused with the reason") {
  const Run other = run("--preset fa2-fp16 " + kInputs + " --device gpu");
  CHECK(other.status == 1);
  CHECK_THAT(other.output, Catch::Contains("runs the sage2-8b kernel") && Catch::Contains("fa2-fp16 has no kernel"));

  const Run set = run("--preset sage2-8b " + kInputs + " --device gpu --set exp2=exact");
  CHECK(set.status == 1);
  CHECK_THAT(set.output, Catch::Contains("--set changes an emulated stage"));

  const Run check_on_cpu = run("--preset sage2-8b " + kInputs + " --check");
  CHECK(check_on_cpu.status == 1);
  CHECK_THAT(check_on_cpu.output, Catch::Contains("it needs --device gpu"));

  const Run device = run("--preset sage2-8b " + kInputs + " --device tpu");
  CHECK(device.status != 0);
  CHECK_THAT(device.output, Catch::Contains("--device"));

  // float32 inputs, and a head dimension the kernel does not have (80).
  const auto dir = std::filesystem::temp_directory_path() / ("lowbit_device_cli_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string f32 = (dir / "q32.npy").string(), d80 = (dir / "q80.npy").string(), d80kv = (dir / "kv80.npy").string();
  lowbit::write_npy(f32, {1, 4, 130, 64}, std::vector<float>(4 * 130 * 64, 0.5f));
  const Run float32 = run("--preset sage2-8b --q " + f32 + " --k " + kData + "k_fp16.npy --v " + kData + "v_fp16.npy --device gpu");
  CHECK(float32.status == 1);
  CHECK_THAT(float32.output, Catch::Contains("q32.npy") && Catch::Contains("float16 or bfloat16"));
  std::filesystem::remove_all(dir);
}
