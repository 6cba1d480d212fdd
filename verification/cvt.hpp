// What each GPU conversion of lowbit verify-cvt (kernels/probes/cvt_probe.hpp) computes in the
// emulator's terms: the format, rounding and overflow rule of encode() that must give its code for
// every float32 input. verify-cvt sweeps all 2^32 inputs (float32_sweep.hpp) against it.
#pragma once

#include <algorithm>
#include <iterator>
#include <span>

#include "emulation/convert.hpp"
#include "kernels/probes/cvt_probe.hpp"

namespace lowbit::verification {

struct CvtModel {
  kernels::CvtTarget target;
  Format format;
  ConversionOptions options;
};

inline std::span<const CvtModel> cvt_models() {
  using kernels::CvtTarget;
  static const CvtModel models[] = {
      {CvtTarget::e4m3_satfinite, formats::e4m3, {Rounding::nearest_even, Overflow::saturate}},
      {CvtTarget::e4m3_nosat, formats::e4m3, {Rounding::nearest_even, Overflow::nan}},
      {CvtTarget::e5m2_satfinite, formats::e5m2, {Rounding::nearest_even, Overflow::saturate}},
      {CvtTarget::e5m2_nosat, formats::e5m2, {Rounding::nearest_even, Overflow::inf}},
      {CvtTarget::e2m3, formats::e2m3, {Rounding::nearest_even, Overflow::saturate}},
      {CvtTarget::e3m2, formats::e3m2, {Rounding::nearest_even, Overflow::saturate}},
      {CvtTarget::e2m1, formats::e2m1, {Rounding::nearest_even, Overflow::saturate}},
      {CvtTarget::bf16_rn, formats::bf16, {Rounding::nearest_even, Overflow::inf}},
      {CvtTarget::f16_rn, formats::fp16, {Rounding::nearest_even, Overflow::inf}},
      {CvtTarget::ue8m0_rz, formats::ue8m0, {Rounding::toward_zero, Overflow::saturate}},
      {CvtTarget::ue8m0_rp, formats::ue8m0, {Rounding::toward_positive, Overflow::saturate}},
  };
  return models;
}

inline const CvtModel& cvt_model(kernels::CvtTarget target) {
  const auto models = cvt_models();
  return *std::find_if(models.begin(), models.end(), [&](const CvtModel& m) { return m.target == target; });
}

}  // namespace lowbit::verification
