// check_sage_bwd_gpu: SageBwd's kernels (kernels/attention/sage_bwd_gpu.hpp) on the GPU.
//   1. every case of sage_bwd_cases() on inputs of fresh seeds (drawn at run time and printed):
//      O, LSE, dQ, dK, dV against attention::sage_bwd of the Hopper twin, every fp32 bit; a table
//      of the values compared and differing per case, then each differing case's report
//   2. the kernels' exp2_exact and log2_exact on all 2^32 float inputs against the emulator's
//      (emulation/attention/pipeline.hpp), NaN results equal to any NaN
//   3. the time of one head at N = 32768, d = 128 (sagebwd, full and causal; kernels alone and the
//      whole call with its copies)
// Exit 0: all equal; 1: any difference; 77: no GPU.
//   --quick          the d = 64 cases only; no exhaustive check, no timing
//   --seed S|fresh   the first case's seed (the others S + 1, ...); default fresh
//   --skip-exact     no exhaustive check;  --skip-timing  no timing
//   --threads T      the CPU side's threads (0: every core)
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/attention/exact_rounding.hpp"
#include "kernels/device.hpp"
#include "numerics/parallel.hpp"
#include "tests/attention_gpu/sage_bwd_cases.hpp"

namespace {

using namespace lowbit;
namespace gpu_bwd = lowbit::kernels::attention;

struct Options {
  bool quick = false, exact = true, timing = true;
  std::uint64_t seed = 0;
  bool fresh = true;
  unsigned threads = 0;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--quick") o.quick = true, o.exact = false, o.timing = false;
    else if (a == "--skip-exact") o.exact = false;
    else if (a == "--skip-timing") o.timing = false;
    else if (a == "--threads") o.threads = unsigned(std::stoul(value()));
    else if (a == "--seed") {
      const std::string s = value();
      o.fresh = s == "fresh";
      if (!o.fresh) o.seed = std::stoull(s);
    } else throw std::invalid_argument("unknown option " + a + " (--quick, --seed S|fresh, --skip-exact, --skip-timing, --threads T)");
  }
  if (o.fresh) o.seed = (std::uint64_t(std::random_device{}()) << 32) | std::random_device{}();
  return o;
}

bool check_cases(const Options& o) {
  fmt::print("1. sage_bwd on the GPU against the emulated Hopper twin, every fp32 bit (seeds {}, {} + 1, ...)\n", o.seed, o.seed);
  fmt::print("{:<48} {:>20} {:>12} {:>12}\n", "case", "seed", "compared", "differ");
  bool all_equal = true;
  std::string reports;
  std::uint64_t seed = o.seed;
  for (const tests::SageBwdCase& c : tests::sage_bwd_cases()) {
    if (o.quick && c.dim != 64) continue;
    const tests::SageBwdInputs in = tests::make_sage_bwd_inputs(c, seed);
    const attention::SageBwdConfig twin = gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset(c.preset));
    gpu_bwd::SageBwdDiagnostics diagnostics;
    const attention::BackwardResult gpu = gpu_bwd::gpu_sage_bwd(twin, in.q, in.k, in.v, in.d_out, c.causal, &diagnostics);
    const attention::BackwardResult emulated = attention::sage_bwd(twin, in.q, in.k, in.v, in.d_out, c.causal, o.threads);
    const tests::SageBwdVerdict verdict = tests::judge_sage_bwd(gpu, emulated, diagnostics, in.d_out);
    std::uint64_t compared = 0, differ = 0;
    for (const auto& t : attention::compare_bits(gpu, emulated)) compared += t.compared, differ += t.differ;
    fmt::print("{:<48} {:>20} {:>12} {:>12}\n", c.name(), seed, compared, differ);
    std::fflush(stdout);
    if (!verdict.equal) reports += fmt::format("{} (seed {}):\n{}", c.name(), seed, verdict.report);
    all_equal = all_equal && verdict.equal;
    ++seed;
  }
  if (!reports.empty()) fmt::print("differences:\n{}", reports);
  fmt::print("cases: {}\n\n", all_equal ? "PASS (every bit equal)" : "FAIL");
  return all_equal;
}

