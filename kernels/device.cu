#include "kernels/device.hpp"

#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace lowbit::kernels {
namespace {
std::string version_text(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

// The kernel module's version ("580.159.04") from Linux's /proc, or empty elsewhere.
std::string kernel_module_version() {
  std::ifstream in("/proc/driver/nvidia/version");
  std::string line;
  std::getline(in, line);
  std::smatch m;
  return std::regex_search(line, m, std::regex(R"(\s(\d+\.\d+(\.\d+)?)\s)")) ? m[1].str() : "";
}
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
  const std::string module = kernel_module_version();
  info.driver = (module.empty() ? "" : module + ", ") + "CUDA " + version_text(driver);
  info.runtime = version_text(runtime);
  return info;
}

}  // namespace lowbit::kernels
