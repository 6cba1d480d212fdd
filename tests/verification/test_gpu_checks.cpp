// The comparisons of the GPU checks (verification/: float32_sweep.hpp, bit_compare.hpp, cvt.hpp,
// exp2.hpp) on the host, with a stand-in for the device: they count every difference, keep the
// smallest inputs and first indices, and count what the contract counts (the sign of zero, NaN).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "verification/bit_compare.hpp"
#include "verification/cvt.hpp"
#include "verification/exp2.hpp"
#include "verification/float32_sweep.hpp"

using namespace lowbit;
using namespace lowbit::verification;

TEST_CASE("sweep_float32: every stride-th input, each difference counted, the smallest kept in order", "[verification]") {
  const std::uint32_t stride = 65537;  // 65,536 inputs: 0, stride, ..., 65535 stride = 2^32 - 1
  const std::set<std::uint32_t> wrong{stride * 7, stride * 3, stride * 60000, stride * 5, stride * 1000};
  const auto model = [](std::span<const float> in, std::span<std::uint32_t> out) {
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = std::bit_cast<std::uint32_t>(in[i]) ^ 0x5a5a5a5au;
  };
  std::uint64_t device_inputs = 0;
  const auto device = [&](std::uint32_t first, std::uint32_t step, std::span<std::uint32_t> out) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      const auto input = std::uint32_t(first + i * step);
      out[i] = (input ^ 0x5a5a5a5au) + (wrong.count(input) ? 1 : 0);
    }
    device_inputs += out.size();
  };
  const auto equal = [](float, std::uint32_t a, std::uint32_t b) { return a == b; };
  // Small chunks and blocks, so that the differences fall in different calls and work items.
  const auto r = sweep_float32<std::uint32_t, std::uint32_t>({stride, 1000, 64, 3}, device, model, equal);
  CHECK(r.inputs == 65536);
  CHECK(device_inputs == 65536);
  CHECK(r.mismatches == 5);
  REQUIRE(r.first.size() == 3);
  CHECK(r.first[0].input == stride * 3);
  CHECK(r.first[1].input == stride * 5);
  CHECK(r.first[2].input == stride * 7);
  CHECK(r.first[0].device == r.first[0].host + 1);

  const auto none = sweep_float32<std::uint32_t, std::uint32_t>({stride, 1 << 20, 4096, 8}, [&](std::uint32_t first,
      std::uint32_t step, std::span<std::uint32_t> out) {
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::uint32_t(first + i * step) ^ 0x5a5a5a5au;
      }, model, equal);
  CHECK(none.mismatches == 0);
  CHECK(none.first.empty());
}

TEST_CASE("compare_bits: bit patterns, so -0 and NaN payloads differ, the first five kept", "[verification]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> kernel{1.0f, -0.0f, nan, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f};
  std::vector<float> emulated{1.0f, 0.0f, std::bit_cast<float>(std::bit_cast<std::uint32_t>(nan) | 1u), 2.5f, 3.5f, 4.5f,
                              5.5f, 6.5f, 7.0f};
  const BitComparison c = compare_bits(kernel, emulated);
  CHECK(c.compared == 9);
  CHECK(c.mismatches == 7);
  REQUIRE(c.first.size() == 5);
  CHECK(c.first[0].index == 1);
  CHECK(c.first[0].kernel == 0x80000000u);
  CHECK(c.first[0].emulated == 0u);
  CHECK(c.first[4].index == 5);
  // Codes of two widths compare by value (the kernel's fp16 codes, the emulator's Code).
  const std::vector<std::uint16_t> codes{0x3c00, 0x8000};
  CHECK(compare_bits(codes, std::vector<Code>{0x3c00, 0x8000}).mismatches == 0);
  CHECK(compare_bits(codes, std::vector<Code>{0x3c00, 0x0000}).mismatches == 1);
  CHECK_THROWS_AS(compare_bits(codes, std::vector<Code>{0x3c00}), std::logic_error);
}

TEST_CASE("the GPU checks' models: one per conversion target, exp2's NaN rule", "[verification]") {
  std::set<kernels::CvtTarget> targets;
  for (const CvtModel& m : cvt_models()) targets.insert(m.target);
  CHECK(targets.size() == cvt_models().size());
  CHECK(cvt_models().size() == std::size_t(kernels::CvtTarget::ue8m0_rp) + 1);
  CHECK(cvt_model(kernels::CvtTarget::e4m3_nosat).options.overflow == Overflow::nan);
  CHECK(encode(cvt_model(kernels::CvtTarget::e4m3_satfinite).format, 1000.0f,
               cvt_model(kernels::CvtTarget::e4m3_satfinite).options) == 0x7e);

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::uint32_t one = std::bit_cast<std::uint32_t>(1.0f), nan_bits = std::bit_cast<std::uint32_t>(nan);
  CHECK(exp2_agrees(0.0f, one, one));
  CHECK_FALSE(exp2_agrees(0.0f, one, one + 1));
  CHECK(exp2_agrees(nan, nan_bits, nan_bits | 1u));  // a NaN input: any NaN will do
  CHECK_FALSE(exp2_agrees(nan, nan_bits, one));
  CHECK_FALSE(exp2_agrees(1.0f, nan_bits, nan_bits | 1u));  // not a NaN input: the bits
  CHECK(exp2_model(kernels::Exp2Implementation::poly_degree6, 0.0f) == 1.0f);
  CHECK(exp2_model(kernels::Exp2Implementation::ex2_approx, 1.0f) == 2.0f);
}
