// lowbit verify-cvt: every float32 bit pattern converted on the GPU and by the emulator, code
// for code: the GPU runs kernels/probes/cvt_probe.hpp, the comparison is verification/'s (the
// model of each conversion: cvt.hpp; the sweep: float32_sweep.hpp).
#include <algorithm>
#include <bit>
#include <chrono>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "experiments/cli/code_text.hpp"
#include "experiments/cli/command.hpp"
#include "experiments/cli/gpu_run.hpp"
#include "kernels/probes/cvt_probe.hpp"
#include "verification/cvt.hpp"
#include "verification/float32_sweep.hpp"

namespace lowbit::cli {
namespace {

using verification::CvtModel;

struct Args {
  std::vector<std::string> formats;
  std::uint32_t stride = 1;
  int keep = 8;
  std::string output;
};

constexpr std::size_t kChunk = std::size_t{1} << 27;  // inputs per GPU call
constexpr std::size_t kBlock = 4096;                  // inputs per CPU work item

struct CaseResult {
  verification::SweepResult<std::uint16_t, Code> sweep;
  double seconds = 0;
};

CaseResult compare(kernels::CvtRunner& runner, const kernels::CvtKernel& kernel, const CvtModel& c, const Args& args) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult r;
  r.sweep = verification::sweep_float32<std::uint16_t, Code>(
      {args.stride, kChunk, kBlock, std::size_t(args.keep)},
      [&](std::uint32_t first, std::uint32_t stride, std::span<std::uint16_t> out) {
        runner.convert(kernel.target, first, stride, out);
      },
      [&](std::span<const float> in, std::span<Code> out) { encode(c.format, in, out, c.options); },
      [](float, std::uint16_t gpu, Code emulator) { return emulator == gpu; });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string emulator_text(const CvtModel& c) {
  return fmt::format("{} {} overflow={}", format_name(c.format), to_string(c.options.rounding), to_string(c.options.overflow));
}

int run_verify_cvt(const Args& args) {
  const auto gpu = require_gpu("verify-cvt");
  if (!gpu) return kSkipped;
  std::set<std::string> wanted(args.formats.begin(), args.formats.end());
  for (const auto& name : wanted)
    if (std::none_of(kernels::cvt_kernels().begin(), kernels::cvt_kernels().end(),
                     [&](const auto& k) { return k.name == name; })) {
      fmt::print(stderr, "lowbit verify-cvt: --formats: no conversion named '{}'\n", name);
      return 2;
    }
  kernels::CvtRunner runner(kChunk);
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  std::uint64_t all_mismatches = 0;
  fmt::print("{:<15} {:<70} {:>11} {:>10} {:>7}\n", "conversion", "GPU source", "inputs", "mismatches", "seconds");
  for (const auto& kernel : kernels::cvt_kernels()) {
    if (!wanted.empty() && !wanted.count(std::string(kernel.name))) continue;
    const CvtModel& c = verification::cvt_model(kernel.target);
    const CaseResult r = compare(runner, kernel, c, args);
    all_mismatches += r.sweep.mismatches;
    fmt::print("{:<15} {:<70} {:>11} {:>10} {:>7.1f}\n", kernel.name, kernel.source, r.sweep.inputs, r.sweep.mismatches,
               r.seconds);
    nlohmann::ordered_json first = nlohmann::ordered_json::array();
    for (const auto& m : r.sweep.first)
      first.push_back({{"input", fmt::format("0x{:08x}", m.input)},
                       {"gpu", hex_code(c.format, m.device)},
                       {"emulator", hex_code(c.format, m.host)}});
    for (const auto& m : r.sweep.first)
      fmt::print("    input 0x{:08x} ({}): gpu {} emulator {}\n", m.input, value_text(std::bit_cast<float>(m.input)),
                 hex_code(c.format, m.device), hex_code(c.format, m.host));
    results.push_back({{"conversion", kernel.name},
                       {"gpu_source", kernel.source},
                       {"emulator", emulator_text(c)},
                       {"inputs", r.sweep.inputs},
                       {"mismatches", r.sweep.mismatches},
                       {"first_mismatches", first}});
  }
  if (!args.output.empty()) {
    nlohmann::ordered_json doc;
    doc["what"] = "float32 inputs converted on the GPU vs lowbit::encode, code for code";
    doc["command"] = fmt::format("lowbit verify-cvt --stride {}", args.stride);
    doc["stride"] = args.stride;
    doc["provenance"] = gpu_provenance(*gpu);
    doc["results"] = results;
    write_json(args.output, doc);
  }
  return all_mismatches == 0 ? 0 : 1;
}

}  // namespace

void add_verify_cvt_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "verify-cvt",
      "Convert every float32 bit pattern on the GPU (hardware cvt, or the CUDA headers' device conversion where sm_90 has\n"
      "no instruction) and compare each code with the emulator's encode(). Exit 0: all equal; 1: mismatches; 77: no GPU.");
  cmd->add_option("--formats", args->formats, "Conversions to check (default: all): " + [] {
    std::string names;
    for (const auto& k : kernels::cvt_kernels()) names += (names.empty() ? "" : ", ") + std::string(k.name);
    return names;
  }())->delimiter(',');
  cmd->add_option("--stride", args->stride, "Check inputs 0, s, 2s, ... only (1: all 2^32)")
      ->check(CLI::Range(1u, 0xffffffffu))
      ->capture_default_str();
  cmd->add_option("--keep", args->keep, "Mismatching inputs to list per conversion (the smallest)")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_option("--output", args->output, "Write the results with provenance to this JSON file");
  cmd->callback([&exit_code, args] { exit_code = run_verify_cvt(*args); });
}

}  // namespace lowbit::cli
