// SageBwd's kernels (kernels/attention/sage_bwd_gpu.hpp) against attention::sage_bwd of their
// Hopper twin, every fp32 bit of O, LSE, dQ, dK and dV, on sage_bwd_cases() (every preset, d = 64
// and 128, causal and not, tail tiles, fewer and more queries than keys, GQA). A failure prints,
// per tensor, how many values differ and the first with both bit patterns, and whether D differs.
// Exits 77 (skipped) where there is no GPU; what the kernels refuse is tested without one.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "kernels/device.hpp"
#include "tests/attention_gpu/sage_bwd_cases.hpp"

using namespace lowbit;
namespace gpu_bwd = lowbit::kernels::attention;

TEST_CASE("sage_bwd on the GPU equals the emulated Hopper twin, every bit") {
  for (const tests::SageBwdCase& c : tests::sage_bwd_cases()) {
    const tests::SageBwdInputs in = tests::make_sage_bwd_inputs(c, 0x5A6E + std::uint64_t(c.dim) + std::uint64_t(c.queries));
    const attention::SageBwdConfig twin = gpu_bwd::sage_bwd_hopper_twin(attention::sagebwd_preset(c.preset));
    gpu_bwd::SageBwdDiagnostics diagnostics;
    const attention::BackwardResult gpu = gpu_bwd::gpu_sage_bwd(twin, in.q, in.k, in.v, in.d_out, c.causal, &diagnostics);
    const attention::BackwardResult emulated = attention::sage_bwd(twin, in.q, in.k, in.v, in.d_out, c.causal);
    const tests::SageBwdVerdict verdict = tests::judge_sage_bwd(gpu, emulated, diagnostics, in.d_out);
    INFO(c.name() << "\n" << verdict.report);
    CHECK(verdict.equal);
  }
}

int main(int argc, char** argv) {
  if (!lowbit::kernels::first_gpu()) {
    std::puts("test_sage_bwd_gpu: no GPU: skipped");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
