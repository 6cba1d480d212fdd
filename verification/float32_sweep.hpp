// The exhaustive float32 sweep of the GPU checks (lowbit verify-cvt, verify-exp2): the inputs 0,
// stride, 2 stride, ... (every float32 bit pattern at stride 1), computed by the device a chunk at
// a time and by the host model in blocks on every core, compared input by input. Counts the
// inputs that disagree and keeps the `keep` smallest of them with both values.
//
// device(first, stride, out): out[i] is the device's result for input first + i * stride.
// host(inputs, out): the model's results for a block of inputs (float32 values), in order.
// agree(input, device_value, host_value): whether the two count as equal.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "numerics/parallel.hpp"

namespace lowbit::verification {

template <class DeviceValue, class HostValue>
struct SweepMismatch {
  std::uint32_t input;
  DeviceValue device;
  HostValue host;
  friend bool operator<(const SweepMismatch& a, const SweepMismatch& b) { return a.input < b.input; }
};

template <class DeviceValue, class HostValue>
struct SweepResult {
  std::uint64_t inputs = 0, mismatches = 0;
  std::vector<SweepMismatch<DeviceValue, HostValue>> first;  // the smallest mismatching inputs, in order
};

struct SweepSettings {
  std::uint32_t stride = 1;
  std::size_t chunk = 0;  // inputs per device call
  std::size_t block = 0;  // inputs per host work item
  std::size_t keep = 0;   // mismatches kept
};

template <class DeviceValue, class HostValue, class Device, class Host, class Agree>
SweepResult<DeviceValue, HostValue> sweep_float32(const SweepSettings& s, Device&& device, Host&& host, Agree&& agree) {
  using Mismatch = SweepMismatch<DeviceValue, HostValue>;
  const std::uint64_t total = ((std::uint64_t{1} << 32) + s.stride - 1) / s.stride;
  std::vector<DeviceValue> on_device(std::size_t(std::min<std::uint64_t>(s.chunk, total)));
  std::vector<std::uint64_t> counts(worker_count(), 0);
  std::vector<std::vector<Mismatch>> kept(worker_count());
  for (std::uint64_t done = 0; done < total; done += on_device.size()) {
    const std::size_t n = std::size_t(std::min<std::uint64_t>(on_device.size(), total - done));
    const auto first = std::uint32_t(done * s.stride);
    device(first, s.stride, std::span(on_device).first(n));
    parallel_for((n + s.block - 1) / s.block, [&](std::size_t block, unsigned worker) {
      thread_local std::vector<float> in;
      thread_local std::vector<HostValue> out;
      in.resize(s.block);
      out.resize(s.block);
      const std::size_t begin = block * s.block, count = std::min(s.block, n - begin);
      for (std::size_t i = 0; i < count; ++i) in[i] = std::bit_cast<float>(std::uint32_t(first + (begin + i) * s.stride));
      host(std::span<const float>(in).first(count), std::span(out).first(count));
      for (std::size_t i = 0; i < count; ++i)
        if (!agree(in[i], on_device[begin + i], out[i])) {
          ++counts[worker];
          const Mismatch m{std::bit_cast<std::uint32_t>(in[i]), on_device[begin + i], out[i]};
          auto& mine = kept[worker];
          if (mine.size() < s.keep) {
            mine.push_back(m);
          } else if (!mine.empty()) {  // full: the smallest inputs stay, whatever order they come in
            const auto largest = std::max_element(mine.begin(), mine.end());
            if (m < *largest) *largest = m;
          }
        }
    });
  }
  SweepResult<DeviceValue, HostValue> r;
  r.inputs = total;
  for (auto n : counts) r.mismatches += n;
  for (auto& k : kept) r.first.insert(r.first.end(), k.begin(), k.end());
  std::sort(r.first.begin(), r.first.end());
  if (r.first.size() > s.keep) r.first.resize(s.keep);
  return r;
}

}  // namespace lowbit::verification
