#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "emulation/mma/arithmetic.hpp"
#include "verification/vector_file.hpp"
#include "verification/verify.hpp"
#include "experiments/cli/command.hpp"

namespace lowbit::cli {
namespace {

struct VerifyArgs {
  std::vector<std::string> files;
  int details = 5;  // mismatching tiles shown in full (rejected lines are all listed)
  int outputs = 4;  // differing outputs shown per failing tile
  bool neighbours = false;
  std::string change;  // --change: model parameters changed for every tile (verify.hpp, ModelChange)
};

// Rejected lines are listed one by one up to this many (a file of nothing but bad lines stays readable).
constexpr std::size_t kRejectedListed = 1000;

struct Counts {
  std::size_t passed = 0, failed = 0;
};

// For each instruction, how many of its passing tiles each neighbouring model fails: a parameter
// whose neighbours fail no tile is not pinned down by these tiles.
void print_neighbours(const std::map<std::string, std::vector<mma::Tile>>& checked) {
  fmt::print("\nneighbouring models (one parameter changed): tiles they fail\n");
  for (const auto& [key, tiles] : checked) {
    const auto instruction = mma::find_instruction(tiles.front().arch, tiles.front().instruction);
    fmt::print("  {}\n", key);
    for (const auto& neighbour : mma::neighbouring_models(instruction)) {
      if (!neighbour.skipped.empty()) {
        fmt::print("    {:<30} skipped: {}\n", neighbour.change, neighbour.skipped);
        continue;
      }
      std::size_t failing = 0;
      for (const auto& t : tiles) failing += mma::verify_tile(t, neighbour.model).outcome != mma::TileVerdict::Outcome::passed;
      fmt::print("    {:<30} {:>5} of {:>5}\n", neighbour.change, failing, tiles.size());
    }
  }
}

int run_verify(const VerifyArgs& args) {
  std::optional<mma::ModelChange> change;
  if (!args.change.empty() && args.neighbours) {
    fmt::print(stderr, "lowbit verify-vectors: --change and --neighbours do not combine (neighbours are of the "
                       "instructions' own models)\n");
    return 2;
  }
  if (!args.change.empty()) {
    auto parsed = mma::parse_model_change(args.change);
    if (auto* why = std::get_if<std::string>(&parsed)) {
      fmt::print(stderr, "lowbit verify-vectors: --change {}: {}\n", args.change, *why);
      return 2;
    }
    change = std::get<mma::ModelChange>(parsed);
  }
  // Each tile's own model, or that model with --change applied (an unknown instruction is left
  // to verify_tile, which reports it).
  const auto verify = [&](const mma::Tile& tile) {
    if (!change) return mma::verify_tile(tile);
    try {
      return mma::verify_tile(tile, change->applied_to(mma::find_instruction(tile.arch, tile.instruction).model));
    } catch (const mma::UnknownInstruction&) {
      return mma::verify_tile(tile);
    }
  };
  Counts total;
  std::map<std::string, Counts> by_instruction;  // "arch instruction"
  std::vector<std::string> rejected;    // lines that could not be checked (malformed, not fitting), in file order
  std::vector<std::string> mismatched;  // one paragraph per tile whose outputs differ, in file order
  std::map<std::string, std::vector<mma::Tile>> checked;  // --neighbours: the tiles that passed, by instruction
  bool unknown = false, unreadable = false;
  const auto fail = [&](std::vector<std::string>& list, const std::string& text) {
    ++total.failed;
    list.push_back(text);
  };
  for (const auto& path : args.files) {
    std::size_t tiles_in_file = 0;
    const auto error = mma::for_each_line(path, [&](std::size_t number, std::string_view text) {
      if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank line
      ++tiles_in_file;
      const std::string where = fmt::format("{}:{}", path, number);
      const auto parsed = mma::parse_tile_line(text);
      if (!parsed.tile) return fail(rejected, fmt::format("{}: malformed line: {}", where, parsed.error));
      const mma::Tile& tile = *parsed.tile;
      const auto verdict = verify(tile);
      Counts& counts = by_instruction[tile.arch + " " + tile.instruction];
      if (verdict.outcome == mma::TileVerdict::Outcome::passed) {
        ++total.passed;
        ++counts.passed;
        if (args.neighbours) checked[tile.arch + " " + tile.instruction].push_back(tile);
        return;
      }
      ++counts.failed;
      if (verdict.outcome == mma::TileVerdict::Outcome::rejected) {
        unknown = unknown || verdict.unknown_instruction;
        return fail(rejected, fmt::format("{}: {}", where, verdict.error));
      }
      std::string text_out = fmt::format("{}: {} on {}: {} of {} outputs differ (row, col: recorded / emulated)", where,
                                         tile.instruction, tile.arch, verdict.mismatches.size(), verdict.outputs);
      for (std::size_t i = 0; i < verdict.mismatches.size() && int(i) < args.outputs; ++i) {
        const auto& m = verdict.mismatches[i];
        text_out += fmt::format("\n    ({:3}, {:3}): {:08x} / {:08x}", m.row, m.col, m.recorded, m.emulated);
      }
      fail(mismatched, text_out);
    });
    if (error) {
      fmt::print(stderr, "lowbit verify-vectors: {}\n", *error);
      unreadable = true;
    } else if (tiles_in_file == 0) {
      fmt::print(stderr, "lowbit verify-vectors: {}: no tiles (an empty file)\n", path);
      unreadable = true;
    }
  }

  fmt::print("{:<72} {:>7} {:>7}\n", "instruction", "passed", "failed");
  for (const auto& [name, counts] : by_instruction) fmt::print("{:<72} {:>7} {:>7}\n", name, counts.passed, counts.failed);
  if (!rejected.empty()) {
    fmt::print("\n{} lines rejected:\n", rejected.size());
    for (std::size_t i = 0; i < rejected.size() && i < kRejectedListed; ++i) fmt::print("  {}\n", rejected[i]);
    if (rejected.size() > kRejectedListed) fmt::print("  ... and {} more\n", rejected.size() - kRejectedListed);
  }
  if (!mismatched.empty()) {
    fmt::print("\nfirst {} of {} tiles with differing outputs:\n",
               std::min<std::size_t>(mismatched.size(), std::size_t(args.details)), mismatched.size());
    for (std::size_t i = 0; i < mismatched.size() && int(i) < args.details; ++i) fmt::print("  {}\n", mismatched[i]);
  }
  if (args.neighbours) print_neighbours(checked);
  if (unknown) {
    fmt::print("\nmodeled instructions:\n");
    for (const auto& line : mma::modeled_instructions()) fmt::print("  {}\n", line);
  }
  fmt::print("{} passed, {} failed\n", total.passed, total.failed);
  return total.failed || unreadable ? 1 : 0;
}

}  // namespace

void add_verify_vectors_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand(
      "verify-vectors",
      "Recompute every recorded tile of MMA test-vector files (.jsonl or .jsonl.gz) with the emulator and compare "
      "every output bit. Prints a table per instruction, the first failing tiles with their differing outputs in "
      "hex, every rejected line (malformed, or not fitting its instruction) with its line number, and last "
      "'N passed, M failed'. Exits 1 if any tile failed (rejected lines count as failed) or a file is unreadable or "
      "holds no tiles.");
  cmd->add_option("FILE", args->files, "Vector files (shared/spec/mma-vectors.md)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--details", args->details, "How many tiles with differing outputs to show in full")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--outputs", args->outputs, "How many differing outputs to show per failing tile")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--neighbours", args->neighbours,
                "Also run every passing tile through models with one parameter changed (F, L, output rounding, how C "
                "enters, chunk order, zero-term exponent) and count the tiles each fails");
  cmd->add_option("--change", args->change,
                  "Recompute every tile with these parameters of its instruction's model changed, to test another "
                  "(e.g. a published) model: comma-separated key=value, keys L, F, interleave, c (aligned, after), "
                  "rounding (rz-fp32, rz-e8m13, rne-fp16), unpack (none, f16), e_zero, zero (keep-sign, plus); "
                  "e.g. --change L=32,c=aligned,unpack=none,interleave=0");
  cmd->callback([&exit_code, args] { exit_code = run_verify(*args); });
}

}  // namespace lowbit::cli
