#include "verification/vector_file.hpp"

#include <zlib.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

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

LineWriter::LineWriter(const std::string& path) : path_(path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  file_ = gzopen(path.c_str(), path.ends_with(".gz") ? "wb6" : "wbT");
  if (!file_) throw std::runtime_error("cannot open '" + path + "' for writing");
}

LineWriter::~LineWriter() {
  if (file_) gzclose(static_cast<gzFile>(file_));
}

void LineWriter::write(std::string_view line) {
  const auto file = static_cast<gzFile>(file_);
  if (!file) throw std::runtime_error("'" + path_ + "' is already closed");
  if ((!line.empty() && gzwrite(file, line.data(), unsigned(line.size())) != int(line.size())) || gzputc(file, '\n') != '\n')
    throw std::runtime_error("cannot write to '" + path_ + "'");
}

void LineWriter::close() {
  if (!file_) return;
  const int status = gzclose(static_cast<gzFile>(file_));
  file_ = nullptr;
  if (status != Z_OK) throw std::runtime_error("cannot finish writing '" + path_ + "'");
}

}  // namespace lowbit::mma
