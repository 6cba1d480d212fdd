// Text files of lines (JSON Lines, CSV), gzip-compressed when the name ends in ".gz".
#pragma once

#include <string>
#include <string_view>

namespace lowbit {

// Writes lines; creates missing parent folders. Throws std::runtime_error naming the file when
// it cannot be opened or written.
class LineWriter {
 public:
  explicit LineWriter(const std::string& path);
  ~LineWriter();
  LineWriter(const LineWriter&) = delete;
  LineWriter& operator=(const LineWriter&) = delete;

  void write(std::string_view line);  // appends line and a newline
  void close();                       // flushes; throws when the data could not be written

 private:
  std::string path_;
  void* file_ = nullptr;  // gzFile: plain output when the name does not end in ".gz"
};

// Reads lines of a plain or gzip-compressed file (recognised by its content).
class LineReader {
 public:
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its newline; false at the end. Throws on a read error.
  bool next(std::string& line);

 private:
  std::string path_;
  void* file_ = nullptr;
};

}  // namespace lowbit
