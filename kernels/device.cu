#include "kernels/device.hpp"

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace lowbit::kernels {
namespace {
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }
}  // namespace

void check_cuda(int status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(static_cast<cudaError_t>(status)));
}

std::optional<GpuInfo> first_gpu() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) return std::nullopt;
  GpuInfo info;
  info.name = prop.name;
  info.arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  info.multiprocessors = prop.multiProcessorCount;
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  info.driver = version_text(driver);
  info.runtime = version_text(runtime);
  return info;
}

}  // namespace lowbit::kernels
