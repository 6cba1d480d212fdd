// lowbit verify-gpu: fresh tiles of every probed tensor-core instruction, executed on the GPU
// and checked against the emulator, tile by tile.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "emulation/mma/families.hpp"
#include "emulation/mma/vector_file.hpp"
#include "emulation/mma/verify.hpp"
#include "experiments/cli/command.hpp"
#include "experiments/cli/gpu_run.hpp"
#include "kernels/mma_probe.hpp"
#include "numerics/parallel.hpp"

namespace lowbit::cli {
namespace {

struct Args {
  std::uint64_t tiles = 100000;
  std::uint64_t seed = 1;
  std::vector<std::string> only;
  std::uint64_t sample_outputs = 65536;
  std::uint64_t keep_failures = 200;
  std::string output_dir;
};

struct Row {
  std::string instruction;
  std::string model;  // the emulator's verification status of its model, or "none" (not modeled)
  std::uint64_t tiles = 0, passed = 0, failed = 0, exact_checked = 0, exact_failed = 0, failures_kept = 0;
  std::vector<std::string> first_failures;  // "tile i: n of m outputs differ (row, col: gpu / emulator) ..."
  double seconds = 0;
};

// A tile failed when the model disagrees on any output bit or the exact check fails.
struct TileResult {
  std::optional<bool> exact;
  mma::TileVerdict verdict;
  bool modeled = false;
  bool failed() const {
    return (exact && !*exact) || (modeled && verdict.outcome != mma::TileVerdict::Outcome::passed);
  }
};

std::string describe(std::uint64_t index, const TileResult& r) {
  if (r.modeled && r.verdict.outcome == mma::TileVerdict::Outcome::rejected)
    return fmt::format("tile {}: rejected: {}", index, r.verdict.error);
  std::string text = fmt::format("tile {}: {} of {} outputs differ (row, col: gpu / emulator)", index,
                                 r.verdict.mismatches.size(), r.verdict.outputs);
  for (std::size_t i = 0; i < r.verdict.mismatches.size() && i < 4; ++i) {
    const auto& m = r.verdict.mismatches[i];
    text += fmt::format(" ({}, {}): {:08x} / {:08x}", m.row, m.col, m.recorded, m.emulated);
  }
  if (r.exact && !*r.exact) text += "; exact check failed";
  return text;
}

bool selected(const Args& args, std::string_view instruction) {
  return args.only.empty() ||
         std::any_of(args.only.begin(), args.only.end(), [&](const auto& s) { return instruction.find(s) != std::string_view::npos; });
}

// Writes OUTPUT_DIR/sample/<instruction>.jsonl.gz and, for failing tiles only,
// OUTPUT_DIR/failures/<instruction>.jsonl.gz.
Row verify_instruction(const kernels::MmaProbe& probe, const kernels::GpuInfo& gpu, const Args& args) {
  const auto start = std::chrono::steady_clock::now();
  const mma::TileSpec& s = probe.spec;
  const std::uint64_t outputs = std::uint64_t(s.m) * s.n;
  const std::uint64_t batch = std::max<std::uint64_t>(64, (std::uint64_t{1} << 21) / outputs);
  const std::uint64_t sample_tiles = std::max<std::uint64_t>(mma::kFamilyCount, args.sample_outputs / outputs);
  Row row;
  row.instruction = s.instruction;
  row.model = "none";
  std::optional<mma::LineWriter> sample, failures;
  const std::string file_name = row.instruction + ".jsonl.gz";
  if (!args.output_dir.empty()) sample.emplace(args.output_dir + "/sample/" + file_name);
  bool modeled = true;  // looked up once: an unmodeled instruction is recorded and exact-checked only
  try {
    row.model = std::string(mma::to_string(mma::find_instruction(gpu.arch, s.instruction).source.status));
  } catch (const mma::UnknownInstruction&) {
    modeled = false;
  }
  std::vector<mma::Tile> tiles;
  std::vector<TileResult> results;
  for (std::uint64_t first = 0; first < args.tiles; first += batch) {
    const std::size_t count = std::size_t(std::min(batch, args.tiles - first));
    tiles.resize(count);
    results.assign(count, {});
    parallel_for(count, [&](std::size_t i, unsigned) {
      tiles[i] = mma::make_input_tile(s, args.seed, first + i);
      tiles[i].arch = gpu.arch;
      tiles[i].device = gpu.name;
    });
    probe.run(tiles);
    parallel_for(count, [&](std::size_t i, unsigned) {
      results[i].exact = mma::exact_check(s, tiles[i]);
      results[i].modeled = modeled;
      if (modeled) results[i].verdict = mma::verify_tile(tiles[i]);
    });
    for (std::size_t i = 0; i < count; ++i) {
      const TileResult& r = results[i];
      row.exact_checked += r.exact.has_value();
      row.exact_failed += r.exact && !*r.exact;
      if (r.modeled) ++(r.verdict.outcome == mma::TileVerdict::Outcome::passed ? row.passed : row.failed);
      if (sample && first + i < sample_tiles) sample->write(mma::to_json_line(tiles[i]));
      if (!r.failed()) continue;
      if (row.first_failures.size() < 5) row.first_failures.push_back(describe(first + i, r));
      if (!args.output_dir.empty() && row.failures_kept < args.keep_failures) {
        if (!failures) failures.emplace(args.output_dir + "/failures/" + file_name);
        failures->write(mma::to_json_line(tiles[i]));
        ++row.failures_kept;
      }
    }
    row.tiles += count;
  }
  if (sample) sample->close();
  if (failures) failures->close();
  row.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return row;
}

int run_verify_gpu(const Args& args) {
  const auto gpu = require_gpu("verify-gpu");
  if (!gpu) return kSkipped;
  std::vector<const kernels::MmaProbe*> probes;
  for (const auto& p : kernels::mma_probes())
    if (selected(args, p.spec.instruction)) probes.push_back(&p);
  if (probes.empty()) {
    fmt::print(stderr, "lowbit verify-gpu: --only matches no probed instruction\n");
    return 2;
  }
  nlohmann::ordered_json doc;
  doc["what"] = "tensor-core instructions run on the GPU on generated tiles, checked tile by tile";
  std::string command = fmt::format("lowbit verify-gpu --tiles {} --seed {} --sample-outputs {}", args.tiles, args.seed,
                                    args.sample_outputs);
  for (const auto& o : args.only) command += " --only " + o;
  doc["command"] = command;
  doc["seed"] = args.seed;
  doc["provenance"] = gpu_provenance(*gpu);
  doc["complete"] = false;
  doc["instructions"] = nlohmann::ordered_json::array();
  std::vector<Row> rows;
  bool failed = false;
  for (const auto* p : probes) {
    rows.push_back(verify_instruction(*p, *gpu, args));
    const Row& r = rows.back();
    failed = failed || r.failed || r.exact_failed || !r.first_failures.empty();
    fmt::print(stderr, "{:<60} {:>8} tiles {:>8} passed {:>8} failed  exact {}/{} failed  model {}  {:.1f} s\n",
               r.instruction, r.tiles, r.passed, r.failed, r.exact_failed, r.exact_checked, r.model, r.seconds);
    for (const auto& f : r.first_failures) fmt::print(stderr, "    {}\n", f);
    doc["instructions"].push_back({{"instruction", r.instruction},
                                   {"tiles", r.tiles},
                                   {"model", r.model},
                                   {"passed", r.passed},
                                   {"failed", r.failed},
                                   {"exact_checked", r.exact_checked},
                                   {"exact_failed", r.exact_failed},
                                   {"failures_kept", r.failures_kept},
                                   {"first_failures", r.first_failures},
                                   {"seconds", r.seconds}});
    // Rewritten after every instruction, so a run cut short keeps what it finished.
    doc["complete"] = rows.size() == probes.size();
    if (!args.output_dir.empty()) write_json(args.output_dir + "/verify-gpu.json", doc);
  }
  fmt::print("{:<60} {:>8} {:>8} {:>8} {:>13}  {}\n", "instruction", "tiles", "passed", "failed", "exact-failed", "model");
  for (const auto& r : rows) {
    const bool modeled = r.model != "none";
    fmt::print("{:<60} {:>8} {:>8} {:>8} {:>13}  {}\n", r.instruction, r.tiles, modeled ? std::to_string(r.passed) : "-",
               modeled ? std::to_string(r.failed) : "-", fmt::format("{}/{}", r.exact_failed, r.exact_checked), r.model);
  }
  return failed ? 1 : 0;
}

}  // namespace

void add_verify_gpu_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "verify-gpu",
      "Run every probed tensor-core instruction (mma.sync, wgmma; sm_90a) on fresh generated tiles on the GPU and check\n"
      "each tile with the emulator's model (every output bit) and, where the arithmetic is exact, with the exact sum.\n"
      "Instructions the emulator does not model are recorded and exact-checked only (model 'none').\n"
      "Exit 0: no failure; 1: failures; 77: no GPU.");
  cmd->add_option("--tiles", args->tiles, "Tiles per instruction")->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40))->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the generated tiles (tile i of an instruction depends on seed and i only)")
      ->capture_default_str();
  cmd->add_option("--only", args->only, "Keep only instructions whose PTX name contains one of these texts")->delimiter(',');
  cmd->add_option("--sample-outputs", args->sample_outputs,
                  "Outputs per instruction to record in OUTPUT_DIR/sample/ (the first tiles; at least one per family)")
      ->capture_default_str();
  cmd->add_option("--keep-failures", args->keep_failures, "Failing tiles per instruction to record in OUTPUT_DIR/failures/")
      ->capture_default_str();
  cmd->add_option("--output-dir", args->output_dir, "Write verify-gpu.json (with provenance), sample/ and failures/ (one .jsonl.gz per instruction) here");
  cmd->callback([&exit_code, args] { exit_code = run_verify_gpu(*args); });
}

}  // namespace lowbit::cli
