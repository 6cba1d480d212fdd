// GPU conversions of float32 inputs, for exhaustive comparison with the emulator's encode().
// Host code only; no CUDA headers needed by callers.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace lowbit::kernels {

// One conversion as a kernel performs it on sm_90a.
enum class CvtTarget : std::uint8_t {
  e4m3_satfinite,
  e4m3_nosat,
  e5m2_satfinite,
  e5m2_nosat,
  e2m3,
  e3m2,
  e2m1,
  bf16_rn,
  f16_rn,
  ue8m0_rz,
  ue8m0_rp,
};

struct CvtKernel {
  CvtTarget target;
  std::string_view name;  // "e4m3-satfinite"
  // What the kernel calls: a PTX cvt instruction (inline asm) or a cuda_fp*.h device function.
  std::string_view source;
};

// Every conversion kernel, in the order verify-cvt reports them.
std::span<const CvtKernel> cvt_kernels();

// Converts inputs first, first + stride, ... (count of them, float32 bit patterns, wrapping
// modulo 2^32) on the GPU; out[i] receives the code of input first + i * stride.
// Holds device buffers for up to `capacity` inputs per call.
class CvtRunner {
 public:
  explicit CvtRunner(std::size_t capacity);
  ~CvtRunner();
  CvtRunner(const CvtRunner&) = delete;
  CvtRunner& operator=(const CvtRunner&) = delete;

  void convert(CvtTarget target, std::uint32_t first, std::uint32_t stride, std::span<std::uint16_t> out);

 private:
  std::size_t capacity_;
  std::uint16_t* device_codes_ = nullptr;
};

}  // namespace lowbit::kernels
