#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/verify.hpp"
#include "emulation/mma/vector_file.hpp"
#include "experiments/cli/command.hpp"

namespace lowbit::cli {
namespace {

struct VerifyArgs {
  std::vector<std::string> files;
  int details = 5;  // failing tiles shown in full
  int outputs = 4;  // differing outputs shown per failing tile
  bool neighbours = false;
};

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
    for (const auto& neighbour : mma::neighbouring_models(instruction.model)) {
      std::size_t failing = 0;
      for (const auto& t : tiles) failing += mma::verify_tile(t, neighbour.model).outcome != mma::TileVerdict::Outcome::passed;
      fmt::print("    {:<30} {:>5} of {:>5}\n", neighbour.change, failing, tiles.size());
    }
  }
}

int run_verify(const VerifyArgs& args) {
  Counts total;
  std::map<std::string, Counts> by_instruction;  // "arch instruction"
  std::vector<std::string> failures;             // one paragraph per failed tile, in file order
  std::map<std::string, std::vector<mma::Tile>> checked;  // --neighbours: the tiles that passed, by instruction
  bool unknown = false, unreadable = false;
  const auto fail = [&](const std::string& text) {
    ++total.failed;
    failures.push_back(text);
  };
  for (const auto& path : args.files) {
    const auto error = mma::for_each_line(path, [&](std::size_t number, std::string_view text) {
      if (text.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank line
      const std::string where = fmt::format("{}:{}", path, number);
      const auto parsed = mma::parse_tile_line(text);
      if (!parsed.tile) return fail(fmt::format("{}: malformed line: {}", where, parsed.error));
      const mma::Tile& tile = *parsed.tile;
      const auto verdict = mma::verify_tile(tile);
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
        return fail(fmt::format("{}: {}", where, verdict.error));
      }
      std::string text_out = fmt::format("{}: {} on {}: {} of {} outputs differ (row, col: recorded / emulated)", where,
                                         tile.instruction, tile.arch, verdict.mismatches.size(), verdict.outputs);
      for (std::size_t i = 0; i < verdict.mismatches.size() && int(i) < args.outputs; ++i) {
        const auto& m = verdict.mismatches[i];
        text_out += fmt::format("\n    ({:3}, {:3}): {:08x} / {:08x}", m.row, m.col, m.recorded, m.emulated);
      }
      fail(text_out);
    });
    if (error) {
      fmt::print(stderr, "lowbit verify-vectors: {}\n", *error);
      unreadable = true;
    }
  }

  fmt::print("{:<72} {:>7} {:>7}\n", "instruction", "passed", "failed");
  for (const auto& [name, counts] : by_instruction) fmt::print("{:<72} {:>7} {:>7}\n", name, counts.passed, counts.failed);
  if (!failures.empty()) {
    fmt::print("\nfirst {} of {} failed tiles:\n", std::min<std::size_t>(failures.size(), std::size_t(args.details)),
               failures.size());
    for (std::size_t i = 0; i < failures.size() && int(i) < args.details; ++i) fmt::print("  {}\n", failures[i]);
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
      "hex, and last 'N passed, M failed'. Exits 1 if any tile failed (malformed lines and tiles that do not fit "
      "their instruction count as failed).");
  cmd->add_option("FILE", args->files, "Vector files (shared/spec/mma-vectors.md)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--details", args->details, "How many failing tiles to show")->check(CLI::NonNegativeNumber);
  cmd->add_option("--outputs", args->outputs, "How many differing outputs to show per failing tile")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--neighbours", args->neighbours,
                "Also run every passing tile through models with one parameter changed (F, L, output rounding, how C "
                "enters, chunk order, zero-term exponent) and count the tiles each fails");
  cmd->callback([&exit_code, args] { exit_code = run_verify(*args); });
}

}  // namespace lowbit::cli
