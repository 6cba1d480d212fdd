#include "experiments/common/results.hpp"

#include <fstream>
#include <stdexcept>

namespace lowbit::experiments {

RunInfo RunInfo::from_args(int argc, char** argv) {
  RunInfo r;
  r.program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : "";
  for (int i = 0; i < argc; ++i) {
    if (i) r.command += ' ';
    r.command += argv[i];
  }
  return r;
}

nlohmann::json RunInfo::to_json() const {
  std::vector<std::string> recorded_inputs;
  for (const std::string& file : inputs) recorded_inputs.push_back(repository_relative(file));
  return {{"program", program}, {"command", command}, {"inputs", recorded_inputs}, {"formats", formats},
          {"seeds", seeds},     {"config", config},   {"git_sha", machine.git_sha}, {"machine", machine.to_json()}};
}

ResultDirectory::ResultDirectory(std::filesystem::path dir, RunInfo run, std::string_view name)
    : dir_(std::move(dir)),
      run_(std::move(run)),
      provenance_file_(name.empty() ? "provenance.json" : std::string(name) + ".provenance.json") {
  std::error_code error;
  std::filesystem::create_directories(dir_, error);
  if (error) throw std::runtime_error(dir_.string() + ": cannot create the folder: " + error.message());
}

void ResultDirectory::write_provenance() const { json(provenance_file_, run_.to_json()); }

void ResultDirectory::text(std::string_view file, std::string_view body) const {
  const std::filesystem::path path = dir_ / file;
  std::ofstream out(path);
  if (!(out << body) || !out.flush()) throw std::runtime_error(path.string() + ": cannot write");
}

void ResultDirectory::csv(std::string_view file, std::string_view body, const std::vector<std::string>& comments) const {
  std::string head = run_.machine.comment_line() + "\n# command: " + run_.command + "\n";
  for (const auto& c : comments) head += "# " + c + "\n";
  text(file, head + std::string(body));
}

void ResultDirectory::markdown(std::string_view file, std::string_view body) const {
  std::string head = "<!-- " + run_.machine.comment_line();
  head += " -->\n<!-- command: " + run_.command + " -->\n";
  text(file, head + std::string(body));
}

void ResultDirectory::json(std::string_view file, const nlohmann::json& body) const { text(file, body.dump(2) + "\n"); }

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace lowbit::experiments
