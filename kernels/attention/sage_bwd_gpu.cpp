// SageBwd on the GPU (sage_bwd_gpu.hpp): what the kernels take, and their launch.
#include "kernels/attention/sage_bwd_gpu.hpp"

#include <cmath>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/attention/kernel_steps.hpp"
#include "kernels/attention/sage_bwd_launch.hpp"
#include "numerics/nonfinite.hpp"

namespace lowbit::kernels::attention {
namespace {

using lowbit::attention::BackwardOperands;
using lowbit::attention::SageBwdConfig;

constexpr int kTile = 64;

bool fp16(BackwardOperands o) { return o == BackwardOperands::fp16; }

bool any_fp16(const SageBwdConfig& c) {
  for (BackwardOperands o : {c.qk, c.pv, c.dv, c.dp, c.dq, c.dk})
    if (fp16(o)) return true;
  return false;
}

void check_finite(const Tensor4& t, const char* name) {
  const auto r = scan_nonfinite(std::span<const float>(t.values));
  if (r.any())
    throw std::invalid_argument(fmt::format("gpu_sage_bwd: {}: {} non-finite value{} (the first at index {}); inputs must be finite",
                                            name, r.count(), r.count() == 1 ? "" : "s", r.first_index));
}

}  // namespace

SageBwdConfig sage_bwd_hopper_twin(const SageBwdConfig& c) {
  SageBwdConfig twin = c;
  if (any_fp16(c)) twin.arch = "sm_90";
  return twin;
}

std::optional<std::string> gpu_sage_bwd_unsupported(const SageBwdConfig& c, const Tensor4& q, const Tensor4& k,
                                                    const Tensor4& v, const Tensor4& d_out) {
  if (auto why = c.validate()) return "config " + c.name + ": " + *why;
  if (c.block_q != kTile || c.block_kv != kTile)
    return fmt::format("tiles {} x {}: the kernels run 64 x 64", c.block_q, c.block_kv);
  if (any_fp16(c) && c.arch != "sm_90")
    return fmt::format("arch {}: the GPU's f16 mma.sync is sm_90's (the Hopper twin, arch=sm_90, is what it computes)",
                       c.arch);
  if (k.batch != q.batch || v.batch != q.batch || k.heads != v.heads || k.heads < 1 || q.heads % k.heads != 0 ||
      k.tokens != v.tokens || q.dim != k.dim || d_out.batch != q.batch || d_out.heads != q.heads ||
      d_out.tokens != q.tokens || d_out.dim != v.dim)
    return fmt::format("shapes do not fit: Q {}, K {}, V {}, dO {}", q.shape_text(), k.shape_text(), v.shape_text(),
                       d_out.shape_text());
  if ((q.dim != 64 && q.dim != 128) || (v.dim != 64 && v.dim != 128))
    return fmt::format("head dims d = {}, dv = {}: the kernels take 64 or 128", q.dim, v.dim);
  if (q.tokens < 1 || k.tokens < 1) return fmt::format("{} queries, {} keys: the kernels need one of each", q.tokens, k.tokens);
  return std::nullopt;
}

lowbit::attention::BackwardResult gpu_sage_bwd(const SageBwdConfig& c, const Tensor4& q, const Tensor4& k,
                                               const Tensor4& v, const Tensor4& d_out, bool causal,
                                               SageBwdDiagnostics* diagnostics) {
  if (auto why = gpu_sage_bwd_unsupported(c, q, k, v, d_out)) throw std::invalid_argument("gpu_sage_bwd: " + *why);
  check_finite(q, "Q");
  check_finite(k, "K");
  check_finite(v, "V");
  check_finite(d_out, "dO");
  SageBwdLaunch l;
  l.qk_fp16 = fp16(c.qk), l.pv_fp16 = fp16(c.pv), l.dv_fp16 = fp16(c.dv);
  l.dp_fp16 = fp16(c.dp), l.dq_fp16 = fp16(c.dq), l.dk_fp16 = fp16(c.dk);
  l.causal = causal;
  l.scale_log2 = lowbit::attention::steps::softmax_scale_log2(q.dim);
  l.inv_sqrt_d = float(1.0 / std::sqrt(double(q.dim)));  // as sage_bwd computes it
  l.batch = q.batch, l.heads = q.heads, l.kv_heads = k.heads, l.tokens = q.tokens, l.keys = k.tokens;
  l.dim = q.dim, l.value_dim = v.dim;
  l.q = &q.values, l.k = &k.values, l.v = &v.values, l.d_out = &d_out.values;
  SageBwdOutputs out = launch_sage_bwd(l);
  if (diagnostics) {
    diagnostics->lse_log2 = std::move(out.lse_log2);
    diagnostics->delta = std::move(out.delta);
    diagnostics->kernel_milliseconds = out.kernel_milliseconds;
  }
  return {std::move(out.output), std::move(out.lse), std::move(out.dq), std::move(out.dk), std::move(out.dv)};
}

void device_exact_function(lowbit::attention::ExactFunction f, std::uint32_t first, std::vector<std::uint32_t>& out) {
  launch_exact_function(f, first, out);
}

}  // namespace lowbit::kernels::attention
