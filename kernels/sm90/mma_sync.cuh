// mma.sync m16n8 instructions for kernels, written against their records (emulation/mma/atom.hpp):
// each wrapper names its instruction once, as a record whose PTX name must equal the inline PTX
// (static_assert), and reads its fragments (which thread holds which (row, col)) from the record.
//
// gather_fragment packs a thread's values of a fragment into 32-bit registers, value i in bits
// [Bits * (i mod 32/Bits), ...) of register i / (32/Bits) (PTX's packing, low half first), each value
// read by a callable code(row, col); the inverse order (registers to (row, col)) is the record's too.
#pragma once

#include <cstdint>

#include "emulation/mma/atom.hpp"
#include "kernels/sm90/fragment.hpp"

namespace lowbit::kernels::sm90 {

// A thread's values of fragment F (Bits-bit codes) from code(row, col), packed low value first.
template <layout::Fragment F, int Bits, int Registers, class Code>
__device__ inline void gather_fragment(int lane, Code code, std::uint32_t (&regs)[Registers]) {
  static_assert(F.value_count * Bits == 32 * Registers, "fragment and registers disagree");
  constexpr auto offsets = value_offsets<F>();
  constexpr int per_register = 32 / Bits;
  constexpr std::uint32_t mask = Bits == 32 ? ~0u : (1u << Bits) - 1;
  const layout::Offset base = thread_offset<F>(lane);
#pragma unroll
  for (int r = 0; r < Registers; ++r) regs[r] = 0;
#pragma unroll
  for (int i = 0; i < F.value_count; ++i)
    regs[i / per_register] |= (std::uint32_t(code(base.row + offsets[i].row, base.col + offsets[i].col)) & mask)
                              << (Bits * (i % per_register));
}

// One m16n8 instruction with A in 4 registers, B in 2 and C, D in 4 (f32 or s32): D = A B + C.
#define LOWBIT_MMA_SYNC_M16N8(NAME, PTX, ATOM)                                                                     \
  struct NAME {                                                                                                    \
    static constexpr mma::Atom atom = ATOM;                                                                        \
    static_assert(atom.name.view() == PTX, "the inline PTX is not the record's instruction");                     \
    __device__ static void run(std::uint32_t (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],     \
                               const std::uint32_t (&c)[4]) {                                                      \
      asm volatile(PTX " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"                      \
                   : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                                \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]),       \
                     "r"(c[2]), "r"(c[3]));                                                                        \
    }                                                                                                              \
  };

LOWBIT_MMA_SYNC_M16N8(MmaS4, "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", mma::atoms::mma_m16n8k64_s32_s4_s4)
LOWBIT_MMA_SYNC_M16N8(MmaS8, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", mma::atoms::mma_m16n8k32_s32_s8_s8)
LOWBIT_MMA_SYNC_M16N8(MmaE4m3, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
                      mma::mma_sync_atom(16, 8, 32, formats::fp32, formats::e4m3, formats::e4m3, formats::fp32))
LOWBIT_MMA_SYNC_M16N8(MmaE5m2, "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
                      mma::mma_sync_atom(16, 8, 32, formats::fp32, formats::e5m2, formats::e5m2, formats::fp32))
LOWBIT_MMA_SYNC_M16N8(MmaF16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                      mma::mma_sync_atom(16, 8, 16, formats::fp32, formats::fp16, formats::fp16, formats::fp32))

#undef LOWBIT_MMA_SYNC_M16N8

}  // namespace lowbit::kernels::sm90
