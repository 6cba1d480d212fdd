#include "kernels/attention/gpu_forward.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "kernels/attention/sage2_attention.hpp"
#include "kernels/attention/sage2_operands.hpp"
#include "kernels/attention/variant_attention.hpp"

namespace lowbit::kernels::attention {
namespace {

namespace la = lowbit::attention;
namespace st = lowbit::attention::steps;

// One kernel family: why it cannot compute a pipeline on these inputs bit for bit (or nothing), and
// its run where it can.
struct KernelFamily {
  std::string name;
  std::function<std::optional<std::string>(const la::Pipeline&, const Tensor4&, const Tensor4&, const Tensor4&,
                                           const la::ForwardOptions&)>
      unsupported;
  std::function<la::ForwardResult(const la::Pipeline&, const Tensor4&, const Tensor4&, const Tensor4&,
                                  const la::ForwardOptions&)>
      forward;
};

// ---- sage2-8b -----------------------------------------------------------------------------------

const Format& format_of(DType t) { return t == DType::fp16 ? formats::fp16 : formats::bf16; }
const char* name_of(DType t) { return t == DType::fp16 ? "fp16" : "bf16"; }

// A pipeline the sage2-8b kernel computes: its preset (exp2 unit) with the output, and so the
// kernel's inputs, in one half format; where the kernel has the instances (kInPlaceSmoothVDtype,
// kInPlaceSmoothVExp2), o accumulated in place and V smoothed too.
struct Sage2Config {
  la::Pipeline pipeline;
  st::Exp2Unit exp2;
  DType dtype;
  bool in_place = false, smooth_v = false;
  std::string name() const {
    return fmt::format("{} with {} output{}{}", pipeline.name, name_of(dtype), in_place ? ", accumulation in-place" : "",
                       smooth_v ? ", smooth-v on" : "");
  }
};

// The presets first: a pipeline that is none of the configurations is compared with the closest
// one, the first of those with the fewest differences.
std::vector<Sage2Config> sage2_configs(int head_dim) {
  std::vector<Sage2Config> out;
  for (st::Exp2Unit exp2 : {st::Exp2Unit::polynomial, st::Exp2Unit::sm90_ex2})
    for (DType dtype : {DType::fp16, DType::bf16}) {
      la::Pipeline p = la::preset(la::sage2_8b_preset(exp2), head_dim);
      la::follow_inputs(p, format_of(dtype));
      out.push_back({std::move(p), exp2, dtype});
    }
  const std::size_t presets = out.size();
  for (std::size_t i = 0; i < presets; ++i) {
    if (out[i].dtype != kInPlaceSmoothVDtype || out[i].exp2 != kInPlaceSmoothVExp2) continue;
    for (const auto& [in_place, smooth_v] : {std::pair{true, false}, {false, true}, {true, true}}) {
      Sage2Config c = out[i];
      if (in_place) c.pipeline.accumulation = {la::Accumulation::in_place, 0};
      c.pipeline.smoothing.v = smooth_v;
      c.in_place = in_place;
      c.smooth_v = smooth_v;
      out.push_back(std::move(c));
    }
  }
  return out;
}

// "STAGE is A, the kernel's B" for every stage where p differs from the kernel's pipeline.
std::vector<std::string> stage_differences(const la::Pipeline& p, const la::Pipeline& kernel) {
  const auto mine = la::stage_values(p), theirs = la::stage_values(kernel);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < mine.size(); ++i)
    if (mine[i].second != theirs.at(i).second)
      out.push_back(fmt::format("stage {} is '{}', the kernel's '{}'", mine[i].first, mine[i].second, theirs[i].second));
  return out;
}

// The configuration whose every stage is p's; else why none is (the closest one's differences).
std::optional<Sage2Config> sage2_match(const la::Pipeline& p, int head_dim, std::string& why) {
  std::vector<Sage2Config> configs;
  try {
    configs = sage2_configs(head_dim);
  } catch (const std::exception& e) {
    why = fmt::format("no sage2-8b recipe for d = {}: {}", head_dim, e.what());
    return std::nullopt;
  }
  std::size_t best = 0;
  std::vector<std::string> fewest;
  for (std::size_t i = 0; i < configs.size(); ++i) {
    std::vector<std::string> d = stage_differences(p, configs[i].pipeline);
    if (d.empty()) return configs[i];
    if (i == 0 || d.size() < fewest.size()) best = i, fewest = std::move(d);
  }
  std::string list;
  for (const auto& d : fewest) list += (list.empty() ? "" : "; ") + d;
  why = fmt::format("the pipeline is not one the kernel computes (presets sage2-8b, sage2-8b-ex2 with the output in fp16 or "
                    "bf16; {} with {} output also with accumulation in-place, smooth-v on or both); against {}: {}",
                    la::sage2_8b_preset(kInPlaceSmoothVExp2), name_of(kInPlaceSmoothVDtype), configs[best].name(), list);
  return std::nullopt;
}

// The first value of t that is not a value of f (the kernel reads f's codes), or nothing.
std::optional<std::string> not_in_format(const Tensor4& t, const std::string& name, DType dtype) {
  const Format& f = format_of(dtype);
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    const float x = t.values[i];
    if (std::bit_cast<std::uint32_t>(float(decode(f, encode(f, double(x))))) == std::bit_cast<std::uint32_t>(x)) continue;
    const std::size_t per_head = std::size_t(t.tokens) * std::size_t(t.dim), per_batch = per_head * std::size_t(t.heads);
    return fmt::format("{}[{}, {}, {}, {}] = {} is not a {} value (the kernel reads {} Q, K, V; round them first)", name,
                       i / per_batch, i % per_batch / per_head, i % per_head / std::size_t(t.dim), i % std::size_t(t.dim), x,
                       name_of(dtype), name_of(dtype));
  }
  return std::nullopt;
}

