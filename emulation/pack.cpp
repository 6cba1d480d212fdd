#include "emulation/pack.hpp"

#include <stdexcept>
#include <string>

namespace lowbit {
namespace {

void check_sizes(const Format& f, std::size_t codes, std::size_t bytes, const char* what) {
  if (bytes != packed_bytes(f, codes))
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(codes) + " codes of " + format_name(f) +
                                " take " + std::to_string(packed_bytes(f, codes)) + " bytes, got " +
                                std::to_string(bytes));
}

}  // namespace

std::size_t packed_bytes(const Format& f, std::size_t count) {
  return (count * std::size_t(f.storage_bits) + 7) / 8;
}

void pack(const Format& f, std::span<const Code> codes, std::span<std::uint8_t> bytes) {
  check_sizes(f, codes.size(), bytes.size(), "pack");
  const int width = f.storage_bits;
  // Bits wait in `pending` (at most 7 + 32 of them) until a whole byte is ready.
  std::uint64_t pending = 0;
  int pending_bits = 0;
  std::size_t out = 0;
  for (std::size_t i = 0; i < codes.size(); ++i) {
    if (codes[i] & ~f.code_count_minus_one())
      throw std::invalid_argument("pack: element " + std::to_string(i) + " (" + std::to_string(codes[i]) +
                                  ") has bits above the " + std::to_string(f.code_bits()) + "-bit code of " +
                                  format_name(f));
    pending |= std::uint64_t(codes[i]) << pending_bits;
    pending_bits += width;
    for (; pending_bits >= 8; pending_bits -= 8, pending >>= 8) bytes[out++] = std::uint8_t(pending);
  }
  if (pending_bits > 0) bytes[out] = std::uint8_t(pending);
}

void unpack(const Format& f, std::span<const std::uint8_t> bytes, std::span<Code> codes) {
  check_sizes(f, codes.size(), bytes.size(), "unpack");
  const int width = f.storage_bits;
  std::uint64_t pending = 0;
  int pending_bits = 0;
  std::size_t in = 0;
  for (auto& code : codes) {
    for (; pending_bits < width; pending_bits += 8) pending |= std::uint64_t(bytes[in++]) << pending_bits;
    code = Code(pending) & f.code_count_minus_one();
    pending >>= width;
    pending_bits -= width;
  }
}

}  // namespace lowbit
