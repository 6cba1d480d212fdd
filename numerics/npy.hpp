// NumPy .npy files (format versions 1.0-3.0): the way tensors from real models come in.
// Reads little-endian float32 ('<f4'), float16 ('<f2') and bfloat16 arrays in C order; writes
// float32. NumPy has no bfloat16: np.save of an ml_dtypes.bfloat16 array writes the descr '<V2'
// (2-byte void, no type name in the header), so '<V2' is read as bfloat16, the only 2-byte type
// ml_dtypes has; that is our convention for bf16 .npy files.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace lowbit {

struct NpyArray {
  std::vector<std::size_t> shape;
  std::string dtype;        // as the header says: "<f4", "<f2" or "<V2" (bfloat16)
  std::vector<float> data;  // row-major, float16 and bfloat16 widened exactly
};

// Throws std::runtime_error naming the file and what is wrong with it (not .npy, an
// unsupported dtype or version, Fortran order, a malformed header, missing data).
NpyArray read_npy(const std::string& path);

void write_npy(const std::string& path, const std::vector<std::size_t>& shape, std::span<const float> data);

// IEEE binary16 bits to float (exact).
float half_to_float(std::uint16_t bits);
// bfloat16 bits to float (exact: the high half of a binary32).
inline float bfloat16_to_float(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t(bits) << 16); }

}  // namespace lowbit
