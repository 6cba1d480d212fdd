// Synchronization within a thread block (sm_90a): named barriers, mbarriers, a shared counter.
//
// Named barriers (bar.sync with a thread count, PTX "barrier"): the threads of one warpgroup meet;
// each one's prior shared-memory writes are visible to the others after it. Data written through
// the generic proxy (st.shared, cp.async) that wgmma reads needs fence_async_shared() in each
// writing thread before the barrier (copy.cuh).
//
// mbarriers (a 64-bit word in shared memory, PTX "mbarrier"): a phase completes once its expected
// arrivals arrived and its expected transaction bytes (bulk copies, copy.cuh) landed; waiters poll
// the phase's parity (0, 1, 0, ... for phases 0, 1, 2, ...).
#pragma once

#include <cstdint>

namespace lowbit::kernels::sm90 {

__device__ inline void barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// The shared-memory address (state space .shared) of a generic pointer into shared memory.
__device__ inline std::uint32_t shared_address(const void* smem) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
}
// Before any other thread uses it (then a __syncthreads): `arrivals` arrivals complete a phase.
__device__ inline void mbarrier_init(std::uint64_t* barrier, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)), "r"(arrivals) : "memory");
}
// The current phase also waits for `bytes` more transaction bytes.
__device__ inline void mbarrier_expect_bytes(std::uint64_t* barrier, int bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}
// One arrival (release: this thread's prior shared-memory writes are visible to the waiters).
__device__ inline void mbarrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier)) : "memory");
}
// Until the phase of parity `parity` completed (acquire).
__device__ inline void mbarrier_wait(std::uint64_t* barrier, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait;\n"
      "}\n" ::"r"(shared_address(barrier)),
      "r"(parity)
      : "memory");
}

// Adds 1 to a shared-memory counter and returns its value before; relaxed: it orders nothing else.
// The attention kernel counts with it the units done reading a stage through wgmma: those reads
// are complete when each reader's wgmma wait returns, before its count, and the last counter issues
// the refill only after it has seen every other count, so the refill cannot overtake a read. (The
// PTX memory model would state that order with an acquire-release count, as CUTLASS's pipelines
// arrive with release semantics; here that fence cost the counting thread up to 1% of the kernel's
// time, run42 of results/attention-gpu/runs/variants/2026-11-27/.)
__device__ inline unsigned shared_count_add(unsigned* counter) {
  unsigned before;
  asm volatile("atom.relaxed.cta.shared::cta.add.u32 %0, [%1], 1;" : "=r"(before) : "r"(shared_address(counter)) : "memory");
  return before;
}

}  // namespace lowbit::kernels::sm90
