// The SageAttention2-8b attention kernel for Hopper (sm_90a), device code and its launch.
// Every fp32 step is a function of emulation/attention/kernel_steps.hpp or sage2_hopper.hpp; the
// tiling, the groups and the KV order are the recipe's (sage2_8b_hopper).
//
// The attention kernel: every warpgroup runs one unit, the 64 query rows of a Q block that the
// recipe gives one consumer warpgroup, of one (Q head, batch); a thread block holds the
// kUnitsPerBlock consecutive units of a head, kBlocksPerSm blocks per SM (AttentionShape):
//   per KV block, in order: S = Q K'^T (wgmma s8, exact), the contract's steps 1-7 in registers,
//     P's E4M3 codes moved from the S fragment to the A fragment of P V (fragment.hpp), R = P V
//     (wgmma e4m3 from +0), o = fma(o, alpha, R); at the end the lanes' row sums, the
//     normalization, the LSE with its smoothing bias. When the unit waits is the schedule's
//     (Sage2Schedule): serial, it waits for each wgmma, and the other warpgroups of the SM, at other
//     points of their loops, keep the tensor cores and the exponential unit busy meanwhile;
//     overlapped, it issues Q K^T of block i with P V of block i - 1 and runs block i's softmax
//     while P V runs, the block's two units taking turns at issuing (ping-pong);
//   K and V of every KV block reach a ring of shared-memory stages that the block's warpgroups
//     share, one bulk copy per tile (the tiles are stored in shared-memory order); each stage has a
//     "full" mbarrier (its bytes landed) and an "empty" one (every unit reading it released it),
//     and its refills go round robin to the units.
// Three stages of the emulated pipeline are compile-time choices beside the presets' (forward.cpp):
//   InPlace: o = mul_rn(o, alpha), then P V accumulates onto o from its first k32 step (o stays in
//     the FP22 accumulator across KV blocks; no step 9);
//   SmoothV: V was quantized minus its mean over the keys; each output takes the mean back,
//     add_value_mean after normalize_output, before the output's rounding;
//   RowSum (row-sum=pv): no step 6; every stage holds 8 rows of E4M3 ones after its V^T tile, so each
//     P V k32 step is one m64n(d+8)k32 wgmma whose last 8 columns are P's row sums, and their sum
//     goes into l as R into o (step 9'): a thread's l is its rows' whole sum, no butterfly at the
//     end. 62 FADD fewer a KV block and thread at block_kv = 128, for 8 columns more of P V (beside
//     P V, four m64n8k32 wgmmas of their own were slower: docs/attention-kernel-tuning.md).
// With all three off the kernel's code is the presets' kernel's. In place is not tuned for speed: its
// loop has about 64 local loads and stores at d = 128 and 20 at d = 64, where ptxas also serializes
// the wgmmas (C7514): o is the wgmma's accumulator across the whole loop, beside S's (copying o into
// a fresh accumulator per block spilled as much).
//
// Each translation unit compiles the instances it launches (attention_for_shape): the presets'
// (sage2_attention_kernel.cu), in place (sage2_attention_in_place.cu) and smooth V alone
// (sage2_attention_smooth_v.cu), so that they build in parallel. Every one has its own copy of the
// groups in constant memory (groups.cuh) and uploads it.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/attention/sage2_hopper.hpp"
#include "kernels/attention/groups.cuh"
#include "kernels/attention/sage2_device.cuh"
#include "kernels/attention/sage2_kernels.cuh"
#include "kernels/quant_codes.cuh"
#include "kernels/sm90/accumulator.cuh"
#include "kernels/sm90/copy.cuh"
#include "kernels/sm90/fragment.hpp"
#include "kernels/sm90/kv_ring.cuh"
#include "kernels/sm90/smem_layout.hpp"
#include "kernels/sm90/sync.cuh"
#include "kernels/sm90/wgmma.cuh"

