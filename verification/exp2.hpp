// What each exponential of lowbit verify-exp2 (kernels/probes/exp2_probe.hpp) computes on the
// host: MUFU.EX2 is its model sfu::sm90_ex2, the polynomials are the contract's steps::poly_exp2.
// The device must give the host's bit pattern on every float32 input (float32_sweep.hpp); a NaN
// input's output only has to be a NaN, as no payload is modelled.
#pragma once

#include <bit>
#include <cstdint>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/sfu/ex2.hpp"
#include "kernels/probes/exp2_probe.hpp"

namespace lowbit::verification {

inline float exp2_model(kernels::Exp2Implementation implementation, float x) {
  namespace steps = lowbit::attention::steps;
  switch (implementation) {
    case kernels::Exp2Implementation::ex2_approx: return sfu::sm90_ex2(x);
    case kernels::Exp2Implementation::poly_degree5: return steps::poly_exp2(x, steps::exp2_degree5());
    case kernels::Exp2Implementation::poly_degree6: return steps::poly_exp2(x, steps::exp2_degree6());
  }
  return 0.0f;
}

// Equal bit patterns; for a NaN input, both NaN.
inline bool exp2_agrees(float x, std::uint32_t device, std::uint32_t host) {
  return host == device || (x != x && std::bit_cast<float>(host) != std::bit_cast<float>(host) &&
                            std::bit_cast<float>(device) != std::bit_cast<float>(device));
}

}  // namespace lowbit::verification
