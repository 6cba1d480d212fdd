// ex2.approx.ftz.f32 and steps::poly_exp2 on the GPU (exp2_probe.hpp).
#include "kernels/probes/exp2_probe.hpp"

#include <cuda_runtime.h>

#include <bit>
#include <stdexcept>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/sfu/ex2.hpp"
#include "kernels/device.hpp"

namespace lowbit::kernels {
namespace {

namespace steps = lowbit::attention::steps;

template <Exp2Implementation I>
__device__ inline float evaluate(float x) {
  if constexpr (I == Exp2Implementation::ex2_approx) return sfu::sm90_ex2(x);  // the instruction itself on the device
  else if constexpr (I == Exp2Implementation::poly_degree5) return steps::poly_exp2(x, steps::exp2_degree5());
  else return steps::poly_exp2(x, steps::exp2_degree6());
}

// Counters: [0] inputs, [1] normal results, [2..5] ulp buckets, [6] uncertain, [7] (max ulps << 32 | input).
constexpr int kCounters = 8;
constexpr float kSmallestNormal = 0x1p-126f;

// The float32 bit patterns of [lo, hi] ordered by value: index i -> pattern.
struct FloatRange {
  std::int64_t first = 0, count = 0;  // in the signed-magnitude-to-ordered key space
  __host__ __device__ static std::int64_t key(std::uint32_t bits) {
    return (bits & 0x80000000u) ? -std::int64_t(bits & 0x7fffffffu) - 1 : std::int64_t(bits);
  }
  __host__ __device__ static std::uint32_t bits(std::int64_t key) {
    return key < 0 ? std::uint32_t(-(key + 1)) | 0x80000000u : std::uint32_t(key);
  }
};

template <Exp2Implementation I>
__global__ void exp2_accuracy(FloatRange range, unsigned long long* counters) {
  unsigned long long local[kCounters - 1] = {};
  unsigned long long worst = 0;
  const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
  for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < range.count; i += stride) {
    const std::uint32_t input = FloatRange::bits(range.first + i);
    const float x = __uint_as_float(input);
    ++local[0];
    const double exact = exp2(double(x));
    const float reference = __double2float_rn(exact);
    if (!(reference >= kSmallestNormal)) continue;
    ++local[1];
    // The float rounding boundary nearest the double result: the midpoint of reference and its
    // neighbour on the side of exact.
    const float neighbour = exact >= double(reference) ? nextafterf(reference, 1e30f) : nextafterf(reference, 0.0f);
    const double midpoint = (double(reference) + double(neighbour)) / 2;
    if (fabs(exact - midpoint) <= 2 * (nextafter(fabs(exact), 1e300) - fabs(exact))) ++local[6];
    const float y = evaluate<I>(x);
    const std::uint32_t a = __float_as_uint(y), b = __float_as_uint(reference);
    const std::uint32_t ulps = (y != y || y < 0) ? 0xffffffffu : a > b ? a - b : b - a;
    ++local[1 + (ulps < 3 ? ulps : 3) + 1];
    const unsigned long long key = (unsigned long long)ulps << 32 | input;
    if (key > worst) worst = key;
  }
  for (int c = 0; c < kCounters - 1; ++c)
    if (local[c]) atomicAdd(&counters[c], local[c]);
  atomicMax(&counters[kCounters - 1], worst);
}

template <Exp2Implementation I>
__global__ void exp2_outputs(std::uint32_t first, std::uint32_t input_stride, std::uint32_t count, std::uint32_t* out) {
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride)
    out[i] = __float_as_uint(evaluate<I>(__uint_as_float(first + i * input_stride)));
}

template <Exp2Implementation I>
void launch_accuracy(FloatRange range, unsigned long long* counters) {
  exp2_accuracy<I><<<1024, 256>>>(range, counters);
}

}  // namespace

Exp2Accuracy measure_exp2(Exp2Implementation implementation, float lo, float hi) {
  if (!(lo <= hi)) throw std::invalid_argument("measure_exp2: lo must be <= hi (finite)");
  FloatRange range;
  range.first = FloatRange::key(std::bit_cast<std::uint32_t>(lo));
  range.count = FloatRange::key(std::bit_cast<std::uint32_t>(hi)) - range.first + 1;
  unsigned long long* counters = nullptr;
  check_cuda(cudaMalloc(&counters, kCounters * sizeof(unsigned long long)), "cudaMalloc (exp2 counters)");
  unsigned long long host[kCounters] = {};
  try {
    check_cuda(cudaMemset(counters, 0, kCounters * sizeof(unsigned long long)), "cudaMemset (exp2 counters)");
    switch (implementation) {
      case Exp2Implementation::ex2_approx: launch_accuracy<Exp2Implementation::ex2_approx>(range, counters); break;
      case Exp2Implementation::poly_degree5: launch_accuracy<Exp2Implementation::poly_degree5>(range, counters); break;
      case Exp2Implementation::poly_degree6: launch_accuracy<Exp2Implementation::poly_degree6>(range, counters); break;
    }
    check_cuda(cudaGetLastError(), "exp2_accuracy launch");
    check_cuda(cudaMemcpy(host, counters, sizeof host, cudaMemcpyDeviceToHost), "cudaMemcpy (exp2 counters)");
  } catch (...) {
    cudaFree(counters);
    throw;
  }
  cudaFree(counters);
  Exp2Accuracy a;
  a.inputs = host[0];
  a.normal_results = host[1];
  for (int u = 0; u < 4; ++u) a.ulps[u] = host[2 + u];
  a.uncertain_reference = host[6];
  a.max_ulps = std::uint32_t(host[7] >> 32);
  a.worst_input = std::uint32_t(host[7]);
  return a;
}

void device_exp2(Exp2Implementation implementation, std::uint32_t first, std::uint32_t stride,
                 std::span<std::uint32_t> out) {
  if (out.empty()) return;
  std::uint32_t* device = nullptr;
  check_cuda(cudaMalloc(&device, out.size_bytes()), "cudaMalloc (exp2 outputs)");
  const auto count = std::uint32_t(out.size());
  switch (implementation) {
    case Exp2Implementation::ex2_approx: exp2_outputs<Exp2Implementation::ex2_approx><<<4096, 256>>>(first, stride, count, device); break;
    case Exp2Implementation::poly_degree5: exp2_outputs<Exp2Implementation::poly_degree5><<<4096, 256>>>(first, stride, count, device); break;
    case Exp2Implementation::poly_degree6: exp2_outputs<Exp2Implementation::poly_degree6><<<4096, 256>>>(first, stride, count, device); break;
  }
  cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) status = cudaMemcpy(out.data(), device, out.size_bytes(), cudaMemcpyDeviceToHost);
  cudaFree(device);
  check_cuda(status, "exp2_outputs");
}

}  // namespace lowbit::kernels
