// The parts of lowbit._core, each registered by module.cpp. The functions here are the private
// layer under python/lowbit/__init__.py, which turns numpy/torch/ml_dtypes arrays into the bit
// arrays of arrays.hpp and carries the docstrings.
#pragma once

#include <nanobind/nanobind.h>

namespace lowbit::python {

void register_formats(nanobind::module_& m);    // Format, formats, encode, decode
void register_mma(nanobind::module_& m);        // instructions, instruction, mma
void register_quantize(nanobind::module_& m);   // quantize
void register_attention(nanobind::module_& m);  // presets, stages, attention
void register_run(nanobind::module_& m);        // experiments, run

}  // namespace lowbit::python
