// lowbit run --device gpu without a GPU (experiments/run/harness.hpp, "The GPU beside the
// emulation"): the comparison of the GPU's output codes and LSE with the emulation's on given
// results, gpu-check.json, table.md's section and the failure message written from given records,
// --no-check's left-out variants through the results (whole, shards, merge),
// and the program's refusals and its exit 77 where no GPU is visible (CUDA_VISIBLE_DEVICES empty,
// so the path is the same on a machine with one). The GPU runs are the ctest gpu:lowbit-run-*.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "experiments/run/harness.hpp"
#include "tests/cli_run.hpp"

namespace {

namespace ex = lowbit::experiments;
using lowbit::attention::ForwardResult;

// A batch-1 result of 2 heads x 3 rows x 4 columns with distinct codes and LSE values.
ForwardResult result() {
  ForwardResult r;
  r.batch = 1, r.heads = 2, r.kv_heads = 2, r.tokens = 3, r.keys = 3, r.head_dim = 4, r.value_dim = 4;
  for (std::uint32_t i = 0; i < 24; ++i) r.output_codes.push_back(0x3c00 + i);
  for (int i = 0; i < 6; ++i) r.lse.push_back(1.5f + float(i));
  return r;
}

const std::vector<std::string> kLabels{"h0", "h1"};

ex::DeviceRecord record(const std::string& variant, const std::string& dataset, const std::string& item, ex::DeviceRun run) {
  return {variant, dataset, item, std::move(run)};
}

}  // namespace

TEST_CASE("check_device: every output code and LSE value, head by head, and the first difference") {
  const ForwardResult emulated = result();
  ForwardResult gpu = result();
  const ex::DeviceRun equal = ex::check_device(gpu, emulated, kLabels);
  CHECK(equal.ran_on == ex::kRanOnBoth);
  REQUIRE(equal.heads.size() == 2);
  CHECK(equal.heads[1].label == "h1");
  CHECK(equal.totals().codes_compared == 24);
  CHECK(equal.totals().lse_compared == 6);
  CHECK(equal.totals().codes_differ + equal.totals().lse_differ == 0);
  CHECK(equal.first_difference.empty());

  gpu.output_codes[12 + 4 * 2 + 3] ^= 1;  // head 1, row 2, column 3
  gpu.output_codes[12 + 4 * 2 + 1] ^= 1;  // head 1, row 2, column 1: the first
  gpu.lse[4] = -gpu.lse[4];               // head 1, row 1
  const ex::DeviceRun differ = ex::check_device(gpu, emulated, kLabels);
  CHECK(differ.heads[0].codes_differ == 0);
  CHECK(differ.heads[1].codes_differ == 2);
  CHECK(differ.heads[1].lse_differ == 1);
  CHECK_THAT(differ.first_difference, Catch::Contains("head h1, output row 2, column 1 (index 9 of the head's 12 codes)") &&
                                          Catch::Contains("GPU code 0x3c14, emulated 0x3c15"));

  // Only the LSE differs: it is the first difference. -0 and +0 are different bits.
  ForwardResult lse_only = result();
  lse_only.lse[0] = 0.0f;
  ForwardResult zero = result();
  zero.lse[0] = -0.0f;
  const ex::DeviceRun signed_zero = ex::check_device(lse_only, zero, kLabels);
  CHECK(signed_zero.totals().lse_differ == 1);
  CHECK_THAT(signed_zero.first_difference, Catch::Contains("head h0, LSE of row 0"));

  ForwardResult other = result();
  other.output_codes.pop_back();
  CHECK_THROWS_AS(ex::check_device(other, emulated, kLabels), std::invalid_argument);
  CHECK_THROWS_AS(ex::check_device(gpu, emulated, {"h0"}), std::invalid_argument);
}

