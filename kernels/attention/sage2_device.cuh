// What the SageAttention2-8b kernels share (kernels/attention/*.cu): the recipe's names, the
// 16-bit input and output types as fp32, and the launch check. Everything here is in an anonymous
// namespace: each kernel's translation unit has its own copy.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "kernels/attention/sage2_kernels.cuh"
#include "kernels/device.hpp"

namespace lowbit::kernels::attention::detail {
namespace {

namespace steps = lowbit::attention::steps;
using lowbit::attention::KvOrder;
using lowbit::attention::Sage2HopperRecipe;
using lowbit::attention::sage2_8b_hopper;

template <class T>
__device__ inline float to_float(T x);
template <>
__device__ inline float to_float(__half x) { return __half2float(x); }
template <>
__device__ inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// The CUDA type of an output format.
template <DType T>
using OutputOf = std::conditional_t<T == DType::fp16, __half, __nv_bfloat16>;

template <class T>
__device__ inline T from_float(float x);
template <>
__device__ inline __half from_float(float x) { return __float2half_rn(x); }
template <>
__device__ inline __nv_bfloat16 from_float(float x) { return __float2bfloat16_rn(x); }

// Two adjacent outputs, each rounded to nearest even, in one 4-byte store.
__device__ inline void store_pair(__half* at, float a, float b) {
  *reinterpret_cast<__half2*>(at) = __floats2half2_rn(a, b);
}
__device__ inline void store_pair(__nv_bfloat16* at, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(at) = __floats2bfloat162_rn(a, b);
}

// Two adjacent 16-bit values, one 4-byte load.
template <class T>
using PairOf = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;

// Every row of a tensor (rows `stride` elements apart from `first`) starts at a multiple of `bytes`:
// what a kernel's loads of `bytes` a row piece need (else it reads element by element).
template <class T>
__device__ inline bool rows_aligned(const T* first, long long stride, int bytes) {
  return reinterpret_cast<std::uintptr_t>(first) % bytes == 0 && stride * static_cast<long long>(sizeof(T)) % bytes == 0;
}

void check_launch(const char* what) { check_cuda(cudaGetLastError(), what); }

}  // namespace
}  // namespace lowbit::kernels::attention::detail
