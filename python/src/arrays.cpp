#include "arrays.hpp"

#include <bit>
#include <stdexcept>

namespace lowbit::python {

namespace {

int storage_bytes(const Format& f) { return f.code_bits() <= 8 ? 1 : f.code_bits() <= 16 ? 2 : 4; }

template <class Bits>
void widen(const InArray& array, const Format& f, std::vector<float>& out) {
  const auto* bits = static_cast<const Bits*>(array.data());
  if (f == formats::fp32) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::bit_cast<float>(std::uint32_t(bits[i]));
    return;
  }
  if (f.code_bits() > 16) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = float(decode(f, Code(bits[i])));
    return;
  }
  // One decode per code (at most 2^16 of them), then a table look-up per element.
  std::vector<float> table(std::size_t(f.code_count_minus_one()) + 1);
  for (std::size_t c = 0; c < table.size(); ++c) table[c] = float(decode(f, Code(c)));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = table[Code(bits[i]) & f.code_count_minus_one()];
}

}  // namespace

Element element_of(const InArray& array, const std::string& name, const std::string& what) {
  Element e;
  e.name = name;
  if (name == "fp64") {
    e.float64 = true;
    if (array.itemsize() != 8) throw std::invalid_argument(what + ": float64 elements in an array of " +
                                                           std::to_string(array.itemsize()) + "-byte items");
    return e;
  }
  e.format = format_from_string(name);
  if (e.format.code_bits() > 32 || std::size_t(storage_bytes(e.format)) != array.itemsize())
    throw std::invalid_argument(what + ": " + format_name(e.format) + " elements in an array of " +
                                std::to_string(array.itemsize()) + "-byte items");
  return e;
}

std::vector<float> to_float32(const InArray& array, const Element& element, const std::string& what) {
  if (element.float64)
    throw std::invalid_argument(what + ": float64 is not taken here (float32, float16, bfloat16 or a narrower format)");
  std::vector<float> out(array.size());
  switch (array.itemsize()) {
    case 1: widen<std::uint8_t>(array, element.format, out); break;
    case 2: widen<std::uint16_t>(array, element.format, out); break;
    default: widen<std::uint32_t>(array, element.format, out); break;
  }
  return out;
}

std::vector<std::size_t> shape_of(const InArray& array) {
  std::vector<std::size_t> shape(array.ndim());
  for (std::size_t i = 0; i < shape.size(); ++i) shape[i] = array.shape(i);
  return shape;
}

nb::object codes_to_numpy(const Format& f, const std::vector<Code>& codes, const std::vector<std::size_t>& shape) {
  const auto narrow = [&]<class T>(T) {
    std::vector<T> out(codes.begin(), codes.end());
    return nb::cast(to_numpy(std::move(out), shape));
  };
  switch (storage_bytes(f)) {
    case 1: return narrow(std::uint8_t{});
    case 2: return narrow(std::uint16_t{});
    default: return nb::cast(to_numpy(std::vector<Code>(codes), shape));
  }
}

}  // namespace lowbit::python
