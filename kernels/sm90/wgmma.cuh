// wgmma (sm_90a) as the attention kernels issue it: shared-memory matrix descriptors, the
// fence / commit / wait protocol, and the two instructions of SageAttention2-8b on Hopper,
// typed against the fragments of emulation/layout.hpp:
//   S = Q K^T: wgmma.mma_async.sync.aligned.m64nNk32.s32.s8.s8, A and B from shared memory
//   R = P V:   wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3, A (P) from registers
//              (the 8-bit A fragment layout::wgmma_m64k32_a8), B from shared memory; with the row
//              sums by P V, m64n(N+8)k32: B's 8 rows after V^T are E4M3 ones
// The accumulator of both is layout::wgmma_m64_d(N): value_count registers per thread.
// The arithmetic of each instruction is the MMA registry's model (emulation/mma/, docs/mma-models.md).
#pragma once

#include <cstdint>

#include "emulation/layout.hpp"
#include "kernels/sm90/smem_layout.hpp"

namespace lowbit::kernels::sm90 {

// Descriptor bits: 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset
// (0), 62-63 swizzle mode (0: none). `smem` points at the first core matrix the instruction reads.
__device__ inline std::uint64_t matrix_descriptor(const void* smem, KMajorLayout layout) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return std::uint64_t((address >> 4) & 0x3fff) | std::uint64_t(KMajorLayout::kLeadingByteOffset >> 4) << 16 |
         std::uint64_t(layout.stride_byte_offset() >> 4) << 32;
}

// The descriptor of the matrix `bytes` (a multiple of 16) further in shared memory: the start
// address field holds address >> 4, and shared memory addresses stay below 2^18, so the field never
// carries into the next.
__device__ constexpr std::uint64_t advance(std::uint64_t descriptor, int bytes) {
  return descriptor + std::uint64_t(bytes >> 4);
}

