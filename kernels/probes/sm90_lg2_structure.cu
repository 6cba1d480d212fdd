// sm90_lg2_structure: what MUFU.LG2 (lg2.approx.ftz.f32) computes, as data for a bit-exact model
// (the way sm90_ex2_structure recovered MUFU.EX2). A research program, run on a GPU:
//   sm90_lg2_structure OUT_DIR
// 1. T[i] = lg2(1 + i 2^-23), i = 0 .. 2^23 - 1 (the mantissas of [1, 2)); the finest fixed-point
//    grid 2^-k (k <= 60) that holds every T[i], and OUT_DIR/sm90_lg2_mantissa.delta: the
//    differences of consecutive T[i] 2^k as little-endian int16 (the first against 0), when
//    they fit.
// 2. Every normal x >= 2^-126, x = 2^e (1 + i 2^-23), against float(e + T[i]) rounded to nearest
//    even, toward zero and toward -inf (e + T[i] is exact in double): mismatches per exponent.
// 3. [1/2, 1), where that rule fails: OUT_DIR/sm90_lg2_half_to_one.delta, bits(lg2(x)) minus bits of
//    float(-1 + T[i]) rounded toward zero, x = (1 + i 2^-23) / 2, as little-endian int32.
// Prints its findings (and writes them to OUT_DIR/sm90_lg2_structure.txt); exit 0 when it ran.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/probes/probe_report.hpp"

namespace {

constexpr std::uint32_t kMantissas = 1u << 23;
constexpr int kModes = 3;  // nearest even, toward zero, toward -inf
constexpr int kExponents = 254;  // biased exponents 1 .. 254

__device__ float lg2_approx(float x) {
  float r;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

__global__ void mantissa_table(float* t) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kMantissas) t[i] = lg2_approx(__uint_as_float(0x3f800000u | i));
}

__device__ float rounded(double v, int mode) {
  return mode == 0 ? __double2float_rn(v) : mode == 1 ? __double2float_rz(v) : __double2float_rd(v);
}

// One thread per (biased exponent, mantissa); mismatches[(exponent - 1) * kModes + mode].
__global__ void sweep(const float* t, unsigned long long* mismatches) {
  const std::uint64_t u = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (u >= std::uint64_t(kExponents) * kMantissas) return;
  const int biased = int(u / kMantissas) + 1;
  const std::uint32_t i = std::uint32_t(u % kMantissas);
  const float x = __uint_as_float((std::uint32_t(biased) << 23) | i);
  const float measured = lg2_approx(x);
  const double exact_sum = double(biased - 127) + double(t[i]);
  for (int mode = 0; mode < kModes; ++mode)
    if (__float_as_uint(rounded(exact_sum, mode)) != __float_as_uint(measured))
      atomicAdd(&mismatches[(biased - 1) * kModes + mode], 1ull);
}