// N = K's tokens: fewer queries run as the first rows of N (the rest zero rows, discarded).
Sage2Problem sage2_problem(const Sage2Config& c, const Tensor4& q, const Tensor4& k, const la::ForwardOptions& o) {
  Sage2Problem problem;
  problem.batch = q.batch;
  problem.heads_q = q.heads;
  problem.heads_kv = k.heads;
  problem.tokens = k.tokens;
  problem.head_dim = q.dim;
  problem.causal = o.causal;
  problem.dtype = c.dtype;
  problem.layout = Layout::bhnd;  // Tensor4's order
  problem.exp2 = c.exp2;
  problem.in_place = c.in_place;
  problem.smooth_v = c.smooth_v;
  return problem;
}

std::optional<std::string> sage2_unsupported_or(const la::Pipeline& p, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                                const la::ForwardOptions& o, std::optional<Sage2Config>& match) {
  std::string why;
  match = sage2_match(p, q.dim, why);
  if (!match) return why;
  if (o.keep_operands) return "keep_operands: the kernel's quantized buffers are not returned as the emulation's operands";
  if (o.split_pass())
    return fmt::format("a split-KV pass (KV blocks [{}, {})): the kernel runs every KV block", o.kv_block_begin, o.kv_block_end);
  if (!o.descales.empty()) return "descales: the kernel takes none";
  if (!o.key_means.empty()) return "given K means: the kernel computes its own";
  if (k.batch != q.batch || v.batch != q.batch) return fmt::format("Q, K, V batches {}, {}, {} differ", q.batch, k.batch, v.batch);
  if (k.dim != q.dim || v.dim != q.dim)
    return fmt::format("the kernel takes one head dimension for Q, K and V (here {}, {}, {})", q.dim, k.dim, v.dim);
  if (v.tokens != k.tokens) return fmt::format("K and V have {} and {} tokens", k.tokens, v.tokens);
  if (q.tokens > k.tokens)
    return fmt::format("the kernel takes as many queries as keys, or fewer padded with zero rows (here {} queries, {} keys)",
                       q.tokens, k.tokens);
  if (k.heads != v.heads) return fmt::format("K and V have {} and {} heads", k.heads, v.heads);
  const Sage2Problem problem = sage2_problem(*match, q, k, o);
  if (auto bad = problem.validate()) return *bad;
  for (const auto& [t, name] : {std::pair{&q, "Q"}, std::pair{&k, "K"}, std::pair{&v, "V"}})
    if (auto bad = not_in_format(*t, name, match->dtype)) return bad;
  return std::nullopt;
}

std::optional<std::string> sage2_unsupported(const la::Pipeline& p, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                             const la::ForwardOptions& o) {
  std::optional<Sage2Config> match;
  return sage2_unsupported_or(p, q, k, v, o, match);
}

// Smooth V: the GPU's quantization does not smooth V, so the kernel runs on the emulator's own
// operands (attention::prepare_operands; Q padded with zero rows to N, as the GPU's run pads its
// codes), laid out as its buffers.
Sage2HostResult sage2_on_host_operands(const la::Pipeline& p, const Sage2Problem& problem, const Tensor4& q, const Tensor4& k,
                                       const Tensor4& v, const la::ForwardOptions& o) {
  Tensor4 padded(q.batch, q.heads, problem.tokens, q.dim);
  for (int b = 0; b < q.batch; ++b)
    for (int h = 0; h < q.heads; ++h)
      for (int t = 0; t < q.tokens; ++t) std::copy_n(q.row(b, h, t), q.dim, padded.row(b, h, t));
  return sage2_attention_host_quantized(problem, lay_out_operands(problem, la::prepare_operands(p, padded, k, v, o)));
}

