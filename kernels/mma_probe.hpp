// Probe kernels: run one tensor-core instruction per tile on batches of recorded-format tiles.
// Host code only; no CUDA headers needed by callers.
#pragma once

#include <optional>
#include <span>

#include "emulation/layout.hpp"

#include "emulation/mma/families.hpp"
#include "emulation/mma/vectors.hpp"

namespace lowbit::kernels {

struct MmaProbe {
  mma::TileSpec spec;  // instruction name, shape, operand and accumulator formats
  bool warpgroup;      // wgmma (A and B from shared memory) rather than mma.sync (registers)
  // The register fragments the kernel loads and stores through (wgmma: A and B come from
  // shared memory); tests compare them with the emulator's atom for the same instruction.
  std::optional<layout::Fragment> a_fragment, b_fragment;
  layout::Fragment c_fragment;
  void (*run)(std::span<mma::Tile> tiles);  // fills each tile's d from its a, b, c
};

// Every instruction the probes can execute on sm_90a: mma.sync first, then wgmma.
std::span<const MmaProbe> mma_probes();

// A whole K loop per tile through one instruction, as a kernel runs it (mma::gemm models it):
// tiles are m x (steps * k) by (steps * k) x n; mmas_per_flush = 0 chains one accumulator from C,
// f > 0 adds a fresh accumulator into an fp32 one (starting at C) every f MMAs.
struct KLoopProbe {
  mma::TileSpec spec;  // the instruction (its own k)
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
