// Test support shared by the tests that run the `lowbit` program: run a command line and keep
// its exit status and its stdout and stderr together, and split a CSV line as the results module
// writes it (fields quoted when they hold a comma, a quote or a line break; quotes doubled).
#pragma once

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

namespace lowbit::testing {

struct CliRun {
  int status = -1;     // the exit status, or 128 + the signal that ended it
  std::string output;  // stdout and stderr
};

inline CliRun run_command(const std::string& command_line) {
  CliRun r;
  FILE* pipe = popen((command_line + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(field), field.clear();
    } else {
      field += c;
    }
  }
  out.push_back(field);
  return out;
}

}  // namespace lowbit::testing
