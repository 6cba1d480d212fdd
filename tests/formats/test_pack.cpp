// Packed storage of 4-, 6- and other-bit codes (emulation/pack.hpp). The agreement with
// cuda_fp4.h's and cuda_fp8.h's x2 storage is checked in test_cuda_oracle.cpp.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "emulation/pack.hpp"

using namespace lowbit;

TEST_CASE("e2m1: two codes per byte, the first in the low nibble", "[pack]") {
  const std::vector<Code> codes{0b0'01'0, 0b0'10'1, 0b1'11'1};  // 1.0, 3.0, -6.0
  std::vector<std::uint8_t> bytes(packed_bytes(formats::e2m1, codes.size()));
  REQUIRE(bytes.size() == 2);
  pack(formats::e2m1, codes, bytes);
  CHECK(bytes[0] == 0x52);  // 0b0101'0010: 3.0 high, 1.0 low
  CHECK(bytes[1] == 0x0F);  // -6.0 low, unused high nibble 0
  std::vector<Code> back(codes.size());
  unpack(formats::e2m1, bytes, back);
  CHECK(back == codes);
}

TEST_CASE("6-bit storage: four codes in three bytes, little-endian bit stream", "[pack]") {
  const Format e2m3_packed = format_from_string("e2m3:storage=6");
  const std::vector<Code> codes{0b000001, 0b000010, 0b000011, 0b100100};
  std::vector<std::uint8_t> bytes(packed_bytes(e2m3_packed, codes.size()));
  REQUIRE(bytes.size() == 3);
  pack(e2m3_packed, codes, bytes);
  // 1 | 2 << 6 | 3 << 12 | 36 << 18 = 0x903081
  CHECK(bytes == std::vector<std::uint8_t>{0x81, 0x30, 0x90});
  std::vector<Code> back(codes.size());
  unpack(e2m3_packed, bytes, back);
  CHECK(back == codes);
  // The preset keeps CUDA's one code per byte.
  CHECK(packed_bytes(formats::e2m3, 4) == 4);
}

TEST_CASE("pack and unpack are inverse for every storage width and count", "[pack]") {
  std::mt19937_64 rng(5);
  for (const char* spec : {"e2m1", "int4", "uint4", "e2m1:storage=5", "e3m2:storage=6", "e2m3:storage=7", "e2m3",
                           "e4m3", "ue8m0", "e4m3:storage=12", "bf16", "fp16", "e6m9", "e8m13", "fp32", "int16",
                           "uint32", "p3109:k=6:p=3", "ue4m3"}) {
    const Format f = format_from_string(spec);
    INFO(spec);
    for (std::size_t count = 0; count < 40; ++count) {
      std::vector<Code> codes(count);
      for (auto& c : codes) c = Code(rng()) & f.code_count_minus_one();
      std::vector<std::uint8_t> bytes(packed_bytes(f, count));
      pack(f, codes, bytes);
      std::vector<Code> back(count);
      unpack(f, bytes, back);
      REQUIRE(back == codes);
      // Unused bits of the last byte are zero.
      const int used = int(count * f.storage_bits % 8);
      if (used != 0) CHECK((bytes.back() >> used) == 0);
    }
  }
}

TEST_CASE("byte containers: codes sit in the low bits, higher container bits are ignored", "[pack]") {
  // bf16 little-endian: 1.0 = 0x3F80 -> 0x80 0x3F.
  std::vector<std::uint8_t> bytes(2);
  pack(formats::bf16, std::vector<Code>{0x3F80}, bytes);
  CHECK(bytes == std::vector<std::uint8_t>{0x80, 0x3F});
  // An e2m3 byte with its two spare bits set reads as the 6-bit code below them.
  std::vector<Code> code(1);
  unpack(formats::e2m3, std::vector<std::uint8_t>{0b11'0'01'010}, code);
  CHECK(code[0] == 0b0'01'010);
}

TEST_CASE("pack rejects codes wider than the format and mismatched sizes", "[pack]") {
  std::vector<std::uint8_t> bytes(2);
  try {
    pack(formats::e2m1, std::vector<Code>{1, 2, 0x10}, bytes);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("element 2") != std::string::npos);
  }
  std::vector<std::uint8_t> small(1);
  CHECK_THROWS_WITH(pack(formats::e2m1, std::vector<Code>{1, 2, 3}, small), Catch::Contains("take 2 bytes, got 1"));
  std::vector<Code> out(5);
  CHECK_THROWS_WITH(unpack(formats::e2m1, bytes, out), Catch::Contains("take 3 bytes, got 2"));
}
