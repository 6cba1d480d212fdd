// A minimal parallel loop over all cores, for exhaustive comparisons and tile verification.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace lowbit {

// Threads parallel_for uses: the machine's cores, at least one.
inline unsigned worker_count() { return std::max(1u, std::thread::hardware_concurrency()); }

// Calls body(item, worker) for every item in [0, count), worker in [0, workers) (workers = 0:
// worker_count()). Items are handed out in increasing order, so each worker sees its items in
// increasing order. The first exception a body throws is rethrown after every worker has stopped.
template <class Body>
void parallel_for(std::size_t count, unsigned workers, Body&& body) {
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&](unsigned worker) {
    try {
      for (std::size_t item; (item = next.fetch_add(1)) < count;) body(item, worker);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = count;
    }
  };
  const unsigned used = unsigned(std::min<std::size_t>(workers ? workers : worker_count(), std::max<std::size_t>(count, 1)));
  std::vector<std::thread> threads;
  for (unsigned w = 1; w < used; ++w) threads.emplace_back(work, w);
  work(0);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

// The same on every core.
template <class Body>
void parallel_for(std::size_t count, Body&& body) {
  parallel_for(count, 0u, std::forward<Body>(body));
}

}  // namespace lowbit
