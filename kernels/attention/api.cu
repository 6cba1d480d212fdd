// Host side of SageAttention2-8b: validation, buffers, launches, the host-tensor convenience.
#include <cuda_runtime.h>

#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/attention/sage2_attention.hpp"
#include "kernels/attention/sage2_kernels.cuh"
#include "kernels/device.hpp"

namespace lowbit::kernels::attention {
namespace {

constexpr int kMaxTokens = 1 << 22;  // keeps every row index and padded size within int
constexpr int kMaxGridDim = 65535;

int round_up(int v, int m) { return (v + m - 1) / m * m; }

std::string describe(const Sage2Problem& p) {
  return "sage2 attention (batch=" + std::to_string(p.batch) + ", heads_q=" + std::to_string(p.heads_q) +
         ", heads_kv=" + std::to_string(p.heads_kv) + ", tokens=" + std::to_string(p.tokens) +
         ", head_dim=" + std::to_string(p.head_dim) + ")";
}

// The current device must be a Hopper GPU (sm_90): the kernels are built for sm_90a only.
void require_hopper() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  int major = 0, minor = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  if (major != 9 || minor != 0)
    throw std::invalid_argument("sage2 attention needs a Hopper GPU (sm_90, built for sm_90a); device " +
                                std::to_string(device) + " is sm_" + std::to_string(major) + std::to_string(minor));
}

void require_valid(const Sage2Problem& p) {
  if (auto why = p.validate()) throw std::invalid_argument(describe(p) + ": " + *why);
}

void require_aligned(const void* pointer, std::size_t alignment, const char* name) {
  if (pointer == nullptr) throw std::invalid_argument(std::string("sage2 attention: ") + name + " is a null pointer");
  if (reinterpret_cast<std::uintptr_t>(pointer) % alignment != 0)
    throw std::invalid_argument(std::string("sage2 attention: ") + name + " is not " + std::to_string(alignment) +
                                "-byte aligned");
}

// The quantized buffers the attention kernel reads (the quantization writes them): the codes move
// in 16-byte pieces (bulk copies, cp.async), the scales as floats.
void require_attention_buffers_aligned(const QuantizedDevice& b) {
  require_aligned(b.q_codes, 16, "quantized.q_codes");
  require_aligned(b.k_codes, 16, "quantized.k_codes");
  require_aligned(b.v_codes, 16, "quantized.v_codes");
  require_aligned(b.q_scales, 4, "quantized.q_scales");
  require_aligned(b.q_bias, 4, "quantized.q_bias");
  require_aligned(b.k_scales, 4, "quantized.k_scales");
  require_aligned(b.v_scales, 4, "quantized.v_scales");
}

detail::TensorStrides strides(const Sage2Problem& p, int heads) {
  const long long d = p.head_dim, n = p.tokens, h = heads;
  if (p.layout == Layout::bhnd) return {h * n * d, n * d, d};
  return {n * h * d, d, h * d};
}

template <class T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t count) : count_(count) {
    check_cuda(cudaMalloc(&data_, count * sizeof(T)), "cudaMalloc (sage2 attention)");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return data_; }
  void upload(std::span<const T> host) {
    check_cuda(cudaMemcpy(data_, host.data(), count_ * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    check_cuda(cudaMemcpy(host.data(), data_, count_ * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
    return host;
  }

 private:
  std::size_t count_;
  T* data_ = nullptr;
};

template <class T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  check_cuda(cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  return host;
}

// NaN/Inf in fp16/bf16 codes: all exponent bits set.
void require_finite(const Sage2Problem& p, std::span<const std::uint16_t> x, const char* name) {
  const std::uint16_t exponent = p.dtype == DType::fp16 ? 0x7c00 : 0x7f80;
  for (std::size_t i = 0; i < x.size(); ++i)
    if ((x[i] & exponent) == exponent)
      throw std::invalid_argument(std::string("sage2 attention: ") + name + " holds a NaN or Inf at element " +
                                  std::to_string(i) + " (code 0x" + [&] {
                                    char hex[8];
                                    std::snprintf(hex, sizeof hex, "%04x", x[i]);
                                    return std::string(hex);
                                  }() + "); the kernels take finite inputs");
}

}  // namespace

std::optional<std::string> Sage2Problem::validate() const {
  if (auto why = recipe().validate()) return why;
  if (batch < 1 || heads_q < 1 || heads_kv < 1 || tokens < 1)
    return "batch, heads_q, heads_kv and tokens must be >= 1";
  if (heads_q % heads_kv != 0)
    return "heads_q=" + std::to_string(heads_q) + " is not a multiple of heads_kv=" + std::to_string(heads_kv) +
           " (GQA groups whole Q heads per KV head)";
  if (tokens > kMaxTokens) return "tokens=" + std::to_string(tokens) + " exceeds " + std::to_string(kMaxTokens);
  if (batch > kMaxGridDim || heads_q + heads_kv > kMaxGridDim)
    return "batch and heads_q + heads_kv must be at most " + std::to_string(kMaxGridDim);
  if (dtype != DType::fp16 && dtype != DType::bf16) return "dtype must be fp16 or bf16";
  if (layout != Layout::bhnd && layout != Layout::bnhd)
    return "layout must be [batch, heads, tokens, dim] or [batch, tokens, heads, dim]";
  if ((in_place || smooth_v) && (dtype != kInPlaceSmoothVDtype || exp2 != kInPlaceSmoothVExp2))
    return std::string("in-place accumulation and smooth V are built for ") +
           (kInPlaceSmoothVDtype == DType::fp16 ? "fp16" : "bf16") + " output with the exp2 " +
           std::string(lowbit::attention::kernel_exp2_name(kInPlaceSmoothVExp2)) + " only";
  if (schedule != Sage2Schedule::serial && schedule != Sage2Schedule::overlapped) return "schedule must be serial or overlapped";
  if (schedule != Sage2Schedule::serial && (in_place || smooth_v))
    return std::string("the ") + schedule_name(schedule) + " schedule is built for the presets' instances: not with " +
           (in_place ? "in-place accumulation" : "smooth V");
  using lowbit::attention::steps::RowSum;
  if (row_sum != RowSum::lanes && row_sum != RowSum::pv) return "row_sum must be lanes or pv";
  if (row_sum == RowSum::pv &&
      (in_place || smooth_v || schedule != Sage2Schedule::serial || exp2 != lowbit::attention::steps::Exp2Unit::sm90_ex2))
    return "row sums by P V (row-sum=pv) are built for the serial schedule with two-level accumulation, V not "
           "smoothed and the exp2 sm90-ex2 only";
  return std::nullopt;
}

const char* schedule_name(Sage2Schedule schedule) {
  return schedule == Sage2Schedule::overlapped ? "overlapped" : "serial";
}
std::optional<Sage2Schedule> parse_schedule(std::string_view name) {
  for (Sage2Schedule s : {Sage2Schedule::serial, Sage2Schedule::overlapped})
    if (name == schedule_name(s)) return s;
  return std::nullopt;
}

int Sage2Problem::padded_q() const { return round_up(tokens, recipe().block_q); }
int Sage2Problem::padded_kv() const { return round_up(tokens, recipe().block_kv); }
namespace {
// The recipe's per-thread groups, derived once per head dimension: a derivation takes about 0.8 ms
// of host time, which every launch paid twice (the floor of the small problems' timings).
const quant::QkGroups& recipe_groups(const Sage2Problem& p) {
  static const quant::QkGroups d64 = quant::derive_groups(lowbit::attention::sage2_8b_hopper(64).qk_tiling(), quant::GroupScope::thread);
  static const quant::QkGroups d128 = quant::derive_groups(lowbit::attention::sage2_8b_hopper(128).qk_tiling(), quant::GroupScope::thread);
  if (p.head_dim != 64 && p.head_dim != 128) throw std::invalid_argument(describe(p) + ": head_dim must be 64 or 128");
  return p.head_dim == 64 ? d64 : d128;
}
}  // namespace

int Sage2Problem::q_groups() const { return recipe_groups(*this).q.count; }
int Sage2Problem::k_groups() const { return recipe_groups(*this).k.count; }
int Sage2Problem::key_chunks() const { return (tokens + recipe().key_mean_chunk - 1) / recipe().key_mean_chunk; }
std::size_t Sage2Problem::element_offset(int b, int h, int t, int heads) const {
  const std::size_t d = std::size_t(head_dim), n = std::size_t(tokens), hs = std::size_t(heads);
  return layout == Layout::bhnd ? ((std::size_t(b) * hs + std::size_t(h)) * n + std::size_t(t)) * d
                                : ((std::size_t(b) * n + std::size_t(t)) * hs + std::size_t(h)) * d;
}

QuantizedSizes QuantizedSizes::of(const Sage2Problem& p) {
  const std::size_t b = std::size_t(p.batch), hq = std::size_t(p.heads_q), hkv = std::size_t(p.heads_kv);
  const std::size_t d = std::size_t(p.head_dim), pq = std::size_t(p.padded_q()), pkv = std::size_t(p.padded_kv());
  const auto recipe = p.recipe();
  QuantizedSizes s{};
  s.q_codes = b * hq * pq * d;
  s.q_scales = b * hq * (pq / std::size_t(recipe.block_q)) * std::size_t(p.q_groups());
  s.q_bias = b * hq * pq;
  s.k_codes = b * hkv * pkv * d;
  s.k_scales = b * hkv * (pkv / std::size_t(recipe.block_kv)) * std::size_t(p.k_groups());
  s.k_mean = b * hkv * d;
  s.v_codes = b * hkv * d * pkv;
  s.v_scales = b * hkv * d;
  s.v_mean = p.smooth_v ? b * hkv * d : 0;
  s.k_chunk_sums = s.v_chunk_amax = b * hkv * std::size_t(p.key_chunks()) * d;
  return s;
}

Sage2Workspace::Sage2Workspace(const Sage2Problem& problem) {
  require_valid(problem);
  sizes_ = QuantizedSizes::of(problem);
  const auto allocate = [](auto*& pointer, std::size_t count) {
    check_cuda(cudaMalloc(&pointer, count * sizeof(*pointer)), "cudaMalloc (sage2 workspace)");
  };
  try {
    for_each_quantized_buffer([&](const char*, auto device, auto, auto count) {
      if (sizes_.*count > 0) allocate(buffers_.*device, sizes_.*count);  // v_mean: smooth_v only
    });
    allocate(buffers_.k_chunk_sums, sizes_.k_chunk_sums);
    allocate(buffers_.v_chunk_amax, sizes_.v_chunk_amax);
  } catch (...) {
    this->~Sage2Workspace();
    throw;
  }
}

Sage2Workspace::~Sage2Workspace() {
  for_each_quantized_buffer([&](const char*, auto device, auto, auto) { cudaFree(buffers_.*device); });
  cudaFree(buffers_.k_chunk_sums);
  cudaFree(buffers_.v_chunk_amax);
  buffers_ = {};
}

void sage2_quantize(const Sage2Problem& problem, const void* q, const void* k, const void* v,
                    const QuantizedDevice& quantized, std::uintptr_t stream) {
  require_valid(problem);
  if (problem.smooth_v)
    throw std::invalid_argument(describe(problem) +
                                ": smooth_v: the GPU's quantization does not smooth V (quantize on the host: "
                                "sage2_attention_host_quantized)");
  require_aligned(q, 2, "q");
  require_aligned(k, 2, "k");
  require_aligned(v, 2, "v");
  require_attention_buffers_aligned(quantized);
  require_aligned(quantized.k_mean, 4, "quantized.k_mean");
  require_aligned(quantized.k_chunk_sums, 8, "quantized.k_chunk_sums");
  require_aligned(quantized.v_chunk_amax, 4, "quantized.v_chunk_amax");
  require_hopper();
  detail::upload_groups(problem.head_dim);
  detail::QuantizeParams p;
  p.q = q;
  p.k = k;
  p.v = v;
  p.q_strides = strides(problem, problem.heads_q);
  p.kv_strides = strides(problem, problem.heads_kv);
  p.out = quantized;
  p.batch = problem.batch;
  p.heads_q = problem.heads_q;
  p.heads_kv = problem.heads_kv;
  p.tokens = problem.tokens;
  p.padded_q = problem.padded_q();
  p.padded_kv = problem.padded_kv();
  p.key_chunks = problem.key_chunks();
  p.q_groups = problem.q_groups();
  p.k_groups = problem.k_groups();
  p.softmax_scale_log2 = lowbit::attention::steps::softmax_scale_log2(problem.head_dim);
  detail::launch_statistics(p, problem.dtype, problem.head_dim, stream);
  detail::launch_quantize(p, problem.dtype, problem.head_dim, stream);
}

void sage2_attention_quantized(const Sage2Problem& problem, const QuantizedDevice& quantized, void* out, float* lse,
                               std::uintptr_t stream) {
  require_valid(problem);
  require_aligned(out, 4, "out");
  require_aligned(lse, 4, "lse");
  require_attention_buffers_aligned(quantized);
  if (problem.smooth_v) require_aligned(quantized.v_mean, 4, "quantized.v_mean");
  require_hopper();
  detail::upload_groups(problem.head_dim);
  detail::AttentionParams p;
  p.q_codes = quantized.q_codes;
  p.q_scales = quantized.q_scales;
  p.q_bias = quantized.q_bias;
  p.k_codes = quantized.k_codes;
  p.k_scales = quantized.k_scales;
  p.v_codes = quantized.v_codes;
  p.v_scales = quantized.v_scales;
  p.v_mean = quantized.v_mean;
  p.out = out;
  p.lse = lse;
  p.out_strides = strides(problem, problem.heads_q);
  const auto piece_aligned = [](long long elements) { return elements * 2 % 16 == 0; };
  p.out_in_pieces = reinterpret_cast<std::uintptr_t>(out) % 16 == 0 && piece_aligned(p.out_strides.batch) &&
                    piece_aligned(p.out_strides.head) && piece_aligned(p.out_strides.token);
  p.batch = problem.batch;
  p.heads_q = problem.heads_q;
  p.heads_kv = problem.heads_kv;
  p.tokens = problem.tokens;
  p.padded_q = problem.padded_q();
  p.padded_kv = problem.padded_kv();
  p.q_groups = problem.q_groups();
  p.k_groups = problem.k_groups();
  detail::launch_attention(p, problem, stream);
}

void sage2_attention(const Sage2Problem& problem, const void* q, const void* k, const void* v,
                     const Sage2Workspace& workspace, void* out, float* lse, std::uintptr_t stream) {
  sage2_quantize(problem, q, k, v, workspace.buffers(), stream);
  sage2_attention_quantized(problem, workspace.buffers(), out, lse, stream);
}

namespace {

// The host result's out and LSE buffers, and the kernels' run into them, synchronized.
template <class Run>
Sage2HostResult run_into_host_result(const Sage2Problem& problem, Run run) {
  DeviceBuffer<std::uint16_t> dout(problem.elements(problem.heads_q));
  DeviceBuffer<float> dlse(std::size_t(problem.batch) * problem.heads_q * problem.tokens);
  run(dout.get(), dlse.get());
  check_cuda(cudaDeviceSynchronize(), "sage2 attention kernels");
  Sage2HostResult result;
  result.out = dout.download();
  result.lse = dlse.download();
  return result;
}

}  // namespace

Sage2HostResult sage2_attention_host(const Sage2Problem& problem, std::span<const std::uint16_t> q,
                                     std::span<const std::uint16_t> k, std::span<const std::uint16_t> v,
                                     bool keep_quantized) {
  require_valid(problem);
  const std::size_t q_size = problem.elements(problem.heads_q), kv_size = problem.elements(problem.heads_kv);
  const auto require_size = [&](std::span<const std::uint16_t> x, std::size_t size, const char* name) {
    if (x.size() != size)
      throw std::invalid_argument(describe(problem) + ": " + name + " has " + std::to_string(x.size()) +
                                  " elements, the problem needs " + std::to_string(size));
  };
  require_size(q, q_size, "q");
  require_size(k, kv_size, "k");
  require_size(v, kv_size, "v");
  require_finite(problem, q, "q");
  require_finite(problem, k, "k");
  require_finite(problem, v, "v");
  require_hopper();
  DeviceBuffer<std::uint16_t> dq(q_size), dk(kv_size), dv(kv_size);
  dq.upload(q);
  dk.upload(k);
  dv.upload(v);
  Sage2Workspace workspace(problem);
  Sage2HostResult result = run_into_host_result(problem, [&](void* out, float* lse) {
    sage2_attention(problem, dq.get(), dk.get(), dv.get(), workspace, out, lse);
  });
  if (keep_quantized) {
    const QuantizedDevice& b = workspace.buffers();
    const QuantizedSizes& s = workspace.sizes();
    for_each_quantized_buffer([&](const char*, auto device, auto host, auto count) {
      if (s.*count > 0) result.quantized.*host = download(b.*device, s.*count);
    });
  }
  return result;
}

Sage2HostResult sage2_attention_host_quantized(const Sage2Problem& problem, const Sage2HostQuantized& quantized) {
  require_valid(problem);
  const QuantizedSizes sizes = QuantizedSizes::of(problem);
  for_each_quantized_buffer([&](const char* name, auto, auto host, auto count) {
    const std::size_t have = (quantized.*host).size(), want = sizes.*count;
    if (have != want)
      throw std::invalid_argument(describe(problem) + ": quantized." + name + " has " + std::to_string(have) +
                                  " elements, the problem needs " + std::to_string(want));
  });
  require_hopper();
  Sage2Workspace workspace(problem);
  const QuantizedDevice& b = workspace.buffers();
  for_each_quantized_buffer([&](const char*, auto device, auto host, auto count) {
    const auto& values = quantized.*host;
    if (sizes.*count > 0)  // v_mean: smooth_v only
      check_cuda(cudaMemcpy(b.*device, values.data(), values.size() * sizeof(values[0]), cudaMemcpyHostToDevice),
                 "cudaMemcpy (upload)");
  });
  return run_into_host_result(problem, [&](void* out, float* lse) { sage2_attention_quantized(problem, b, out, lse); });
}

}  // namespace lowbit::kernels::attention
