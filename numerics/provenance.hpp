// Where a recorded result came from: commit, machine, GPU, date. Every result file carries it.
// The files a result was made from are recorded by repository_relative(): relative to the
// repository root when they lie inside it, so that a record reads the same on every checkout.
#pragma once

#include <filesystem>
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

// The root of the checkout this program was built from.
const std::filesystem::path& repository_root();

// `path` as provenance records it: relative to `root` when it lies inside it (the committed data,
// "experiments/data/..."), else as given (the user's own files). Decided on the paths' text, made
// absolute against the current folder and normalized; symbolic links are not followed. A tensor
// spec "FILE.safetensors:NAME" keeps its ":NAME".
std::string repository_relative(const std::string& path, const std::filesystem::path& root = repository_root());

}  // namespace lowbit
