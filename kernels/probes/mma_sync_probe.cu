// mma.sync probes: one warp per tile. Each lane loads its A, B and C fragment elements through
// the layout maps, packs them into registers (low half first), runs the instruction, and stores
// D through the C map.
#include <array>

#include "kernels/probes/mma_probe.hpp"
#include "kernels/probes/probe_io.cuh"

namespace lowbit::kernels {
namespace {

// One mma.sync instruction: its record (emulation/mma/atom.hpp) and the inline PTX, whose text
// must be the record's name. The shapes probed here take A in 4 registers, B in 2, and C/D in 4
// (f32, s32) or 2 (f16x2) registers.
#define LOWBIT_MMA_SYNC_ATOM(NAME, PTX, ATOM)                                                                      \
  struct NAME {                                                                                                    \
    static constexpr mma::Atom atom = ATOM;                                                                        \
    static_assert(atom.name.view() == PTX, "the inline PTX is not the record's instruction");                     \
    template <int R>                                                                                               \
    __device__ static void mma(std::uint32_t (&d)[R], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2],     \
                               const std::uint32_t (&c)[R]) {                                                      \
      if constexpr (R == 4)                                                                                        \
        asm volatile(PTX " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"                    \
                     : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])                                              \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]),     \
                       "r"(c[2]), "r"(c[3]));                                                                      \
      else                                                                                                         \
        asm volatile(PTX " {%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"                                        \
                     : "=r"(d[0]), "=r"(d[1])                                                                      \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c[0]), "r"(c[1]));    \
    }                                                                                                              \
  };

using namespace lowbit::formats;

// NAME: mma.sync.aligned.m16n8k<K>.row.col.[satfinite.]<TYPES> (D, A, B, C: the formats TYPES spells).
#define K16(NAME, TYPES, D, A, B, C) \
  LOWBIT_MMA_SYNC_ATOM(NAME, "mma.sync.aligned.m16n8k16.row.col." TYPES, mma::mma_sync_atom(16, 8, 16, D, A, B, C))
#define K32(NAME, TYPES, D, A, B, C, SAT) \
  LOWBIT_MMA_SYNC_ATOM(NAME, "mma.sync.aligned.m16n8k32.row.col." TYPES, mma::mma_sync_atom(16, 8, 32, D, A, B, C, SAT))
#define K64(NAME, TYPES, D, A, B, C, SAT) \
  LOWBIT_MMA_SYNC_ATOM(NAME, "mma.sync.aligned.m16n8k64.row.col." TYPES, mma::mma_sync_atom(16, 8, 64, D, A, B, C, SAT))

K16(F32F16, "f32.f16.f16.f32", fp32, fp16, fp16, fp32)
K16(F32Bf16, "f32.bf16.bf16.f32", fp32, bf16, bf16, fp32)
K16(F16F16, "f16.f16.f16.f16", fp16, fp16, fp16, fp16)
K32(F32E4m3E4m3, "f32.e4m3.e4m3.f32", fp32, e4m3, e4m3, fp32, false)
K32(F32E4m3E5m2, "f32.e4m3.e5m2.f32", fp32, e4m3, e5m2, fp32, false)
K32(F32E5m2E4m3, "f32.e5m2.e4m3.f32", fp32, e5m2, e4m3, fp32, false)
K32(F32E5m2E5m2, "f32.e5m2.e5m2.f32", fp32, e5m2, e5m2, fp32, false)
K32(F16E4m3E4m3, "f16.e4m3.e4m3.f16", fp16, e4m3, e4m3, fp16, false)
K32(F16E4m3E5m2, "f16.e4m3.e5m2.f16", fp16, e4m3, e5m2, fp16, false)
K32(F16E5m2E4m3, "f16.e5m2.e4m3.f16", fp16, e5m2, e4m3, fp16, false)
K32(F16E5m2E5m2, "f16.e5m2.e5m2.f16", fp16, e5m2, e5m2, fp16, false)
K32(S32S8, "s32.s8.s8.s32", s32, int8, int8, s32, false)
K32(S32S8Satfinite, "satfinite.s32.s8.s8.s32", s32, int8, int8, s32, true)
K32(S32S8U8, "s32.s8.u8.s32", s32, int8, uint8, s32, false)
K32(S32U8S8, "s32.u8.s8.s32", s32, uint8, int8, s32, false)
K32(S32U8U8, "s32.u8.u8.s32", s32, uint8, uint8, s32, false)
K32(S32U8U8Satfinite, "satfinite.s32.u8.u8.s32", s32, uint8, uint8, s32, true)
K64(S32S4, "s32.s4.s4.s32", s32, int4, int4, s32, false)
K64(S32S4Satfinite, "satfinite.s32.s4.s4.s32", s32, int4, int4, s32, true)
K64(S32S4U4, "s32.s4.u4.s32", s32, int4, uint4, s32, false)
K64(S32U4S4, "s32.u4.s4.s32", s32, uint4, int4, s32, false)
K64(S32U4U4, "s32.u4.u4.s32", s32, uint4, uint4, s32, false)
K64(S32U4U4Satfinite, "satfinite.s32.u4.u4.s32", s32, uint4, uint4, s32, true)

constexpr int kWarpsPerBlock = 4;

template <class Probe>
__global__ void mma_sync_probe(DeviceTiles tiles) {
  constexpr mma::Atom s = Probe::atom;
  constexpr layout::Fragment fc = s.c_fragment;
  constexpr int c_bits = s.c.code_bits(), c_registers = fc.value_count * c_bits / 32;
  const int tile = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (tile >= tiles.count) return;  // whole warps leave together
  std::uint32_t a[4], b[2], c[c_registers], d[c_registers];
  load_fragment<s.a_fragment, s.k, s.a.code_bits()>(tiles.a + tile * s.m * s.k, lane, a);
  load_fragment<s.b_fragment, s.n, s.b.code_bits()>(tiles.b + tile * s.k * s.n, lane, b);
  load_fragment<fc, s.n, c_bits>(tiles.c + tile * s.m * s.n, lane, c);
  Probe::mma(d, a, b, c);
  store_fragment<fc, s.n, c_bits>(d, lane, tiles.d + tile * s.m * s.n);
}

template <class Probe>
void launch(const DeviceTiles& tiles) {
  mma_sync_probe<Probe><<<(tiles.count + kWarpsPerBlock - 1) / kWarpsPerBlock, 32 * kWarpsPerBlock>>>(tiles);
}

template <class Probe>
void run(const TileBatch& tiles) {
  run_on_device(Probe::atom, Probe::atom.k, tiles, launch<Probe>);
}

template <class... Probes>
constexpr std::array<MmaProbe, sizeof...(Probes)> probes() {
  return {MmaProbe{Probes::atom, run<Probes>}...};
}

constexpr auto kProbes =
    probes<F32F16, F32Bf16, F16F16, F32E4m3E4m3, F32E4m3E5m2, F32E5m2E4m3, F32E5m2E5m2, F16E4m3E4m3, F16E4m3E5m2,
           F16E5m2E4m3, F16E5m2E5m2, S32S8, S32S8Satfinite, S32S8U8, S32U8S8, S32U8U8, S32U8U8Satfinite, S32S4,
           S32S4Satfinite, S32S4U4, S32U4S4, S32U4U4, S32U4U4Satfinite>();

}  // namespace

std::span<const MmaProbe> detail::mma_sync_probes() { return kProbes; }

}  // namespace lowbit::kernels
