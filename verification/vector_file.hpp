// Reading and writing MMA test-vector files line by line, plain (.jsonl) or gzip-compressed (.jsonl.gz):
// wide wgmma tiles (m64n256) make files of tens of megabytes that compress about 2.5x, so
// recorded vectors are kept compressed in verification/vectors/ (zlib reads both kinds alike).
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace lowbit::mma {

// Calls `line` with each line (1-based number, text without the newline). Returns why the file
// could not be read, or nothing.
std::optional<std::string> for_each_line(const std::string& path,
                                         const std::function<void(std::size_t, std::string_view)>& line);

// Writes lines to a new file, gzip-compressed when the name ends in ".gz"; creates missing
// parent folders. Throws std::runtime_error naming the file when it cannot be opened or written.
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
  void* file_ = nullptr;  // gzFile ("T" mode, uncompressed, for names without ".gz")
};

}  // namespace lowbit::mma
