#include "numerics/provenance.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "lowbit_git_sha.h"

namespace lowbit {
namespace {

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? line : line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown";
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

}  // namespace

Provenance Provenance::current() {
  Provenance p;
  const char* sha = std::getenv("LOWBIT_GIT_SHA");
  p.git_sha = sha && *sha ? sha : LOWBIT_GIT_SHA;
  p.date_utc = utc_now();
  char host[256] = {};
  p.host = gethostname(host, sizeof host - 1) == 0 ? host : "unknown";
  p.cpu = cpu_model();
#if defined(__clang__)
  p.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  p.compiler = "g++ " __VERSION__;
#endif
  return p;
}

nlohmann::json Provenance::to_json() const {
  nlohmann::json j{{"git_sha", git_sha}, {"date_utc", date_utc}, {"host", host}, {"cpu", cpu}, {"compiler", compiler}};
  if (!gpu.empty()) {
    j["gpu"] = gpu;
    j["gpu_driver"] = gpu_driver;
    j["cuda_runtime"] = cuda_runtime;
  }
  return j;
}

const std::filesystem::path& repository_root() {
  static const std::filesystem::path root(LOWBIT_SOURCE_DIR);
  return root;
}

std::string repository_relative(const std::string& path, const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  if (path.empty()) return path;
  const fs::path relative =
      fs::absolute(path).lexically_normal().lexically_relative(fs::absolute(root).lexically_normal());
  // Empty: no common start; a leading "..": outside the root.
  if (relative.empty() || *relative.begin() == "..") return path;
  return relative.generic_string();
}

std::string Provenance::comment_line() const {
  std::string line = "# git=" + git_sha + " date=" + date_utc + " host=" + host + " cpu=\"" + cpu + "\"";
  if (!gpu.empty()) line += " gpu=\"" + gpu + "\" driver=" + gpu_driver + " cuda=" + cuda_runtime;
  return line;
}

}  // namespace lowbit
