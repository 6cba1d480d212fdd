// How every experiment and benchmark records what it did, written once: the run (command line,
// inputs, formats, seeds, configuration, machine: provenance.json beside the results) and the
// result files (CSV, JSON, markdown), each opening with the provenance line and the command.
//
//   ResultDirectory out(dir, RunInfo::from_args(argc, argv));   // creates dir
//   out.csv("table.csv", "a,b\n1,2\n");   // "# git=... date=... host=...\n# command: ...\na,b\n1,2\n"
//   out.markdown("table.md", text);       // the same two lines as HTML comments, then the text
//   out.json("summary.json", j);          // j as is, indented
//   out.write_provenance();               // provenance.json: run() as JSON
// Every write throws std::runtime_error naming the file when it cannot be written.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "numerics/provenance.hpp"

namespace lowbit::experiments {

struct RunInfo {
  std::string program;               // argv[0]'s file name
  std::string command;               // the command line, arguments separated by spaces
  std::vector<std::string> inputs;   // files read (empty: generated data); recorded by repository_relative()
  nlohmann::json formats = nlohmann::json::object();  // number formats, presets, instructions used
  nlohmann::json seeds = nlohmann::json::object();
  nlohmann::json config = nlohmann::json::object();   // everything else that decides the result
  Provenance machine = Provenance::current();

  static RunInfo from_args(int argc, char** argv);
  nlohmann::json to_json() const;  // provenance.json's content
};

class ResultDirectory {
 public:
  // Creates `dir` (throws naming it when it cannot). The provenance file is provenance.json, or
  // NAME.provenance.json with a `name` (programs that share a folder).
  ResultDirectory(std::filesystem::path dir, RunInfo run, std::string_view name = "");

  const std::filesystem::path& dir() const { return dir_; }
  RunInfo& run() { return run_; }
  const RunInfo& run() const { return run_; }
  void write_provenance() const;

  // `comments`: more "# " lines after the provenance and command lines.
  void csv(std::string_view file, std::string_view body, const std::vector<std::string>& comments = {}) const;
  void markdown(std::string_view file, std::string_view body) const;
  void json(std::string_view file, const nlohmann::json& body) const;
  // Any other text, as is.
  void text(std::string_view file, std::string_view body) const;

 private:
  std::filesystem::path dir_;
  RunInfo run_;
  std::string provenance_file_;
};

// A CSV field: quoted when it holds a comma, a quote or a line break (quotes doubled).
std::string csv_field(std::string_view s);

}  // namespace lowbit::experiments
