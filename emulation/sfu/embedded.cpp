#include "emulation/sfu/embedded.hpp"

#include <zlib.h>

#include <stdexcept>
#include <string>

namespace lowbit::sfu {

std::vector<unsigned char> inflate_table(const char* name, std::span<const unsigned char> gz, std::size_t bytes) {
  std::vector<unsigned char> out(bytes + 1);  // one spare byte: a longer stream is caught, not truncated
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) throw std::runtime_error(std::string(name) + ": inflateInit2 failed");
  z.next_in = const_cast<unsigned char*>(gz.data());
  z.avail_in = unsigned(gz.size());
  z.next_out = out.data();
  z.avail_out = unsigned(out.size());
  const int status = inflate(&z, Z_FINISH);
  const std::size_t produced = out.size() - z.avail_out;
  inflateEnd(&z);
  if (status != Z_STREAM_END || produced != bytes)
    throw std::runtime_error(std::string(name) + ": the embedded table does not inflate to " + std::to_string(bytes) +
                             " bytes (got " + std::to_string(produced) + ")");
  out.resize(bytes);
  return out;
}

}  // namespace lowbit::sfu