// bits(lg2(x)) - bits(float(-1 + T[i]) toward zero), x = (1 + i 2^-23) / 2.
__global__ void half_to_one(const float* t, int* delta) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= kMantissas) return;
  const float measured = lg2_approx(__uint_as_float(0x3f000000u | i));
  delta[i] = int(__float_as_uint(measured)) - int(__float_as_uint(__double2float_rz(-1.0 + double(t[i]))));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: sm90_lg2_structure OUT_DIR\n");
    return 2;
  }
  const std::string out = argv[1];
  lowbit::probes::Report report{"sm90_lg2_structure", ""};
  const auto check = [&](cudaError_t e, const char* what) { report.check(e, what); };
  const auto say = [&](const std::string& line) { report.say(line); };

  float* table = nullptr;
  unsigned long long* mismatches = nullptr;
  check(cudaMalloc(&table, kMantissas * sizeof(float)), "cudaMalloc table");
  check(cudaMalloc(&mismatches, kExponents * kModes * sizeof(unsigned long long)), "cudaMalloc counts");
  check(cudaMemset(mismatches, 0, kExponents * kModes * sizeof(unsigned long long)), "cudaMemset");
  mantissa_table<<<kMantissas / 256, 256>>>(table);
  check(cudaGetLastError(), "mantissa_table");
  std::vector<float> t(kMantissas);
  check(cudaMemcpy(t.data(), table, kMantissas * sizeof(float), cudaMemcpyDeviceToHost), "copy table");

  // The finest grid 2^-k holding every T[i].
  int grid = -1;
  for (int k = 0; k <= 60 && grid < 0; ++k) {
    bool all = true;
    for (std::uint32_t i = 0; i < kMantissas && all; ++i) {
      const double scaled = std::ldexp(double(t[i]), k);
      all = scaled == std::floor(scaled);
    }
    if (all) grid = k;
  }
  say("T[0] = " + std::to_string(t[0]) + ", T[2^23 - 1] bits = " + std::to_string(*reinterpret_cast<std::uint32_t*>(&t[kMantissas - 1])));
  say(grid < 0 ? "fixed-point grid: none up to 2^-60" : "fixed-point grid: every T[i] is a multiple of 2^-" + std::to_string(grid));
  if (grid >= 0) {
    std::vector<std::int16_t> delta(kMantissas);
    long long previous = 0, lo = 0, hi = 0;
    bool fits = true, monotone = true;
    for (std::uint32_t i = 0; i < kMantissas; ++i) {
      const long long v = (long long)std::ldexp(double(t[i]), grid);
      const long long d = v - previous;
      lo = std::min(lo, d), hi = std::max(hi, d);
      fits = fits && d >= -32768 && d <= 32767;
      monotone = monotone && d >= 0;
      delta[i] = std::int16_t(d);
      previous = v;
    }
    say("consecutive differences of T[i] 2^" + std::to_string(grid) + ": " + std::to_string(lo) + " .. " + std::to_string(hi) +
        (monotone ? " (non-decreasing)" : " (not monotone)"));
    if (fits) {
      report.write_bytes(out + "/sm90_lg2_mantissa.delta", delta.data(), delta.size() * sizeof(std::int16_t));
    }
  }

  const std::uint64_t total = std::uint64_t(kExponents) * kMantissas;
  sweep<<<unsigned((total + 255) / 256), 256>>>(table, mismatches);
  check(cudaGetLastError(), "sweep");
  std::vector<unsigned long long> counts(kExponents * kModes);
  check(cudaMemcpy(counts.data(), mismatches, counts.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost), "copy counts");
  const char* names[kModes] = {"nearest-even", "toward-zero", "toward-minus-inf"};
  for (int mode = 0; mode < kModes; ++mode) {
    unsigned long long all = 0, at_least_one = 0;
    std::string per_exponent;
    for (int b = 1; b <= kExponents; ++b) {
      const unsigned long long c = counts[std::size_t((b - 1) * kModes + mode)];
      all += c;
      if (b >= 127) at_least_one += c;
      if (c != 0 && b >= 120 && b <= 160) per_exponent += " e=" + std::to_string(b - 127) + ":" + std::to_string(c);
    }
    say(std::string("float(e + T[i]) ") + names[mode] + ": " + std::to_string(all) + " mismatches of " + std::to_string(total) +
        " normal inputs (" + std::to_string(at_least_one) + " with x >= 1);" + per_exponent);
  }
  int* below = nullptr;
  check(cudaMalloc(&below, kMantissas * sizeof(int)), "cudaMalloc half_to_one");
  half_to_one<<<kMantissas / 256, 256>>>(table, below);
  check(cudaGetLastError(), "half_to_one");
  std::vector<int> d(kMantissas);
  check(cudaMemcpy(d.data(), below, kMantissas * sizeof(int), cudaMemcpyDeviceToHost), "copy half_to_one");
  cudaFree(below);
  std::uint32_t differ = 0, first = kMantissas;
  for (std::uint32_t i = 0; i < kMantissas; ++i)
    if (d[i] != 0) differ += 1, first = std::min(first, i);
  say("[1/2, 1): " + std::to_string(differ) + " of 2^23 differ from float(-1 + T[i]) toward zero" +
      (differ ? ", the first at i = " + std::to_string(first) : std::string()));
  report.write_bytes(out + "/sm90_lg2_half_to_one.delta", d.data(), d.size() * sizeof(int));

  report.save(out);
  cudaFree(table);
  cudaFree(mismatches);
  return 0;
}