TEST_CASE("check_device_values: every fp32 bit of values by head, the LSE where given, and the first difference") {
  // 2 heads x 3 rows x 2 columns; the LSE one per row.
  std::vector<float> emulated, lse;
  for (int i = 0; i < 12; ++i) emulated.push_back(0.25f * float(i));
  for (int i = 0; i < 6; ++i) lse.push_back(1.0f + float(i));
  std::vector<float> gpu = emulated;
  const ex::DeviceRun equal = ex::check_device_values("dQ", gpu, emulated, 2, kLabels);
  CHECK(equal.ran_on == ex::kRanOnBoth);
  CHECK(equal.totals().codes_compared == 12);
  CHECK(equal.totals().lse_compared == 0);
  CHECK(equal.first_difference.empty());

  gpu[6 + 2 * 1 + 1] = std::nextafter(gpu[6 + 2 * 1 + 1], 10.0f);  // head 1, row 1, column 1
  gpu[0] = -0.0f;                                                    // head 0, row 0: -0 against +0
  const ex::DeviceRun differ = ex::check_device_values("dQ", gpu, emulated, 2, kLabels);
  CHECK(differ.heads[0].codes_differ == 1);
  CHECK(differ.heads[1].codes_differ == 1);
  CHECK_THAT(differ.first_difference, Catch::Contains("head h0, dQ row 0, column 0 (index 0 of the head's 6 values): GPU -0 "
                                                      "(0x80000000), emulated 0 (0x00000000)"));

  std::vector<float> gpu_lse = lse;
  gpu_lse[5] = 7.5f;
  const ex::DeviceRun with_lse = ex::check_device_values("O", emulated, emulated, 2, kLabels, gpu_lse, lse);
  CHECK(with_lse.totals().lse_compared == 6);
  CHECK(with_lse.heads[1].lse_differ == 1);
  CHECK_THAT(with_lse.first_difference, Catch::Contains("head h1, LSE of row 2"));

  CHECK_THROWS_AS(ex::check_device_values("dQ", gpu, std::vector<float>(10), 2, kLabels), std::invalid_argument);
  CHECK_THROWS_AS(ex::check_device_values("O", gpu, emulated, 2, kLabels, gpu_lse, std::vector<float>(5)), std::invalid_argument);
  CHECK_THROWS_AS(ex::check_device_values("O", gpu, emulated, 5, kLabels), std::invalid_argument);
}

TEST_CASE("gpu-check.json: per variant and dataset, summed over its parts, and emulated only with its reason") {
  const ex::DeviceRun checked = ex::check_device(result(), result(), kLabels);
  ex::DeviceRun emulated{ex::kRanOnEmulation, "sage2-8b kernel: stage pv is 'fp32-fma:X', the kernel's 'X'", {}, "", {}, {}};
  const std::vector<ex::DeviceRecord> records{
      record("FP22", "smollm2", "FP22 on smollm2, layer 0", checked),
      record("FP22", "smollm2", "FP22 on smollm2, layer 10", checked),
      record("fp32 sums", "smollm2", "fp32 sums on smollm2, layer 0", emulated),
  };
  const nlohmann::json gpus = nlohmann::json::array({{{"gpu", "NVIDIA H100"}, {"gpu_arch", "sm_90"}, {"gpu_driver", "580"}}});
  const nlohmann::ordered_json doc = ex::gpu_check_json("accumulator", true, "abc123", gpus, records);
  CHECK(doc.at("experiment") == "accumulator");
  CHECK(doc.at("git_sha") == "abc123");
  CHECK(doc.at("gpus").at(0).at("gpu") == "NVIDIA H100");
  CHECK(doc.at("passed") == true);
  CHECK_FALSE(doc.contains("failure"));
  REQUIRE(doc.at("evaluations").size() == 2);
  const auto& fp22 = doc.at("evaluations").at(0);
  CHECK(fp22.at("variant") == "FP22");
  CHECK(fp22.at("dataset") == "smollm2");
  CHECK(fp22.at("ran_on") == "gpu+emulation");
  CHECK(fp22.at("work_items") == 2);
  CHECK(fp22.at("codes_compared") == 48);
  CHECK(fp22.at("codes_differ") == 0);
  CHECK(fp22.at("lse_compared") == 12);
  CHECK(fp22.at("lse_differ") == 0);
  CHECK_FALSE(fp22.contains("reason"));
  const auto& fp32 = doc.at("evaluations").at(1);
  CHECK(fp32.at("ran_on") == "emulation only");
  CHECK(fp32.at("codes_compared") == 0);
  CHECK(fp32.at("reason") == emulated.reason);
  const auto& totals = doc.at("totals");
  CHECK(totals.at("work_items_checked") == 2);
  CHECK(totals.at("work_items_emulated_only") == 1);
  CHECK(totals.at("work_items_gpu_alone") == 0);
  CHECK(totals.at("codes_compared") == 48);

  const std::string md = ex::gpu_check_markdown(true, gpus, records);
  CHECK_THAT(md, Catch::Contains("## GPU check") && Catch::Contains("NVIDIA H100 (sm_90, driver 580)"));
  CHECK_THAT(md, Catch::Contains("| FP22 | smollm2 | gpu+emulation | 48 | 0 | 12 | 0 |"));
  CHECK_THAT(md, Catch::Contains("| fp32 sums | smollm2 | emulated only: sage2-8b kernel: stage pv is 'fp32-fma:X'"));
  CHECK_FALSE(ex::gpu_check_failure(records));
}

