// The experiments `lowbit run NAME` runs, as data: a name, what it asks, and its entry point,
// which is a whole program (argv[0] is "lowbit run NAME"; it parses its own options, --help
// lists them) returning the exit status. Each writes its folder (--out); those in `lowbit run
// all` include headline.txt: one line that its summary shows.
//
// Another branch's experiment joins by exposing `int run_X(int argc, char** argv)` and adding one
// line to registry.cpp (the linear-attention experiment does so where it is built:
// LOWBIT_HAVE_EXP_LINEAR).
#pragma once

#include <string_view>
#include <vector>

namespace lowbit::experiments {

struct Experiment {
  std::string_view name, summary;
  int (*run)(int argc, char** argv);
  // true: its folder is the harness's (metrics.csv, headline.txt), which `lowbit run all` and
  // plots/plot_run.py read; false: a study with files of its own, run by name only, no plots drawn.
  bool in_run_all = true;
};

// In the order `lowbit run all` runs them.
const std::vector<Experiment>& experiment_registry();

// The entry points of this folder's experiments.
int run_granularity(int argc, char** argv);
int run_granularity_qk(int argc, char** argv);
int run_smoothing(int argc, char** argv);
int run_pv_format(int argc, char** argv);
int run_fp4(int argc, char** argv);
int run_formats(int argc, char** argv);
int run_backward(int argc, char** argv);
int run_accumulator(int argc, char** argv);
int run_attribution(int argc, char** argv);

}  // namespace lowbit::experiments