// Registers written by wgmma must not be touched between the issue and the wait; registers read by
// it (A, and the accumulator with scale-d = 1) must be written before the fence.
__device__ inline void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ inline void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int Pending>
__device__ inline void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
}
// Keeps the compiler from moving accesses of an accumulator across a wgmma that is in flight.
template <class T, int R>
__device__ inline void fence_registers(T (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+r"(reinterpret_cast<std::uint32_t&>(d[i])) :: "memory");
}

#define LOWBIT_SM90_REGS_4 "%0, %1, %2, %3"
#define LOWBIT_SM90_REGS_32                                                                                       \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, " \
  "%24, %25, %26, %27, %28, %29, %30, %31"
#define LOWBIT_SM90_REGS_64                                                                                         \
  LOWBIT_SM90_REGS_32                                                                                               \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, " \
  "%54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LOWBIT_SM90_REGS_36 LOWBIT_SM90_REGS_32 ", %32, %33, %34, %35"
#define LOWBIT_SM90_REGS_68 LOWBIT_SM90_REGS_64 ", %64, %65, %66, %67"
#define LOWBIT_SM90_OPS_4(c, d, i) c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3])
#define LOWBIT_SM90_OPS_16(c, d, i) \
  LOWBIT_SM90_OPS_4(c, d, i), LOWBIT_SM90_OPS_4(c, d, i + 4), LOWBIT_SM90_OPS_4(c, d, i + 8), LOWBIT_SM90_OPS_4(c, d, i + 12)
#define LOWBIT_SM90_OPS_32(c, d, i) LOWBIT_SM90_OPS_16(c, d, i), LOWBIT_SM90_OPS_16(c, d, i + 16)
#define LOWBIT_SM90_OPS_64(c, d, i) LOWBIT_SM90_OPS_32(c, d, i), LOWBIT_SM90_OPS_32(c, d, i + 32)
#define LOWBIT_SM90_OPS_36(c, d, i) LOWBIT_SM90_OPS_32(c, d, i), LOWBIT_SM90_OPS_4(c, d, i + 32)
#define LOWBIT_SM90_OPS_68(c, d, i) LOWBIT_SM90_OPS_64(c, d, i), LOWBIT_SM90_OPS_4(c, d, i + 64)
#define LOWBIT_SM90_S32 "+r"
#define LOWBIT_SM90_F32 "+f"

// S (s32) += A B over one k32 step, A and B from shared memory; scale_d = 0 starts from zero.
template <int N>
struct WgmmaS8 {
  static constexpr layout::Fragment accumulator = layout::wgmma_m64_d(N);
  static constexpr int kRegisters = accumulator.value_count;
  static constexpr int kK = 32;
  __device__ static void mma(std::int32_t (&d)[kRegisters], std::uint64_t desc_a, std::uint64_t desc_b, int scale_d);
};

// R (f32) += A B over one k32 step, A (e4m3 codes) in 4 registers of the 8-bit A fragment, B from
// shared memory; scale_d = 0 starts from +0.
template <int N>
struct WgmmaE4m3 {
  static constexpr layout::Fragment accumulator = layout::wgmma_m64_d(N);
  static constexpr layout::Fragment a_fragment = layout::wgmma_m64k32_a8;
  static constexpr int kRegisters = accumulator.value_count;
  static constexpr int kARegisters = a_fragment.value_count * 8 / 32;
  static constexpr int kK = 32;
  static_assert(kARegisters == 4, "the 8-bit A fragment of wgmma k32 is 4 registers");
  __device__ static void mma(float (&d)[kRegisters], const std::uint32_t (&a)[kARegisters], std::uint64_t desc_b,
                             int scale_d);
};

// R (f32) += A B as WgmmaE4m3<N>, and in the same instruction (m64n(N+8)k32) the 8 columns after R:
// B's rows N .. N+7 (the row sums by P V: E4M3 ones). Their registers follow R's in the layout of an
// m64n8 accumulator (layout::wgmma_m64_d is a power-of-two layout, so the whole m64n(N+8) one is
// written as the two).
template <int N>
struct WgmmaE4m3WithSums {
  static constexpr layout::Fragment accumulator = layout::wgmma_m64_d(N);
  static constexpr layout::Fragment sums = layout::wgmma_m64_d(8);
  static constexpr layout::Fragment a_fragment = layout::wgmma_m64k32_a8;
  static constexpr int kRegisters = accumulator.value_count + sums.value_count;
  static constexpr int kK = 32;
  __device__ static void mma(float (&d)[kRegisters], const std::uint32_t (&a)[4], std::uint64_t desc_b, int scale_d);
};

// D (f32) += A B over one k step of K elements (32 bytes of every row), A and B from shared memory,
// neither negated nor transposed (K-major): K = 16 is bf16, K = 32 e4m3; scale_d = 0 starts from +0.
template <int N, int K>
struct WgmmaSharedF32 {
  static constexpr layout::Fragment accumulator = layout::wgmma_m64_d(N);
  static constexpr int kRegisters = accumulator.value_count;
  static constexpr int kK = K;
  __device__ static void mma(float (&d)[kRegisters], std::uint64_t desc_a, std::uint64_t desc_b, int scale_d);
};
template <int N>
using WgmmaBf16 = WgmmaSharedF32<N, 16>;
template <int N>
using WgmmaE4m3Shared = WgmmaSharedF32<N, 32>;

// Operand numbers after the R accumulator registers: S8, BF16 and E4M3 from shared memory take
// desc_a, desc_b, scale_d; E4M3 with A in registers takes a0..a3, desc_b, scale_d.
#define LOWBIT_SM90_WGMMA_S8(N, R, DESC_A, DESC_B, SCALE)                                                        \
  template <>                                                                                                     \
  __device__ inline void WgmmaS8<N>::mma(std::int32_t (&d)[R], std::uint64_t desc_a, std::uint64_t desc_b,        \
                                         int scale_d) {                                                           \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k32.s32.s8.s8 {" LOWBIT_SM90_REGS_##R "}, %" #DESC_A    \
                 ", %" #DESC_B ", p;\n}\n"                                                                        \
                 : LOWBIT_SM90_OPS_##R(LOWBIT_SM90_S32, d, 0)                                                     \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                       \
  }
// STRUCT<N>: WgmmaE4m3 (the instruction's n, INSTRUCTION_N, is N) or WgmmaE4m3WithSums (N + 8).
#define LOWBIT_SM90_WGMMA_E4M3(STRUCT, N, INSTRUCTION_N, R, A0, A1, A2, A3, DESC_B, SCALE)                        \
  template <>                                                                                                     \
  __device__ inline void STRUCT<N>::mma(float (&d)[R], const std::uint32_t (&a)[4], std::uint64_t desc_b,        \
                                        int scale_d) {                                                            \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n" #INSTRUCTION_N "k32.f32.e4m3.e4m3 {" LOWBIT_SM90_REGS_##R  \
                 "}, {%" #A0                                                                                      \
                 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DESC_B ", p, 1, 1;\n}\n"                                   \
                 : LOWBIT_SM90_OPS_##R(LOWBIT_SM90_F32, d, 0)                                                     \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d));                        \
  }

// K: the k step; TYPES: the instruction's types; IMMEDIATES: after scale-d.
#define LOWBIT_SM90_WGMMA_SS_F32(N, K, R, TYPES, DESC_A, DESC_B, SCALE, IMMEDIATES)                              \
  template <>                                                                                                     \
  __device__ inline void WgmmaSharedF32<N, K>::mma(float (&d)[R], std::uint64_t desc_a, std::uint64_t desc_b,     \
                                                   int scale_d) {                                                 \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                                            \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k" #K "." TYPES " {" LOWBIT_SM90_REGS_##R "}, %" #DESC_A \
                 ", %" #DESC_B ", p" IMMEDIATES ";\n}\n"                                                          \
                 : LOWBIT_SM90_OPS_##R(LOWBIT_SM90_F32, d, 0)                                                     \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                       \
  }

LOWBIT_SM90_WGMMA_S8(64, 32, 32, 33, 34)
LOWBIT_SM90_WGMMA_S8(128, 64, 64, 65, 66)
LOWBIT_SM90_WGMMA_E4M3(WgmmaE4m3, 64, 64, 32, 32, 33, 34, 35, 36, 37)
LOWBIT_SM90_WGMMA_E4M3(WgmmaE4m3, 128, 128, 64, 64, 65, 66, 67, 68, 69)
LOWBIT_SM90_WGMMA_E4M3(WgmmaE4m3WithSums, 64, 72, 36, 36, 37, 38, 39, 40, 41)
LOWBIT_SM90_WGMMA_E4M3(WgmmaE4m3WithSums, 128, 136, 68, 68, 69, 70, 71, 72, 73)
LOWBIT_SM90_WGMMA_SS_F32(64, 16, 32, "f32.bf16.bf16", 32, 33, 34, ", 1, 1, 0, 0")
LOWBIT_SM90_WGMMA_SS_F32(128, 16, 64, "f32.bf16.bf16", 64, 65, 66, ", 1, 1, 0, 0")
LOWBIT_SM90_WGMMA_SS_F32(64, 32, 32, "f32.e4m3.e4m3", 32, 33, 34, ", 1, 1")
LOWBIT_SM90_WGMMA_SS_F32(128, 32, 64, "f32.e4m3.e4m3", 64, 65, 66, ", 1, 1")

}  // namespace lowbit::kernels::sm90
