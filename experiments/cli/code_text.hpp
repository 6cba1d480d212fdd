// How the command line prints codes and values.
#pragma once

#include <string>

#include "emulation/format.hpp"

namespace lowbit::cli {

// 0x-prefixed, zero-padded to the format's code width: 0x7e, 0x3f80.
std::string hex_code(const Format& f, Code code);
// Golden-constant style, fields separated: 0b0'1111'110.
std::string binary_code(const Format& f, Code code);
// Shortest decimal that reads back to v ("448", "0.001953125", "nan", "-inf").
std::string value_text(double v);
// A preset's origin and its encoding, derived from the record:
// "OCP FP8 E4M3 (fn): bias 7, NaN 0x7f/0xff, no Inf", "two's complement integer: -128 .. 127".
std::string preset_description(const NamedFormat& preset);

}  // namespace lowbit::cli