la::ForwardResult sage2_forward(const la::Pipeline& p, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                const la::ForwardOptions& o) {
  std::optional<Sage2Config> match;
  if (auto why = sage2_unsupported_or(p, q, k, v, o, match)) throw std::invalid_argument("sage2-8b kernel: " + *why);
  const Format& f = format_of(match->dtype);
  const Sage2Problem problem = sage2_problem(*match, q, k, o);
  const std::size_t n = std::size_t(problem.tokens), rows = std::size_t(q.tokens), dim = std::size_t(q.dim);
  // Each (batch, head)'s tokens, then zero codes (+0) up to N; exact: sage2_unsupported checked every value.
  const auto codes = [&](const Tensor4& t) {
    const std::size_t heads = std::size_t(t.batch) * std::size_t(t.heads), tokens = std::size_t(t.tokens);
    std::vector<std::uint16_t> c(heads * n * dim, 0);
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < tokens * dim; ++i)
        c[h * n * dim + i] = std::uint16_t(encode(f, double(t.values[h * tokens * dim + i])));
    return c;
  };
  const Sage2HostResult r = problem.smooth_v ? sage2_on_host_operands(p, problem, q, k, v, o)
                                             : sage2_attention_host(problem, codes(q), codes(k), codes(v));
  la::ForwardResult out = la::ForwardResult::shaped(q, k, v, f);
  // The first q.tokens rows of each (batch, Q head).
  const std::size_t heads = std::size_t(q.batch) * std::size_t(q.heads);
  out.lse.resize(heads * rows);
  out.output_codes.resize(heads * rows * dim);
  out.output.resize(heads * rows * dim);
  for (std::size_t h = 0; h < heads; ++h) {
    std::copy_n(r.lse.begin() + std::ptrdiff_t(h * n), rows, out.lse.begin() + std::ptrdiff_t(h * rows));
    for (std::size_t i = 0; i < rows * dim; ++i) {
      const std::uint16_t code = r.out[h * n * dim + i];
      out.output_codes[h * rows * dim + i] = code;
      out.output[h * rows * dim + i] = float(decode(f, code));
    }
  }
  return out;
}

// ---- the sage2-4b family (variant_attention.hpp) -------------------------------------------------

std::optional<std::string> variant_family_unsupported(const la::Pipeline& p, const Tensor4& q, const Tensor4&,
                                                      const Tensor4& v, const la::ForwardOptions& o) {
  if (auto why = variant_unsupported(p)) return why;
  if ((q.dim != 64 && q.dim != 128) || v.dim != q.dim)
    return fmt::format("head dimension 64 or 128 and V's the same, not {} and {}", q.dim, v.dim);
  if (o.split_pass() || !o.descales.empty() || !o.key_means.empty())
    return std::string("no split-KV pass, descales or given K means (its host side quantizes as the pipeline says)");
  return std::nullopt;
}

// The families in the order tried. Another family joins with one entry here (its unsupported and
// forward of the same signatures).
const std::vector<KernelFamily>& kernel_families() {
  static const std::vector<KernelFamily> families{
      {"sage2-8b", sage2_unsupported, sage2_forward},
      {"sage2-4b family", variant_family_unsupported,
       [](const la::Pipeline& p, const Tensor4& q, const Tensor4& k, const Tensor4& v, const la::ForwardOptions& o) {
         return variant_forward(p, q, k, v, o);
       }},
  };
  return families;
}

}  // namespace

std::optional<std::string> gpu_unsupported(const la::Pipeline& p, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                           const la::ForwardOptions& o) {
  std::string reasons;
  for (const KernelFamily& family : kernel_families()) {
    const std::optional<std::string> why = family.unsupported(p, q, k, v, o);
    if (!why) return std::nullopt;
    reasons += (reasons.empty() ? "" : "; ") + family.name + " kernel: " + *why;
  }
  return reasons;
}

la::ForwardResult gpu_forward(const la::Pipeline& p, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                              const la::ForwardOptions& o) {
  std::string reasons;
  for (const KernelFamily& family : kernel_families()) {
    const std::optional<std::string> why = family.unsupported(p, q, k, v, o);
    if (!why) return family.forward(p, q, k, v, o);
    reasons += (reasons.empty() ? "" : "; ") + family.name + " kernel: " + *why;
  }
  throw std::invalid_argument("no GPU kernel computes pipeline " + p.name + ": " + reasons);
}

}  // namespace lowbit::kernels::attention