TEST_CASE("under --no-check a variant no kernel computes is left out, listed with its reason, never counted as checked") {
  const ex::DeviceRun alone{ex::kRanOnGpu, "", {}, "", {}, {}};
  const ex::DeviceRun left_out{ex::kLeftOut, "sage2-8b kernel: stage accumulation is 'in-place'", {}, "", {}, {}};
  const std::vector<ex::DeviceRecord> records{
      record("FP22", "smollm2", "FP22 on smollm2, layer 0", alone),
      record("FP22, in place", "smollm2", "FP22, in place on smollm2, layer 0", left_out),
      record("FP22, in place", "smollm2", "FP22, in place on smollm2, layer 10", left_out),
  };
  const nlohmann::ordered_json doc = ex::gpu_check_json("accumulator", false, "abc123", nlohmann::json::array(), records);
  CHECK(doc.at("device") == "gpu --no-check");
  CHECK_THAT(doc.at("what").get<std::string>(), Catch::Contains("left out"));
  REQUIRE(doc.at("evaluations").size() == 2);
  const auto& row = doc.at("evaluations").at(1);
  CHECK(row.at("ran_on") == "left out");
  CHECK(row.at("work_items") == 2);
  CHECK(row.at("reason") == left_out.reason);
  CHECK(row.at("codes_compared") == 0);
  const auto& totals = doc.at("totals");
  CHECK(totals.at("work_items_left_out") == 2);
  CHECK(totals.at("work_items_gpu_alone") == 1);
  CHECK(totals.at("work_items_checked") == 0);
  CHECK(totals.at("work_items_emulated_only") == 0);
  CHECK(doc.at("passed") == true);
  const std::string md = ex::gpu_check_markdown(false, nlohmann::json::array(), records);
  CHECK_THAT(md, Catch::Contains("| FP22, in place | smollm2 | left out: sage2-8b kernel: stage accumulation is 'in-place' | 0 | 0 | 0 | 0 |"));
  CHECK_THAT(md, Catch::Contains("| FP22 | smollm2 | gpu | 0 | 0 | 0 | 0 |"));
  CHECK_THAT(md, Catch::Contains("were left out (not run, not emulated"));
}

