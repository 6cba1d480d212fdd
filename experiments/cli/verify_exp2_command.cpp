// lowbit verify-exp2: the GPU's exponential. MUFU.EX2 (ex2.approx.ftz.f32) and the reproducible
// steps::poly_exp2 against the correctly rounded exp2; and on every float32 input, bit for bit, the
// device's poly_exp2 against the host's and MUFU.EX2 against its model (sfu::sm90_ex2): the models
// and the sweep are verification/'s (exp2.hpp, float32_sweep.hpp).
#include <algorithm>
#include <bit>
#include <chrono>

#include <fmt/format.h>

#include "emulation/attention/kernel_steps.hpp"
#include "experiments/cli/command.hpp"
#include "experiments/cli/gpu_run.hpp"
#include "kernels/probes/exp2_probe.hpp"
#include "verification/exp2.hpp"
#include "verification/float32_sweep.hpp"

namespace lowbit::cli {
namespace {

namespace steps = lowbit::attention::steps;
using kernels::Exp2Accuracy;
using kernels::Exp2Implementation;

struct Args {
  std::uint32_t stride = 1;
  std::string output;
};

struct Measured {
  const char* name;
  Exp2Implementation implementation;
  float lo, hi;
};

// The ranges: what softmax feeds MUFU.EX2 (x <= 0, down to where results are subnormal), and the
// range over which poly_exp2 is specified ([-125, 0]; below -125 it returns 0).
const Measured kMeasured[] = {
    {"ex2.approx.ftz.f32", Exp2Implementation::ex2_approx, -150.0f, 0.0f},
    {"poly_exp2 degree 5", Exp2Implementation::poly_degree5, steps::kExp2Lowest, 0.0f},
    {"poly_exp2 degree 6", Exp2Implementation::poly_degree6, steps::kExp2Lowest, 0.0f},
};

nlohmann::ordered_json accuracy_json(const Measured& m, const Exp2Accuracy& a) {
  return {{"implementation", m.name},
          {"range", {m.lo, m.hi}},
          {"inputs", a.inputs},
          {"normal_results", a.normal_results},
          {"ulps_0", a.ulps[0]},
          {"ulps_1", a.ulps[1]},
          {"ulps_2", a.ulps[2]},
          {"ulps_3_or_more", a.ulps[3]},
          {"correctly_rounded_percent", 100.0 * double(a.ulps[0]) / double(a.normal_results)},
          {"max_ulps", a.max_ulps},
          {"worst_input", fmt::format("0x{:08x} ({:a})", a.worst_input, std::bit_cast<float>(a.worst_input))},
          {"uncertain_reference", a.uncertain_reference}};
}

constexpr std::size_t kChunk = std::size_t{1} << 27;
constexpr std::size_t kBlock = 1 << 16;

// The device's exp2 against its host model (verification/exp2.hpp) over inputs 0, stride,
// 2 stride, ... (all 2^32 at 1); the smallest mismatching input is kept.
verification::SweepResult<std::uint32_t, std::uint32_t> compare(Exp2Implementation implementation, std::uint32_t stride) {
  return verification::sweep_float32<std::uint32_t, std::uint32_t>(
      {stride, kChunk, kBlock, 1},
      [&](std::uint32_t first, std::uint32_t step, std::span<std::uint32_t> out) {
        kernels::device_exp2(implementation, first, step, out);
      },
      [&](std::span<const float> in, std::span<std::uint32_t> out) {
        for (std::size_t i = 0; i < in.size(); ++i)
          out[i] = std::bit_cast<std::uint32_t>(verification::exp2_model(implementation, in[i]));
      },
      verification::exp2_agrees);
}

int run_verify_exp2(const Args& args) {
  const auto gpu = require_gpu("verify-exp2");
  if (!gpu) return kSkipped;
  nlohmann::ordered_json accuracy = nlohmann::ordered_json::array();
  fmt::print("{:<20} {:>18} {:>12} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "exp2", "range", "normal", "exact %",
             "0 ulp", "1 ulp", "2 ulps", ">=3", "max ulp");
  for (const Measured& m : kMeasured) {
    const Exp2Accuracy a = kernels::measure_exp2(m.implementation, m.lo, m.hi);
    accuracy.push_back(accuracy_json(m, a));
    fmt::print("{:<20} {:>18} {:>12} {:>10.4f} {:>9} {:>9} {:>9} {:>9} {:>9}\n", m.name,
               fmt::format("[{}, {}]", m.lo, m.hi), a.normal_results, 100.0 * double(a.ulps[0]) / double(a.normal_results),
               a.ulps[0], a.ulps[1], a.ulps[2], a.ulps[3], a.max_ulps);
  }
  nlohmann::ordered_json agreement = nlohmann::ordered_json::array();
  std::uint64_t all_mismatches = 0;
  for (const Measured& m : kMeasured) {
    const auto start = std::chrono::steady_clock::now();
    const auto a = compare(m.implementation, args.stride);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    all_mismatches += a.mismatches;
    const char* model = m.implementation == Exp2Implementation::ex2_approx ? "model sfu::sm90_ex2" : "host poly_exp2";
    fmt::print("device {} vs {}: {} inputs, {} mismatches ({:.1f} s)\n", m.name, model, a.inputs, a.mismatches, seconds);
    agreement.push_back({{"device", m.name},
                         {"host", model},
                         {"inputs", a.inputs},
                         {"mismatches", a.mismatches},
                         {"first_mismatch", a.mismatches ? fmt::format("0x{:08x}", a.first.front().input) : ""}});
  }
  if (!args.output.empty()) {
    nlohmann::ordered_json doc;
    doc["what"] =
        "exp2 on the GPU: ulp distance from the correctly rounded exp2 (double exp2 rounded to float) over every float in "
        "the range whose result is normal; and on every input, bit for bit, the device's steps::poly_exp2 against the "
        "host's and MUFU.EX2 against its model sfu::sm90_ex2 (a NaN input's output only has to be a NaN)";
    doc["command"] = fmt::format("lowbit verify-exp2 --stride {}", args.stride);
    doc["provenance"] = gpu_provenance(*gpu);
    doc["accuracy"] = accuracy;
    doc["device_vs_host"] = agreement;
    write_json(args.output, doc);
  }
  return all_mismatches == 0 ? 0 : 1;
}

}  // namespace

void add_verify_exp2_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "verify-exp2",
      "Measure the GPU's ex2.approx.ftz.f32 and the reproducible poly_exp2 against the correctly rounded exp2, and\n"
      "compare on every float32 input the device's poly_exp2 with the host's and MUFU.EX2 with its model\n"
      "(emulation/sfu/ex2.hpp). Exit 0: device = host; 1: mismatches; 77: no GPU.");
  cmd->add_option("--stride", args->stride, "Compare on inputs 0, s, 2s, ... only (1: all 2^32)")
      ->check(CLI::Range(1u, 0xffffffffu))
      ->capture_default_str();
  cmd->add_option("--output", args->output, "Write the results with provenance to this JSON file");
  cmd->callback([&exit_code, args] { exit_code = run_verify_exp2(*args); });
}

}  // namespace lowbit::cli
