// The hard cases of exp2_exact and log2_exact the GPU looks up (emulation/attention/
// exact_rounding_table.hpp) are those the scan finds today (exact_rounding.hpp: all 2^32 inputs,
// about 13 s a function on 2 cores), and each holds the emulator's value; and the GPU's rounding
// (round_with_table at the device's margin) gives the emulator's value on every input from glibc's
// double or either of its neighbours (a library 1 ulp away, as CUDA's may be; as long again).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <iterator>
#include <vector>

#include "emulation/attention/exact_rounding.hpp"
#include "emulation/attention/exact_rounding_table.hpp"
#include "numerics/parallel.hpp"

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

namespace {
// Inputs on which round_with_table(y', x) at the device's margin differs from exact(x), for y' =
// glibc's double y of x or, y nonzero, either double neighbour of y (a library 1 ulp away); and the
// first. Only inputs whose y lies within 2^-46 of a rounding midpoint are tried: from the others a
// 1-ulp move cannot reach one, and round_with_table rounds y as exact() does.
struct Misses {
  std::uint64_t tried = 0, count = 0;
  std::uint32_t first = 0;
};
Misses misses_of_device_rounding(ExactFunction f, const std::vector<RoundingCase>& table) {
  constexpr std::uint64_t kChunk = std::uint64_t(1) << 22;
  constexpr std::size_t kChunks = std::size_t((std::uint64_t(1) << 32) / kChunk);
  std::vector<Misses> found(kChunks);
  lowbit::parallel_for(kChunks, 0, [&](std::size_t chunk, unsigned) {
    for (std::uint64_t i = chunk * kChunk; i < (chunk + 1) * kChunk; ++i) {
      const float x = std::bit_cast<float>(std::uint32_t(i));
      const double y = f == ExactFunction::exp2 ? std::exp2(double(x)) : std::log2(double(x));
      if (!near_rounding_midpoint(y, 0x1p-46)) continue;
      ++found[chunk].tried;
      const std::uint32_t want = std::bit_cast<std::uint32_t>(exact(f, x));
      for (const double moved : {y, std::nextafter(y, -HUGE_VAL), std::nextafter(y, HUGE_VAL)}) {
        if (y == 0 && moved != y) continue;  // an exact zero (log2 1) stays one
        if (std::bit_cast<std::uint32_t>(round_with_table(moved, x, table.data(), int(table.size()), kDeviceMargin)) == want)
          continue;
        if (found[chunk].count++ == 0) found[chunk].first = std::uint32_t(i);
        break;
      }
    }
  });
  Misses all;
  for (const Misses& m : found) {
    if (m.count && all.count == 0) all.first = m.first;
    all.count += m.count;
    all.tried += m.tried;
  }
  return all;
}
}  // namespace

TEST_CASE("the GPU's rounding gives exp2_exact on every input, the double up to one ulp off") {
  const Misses m = misses_of_device_rounding(ExactFunction::exp2, {std::begin(kExp2HardCases), std::end(kExp2HardCases)});
  INFO(m.tried << " inputs tried; the first missed: " << m.first);
  CHECK(m.tried > 0);
  CHECK(m.count == 0);
}

TEST_CASE("the GPU's rounding gives log2_exact on every input, the double up to one ulp off") {
  const Misses m = misses_of_device_rounding(ExactFunction::log2, {std::begin(kLog2HardCases), std::end(kLog2HardCases)});
  INFO(m.tried << " inputs tried; the first missed: " << m.first);
  CHECK(m.tried > 0);
  CHECK(m.count == 0);
}