namespace lowbit::kernels::attention::detail {
namespace {

using sm90::KMajorLayout;

// The exponential steps with the recipe's exp2 (unit and polynomial) as a template parameter
// object: its coefficients and degree are then constants of the code (a function-local record
// would live in local memory and be read at run time).
template <steps::Exp2 Exp2>
__device__ inline float probability(float score, float offset) {
  return steps::probability(score, offset, Exp2);
}
template <steps::Exp2 Exp2>
__device__ inline float fused_probability(float acc, float scale, float offset) {
  return steps::fused_probability(acc, scale, offset, Exp2);
}
template <steps::Exp2 Exp2>
__device__ inline float rescale(float old_offset, float new_offset) {
  return steps::rescale(old_offset, new_offset, Exp2);
}

// ---- attention -----------------------------------------------------------------------------------
// How the units share the SM, per head dimension and schedule. Serial: at d = 128, three
// warpgroups in one block share a ring of 4 stages (the L2 then sends each K/V block once per 192
// query rows: the kernel runs at the GPU's power limit); at d = 64, one warpgroup per block and four
// blocks per SM (two or four units a block sharing a 4-stage ring, though the L2 then sends a K/V
// block 2 or 4 times less often, ran 0.90x and 0.81x: the units wait for one another's releases);
// taking turns at issuing Q K^T (FA3's ping-pong without the overlap) gained nothing. Overlapped: a
// ring of 4 stages; at d = 128 two units a block (a unit holds S, R and o at once: up to 255
// registers) that take turns at issuing (ping-pong); at d = 64 three units without turns
// (FlashAttention-3 FP8's shape there: 3 consumer warpgroups, no scheduler barrier; 168 registers),
// which ran 1.19-1.38x the two-unit ping-pong there. The overlapped schedule is
// slower than the serial one at every measured shape (0.79-0.94x on an H100): fewer warps share
// the SM, and the issue slots, not the tensor cores, bound the kernel. Every choice here was timed
// side by side; docs/attention-kernel-tuning.md has the measurements and their commits.
template <int HeadDim, Sage2Schedule Schedule, steps::RowSum RowSum = steps::RowSum::lanes>
struct AttentionShape {
  static constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim);
  static constexpr bool kOverlapped = Schedule == Sage2Schedule::overlapped;
  static constexpr int kUnitsPerQBlock = recipe.consumer_warps / 4;
  static constexpr int kUnitsPerBlock = kOverlapped ? (HeadDim == 128 ? 2 : 3) : HeadDim == 128 ? 3 : 1;
  static constexpr bool kPingPong = kOverlapped && kUnitsPerBlock == 2;
  static constexpr int kBlocksPerSm = kOverlapped || HeadDim == 128 ? 1 : 4;
  static constexpr int kStages = kOverlapped || HeadDim == 128 ? 4 : 2;
  // Serial: where a unit refills the stage of the block before: while its P V runs at d = 128 (work
  // in the shorter Q K^T wait held the unit back), while its Q K^T runs at d = 64 (2 stages: refilled
  // at P V, the ring holds too little ahead).
  static constexpr bool kRefillAtPv = HeadDim == 128;
  // Serial: where a unit releases a stage: at d = 128 while its next Q K^T runs (`release` in the
  // kernel); at d = 64, one unit a block, right after the barrier that ends its P V (faster there).
  static constexpr bool kReleaseAtBarrier = !kOverlapped && HeadDim == 64;
  // Whether a unit's warps meet at a named barrier after each P V, so that thread 0 releases the
  // stage for the unit (one arrival a unit), or each warp releases it on its own (its lane 0: 4
  // arrivals a unit) and the warps meet once, after the loop: serial, faster without the barrier
  // only for the non-causal d = 128 kernel; overlapped, no barrier.
  static constexpr bool barrier_in_loop(bool causal) { return !kOverlapped && (HeadDim == 64 || causal); }
  // What a block asks for before its loop. Non-causal at d = 128 (one block an SM, nothing else
  // running there while it starts): its units' Q tiles first, then stage 0, and stages 1 .. once
  // unit 0's Q tile landed: asked for with the ring's 128 KB, the Q tiles that the first Q K^T
  // needs came later. Causal (slower this way) and at d = 64 (four blocks an SM), the stages first.
  static constexpr bool q_tiles_first(bool causal) { return HeadDim == 128 && !causal; }
  static constexpr int stages_at_entry(bool causal) { return q_tiles_first(causal) ? 1 : kStages; }
  static constexpr int kThreads = 128 * kUnitsPerBlock;
  // Shared memory: the units' Q tiles (64 x d each), then kStages stages of the K tile (block_kv x d),
  // then kStages of the V^T tile (d x block_kv), all K-major without swizzle
  // (kernels/sm90/smem_layout.hpp). Row sums by the tensor cores (steps::RowSum::pv): each V^T
  // stage has 8 more rows, E4M3 ones written once, which P V's B operand reads as its rows d .. d+7.
  static constexpr int kQBytes = 64 * HeadDim;
  static constexpr int kKBytes = recipe.block_kv * HeadDim;
  static constexpr int kVBytes = HeadDim * recipe.block_kv;
  static constexpr int kOnesRows = RowSum == steps::RowSum::pv ? 8 : 0;
  static constexpr int kVStageBytes = kVBytes + kOnesRows * recipe.block_kv;
  static constexpr int kBytes = kUnitsPerBlock * kQBytes + kStages * (kKBytes + kVStageBytes);
  // sm_90: 228 KiB of shared memory an SM, 1 KiB of it reserved per block; the kernel's static
  // shared memory (the stages' mbarriers and release counts) is under 1 KiB.
  static constexpr int kSmemPerSm = 228 * 1024, kSmemReservedPerBlock = 1024, kStaticBytes = 1024;
  static_assert(kBlocksPerSm * (kBytes + kStaticBytes + kSmemReservedPerBlock) <= kSmemPerSm, "the blocks fit the SM");
  // Named barrier kUnitDone + w: the 128 threads of warpgroup w (0 is __syncthreads'); ping-pong,
  // kTurn + w: warpgroup w's turn to issue (the block's 256 threads).
  static constexpr int kUnitDone = 1, kTurn = kUnitDone + kUnitsPerBlock;
  static_assert(kTurn + kUnitsPerBlock <= 16, "16 named barriers");
  static_assert(!kOverlapped || kUnitsPerBlock == 2 || kUnitsPerBlock == 3, "overlapped: 2 units (ping-pong) or 3");
  // Overlapped: a unit refills block i - 2's stage after issuing block i's wgmmas, before it waits
  // for them, so block i + kStages - 2 must have been asked for already.
  static_assert(!kOverlapped || kStages >= 3, "the overlapped refill runs two blocks behind");
  // The block's ring of K/V stages: stage Ring::stage_of(i) holds KV block i.
  using Ring = sm90::KvStageRing<kStages, kKBytes, kVStageBytes>;
};

// Rows x KBytes of row-major global bytes (rows `row_stride` apart) into a K-major tile, by the
// warpgroup's threads (its Q tile, once).
template <int Rows, int KBytes>
__device__ inline void load_tile_async(std::uint8_t* smem, const std::uint8_t* global, long long row_stride,
                                       int thread) {
  constexpr KMajorLayout layout{KBytes};
  constexpr int kPieces = Rows * KBytes / KMajorLayout::kCoreRowBytes;
  static_assert(kPieces % 128 == 0, "whole rounds of 16-byte copies");
#pragma unroll
  for (int piece = thread; piece < kPieces; piece += 128) {
    const int row = layout.piece_row(piece), k_byte = layout.piece_k_byte(piece);
    sm90::copy_16_async(smem + layout.offset(row, k_byte), global + row * row_stride + k_byte);
  }
}

// A unit's Q tile: the codes of its 64 rows from `first_row` of the Q codes into its tile, by its 128
// threads (cp.async, which needs no mbarrier).
template <int HeadDim>
__device__ inline void load_q_tile(std::uint8_t* tile, const AttentionParams& p, long long first_row, int thread) {
  load_tile_async<64, HeadDim>(tile, reinterpret_cast<const std::uint8_t*>(p.q_codes) + first_row * HeadDim, HeadDim, thread);
  sm90::commit_copies();
}

// A warpgroup's accumulator F: the first value of thread t (warp j, lane l) is in row 16 j + l / 4,
// and every other value in that row or 8 below it.
template <layout::Fragment F>
constexpr bool warp_holds_16_rows() {
  for (int t = 0; t < F.threads(); ++t) {
    const int first = t / 32 * 16 + t % 32 / 4;
    if (F(t, 0).row != first) return false;
    for (int v = 0; v < F.value_count; ++v)
      if (F(t, v).row != first && F(t, v).row != first + 8) return false;
  }
  return true;
}

// `a` if First, else `b`: an accumulator chosen at compile time among arrays of other lengths.
template <bool First, class A, class B>
__device__ inline auto& first_if(A& a, B& b) {
  if constexpr (First) return a;
  else return b;
}

// The m64n(d+8) accumulator of P V with the row sums: value 2h of its sums is the sum of the row of
// the thread's value 0, 8 h below (h = 0, 1), as l's row h.
template <class PvWgmma>
constexpr bool sums_follow_rows() {
  for (int t = 0; t < PvWgmma::accumulator.threads(); ++t)
    for (int h = 0; h < 2; ++h)
      if (PvWgmma::sums(t, 2 * h).row != PvWgmma::accumulator(t, 0).row + 8 * h) return false;
  return true;
}

template <class Out, int HeadDim, bool Causal, steps::Exp2Unit Exp2Unit, bool InPlace, bool SmoothV, Sage2Schedule Schedule,
          steps::RowSum RowSum>
__global__ void __launch_bounds__(AttentionShape<HeadDim, Schedule, RowSum>::kThreads,
                                  AttentionShape<HeadDim, Schedule, RowSum>::kBlocksPerSm)
    sage2_attention_kernel(const AttentionParams p) {
  using Shape = AttentionShape<HeadDim, Schedule, RowSum>;
  constexpr Sage2HopperRecipe recipe = sage2_8b_hopper(HeadDim, Exp2Unit);
  constexpr int kBlockQ = recipe.block_q, kBlockKv = recipe.block_kv, kUnits = Shape::kUnitsPerBlock;
  static_assert(kBlockQ == 64 * Shape::kUnitsPerQBlock && recipe.consumer_warps % 4 == 0,
                "one consumer warpgroup per 64 query rows");
  // Every unit reads the KV blocks in one order, so its block's units can share the ring.
  static_assert(recipe.kv_order == KvOrder::ascending, "the units of a block read the KV blocks in one order");
  // Row sums by the tensor cores: serial and two-level only (Sage2Problem::validate).
  constexpr bool kPvRowSum = RowSum == steps::RowSum::pv;
  static_assert(!kPvRowSum || (Schedule == Sage2Schedule::serial && !InPlace), "row sums by P V: serial, two-level");
  using SWgmma = sm90::WgmmaS8<kBlockKv>;
  using PvWgmma = std::conditional_t<kPvRowSum, sm90::WgmmaE4m3WithSums<HeadDim>, sm90::WgmmaE4m3<HeadDim>>;
  constexpr layout::Fragment kS = SWgmma::accumulator;  // S: rows of a warpgroup x block_kv keys
  constexpr layout::Fragment kO = PvWgmma::accumulator;  // R and O: rows x head_dim channels
  constexpr auto s_values = sm90::value_offsets<kS>();
  constexpr auto o_values = sm90::value_offsets<kO>();
  using STile = sm90::AccumulatorTile<kBlockKv>;  // S's rows, and P's A fragment
  constexpr int kSValues = SWgmma::kRegisters, kOValues = kO.value_count, kPerRow = STile::kPerRow;
  constexpr int kRValues = PvWgmma::kRegisters;  // R, then with the row sums by P V their 4 values
  constexpr int kPGroups = STile::kAGroups;  // k32 steps of P·V
  constexpr KMajorLayout q_layout{HeadDim}, k_layout{HeadDim}, v_layout{kBlockKv};

  extern __shared__ __align__(128) std::uint8_t smem[];
  std::uint8_t* k_tiles = smem + kUnits * Shape::kQBytes;
  std::uint8_t* v_tiles = k_tiles + Shape::kStages * Shape::kKBytes;
  if constexpr (kPvRowSum)
    static_assert(v_layout.row_offset(HeadDim) == Shape::kVBytes && sums_follow_rows<PvWgmma>(),
                  "the ones are B's rows d .. d+7, and their sums l's rows");

  // This warpgroup's unit (broadcast from lane 0: the compiler then keeps what derives from it, the
  // wgmma descriptors, in uniform registers); blocks of the longest units first when causal.
  const int units = p.padded_q / 64, blocks = (units + kUnits - 1) / kUnits;
  const int block = Causal ? blocks - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int w = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0), thread = threadIdx.x % 128;
  const int unit = block * kUnits + w;
  const int q_block = unit / Shape::kUnitsPerQBlock, q0 = q_block * kBlockQ;
  const int unit_row = unit % Shape::kUnitsPerQBlock * 64;  // in the Q block
  const int hq = blockIdx.y, b = blockIdx.z, hkv = hq / (p.heads_q / p.heads_kv);
  const long long q_head = (long long)b * p.heads_q + hq, kv_head = (long long)b * p.heads_kv + hkv;
  const std::uint8_t* k_codes = reinterpret_cast<const std::uint8_t*>(p.k_codes) + kv_head * p.padded_kv * HeadDim;
  const std::uint8_t* v_codes = p.v_codes + kv_head * HeadDim * p.padded_kv;

