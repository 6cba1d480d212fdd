// liblowbit_sage2.so on the GPU against the emulated sage2-8b pipeline (verification/sage2_emulated.hpp),
// every bit of the output codes and of the LSE, through the library's C interface only (as a ctypes
// caller reaches it): both head dimensions, causal and not, fp16 and bf16, both layouts, both exp2
// units, GQA, N off the block sizes, both schedules, both row sums; and its two steps (quantize, then the attention
// kernel) on a stream of the caller's against its one call. Exits 77 (skipped) where there is no GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "emulation/convert.hpp"
#include "kernels/attention/lowbit_sage2.h"
#include "kernels/attention/lowbit_sage2.hpp"
#include "kernels/device.hpp"
#include "verification/sage2_emulated.hpp"

using namespace lowbit;
namespace sage2 = lowbit::kernels::attention;

namespace {

void check(cudaError_t status, const char* what) { kernels::check_cuda(int(status), what); }

template <class T>
struct DeviceArray {
  T* data = nullptr;
  std::size_t count = 0;
  explicit DeviceArray(std::size_t n) : count(n) { check(cudaMalloc(&data, n * sizeof(T)), "cudaMalloc"); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    check(cudaMemcpy(data, host.data(), count * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy to the GPU");
  }
  ~DeviceArray() { cudaFree(data); }
  std::vector<T> download() const {
    std::vector<T> host(count);
    check(cudaMemcpy(host.data(), data, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy from the GPU");
    return host;
  }
};

// The library's call, failing the test with its text.
template <class Call>
void call(Call c) {
  char error[1024] = "";
  const int status = c(error, sizeof error);
  INFO(error);
  REQUIRE(status == LOWBIT_SAGE2_OK);
}

// Normal values (a few rows of K with a large common offset, which K's mean takes out) as codes.
std::vector<std::uint16_t> random_codes(const Format& format, std::size_t count, float offset, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::uint16_t> codes(count);
  for (std::uint16_t& c : codes) c = std::uint16_t(encode(format, normal(rng) + offset));
  return codes;
}

// How many of two equally long arrays' elements differ in any bit, and the first such.
template <class T>
std::string differences(const std::vector<T>& gpu, const std::vector<T>& expected, const char* name) {
  std::size_t count = 0, first = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (std::memcmp(&gpu[i], &expected[i], sizeof(T)) != 0 && count++ == 0) first = i;
  if (gpu.size() != expected.size()) return std::string(name) + ": sizes differ";
  if (count == 0) return "";
  std::ostringstream os;
  os << name << ": " << count << " of " << gpu.size() << " differ, the first at " << first;
  return os.str();
}

}  // namespace

TEST_CASE("liblowbit_sage2 on the GPU equals the emulated sage2-8b pipeline, every bit") {
  const std::vector<lowbit_sage2_problem> problems = {
      {2, 4, 2, 300, 128, 0, LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL},
      {2, 4, 2, 300, 128, 1, LOWBIT_SAGE2_BF16, LOWBIT_SAGE2_BNHD, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL},
      {1, 2, 2, 257, 64, 0, LOWBIT_SAGE2_BF16, LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_EXP2_POLYNOMIAL, LOWBIT_SAGE2_SERIAL},
      {1, 4, 1, 384, 64, 1, LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BNHD, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL},
      {1, 2, 1, 512, 128, 1, LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_OVERLAPPED},
      {1, 2, 2, 200, 64, 0, LOWBIT_SAGE2_BF16, LOWBIT_SAGE2_BNHD, LOWBIT_SAGE2_EXP2_POLYNOMIAL, LOWBIT_SAGE2_OVERLAPPED},
      {2, 4, 2, 300, 128, 1, LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL,
       LOWBIT_SAGE2_ROW_SUM_PV},
      {1, 2, 2, 520, 128, 0, LOWBIT_SAGE2_BF16, LOWBIT_SAGE2_BNHD, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL,
       LOWBIT_SAGE2_ROW_SUM_PV},
      {1, 4, 1, 384, 64, 1, LOWBIT_SAGE2_BF16, LOWBIT_SAGE2_BHND, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL,
       LOWBIT_SAGE2_ROW_SUM_PV},
      {1, 2, 2, 257, 64, 0, LOWBIT_SAGE2_FP16, LOWBIT_SAGE2_BNHD, LOWBIT_SAGE2_EXP2_SM90_EX2, LOWBIT_SAGE2_SERIAL,
       LOWBIT_SAGE2_ROW_SUM_PV},
  };
  std::mt19937_64 rng(0x5A6E2C);
  for (const lowbit_sage2_problem& c : problems) {
    const sage2::Sage2Problem p = sage2::to_sage2_problem(c);
    const Format& format = c.dtype == LOWBIT_SAGE2_BF16 ? formats::bf16 : formats::fp16;
    const std::vector<std::uint16_t> q = random_codes(format, p.elements(p.heads_q), 0.0f, rng),
                                     k = random_codes(format, p.elements(p.heads_kv), 1.5f, rng),
                                     v = random_codes(format, p.elements(p.heads_kv), 0.0f, rng);
    const verification::Sage2Emulated emulated = verification::emulate_sage2(p, q, k, v);

    const DeviceArray<std::uint16_t> dq(q), dk(k), dv(v), out(q.size()), out_in_steps(q.size());
    const DeviceArray<float> lse(emulated.lse.size()), lse_in_steps(emulated.lse.size());
    lowbit_sage2_workspace* workspace = nullptr;
    call([&](char* e, std::size_t n) { return lowbit_sage2_workspace_create(&c, &workspace, e, n); });
    call([&](char* e, std::size_t n) {
      return lowbit_sage2_attention(workspace, dq.data, dk.data, dv.data, out.data, lse.data, 0, e, n);
    });
    cudaStream_t stream;
    check(cudaStreamCreate(&stream), "cudaStreamCreate");
    const auto handle = reinterpret_cast<std::uintptr_t>(stream);
    call([&](char* e, std::size_t n) { return lowbit_sage2_quantize(workspace, dq.data, dk.data, dv.data, handle, e, n); });
    call([&](char* e, std::size_t n) {
      return lowbit_sage2_attention_quantized(workspace, out_in_steps.data, lse_in_steps.data, handle, e, n);
    });
    check(cudaStreamSynchronize(stream), "the library's kernels");
    check(cudaDeviceSynchronize(), "the library's kernels");
    cudaStreamDestroy(stream);
    lowbit_sage2_workspace_destroy(workspace);

    INFO("problem: batch " << c.batch << ", heads " << c.heads_q << "/" << c.heads_kv << ", N " << c.tokens << ", d "
                           << c.head_dim << ", causal " << c.causal << ", dtype " << c.dtype << ", layout " << c.layout
                           << ", exp2 " << c.exp2 << ", schedule " << c.schedule << ", row sum " << c.row_sum);
    CHECK(differences(out.download(), emulated.out, "output") == "");
    CHECK(differences(lse.download(), emulated.lse, "lse") == "");
    CHECK(differences(out_in_steps.download(), emulated.out, "output in two steps") == "");
    CHECK(differences(lse_in_steps.download(), emulated.lse, "lse in two steps") == "");
  }
}

int main(int argc, char** argv) {
  if (!lowbit::kernels::first_gpu()) {
    std::puts("test_sage2_c_api_gpu: no GPU: skipped");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
