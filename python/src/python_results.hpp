// C++ results as Python dictionaries of numpy arrays (quantized tensors: their codes, scales and
// groups), shared by quantize.cpp and attention.cpp.
#pragma once

#include <nanobind/nanobind.h>

#include "emulation/quant/quantize.hpp"

namespace lowbit::python {

// codes (padded_rows x padded_cols, unsigned, in the element format), scale_codes and scales (one
// per group), groups (padded_rows x padded_cols: each element's group), outer_scales, shape,
// padded_shape, element, scale_format, grouping, nonfinite (NaN and Inf counts).
nanobind::dict quantized_to_dict(const quant::QuantizedTensor& q);

}  // namespace lowbit::python
