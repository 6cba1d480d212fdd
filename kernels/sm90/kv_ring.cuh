// A ring of shared-memory stages through which the K and V^T tiles of consecutive KV blocks reach
// the warpgroups of a thread block (sm_90a): stage stage_of(i) holds KV block i, then block
// i + Stages, ... Each stage has two mbarriers (sync.cuh):
//   full:  a phase completes when the block's bytes landed: one arrival, the filling thread's, and
//          the bytes of its two bulk copies (copy.cuh), which it announces first;
//   empty: a phase completes when every reader released the stage: `releases` arrivals.
// Block i is the stage's (i / Stages)-th fill, so both barriers' phase of block i has parity
// parity_of(i). Who fills a stage and when, and who releases it, is the caller's; so are the fill
// itself (expect the bytes, the two bulk copies, the arrival) and the wait for an empty phase,
// which the attention kernel writes out (as functions of the ring they compiled to other
// instructions).
#pragma once

#include <cstdint>

#include "kernels/sm90/sync.cuh"

namespace lowbit::kernels::sm90 {

template <int Stages, int KBytes, int VBytes>
struct KvStageRing {
  static constexpr int kStages = Stages, kKBytes = KBytes, kVBytes = VBytes;
  std::uint8_t* k_tiles;  // Stages K tiles, KBytes apart
  std::uint8_t* v_tiles;  // Stages V^T tiles, VBytes apart
  std::uint64_t* full;    // Stages mbarriers each, in shared memory
  std::uint64_t* empty;

  // The stage of KV block i (i >= 0; unsigned, so the remainder is a mask), and the parity of the
  // phase of that stage's mbarriers that block i is.
  static constexpr int stage_of(int i) { return int(unsigned(i) % Stages); }
  static constexpr std::uint32_t parity_of(int i) { return unsigned(i) / Stages % 2; }

  // By one thread, before any other uses the ring (a barrier follows): `releases` arrivals empty a stage.
  __device__ void init(int releases) const {
    for (int s = 0; s < Stages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], releases);
    }
  }
  // Until KV block i's bytes landed.
  __device__ void wait_full(int i) const { mbarrier_wait(&full[stage_of(i)], parity_of(i)); }
  // One release of KV block i's stage, or `count` at once (for readers that do not read it).
  __device__ void release(int i) const { mbarrier_arrive(&empty[stage_of(i)]); }
  __device__ void release(int i, int count) const { mbarrier_arrive(&empty[stage_of(i)], count); }
};

}  // namespace lowbit::kernels::sm90
