// The probe kernels' compile-time atoms against the emulator's registry: for every probed
// instruction the emulator models, shape, formats and register fragments agree (the kernels
// cannot read the registry at compile time, so this test keeps the two from drifting).
// Needs no GPU.
#include <catch2/catch.hpp>

#include "emulation/mma/instruction.hpp"
#include "kernels/mma_probe.hpp"

using namespace lowbit;

TEST_CASE("every probe agrees with the emulator's atom for its instruction", "[probes][registry]") {
  int modeled = 0;
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
  CHECK(modeled >= 28);
}
