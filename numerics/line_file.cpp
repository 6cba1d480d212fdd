#include "numerics/line_file.hpp"

#include <filesystem>
#include <stdexcept>

#include <zlib.h>

namespace lowbit {
namespace {
gzFile gz(void* f) { return static_cast<gzFile>(f); }
}  // namespace

LineWriter::LineWriter(const std::string& path) : path_(path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  // "T": no compression (transparent) for names without ".gz".
  file_ = gzopen(path.c_str(), path.ends_with(".gz") ? "wb6" : "wbT");
  if (!file_) throw std::runtime_error("cannot open '" + path + "' for writing");
}

LineWriter::~LineWriter() {
  if (file_) gzclose(gz(file_));
}

void LineWriter::write(std::string_view line) {
  if (!file_) throw std::runtime_error("'" + path_ + "' is already closed");
  if ((!line.empty() && gzwrite(gz(file_), line.data(), unsigned(line.size())) != int(line.size())) ||
      gzputc(gz(file_), '\n') != '\n')
    throw std::runtime_error("cannot write to '" + path_ + "'");
}

void LineWriter::close() {
  if (!file_) return;
  const int status = gzclose(gz(file_));
  file_ = nullptr;
  if (status != Z_OK) throw std::runtime_error("cannot finish writing '" + path_ + "'");
}

LineReader::LineReader(const std::string& path) : path_(path) {
  file_ = gzopen(path.c_str(), "rb");
  if (!file_) throw std::runtime_error("cannot open '" + path + "'");
}

LineReader::~LineReader() { gzclose(gz(file_)); }

bool LineReader::next(std::string& line) {
  line.clear();
  char buffer[1 << 16];
  while (gzgets(gz(file_), buffer, sizeof buffer)) {
    line += buffer;
    if (!line.empty() && line.back() == '\n') {
      line.pop_back();
      return true;
    }
  }
  int error = Z_OK;
  const char* message = gzerror(gz(file_), &error);
  if (error != Z_OK && error != Z_BUF_ERROR)
    throw std::runtime_error("cannot read '" + path_ + "': " + message);
  return !line.empty();  // a last line without a newline
}

}  // namespace lowbit