bool check_exact_functions(const Options& o) {
  fmt::print("2. exp2_exact and log2_exact on the GPU, all 2^32 inputs, against the emulator's\n");
  bool all_equal = true;
  constexpr std::uint64_t kChunk = std::uint64_t(1) << 28;
  for (attention::ExactFunction f : {attention::ExactFunction::exp2, attention::ExactFunction::log2}) {
    std::uint64_t differ = 0;
    std::string examples;
    std::vector<std::uint32_t> device(kChunk), host(kChunk);
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t first = 0; first < (std::uint64_t(1) << 32); first += kChunk) {
      gpu_bwd::device_exact_function(f, std::uint32_t(first), device);
      constexpr std::size_t kBlock = 1 << 20;
      parallel_for(kChunk / kBlock, o.threads, [&](std::size_t b, unsigned) {
        for (std::size_t i = b * kBlock; i < (b + 1) * kBlock; ++i)
          host[i] = std::bit_cast<std::uint32_t>(attention::exact(f, std::bit_cast<float>(std::uint32_t(first + i))));
      });
      for (std::size_t i = 0; i < kChunk; ++i) {
        const float a = std::bit_cast<float>(device[i]), b = std::bit_cast<float>(host[i]);
        if (device[i] == host[i] || (std::isnan(a) && std::isnan(b))) continue;
        if (differ++ < 10)
          examples += fmt::format("    x = {:#010x} ({:a}): gpu {:#010x} ({:a}), emulator {:#010x} ({:a})\n",
                                  std::uint32_t(first + i), double(std::bit_cast<float>(std::uint32_t(first + i))),
                                  device[i], double(a), host[i], double(b));
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    fmt::print("  {}: 4294967296 inputs, {} differ ({:.1f} s)\n{}", attention::to_string(f), differ, seconds, examples);
    all_equal = all_equal && differ == 0;
  }
  fmt::print("exact functions: {}\n\n", all_equal ? "PASS (every input equal)" : "FAIL");
  return all_equal;
}

void time_long_head() {
  fmt::print("3. one head, N = 32768, d = 128, sagebwd (Hopper twin): time\n");
  fmt::print("{:<8} {:>14} {:>22}\n", "mask", "kernels (ms)", "call with copies (ms)");
  tests::SageBwdCase c{"sagebwd", 128, 32768, 32768, 1, 1, false};
  const tests::SageBwdInputs in = tests::make_sage_bwd_inputs(c, 1);
  const attention::SageBwdConfig twin = gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset(c.preset));
  for (bool causal : {false, true}) {
    gpu_bwd::SageBwdDiagnostics diagnostics;
    gpu_bwd::gpu_sage_bwd(twin, in.q, in.k, in.v, in.d_out, causal, &diagnostics);  // warm-up
    const auto start = std::chrono::steady_clock::now();
    gpu_bwd::gpu_sage_bwd(twin, in.q, in.k, in.v, in.d_out, causal, &diagnostics);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    fmt::print("{:<8} {:>14.1f} {:>22.1f}\n", causal ? "causal" : "full", diagnostics.kernel_milliseconds, ms);
  }
  fmt::print("\n");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    const auto gpu = lowbit::kernels::first_gpu();
    if (!gpu) {
      std::puts("check_sage_bwd_gpu: no GPU: skipped");
      return 77;
    }
    fmt::print("GPU: {} ({}), driver {}\n\n", gpu->name, gpu->arch, gpu->driver);
    bool pass = check_cases(o);
    if (o.exact) pass = check_exact_functions(o) && pass;
    if (o.timing) time_long_head();
    fmt::print("check_sage_bwd_gpu: {}\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "check_sage_bwd_gpu: error: " << e.what() << "\n";
    return 2;
  }
}
