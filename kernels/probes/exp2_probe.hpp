// The exponential on the GPU: MUFU.EX2 (ex2.approx.ftz.f32) measured against the correctly rounded
// exp2, and each implementation's outputs on the device for comparison with its host model (the
// reproducible steps::poly_exp2 of emulation/attention/kernel_steps.hpp; sfu::sm90_ex2, the model
// of MUFU.EX2 in emulation/sfu/ex2.hpp). Host code only; no CUDA headers needed by callers.
#pragma once

#include <cstdint>
#include <span>

namespace lowbit::kernels {

// Ulp distances of an exp2 implementation from the correctly rounded result, over every float32
// in [lo, hi] whose correctly rounded exp2 is a normal float (smaller results are counted apart:
// ex2.approx.ftz flushes them to zero).
struct Exp2Accuracy {
  std::uint64_t inputs = 0;            // floats in [lo, hi] (both zeros where the range holds 0)
  std::uint64_t normal_results = 0;    // inputs whose correctly rounded exp2 is normal
  std::uint64_t ulps[4] = {};          // of those: 0, 1, 2, >= 3 ulps away
  std::uint32_t max_ulps = 0;
  std::uint32_t worst_input = 0;       // bit pattern of the largest input at max_ulps
  // Inputs whose double-precision exp2 lies within 2 double ulps of a float rounding boundary, so
  // that "correctly rounded" rests on the double result's last bits (expected: none).
  std::uint64_t uncertain_reference = 0;
};

enum class Exp2Implementation : std::uint8_t {
  ex2_approx,    // ex2.approx.ftz.f32 (MUFU.EX2), what exp2f compiles to under --use_fast_math
  poly_degree5,  // steps::poly_exp2 with exp2_degree5()
  poly_degree6,  // steps::poly_exp2 with exp2_degree6()
};

// Runs on the GPU over [lo, hi] (lo <= hi, both finite).
Exp2Accuracy measure_exp2(Exp2Implementation implementation, float lo, float hi);

// The device's exp2 of the inputs first, first + stride, ... (float32 bit patterns, out.size() of
// them, wrapping modulo 2^32), as bit patterns.
void device_exp2(Exp2Implementation implementation, std::uint32_t first, std::uint32_t stride,
                 std::span<std::uint32_t> out);

}  // namespace lowbit::kernels
