// Every tile recorded on hardware (results/vectors/) against the models, bit for bit; what the
// recorded outputs say about signed zeros and overflow; and which model parameters the recorded
// tiles pin down (a neighbouring model must fail some tile, or the parameter is not verified).
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/vector_file.hpp"
#include "emulation/mma/verify.hpp"

using namespace lowbit;
using namespace lowbit::mma;

namespace {

const std::filesystem::path kVectors = std::filesystem::path(LOWBIT_SOURCE_DIR) / "results" / "vectors";

std::vector<Tile> read_tiles(const std::filesystem::path& file) {
  std::vector<Tile> tiles;
  const auto error = for_each_line(file.string(), [&](std::size_t number, std::string_view text) {
    auto parsed = parse_tile_line(text);
    INFO(file.string() << ":" << number << ": " << parsed.error);
    REQUIRE(parsed.tile);
    tiles.push_back(std::move(*parsed.tile));
  });
  REQUIRE(!error);
  return tiles;
}

std::vector<Tile> all_tiles() {
  std::vector<Tile> tiles;
  for (const auto& entry : std::filesystem::directory_iterator(kVectors))
    if (entry.path().string().ends_with(".jsonl.gz") || entry.path().string().ends_with(".jsonl"))
      for (auto& t : read_tiles(entry.path())) tiles.push_back(std::move(t));
  return tiles;
}

// How many tiles fail when every tile of `instruction` runs `model` instead of its own.
std::size_t failing_tiles(const std::vector<Tile>& tiles, const std::string& instruction, const Model& model) {
  std::size_t failing = 0;
  for (const auto& t : tiles) {
    if (t.instruction != instruction) continue;
    Instruction in = find_instruction(t.arch, t.instruction);
    in.model = model;
    failing += execute(in, {t.a, t.b, t.c}) != t.d;
  }
  return failing;
}

}  // namespace

TEST_CASE("every recorded tile passes bit for bit", "[mma][vectors]") {
  std::map<std::string, std::size_t> passed;
  std::size_t total = 0;
  for (const auto& tile : all_tiles()) {
    const auto verdict = verify_tile(tile);
    INFO(tile.arch << " " << tile.instruction << ": " << verdict.error << " " << verdict.mismatches.size()
                   << " outputs differ");
    CHECK(verdict.outcome == TileVerdict::Outcome::passed);
    passed[tile.instruction] += verdict.outcome == TileVerdict::Outcome::passed;
    ++total;
  }
  CHECK(total >= 840);
  CHECK(passed["mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"] >= 150);
  CHECK(passed["mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32"] >= 150);
  CHECK(passed["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"] >= 150);
  CHECK(passed["mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"] >= 150);
  CHECK(passed["wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3"] >= 60);
  CHECK(passed["wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2"] >= 60);
  CHECK(passed["wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"] >= 60);
  CHECK(passed["wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"] >= 60);
}

TEST_CASE("'verified' means recorded: the registry and the recorded tiles agree", "[mma][vectors]") {
  std::set<std::string> recorded;
  for (const auto& tile : all_tiles()) recorded.insert(tile.arch + " " + tile.instruction);
  for (const auto& name : instruction_names()) {
    const bool verified = find_instruction(name.arch, name.name).source.status == Verification::verified;
    INFO(name.arch << " " << name.name);
    CHECK(verified == recorded.contains(name.arch + " " + name.name));
  }
}

TEST_CASE("the recorded outputs: signed zeros and overflow", "[mma][vectors]") {
  // Reported in docs/mma-models.md. Every zero output on the H200 is +0 (all had C = +0 or a
  // nonzero C); the bf16 tiles overflow to +-Inf, never to the largest finite value.
  std::size_t positive_zero = 0, negative_zero = 0, infinite = 0, largest_finite = 0, negative_zero_c = 0;
  for (const auto& tile : all_tiles()) {
    for (std::size_t i = 0; i < tile.d.size(); ++i) {
      positive_zero += tile.d[i] == 0;
      negative_zero += tile.d[i] == 0x8000'0000u;
      negative_zero_c += tile.c[i] == 0x8000'0000u;
      infinite += (tile.d[i] & 0x7fff'ffffu) == 0x7f80'0000u;
      largest_finite += (tile.d[i] & 0x7fff'ffffu) == 0x7f7f'ffffu;
    }
  }
  CHECK(positive_zero == 297);
  CHECK(negative_zero == 0);
  CHECK(negative_zero_c == 0);  // so -0 + -0 was never asked
  CHECK(infinite == 15979);
  CHECK(largest_finite == 0);
}

TEST_CASE("the recorded tiles reject every neighbouring model", "[mma][vectors]") {
  const auto tiles = all_tiles();
  std::set<std::string> instructions;
  for (const auto& t : tiles) instructions.insert(t.instruction);
  for (const auto& name : instructions) {
    const Model model = find_instruction("sm_90", name).model;
    if (model.arithmetic != Arithmetic::fused_dot_add) continue;
    std::vector<std::pair<std::string, Model>> neighbours;
    const auto add = [&](std::string what, auto change) {
      Model m = model;
      change(m.fused);
      neighbours.emplace_back(std::move(what), m);
    };
    add("F - 1", [](FusedDotAdd& p) { --p.fraction_bits; });
    add("F + 1", [](FusedDotAdd& p) { ++p.fraction_bits; });
    add("L / 2", [](FusedDotAdd& p) { p.chunk /= 2; });
    add("other output rounding", [](FusedDotAdd& p) {
      p.rounding = p.rounding == OutputRounding::rz_fp32 ? OutputRounding::rz_e8m13 : OutputRounding::rz_fp32;
    });
    add("C entering the other way", [](FusedDotAdd& p) {
      p.c_entry = p.c_entry == CEntry::aligned ? CEntry::fp32_add_after : CEntry::aligned;
    });
    if (model.fused.interleave) add("consecutive chunks", [](FusedDotAdd& p) { p.interleave = 0; });
    for (const auto& [what, m] : neighbours) {
      INFO(name << " with " << what);
      CHECK(failing_tiles(tiles, name, m) > 0);
    }
    // The zero-term exponent is the one parameter these tiles leave open (docs/mma-models.md).
    for (int e_zero : {-126, -140, -1000}) {
      Model m = model;
      m.fused.zero_exponent = e_zero;
      INFO(name << " with e_zero " << e_zero);
      CHECK(failing_tiles(tiles, name, m) == 0);
    }
  }
}
