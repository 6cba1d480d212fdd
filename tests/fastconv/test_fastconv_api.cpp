// The fast encoder's entry points: golden codes at rounding and overflow boundaries, the packed
// nibble order, errors for bad calls, and the scalar fallback for unsupported combinations.
// (Exhaustive agreement with the scalar encode is exhaustive_fastconv's job.)
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "emulation/convert.hpp"
#include "emulation/convert_fast.hpp"

using namespace lowbit;

namespace {
std::vector<std::uint8_t> encode8(const Format& f, const std::vector<float>& in, const ConversionOptions& o = {}) {
  std::vector<std::uint8_t> out(in.size());
  encode(f, in, std::span<std::uint8_t>(out), o);
  return out;
}
constexpr float kFloatSubnormal127 = 0x1p-127f;  // 0x0040'0000
}  // namespace

TEST_CASE("the fast path supports what it claims", "[fastconv]") {
  CHECK_FALSE(fast_encode_unsupported(formats::e4m3, {}));
  CHECK_FALSE(fast_encode_unsupported(formats::int4, {.rounding = Rounding::toward_zero}));
  CHECK_FALSE(fast_encode_unsupported(formats::bf16, {.overflow = Overflow::inf}));
  CHECK(fast_encode_unsupported(formats::fp32, {}).value_or("").find("16 bits") != std::string::npos);
  CHECK(fast_encode_unsupported(formats::e4m3, {.rounding = Rounding::stochastic}).value_or("").find("stochastic") !=
        std::string::npos);
  CHECK(fast_encode_unsupported(formats::e4m3, {.overflow = Overflow::inf}).value_or("").find("no Inf") !=
        std::string::npos);
}

