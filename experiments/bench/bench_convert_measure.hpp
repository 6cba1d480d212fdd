// bench_convert's measuring tools (bench_convert.cpp): timings in interleaved rounds (thread CPU
// time and wall time), instructions retired from the CPU's counters, and the memory probe that moves
// the fast path's bytes without its arithmetic.
#pragma once

#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <immintrin.h>

#include "emulation/convert_fast.hpp"

namespace lowbit::bench_convert {

struct Timing {
  double cpu = 0, wall = 0;  // medians
};

// CPU time of this thread: the machine may be shared, and time spent descheduled is not the
// conversion's. Wall time is kept beside it.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}
inline double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Times each call in rounds (one run of every call per round, after a warm-up run of each), so
// that noise hits every call alike; returns the medians.
inline std::vector<Timing> time_interleaved(const std::vector<std::function<void()>>& calls, int rounds) {
  for (const auto& call : calls) call();  // page faults, caches, the fast path's plan
  std::vector<std::vector<double>> cpu(calls.size()), wall(calls.size());
  for (int r = 0; r < rounds; ++r)
    for (std::size_t k = 0; k < calls.size(); ++k) {
      const double cpu_start = thread_cpu_seconds(), wall_start = wall_seconds();
      calls[k]();
      cpu[k].push_back(thread_cpu_seconds() - cpu_start);
      wall[k].push_back(wall_seconds() - wall_start);
    }
  std::vector<Timing> medians;
  for (std::size_t k = 0; k < calls.size(); ++k) medians.push_back({median(cpu[k]), median(wall[k])});
  return medians;
}

// Instructions retired by this thread in user space during `run`, from the CPU's counters; or
// why they cannot be read (virtual machines often have none; perf_event_paranoid may forbid).
struct InstructionCount {
  std::optional<double> count;
  std::string why_not;
};
inline InstructionCount count_instructions(const std::function<void()>& run) {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_HARDWARE;
  attr.size = sizeof attr;
  attr.config = PERF_COUNT_HW_INSTRUCTIONS;
  attr.disabled = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  const int fd = int(syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
  if (fd < 0) return {std::nullopt, std::string("perf_event_open: ") + std::strerror(errno)};
  ioctl(fd, PERF_EVENT_IOC_RESET, 0);
  ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
  run();
  ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
  long long count = 0;
  const bool read_ok = read(fd, &count, sizeof count) == sizeof count;
  close(fd);
  if (!read_ok) return {std::nullopt, "reading the counter failed"};
  return {double(count), ""};
}

// The memory probe: a loop that reads the inputs and writes as many output bytes, with no
// arithmetic to speak of (the top bits of each input), compiled for AVX2, prefetching its input
// as the fast path does (fastconv::kPrefetchBytes ahead, every line). With streaming stores
// (as the fast path takes for large outputs) it writes each 4 KiB of output into a block that
// stays in L1 and copies the block out with streaming stores, whole 64-byte lines from the
// output's first line boundary on.
inline std::uint32_t top_bits(float x, int bits) { return std::bit_cast<std::uint32_t>(x) >> (32 - bits); }
inline std::uint32_t top_bits(Bf16Bits x, int bits) { return std::uint32_t(x.bits) >> (16 - bits); }
// Inputs [first, first + count) prefetched line by line, then `move` on them.
template <class In, class Move>
[[gnu::target("arch=x86-64-v3")]] inline void prefetched(const In* in, std::size_t n, Move move) {
  constexpr std::size_t kLine = 64 / sizeof(In);  // inputs per cache line
  std::size_t i = 0;
  for (; i + kLine <= n; i += kLine) {
    _mm_prefetch(reinterpret_cast<const char*>(in + i) + fastconv::kPrefetchBytes, _MM_HINT_T0);
    move(i, kLine);
  }
  move(i, n - i);
}
template <class In, class Out>
[[gnu::target("arch=x86-64-v3")]] void move_bytes(const In* in, Out* out, std::size_t n) {
  prefetched(in, n, [&](std::size_t first, std::size_t count) {
    for (std::size_t i = first; i < first + count; ++i) out[i] = Out(top_bits(in[i], 8 * sizeof(Out)));
  });
}
template <class In>
[[gnu::target("arch=x86-64-v3")]] void move_bytes_packed(const In* in, std::uint8_t* out, std::size_t n) {
  prefetched(in, n / 2 * 2, [&](std::size_t first, std::size_t count) {
    for (std::size_t j = first / 2; j < (first + count) / 2; ++j)
      out[j] = std::uint8_t(top_bits(in[2 * j], 4) | (top_bits(in[2 * j + 1], 4) << 4));
  });
}
// `bytes` (a multiple of 64) from `block` to `out` (64-byte aligned) with streaming stores.
[[gnu::target("arch=x86-64-v3")]] inline void stream_out(const std::uint8_t* block, std::uint8_t* out, std::size_t bytes) {
  for (std::size_t j = 0; j < bytes; j += 32)
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out + j), _mm256_load_si256(reinterpret_cast<const __m256i*>(block + j)));
}
// The probe of n inputs into out (n / 2 bytes when packed, else n elements of Out).
template <class In, class Out>
void move_bytes(const In* in, Out* out, std::size_t n, bool packed, bool streaming) {
  const auto move = [&](std::size_t first, std::size_t count, Out* to) {
    if constexpr (sizeof(Out) == 1)
      if (packed) return move_bytes_packed(in + first, to, count);
    move_bytes(in + first, to, count);
  };
  const std::size_t inputs_per_byte = packed ? 2 : 1;
  std::size_t i = 0;
  if (streaming) {
    constexpr std::size_t kBlockBytes = 4096;
    alignas(64) std::uint8_t block[kBlockBytes];
    const std::size_t inputs_per_block = kBlockBytes / sizeof(Out) * inputs_per_byte;
    i = std::min(n, (64 - reinterpret_cast<std::uintptr_t>(out) % 64) % 64 / sizeof(Out) * inputs_per_byte);
    move(0, i, out);
    for (; i + inputs_per_block <= n; i += inputs_per_block) {
      move(i, inputs_per_block, reinterpret_cast<Out*>(block));
      stream_out(block, reinterpret_cast<std::uint8_t*>(out + i / inputs_per_byte), kBlockBytes);
    }
    _mm_sfence();
  }
  move(i, n - i, out + i / inputs_per_byte);
}

}  // namespace lowbit::bench_convert
