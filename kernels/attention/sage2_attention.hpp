// SageAttention2-8b on Hopper (sm_90a): the host API of the quantization and attention kernels.
// Host code only; callers need no CUDA headers (device pointers are void*, streams an integer).
//
// What the kernels compute is the recipe of emulation/attention/sage2_hopper.hpp, step for step
// through emulation/attention/kernel_steps.hpp, so the emulated `sage2-8b` pipeline (with
// Sage2Problem::exp2 = sm90_ex2: `sage2-8b-ex2`) predicts every bit of the output and of the
// log-sum-exp:
//   1. sage2_quantize: fp16/bf16 Q, K, V -> K mean (chunked double sums), per-thread INT8 Q (its
//      scale folded with log2(e)/sqrt(d)) and K' = K - mean, per-channel E4M3 V stored as V^T.
//   2. sage2_attention_quantized: S = Q K'^T (wgmma s8), online softmax, P in E4M3 at 448,
//      P V (wgmma e4m3, FP22) flushed into fp32 every KV block; out in the input's format, LSE.
// sage2_attention runs both. Two stages beyond the presets' are the problem's choices
// (Sage2Problem::in_place, smooth_v): o accumulated in place in the FP22 accumulator, and V
// smoothed by its mean; the GPU's quantization does not smooth V, so such buffers come from the
// host (sage2_attention_host_quantized; sage2_operands.hpp lays out the emulator's).
//
// Quantized buffers (device, all contiguous; padded_q / padded_kv: tokens rounded up to the
// recipe's block_q / block_kv, padding rows hold zero codes):
//   q_codes  int8  [batch][heads_q][padded_q][head_dim]
//   q_scales f32   [batch][heads_q][padded_q / block_q][q_groups]    (fold_softmax_scale applied)
//   q_bias   f32   [batch][heads_q][padded_q]                         (steps::smoothing_bias, for the LSE)
//   k_codes  int8  [batch][heads_kv][padded_kv / block_kv] tiles of block_kv x head_dim (K' = K - mean)
//   k_scales f32   [batch][heads_kv][padded_kv / block_kv][k_groups]
//   k_mean   f32   [batch][heads_kv][head_dim]
//   v_codes  e4m3  [batch][heads_kv][padded_kv / block_kv] tiles of head_dim x block_kv (V^T; within every 32 keys,
//                  position p holds key key_of_column[p], kernels/sm90/fragment.hpp)
//   v_scales f32   [batch][heads_kv][head_dim]
//   v_mean   f32   [batch][heads_kv][head_dim]                        (smooth_v only: V's mean over the keys)
// A K or V^T tile holds its bytes in the order of the attention kernel's shared memory
// (sm90::KMajorLayout: k_code_offset, v_code_offset), so the kernel copies it as contiguous bytes:
// whole 128-byte lines, half the L2 requests of row-major tiles.
// Groups are numbered as quant::grouping::per_thread numbers them (thread_groups.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "emulation/attention/sage2_hopper.hpp"
#include "kernels/sm90/smem_layout.hpp"

namespace lowbit::kernels::attention {

enum class DType : std::uint8_t { fp16, bf16 };
// The memory order of Q, K, V and the output: [batch, heads, tokens, dim] (PyTorch SDPA's) or
// [batch, tokens, heads, dim] (flash-attn's). Both contiguous in dim.
enum class Layout : std::uint8_t { bhnd, bnhd };
// How a unit of the attention kernel (one warpgroup's 64 query rows) orders its work; the bits are
// the same either way (every fp32 step is the contract's, in its order):
//   serial: every wgmma waited for before the steps that follow it; three units a block share the
//     SM at d = 128, four one-unit blocks at d = 64, and keep the tensor cores busy between them;
//   overlapped: Q K^T of KV block i is issued together with P V of block i - 1, and block i's
//     softmax runs while P V is on the tensor cores (FA3's intra-warpgroup overlap); the two units
//     of a block take turns at issuing their wgmmas (ping-pong).
enum class Sage2Schedule : std::uint8_t { serial, overlapped };
const char* schedule_name(Sage2Schedule schedule);
std::optional<Sage2Schedule> parse_schedule(std::string_view name);  // "serial", "overlapped"

struct Sage2Problem {
  int batch = 1;
  int heads_q = 1;
  int heads_kv = 1;  // GQA: Q head h reads KV head h / (heads_q / heads_kv)
  int tokens = 1;    // N, the same for Q and K/V
  int head_dim = 128;
  bool causal = false;  // key j visible to query i when j <= i
  DType dtype = DType::fp16;
  Layout layout = Layout::bhnd;
  // The softmax's exp2: the contract's polynomial (emulated preset sage2-8b) or MUFU.EX2 (sage2-8b-ex2).
  lowbit::attention::steps::Exp2Unit exp2 = lowbit::attention::steps::Exp2Unit::polynomial;
  // The emulated pipeline's accumulation=in-place: o = mul_rn(o, alpha) and P V accumulated onto it,
  // in the FP22 accumulator across the KV blocks (else two-level: R from +0 per block, flushed into o).
  bool in_place = false;
  // smooth-v=on: V quantized minus its mean over the keys (v_codes, v_scales), the output takes the
  // mean (v_mean) back after normalization.
  bool smooth_v = false;
  // The attention kernel's schedule (the presets' instances only: not with in_place or smooth_v).
  Sage2Schedule schedule = Sage2Schedule::serial;
  // The emulated pipeline's row-sum (steps::RowSum): the 4 lanes' fp32 trees of p, or pv: the P V
  // wgmma's sum of P's codes over a tile of ones (one m64n8 wgmma beside each P V k step), flushed
  // into l as o; built for the serial schedule's two-level instances with the exp2 sm90-ex2.
  lowbit::attention::steps::RowSum row_sum = lowbit::attention::steps::RowSum::lanes;

