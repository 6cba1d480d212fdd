// wgmma probes: one warpgroup (128 threads) per tile. A and B go to shared memory in the
// canonical K-major layout without swizzle and reach the tensor cores through matrix
// descriptors; C is loaded into the accumulator registers through the D fragment map, the
// instruction runs with scale-d = 1 (D = A*B + C), and D is stored through the same map.
//
// K-loop probes run a whole K loop per tile as an attention kernel does: A (64 x K) and B stay in
// shared memory and each MMA reads the next k-slice through advanced descriptors. Either one
// accumulator is chained from C through every MMA, or, every `Flush` MMAs, a fresh accumulator
// (the first MMA with scale-d = 0: D = A*B) is added into an fp32 accumulator that started at C
// (SageAttention2's FP32 buffer for the FP22 accumulator).
#include <array>

#include "kernels/probes/mma_probe.hpp"
#include "kernels/probes/probe_io.cuh"

namespace lowbit::kernels {
namespace {

// Shared-memory operands (PTX ISA, "Matrix Descriptor Format" and the canonical layouts of
// wgmma). An operand of R rows (m for A, n for B) by K elements, K-major, is cut into core
// matrices of 8 rows x 16 bytes, each row's 16 bytes contiguous, each core matrix 128
// contiguous bytes:
//   byte of (row, k) = (row % 8) * 16 + (row / 8) * SBO + (kb % 16) + (kb / 16) * LBO,  kb = k * bytes
// LBO ("leading dimension byte offset") steps to the next core matrix along K, SBO ("stride")
// to the next 8 rows. Here the core matrices of 8 rows sit side by side along K: LBO = 128,
// SBO = 128 * (K * bytes / 16).
constexpr int kLeadingByteOffset = 128;
__host__ __device__ constexpr int stride_byte_offset(int k_bytes) { return k_bytes / 16 * 128; }

__device__ int kmajor_offset(int row, int k_byte, int k_bytes) {
  return row % 8 * 16 + row / 8 * stride_byte_offset(k_bytes) + k_byte % 16 + k_byte / 16 * kLeadingByteOffset;
}

// Descriptor bits: 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset
// (0), 62-63 swizzle mode (0: none).
__device__ std::uint64_t descriptor(const void* smem, int k_bytes) {
  const auto address = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return std::uint64_t((address >> 4) & 0x3fff) | std::uint64_t(kLeadingByteOffset >> 4) << 16 |
         std::uint64_t(stride_byte_offset(k_bytes) >> 4) << 32;
}

// Accumulator operand lists: R registers "%0".."%R-1", then the two descriptors and scale-d.
#define LOWBIT_REGS_2 "%0, %1"
#define LOWBIT_REGS_4 LOWBIT_REGS_2 ", %2, %3"
#define LOWBIT_REGS_8 LOWBIT_REGS_4 ", %4, %5, %6, %7"
#define LOWBIT_REGS_12 LOWBIT_REGS_8 ", %8, %9, %10, %11"
#define LOWBIT_REGS_16 LOWBIT_REGS_12 ", %12, %13, %14, %15"
#define LOWBIT_REGS_32 LOWBIT_REGS_16 \
  ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define LOWBIT_REGS_64 LOWBIT_REGS_32 \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47" \
  ", %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define LOWBIT_REGS_128 LOWBIT_REGS_64 \
  ", %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79" \
  ", %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95" \
  ", %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111" \
  ", %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define LOWBIT_OPS_2(d, i) "+r"(d[i]), "+r"(d[i + 1])
#define LOWBIT_OPS_4(d, i) LOWBIT_OPS_2(d, i), LOWBIT_OPS_2(d, i + 2)
#define LOWBIT_OPS_8(d, i) LOWBIT_OPS_4(d, i), LOWBIT_OPS_4(d, i + 4)
#define LOWBIT_OPS_12(d, i) LOWBIT_OPS_8(d, i), LOWBIT_OPS_4(d, i + 8)
#define LOWBIT_OPS_16(d, i) LOWBIT_OPS_8(d, i), LOWBIT_OPS_8(d, i + 8)
#define LOWBIT_OPS_32(d, i) LOWBIT_OPS_16(d, i), LOWBIT_OPS_16(d, i + 16)
#define LOWBIT_OPS_64(d, i) LOWBIT_OPS_32(d, i), LOWBIT_OPS_32(d, i + 32)
#define LOWBIT_OPS_128(d, i) LOWBIT_OPS_64(d, i), LOWBIT_OPS_64(d, i + 64)
#define LOWBIT_DESCS_2 "%2, %3"
#define LOWBIT_DESCS_4 "%4, %5"
#define LOWBIT_DESCS_8 "%8, %9"
#define LOWBIT_DESCS_12 "%12, %13"
#define LOWBIT_DESCS_16 "%16, %17"
#define LOWBIT_DESCS_32 "%32, %33"
#define LOWBIT_DESCS_64 "%64, %65"
#define LOWBIT_DESCS_128 "%128, %129"
#define LOWBIT_SCALE_2 "4"
#define LOWBIT_SCALE_4 "6"
#define LOWBIT_SCALE_8 "10"
#define LOWBIT_SCALE_12 "14"
#define LOWBIT_SCALE_16 "18"
#define LOWBIT_SCALE_32 "34"
#define LOWBIT_SCALE_64 "66"
#define LOWBIT_SCALE_128 "130"

// One wgmma instruction with both operands from shared memory: its record (emulation/mma/atom.hpp),
// whose name the inline PTX must spell, R accumulator registers (n/2 for f32 and s32, n/4 for
// f16x2); IMMEDIATES follow scale-d.
#define LOWBIT_WGMMA_ATOM(NAME, SHAPE_TYPES, ATOM, R, IMMEDIATES)                                                       \
  struct NAME {                                                                                                       \
    static constexpr mma::Atom atom = ATOM;                                                                           \
    static_assert(atom.name.view() == "wgmma.mma_async.sync.aligned." SHAPE_TYPES,                                    \
                  "the inline PTX is not the record's instruction");                                                  \
    __device__ static void mma(std::uint32_t (&d)[R], std::uint64_t desc_a, std::uint64_t desc_b, int scale_d) {       \
      asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" LOWBIT_SCALE_##R ", 0;\n"                                    \
                   "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" LOWBIT_REGS_##R "}, " LOWBIT_DESCS_##R            \
                   ", p" IMMEDIATES ";\n}\n"                                                                          \
                   : LOWBIT_OPS_##R(d, 0)                                                                             \
                   : "l"(desc_a), "l"(desc_b), "r"(scale_d));                                                         \
    }                                                                                                                 \
  };

// Immediates after scale-d: f16/bf16 take imm-scale-a, imm-scale-b (1: no negation) and
// imm-trans-a, imm-trans-b (0: K-major); fp8 only the scales; integers none.
#define LOWBIT_IMM_16BIT ", 1, 1, 0, 0"
#define LOWBIT_IMM_FP8 ", 1, 1"
#define LOWBIT_IMM_INT ""

using namespace lowbit::formats;

// NAME##N<WIDTH>: wgmma.m64n<WIDTH>k<K>.[satfinite.]<TYPES> (D, A, B: the formats TYPES spells; SAT:
// .satfinite) with R accumulator registers.
#define WGMMA(NAME, WIDTH, K, TYPES, D, A, B, SAT, R, IMM) \
  LOWBIT_WGMMA_ATOM(NAME##N##WIDTH, "m64n" #WIDTH "k" #K "." TYPES, mma::wgmma_atom(WIDTH, K, D, A, B, SAT), R, IMM)

// Every type combination at N = 8 and 256; the ones SageAttention2 and FlashAttention-3 use (f16,
// bf16, e4m3 -> f32; s8 -> s32; R = n/2 registers) at N = 16, 24, 32, 64 and 128 too.
#define EVERY_N(NAME, K, TYPES, D, A, B, SAT, IMM)                                                            \
  WGMMA(NAME, 8, K, TYPES, D, A, B, SAT, 4, IMM)                                                              \
  WGMMA(NAME, 16, K, TYPES, D, A, B, SAT, 8, IMM)                                                             \
  WGMMA(NAME, 24, K, TYPES, D, A, B, SAT, 12, IMM)                                                            \
  WGMMA(NAME, 32, K, TYPES, D, A, B, SAT, 16, IMM)                                                            \
  WGMMA(NAME, 64, K, TYPES, D, A, B, SAT, 32, IMM)                                                            \
  WGMMA(NAME, 128, K, TYPES, D, A, B, SAT, 64, IMM)                                                           \
  WGMMA(NAME, 256, K, TYPES, D, A, B, SAT, 128, IMM)
#define N8_AND_N256(NAME, K, TYPES, D, A, B, SAT, R8, R256, IMM) \
  WGMMA(NAME, 8, K, TYPES, D, A, B, SAT, R8, IMM)                \
  WGMMA(NAME, 256, K, TYPES, D, A, B, SAT, R256, IMM)

EVERY_N(F32F16, 16, "f32.f16.f16", fp32, fp16, fp16, false, LOWBIT_IMM_16BIT)
EVERY_N(F32Bf16, 16, "f32.bf16.bf16", fp32, bf16, bf16, false, LOWBIT_IMM_16BIT)
N8_AND_N256(F16F16, 16, "f16.f16.f16", fp16, fp16, fp16, false, 2, 64, LOWBIT_IMM_16BIT)
EVERY_N(F32E4m3E4m3, 32, "f32.e4m3.e4m3", fp32, e4m3, e4m3, false, LOWBIT_IMM_FP8)
N8_AND_N256(F32E4m3E5m2, 32, "f32.e4m3.e5m2", fp32, e4m3, e5m2, false, 4, 128, LOWBIT_IMM_FP8)
N8_AND_N256(F32E5m2E4m3, 32, "f32.e5m2.e4m3", fp32, e5m2, e4m3, false, 4, 128, LOWBIT_IMM_FP8)
N8_AND_N256(F32E5m2E5m2, 32, "f32.e5m2.e5m2", fp32, e5m2, e5m2, false, 4, 128, LOWBIT_IMM_FP8)
N8_AND_N256(F16E4m3E4m3, 32, "f16.e4m3.e4m3", fp16, e4m3, e4m3, false, 2, 64, LOWBIT_IMM_FP8)
WGMMA(F16E4m3E5m2, 8, 32, "f16.e4m3.e5m2", fp16, e4m3, e5m2, false, 2, LOWBIT_IMM_FP8)
WGMMA(F16E5m2E4m3, 8, 32, "f16.e5m2.e4m3", fp16, e5m2, e4m3, false, 2, LOWBIT_IMM_FP8)
WGMMA(F16E5m2E5m2, 8, 32, "f16.e5m2.e5m2", fp16, e5m2, e5m2, false, 2, LOWBIT_IMM_FP8)
EVERY_N(S32S8, 32, "s32.s8.s8", s32, int8, int8, false, LOWBIT_IMM_INT)
N8_AND_N256(S32S8Satfinite, 32, "satfinite.s32.s8.s8", s32, int8, int8, true, 4, 128, LOWBIT_IMM_INT)
WGMMA(S32S8U8, 8, 32, "s32.s8.u8", s32, int8, uint8, false, 4, LOWBIT_IMM_INT)
WGMMA(S32U8S8, 8, 32, "s32.u8.s8", s32, uint8, int8, false, 4, LOWBIT_IMM_INT)
WGMMA(S32U8U8, 8, 32, "s32.u8.u8", s32, uint8, uint8, false, 4, LOWBIT_IMM_INT)
WGMMA(S32U8U8Satfinite, 8, 32, "satfinite.s32.u8.u8", s32, uint8, uint8, true, 4, LOWBIT_IMM_INT)

template <int Bytes>
__device__ void store_code(std::uint8_t* smem, int offset, std::uint16_t code) {
  if constexpr (Bytes == 1)
    smem[offset] = std::uint8_t(code);
  else
    *reinterpret_cast<std::uint16_t*>(smem + offset) = code;
}

// Stores A (m x K) and B (K x n) codes K-major in shared memory and makes them visible to the
// tensor cores (ordinary stores reach the async proxy only after the fence).
template <class Probe, int K>
__device__ void stage_operands(const std::uint16_t* a, const std::uint16_t* b, std::uint8_t* a_smem, std::uint8_t* b_smem) {
  constexpr mma::Atom s = Probe::atom;
  constexpr int bytes = s.a.code_bits() / 8, k_bytes = K * bytes;
  for (int e = threadIdx.x; e < s.m * K; e += 128) store_code<bytes>(a_smem, kmajor_offset(e / K, e % K * bytes, k_bytes), a[e]);
  for (int e = threadIdx.x; e < K * s.n; e += 128) store_code<bytes>(b_smem, kmajor_offset(e % s.n, e / s.n * bytes, k_bytes), b[e]);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
}

// One MMA over k-slice `step` of operands staged with depth K (k_bytes = K * bytes), waited for.
template <class Probe, int K, int R>
__device__ void mma_step(std::uint32_t (&acc)[R], const std::uint8_t* a_smem, const std::uint8_t* b_smem, int step,
                         int scale_d) {
  constexpr mma::Atom s = Probe::atom;
  constexpr int bytes = s.a.code_bits() / 8, k_bytes = K * bytes;
  // A k-slice is s.k * bytes / 16 core matrices along K, each kLeadingByteOffset further on.
  const int offset = step * (s.k * bytes / 16) * kLeadingByteOffset;
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  Probe::mma(acc, descriptor(a_smem + offset, k_bytes), descriptor(b_smem + offset, k_bytes), scale_d);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

template <class Probe>
__global__ void __launch_bounds__(128) wgmma_probe(DeviceTiles tiles) {
  constexpr mma::Atom s = Probe::atom;
  constexpr layout::Fragment fd = s.c_fragment;
  constexpr int c_bits = s.c.code_bits(), c_registers = fd.value_count * c_bits / 32;
  __shared__ alignas(128) std::uint8_t a_smem[s.m * s.k * s.a.code_bits() / 8];
  __shared__ alignas(128) std::uint8_t b_smem[s.n * s.k * s.b.code_bits() / 8];
  const int tile = blockIdx.x;
  stage_operands<Probe, s.k>(tiles.a + tile * s.m * s.k, tiles.b + tile * s.k * s.n, a_smem, b_smem);
  std::uint32_t acc[c_registers];
  load_fragment<fd, s.n, c_bits>(tiles.c + tile * s.m * s.n, threadIdx.x, acc);
  mma_step<Probe, s.k>(acc, a_smem, b_smem, 0, 1);
  store_fragment<fd, s.n, c_bits>(acc, threadIdx.x, tiles.d + tile * s.m * s.n);
}

// A K loop of Steps MMAs over one tile (f32 accumulators): Flush = 0 chains one accumulator from
// C; Flush = f adds a fresh accumulator (f MMAs, the first with scale-d = 0) into an fp32
// accumulator starting at C with a round-to-nearest-even add, every f MMAs.
template <class Probe, int Steps, int Flush>
__global__ void __launch_bounds__(128) wgmma_kloop(DeviceTiles tiles) {
  constexpr mma::Atom s = Probe::atom;
  static_assert(s.c.code_bits() == 32 && !s.c.is_integer(), "K-loop probes take f32 accumulators");
  static_assert(Flush == 0 || Steps % (Flush ? Flush : 1) == 0, "the flushes divide the K loop");
  constexpr int K = Steps * s.k;
  constexpr layout::Fragment fd = s.c_fragment;
  constexpr int R = fd.value_count;
  __shared__ alignas(128) std::uint8_t a_smem[s.m * K * s.a.code_bits() / 8];
  __shared__ alignas(128) std::uint8_t b_smem[s.n * K * s.b.code_bits() / 8];
  const int tile = blockIdx.x;
  stage_operands<Probe, K>(tiles.a + tile * s.m * K, tiles.b + tile * K * s.n, a_smem, b_smem);
  std::uint32_t acc[R];
  load_fragment<fd, s.n, 32>(tiles.c + tile * s.m * s.n, threadIdx.x, acc);
  if constexpr (Flush == 0) {
    for (int step = 0; step < Steps; ++step) mma_step<Probe, K>(acc, a_smem, b_smem, step, 1);
  } else {
    for (int first = 0; first < Steps; first += Flush) {
      std::uint32_t fresh[R] = {};
      for (int step = first; step < first + Flush; ++step) mma_step<Probe, K>(fresh, a_smem, b_smem, step, step > first);
#pragma unroll
      for (int i = 0; i < R; ++i) acc[i] = __float_as_uint(__fadd_rn(__uint_as_float(acc[i]), __uint_as_float(fresh[i])));
    }
  }
  store_fragment<fd, s.n, 32>(acc, threadIdx.x, tiles.d + tile * s.m * s.n);
}

template <class Probe>
void launch(const DeviceTiles& tiles) {
  wgmma_probe<Probe><<<tiles.count, 128>>>(tiles);
}

template <class Probe>
void run(const TileBatch& tiles) {
  run_on_device(Probe::atom, Probe::atom.k, tiles, launch<Probe>);
}

template <class... Probes>
constexpr std::array<MmaProbe, sizeof...(Probes)> probes() {
  return {MmaProbe{Probes::atom, run<Probes>}...};
}

constexpr auto kProbes = probes<
    F32F16N8, F32Bf16N8, F16F16N8, F32E4m3E4m3N8, F32E4m3E5m2N8, F32E5m2E4m3N8, F32E5m2E5m2N8, F16E4m3E4m3N8,
    F16E4m3E5m2N8, F16E5m2E4m3N8, F16E5m2E5m2N8, S32S8N8, S32S8SatfiniteN8, S32S8U8N8, S32U8S8N8, S32U8U8N8,
    S32U8U8SatfiniteN8,
    F32F16N16, F32Bf16N16, F32E4m3E4m3N16, S32S8N16, F32F16N24, F32Bf16N24, F32E4m3E4m3N24, S32S8N24,
    F32F16N32, F32Bf16N32, F32E4m3E4m3N32, S32S8N32, F32F16N64, F32Bf16N64, F32E4m3E4m3N64, S32S8N64,
    F32F16N128, F32Bf16N128, F32E4m3E4m3N128, S32S8N128,
    F32F16N256, F32Bf16N256, F16F16N256, F32E4m3E4m3N256, F32E4m3E5m2N256, F32E5m2E4m3N256, F32E5m2E5m2N256,
    F16E4m3E4m3N256, S32S8N256, S32S8SatfiniteN256>();

// K-loop probes: 8 MMAs per tile, every flush interval of SageAttention2-style kernels.
constexpr int kKLoopSteps = 8;

template <class Probe, int Flush>
void launch_kloop(const DeviceTiles& tiles) {
  wgmma_kloop<Probe, kKLoopSteps, Flush><<<tiles.count, 128>>>(tiles);
}

template <class Probe, int Flush>
void run_kloop(const TileBatch& tiles) {
  run_on_device(Probe::atom, kKLoopSteps * Probe::atom.k, tiles, launch_kloop<Probe, Flush>);
}

template <class Probe, int... Flushes>
constexpr std::array<KLoopProbe, sizeof...(Flushes)> kloop_probes() {
  return {KLoopProbe{Probe::atom, kKLoopSteps, Flushes, run_kloop<Probe, Flushes>}...};
}

constexpr auto kKLoopProbes = [] {
  constexpr auto e4m3 = kloop_probes<F32E4m3E4m3N8, 0, 1, 2, 4, 8>();
  constexpr auto e5m2 = kloop_probes<F32E5m2E5m2N8, 0, 1, 2, 4, 8>();
  constexpr auto f16 = kloop_probes<F32F16N8, 0, 1, 2, 4, 8>();
  constexpr auto bf16 = kloop_probes<F32Bf16N8, 0, 1, 2, 4, 8>();
  std::array<KLoopProbe, 20> all{};
  std::size_t i = 0;
  for (const auto* group : {&e4m3, &e5m2, &f16, &bf16})
    for (const auto& p : *group) all[i++] = p;
  return all;
}();

}  // namespace

std::span<const MmaProbe> detail::wgmma_probes() { return kProbes; }
std::span<const KLoopProbe> wgmma_kloop_probes() { return kKLoopProbes; }

}  // namespace lowbit::kernels