TEST_CASE("golden codes at rounding and overflow boundaries", "[fastconv]") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  // e4m3: 464 is the tie between 448 (0b0'1111'110) and 480: even wins; 465 overflows.
  CHECK(encode8(formats::e4m3, {464.0f, 465.0f, -465.0f, inf, nan}) ==
        std::vector<std::uint8_t>{0b0'1111'110, 0b0'1111'110, 0b1'1111'110, 0b0'1111'110, 0b0'1111'111});
  CHECK(encode8(formats::e4m3, {465.0f, -inf}, {.overflow = Overflow::nan}) ==
        std::vector<std::uint8_t>{0b0'1111'111, 0b1'1111'111});
  // Toward zero never overflows a finite value (IEEE 754 7.4), but Inf follows the policy.
  CHECK(encode8(formats::e4m3, {1000.0f, inf}, {.rounding = Rounding::toward_zero, .overflow = Overflow::nan}) ==
        std::vector<std::uint8_t>{0b0'1111'110, 0b0'1111'111});
  // e4m3 subnormals: 2^-10 is the tie between 0 and 2^-9 (0b0'0000'001); 3 * 2^-10 ties up to 2^-8.
  CHECK(encode8(formats::e4m3, {0x1p-10f, 0x3p-10f, 0x1.000002p-10f}) ==
        std::vector<std::uint8_t>{0b0'0000'000, 0b0'0000'010, 0b0'0000'001});
  // e2m1: 5 ties between 4 (0b0'11'0) and 6 (0b0'11'1): even is 4; 0.25 ties to 0; 0.75 to 1.
  CHECK(encode8(formats::e2m1, {5.0f, 0.25f, 0.75f, -7.0f}) ==
        std::vector<std::uint8_t>{0b0'11'0, 0b0'00'0, 0b0'01'0, 0b1'11'1});
  // ue8m0: 2^-127 (a float32 subnormal) is code 0, 2^-126 is 1; |x| is encoded; below clips to 0.
  CHECK(encode8(formats::ue8m0, {kFloatSubnormal127, 0x1p-126f, -4.0f, 0x1p-140f, 0.0f}) ==
        std::vector<std::uint8_t>{0b0000'0000, 0b0000'0001, 0b1000'0001, 0b0000'0000, 0b0000'0000});
  // Integers: ties to even, saturation to [-128, 127], NaN to 0, unsigned clamps negatives to 0.
  CHECK(encode8(formats::int8, {2.5f, -128.5f, -129.0f, 300.0f, nan}) ==
        std::vector<std::uint8_t>{2, 0b1000'0000, 0b1000'0000, 0b0111'1111, 0});
  CHECK(encode8(formats::uint4, {-3.0f, 15.4f, 15.6f, 7.5f}) == std::vector<std::uint8_t>{0, 15, 15, 8});
}

TEST_CASE("which algorithm serves which format", "[fastconv]") {
  using fastconv::Algorithm;
  // The split algorithm serves ordinary floating formats; the bit fields every format.
  for (const Format& f : {formats::e4m3, formats::e5m2, formats::e2m1, formats::fp16, formats::bf16, formats::ue4m3})
    CHECK_FALSE(fastconv::algorithm_unsupported(Algorithm::split, f, {}));
  CHECK(fastconv::algorithm_unsupported(Algorithm::split, formats::e4m3fnuz, {}).value_or("").find("negative-zero") !=
        std::string::npos);
  CHECK(fastconv::algorithm_unsupported(Algorithm::split, formats::ue8m0, {}).value_or("").find("0 mantissa bits") !=
        std::string::npos);
  // bf16 toward zero would scale subnormals by 2^133, beyond float32.
  CHECK(fastconv::algorithm_unsupported(Algorithm::split, formats::bf16, {.rounding = Rounding::toward_zero})
            .value_or("")
            .find("2^133") != std::string::npos);
  for (const Format& f : {formats::int8, formats::ue8m0, formats::e4m3fnuz, formats::bf16})
    CHECK_FALSE(fastconv::algorithm_unsupported(Algorithm::bit_fields, f, {}));
  if (fastconv::best_available()) {
    CHECK(fastconv::algorithm_used(formats::e4m3, {}) == Algorithm::split);
    CHECK(fastconv::algorithm_used(formats::int8, {}) == Algorithm::bit_fields);
  }
}

TEST_CASE("bfloat16 input: the top half of a float32", "[fastconv]") {
  // 1.0 = 0x3F80, -448 = 0xC3E0, 3 * 2^-10 = 0x3B40 (ties up to e4m3's 2^-8), +Inf 0x7F80, NaN 0x7FC0.
  const std::vector<Bf16Bits> in{{0x3F80}, {0xC3E0}, {0x3B40}, {0x7F80}, {0x7FC0}};
  std::vector<std::uint8_t> out(in.size());
  encode(formats::e4m3, in, std::span<std::uint8_t>(out));
  CHECK(out == std::vector<std::uint8_t>{0b0'0111'000, 0b1'1111'110, 0b0'0000'010, 0b0'1111'110, 0b0'1111'111});
}

TEST_CASE("16-bit codes", "[fastconv]") {
  const std::vector<float> in{1.0f, 65520.0f, 0x1p-25f, -0x1.8p-24f};
  std::vector<std::uint16_t> out(in.size());
  encode(formats::fp16, in, std::span<std::uint16_t>(out), {.overflow = Overflow::inf});
  // 1.0 = 0x3C00; 65520 rounds to 65536 and overflows to Inf (0x7C00); 2^-25 is the tie between
  // 0 and 2^-24; -1.5 * 2^-24 ties to even -2^-23 (0x8002).
  CHECK(out == std::vector<std::uint16_t>{0x3C00, 0x7C00, 0x0000, 0x8002});
}

TEST_CASE("packed 4-bit codes: element 2i in the low nibble", "[fastconv]") {
  // e2m1: 0.5 = 0b0'00'1, 6 = 0b0'11'1, -1 = 0b1'01'0; an odd tail leaves the high nibble 0.
  const std::vector<float> in{0.5f, 6.0f, -1.0f};
  std::vector<std::uint8_t> packed(2);
  encode_packed4(formats::e2m1, in, packed);
  CHECK(packed == std::vector<std::uint8_t>{0b0111'0001, 0b0000'1010});
  // Longer than one internal block, so every byte of a second block is checked too.
  std::vector<float> many(601);
  for (std::size_t i = 0; i < many.size(); ++i) many[i] = float(int(i % 13) - 6);
  std::vector<std::uint8_t> many_packed(301);
  encode_packed4(formats::int4, many, many_packed);
  for (std::size_t i = 0; i < many.size(); ++i) {
    const Code expected = encode(formats::int4, double(many[i]));
    CHECK(((many_packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xF) == expected);
  }
  CHECK(many_packed.back() >> 4 == 0);
}

TEST_CASE("bad calls get errors that name the problem", "[fastconv]") {
  std::vector<float> in(4, 1.0f);
  std::vector<std::uint8_t> bytes(4), short_bytes(3);
  std::vector<Code> codes(3);
  CHECK_THROWS_WITH(encode(formats::fp16, in, std::span<std::uint8_t>(bytes)), Catch::Contains("16 bits"));
  CHECK_THROWS_WITH(encode(formats::e4m3, in, std::span<std::uint8_t>(short_bytes)),
                    Catch::Contains("4 inputs need 4 outputs, got 3"));
  CHECK_THROWS_WITH(encode_packed4(formats::e4m3, in, std::span<std::uint8_t>(bytes)), Catch::Contains("8 bits"));
  CHECK_THROWS_WITH(encode(formats::e4m3, in, std::span<std::uint8_t>(bytes), {.overflow = Overflow::inf}),
                    Catch::Contains("no Inf"));
  CHECK_THROWS_WITH(encode(formats::e4m3, std::span<const float>(in), std::span<Code>(codes)),
                    Catch::Contains("4 inputs but 3"));
  for (const auto isa : fastconv::all_isas())
    if (!fastconv::available(isa))
      CHECK_THROWS_WITH(fastconv::encode_with(fastconv::Variant{isa, fastconv::Algorithm::bit_fields}, formats::e4m3,
                                              std::span<const float>(in), std::span<std::uint8_t>(bytes), {}),
                        Catch::Contains("lacks"));
  if (const auto isa = fastconv::best_available())
    CHECK_THROWS_WITH(fastconv::encode_with(fastconv::Variant{*isa, fastconv::Algorithm::split}, formats::int8,
                                            std::span<const float>(in), std::span<std::uint8_t>(bytes), {}),
                      Catch::Contains("split: integer formats"));
}

TEST_CASE("unsupported combinations fall back to the scalar encode", "[fastconv]") {
  // Stochastic rounding is element-indexed: the fallback must pass first_index + i on.
  std::vector<float> in(64);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = 1.0f + float(i) / 128.0f;
  const ConversionOptions o{.rounding = Rounding::stochastic, .seed = 7};
  std::vector<std::uint8_t> bytes(in.size());
  encode(formats::e2m1, in, std::span<std::uint8_t>(bytes), o, 1000);
  std::vector<std::uint8_t> packed(in.size() / 2);
  encode_packed4(formats::e2m1, in, packed, o, 1000);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const Code expected = encode(formats::e2m1, double(in[i]), o, 1000 + i);
    CHECK(bytes[i] == expected);
    CHECK(((packed[i / 2] >> (i % 2 ? 4 : 0)) & 0xF) == expected);
  }
}