namespace {

// A results folder's file as text.
std::string file_text(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The harness's records of a --device gpu --no-check sweep of two items on one dataset, as evaluate()
// returns them: "on the GPU" ran alone, "no kernel" was left out. Whole (shard nullopt), a shard, or
// a merge of the given shards' folders.
void no_check_sweep(const std::string& out, std::optional<ex::Shard> shard, std::vector<std::string> merge = {}) {
  ex::CommonOptions o;
  o.out = out;
  o.device = "gpu";
  o.check = false;
  o.gpu = {{"gpu", "NVIDIA H100"}, {"gpu_arch", "sm_90"}, {"gpu_driver", "580"}};  // experiment_main's, from the GPU
  o.shard = shard;
  o.merge = std::move(merge);
  const char* argv[] = {"lowbit-run-test"};
  ex::ExperimentResults results("accumulator", o, 1, const_cast<char**>(argv));
  const ex::Dataset d = ex::synthetic_dataset("synthetic", "default", 2, 16, 64, 1, false);
  const std::vector<double> reference(2 * 16 * 64, 1.0);
  std::vector<double> output = reference;
  output[5] = 1.5;
  const auto on_gpu = [&] {
    ex::Evaluation e = ex::compare_heads(reference, output, 2, d.head_labels);
    e.device = ex::DeviceRun{ex::kRanOnGpu, "", {}, "", {}, {}};
    return ex::ItemResult{{{"on the GPU", e}}, {}};
  };
  const auto no_kernel = [&] {
    ex::Evaluation e;
    e.device = ex::DeviceRun{ex::kLeftOut, "no kernel computes it", {}, "", {}, {}};
    return ex::ItemResult{{{"no kernel", e}}, {}};
  };
  results.item(d, "on the GPU on synthetic", on_gpu);
  results.item(d, "no kernel on synthetic", no_kernel);
  if (results.finish_shard()) return;
  CHECK(results.summary("on the GPU", "synthetic").heads == 2);
  const ex::Summary& left = results.summary("no kernel", "synthetic");
  CHECK(left.heads == 0);
  CHECK(std::isnan(left.cosine_mean));
  CHECK(std::isnan(left.rel_l1_worst));
  CHECK_THROWS_AS(results.summary("never run", "synthetic"), std::logic_error);
  results.write("left out");
}

}  // namespace

TEST_CASE("under --no-check the left-out variant has no rows, gpu-check.json and table.md list it, and shards merge to the same") {
  const std::filesystem::path base = std::filesystem::path(LOWBIT_TEST_OUT) / "left-out";
  std::filesystem::remove_all(base);
  no_check_sweep((base / "whole").string(), std::nullopt);
  for (const char* file : {"metrics.csv", "summary.csv", "distribution.csv"}) {
    const std::string text = file_text(base / "whole" / file);
    INFO(file);
    CHECK_THAT(text, Catch::Contains("on the GPU (GPU)"));
    CHECK_THAT(text, !Catch::Contains("no kernel"));
  }
  const std::string table = file_text(base / "whole" / "table.md");
  CHECK_THAT(table, Catch::Contains("| no kernel | synthetic | left out: no kernel computes it | 0 | 0 | 0 | 0 |"));
  CHECK_THAT(table, !Catch::Contains("| no kernel | 0"));  // no row in the metrics tables
  const nlohmann::json check = nlohmann::json::parse(file_text(base / "whole" / "gpu-check.json"));
  CHECK(check.at("totals").at("work_items_left_out") == 1);
  CHECK(check.at("totals").at("work_items_gpu_alone") == 1);
  CHECK(check.at("totals").at("work_items_checked") == 0);

  no_check_sweep((base / "shard-1").string(), ex::Shard{1, 2});
  no_check_sweep((base / "shard-2").string(), ex::Shard{2, 2});
  const nlohmann::json manifest = nlohmann::json::parse(file_text(base / "shard-2" / "shard.json"));
  CHECK(manifest.at("records").at(0).at("evaluations").at(0).at("device").at("ran_on") == "left out");
  no_check_sweep((base / "merged").string(), std::nullopt, {(base / "shard-2").string(), (base / "shard-1").string()});
  for (const char* file : {"metrics.csv", "summary.csv", "distribution.csv"}) {
    INFO(file);
    std::string whole = file_text(base / "whole" / file), merged = file_text(base / "merged" / file);
    REQUIRE(whole.find("\nexperiment,") != std::string::npos);
    whole.erase(0, whole.find("\nexperiment,"));  // past the provenance lines
    merged.erase(0, merged.find("\nexperiment,"));
    CHECK(merged == whole);
  }
  const nlohmann::json merged = nlohmann::json::parse(file_text(base / "merged" / "gpu-check.json"));
  CHECK(merged.at("evaluations") == check.at("evaluations"));  // its "gpus" are the shards'
  CHECK(merged.at("totals") == check.at("totals"));
}

TEST_CASE("gpu_check_failure: the counts, and the first difference's variant, dataset, item and head") {
  ForwardResult gpu = result();
  gpu.output_codes[5] ^= 0x10;
  std::vector<ex::DeviceRecord> records{
      record("FP22", "synthetic", "FP22 on synthetic", ex::check_device(result(), result(), kLabels)),
      record("FP22 ex2", "synthetic", "FP22 ex2 on synthetic", ex::check_device(gpu, result(), kLabels)),
  };
  const auto failure = ex::gpu_check_failure(records);
  REQUIRE(failure);
  CHECK_THAT(*failure, Catch::Contains("1 of 48 output codes and 0 of 12 LSE values") &&
                           Catch::Contains("variant 'FP22 ex2' on synthetic (FP22 ex2 on synthetic)") &&
                           Catch::Contains("head h0, output row 1, column 1"));
  const nlohmann::ordered_json doc = ex::gpu_check_json("accumulator", true, "abc123", nlohmann::json::array(), records);
  CHECK(doc.at("passed") == false);
  CHECK(doc.at("failure") == *failure);
  CHECK(doc.at("evaluations").at(1).at("codes_differ") == 1);
  CHECK(doc.at("totals").at("codes_differ") == 1);
}

TEST_CASE("lowbit run --device gpu: refusals, and exit 77 where no GPU is visible") {
  using lowbit::testing::run_command;
  const std::string lowbit = std::string(LOWBIT_CLI) + " run accumulator --datasets synthetic --lengths 128 --heads 1 ";
  const auto no_gpu = run_command("CUDA_VISIBLE_DEVICES= " + lowbit + "--device gpu --out " + LOWBIT_TEST_OUT + "/no-gpu");
  CHECK(no_gpu.status == 77);
  CHECK_THAT(no_gpu.output, Catch::Contains("lowbit run") && Catch::Contains("skipped"));
  const auto no_check = run_command(lowbit + "--no-check --out " + LOWBIT_TEST_OUT + "/no-check");
  CHECK(no_check.status == 2);
  CHECK_THAT(no_check.output, Catch::Contains("--no-check") && Catch::Contains("it needs --device gpu"));
  const auto tpu = run_command(lowbit + "--device tpu --out " + LOWBIT_TEST_OUT + "/tpu");
  CHECK(tpu.status != 0);
  CHECK_THAT(tpu.output, Catch::Contains("--device"));
  const auto backward = run_command("CUDA_VISIBLE_DEVICES= " + std::string(LOWBIT_CLI) +
                                    " run backward --datasets synthetic --heads 1 --tokens 64 --device gpu --out " +
                                    LOWBIT_TEST_OUT + "/no-gpu-backward");
  CHECK(backward.status == 77);
  const auto help = run_command(lowbit + "--help");
  CHECK(help.status == 0);
  CHECK_THAT(help.output, Catch::Contains("--device") && Catch::Contains("--no-check") && Catch::Contains("emulated only") &&
                             Catch::Contains("left out, not emulated"));
}

#if defined(LOWBIT_HAVE_KERNELS)
// Which pipeline --device gpu runs: the smoothing experiment's Ada sage2-4b as its Hopper twin, the
// sage2-8b preset as itself, a pipeline no kernel computes not at all (gpu_unsupported's reasons).
TEST_CASE("plan_gpu: an Ada pipeline runs as its Hopper twin, a Hopper one as itself, others nowhere") {
  namespace la = lowbit::attention;
  const lowbit::Tensor4 q(1, 2, 256, 64), kv(1, 1, 256, 64);
  const la::ForwardOptions options{.causal = true, .keep_operands = false};  // as beside the emulation

  const la::Pipeline ada = la::preset("sage2-4b", 64);
  REQUIRE(ada.arch == "sm_89");
  const ex::GpuPlan twin = ex::plan_gpu(ada, q, kv, kv, options);
  CHECK_FALSE(twin.why);
  CHECK(twin.pipeline.arch == "sm_90");
  la::Pipeline expected = ada;
  REQUIRE_FALSE(la::set_stage(expected, "arch=sm_90"));
  CHECK(la::stage_values(twin.pipeline) == la::stage_values(expected));
  CHECK_THAT(twin.twin, Catch::Contains("Hopper twin") && Catch::Contains("sm_89"));

  la::Pipeline hopper = la::preset("sage2-8b", 64);
  la::follow_inputs(hopper, lowbit::formats::fp16);
  const ex::GpuPlan itself = ex::plan_gpu(hopper, q, kv, kv, options);
  CHECK_FALSE(itself.why);
  CHECK(itself.twin.empty());
  CHECK(la::stage_values(itself.pipeline) == la::stage_values(hopper));

  const la::Pipeline nvfp4 = la::preset("sage3", 64);
  const ex::GpuPlan none = ex::plan_gpu(nvfp4, q, kv, kv, options);
  REQUIRE(none.why);
  CHECK_THAT(*none.why, Catch::Contains("sage2-8b kernel") && Catch::Contains("sage2-4b family kernel"));
  CHECK(none.twin.empty());
}

// Which SageBwd config --device gpu runs: the FP16 presets as their Hopper twins, the all-INT8 one as
// itself, a head dimension the kernels lack nowhere.
TEST_CASE("plan_gpu_backward: the backward presets run as their Hopper twins or themselves, others nowhere") {
  namespace la = lowbit::attention;
  const lowbit::Tensor4 q(1, 2, 200, 64), kv(1, 1, 200, 64);
  const ex::BackwardGpuPlan twin = ex::plan_gpu_backward(la::sagebwd_preset("sagebwd"), q, kv, kv, q);
  CHECK_FALSE(twin.why);
  CHECK(twin.config.arch == "sm_90");
  CHECK(twin.config.dp == la::BackwardOperands::fp16);
  CHECK_THAT(twin.twin, Catch::Contains("Hopper twin") && Catch::Contains("sm_89"));
  const ex::BackwardGpuPlan itself = ex::plan_gpu_backward(la::sagebwd_preset("sagebwd-int8-dp"), q, kv, kv, q);
  CHECK_FALSE(itself.why);
  CHECK(itself.twin.empty());
  CHECK(itself.config.arch == "sm_89");
  const lowbit::Tensor4 q96(1, 2, 200, 96), kv96(1, 1, 200, 96);
  const ex::BackwardGpuPlan none = ex::plan_gpu_backward(la::sagebwd_preset("fp16"), q96, kv96, kv96, q96);
  REQUIRE(none.why);
  CHECK_THAT(*none.why, Catch::Contains("d = 96"));
}

// The accumulator experiment's sage2-8b rows as its run records them (provenance.json: each
// variant's stages): every FP22 row, two-level or in place, smooth V off or on, runs on the kernel
// under --device gpu; the fp32 sums and the accumulator alone (fp32 operands) no kernel computes.
TEST_CASE("plan_gpu: the accumulator experiment's FP22 sage2-8b rows, in place and smooth V included, run on the kernel") {
  namespace la = lowbit::attention;
  using lowbit::testing::run_command;
  const std::string out = std::string(LOWBIT_TEST_OUT) + "/accumulator-pipelines";
  const auto run = run_command(std::string(LOWBIT_CLI) + " run accumulator --datasets synthetic --heads 1 --tokens 256 " +
                               "--lengths 256 --queries 128 --no-plots --out " + out);
  INFO(run.output);
  REQUIRE(run.status == 0);
  std::ifstream provenance(out + "/provenance.json");
  const nlohmann::json formats = nlohmann::json::parse(provenance).at("formats");
  // The sweep's window: its 128 queries against 256 keys of the synthetic data (d = 128), not causal.
  const lowbit::Tensor4 q(1, 1, 128, 128), kv(1, 1, 256, 128);
  const la::ForwardOptions options{.causal = false, .keep_operands = false};
  int fp22_rows = 0;
  for (const auto& [variant, record] : formats.items()) {
    if (record.at("preset") != "sage2-8b") continue;
    la::Pipeline p = la::preset("sage2-8b", 128);
    for (const auto& [stage, value] : record.at("stages").items())
      REQUIRE_FALSE(la::set_stage(p, stage + "=" + value.get<std::string>()));
    const bool fp22 = variant.starts_with("FP22, ");
    fp22_rows += fp22;
    const ex::GpuPlan plan = ex::plan_gpu(p, q, kv, kv, options);
    INFO(variant << ": " << plan.why.value_or("runs on the kernel"));
    CHECK(plan.why.has_value() != fp22);
  }
  CHECK(fp22_rows == 4);  // two-level and in place, smooth V off and on
}
#endif

