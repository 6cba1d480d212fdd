// The SFU models' measured tables ship as gzip files embedded at build time (embed.cmake, data/).
// inflate_table() returns one table's bytes; it throws, naming the table, when the data does not
// inflate to exactly the size the model expects (a model must never run on a wrong table).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace lowbit::sfu {

std::vector<unsigned char> inflate_table(const char* name, std::span<const unsigned char> gz, std::size_t bytes);

}  // namespace lowbit::sfu
