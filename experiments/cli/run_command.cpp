// lowbit run NAME [OPTIONS]: one experiment of experiments/run/registry.hpp (its own --help lists
// its options); lowbit run all [OPTIONS]: every one registered for it in turn, each into OUT/NAME,
// then a summary table. lowbit run-merge OUT SHARD...: the parts of one sweep (lowbit run NAME
// --shard I/N, experiments/run/harness.hpp) joined: the experiment run again with the first shard's
// options and --merge, which reads every item from the shards. lowbit plot DIR: the plots of a
// results folder (plots/plot_run.py), which run and run-merge also draw.
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "experiments/cli/command.hpp"
#include "experiments/run/harness.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::cli {
namespace {

namespace fs = std::filesystem;
using experiments::Experiment;

struct PlotSettings {
  std::string python = "/usr/bin/python3";
  std::string script = std::string(LOWBIT_SOURCE_DIR) + "/plots/plot_run.py";
  bool enabled = true;
};

// Shell-quoted.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the plot script on `dir`; returns its exit status (77: matplotlib missing).
int plot(const PlotSettings& p, const std::string& dir) {
  const std::string command = quoted(p.python) + " " + quoted(p.script) + " " + quoted(dir);
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int run_one(const Experiment& e, const std::vector<std::string>& args) {
  std::vector<std::string> words{"lowbit run " + std::string(e.name)};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  return e.run(int(words.size()), argv.data());
}

bool asks_for_help(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") return true;
  return false;
}

// The value of option `name` ("--out") in args (empty when absent), and args without it.
std::string take_option(std::vector<std::string>& args, const std::string& name) {
  std::string value;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) {
      value = args[i + 1];
      args.erase(args.begin() + std::ptrdiff_t(i), args.begin() + std::ptrdiff_t(i + 2));
      --i;
    } else if (args[i].rfind(name + "=", 0) == 0) {
      value = args[i].substr(name.size() + 1);
      args.erase(args.begin() + std::ptrdiff_t(i));
      --i;
    }
  }
  return value;
}

// Runs experiment e with args, then draws its plots into its --out folder, unless a shard
// (its folder holds a part of the results; the merge draws them).
int run_and_plot(const Experiment& e, const std::vector<std::string>& args, const PlotSettings& plots) {
  int exit_code = run_one(e, args);
  std::vector<std::string> copy = args;
  std::string out = take_option(copy, "--out");
  if (exit_code == 0 && plots.enabled && e.in_run_all && !asks_for_help(args) && take_option(copy, "--shard").empty()) {
    if (out.empty()) out = std::string(LOWBIT_DEFAULT_RESULTS_DIR) + "/" + std::string(e.name);
    const int p = plot(plots, out);
    if (p == 77) std::cerr << "lowbit run: no plots: matplotlib is missing for " << plots.python << "\n";
    else if (p != 0) exit_code = 1;
  }
  return exit_code;
}

std::string list_text() {
  std::string s = "experiments (lowbit run NAME --help for the options of each):\n";
  for (const auto& e : experiments::experiment_registry())
    s += fmt::format("  {:<14} {}{}\n", e.name, e.summary, e.in_run_all ? "" : " [not in all]");
  s += fmt::format("  {:<14} {}\n", "all",
                   "every experiment above but those marked [not in all], each into OUT/NAME (--out OUT, default "
                   "build/results), then a summary");
  return s;
}

int run_all(std::vector<std::string> args, const PlotSettings& plots) {
  if (std::vector<std::string> copy = args; !take_option(copy, "--shard").empty() || !take_option(copy, "--merge").empty()) {
    std::cerr << "lowbit run all: --shard and --merge split one experiment's sweep: lowbit run NAME --shard I/N\n";
    return 2;
  }
  std::string root = take_option(args, "--out");
  if (root.empty()) root = LOWBIT_DEFAULT_RESULTS_DIR;
  struct Done {
    std::string name, status, headline, dir;
    double cpu, wall;
  };
  std::vector<Done> done;
  std::vector<Experiment> list;
  for (const Experiment& e : experiments::experiment_registry())
    if (e.in_run_all) list.push_back(e);
  int failures = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const Experiment& e = list[i];
    const std::string dir = (fs::path(root) / std::string(e.name)).string();
    std::cerr << fmt::format("\n== lowbit run all: {}/{} {}: {}\n", i + 1, list.size(), e.name, e.summary);
    std::vector<std::string> mine = args;
    mine.insert(mine.end(), {"--out", dir});
    const double cpu0 = double(std::clock()) / CLOCKS_PER_SEC;
    const auto wall0 = std::chrono::steady_clock::now();
    const int rc = run_one(e, mine);
    Done d{std::string(e.name), rc == 0 ? "ok" : fmt::format("failed ({})", rc), "", dir,
           double(std::clock()) / CLOCKS_PER_SEC - cpu0,
           std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count()};
    if (rc != 0) ++failures;
    if (std::ifstream in(fs::path(dir) / "headline.txt"); in) std::getline(in, d.headline);
    if (rc == 0 && plots.enabled) {
      const int p = plot(plots, dir);
      if (p != 0) d.status += p == 77 ? ", no plots (matplotlib missing)" : ", plots failed";
    }
    done.push_back(d);
  }
  double cpu = 0, wall = 0;
  std::string table = "| experiment | status | CPU s | wall s | headline |\n|---|---|---|---|---|\n";
  for (const Done& d : done) {
    table += fmt::format("| {} | {} | {:.0f} | {:.0f} | {} |\n", d.name, d.status, d.cpu, d.wall, d.headline);
    cpu += d.cpu;
    wall += d.wall;
  }
  table += fmt::format("| all | {} failed | {:.0f} | {:.0f} | |\n", failures, cpu, wall);
  std::cout << "\n" << table;
  std::ofstream(fs::path(root) / "summary.md") << "# lowbit run all\n\n" << table;
  std::cout << "\nplots:\n";
  for (const Done& d : done)
    if (fs::exists(d.dir))
      for (const auto& f : fs::directory_iterator(d.dir))
        if (f.path().extension() == ".png") std::cout << "  " << f.path().string() << "\n";
  std::cout << "summary: " << (fs::path(root) / "summary.md").string() << "\n";
  return failures ? 1 : 0;
}

}  // namespace