  // KV blocks of unit u: every block with a key visible to some query of the unit (none past the
  // last unit). Causal, a later unit of the block sees as many blocks or more.
  const auto kv_count_of = [&](int u) {
    if (u >= units) return 0;
    return ((Causal ? min(p.tokens, u * 64 + 64) : p.tokens) - 1) / kBlockKv + 1;
  };
  // The block's last unit (of those not past the last unit of the head): it reads every KV block the
  // block loads (causal, a later unit sees as many blocks or more).
  const int last_unit = min(kUnits, units - block * kUnits) - 1;
  const int kv_count = kv_count_of(unit), block_kv_count = kv_count_of(block * kUnits + last_unit);
  const auto readers_of = [&](int i) {  // the units of the block that read KV block i
    int readers = 0;
#pragma unroll
    for (int u = 0; u < kUnits; ++u) readers += kv_count_of(block * kUnits + u) > i;
    return readers;
  };

  // The ring's mbarriers: a stage's "full" one (the filling thread's arrival and the bytes of its
  // bulk copies) and its "empty" one (kReleasesPerUnit arrivals per unit of the block).
  using Ring = typename Shape::Ring;
  __shared__ std::uint64_t full[Shape::kStages];
  __shared__ std::uint64_t empty[Shape::kStages];
  const Ring ring{k_tiles, v_tiles, full, empty};
  // One thread: KV block i into its stage. (Written out here: as a function of the ring, with the
  // global addresses passed in or computed in it, the kernels compiled to other instructions.)
  const auto load_kv = [&](int i) {
    const int stage = Ring::stage_of(i);
    sm90::mbarrier_expect_bytes(&full[stage], Shape::kKBytes + Shape::kVBytes);
    sm90::bulk_copy_async(k_tiles + stage * Shape::kKBytes, k_codes + k_code_offset(i * kBlockKv, 0, HeadDim, kBlockKv),
                          Shape::kKBytes, &full[stage]);
    sm90::bulk_copy_async(v_tiles + stage * Shape::kVStageBytes, v_codes + v_code_offset(0, i * kBlockKv, HeadDim, kBlockKv),
                          Shape::kVBytes, &full[stage]);
    sm90::mbarrier_arrive(&full[stage]);
  };
  // KV block i's stage is free for this unit once all its warps' P V waits returned (their wgmma
  // reads of it complete there): thread 0 releases it past the unit barrier that follows them, or,
  // without that barrier (Shape::barrier_in_loop), each warp's lane 0 releases it for its warp. At
  // d = 128 block i - 1 is released while Q K^T of block i runs, where every warp of the unit waits
  // anyway (each warp releasing block i right after its own P V wait was slower); thread 0's release
  // right after the barrier held warp 0 behind the unit's other warps at the next Q K^T, a wgmma
  // that starts when all 4 have issued it; at d = 64, see Shape::kReleaseAtBarrier. The release is
  // an arrival on the stage's empty mbarrier, which returns nothing to wait for.
  constexpr bool kBarrierInLoop = Shape::barrier_in_loop(Causal);
  constexpr int kReleasesPerUnit = kBarrierInLoop ? 1 : 128 / 32;  // thread 0, or each warp's lane 0
  constexpr bool kOverlapped = Shape::kOverlapped;
  const auto release = [&](int i) {
    if (kBarrierInLoop ? thread == 0 : thread % 32 == 0) ring.release(i);
  };
  // Block i's stage takes block i + kStages once every unit reading block i released it. The units
  // take turns at refilling in order; a unit that does not read block i + kStages leaves its turn
  // to the block's last unit, which reads every block (causal, a later unit sees as many or more).
  // The refiller arrives for the units that do not read block i, then waits for the empty phase:
  // one block after its own release, so the others' releases have mostly landed. The wait cannot
  // deadlock: each reader releases block i by its block i + 1 (or after its last block), and the
  // data of block i + 1 was asked for before (by the first loads or an earlier refill).
  const auto refill = [&](int i) {
    const int next = i + Shape::kStages, turn = i % kUnits;
    if (thread != 0 || i < 0 || next >= block_kv_count) return;
    if (w != (kv_count_of(block * kUnits + turn) > next ? turn : last_unit)) return;
    const int stage = Ring::stage_of(i), readers = readers_of(i);
    if (readers < kUnits) ring.release(i, (kUnits - readers) * kReleasesPerUnit);
    // (The wait written out: as the ring's wait for the empty phase, the kernels compiled to other
    // instructions.)
    sm90::mbarrier_wait(&empty[stage], Ring::parity_of(i));
    load_kv(next);
  };
  constexpr bool kQTilesFirst = Shape::q_tiles_first(Causal);
  constexpr int kStagesAtEntry = Shape::stages_at_entry(Causal);
  // The Q tile's address is written out at each of its two places: computed once above both, it
  // made ptxas allocate the d = 64 kernels' registers otherwise (one of them spilled).
  if constexpr (kQTilesFirst) {
    if (kv_count > 0) load_q_tile<HeadDim>(smem + w * Shape::kQBytes, p, q_head * p.padded_q + q0 + unit_row, thread);
  }
  if constexpr (kPvRowSum) {  // written before the barrier, made visible to wgmma's (async) reads
    constexpr int kOnesWords = Shape::kOnesRows * kBlockKv / 4;
    for (int word = threadIdx.x; word < Shape::kStages * kOnesWords; word += Shape::kThreads)
      reinterpret_cast<std::uint32_t*>(v_tiles + word / kOnesWords * Shape::kVStageBytes + Shape::kVBytes)[word % kOnesWords] =
          0x38383838u;  // 0b00111000 = E4M3 1.0, four times
    sm90::fence_async_shared();
  }
  if (threadIdx.x == 0) ring.init(kUnits * kReleasesPerUnit);
  __syncthreads();
  if (threadIdx.x == 0)
    for (int i = 0; i < kStagesAtEntry && i < block_kv_count; ++i) load_kv(i);
  if (kv_count == 0) return;  // a block's units past the last
  std::uint8_t* q_tile = smem + w * Shape::kQBytes;
  if constexpr (!kQTilesFirst) load_q_tile<HeadDim>(q_tile, p, q_head * p.padded_q + q0 + unit_row, thread);
  sm90::wait_copies<0>();
  sm90::fence_async_shared();
  sm90::barrier_sync(Shape::kUnitDone + w, 128);
  if (threadIdx.x == 0)
    for (int i = kStagesAtEntry; i < Shape::kStages && i < block_kv_count; ++i) load_kv(i);

