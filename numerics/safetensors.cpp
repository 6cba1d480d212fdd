#include "numerics/safetensors.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "numerics/npy.hpp"

namespace lowbit {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) { throw std::runtime_error(path + ": " + why); }

constexpr std::uint64_t kLargestHeader = 100u << 20;  // the format's own limit (100 MB)

std::size_t width_of(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

struct Header {
  nlohmann::json json;
  std::uint64_t data_start = 0, data_size = 0;
};

Header read_header(std::ifstream& in, const std::string& path) {
  if (!in) fail(path, "cannot open");
  in.seekg(0, std::ios::end);
  const std::uint64_t file_size = std::uint64_t(in.tellg());
  in.seekg(0);
  unsigned char length_bytes[8] = {};
  in.read(reinterpret_cast<char*>(length_bytes), 8);
  if (in.gcount() != 8) fail(path, "not a .safetensors file (shorter than its 8-byte header length)");
  std::uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | length_bytes[i];
  if (length > kLargestHeader || length > file_size - 8)
    fail(path, "header length " + std::to_string(length) + " exceeds the file (" + std::to_string(file_size) +
                   " bytes) or 100 MB: not a .safetensors file, or truncated");
  std::string text(length, '\0');
  in.read(text.data(), std::streamsize(length));
  Header h;
  try {
    h.json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not JSON: ") + e.what());
  }
  if (!h.json.is_object()) fail(path, "header is not a JSON object");
  h.data_start = 8 + length;
  h.data_size = file_size - h.data_start;
  return h;
}

float widen(const std::string& dtype, const char* bytes) {
  if (dtype == "F32") {
    std::uint32_t bits;
    std::memcpy(&bits, bytes, 4);
    return std::bit_cast<float>(bits);
  }
  std::uint16_t bits;
  std::memcpy(&bits, bytes, 2);
  return dtype == "F16" ? half_to_float(bits) : bfloat16_to_float(bits);
}

// float -> binary16 / bfloat16 bits, round to nearest even (the values written are usually exact).
std::uint16_t narrow(const std::string& dtype, float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  if (dtype == "BF16") {
    if ((bits & 0x7fffffffu) > 0x7f800000u) return std::uint16_t((bits >> 16) | 0x40);  // NaN stays NaN
    return std::uint16_t((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
  }
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
}

}  // namespace

std::vector<std::string> safetensors_names(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const Header h = read_header(in, path);
  std::vector<std::string> names;
  for (const auto& [key, value] : h.json.items())
    if (key != "__metadata__") names.push_back(key);
  return names;
}

SafetensorsTensor read_safetensors(const std::string& path, const std::string& name) {
  std::ifstream in(path, std::ios::binary);
  const Header h = read_header(in, path);
  if (!h.json.contains(name) || name == "__metadata__") {
    std::string names;
    for (const auto& [key, value] : h.json.items())
      if (key != "__metadata__") names += (names.empty() ? "" : ", ") + key;
    fail(path, "no tensor '" + name + "' (it holds: " + (names.empty() ? "none" : names) + ")");
  }
  const nlohmann::json& entry = h.json.at(name);
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets") ||
      !entry["dtype"].is_string() || !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
      entry["data_offsets"].size() != 2)
    fail(path, where + "its header entry lacks a dtype string, a shape list or two data_offsets");
  SafetensorsTensor t;
  t.name = name;
  t.dtype = entry["dtype"].get<std::string>();
  const std::size_t width = width_of(t.dtype);
  if (width == 0) fail(path, where + "dtype " + t.dtype + " is not supported (F32, F16, BF16)");
  std::uint64_t count = 1;
  for (const auto& d : entry["shape"]) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (std::uint64_t(1) << 40))
      fail(path, where + "shape " + entry["shape"].dump() + " is not a list of sizes");
    t.shape.push_back(d.get<std::size_t>());
    count *= t.shape.back();
    if (count > (std::uint64_t(1) << 40)) fail(path, where + "shape " + entry["shape"].dump() + " is too large");
  }
  for (const auto& o : entry["data_offsets"])
    if (!o.is_number_unsigned()) fail(path, where + "data_offsets " + entry["data_offsets"].dump() + " are not offsets");
  const std::uint64_t begin = entry["data_offsets"][0].get<std::uint64_t>(), end = entry["data_offsets"][1].get<std::uint64_t>();
  if (end < begin || end - begin != count * width)
    fail(path, where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
                   std::to_string(end < begin ? 0 : end - begin) + " bytes; shape " + entry["shape"].dump() + " of " +
                   t.dtype + " needs " + std::to_string(count * width));
  if (end > h.data_size)
    fail(path, where + "data ends at byte " + std::to_string(end) + " of a data section of " +
                   std::to_string(h.data_size) + " bytes (truncated file?)");
  std::vector<char> raw(count * width);
  in.seekg(std::streamoff(h.data_start + begin));
  in.read(raw.data(), std::streamsize(raw.size()));
  if (std::uint64_t(in.gcount()) != raw.size()) fail(path, where + "data could not be read (truncated file?)");
  t.data.resize(count);
  for (std::size_t i = 0; i < count; ++i) t.data[i] = widen(t.dtype, raw.data() + i * width);
  return t;
}

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const SafetensorsTensor& t : tensors) {
    const std::size_t width = width_of(t.dtype);
    if (width == 0) fail(path, "tensor '" + t.name + "': dtype " + t.dtype + " is not F32, F16 or BF16");
    std::size_t count = 1;
    for (std::size_t d : t.shape) count *= d;
    if (count != t.data.size())
      fail(path, "tensor '" + t.name + "': " + std::to_string(t.data.size()) + " values for " + std::to_string(count));
    const std::size_t begin = data.size();
    for (float x : t.data) {
      if (width == 4) {
        const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
        for (int b = 0; b < 4; ++b) data += char((bits >> (8 * b)) & 0xff);
      } else {
        const std::uint16_t bits = narrow(t.dtype, x);
        data += char(bits & 0xff);
        data += char(bits >> 8);
      }
    }
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size()}}};
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';  // the data starts 8-byte aligned
  std::ofstream out(path, std::ios::binary);
  if (!out) fail(path, "cannot write");
  for (int b = 0; b < 8; ++b) out.put(char((std::uint64_t(text.size()) >> (8 * b)) & 0xff));
  out << text << data;
  if (!out) fail(path, "write failed");
}

}  // namespace lowbit