  // Why the kernels cannot run this problem (head dim, head counts, sizes, a stage choice without
  // an instance), or nothing.
  std::optional<std::string> validate() const;
  lowbit::attention::Sage2HopperRecipe recipe() const { return lowbit::attention::sage2_8b_hopper(head_dim, exp2); }

  int padded_q() const;
  int padded_kv() const;
  int q_groups() const;   // Q groups per block_q rows
  int k_groups() const;   // K groups per block_kv rows
  int key_chunks() const;  // K-mean chunks of key_mean_chunk tokens
  // Element offset of (b, h, t, 0) in Q/K/V/out (heads = heads_q or heads_kv).
  std::size_t element_offset(int b, int h, int t, int heads) const;
  std::size_t elements(int heads) const { return std::size_t(batch) * heads * tokens * head_dim; }
};

// Element counts of the quantized buffers (the layout in the header comment).
struct QuantizedSizes {
  std::size_t q_codes, q_scales, q_bias, k_codes, k_scales, k_mean, v_codes, v_scales, v_mean;  // v_mean: 0 without smooth_v
  std::size_t k_chunk_sums, v_chunk_amax;  // workspace of the K-mean and V-amax statistics
  static QuantizedSizes of(const Sage2Problem& p);
};

// Device pointers of the quantized buffers and the statistics workspace. The code buffers start on
// 16-byte boundaries (cudaMalloc's do), the others on their element's size.
struct QuantizedDevice {
  std::int8_t* q_codes = nullptr;
  float* q_scales = nullptr;
  float* q_bias = nullptr;
  std::int8_t* k_codes = nullptr;
  float* k_scales = nullptr;
  float* k_mean = nullptr;
  std::uint8_t* v_codes = nullptr;
  float* v_scales = nullptr;
  float* v_mean = nullptr;  // read with smooth_v only; no GPU kernel writes it
  double* k_chunk_sums = nullptr;
  float* v_chunk_amax = nullptr;
};

// Device buffers for a problem (v_mean with smooth_v), freed with the object.
class Sage2Workspace {
 public:
  explicit Sage2Workspace(const Sage2Problem& problem);
  ~Sage2Workspace();
  Sage2Workspace(const Sage2Workspace&) = delete;
  Sage2Workspace& operator=(const Sage2Workspace&) = delete;
  const QuantizedDevice& buffers() const { return buffers_; }
  const QuantizedSizes& sizes() const { return sizes_; }