  const layout::Offset base = sm90::thread_offset<kS>(thread);  // this thread's first row (of 64) and first key column
  const int row0 = unit_row + base.row;  // in the Q block; the thread also holds row0 + 8
  const quant::QkGroups& groups = groups_of(HeadDim);
  const float q_scale = p.q_scales[(q_head * (p.padded_q / kBlockQ) + q_block) * p.q_groups + groups.q.group_of_row[row0]];
  const int k_group = groups.k.group_of_row[base.col];
  const float* k_scales = p.k_scales + kv_head * (p.padded_kv / kBlockKv) * p.k_groups + k_group;

  float o[kOValues];
#pragma unroll
  for (int i = 0; i < kOValues; ++i) o[i] = 0.0f;
  float m[2] = {steps::kNegativeInfinity, steps::kNegativeInfinity};
  float offset[2] = {steps::kNegativeInfinity, steps::kNegativeInfinity};
  float l[2] = {0.0f, 0.0f};
  // The descriptors of the Q tile and of stage 0's K and V^T tiles; a k32 slice or a stage further
  // is sm90::advance of them.
  const std::uint64_t q_descriptor = sm90::matrix_descriptor(q_tile, q_layout);
  const std::uint64_t k_descriptor = sm90::matrix_descriptor(k_tiles, k_layout);
  const std::uint64_t v_descriptor = sm90::matrix_descriptor(v_tiles, v_layout);

