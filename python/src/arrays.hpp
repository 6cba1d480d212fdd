// How the module reads and writes arrays.
//
// The Python layer (python/lowbit/_arrays.py) hands every input over as a C-contiguous CPU array of
// its elements' bits, without a copy where the layout allows: float32 and float64 as they are,
// float16 and bfloat16 as 16-bit integers, the 8-bit (fp8, fp6, fp4 of ml_dtypes and torch) as
// 8-bit integers, each with the lowbit format of its elements ("fp32", "fp64", "fp16", "bf16",
// "e4m3", ...). Outputs are numpy arrays that own memory allocated here (no copy on return).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include "emulation/format.hpp"

namespace lowbit::python {

namespace nb = nanobind;

using InArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;
using OutArray = nb::ndarray<nb::c_contig, nb::device::cpu>;

// The element format a Python-side name stands for: "fp64" (float64), or a lowbit format spec.
struct Element {
  bool float64 = false;
  Format format = formats::fp32;  // when not float64
  std::string name;               // as the caller gave it, for messages
};
// Throws std::invalid_argument naming `what` when `name` is no format or the array's item size
// differs from the format's storage (one element per 1, 2 or 4 bytes).
Element element_of(const InArray& array, const std::string& name, const std::string& what);

// The array's values as float32 (a copy, exact: float32, float16, bfloat16 and the narrow formats
// widen exactly). Throws std::invalid_argument naming `what` for float64 input.
std::vector<float> to_float32(const InArray& array, const Element& element, const std::string& what);

// The shape of an array.
std::vector<std::size_t> shape_of(const InArray& array);

// A numpy array owning `values` (moved, not copied).
template <class T>
nb::ndarray<nb::numpy, T> to_numpy(std::vector<T>&& values, const std::vector<std::size_t>& shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

// Codes in the narrowest unsigned integer array that holds f's codes (1, 2 or 4 bytes).
nb::object codes_to_numpy(const Format& f, const std::vector<Code>& codes, const std::vector<std::size_t>& shape);

}  // namespace lowbit::python
