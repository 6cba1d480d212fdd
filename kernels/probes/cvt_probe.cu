// Conversion kernels: the hardware cvt instruction where sm_90a has one, otherwise the CUDA
// headers' device conversion (a software sequence on sm_90a). ptxas rejects the fp6, fp4 and
// ue8m0 cvt forms for sm_90a ("not supported on .target 'sm_90a'"), and the e4m3x2/e5m2x2 forms
// without .satfinite ("'.satfinite' modifier required"); the SASS dump of each kernel
// (docs/gpu-probes.md) shows which path it took.
#include "kernels/probes/cvt_probe.hpp"

#include <array>
#include <stdexcept>

#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "kernels/device.hpp"

namespace lowbit::kernels {
namespace {

struct CodePair {
  std::uint16_t lo, hi;
};

// PTX cvt of the x2 kind packs input a in the upper and input b in the lower half of d.
template <CvtTarget T>
__device__ CodePair convert_pair(float lo, float hi) {
  if constexpr (T == CvtTarget::e4m3_satfinite || T == CvtTarget::e5m2_satfinite) {
    std::uint16_t packed;
    if constexpr (T == CvtTarget::e4m3_satfinite)
      asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
    else
      asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(hi), "f"(lo));
    return {std::uint16_t(packed & 0xff), std::uint16_t(packed >> 8)};
  } else if constexpr (T == CvtTarget::bf16_rn || T == CvtTarget::f16_rn) {
    std::uint32_t packed;
    if constexpr (T == CvtTarget::bf16_rn)
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    else
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
    return {std::uint16_t(packed & 0xffff), std::uint16_t(packed >> 16)};
  } else {
    auto one = [](float x) -> std::uint16_t {
      if constexpr (T == CvtTarget::e4m3_nosat) return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3);
      if constexpr (T == CvtTarget::e5m2_nosat) return __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
      if constexpr (T == CvtTarget::e2m3) return __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest);
      if constexpr (T == CvtTarget::e3m2) return __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest);
      if constexpr (T == CvtTarget::e2m1) return __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest);
      if constexpr (T == CvtTarget::ue8m0_rz) return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero);
      if constexpr (T == CvtTarget::ue8m0_rp) return __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf);
    };
    return {one(lo), one(hi)};
  }
}

// Thread p converts inputs 2p and 2p + 1 of the sequence first + i * stride.
template <CvtTarget T>
__global__ void cvt_kernel(std::uint32_t first, std::uint32_t stride, std::uint32_t count, std::uint16_t* out) {
  const std::uint32_t pairs = (count + 1) / 2;
  for (std::uint32_t p = blockIdx.x * blockDim.x + threadIdx.x; p < pairs; p += gridDim.x * blockDim.x) {
    const std::uint32_t i = 2 * p;
    const float lo = __uint_as_float(first + i * stride);
    const float hi = __uint_as_float(first + (i + 1) * stride);
    const CodePair codes = convert_pair<T>(lo, hi);
    out[i] = codes.lo;
    if (i + 1 < count) out[i + 1] = codes.hi;
  }
}

using Launch = void (*)(std::uint32_t, std::uint32_t, std::uint32_t, std::uint16_t*);

template <CvtTarget T>
void launch(std::uint32_t first, std::uint32_t stride, std::uint32_t count, std::uint16_t* out) {
  constexpr int threads = 256;
  const std::uint32_t blocks = std::min<std::uint32_t>((count / 2 + threads) / threads, 65536);
  cvt_kernel<T><<<blocks, threads>>>(first, stride, count, out);
}

struct Entry {
  CvtKernel kernel;
  Launch launch;
};

constexpr std::array kEntries{
    Entry{{CvtTarget::e4m3_satfinite, "e4m3-satfinite", "PTX cvt.rn.satfinite.e4m3x2.f32"}, launch<CvtTarget::e4m3_satfinite>},
    Entry{{CvtTarget::e4m3_nosat, "e4m3-nosat", "cuda_fp8.h __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3)"},
          launch<CvtTarget::e4m3_nosat>},
    Entry{{CvtTarget::e5m2_satfinite, "e5m2-satfinite", "PTX cvt.rn.satfinite.e5m2x2.f32"}, launch<CvtTarget::e5m2_satfinite>},
    Entry{{CvtTarget::e5m2_nosat, "e5m2-nosat", "cuda_fp8.h __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2)"},
          launch<CvtTarget::e5m2_nosat>},
    Entry{{CvtTarget::e2m3, "e2m3", "cuda_fp6.h __nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest)"},
          launch<CvtTarget::e2m3>},
    Entry{{CvtTarget::e3m2, "e3m2", "cuda_fp6.h __nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest)"},
          launch<CvtTarget::e3m2>},
    Entry{{CvtTarget::e2m1, "e2m1", "cuda_fp4.h __nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest)"},
          launch<CvtTarget::e2m1>},
    Entry{{CvtTarget::bf16_rn, "bf16-rn", "PTX cvt.rn.bf16x2.f32"}, launch<CvtTarget::bf16_rn>},
    Entry{{CvtTarget::f16_rn, "f16-rn", "PTX cvt.rn.f16x2.f32"}, launch<CvtTarget::f16_rn>},
    Entry{{CvtTarget::ue8m0_rz, "ue8m0-rz", "cuda_fp8.h __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero)"},
          launch<CvtTarget::ue8m0_rz>},
    Entry{{CvtTarget::ue8m0_rp, "ue8m0-rp", "cuda_fp8.h __nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf)"},
          launch<CvtTarget::ue8m0_rp>},
};

const std::array<CvtKernel, kEntries.size()> kKernels = [] {
  std::array<CvtKernel, kEntries.size()> kernels{};
  for (std::size_t i = 0; i < kEntries.size(); ++i) kernels[i] = kEntries[i].kernel;
  return kernels;
}();

}  // namespace

std::span<const CvtKernel> cvt_kernels() { return kKernels; }

CvtRunner::CvtRunner(std::size_t capacity) : capacity_(capacity) {
  check_cuda(cudaMalloc(&device_codes_, capacity * sizeof(std::uint16_t)), "cudaMalloc (conversion codes)");
}

CvtRunner::~CvtRunner() { cudaFree(device_codes_); }

void CvtRunner::convert(CvtTarget target, std::uint32_t first, std::uint32_t stride, std::span<std::uint16_t> out) {
  if (out.size() > capacity_ || out.size() > 0xffffffffu)
    throw std::invalid_argument("CvtRunner::convert: " + std::to_string(out.size()) + " inputs exceed the capacity " +
                                std::to_string(capacity_));
  for (const auto& e : kEntries)
    if (e.kernel.target == target) {
      e.launch(first, stride, std::uint32_t(out.size()), device_codes_);
      check_cuda(cudaGetLastError(), "conversion kernel launch");
      check_cuda(cudaMemcpy(out.data(), device_codes_, out.size_bytes(), cudaMemcpyDeviceToHost),
                 "cudaMemcpy (conversion codes)");
      return;
    }
  throw std::invalid_argument("CvtRunner::convert: unknown target");
}

}  // namespace lowbit::kernels