  // The steps of one KV block as functions of their registers, for the overlapped schedule, which runs
  // them in its own order. The serial loop below has them written out: calling these, it compiled to
  // other instructions (the same count, scheduled otherwise), and its instructions are the ones timed
  // and checked on the GPU (docs/attention-kernel-tuning.md).
  using Scores = std::int32_t[kSValues];     // S of a block: Q K'^T, exact s32
  using Values = float[kSValues];            // a block's scores, then its P
  using Codes = std::uint32_t[kPGroups][4];  // P's E4M3 codes: the A fragment of P V
  using Outputs = float[kRValues];           // R = P V of a block, or o
  // S = Q K'^T of block i over head_dim / 32 k32 steps, issued.
  const auto issue_scores = [&](int i, Scores& s_acc) {
    sm90::wgmma_fence();
#pragma unroll
    for (int step = 0; step < HeadDim / SWgmma::kK; ++step)
      SWgmma::mma(s_acc, sm90::advance(q_descriptor, q_layout.slice_offset(step, SWgmma::kK)),
                  sm90::advance(k_descriptor, Ring::stage_of(i) * Shape::kKBytes + k_layout.slice_offset(step, SWgmma::kK)),
                  step > 0);
    sm90::wgmma_commit();
  };
  // Steps 1-7 of kernel_steps.hpp on this thread's two rows of block i, its scores landed: x gets P,
  // alpha the rows' rescale; m, offset and l move on.
  // Step 2 first takes the lane's maximum of each row (STile::lane_max). Without masked keys it
  // runs over the integer accumulators: step 1 is monotone in them (scale >= 0), so the largest
  // score is the score of the largest accumulator, and the chains need not wait for step 1 (nor
  // keep its results beside the accumulators).
  // Fused (sage2-8b-ex2): x keeps the accumulators, and step 5 takes the scale in its fma.
  constexpr bool kFused = recipe.exp_argument == steps::ExpArgument::fused;
  const auto softmax = [&](int i, float k_scale, const Scores& s_acc, Values& x, float (&alpha)[2]) {
    const int kv0 = i * kBlockKv;
    const float pair_scale = steps::score_scale(q_scale, k_scale);
    const float scale = kFused ? steps::fused_scale(pair_scale) : pair_scale;
    const bool masked = kv0 + kBlockKv > p.tokens || (Causal && kv0 + kBlockKv - 1 > q0 + unit_row);
    float block_max[2];
    if (!masked)
#pragma unroll
      for (int h = 0; h < 2; ++h) block_max[h] = steps::dequantize_score(STile::lane_max(s_acc, h), scale);
#pragma unroll
    for (int v = 0; v < kSValues; ++v) x[v] = kFused ? float(s_acc[v]) : steps::dequantize_score(s_acc[v], scale);
    if (masked) {
#pragma unroll
      for (int v = 0; v < kSValues; ++v) {
        const int key = kv0 + base.col + s_values[v].col, query = q0 + row0 + s_values[v].row;
        if (key >= p.tokens || (Causal && key > query)) x[v] = steps::kNegativeInfinity;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
        block_max[h] = kFused ? steps::dequantize_score(STile::lane_max(x, h), scale) : STile::lane_max(x, h);
    }
    STile::quad_max(block_max);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = fmaxf(m[h], block_max[h]);
      const float new_offset = steps::row_offset(m[h], recipe.p_log2_scale);
      alpha[h] = rescale<recipe.exp2>(offset[h], new_offset);
      offset[h] = steps::carried_offset(m[h], new_offset);
      float p_row[kPerRow];
      STile::map_row(x, h, [&](float s) {
        return kFused ? fused_probability<recipe.exp2>(s, scale, new_offset) : probability<recipe.exp2>(s, new_offset);
      }, p_row);
      l[h] = steps::update_row_sum(l[h], alpha[h], steps::tree_sum<kPerRow>(p_row));
    }
  };
  const auto make_codes = [](const Values& x, Codes& p_codes) {
    STile::to_a8(x, p_codes, [](float p0, float p1, float p2, float p3) { return steps::e4m3_code_quad(p0, p1, p2, p3); });
  };
  // Step 8 of block i, issued: P V over the block's k32 steps (FP22): two-level, R from +0; in place,
  // onto o rescaled by the block's alpha (every k32 step accumulates). Keys within each group of 32
  // are in the A fragment's order, V^T's rows in the same order (kernels/sm90/fragment.hpp).
  const auto issue_pv = [&](int i, const Codes& p_codes, const float (&alpha)[2], Outputs& pv_acc) {
    if constexpr (InPlace)
#pragma unroll
      for (int v = 0; v < kOValues; ++v) o[v] = steps::mul_rn(o[v], alpha[o_values[v].row / 8]);
    sm90::wgmma_fence();
#pragma unroll
    for (int g = 0; g < kPGroups; ++g)
      PvWgmma::mma(pv_acc, p_codes[g],
                   sm90::advance(v_descriptor, Ring::stage_of(i) * Shape::kVStageBytes + v_layout.slice_offset(g, PvWgmma::kK)),
                   InPlace || g > 0);
    sm90::wgmma_commit();
  };
  // Step 9: two-level accumulation of a block's R with its alpha.
  const auto accumulate = [&](const float (&alpha)[2], const Outputs& r_acc) {
    if constexpr (!InPlace)
#pragma unroll
      for (int v = 0; v < kOValues; ++v) o[v] = steps::accumulate_output(o[v], alpha[o_values[v].row / 8], r_acc[v]);
  };

