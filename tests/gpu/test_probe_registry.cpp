// The probe kernels' compile-time atoms against the emulator's registry: for every probed
// instruction the emulator models, the record the kernel is built from (emulation/mma/atom.hpp,
// whose name its inline PTX must spell) is the record the registry makes from that name, and the
// fragments the kernel loads and stores registers through exist. Needs no GPU.
#include <catch2/catch.hpp>

#include "emulation/mma/instruction.hpp"
#include "kernels/probes/mma_probe.hpp"

using namespace lowbit;

TEST_CASE("every probe's atom is the emulator's record for its instruction", "[probes][registry]") {
  int modeled = 0;
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
  CHECK(modeled >= 28);
  for (const auto& probe : kernels::wgmma_kloop_probes()) {
    INFO(probe.atom.name.view());
    CHECK(mma::find_instruction("sm_90", probe.atom.name.view()).atom == probe.atom);
  }
}
