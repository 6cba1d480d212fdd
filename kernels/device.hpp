// The GPU this process can use, if any. Host code only; no CUDA headers needed by callers.
#pragma once

#include <optional>
#include <string>

namespace lowbit::kernels {

struct GpuInfo {
  std::string name;          // as the driver reports it, e.g. "NVIDIA H200"
  std::string arch;          // "sm_90"
  std::string driver;        // kernel module and driver API versions, e.g. "580.159.04, CUDA 13.0"
  std::string runtime;       // CUDA runtime version the program was built with
  int multiprocessors = 0;
};

// The first GPU, or nothing when none is present or the driver is missing (callers skip).
std::optional<GpuInfo> first_gpu();

// Throws std::runtime_error naming the call and CUDA's error string when status is not success.
void check_cuda(int status, const char* what);

}  // namespace lowbit::kernels