  if constexpr (!kOverlapped) {
    for (int i = 0; i < kv_count; ++i) {
      const int stage = Ring::stage_of(i), kv0 = i * kBlockKv;
      // The block's K scale is read before the waits (which the compiler cannot move a load across).
      const float k_scale = k_scales[(long long)i * p.k_groups];
      ring.wait_full(i);

      // S = Q K'^T over head_dim / 32 k32 steps (exact s32).
      std::int32_t s_acc[kSValues];
      sm90::wgmma_fence();
#pragma unroll
      for (int step = 0; step < HeadDim / SWgmma::kK; ++step)
        SWgmma::mma(s_acc, sm90::advance(q_descriptor, q_layout.slice_offset(step, SWgmma::kK)),
                    sm90::advance(k_descriptor, stage * Shape::kKBytes + k_layout.slice_offset(step, SWgmma::kK)), step > 0);
      sm90::wgmma_commit();
      if (i > 0 && !Shape::kReleaseAtBarrier) release(i - 1);
      if (!Shape::kRefillAtPv) refill(i - 1);
      sm90::wgmma_wait<0>();
      sm90::fence_registers(s_acc);

      // Steps 1-7 of kernel_steps.hpp on this thread's two rows.
      // Step 2 first takes the lane's maximum of each row (STile::lane_max). Without masked keys it
      // runs over the integer accumulators: step 1 is monotone in them (scale >= 0), so the largest
      // score is the score of the largest accumulator, and the chains need not wait for step 1 (nor
      // keep its results beside the accumulators).
      // Fused (sage2-8b-ex2): x keeps the accumulators, and step 5 takes the scale in its fma.
      constexpr bool kFused = recipe.exp_argument == steps::ExpArgument::fused;
      const float pair_scale = steps::score_scale(q_scale, k_scale);
      const float scale = kFused ? steps::fused_scale(pair_scale) : pair_scale;
      const bool masked = kv0 + kBlockKv > p.tokens || (Causal && kv0 + kBlockKv - 1 > q0 + unit_row);
      float block_max[2];
      if (!masked)
#pragma unroll
        for (int h = 0; h < 2; ++h) block_max[h] = steps::dequantize_score(STile::lane_max(s_acc, h), scale);
      float x[kSValues];
#pragma unroll
      for (int v = 0; v < kSValues; ++v) x[v] = kFused ? float(s_acc[v]) : steps::dequantize_score(s_acc[v], scale);
      if (masked) {
#pragma unroll
        for (int v = 0; v < kSValues; ++v) {
          const int key = kv0 + base.col + s_values[v].col, query = q0 + row0 + s_values[v].row;
          if (key >= p.tokens || (Causal && key > query)) x[v] = steps::kNegativeInfinity;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h)
          block_max[h] = kFused ? steps::dequantize_score(STile::lane_max(x, h), scale) : STile::lane_max(x, h);
      }
      STile::quad_max(block_max);
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        m[h] = fmaxf(m[h], block_max[h]);
        const float new_offset = steps::row_offset(m[h], recipe.p_log2_scale);
        alpha[h] = rescale<recipe.exp2>(offset[h], new_offset);
        offset[h] = steps::carried_offset(m[h], new_offset);
        float p_row[kPerRow];
        STile::map_row(x, h, [&](float s) {
          return kFused ? fused_probability<recipe.exp2>(s, scale, new_offset) : probability<recipe.exp2>(s, new_offset);
        }, p_row);
        if constexpr (!kPvRowSum) l[h] = steps::update_row_sum(l[h], alpha[h], steps::tree_sum<kPerRow>(p_row));
      }
      std::uint32_t p_codes[kPGroups][4];
      STile::to_a8(x, p_codes, [](float p0, float p1, float p2, float p3) { return steps::e4m3_code_quad(p0, p1, p2, p3); });

      // Step 8: P V over the block's k32 steps (FP22): two-level, R from +0; in place, onto o rescaled
      // (every k32 step accumulates). Keys within each group of 32 are in the A fragment's order, V^T's
      // rows in the same order (kernels/sm90/fragment.hpp). With RowSum::pv the same k32 steps sum P's
      // rows into R's last 4 values (kOValues + 2 h: row r + 8 h).
      float r_acc[kRValues];
      float(&pv_acc)[kRValues] = first_if<InPlace>(o, r_acc);
      if constexpr (InPlace)
#pragma unroll
        for (int v = 0; v < kOValues; ++v) o[v] = steps::mul_rn(o[v], alpha[o_values[v].row / 8]);
      sm90::wgmma_fence();
#pragma unroll
      for (int g = 0; g < kPGroups; ++g)
        PvWgmma::mma(pv_acc, p_codes[g],
                     sm90::advance(v_descriptor, stage * Shape::kVStageBytes + v_layout.slice_offset(g, PvWgmma::kK)),
                     InPlace || g > 0);
      sm90::wgmma_commit();
      if (Shape::kRefillAtPv) refill(i - 1);
      sm90::wgmma_wait<0>();
      sm90::fence_registers(pv_acc);
      if constexpr (kPvRowSum)  // step 9'
#pragma unroll
        for (int h = 0; h < 2; ++h) l[h] = steps::accumulate_output(l[h], alpha[h], r_acc[kOValues + 2 * h]);
      if constexpr (kBarrierInLoop) sm90::barrier_sync(Shape::kUnitDone + w, 128);
      if (Shape::kReleaseAtBarrier) release(i);
      // Step 9: two-level accumulation.
      if constexpr (!InPlace)
#pragma unroll
        for (int v = 0; v < kOValues; ++v) o[v] = steps::accumulate_output(o[v], alpha[o_values[v].row / 8], r_acc[v]);
    }

