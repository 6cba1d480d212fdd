// lowbit verify-cvt: every float32 bit pattern converted on the GPU and by the emulator, code
// for code.
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
#include "numerics/parallel.hpp"

namespace lowbit::cli {
namespace {

using kernels::CvtTarget;

// The emulator's settings for what each GPU conversion computes.
struct CvtCase {
  CvtTarget target;
  Format format;
  ConversionOptions options;
};

constexpr ConversionOptions options(Rounding r, Overflow o) { return {r, o}; }

const CvtCase kCases[] = {
    {CvtTarget::e4m3_satfinite, formats::e4m3, options(Rounding::nearest_even, Overflow::saturate)},
    {CvtTarget::e4m3_nosat, formats::e4m3, options(Rounding::nearest_even, Overflow::nan)},
    {CvtTarget::e5m2_satfinite, formats::e5m2, options(Rounding::nearest_even, Overflow::saturate)},
    {CvtTarget::e5m2_nosat, formats::e5m2, options(Rounding::nearest_even, Overflow::inf)},
    {CvtTarget::e2m3, formats::e2m3, options(Rounding::nearest_even, Overflow::saturate)},
    {CvtTarget::e3m2, formats::e3m2, options(Rounding::nearest_even, Overflow::saturate)},
    {CvtTarget::e2m1, formats::e2m1, options(Rounding::nearest_even, Overflow::saturate)},
    {CvtTarget::bf16_rn, formats::bf16, options(Rounding::nearest_even, Overflow::inf)},
    {CvtTarget::f16_rn, formats::fp16, options(Rounding::nearest_even, Overflow::inf)},
    {CvtTarget::ue8m0_rz, formats::ue8m0, options(Rounding::toward_zero, Overflow::saturate)},
    {CvtTarget::ue8m0_rp, formats::ue8m0, options(Rounding::toward_positive, Overflow::saturate)},
};

struct Mismatch {
  std::uint32_t input;
  Code gpu, emulator;
  friend bool operator<(const Mismatch& a, const Mismatch& b) { return a.input < b.input; }
};

struct CaseResult {
  std::uint64_t inputs = 0, mismatches = 0;
  std::vector<Mismatch> first;  // the smallest inputs that mismatch, in order
  double seconds = 0;
};

struct Args {
  std::vector<std::string> formats;
  std::uint32_t stride = 1;
  int keep = 8;
  std::string output;
};

constexpr std::size_t kChunk = std::size_t{1} << 27;  // inputs per GPU call
constexpr std::size_t kBlock = 4096;                  // inputs per CPU work item

CaseResult compare(kernels::CvtRunner& runner, const kernels::CvtKernel& kernel, const CvtCase& c, const Args& args) {
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t total = ((std::uint64_t{1} << 32) + args.stride - 1) / args.stride;
  std::vector<std::uint16_t> gpu(std::min<std::uint64_t>(kChunk, total));
  const std::size_t keep = std::size_t(args.keep);
  std::vector<std::uint64_t> counts(worker_count(), 0);
  std::vector<std::vector<Mismatch>> kept(worker_count());
  for (std::uint64_t done = 0; done < total; done += gpu.size()) {
    const std::size_t n = std::size_t(std::min<std::uint64_t>(gpu.size(), total - done));
    const auto first = std::uint32_t(done * args.stride);
    runner.convert(kernel.target, first, args.stride, std::span(gpu).first(n));
    parallel_for((n + kBlock - 1) / kBlock, [&](std::size_t block, unsigned worker) {
      thread_local std::vector<float> in(kBlock);
      thread_local std::vector<Code> out(kBlock);
      const std::size_t begin = block * kBlock, count = std::min(kBlock, n - begin);
      for (std::size_t i = 0; i < count; ++i) in[i] = std::bit_cast<float>(std::uint32_t(first + (begin + i) * args.stride));
      encode(c.format, std::span(in).first(count), std::span(out).first(count), c.options);
      for (std::size_t i = 0; i < count; ++i)
        if (out[i] != gpu[begin + i]) {
          ++counts[worker];
          if (kept[worker].size() < keep) kept[worker].push_back({std::bit_cast<std::uint32_t>(in[i]), gpu[begin + i], out[i]});
        }
    });
  }
  CaseResult r;
  r.inputs = total;
  for (auto n : counts) r.mismatches += n;
  // Each worker met its items in increasing order, so the smallest `keep` overall are among these.
  for (auto& k : kept) r.first.insert(r.first.end(), k.begin(), k.end());
  std::sort(r.first.begin(), r.first.end());
  if (r.first.size() > keep) r.first.resize(keep);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::string emulator_text(const CvtCase& c) {
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
    const auto& c = *std::find_if(std::begin(kCases), std::end(kCases), [&](const auto& x) { return x.target == kernel.target; });
    const CaseResult r = compare(runner, kernel, c, args);
    all_mismatches += r.mismatches;
    fmt::print("{:<15} {:<70} {:>11} {:>10} {:>7.1f}\n", kernel.name, kernel.source, r.inputs, r.mismatches, r.seconds);
    nlohmann::ordered_json first = nlohmann::ordered_json::array();
    for (const auto& m : r.first)
      first.push_back({{"input", fmt::format("0x{:08x}", m.input)},
                       {"gpu", hex_code(c.format, m.gpu)},
                       {"emulator", hex_code(c.format, m.emulator)}});
    for (const auto& m : r.first)
      fmt::print("    input 0x{:08x} ({}): gpu {} emulator {}\n", m.input, value_text(std::bit_cast<float>(m.input)),
                 hex_code(c.format, m.gpu), hex_code(c.format, m.emulator));
    results.push_back({{"conversion", kernel.name},
                       {"gpu_source", kernel.source},
                       {"emulator", emulator_text(c)},
                       {"inputs", r.inputs},
                       {"mismatches", r.mismatches},
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
