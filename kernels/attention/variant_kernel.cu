// The sage2-4b family's launch (variant_launch.hpp): the operands copied to the GPU, the kernel
// instance for the launch's choices (variant_kernel.cuh) run and timed, the output copied back.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention/variant_kernel.cuh"
#include "kernels/device.hpp"

namespace lowbit::kernels::attention {
namespace {

using variant::Kernel;
using variant::kBlockQ;
using variant::kWarps;
using variant::Params;

// Device copies of the host vectors, freed on destruction.
struct DeviceBuffers {
  std::vector<void*> owned;
  ~DeviceBuffers() {
    for (void* ptr : owned) cudaFree(ptr);
  }
  template <class T>
  T* copy(const std::vector<T>& host, const char* what) {
    if (host.empty()) return nullptr;
    void* ptr = nullptr;
    check_cuda(cudaMalloc(&ptr, host.size() * sizeof(T)), what);
    owned.push_back(ptr);
    check_cuda(cudaMemcpy(ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), what);
    return static_cast<T*>(ptr);
  }
  float* zeros(std::size_t count, const char* what) {
    void* ptr = nullptr;
    check_cuda(cudaMalloc(&ptr, count * sizeof(float)), what);
    owned.push_back(ptr);
    check_cuda(cudaMemset(ptr, 0, count * sizeof(float)), what);
    return static_cast<float*>(ptr);
  }
};

Kernel pick(const VariantLaunch& l) {
  switch (l.pv) {
    case PvInstruction::e4m3: return variant::kernel_for<PvInstruction::e4m3>(l.qk, l.head_dim, l.in_place);
    case PvInstruction::e5m2: return variant::kernel_for<PvInstruction::e5m2>(l.qk, l.head_dim, l.in_place);
    case PvInstruction::s8: return variant::kernel_for<PvInstruction::s8>(l.qk, l.head_dim, l.in_place);
    case PvInstruction::f16: return variant::kernel_for<PvInstruction::f16>(l.qk, l.head_dim, l.in_place);
  }
  throw std::logic_error("variant attention: unknown P V instruction");
}

}  // namespace

VariantOutput run_variant(const VariantLaunch& l) {
  if (auto why = l.validate()) throw std::invalid_argument("variant attention launch: " + *why);
  const Kernel kernel = pick(l);
  DeviceBuffers d;
  const std::size_t rows = std::size_t(l.batch) * std::size_t(l.heads) * std::size_t(l.tokens);
  Params p{};
  p.q = d.copy(l.q, "cudaMalloc/cudaMemcpy Q");
  p.k = d.copy(l.k, "cudaMalloc/cudaMemcpy K");
  p.q_scale = d.copy(l.q_scale, "cudaMalloc/cudaMemcpy Q scales");
  p.k_scale = d.copy(l.k_scale, "cudaMalloc/cudaMemcpy K scales");
  p.q_means = d.copy(l.q_means, "cudaMalloc/cudaMemcpy Q means");
  p.k_smoothed = d.copy(l.k_smoothed, "cudaMalloc/cudaMemcpy K'");
  p.v = d.copy(l.v, "cudaMalloc/cudaMemcpy V");
  p.v_scale = d.copy(l.v_scale, "cudaMalloc/cudaMemcpy V scales");
  p.v_mean = d.copy(l.v_mean, "cudaMalloc/cudaMemcpy V mean");
  p.lse_bias = d.copy(l.lse_bias, "cudaMalloc/cudaMemcpy LSE bias");
  p.out = d.zeros(rows * std::size_t(l.head_dim), "cudaMalloc output");
  p.lse = d.zeros(rows, "cudaMalloc LSE");
  p.heads = l.heads;
  p.kv_heads = l.kv_heads;
  p.tokens = l.tokens;
  p.keys = l.keys;
  p.tokens_padded = l.tokens_padded;
  p.keys_padded = l.keys_padded;
  p.mmas_per_flush = l.mmas_per_flush;
  p.p_toward_zero = l.p_toward_zero;
  p.p_per_block = l.p_per_block;
  p.p_target = l.p_target;
  p.smooth_q = l.smooth_q;
  p.smooth_v = l.smooth_v;
  p.causal = l.causal;
  p.descending = l.descending;
  p.causal_offset = l.causal_offset;
  p.softmax_scale_log2 = l.softmax_scale_log2;
  p.p_log2_scale = l.p_log2_scale;
  p.exp2 = l.exp2;
  const dim3 grid(unsigned(l.tokens_padded / kBlockQ), unsigned(l.batch * l.heads));
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start), "cudaEventRecord");
  kernel<<<grid, kWarps * 32>>>(p);
  check_cuda(cudaGetLastError(), "variant attention launch");
  check_cuda(cudaEventRecord(stop), "cudaEventRecord");
  check_cuda(cudaDeviceSynchronize(), "variant attention");
  VariantOutput out;
  check_cuda(cudaEventElapsedTime(&out.kernel_ms, start, stop), "cudaEventElapsedTime");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  out.output.resize(rows * std::size_t(l.head_dim));
  out.lse.resize(rows);
  check_cuda(cudaMemcpy(out.output.data(), p.out, out.output.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "cudaMemcpy output");
  check_cuda(cudaMemcpy(out.lse.data(), p.lse, out.lse.size() * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy LSE");
  return out;
}

}  // namespace lowbit::kernels::attention