    if (!Shape::kReleaseAtBarrier) release(kv_count - 1);
    if constexpr (!kBarrierInLoop) sm90::barrier_sync(Shape::kUnitDone + w, 128);  // the Q tile free
  } else {
    // Ping-pong: turn t is a unit's t-th issue of wgmmas (t = 0 .. kv_count); both units take the
    // turns they both have, unit 0 first: warpgroup w waits at barrier kTurn + w, where the other
    // arrives once it has issued (a unit with no KV block returned above, so its partner takes no
    // turns). Without ping-pong no unit takes turns.
    constexpr bool kPingPong = Shape::kPingPong;
    const int partner_count = kPingPong ? kv_count_of(block * kUnits + (1 - w)) : 0;
    const int common_turns = partner_count > 0 ? min(kv_count, partner_count) + 1 : 0;
    const auto take_turn = [&](int t) {
      if (kPingPong && t < common_turns) sm90::barrier_sync(Shape::kTurn + w, 256);
    };
    const auto pass_turn = [&](int t) {
      if (kPingPong && t < common_turns && !(w == 1 && t == common_turns - 1))
        sm90::barrier_arrive(Shape::kTurn + 1 - w, 256);
    };
    if (kPingPong && w == 1 && common_turns > 0) sm90::barrier_arrive(Shape::kTurn, 256);
    Scores s_acc;
    Values x;
    float alpha[2];
    Codes p_codes;           // block i - 1's, which its P V reads while block i's softmax runs
    float pending_alpha[2];  // block i - 1's alpha, for its step 9
    Outputs r_acc;
    Outputs& pv_acc = InPlace ? o : r_acc;
    const auto keep_codes = [&] {
      make_codes(x, p_codes);
#pragma unroll
      for (int h = 0; h < 2; ++h) pending_alpha[h] = alpha[h];
    };
    // After P V of block i completed: its stage released (each warp's lane 0), step 9.
    const auto finish_pv = [&](int i) {
      sm90::fence_registers(pv_acc);
      release(i);
      accumulate(pending_alpha, r_acc);
    };
    ring.wait_full(0);
    take_turn(0);
    issue_scores(0, s_acc);
    pass_turn(0);
    sm90::wgmma_wait<0>();
    sm90::fence_registers(s_acc);
    softmax(0, k_scales[0], s_acc, x, alpha);
    keep_codes();
    for (int i = 1; i < kv_count; ++i) {
      const float k_scale = k_scales[(long long)i * p.k_groups];
      ring.wait_full(i);
      take_turn(i);
      issue_scores(i, s_acc);
      issue_pv(i - 1, p_codes, pending_alpha, pv_acc);
      pass_turn(i);
      sm90::wgmma_wait<1>();
      sm90::fence_registers(s_acc);
      softmax(i, k_scale, s_acc, x, alpha);
      // The refill (thread 0's branch) between the softmax and the wait for P V: ptxas moves a wgmma
      // wait to the top of its basic block, where it would hold the exponentials back.
      refill(i - 2);
      sm90::wgmma_wait<0>();
      finish_pv(i - 1);
      keep_codes();
    }
    take_turn(kv_count);
    issue_pv(kv_count - 1, p_codes, pending_alpha, pv_acc);
    pass_turn(kv_count);
    sm90::wgmma_wait<0>();
    finish_pv(kv_count - 1);
    sm90::barrier_sync(Shape::kUnitDone + w, 128);  // the Q tile free
  }

  // The end of the rows: l over the 4 lanes of a row, the normalization and the LSE.
  const int lane = threadIdx.x % 32, quad = lane & ~3;
  float inverse_l[2], lse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l0 = __shfl_sync(0xffffffffu, l[h], quad), l1 = __shfl_sync(0xffffffffu, l[h], quad + 1);
    const float l2 = __shfl_sync(0xffffffffu, l[h], quad + 2), l3 = __shfl_sync(0xffffffffu, l[h], quad + 3);
    const float row_sum = kPvRowSum ? l[h] : steps::combine_lanes(l0, l1, l2, l3);
    inverse_l[h] = steps::inverse_row_sum(row_sum);
    lse[h] = steps::log_sum_exp(offset[h], row_sum, p.q_bias[q_head * p.padded_q + q0 + row0 + 8 * h]);
  }
  // The V scales of this thread's channels, all read before the first output is stored (a load
  // after a store cannot move above it, so each would wait for its own round trip).
  const float* v_scales = p.v_scales + kv_head * HeadDim;
  const layout::Offset o_base = sm90::thread_offset<kO>(thread);
  float v_scale[kOValues];