 private:
  QuantizedSizes sizes_{};
  QuantizedDevice buffers_;
};

// Throws std::invalid_argument naming the problem when validate() fails, naming the pointer when one
// is null or misaligned (checked before the GPU is touched), or when the current device is not a
// Hopper GPU (sm_90); std::runtime_error naming the CUDA call when one fails. `stream` is a
// cudaStream_t (0: the default stream). Asynchronous: errors of the kernels themselves surface at
// the next synchronizing CUDA call. The inputs must be finite (the device functions do not scan
// them; sage2_attention_host refuses NaN/Inf, naming the tensor). sage2_quantize refuses smooth_v.
void sage2_quantize(const Sage2Problem& problem, const void* q, const void* k, const void* v,
                    const QuantizedDevice& quantized, std::uintptr_t stream = 0);
// out: the problem's layout and dtype, heads_q heads; lse: f32 [batch][heads_q][tokens] (natural log).
void sage2_attention_quantized(const Sage2Problem& problem, const QuantizedDevice& quantized, void* out, float* lse,
                               std::uintptr_t stream = 0);
void sage2_attention(const Sage2Problem& problem, const void* q, const void* k, const void* v,
                     const Sage2Workspace& workspace, void* out, float* lse, std::uintptr_t stream = 0);

// The host-tensor convenience: fp16/bf16 codes in (the problem's layout), everything back.
struct Sage2HostQuantized {
  std::vector<std::int8_t> q_codes, k_codes;
  std::vector<std::uint8_t> v_codes;
  std::vector<float> q_scales, q_bias, k_scales, k_mean, v_scales;
  std::vector<float> v_mean;  // smooth_v only, else empty
};
// Every buffer of the quantized layout, once: f(name, its QuantizedDevice pointer, its Sage2HostQuantized
// vector, its QuantizedSizes count), as member pointers (the statistics workspace is the device's alone).
template <class F>
void for_each_quantized_buffer(F&& f) {
  f("q_codes", &QuantizedDevice::q_codes, &Sage2HostQuantized::q_codes, &QuantizedSizes::q_codes);
  f("q_scales", &QuantizedDevice::q_scales, &Sage2HostQuantized::q_scales, &QuantizedSizes::q_scales);
  f("q_bias", &QuantizedDevice::q_bias, &Sage2HostQuantized::q_bias, &QuantizedSizes::q_bias);
  f("k_codes", &QuantizedDevice::k_codes, &Sage2HostQuantized::k_codes, &QuantizedSizes::k_codes);
  f("k_scales", &QuantizedDevice::k_scales, &Sage2HostQuantized::k_scales, &QuantizedSizes::k_scales);
  f("k_mean", &QuantizedDevice::k_mean, &Sage2HostQuantized::k_mean, &QuantizedSizes::k_mean);
  f("v_codes", &QuantizedDevice::v_codes, &Sage2HostQuantized::v_codes, &QuantizedSizes::v_codes);
  f("v_scales", &QuantizedDevice::v_scales, &Sage2HostQuantized::v_scales, &QuantizedSizes::v_scales);
  f("v_mean", &QuantizedDevice::v_mean, &Sage2HostQuantized::v_mean, &QuantizedSizes::v_mean);
}
struct Sage2HostResult {
  std::vector<std::uint16_t> out;  // fp16/bf16 codes, the problem's layout, heads_q heads
  std::vector<float> lse;          // [batch][heads_q][tokens]
  Sage2HostQuantized quantized;    // filled when asked for
};
// Throws as above, and std::invalid_argument when a tensor's size does not fit the problem.
Sage2HostResult sage2_attention_host(const Sage2Problem& problem, std::span<const std::uint16_t> q,
                                     std::span<const std::uint16_t> k, std::span<const std::uint16_t> v,
                                     bool keep_quantized = false);
// The attention kernel alone on quantized buffers made on the host (QuantizedSizes::of(problem)
// elements each; v_mean exactly with smooth_v): out and LSE back (Sage2HostResult::quantized
// empty). Throws as sage2_attention_host, naming a buffer of the wrong size.
Sage2HostResult sage2_attention_host_quantized(const Sage2Problem& problem, const Sage2HostQuantized& quantized);

// In-place accumulation and smooth V are built for one output type and exp2 unit, the accumulator
// experiment's (preset sage2-8b, fp16 output): each further one is 12 more kernel instances to compile.
inline constexpr DType kInPlaceSmoothVDtype = DType::fp16;
inline constexpr lowbit::attention::steps::Exp2Unit kInPlaceSmoothVExp2 = lowbit::attention::steps::Exp2Unit::polynomial;

// The offset of K code (key, channel) and of V^T code (channel, position) within one KV head's
// codes (padded_kv x head_dim bytes): tile key / block_kv, then the tile's shared-memory order
// (host and device).
LOWBIT_HD constexpr long long k_code_offset(int key, int channel, int head_dim, int block_kv) {
  return (long long)(key / block_kv) * block_kv * head_dim + sm90::KMajorLayout{head_dim}.offset(key % block_kv, channel);
}
LOWBIT_HD constexpr long long v_code_offset(int channel, int position, int head_dim, int block_kv) {
  return (long long)(position / block_kv) * block_kv * head_dim +
         sm90::KMajorLayout{block_kv}.offset(channel, position % block_kv);
}

}  // namespace lowbit::kernels::attention
