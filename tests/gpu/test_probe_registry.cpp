// The probe kernels' compile-time atoms against the emulator's registry: for every probed
// instruction the emulator models, the record the kernel is built from (emulation/mma/atom.hpp,
// whose name its inline PTX must spell) is the record the registry makes from that name, and the
// fragments the kernel loads and stores registers through exist. Needs no GPU.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "emulation/mma/instruction.hpp"
#include "kernels/probes/mma_probe.hpp"

using namespace lowbit;

TEST_CASE("every probe's atom is the emulator's record for its instruction", "[probes][registry]") {
  std::size_t modeled = 0;
  for (const auto& probe : kernels::mma_probes()) {
    const mma::Atom& at = probe.atom;
    INFO(at.name.view());
    CHECK_FALSE(at.c_fragment.empty());
    if (at.issue == mma::Issue::mma_sync) {
      CHECK_FALSE(at.a_fragment.empty());
      CHECK_FALSE(at.b_fragment.empty());
    }
    std::optional<mma::Instruction> found;
    try {
      found = mma::find_instruction("sm_90", at.name.view());
    } catch (const mma::UnknownInstruction&) {
      WARN("not modeled by the emulator (recorded and exact-checked only): " << at.name.view());
      continue;
    }
    ++modeled;
    CHECK(found->atom == at);
  }
  // Every probed instruction is modeled (verify-gpu checks each one's tiles against its model).
  CHECK(modeled == kernels::mma_probes().size());
  for (const auto& probe : kernels::wgmma_kloop_probes()) {
    INFO(probe.atom.name.view());
    CHECK(mma::find_instruction("sm_90", probe.atom.name.view()).atom == probe.atom);
  }
}

TEST_CASE("the probes are the instructions of the last complete recorded GPU run", "[probes][registry]") {
  // results/gpu/verify-gpu/ctest-small.json: `lowbit verify-gpu` over every probe on an H100
  // ("complete": true). A probe added or removed since needs a new recorded run.
  const auto path = std::filesystem::path(LOWBIT_SOURCE_DIR) / "results/gpu/verify-gpu/ctest-small.json";
  std::ifstream in(path);
  REQUIRE(in);
  const auto run = nlohmann::json::parse(in);
  REQUIRE(run.at("complete").get<bool>());
  std::set<std::string> recorded, probed;
  for (const auto& row : run.at("instructions")) recorded.insert(row.at("instruction").get<std::string>());
  for (const auto& probe : kernels::mma_probes()) probed.emplace(probe.atom.name.view());
  INFO(path.string());
  CHECK(probed.size() == kernels::mma_probes().size());  // no instruction probed twice
  CHECK(probed == recorded);
  CHECK(recorded.size() == run.at("instructions").size());
}
