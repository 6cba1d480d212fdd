// MMA test-vector files (JSON Lines, ../shared/spec/mma-vectors.md): one recorded tile a line.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emulation/format.hpp"

namespace lowbit::mma {

struct Tile {
  std::string arch;         // "sm_90"
  std::string device;       // "NVIDIA H200"
  std::string instruction;  // full PTX name
  int m = 0, n = 0, k = 0;
  int a_digits = 0, b_digits = 0;  // hex digits per element word: 1, 2, 4 or 8
  std::vector<Code> a;             // m x k element words (element_word), row-major
  std::vector<Code> b;             // k x n element words, row-major (math orientation)
  std::vector<std::uint32_t> c;    // m x n binary32 (or s32) bit patterns
  std::vector<std::uint32_t> d;
  nlohmann::json extra = nlohmann::json::object();  // fields this reader does not interpret
};

// One line, no trailing newline. Throws std::invalid_argument if the field sizes disagree
// with m, n, k.
std::string to_json_line(const Tile& tile);

struct ParsedTile {
  std::optional<Tile> tile;
  std::string error;  // why the line was rejected (which field, what is wrong)
};
// Element widths are read off the field lengths (len(a) / (m*k) hex digits per code).
ParsedTile parse_tile_line(std::string_view line);

// Splits s into codes of `digits` lower-case hex digits each (the spec's spelling); the error
// names the first element that is not.
std::optional<std::string> read_hex_codes(std::string_view s, int digits, std::vector<Code>& out);

// How A and B elements are recorded: the storage bits, as the GPU holds them. That is the code
// itself for every format whose container is as narrow as the code or holds it in its low bits
// (e2m3 in a byte), but a 32-bit floating container holds its format aligned to the top, as a
// binary32 register does: tf32's word is the binary32 pattern of its value (low 13 bits zero).
std::uint32_t element_word(const Format& element, Code code);
// The code a recorded word stands for; nothing when the word's dropped low bits are not zero.
std::optional<Code> element_code(const Format& element, std::uint32_t word);
// Hex digits per element word in the files (1, 2, 4 or 8).
int element_digits(const Format& element);

// How C and D are recorded: fp32 and s32 as their own 32-bit patterns; fp16 as the binary32
// pattern of the value widened exactly (NaN payloads kept), so a reader that ignores c_type
// still reads the right values.
std::uint32_t accumulator_word(const Format& accumulator, Code code);
// The accumulator's name in the optional "c_type"/"d_type" fields: "f32", "f16" or "s32".
std::string_view accumulator_type(const Format& accumulator);
// The accumulator code a recorded word stands for; nothing when the word holds no value of the
// format exactly.
std::optional<Code> accumulator_code(const Format& accumulator, std::uint32_t word);

}  // namespace lowbit::mma
