// lowbit verify-gpu: fresh tiles of every probed tensor-core instruction, executed on the GPU
// and checked against the emulator, tile by tile.
#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "experiments/cli/command.hpp"
#include "experiments/cli/gpu_run.hpp"
#include "kernels/probes/mma_probe.hpp"
#include "numerics/parallel.hpp"
#include "verification/families.hpp"
#include "verification/tile_codes.hpp"
#include "verification/vector_file.hpp"
#include "verification/verify.hpp"

namespace lowbit::cli {
namespace {

struct Args {
  std::uint64_t tiles = 100000;
  std::uint64_t seed = 1;
  std::vector<std::string> only;
  std::vector<std::string> family_names;  // empty: the default cycle
  std::vector<mma::Family> families;      // tile i has families[i mod size]
  std::uint64_t sample_outputs = 65536;
  std::uint64_t keep_failures = 200;
  std::string output_dir;
  bool kloop = false;
  bool neighbours = false;
};

// What one row of the table runs: an instruction once per tile, or a whole K loop through it.
struct Job {
  mma::Atom atom;                    // the instruction
  int depth = 0;                     // the tiles' k: the instruction's, or the K loop's depth
  std::string label;                 // the row's name; also names the sample and failure files
  std::optional<int> mmas_per_flush;  // K-loop jobs: recorded in each tile, read back by verify_tile
  void (*run)(const kernels::TileBatch& tiles);
};

// The job's probe on a batch of vector-file tiles: fills each tile's d.
void run_on_gpu(const Job& job, std::span<mma::Tile> tiles) {
  mma::TileCodes codes = mma::tile_codes(job.atom, job.depth, tiles);
  job.run({codes.count, codes.a, codes.b, codes.c, codes.d});
  mma::store_d(job.atom, codes, tiles);
}

struct Row {
  std::string instruction;
  std::string model;  // the emulator's verification status of its model, or "none" (not modeled)
  std::uint64_t tiles = 0, passed = 0, failed = 0, exact_checked = 0, exact_failed = 0, failures_kept = 0;
  std::vector<std::string> first_failures;  // "tile i: n of m outputs differ (row, col: gpu / emulator) ..."
  // --neighbours: each neighbouring model (one parameter changed) and how many passing tiles it fails.
  std::vector<std::pair<std::string, std::uint64_t>> neighbour_failures;
  double seconds = 0, generate_seconds = 0, gpu_seconds = 0, check_seconds = 0;
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

double seconds_since(std::chrono::steady_clock::time_point& since) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - since).count();
  since = now;
  return seconds;
}

// Writes OUTPUT_DIR/sample/<label>.jsonl.gz and, for failing tiles only,
// OUTPUT_DIR/failures/<label>.jsonl.gz.
Row verify_job(const Job& job, const kernels::GpuInfo& gpu, const Args& args) {
  const auto start = std::chrono::steady_clock::now();
  const mma::Atom& s = job.atom;
  const std::uint64_t outputs = std::uint64_t(s.m) * s.n;
  const std::uint64_t batch = std::max<std::uint64_t>(64, (std::uint64_t{1} << 21) / outputs);
  const std::uint64_t sample_tiles = std::max<std::uint64_t>(args.families.size(), args.sample_outputs / outputs);
  Row row;
  row.instruction = job.label;
  row.model = "none";
  std::optional<mma::LineWriter> sample, failures;
  const std::string file_name = row.instruction + ".jsonl.gz";
  if (!args.output_dir.empty()) sample.emplace(args.output_dir + "/sample/" + file_name);
  bool modeled = true;  // looked up once: an unmodeled instruction is recorded and exact-checked only
  std::vector<mma::NeighbourModel> neighbours;
  try {
    const mma::Instruction instruction = mma::find_instruction(gpu.arch, s.name.view());
    row.model = std::string(mma::to_string(instruction.source.status));
    if (args.neighbours)
      for (auto& n : mma::neighbouring_models(instruction))
        if (n.skipped.empty()) neighbours.push_back(std::move(n));
        else fmt::print(stderr, "{}: neighbour {} skipped: {}\n", row.instruction, n.change, n.skipped);
  } catch (const mma::UnknownInstruction&) {
    modeled = false;
  }
  for (const auto& n : neighbours) row.neighbour_failures.emplace_back(n.change, 0);
  std::vector<std::vector<char>> neighbour_failed(neighbours.size());
  std::vector<mma::Tile> tiles;
  std::vector<TileResult> results;
  for (std::uint64_t first = 0; first < args.tiles; first += batch) {
    const std::size_t count = std::size_t(std::min(batch, args.tiles - first));
    tiles.resize(count);
    results.assign(count, {});
    auto phase = std::chrono::steady_clock::now();
    parallel_for(count, [&](std::size_t i, unsigned) {
      tiles[i] = mma::make_input_tile(s, args.seed, first + i, args.families[(first + i) % args.families.size()], job.depth);
      tiles[i].arch = gpu.arch;
      tiles[i].device = gpu.name;
      if (job.mmas_per_flush) tiles[i].extra["mmas_per_flush"] = *job.mmas_per_flush;
    });
    row.generate_seconds += seconds_since(phase);
    run_on_gpu(job, tiles);
    row.gpu_seconds += seconds_since(phase);
    for (auto& failed : neighbour_failed) failed.assign(count, 0);
    parallel_for(count, [&](std::size_t i, unsigned) {
      results[i].exact = mma::exact_check(s, tiles[i]);
      results[i].modeled = modeled;
      if (!modeled) return;
      results[i].verdict = mma::verify_tile(tiles[i]);
      if (results[i].verdict.outcome != mma::TileVerdict::Outcome::passed) return;
      for (std::size_t n = 0; n < neighbours.size(); ++n)
        neighbour_failed[n][i] = mma::verify_tile(tiles[i], neighbours[n].model).outcome != mma::TileVerdict::Outcome::passed;
    });
    for (std::size_t n = 0; n < neighbours.size(); ++n)
      row.neighbour_failures[n].second += std::uint64_t(std::count(neighbour_failed[n].begin(), neighbour_failed[n].end(), 1));
    row.check_seconds += seconds_since(phase);
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

// Whether every chosen family applies to the instruction (the targeted ones need floating accumulators).
bool families_apply(const Args& args, const mma::Atom& atom) {
  return std::all_of(args.families.begin(), args.families.end(), [&](mma::Family f) { return mma::applies(f, atom); });
}

int run_verify_gpu(Args args) {
  for (const auto& name : args.family_names) {
    const auto family = mma::parse_family(name);
    if (!family) {
      std::string known;
      for (int f = 0; f < mma::kFamilyCount; ++f) known += fmt::format(" {}", mma::to_string(mma::Family(f)));
      fmt::print(stderr, "lowbit verify-gpu: --families: unknown family '{}' (families:{})\n", name, known);
      return 2;
    }
    args.families.push_back(*family);
  }
  if (args.families.empty())
    for (int f = 0; f < mma::kCycledFamilies; ++f) args.families.push_back(mma::Family(f));
  const auto gpu = require_gpu("verify-gpu");
  if (!gpu) return kSkipped;
  std::vector<Job> jobs;
  const auto add = [&](const mma::Atom& atom, int depth, std::string label, std::optional<int> flush, auto run) {
    if (!selected(args, label)) return;
    if (!families_apply(args, atom))
      fmt::print(stderr, "lowbit verify-gpu: {}: skipped (a chosen family needs a floating accumulator)\n", label);
    else
      jobs.push_back({atom, depth, std::move(label), flush, run});
  };
  if (args.kloop) {
    for (const auto& p : kernels::wgmma_kloop_probes()) {
      const int depth = p.steps * p.atom.k;
      add(p.atom, depth, fmt::format("{}.kloop-K{}-flush{}", p.atom.name.view(), depth, p.mmas_per_flush),
          p.mmas_per_flush, p.run);
    }
  } else {
    for (const auto& p : kernels::mma_probes()) add(p.atom, p.atom.k, p.atom.name.str(), std::nullopt, p.run);
  }
  if (jobs.empty()) {
    fmt::print(stderr, "lowbit verify-gpu: --only and --families leave no probed instruction\n");
    return 2;
  }
  nlohmann::ordered_json doc;
  doc["what"] = "tensor-core instructions run on the GPU on generated tiles, checked tile by tile";
  std::string command = fmt::format("lowbit verify-gpu --tiles {} --seed {} --sample-outputs {}", args.tiles, args.seed,
                                    args.sample_outputs);
  if (args.kloop) command += " --kloop";
  if (args.neighbours) command += " --neighbours";
  for (const auto& o : args.only) command += " --only " + o;
  if (!args.family_names.empty()) command += fmt::format(" --families {}", fmt::join(args.family_names, ","));
  doc["command"] = command;
  doc["seed"] = args.seed;
  doc["families"] = nlohmann::ordered_json::array();
  for (auto f : args.families) doc["families"].push_back(mma::to_string(f));
  doc["provenance"] = gpu_provenance(*gpu);
  doc["complete"] = false;
  doc["instructions"] = nlohmann::ordered_json::array();
  std::vector<Row> rows;
  bool failed = false;
  for (const auto& job : jobs) {
    rows.push_back(verify_job(job, *gpu, args));
    const Row& r = rows.back();
    failed = failed || r.failed || r.exact_failed || !r.first_failures.empty();
    fmt::print(stderr,
               "{:<60} {:>8} tiles {:>8} passed {:>8} failed  exact {}/{} failed  model {}  {:.1f} s (generate {:.1f}, "
               "gpu {:.1f}, check {:.1f})\n",
               r.instruction, r.tiles, r.passed, r.failed, r.exact_failed, r.exact_checked, r.model, r.seconds,
               r.generate_seconds, r.gpu_seconds, r.check_seconds);
    for (const auto& f : r.first_failures) fmt::print(stderr, "    {}\n", f);
    for (const auto& [change, failing] : r.neighbour_failures)
      fmt::print(stderr, "    neighbour {:<28} fails {} of the {} passing tiles\n", change, failing, r.passed);
    doc["instructions"].push_back({{"instruction", r.instruction},
                                   {"tiles", r.tiles},
                                   {"model", r.model},
                                   {"passed", r.passed},
                                   {"failed", r.failed},
                                   {"exact_checked", r.exact_checked},
                                   {"exact_failed", r.exact_failed},
                                   {"failures_kept", r.failures_kept},
                                   {"first_failures", r.first_failures},
                                   {"neighbour_failures", r.neighbour_failures},
                                   {"seconds", r.seconds},
                                   {"seconds_generate", r.generate_seconds},
                                   {"seconds_gpu", r.gpu_seconds},
                                   {"seconds_check", r.check_seconds}});
    // Rewritten after every instruction, so a run cut short keeps what it finished.
    doc["complete"] = rows.size() == jobs.size();
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
  cmd->add_option("--families", args->family_names,
                  "Tile families to cycle through (default: the nine standard ones, random .. wide_band); the targeted "
                  "families tiny_products (settles the zero-term exponent) and subnormal_c (whether C's subnormals "
                  "are flushed) run only when named here")
      ->delimiter(',');
  cmd->add_flag("--kloop", args->kloop,
               "Run whole K loops instead of single instructions: wgmma m64n8 f16, bf16, e4m3, e5m2 -> f32, 8 MMAs per "
               "tile, one accumulator chained from C or a fresh one added into an fp32 accumulator every 1, 2, 4 or 8 "
               "MMAs, checked against the emulator's gemm() (the rows are named <instruction>.kloop-K<K>-flush<f>)");
  cmd->add_flag("--neighbours", args->neighbours,
               "Also run every passing tile through the models next to the instruction's (one parameter changed: F, L, "
               "output rounding, how C enters, chunk order, unpacking, zero-term exponent) and count the tiles each "
               "fails: a parameter is pinned by these tiles only where its neighbours fail some");
  cmd->add_option("--sample-outputs", args->sample_outputs,
                  "Outputs per instruction to record in OUTPUT_DIR/sample/ (the first tiles; at least one per family)")
      ->capture_default_str();
  cmd->add_option("--keep-failures", args->keep_failures, "Failing tiles per instruction to record in OUTPUT_DIR/failures/")
      ->capture_default_str();
  cmd->add_option("--output-dir", args->output_dir, "Write verify-gpu.json (with provenance), sample/ and failures/ (one .jsonl.gz per instruction) here");
  cmd->callback([&exit_code, args] { exit_code = run_verify_gpu(*args); });
}

}  // namespace lowbit::cli
