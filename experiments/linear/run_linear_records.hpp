// run_linear.cpp's records: its options, the cases (one GLA head each) and their data sets, a
// measured row, a job (a case and the variants measured on it).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "emulation/linear/gla.hpp"
#include "numerics/gates.hpp"
#include "numerics/linear_attention.hpp"
#include "numerics/synthetic.hpp"

namespace lowbit::experiments::run_linear_detail {

using linear::Pipeline;

constexpr std::string_view kExperiments[] = {"accuracy", "temperature", "ablation", "chunk", "flush"};

struct Options {
  std::string out = "build/results/linear";
  std::vector<std::string> experiments{std::begin(kExperiments), std::end(kExperiments)};
  int seeds = 5;
  int sweep_seeds = 2;
  int heads = 4;
  int tokens = 1024;
  int dk = 128, dv = 256;  // the default synthetic data (the proposal's minimum viable experiment)
  int chunk = 64, sub_chunk = 16;
  std::string data_dir = "experiments/data/smollm2-135m";
  bool real = true;
  std::vector<std::string> real_layers;  // empty: every layer found
  int real_heads = 0;                    // query heads per layer (0: all)
  SyntheticGateSpec gates;
  std::vector<double> temperatures{1, 2, 4, 16, 64};
  std::vector<int> chunks{64, 128, 256};
  std::vector<int> flushes{0, 1, 2, 4, 8};
};

// One GLA head: inputs (gates are drawn per job) and where they come from.
struct Case {
  std::string dataset, head;
  const MatrixF *q, *k, *v;
  int seed = 1;  // of the data (synthetic) and of the gates
  std::uint64_t gate_seed = 0;
};

struct Dataset {
  std::string name, description;
  std::vector<std::shared_ptr<AttentionData>> data;  // kept alive for the cases
  std::vector<Case> cases;
};

struct Row {
  std::string experiment, variant, dataset, head, metric;
  double value;
};

struct Job {
  std::string experiment;
  const Case* c;
  double temperature;
  ChunkShape shape;
  std::vector<std::pair<std::string, Pipeline>> variants;
};

}  // namespace lowbit::experiments::run_linear_detail
