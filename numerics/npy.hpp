// NumPy .npy files (format versions 1.0-3.0): the way tensors from real models come in.
// Reads little-endian float32 ('<f4') and float16 ('<f2') arrays in C order; writes float32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace lowbit {

struct NpyArray {
  std::vector<std::size_t> shape;
  std::string dtype;        // as the header says: "<f4" or "<f2"
  std::vector<float> data;  // row-major, float16 widened exactly
};

// Throws std::runtime_error naming the file and what is wrong with it (not .npy, an
// unsupported dtype or version, Fortran order, a malformed header, missing data).
NpyArray read_npy(const std::string& path);

void write_npy(const std::string& path, const std::vector<std::size_t>& shape, std::span<const float> data);

// IEEE binary16 bits to float (exact).
float half_to_float(std::uint16_t bits);

}  // namespace lowbit
