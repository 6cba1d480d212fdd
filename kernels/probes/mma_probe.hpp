// Probe kernels: run one tensor-core instruction per tile on batches of tiles held as plain code
// arrays (verification/tile_codes.hpp makes them from vector-file tiles). Host code only; no CUDA
// headers needed by callers.
#pragma once

#include <cstdint>
#include <span>

#include "emulation/mma/atom.hpp"

namespace lowbit::kernels {

// `count` tiles of one instruction in host memory, tile after tile, each matrix row-major in the
// math orientation: A m x depth and B depth x n element codes (one per 16-bit slot), C and D
// m x n accumulator codes (f32 and s32 bit patterns; f16 codes in the low half). depth is the
// instruction's k (or a K loop's K).
struct TileBatch {
  int count = 0;
  std::span<const std::uint16_t> a, b;
  std::span<const std::uint32_t> c;
  std::span<std::uint32_t> d;  // written by the probe
};

// The kernels load and store registers through the atom's fragments (mma.sync: A, B, C; wgmma:
// C only, A and B come from shared memory).
struct MmaProbe {
  mma::Atom atom;
  // Fills tiles.d from a, b, c. Throws std::invalid_argument when the spans do not hold `count`
  // tiles of the instruction, std::runtime_error on a CUDA error or a nondeterministic probe.
  void (*run)(const TileBatch& tiles);
};

// Every instruction the probes can execute on sm_90a: mma.sync first, then wgmma.
std::span<const MmaProbe> mma_probes();

// A whole K loop per tile through one instruction, as a kernel runs it (mma::gemm models it):
// tiles are m x (steps * k) by (steps * k) x n; mmas_per_flush = 0 chains one accumulator from C,
// f > 0 adds a fresh accumulator into an fp32 one (starting at C) every f MMAs.
struct KLoopProbe {
  mma::Atom atom;  // the instruction (its own k)
  int steps = 0;
  int mmas_per_flush = 0;
  void (*run)(const TileBatch& tiles) = nullptr;  // as MmaProbe::run, with depth = steps * k
};

// The K-loop probes: wgmma m64n8 f16, bf16, e4m3, e5m2 -> f32, each with every flush interval.
std::span<const KLoopProbe> wgmma_kloop_probes();

namespace detail {
std::span<const MmaProbe> mma_sync_probes();
std::span<const MmaProbe> wgmma_probes();
}  // namespace detail

}  // namespace lowbit::kernels
