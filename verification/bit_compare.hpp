// A kernel's buffer against the emulator's, element by element, as bit patterns (the sign of
// zero and NaN payloads count): how many elements differ and the first few, with both patterns.
// What lowbit attention --check and check_sage2_gpu compare outputs, LSEs, codes and scales with.
#pragma once

#include <bit>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace lowbit::verification {

// An element's bit pattern, widened: floats and integers of 1, 2 or 4 bytes.
template <class T>
std::uint32_t bits(T x) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 2 || sizeof(T) == 1);
  if constexpr (sizeof(T) == 4) return std::bit_cast<std::uint32_t>(x);
  else if constexpr (sizeof(T) == 2) return std::bit_cast<std::uint16_t>(x);
  else return std::bit_cast<std::uint8_t>(x);
}

struct BitComparison {
  struct Difference {
    std::size_t index;
    std::uint32_t kernel, emulated;
  };
  std::uint64_t compared = 0, mismatches = 0;
  std::vector<Difference> first;  // the first `keep` differences, in index order
};

// Throws std::logic_error when the sizes differ.
template <class Kernel, class Emulated>
BitComparison compare_bits(const std::vector<Kernel>& kernel, const std::vector<Emulated>& emulated, std::size_t keep = 5) {
  if (kernel.size() != emulated.size()) throw std::logic_error("compare_bits: sizes differ");
  BitComparison c;
  c.compared = kernel.size();
  for (std::size_t i = 0; i < kernel.size(); ++i)
    if (bits(kernel[i]) != bits(emulated[i]) && c.mismatches++ < keep) c.first.push_back({i, bits(kernel[i]), bits(emulated[i])});
  return c;
}

}  // namespace lowbit::verification
