#include "numerics/npy.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <regex>

namespace lowbit {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

// The value of 'key' in the header dict, as text (the header is a Python literal).
std::string header_field(const std::string& header, const std::string& key, const std::string& path) {
  const std::regex pattern("['\"]" + key + "['\"]\\s*:\\s*(\\([^)]*\\)|'[^']*'|\"[^\"]*\"|True|False)");
  std::smatch m;
  if (!std::regex_search(header, m, pattern)) fail(path, "malformed .npy header: no '" + key + "' in " + header);
  return m[1].str();
}

}  // namespace

float half_to_float(std::uint16_t bits) {
  const bool negative = bits & 0x8000u;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float magnitude;
  if (exponent == 0x1f) magnitude = mantissa ? std::numeric_limits<float>::quiet_NaN() : INFINITY;
  else if (exponent == 0) magnitude = std::ldexp(float(mantissa), -24);
  else magnitude = std::ldexp(float(mantissa | 0x400), exponent - 25);
  return negative ? -magnitude : magnitude;
}

NpyArray read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  char magic[8] = {};
  in.read(magic, 8);
  if (in.gcount() != 8 || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (bad magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  std::uint32_t header_length = 0;
  if (major == 1) {
    unsigned char b[2] = {};
    in.read(reinterpret_cast<char*>(b), 2);
    header_length = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4] = {};
    in.read(reinterpret_cast<char*>(b), 4);
    header_length = b[0] | (b[1] << 8) | (b[2] << 16) | (std::uint32_t(b[3]) << 24);
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (!in || header_length > (1u << 20)) fail(path, "truncated or oversized .npy header");
  std::string header(header_length, '\0');
  in.read(header.data(), header_length);
  if (std::size_t(in.gcount()) != header_length) fail(path, "truncated .npy header");

  NpyArray a;
  a.dtype = header_field(header, "descr", path);
  a.dtype = a.dtype.substr(1, a.dtype.size() - 2);
  if (a.dtype != "<f4" && a.dtype != "<f2" && a.dtype != "<V2")
    fail(path, "dtype " + a.dtype + " is not supported (float32 '<f4', float16 '<f2', bfloat16 '<V2' as ml_dtypes saves it)");
  if (header_field(header, "fortran_order", path) != "False")
    fail(path, "Fortran-order arrays are not supported (save with C order)");
  const std::string shape = header_field(header, "shape", path);
  std::size_t count = 1;
  const std::regex digits("\\d+");
  constexpr std::size_t kLargest = std::size_t(1) << 40;  // elements: far beyond any file here
  for (std::sregex_iterator it(shape.begin(), shape.end(), digits), end; it != end; ++it) {
    const std::string text = it->str();
    if (text.size() > 12 || std::stoull(text) > kLargest || (count *= std::stoull(text)) > kLargest)
      fail(path, "shape " + shape + " is too large");
    a.shape.push_back(std::stoull(text));
  }
  const std::size_t width = a.dtype == "<f4" ? 4 : 2;
  const std::streampos data_start = in.tellg();
  in.seekg(0, std::ios::end);
  const std::size_t available = std::size_t(in.tellg() - data_start);
  in.seekg(data_start);
  if (available < count * width)
    fail(path, "data ends after " + std::to_string(available) + " of " + std::to_string(count * width) + " bytes");
  std::vector<char> raw(count * width);
  in.read(raw.data(), std::streamsize(raw.size()));
  if (std::size_t(in.gcount()) != raw.size())
    fail(path, "data ends after " + std::to_string(in.gcount()) + " of " + std::to_string(raw.size()) + " bytes");
  a.data.resize(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (width == 4) {
      std::uint32_t bits;
      std::memcpy(&bits, raw.data() + 4 * i, 4);
      a.data[i] = std::bit_cast<float>(bits);
    } else {
      std::uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * i, 2);
      a.data[i] = a.dtype == "<f2" ? half_to_float(bits) : bfloat16_to_float(bits);
    }
  }
  return a;
}

void write_npy(const std::string& path, const std::vector<std::size_t>& shape, std::span<const float> data) {
  std::string dims;
  for (std::size_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() != 1 && !dims.empty()) dims.resize(dims.size() - 2);
  else if (!dims.empty()) dims.resize(dims.size() - 1);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad so that the data starts on a 64-byte boundary, ending the header with '\n'.
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) fail(path, "cannot write");
  out.write("\x93NUMPY\x01\x00", 8);
  const std::uint16_t length = std::uint16_t(header.size());
  const unsigned char b[2] = {static_cast<unsigned char>(length & 0xff), static_cast<unsigned char>(length >> 8)};
  out.write(reinterpret_cast<const char*>(b), 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * sizeof(float)));
  if (!out) fail(path, "write failed");
}

}  // namespace lowbit