void add_run_commands(CLI::App& app, int& exit_code) {
  auto* run = app.add_subcommand("run", "run an experiment (lowbit run --list), or all of them");
  run->prefix_command();
  run->set_help_flag();  // --help belongs to the experiment
  static PlotSettings plots;
  run->callback([run, &exit_code]() {
    std::vector<std::string> args = run->remaining();
    if (args.empty() || args[0] == "--list" || args[0] == "--help" || args[0] == "-h") {
      std::cout << "usage: lowbit run NAME [OPTIONS] | lowbit run all [OPTIONS] [--no-plots]\n"
                   "       lowbit run NAME [OPTIONS] --shard I/N --out DIR_I (I = 1..N), then lowbit run-merge OUT DIR_1 ... DIR_N\n"
                   "       lowbit run NAME [OPTIONS] --device gpu [--no-check]: the GPU's kernels beside the emulation (NAME --help)\n\n"
                << list_text();
      exit_code = args.empty() ? 2 : 0;
      return;
    }
    const std::string name = args[0];
    args.erase(args.begin());
    for (std::size_t i = 0; i < args.size(); ++i)
      if (args[i] == "--no-plots") {
        plots.enabled = false;
        args.erase(args.begin() + std::ptrdiff_t(i--));
      } else if (args[i] == "--python" && i + 1 < args.size()) {
        plots.python = args[i + 1];
        args.erase(args.begin() + std::ptrdiff_t(i), args.begin() + std::ptrdiff_t(i + 2));
        --i;
      }
    if (name == "all") {
      exit_code = asks_for_help(args) ? (std::cout << list_text(), 0) : run_all(args, plots);
      return;
    }
    for (const auto& e : experiments::experiment_registry())
      if (e.name == name) {
        exit_code = run_and_plot(e, args, plots);
        return;
      }
    std::cerr << "lowbit run: unknown experiment '" << name << "'\n" << list_text();
    exit_code = 2;
  });

  auto* merge = app.add_subcommand(
      "run-merge",
      "join the shards of a sweep (lowbit run NAME --shard I/N --out DIR, I = 1..N) into OUT: the files and plots "
      "lowbit run NAME --out OUT writes, byte for byte but the provenance lines");
  static std::string merge_out;
  static std::vector<std::string> shard_dirs;
  merge->add_option("OUT", merge_out, "the folder to write")->required();
  merge->add_option("SHARDS", shard_dirs, "the shards' folders, every part I/N once, in any order; they must have "
                                          "run one experiment with the same options at the same git SHA")
      ->required();
  merge->add_flag_callback("--no-plots", [] { plots.enabled = false; }, "do not draw the plots");
  merge->add_option("--python", plots.python, "the Python with matplotlib")->capture_default_str();
  merge->callback([&exit_code]() {
    // The experiment and its options are the first shard's; the merge checks every shard against them.
    nlohmann::json manifest;
    try {
      manifest = experiments::read_shard(shard_dirs.front());
    } catch (const std::exception& e) {
      std::cerr << "lowbit run-merge: " << e.what() << "\n";
      exit_code = 1;
      return;
    }
    const std::string name = manifest.at("experiment").get<std::string>();
    for (const auto& e : experiments::experiment_registry())
      if (e.name == name) {
        std::vector<std::string> args = manifest.at("args").get<std::vector<std::string>>();
        take_option(args, "--out");
        take_option(args, "--shard");
        args.insert(args.end(), {"--out", merge_out, "--merge"});
        args.insert(args.end(), shard_dirs.begin(), shard_dirs.end());
        exit_code = run_and_plot(e, args, plots);
        return;
      }
    std::cerr << "lowbit run-merge: " << shard_dirs.front() << " is a shard of '" << name << "', which this lowbit lacks\n";
    exit_code = 1;
  });

  auto* plot_cmd = app.add_subcommand("plot", "draw the plots of a results folder (lowbit run NAME writes one)");
  static std::string dir;
  plot_cmd->add_option("DIR", dir, "a folder written by lowbit run NAME, or by lowbit run all (each of its folders)")->required();
  plot_cmd->add_option("--python", plots.python, "the Python with matplotlib")->capture_default_str();
  plot_cmd->callback([&exit_code]() {
    std::vector<std::string> dirs;
    if (fs::exists(fs::path(dir) / "metrics.csv")) {
      dirs.push_back(dir);
    } else if (fs::is_directory(dir)) {
      for (const auto& f : fs::directory_iterator(dir))
        if (fs::exists(f.path() / "metrics.csv")) dirs.push_back(f.path().string());
      std::sort(dirs.begin(), dirs.end());
    }
    if (dirs.empty()) {
      std::cerr << "lowbit plot: " << dir << ": no metrics.csv here or in its folders\n";
      exit_code = 1;
      return;
    }
    for (const auto& d : dirs) {
      const int p = plot(plots, d);
      if (p != 0) {
        std::cerr << "lowbit plot: " << d << ": " << (p == 77 ? "matplotlib is missing" : "the plot script failed") << "\n";
        exit_code = p == 77 ? 77 : 1;
        return;
      }
    }
  });
}

}  // namespace lowbit::cli
