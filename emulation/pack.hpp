// Packed storage of codes: code i occupies bits [i*s, (i+1)*s) of a little-endian bit stream,
// s = Format::storage_bits, the code in the low code_bits() bits of its container and the rest 0.
//  * s = 4: two codes per byte, the first in the low nibble, as cuda_fp4.h's
//    __nv_fp4x2_storage_t (__nv_cvt_float2_to_fp4x2: .x low, .y high) and NVFP4 tensors store
//    e2m1 (checked against cuda_fp4.h in tests/formats/test_cuda_oracle.cpp).
//  * s = 6: four codes in three bytes. CUDA defines no packed fp6 layout (cuda_fp6.h keeps one
//    code per byte, the e2m3/e3m2 presets' s = 8); this LSB-first stream is our convention.
//  * s = 8, 16, 32: one code per 1, 2, 4 bytes, little-endian (cuda_fp8.h's x2/x4 storage puts
//    element 0 in the low byte). Any other s from code_bits() to 32 packs the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "emulation/format.hpp"

namespace lowbit {

// Bytes that `count` codes of f occupy: ceil(count * storage_bits / 8); the last byte's unused
// high bits are 0.
std::size_t packed_bytes(const Format& f, std::size_t count);

// Packs codes into bytes (bytes.size() == packed_bytes(f, codes.size())). Throws
// std::invalid_argument naming the element when a code has bits above code_bits(), or when the
// sizes do not match.
void pack(const Format& f, std::span<const Code> codes, std::span<std::uint8_t> bytes);

// Unpacks bytes.size() == packed_bytes(f, codes.size()) bytes into codes. Container bits above
// code_bits() are ignored, as CUDA's fp6 decoders ignore the top two bits of their byte.
void unpack(const Format& f, std::span<const std::uint8_t> bytes, std::span<Code> codes);

}  // namespace lowbit
