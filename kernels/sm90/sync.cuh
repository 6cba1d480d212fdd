// Synchronization within a thread block (sm_90a): named barriers and mbarriers.
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
// An arrival at named barrier `id` that does not wait: the threads that sync there go on once
// `threads` threads arrived (the producer's half of a turn between warpgroups).
__device__ inline void barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
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
// One arrival, or `count` at once (release: this thread's prior shared-memory writes are visible to
// the waiters). Nothing is returned, so the thread does not wait for the arrival to land.
__device__ inline void mbarrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier)) : "memory");
}
__device__ inline void mbarrier_arrive(std::uint64_t* barrier, int count) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(count)
               : "memory");
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

}  // namespace lowbit::kernels::sm90
