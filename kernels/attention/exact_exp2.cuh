// exp2_exact and log2_exact (emulation/attention/pipeline.hpp) on the GPU, bit for bit: CUDA's
// double exp2/log2 (at most 1 ulp of double from the truth, CUDA Math API), rounded to float; where
// that double lies within |midpoint| * 2^-50 of the rounding midpoint nearest it, the answer is read
// (attention::round_with_table) from the hard cases of emulation/attention/exact_rounding_table.hpp,
// which hold every input within 2^-48 of glibc's double (exact_rounding.hpp says why that covers the
// GPU's). An input the GPU flags that the table lacks keeps the rounded double: check_sage_bwd_gpu's exhaustive check of
// all 2^32 inputs would show it. Zero, infinite and NaN results are returned as rounded, as the
// emulator does. upload_exact_rounding_tables() must have run on the current device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "emulation/attention/exact_rounding.hpp"
#include "emulation/attention/exact_rounding_table.hpp"

namespace lowbit::kernels::attention {
// Internal linkage throughout: each translation unit that includes this header (relocatable device
// code is off) holds its own copy of the tables and uploads it.
namespace {

constexpr int kExp2HardCaseCount = int(sizeof(lowbit::attention::kExp2HardCases) / sizeof(lowbit::attention::RoundingCase));
constexpr int kLog2HardCaseCount = int(sizeof(lowbit::attention::kLog2HardCases) / sizeof(lowbit::attention::RoundingCase));

__constant__ lowbit::attention::RoundingCase exp2_hard_cases[kExp2HardCaseCount];
__constant__ lowbit::attention::RoundingCase log2_hard_cases[kLog2HardCaseCount];

// Copies the tables to this translation unit's constant memory (once per device and unit).
cudaError_t upload_exact_rounding_tables() {
  cudaError_t e = cudaMemcpyToSymbol(exp2_hard_cases, lowbit::attention::kExp2HardCases, sizeof exp2_hard_cases);
  if (e == cudaSuccess) e = cudaMemcpyToSymbol(log2_hard_cases, lowbit::attention::kLog2HardCases, sizeof log2_hard_cases);
  return e;
}

__device__ inline float exp2_exact(float x) {
  return lowbit::attention::round_with_table(exp2(double(x)), x, exp2_hard_cases, kExp2HardCaseCount,
                                             lowbit::attention::kDeviceMargin);
}
__device__ inline float log2_exact(float x) {
  return lowbit::attention::round_with_table(log2(double(x)), x, log2_hard_cases, kLog2HardCaseCount,
                                             lowbit::attention::kDeviceMargin);
}

}  // namespace
}  // namespace lowbit::kernels::attention
