#include "emulation/mma/vector_file.hpp"

#include <zlib.h>

#include <memory>

namespace lowbit::mma {

std::optional<std::string> for_each_line(const std::string& path,
                                         const std::function<void(std::size_t, std::string_view)>& line) {
  const std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) return "cannot open '" + path + "'";
  std::string text;
  std::size_t number = 0;
  char buffer[1 << 16];
  for (;;) {
    const int n = gzread(file.get(), buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      return "cannot read '" + path + "': " + gzerror(file.get(), &code);
    }
    if (n == 0) break;
    for (int i = 0; i < n; ++i) {
      if (buffer[i] != '\n') {
        text.push_back(buffer[i]);
        continue;
      }
      line(++number, text);
      text.clear();
    }
  }
  if (!text.empty()) line(++number, text);
  return std::nullopt;
}

}  // namespace lowbit::mma
