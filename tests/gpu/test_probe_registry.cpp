// The probe kernels' compile-time atoms against the emulator's registry: for every probed
// instruction the emulator models, shape, formats and register fragments agree (the kernels
// cannot read the registry at compile time, so this test keeps the two from drifting).
// Needs no GPU.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "emulation/mma/instruction.hpp"
#include "kernels/mma_probe.hpp"

using namespace lowbit;

TEST_CASE("every probe agrees with the emulator's atom for its instruction", "[probes][registry]") {
  std::size_t modeled = 0;
  for (const auto& probe : kernels::mma_probes()) {
    const auto& s = probe.spec;
    INFO(s.instruction);
    std::optional<mma::Instruction> found;
    try {
      found = mma::find_instruction("sm_90", s.instruction);
    } catch (const mma::UnknownInstruction&) {
      WARN("not modeled by the emulator (recorded and exact-checked only): " << s.instruction);
      continue;
    }
    ++modeled;
    const mma::Atom& at = found->atom;
    CHECK(at.name == s.instruction);
    CHECK(at.m == s.m);
    CHECK(at.n == s.n);
    CHECK(at.k == s.k);
    CHECK(at.a == s.a);
    CHECK(at.b == s.b);
    CHECK(at.c == s.c);
    CHECK(at.d == s.c);
    CHECK(at.issue == (probe.warpgroup ? mma::Issue::wgmma : mma::Issue::mma_sync));
    REQUIRE(at.c_fragment.has_value());
    CHECK(*at.c_fragment == probe.c_fragment);
    if (!probe.warpgroup) {
      CHECK(at.a_fragment == probe.a_fragment);
      CHECK(at.b_fragment == probe.b_fragment);
    }
  }
  // Every probed instruction is modeled (verify-gpu checks each one's tiles against its model).
  CHECK(modeled == kernels::mma_probes().size());
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
  for (const auto& probe : kernels::mma_probes()) probed.emplace(probe.spec.instruction);
  INFO(path.string());
  CHECK(probed.size() == kernels::mma_probes().size());  // no instruction probed twice
  CHECK(probed == recorded);
  CHECK(recorded.size() == run.at("instructions").size());
}
