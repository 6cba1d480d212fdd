// sm90_rcp_structure: what MUFU.RCP (rcp.approx.ftz.f32, what 1.0f / x compiles to under
// --use_fast_math: FlashAttention-3's 1 / row sum) computes, as data for a bit-exact model.
// A research program, run on a GPU:
//   sm90_rcp_structure OUT_DIR
// 1. R[i] = rcp(1 + i 2^-23), i = 0 .. 2^23 - 1 (the mantissas of [1, 2)), against the correctly
//    rounded 1 / x (__frcp_rn): how many differ and by how many units in the last place, and
//    OUT_DIR/sm90_rcp_mantissa.delta: bits(R[i]) - bits(1 / x rounded to nearest) as int8.
// 2. Every normal x (both signs), x = +-2^e (1 + i 2^-23), against +-2^-e R[i] (flushed to +-0 where
//    that is below 2^-126): mismatches per exponent; and +-0, subnormals, +-inf, NaN.
// Prints its findings (and writes them to OUT_DIR/sm90_rcp_structure.txt); exit 0 when it ran.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/probes/probe_report.hpp"

namespace {

constexpr std::uint32_t kMantissas = 1u << 23;
constexpr int kExponents = 254;  // biased exponents 1 .. 254

__device__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

__global__ void mantissa_table(float* r, int* delta) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kMantissas) return;
  const float x = __uint_as_float(0x3f800000u | i);
  r[i] = rcp_approx(x);
  delta[i] = int(__float_as_uint(r[i])) - int(__float_as_uint(__frcp_rn(x)));
}

// The model: +-2^-e R[i], flushed to +-0 below 2^-126 (ldexpf is exact on normal results).
__device__ float modelled(float x, const float* r) {
  const std::uint32_t bits = __float_as_uint(x);
  const int e = int((bits >> 23) & 0xff) - 127;
  const float y = ldexpf(r[bits & (kMantissas - 1)], -e);
  const float flushed = fabsf(y) < 1.17549435e-38f ? 0.0f : y;
  return (bits >> 31) ? -flushed : flushed;
}

// One thread per (sign, biased exponent, mantissa); mismatches[biased - 1].
__global__ void sweep(const float* r, unsigned long long* mismatches) {
  const std::uint64_t u = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= 2ull * kExponents * kMantissas) return;
  const std::uint32_t sign = std::uint32_t(u / (std::uint64_t(kExponents) * kMantissas));
  const std::uint64_t v = u % (std::uint64_t(kExponents) * kMantissas);
  const int biased = int(v / kMantissas) + 1;
  const float x = __uint_as_float(sign << 31 | std::uint32_t(biased) << 23 | std::uint32_t(v % kMantissas));
  if (__float_as_uint(rcp_approx(x)) != __float_as_uint(modelled(x, r))) atomicAdd(&mismatches[biased - 1], 1ull);
}

__global__ void specials(const float* in, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = rcp_approx(in[i]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sm90_rcp_structure OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  lowbit::probes::Report report{"sm90_rcp_structure", ""};
  const auto check = [&](cudaError_t e, const char* what) { report.check(e, what); };
  const auto say = [&](const std::string& line) { report.say(line); };

  float* table = nullptr;
  int* delta = nullptr;
  unsigned long long* mismatches = nullptr;
  check(cudaMalloc(&table, kMantissas * sizeof(float)), "cudaMalloc table");
  check(cudaMalloc(&delta, kMantissas * sizeof(int)), "cudaMalloc delta");
  check(cudaMalloc(&mismatches, kExponents * sizeof(unsigned long long)), "cudaMalloc counts");
  check(cudaMemset(mismatches, 0, kExponents * sizeof(unsigned long long)), "cudaMemset");
  mantissa_table<<<kMantissas / 256, 256>>>(table, delta);
  check(cudaGetLastError(), "mantissa_table");
  std::vector<int> d(kMantissas);
  check(cudaMemcpy(d.data(), delta, kMantissas * sizeof(int), cudaMemcpyDeviceToHost), "copy delta");

  long long histogram[5] = {};  // <= -2, -1, 0, +1, >= +2
  for (int v : d) ++histogram[v <= -2 ? 0 : v >= 2 ? 4 : v + 2];
  say("R[i] - round-to-nearest 1/x in ulps over [1, 2): <=-2: " + std::to_string(histogram[0]) + ", -1: " +
      std::to_string(histogram[1]) + ", 0: " + std::to_string(histogram[2]) + ", +1: " + std::to_string(histogram[3]) +
      ", >=+2: " + std::to_string(histogram[4]));
  if (histogram[0] == 0 && histogram[4] == 0) {
    std::vector<std::int8_t> bytes(d.begin(), d.end());
    report.write_bytes(out + "/sm90_rcp_mantissa.delta", bytes.data(), bytes.size());
  }

  const std::uint64_t total = 2ull * kExponents * kMantissas;
  sweep<<<unsigned((total + 255) / 256), 256>>>(table, mismatches);
  check(cudaGetLastError(), "sweep");
  std::vector<unsigned long long> counts(kExponents);
  check(cudaMemcpy(counts.data(), mismatches, counts.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost), "copy counts");
  unsigned long long all = 0;
  std::string per_exponent;
  for (int b = 1; b <= kExponents; ++b) {
    all += counts[std::size_t(b - 1)];
    if (counts[std::size_t(b - 1)] != 0) per_exponent += " e=" + std::to_string(b - 127) + ":" + std::to_string(counts[std::size_t(b - 1)]);
  }
  say("+-2^-e R[i] (flushed below 2^-126): " + std::to_string(all) + " mismatches of " + std::to_string(total) +
      " normal inputs;" + per_exponent);

  const std::vector<float> in{0.0f, -0.0f, 1e-40f, -1e-40f, INFINITY, -INFINITY, NAN, 0x1p126f, 0x1.fffffep127f};
  float *din = nullptr, *dout = nullptr;
  check(cudaMalloc(&din, in.size() * sizeof(float)), "cudaMalloc specials");
  check(cudaMalloc(&dout, in.size() * sizeof(float)), "cudaMalloc specials");
  check(cudaMemcpy(din, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice), "copy specials");
  specials<<<1, 32>>>(din, dout, int(in.size()));
  std::vector<float> res(in.size());
  check(cudaMemcpy(res.data(), dout, res.size() * sizeof(float), cudaMemcpyDeviceToHost), "copy specials back");
  std::string line = "specials:";
  for (std::size_t i = 0; i < in.size(); ++i) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " rcp(%a) = %a;", double(in[i]), double(res[i]));
    line += buf;
  }
  say(line);

  report.save(out);
  cudaFree(table);
  cudaFree(delta);
  cudaFree(mismatches);
  cudaFree(din);
  cudaFree(dout);
  return 0;
}
