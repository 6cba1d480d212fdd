// The experiments of `lowbit run NAME` for Python: the registry's entry points
// (experiments/run/registry.hpp), each a whole program called with the arguments the Python side
// builds (argv[0] "lowbit run NAME", as the program calls them). Plots are not drawn here
// (`lowbit plot FOLDER` draws them).
#include <stdexcept>
#include <string>
#include <vector>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.hpp"
#include "experiments/run/registry.hpp"

namespace lowbit::python {

namespace nb = nanobind;

namespace {

// The experiment's exit status (its messages go to stdout and stderr, as from the program).
int run_experiment(const std::string& name, const std::vector<std::string>& args) {
  for (const auto& e : experiments::experiment_registry())
    if (e.name == name) {
      std::vector<std::string> words{"lowbit run " + name};
      words.insert(words.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (auto& w : words) argv.push_back(w.data());
      argv.push_back(nullptr);
      nb::gil_scoped_release release;
      return e.run(int(words.size()), argv.data());
    }
  std::string names;
  for (const auto& e : experiments::experiment_registry()) names += (names.empty() ? "" : ", ") + std::string(e.name);
  throw std::invalid_argument("unknown experiment '" + name + "' (experiments: " + names + ")");
}

}  // namespace

void register_run(nb::module_& m) {
  m.def("experiments", [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : experiments::experiment_registry()) out.emplace_back(e.name, e.summary);
    return out;
  });
  m.def("run", &run_experiment, nb::arg("name"), nb::arg("args"));
}

}  // namespace lowbit::python
