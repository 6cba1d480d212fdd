// flash2_split.hpp: PyTorch's split-KV choice, its split passes and its combine kernel.
#include "emulation/attention/flash2_split.hpp"

#include <algorithm>
#include <bit>
#include <span>
#include <cmath>
#include <cstdint>
#include <vector>

#include "emulation/attention/kernel_steps.hpp"
#include "emulation/convert.hpp"
#include "emulation/sfu/ex2.hpp"

namespace lowbit::attention::flash2 {
namespace {

using steps::add_rn;
using steps::fma_rn;
using steps::mul_rn;
using steps::sub_rn;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// flash_api.cpp's num_splits_heuristic, in its own arithmetic (float efficiencies, a double threshold).
int num_splits_heuristic(int batch_nheads_mblocks, int num_sms, int num_n_blocks, int max_splits) {
  if (float(batch_nheads_mblocks) >= 0.8f * float(num_sms)) return 1;
  max_splits = std::min({max_splits, num_sms, num_n_blocks});
  const auto eligible = [&](int s) { return s == 1 || ceil_div(num_n_blocks, s) != ceil_div(num_n_blocks, s - 1); };
  float max_efficiency = 0.0f;
  std::vector<float> efficiency;
  for (int s = 1; s <= max_splits; ++s) {
    if (!eligible(s)) {
      efficiency.push_back(0.0f);
      continue;
    }
    const float waves = float(batch_nheads_mblocks * s) / float(num_sms);
    const float e = waves / std::ceil(waves);
    max_efficiency = std::max(max_efficiency, e);
    efficiency.push_back(e);
  }
  for (int s = 1; s <= max_splits; ++s)
    if (eligible(s) && double(efficiency[std::size_t(s - 1)]) >= 0.85 * double(max_efficiency)) return s;
  return 1;
}

int kv_block(int head_dim) { return head_dim <= 64 ? 256 : head_dim <= 128 ? 128 : 64; }

}  // namespace

float cuda_expf(float x) {
  // t = sat(x / (126 ln 2) + 1/2); j = 2^23 + 2^22 + 1 + floor(252 t) (FFMA.RM, exact in double then
  // floored: the float grid is 1 there); 2^(j - 12583039) times ex2 of the reduced argument.
  const float t = std::clamp(fma_rn(x, 0x1.77313ap-8f, 0.5f), 0.0f, 1.0f);
  const float tt = t != t ? 0.0f : t;  // FFMA.SAT takes NaN to +0
  const float j = float(std::floor(double(tt) * 252.0 + 12582913.0));
  const float r = sub_rn(j, 12583039.0f);
  float f = fma_rn(x, 1.4426950216293334961f, -r);
  f = fma_rn(x, 1.925963033500011079e-08f, f);
  const float scale = std::bit_cast<float>(std::bit_cast<std::uint32_t>(j) << 23);
  return mul_rn(scale, sfu::sm90_ex2(f));
}

float cuda_logf(float x) {
  const bool normal = !(x < 0x1p-126f);  // FSETP.GEU: NaN counts as normal
  const float a = normal ? x : mul_rn(x, 8388608.0f);
  const float e0 = normal ? 0.0f : -23.0f;
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(a);
  const std::uint32_t i = (bits - 0x3f2aaaabu) & 0xff800000u;
  const float m = sub_rn(std::bit_cast<float>(bits - i), 1.0f);
  const float ef = fma_rn(float(std::int32_t(i)), 1.1920928955078125e-07f, e0);
  float p = fma_rn(m, -0x1.0aa04ep-3f, 0.14084610342979431152f);
  for (float c : {-0.12148627638816833496f, 0.13980610668659210205f, -0.16684235632419586182f, 0.20012299716472625732f,
                  -0.24999669194221496582f, 0.33333182334899902344f, -0.5f})
    p = fma_rn(m, p, c);
  p = mul_rn(m, p);
  float r = fma_rn(m, p, m);
  r = fma_rn(ef, 0.69314718246459960938f, r);
  if (bits >= 0x7f800000u) r = fma_rn(a, __builtin_huge_valf(), __builtin_huge_valf());  // inf, NaN, negative
  return a == 0.0f ? -__builtin_huge_valf() : r;
}

int split_count(int batch, int heads, int kv_heads, int tokens, int keys, int head_dim, int sms) {
  if (sms <= 0) return 1;
  if (tokens == 1 && heads > kv_heads) {  // one query: the heads of a group become its rows (seqlenq_ngroups_swapped)
    tokens = heads / kv_heads;
    heads = kv_heads;
  }
  return num_splits_heuristic(batch * heads * ceil_div(tokens, 64), 2 * sms, ceil_div(keys, kv_block(head_dim)), 128);
}

ForwardResult split_forward(const Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                            const ForwardOptions& options, int splits) {
  Pipeline pass = pipeline;
  pass.tiling = {64, kv_block(q.dim), 4, KvOrder::descending, 0};
  const int blocks = ceil_div(k.tokens, pass.tiling.block_kv), per_split = ceil_div(blocks, splits);
  std::vector<ForwardResult> parts;
  for (int s = 0; s < splits; ++s) {
    ForwardOptions o = options;
    o.keep_operands = options.keep_operands && s == 0;
    o.kv_block_begin = s * per_split;
    o.kv_block_end = std::min(blocks, (s + 1) * per_split);
    parts.push_back(forward(pass, q, k, v, o));
  }
  ForwardResult result = parts.front();
  // The combine kernel's layout: kBlockM rows a block, R threads a row, each holding L splits.
  int log_max_splits = 1;
  while ((1 << log_max_splits) < splits) ++log_max_splits;
  const int max_splits = 1 << log_max_splits, block_m = q.dim % 128 == 0 ? 4 : q.dim % 64 == 0 ? 8 : 16;
  const int threads_per_row = std::min(128 / block_m, max_splits), per_thread = (max_splits * block_m + 127) / 128;
  const std::size_t rows = result.lse.size(), dv = std::size_t(result.value_dim);
  std::vector<float> lse(static_cast<std::size_t>(threads_per_row * per_thread));
  std::vector<float> lane(static_cast<std::size_t>(threads_per_row)), scale(static_cast<std::size_t>(splits));
  for (std::size_t row = 0; row < rows; ++row) {
    for (std::size_t slot = 0; slot < lse.size(); ++slot)
      lse[slot] = int(slot) < splits ? parts[slot].lse[row] : -__builtin_huge_valf();
    float mx = *std::max_element(lse.begin(), lse.end());
    if (mx == -__builtin_huge_valf()) mx = 0.0f;
    for (int r = 0; r < threads_per_row; ++r) {
      float sum = cuda_expf(sub_rn(lse[std::size_t(r)], mx));
      for (int l = 1; l < per_thread; ++l) sum = add_rn(sum, cuda_expf(sub_rn(lse[std::size_t(l * threads_per_row + r)], mx)));
      lane[std::size_t(r)] = sum;
    }
    for (int offset = threads_per_row / 2; offset > 0; offset /= 2) {
      std::vector<float> next(lane.size());
      for (int r = 0; r < threads_per_row; ++r) next[std::size_t(r)] = add_rn(lane[std::size_t(r)], lane[std::size_t(r ^ offset)]);
      lane = next;
    }
    const float sum = lane[0];
    const float logsum = sum == 0.0f || sum != sum ? __builtin_huge_valf() : add_rn(cuda_logf(sum), mx);
    for (int s = 0; s < splits; ++s) scale[std::size_t(s)] = cuda_expf(sub_rn(parts[std::size_t(s)].lse[row], logsum));
    for (std::size_t c = 0; c < dv; ++c) {
      float out = 0.0f;
      for (int s = 0; s < splits; ++s) out = fma_rn(scale[std::size_t(s)], parts[std::size_t(s)].output[row * dv + c], out);
      result.output[row * dv + c] = out;
    }
    result.lse[row] = logsum;
  }
  std::uint64_t macs = 0;
  for (const auto& p : parts) macs += p.macs;
  result.macs = macs;
  encode(pipeline.output, std::span<const float>(result.output), std::span<Code>(result.output_codes),
         {Rounding::nearest_even, Overflow::inf});
  return result;
}

}  // namespace lowbit::attention::flash2
