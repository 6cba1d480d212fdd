// Where a recorded result came from: commit, machine, GPU, date. Every result file carries it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lowbit {

struct Provenance {
  std::string git_sha;    // LOWBIT_GIT_SHA from the environment, else the commit of the build
  std::string date_utc;   // ISO 8601
  std::string host;
  std::string cpu;
  std::string compiler;
  std::string gpu;        // empty when no GPU took part
  std::string gpu_driver;
  std::string cuda_runtime;

  static Provenance current();  // everything but the GPU fields
  nlohmann::json to_json() const;
  // One line for the head of a CSV file or a table: "# git=... date=... host=... cpu=... gpu=...".
  std::string comment_line() const;
};

}  // namespace lowbit
