// .safetensors files (huggingface/safetensors): an 8-byte little-endian header length N, N bytes of
// JSON {"NAME": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data, each tensor's bytes at [begin, end) after the header, C order, little-endian.
// Reads F32, F16 and BF16 tensors (widened to float exactly); writes them (for tests and tools).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lowbit {

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // "F32", "F16" or "BF16"
  std::vector<std::size_t> shape;
  std::vector<float> data;  // C order
};

// Throws std::runtime_error naming the file and the problem: unreadable or truncated file, a
// header that is not JSON or not a safetensors header, no tensor `name` (the message lists the
// names there are), an unsupported dtype, offsets that do not match the shape or the file.
SafetensorsTensor read_safetensors(const std::string& path, const std::string& name);
std::vector<std::string> safetensors_names(const std::string& path);

// Writes the tensors, each in its dtype (F32, F16 or BF16, rounded to nearest even; the values
// should be exact in it).
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors);

}  // namespace lowbit