#pragma unroll
  for (int v = 0; v < kOValues; ++v) v_scale[v] = v_scales[o_base.col + o_values[v].col];
  // Smooth V: the V means of the same channels, read beside the scales.
  float v_mean[SmoothV ? kOValues : 1];
  if constexpr (SmoothV)
#pragma unroll
    for (int v = 0; v < kOValues; ++v) v_mean[v] = p.v_mean[kv_head * HeadDim + o_base.col + o_values[v].col];
  const auto output = [&](int v) {
    const float y = steps::normalize_output(o[v], inverse_l[o_values[v].row / 8], v_scale[v]);
    if constexpr (SmoothV) return steps::add_value_mean(y, v_mean[v]);
    else return y;
  };
  static_assert(kO.value_basis[0].col == 1 && kO.value_basis[0].row == 0, "values 2k, 2k + 1 are adjacent columns");
  const auto store_output_pair = [&](Out* at, int v) { store_pair(at, output(v), output(v + 1)); };
  Out* out = static_cast<Out*>(p.out) + b * p.out_strides.batch + hq * p.out_strides.head;
  if (p.out_in_pieces) {
    // Through the unit's Q tile, free once every warp of the unit passed the loop's last barrier
    // (its last Q K'^T completed): per pass h, each warp stages its rows 8 h .. 8 h + 7 of 16 in the
    // K-major layout of 8 rows (the pairs' 4-byte writes conflict-free) and stores them as 16-byte
    // pieces, whole 32-byte sectors, where a pair's store wrote 16 bytes of each of 8 rows.
    constexpr KMajorLayout stage_layout{HeadDim * int(sizeof(Out))};
    constexpr int kStageBytes = KMajorLayout::kCoreRows * stage_layout.k_bytes;  // a warp's 8 rows
    constexpr int kPieces = kStageBytes / KMajorLayout::kCoreRowBytes, kRounds = kPieces / 32;
    static_assert(4 * kStageBytes == Shape::kQBytes && kPieces % 32 == 0, "the 4 warps' stages fill the Q tile");
    static_assert(warp_holds_16_rows<kO>(), "warp j holds rows 16 j + lane / 4 and the rows 8 below them");
    std::uint8_t* stage = q_tile + thread / 32 * kStageBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h > 0) __syncwarp();  // the first pass's pieces read
#pragma unroll
      for (int v = 0; v < kOValues; v += 2)
        if (o_values[v].row / 8 == h) {
          const int byte = (o_base.col + o_values[v].col) * int(sizeof(Out));
          store_output_pair(reinterpret_cast<Out*>(stage + stage_layout.offset(o_base.row % 8, byte)), v);
        }
      __syncwarp();
      uint4 pieces[kRounds];
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int piece = lane + 32 * r;
        pieces[r] = *reinterpret_cast<const uint4*>(
            stage + stage_layout.offset(stage_layout.piece_row(piece), stage_layout.piece_k_byte(piece)));
      }
#pragma unroll
      for (int r = 0; r < kRounds; ++r) {
        const int piece = lane + 32 * r;
        const int query = q0 + unit_row + o_base.row / 8 * 8 + 8 * h + stage_layout.piece_row(piece);
        if (query < p.tokens)
          sm90::store_16(reinterpret_cast<std::uint8_t*>(out + query * p.out_strides.token) +
                             stage_layout.piece_k_byte(piece),
                         pieces[r]);
      }
    }
  } else {
#pragma unroll
    for (int v = 0; v < kOValues; v += 2) {
      const int query = q0 + unit_row + o_base.row + o_values[v].row;
      if (query < p.tokens) store_output_pair(out + query * p.out_strides.token + o_base.col + o_values[v].col, v);
    }
  }
  if (base.col == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int query = q0 + row0 + 8 * h;
      if (query < p.tokens) p.lse[q_head * p.tokens + query] = lse[h];
    }
}

}  // namespace

template <class Out, int HeadDim, bool Causal, steps::Exp2Unit Exp2Unit, bool InPlace, bool SmoothV, Sage2Schedule Schedule,
          steps::RowSum RowSum = steps::RowSum::lanes>
void attention_for(const AttentionParams& p, cudaStream_t stream) {
  using Shape = AttentionShape<HeadDim, Schedule, RowSum>;
  const auto kernel = sage2_attention_kernel<Out, HeadDim, Causal, Exp2Unit, InPlace, SmoothV, Schedule, RowSum>;
  static const bool configured = [&] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Shape::kBytes),
               "cudaFuncSetAttribute (attention shared memory)");
    return true;
  }();
  (void)configured;
  const int units = p.padded_q / 64, blocks = (units + Shape::kUnitsPerBlock - 1) / Shape::kUnitsPerBlock;
  kernel<<<dim3(blocks, p.heads_q, p.batch), Shape::kThreads, Shape::kBytes, stream>>>(p);
  check_launch("sage2_attention_kernel launch");
}

// The instance for a head dimension (64 or 128, Sage2Problem::validate) and the mask.
template <class Out, steps::Exp2Unit Exp2Unit, bool InPlace, bool SmoothV, Sage2Schedule Schedule = Sage2Schedule::serial,
          steps::RowSum RowSum = steps::RowSum::lanes>
void attention_for_shape(const AttentionParams& p, int head_dim, bool causal, cudaStream_t s) {
  if (head_dim == 64)
    causal ? attention_for<Out, 64, true, Exp2Unit, InPlace, SmoothV, Schedule, RowSum>(p, s)
           : attention_for<Out, 64, false, Exp2Unit, InPlace, SmoothV, Schedule, RowSum>(p, s);
  else
    causal ? attention_for<Out, 128, true, Exp2Unit, InPlace, SmoothV, Schedule, RowSum>(p, s)
           : attention_for<Out, 128, false, Exp2Unit, InPlace, SmoothV, Schedule, RowSum>(p, s);
}

}  // namespace lowbit::kernels::attention::detail
