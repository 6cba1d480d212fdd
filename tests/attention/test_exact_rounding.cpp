// The hard cases of exp2_exact and log2_exact the GPU looks up (emulation/attention/
// exact_rounding_table.hpp) are those the scan finds today (exact_rounding.hpp: all 2^32 inputs,
// about half a minute on 2 cores), and each holds the emulator's value.
#include <catch2/catch.hpp>

#include <bit>
#include <iterator>
#include <vector>

#include "emulation/attention/exact_rounding.hpp"
#include "emulation/attention/exact_rounding_table.hpp"

using namespace lowbit::attention;

namespace {
void check_table(ExactFunction f, const std::vector<RoundingCase>& committed) {
  for (const RoundingCase& c : committed) {
    INFO(std::string(to_string(f)) << " of " << c.input);
    CHECK(std::bit_cast<std::uint32_t>(exact(f, std::bit_cast<float>(c.input))) == c.result);
  }
  const std::vector<RoundingCase> scanned = hard_rounding_cases(f);
  CHECK(scanned.size() == committed.size());
  CHECK(scanned == committed);
}
}  // namespace

TEST_CASE("the committed hard cases of exp2 are the scan's") {
  check_table(ExactFunction::exp2, {std::begin(kExp2HardCases), std::end(kExp2HardCases)});
}

TEST_CASE("the committed hard cases of log2 are the scan's") {
  check_table(ExactFunction::log2, {std::begin(kLog2HardCases), std::end(kLog2HardCases)});
}
