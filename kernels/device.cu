#include "kernels/device.hpp"

#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

namespace lowbit::kernels {
namespace {
__device__ double sm_clock_result_mhz;

__device__ inline unsigned long long global_timer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void sm_clock_kernel(unsigned long long window_ns) {
  const unsigned long long before = global_timer_ns();
  unsigned long long start;
  while ((start = global_timer_ns()) == before) {
  }
  const long long cycles0 = clock64();
  unsigned long long end;
  while ((end = global_timer_ns()) - start < window_ns) {
  }
  const long long cycles1 = clock64();
  sm_clock_result_mhz = double(cycles1 - cycles0) * 1e3 / double(end - start);
}

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

double sm_clock_mhz(std::uintptr_t stream, int window_us) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  sm_clock_kernel<<<1, 1, 0, s>>>(static_cast<unsigned long long>(window_us) * 1000u);
  check_cuda(cudaGetLastError(), "sm_clock_mhz: launch");
  double mhz = 0;
  check_cuda(cudaMemcpyFromSymbolAsync(&mhz, sm_clock_result_mhz, sizeof mhz, 0, cudaMemcpyDeviceToHost, s),
             "sm_clock_mhz: cudaMemcpyFromSymbolAsync");
  check_cuda(cudaStreamSynchronize(s), "sm_clock_mhz: cudaStreamSynchronize");
  return mhz;
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
