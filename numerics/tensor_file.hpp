// Attention tensors from files: "FILE.npy" or "FILE.safetensors:NAME", 3-D [heads, tokens, dim]
// (batch 1) or 4-D [batch, heads, tokens, dim], float32, float16 or bfloat16 (numerics/npy.hpp
// says how a bfloat16 .npy is recognized).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "numerics/tensor.hpp"

namespace lowbit {

enum class ElementType : std::uint8_t { f32, f16, bf16 };
std::string_view to_string(ElementType t);  // "float32", "float16", "bfloat16"

struct TensorFile {
  Tensor4 tensor;
  ElementType type = ElementType::f32;  // what the file stores
  std::string source;                   // the spec it was read from
};

// Throws std::runtime_error naming the file (and tensor) and the problem, including a shape that
// is not 3-D or 4-D or has an empty dimension.
TensorFile read_tensor_file(const std::string& spec);

}  // namespace lowbit
