// The GPU this process can use, if any. Host code only; no CUDA headers needed by callers.
#pragma once

#include <cstdint>
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

// The clock of an SM in MHz, measured there now: one thread counts clock64 cycles from one step of
// %globaltimer to the first step at least window_us later (the timer steps about every 32 ns to 1 us,
// so both ends are edges and the error is the loop's few cycles). Launched on `stream` (a
// cudaStream_t; 0: the default stream) after the work queued there, and waited for: what a
// benchmark reads after each timed launch, to know the clock the launch ended at. Throws
// std::runtime_error naming the CUDA call that failed.
double sm_clock_mhz(std::uintptr_t stream = 0, int window_us = 50);

}  // namespace lowbit::kernels
