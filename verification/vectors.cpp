#include "verification/vectors.hpp"

#include "emulation/convert.hpp"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <stdexcept>

namespace lowbit::mma {
namespace {

constexpr const char* kHex = "0123456789abcdef";

template <class T>
std::string hex_field(const std::vector<T>& values, int digits) {
  std::string s(values.size() * std::size_t(digits), '0');
  for (std::size_t i = 0; i < values.size(); ++i)
    for (int d = 0; d < digits; ++d) s[i * digits + d] = kHex[(values[i] >> (4 * (digits - 1 - d))) & 0xf];
  return s;
}

// Splits a hex string into `count` codes; the error names the field.
template <class T>
std::optional<std::string> read_hex_field(const nlohmann::json& j, const char* name, std::size_t count, int* digits,
                                          std::vector<T>& out) {
  if (!j.contains(name)) return std::string("missing field '") + name + "'";
  if (!j[name].is_string()) return std::string("field '") + name + "' is not a string";
  const auto& s = j[name].get_ref<const std::string&>();
  if (count == 0 || s.size() % count != 0)
    return std::string("field '") + name + "' has " + std::to_string(s.size()) + " hex digits, not a multiple of " +
           std::to_string(count) + " elements";
  const int width = int(s.size() / count);
  if (width != 1 && width != 2 && width != 4 && width != 8)
    return std::string("field '") + name + "': " + std::to_string(width) + " hex digits per element (expected 1, 2, 4 or 8)";
  if (digits) *digits = width;
  std::vector<Code> codes;
  if (auto e = read_hex_codes(s, width, codes)) return std::string("field '") + name + "': " + *e;
  out.assign(codes.begin(), codes.end());
  return std::nullopt;
}

}  // namespace

std::optional<std::string> read_hex_codes(std::string_view s, int digits, std::vector<Code>& out) {
  if (digits < 1 || digits > 8 || s.size() % std::size_t(digits) != 0)
    return std::to_string(s.size()) + " hex digits are not a whole number of " + std::to_string(digits) + "-digit codes";
  const auto lower_hex = [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); };
  out.resize(s.size() / std::size_t(digits));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char* first = s.data() + i * std::size_t(digits);
    auto [ptr, ec] = std::from_chars(first, first + digits, out[i], 16);
    if (ec != std::errc{} || ptr != first + digits || !std::all_of(first, first + digits, lower_hex))
      return "element " + std::to_string(i) + " '" + std::string(first, std::size_t(digits)) + "' is not lower-case hex";
  }
  return std::nullopt;
}

std::string to_json_line(const Tile& t) {
  const auto mk = std::size_t(t.m) * t.k, kn = std::size_t(t.k) * t.n, mn = std::size_t(t.m) * t.n;
  if (t.a.size() != mk || t.b.size() != kn || t.c.size() != mn || t.d.size() != mn)
    throw std::invalid_argument("tile of " + t.instruction + ": field sizes do not match m, n, k");
  nlohmann::ordered_json j;
  j["arch"] = t.arch;
  j["device"] = t.device;
  j["instruction"] = t.instruction;
  j["m"] = t.m;
  j["n"] = t.n;
  j["k"] = t.k;
  j["a"] = hex_field(t.a, t.a_digits);
  j["b"] = hex_field(t.b, t.b_digits);
  j["c"] = hex_field(t.c, 8);
  j["d"] = hex_field(t.d, 8);
  for (const auto& [key, value] : t.extra.items()) j[key] = value;
  return j.dump();
}

ParsedTile parse_tile_line(std::string_view line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return {std::nullopt, "not valid JSON"};
  if (!j.is_object()) return {std::nullopt, "not a JSON object"};
  Tile t;
  for (const char* name : {"arch", "device", "instruction"}) {
    if (!j.contains(name) || !j[name].is_string()) return {std::nullopt, std::string("field '") + name + "' missing or not a string"};
  }
  t.arch = j["arch"];
  t.device = j["device"];
  t.instruction = j["instruction"];
  for (auto [name, field] : {std::pair{"m", &t.m}, std::pair{"n", &t.n}, std::pair{"k", &t.k}}) {
    if (!j.contains(name) || !j[name].is_number_integer()) return {std::nullopt, std::string("field '") + name + "' missing or not an integer"};
    const auto v = j[name].get<long long>();
    if (v < 1 || v > 4096) return {std::nullopt, std::string("field '") + name + "' = " + std::to_string(v) + " is outside 1..4096"};
    *field = int(v);
  }
  const auto mk = std::size_t(t.m) * t.k, kn = std::size_t(t.k) * t.n, mn = std::size_t(t.m) * t.n;
  int c_digits = 0, d_digits = 0;
  if (auto e = read_hex_field(j, "a", mk, &t.a_digits, t.a)) return {std::nullopt, *e};
  if (auto e = read_hex_field(j, "b", kn, &t.b_digits, t.b)) return {std::nullopt, *e};
  if (auto e = read_hex_field(j, "c", mn, &c_digits, t.c)) return {std::nullopt, *e};
  if (auto e = read_hex_field(j, "d", mn, &d_digits, t.d)) return {std::nullopt, *e};
  if (c_digits != 8 || d_digits != 8) return {std::nullopt, "fields 'c' and 'd' need 8 hex digits per element"};
  for (const auto& [key, value] : j.items())
    if (key != "arch" && key != "device" && key != "instruction" && key != "m" && key != "n" && key != "k" &&
        key != "a" && key != "b" && key != "c" && key != "d")
      t.extra[key] = value;
  return {std::move(t), ""};
}

namespace {
int top_alignment(const Format& f) { return !f.is_integer() && f.storage_bits == 32 ? 32 - f.code_bits() : 0; }
}  // namespace

std::uint32_t element_word(const Format& f, Code code) { return code << top_alignment(f); }

std::optional<Code> element_code(const Format& f, std::uint32_t word) {
  const int shift = top_alignment(f);
  if (shift > 0 && (word & ((1u << shift) - 1)) != 0) return std::nullopt;
  return Code(word >> shift);
}

int element_digits(const Format& f) { return f.storage_bits / 4; }

// Accumulators narrower than 32 bits are IEEE formats whose values all lie in binary32.
std::uint32_t accumulator_word(const Format& f, Code code) {
  if (f.code_bits() == 32) return code;
  const std::uint32_t sign = (code & f.sign_mask()) ? 0x80000000u : 0u;
  if (f.is_nan_code(code)) return sign | 0x7f800000u | ((code & f.mantissa_mask()) << (23 - f.mantissa_bits));
  return std::bit_cast<std::uint32_t>(float(decode(f, code)));
}

std::string_view accumulator_type(const Format& f) {
  if (f.is_integer()) return "s32";
  return f.code_bits() == 16 ? "f16" : "f32";
}

std::optional<Code> accumulator_code(const Format& f, std::uint32_t word) {
  if (f.code_bits() == 32) return word;
  const float value = std::bit_cast<float>(word);
  const int dropped = 23 - f.mantissa_bits;
  Code code;
  if (std::isnan(value)) {
    if (!f.has_nan() || (word & ((1u << dropped) - 1))) return std::nullopt;
    code = ((word >> 31) ? f.sign_mask() : 0) | f.top_non_nan_magnitude() | ((word & 0x7fffffu) >> dropped);
  } else {
    code = encode(f, value, {Rounding::nearest_even, f.has_inf() ? Overflow::inf : Overflow::saturate});
  }
  if (accumulator_word(f, code) != word) return std::nullopt;
  return code;
}

}  // namespace lowbit::mma
