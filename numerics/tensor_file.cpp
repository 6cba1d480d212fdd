#include "numerics/tensor_file.hpp"

#include <stdexcept>

#include "numerics/npy.hpp"
#include "numerics/safetensors.hpp"

namespace lowbit {

std::string_view to_string(ElementType t) {
  switch (t) {
    case ElementType::f32: return "float32";
    case ElementType::f16: return "float16";
    case ElementType::bf16: return "bfloat16";
  }
  return "?";
}

TensorFile read_tensor_file(const std::string& spec) {
  std::vector<std::size_t> shape;
  std::vector<float> data;
  TensorFile out;
  out.source = spec;
  const auto marker = spec.find(".safetensors:");
  if (marker != std::string::npos) {
    SafetensorsTensor t = read_safetensors(spec.substr(0, marker + 12), spec.substr(marker + 13));
    shape = std::move(t.shape);
    data = std::move(t.data);
    out.type = t.dtype == "F32" ? ElementType::f32 : t.dtype == "F16" ? ElementType::f16 : ElementType::bf16;
  } else if (spec.ends_with(".safetensors")) {
    std::string names;
    for (const auto& n : safetensors_names(spec)) names += (names.empty() ? "" : ", ") + n;
    throw std::runtime_error(spec + ": name the tensor as FILE.safetensors:NAME (it holds: " + names + ")");
  } else {
    NpyArray a = read_npy(spec);
    shape = std::move(a.shape);
    data = std::move(a.data);
    out.type = a.dtype == "<f4" ? ElementType::f32 : a.dtype == "<f2" ? ElementType::f16 : ElementType::bf16;
  }
  std::string dims;
  for (std::size_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  if (shape.size() != 3 && shape.size() != 4)
    throw std::runtime_error(spec + ": shape [" + dims + "] has " + std::to_string(shape.size()) +
                             " dimensions; expected [heads, tokens, dim] or [batch, heads, tokens, dim]");
  if (shape.size() == 3) shape.insert(shape.begin(), 1);
  for (std::size_t d : shape)
    if (d == 0 || d > std::size_t(1) << 30) throw std::runtime_error(spec + ": shape [" + dims + "] has an empty or huge dimension");
  out.tensor.batch = int(shape[0]);
  out.tensor.heads = int(shape[1]);
  out.tensor.tokens = int(shape[2]);
  out.tensor.dim = int(shape[3]);
  out.tensor.values = std::move(data);
  return out;
}

}  // namespace lowbit
