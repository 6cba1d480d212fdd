#include "kernels/random_fill.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/device.hpp"

namespace lowbit::kernels {
namespace {

__device__ inline std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ inline float uniform(std::uint64_t seed, std::uint64_t i) { return float(mix(seed ^ mix(i)) >> 40) * 0x1p-24f; }

template <class T>
__global__ void fill(T* x, std::size_t count, int dim, std::uint64_t seed, float amplitude) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < count; i += std::size_t(gridDim.x) * blockDim.x) {
    const float bias = amplitude * (2 * uniform(seed + 1, std::uint64_t(i % std::size_t(dim))) - 1);
    float noise = -2.0f;
    for (int k = 0; k < 4; ++k) noise += uniform(seed, 4 * i + std::uint64_t(k));
    if constexpr (sizeof(T) == 2 && std::is_same_v<T, __half>) x[i] = __float2half_rn(bias + noise);
    else x[i] = __float2bfloat16_rn(bias + noise);
  }
}

}  // namespace

void fill_attention_like(void* device, std::size_t count, int dim, bool bf16, std::uint64_t seed, float bias_amplitude) {
  if (bf16) fill<__nv_bfloat16><<<1024, 256>>>(static_cast<__nv_bfloat16*>(device), count, dim, seed, bias_amplitude);
  else fill<__half><<<1024, 256>>>(static_cast<__half*>(device), count, dim, seed, bias_amplitude);
  check_cuda(cudaGetLastError(), "fill_attention_like launch");
}

}  // namespace lowbit::kernels
