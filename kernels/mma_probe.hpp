// Probe kernels: run one tensor-core instruction per tile on batches of recorded-format tiles.
// Host code only; no CUDA headers needed by callers.
#pragma once

#include <span>

#include "emulation/mma/atom.hpp"
#include "emulation/mma/vectors.hpp"

namespace lowbit::kernels {

// The kernels load and store registers through the atom's fragments (mma.sync: A, B, C; wgmma:
// C only, A and B come from shared memory).
struct MmaProbe {
  mma::Atom atom;
  void (*run)(std::span<mma::Tile> tiles);  // fills each tile's d from its a, b, c
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
  void (*run)(std::span<mma::Tile> tiles) = nullptr;  // fills each tile's d from its a, b, c
};

// The K-loop probes: wgmma m64n8 f16, bf16, e4m3, e5m2 -> f32, each with every flush interval.
std::span<const KLoopProbe> wgmma_kloop_probes();

namespace detail {
std::span<const MmaProbe> mma_sync_probes();
std::span<const MmaProbe> wgmma_probes();
}  // namespace detail

}  // namespace lowbit::kernels
