#include "emulation/linear/gla.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/linear/linear_steps.hpp"
#include "emulation/mma/gemm.hpp"
#include "emulation/quant/smoothing.hpp"

namespace lowbit::linear {

namespace {

// "nN" in a registry name stands for the n the stage needs.
std::string with_n(std::string_view name, int n) {
  const auto at = name.find("nNk");
  if (at == std::string_view::npos) return std::string(name);
  return fmt::format("{}n{}{}", name.substr(0, at), n, name.substr(at + 2));
}

bool fma_stage(std::string_view instruction) { return instruction == kFp32Fma; }

// A format narrow enough to need a scale (integers, 8-bit floats and below).
bool needs_scale(const Format& f) { return f.is_integer() || f.code_bits() <= 8; }

// The instruction of a stage, or the registry's reason it is unknown.
std::optional<std::string> lookup(std::string_view arch, const std::string& name, std::optional<mma::Instruction>& out) {
  try {
    out = mma::find_instruction(arch, name);
  } catch (const mma::UnknownInstruction& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

std::optional<std::string> check_operands(const mma::Instruction& in, bool floating_only) {
  if (in.atom.a != in.atom.b)
    return fmt::format("{} multiplies {} by {}: both operands must share a format", in.atom.name.view(),
                       format_name(in.atom.a), format_name(in.atom.b));
  if (in.atom.d != formats::fp32 && in.atom.d != formats::s32)
    return fmt::format("{} accumulates in {}: fp32 or s32 accumulators only", in.atom.name.view(), format_name(in.atom.d));
  if (in.atom.block_scaled()) return fmt::format("{} is block-scaled: not a stage of this pipeline", in.atom.name.view());
  if (floating_only && in.atom.a.is_integer())
    return fmt::format("{} multiplies integers: this stage's operands are real-valued", in.atom.name.view());
  return std::nullopt;
}

// The instructions a pipeline runs on heads of value dimension dv, resolved once.
struct Instructions {
  std::optional<mma::Instruction> scores, values, state;
};

std::optional<std::string> resolve(const Pipeline& p, int dv, Instructions& out) {
  if (!fma_stage(p.scores.instruction))
    if (auto why = lookup(p.arch, with_n(p.scores.instruction, p.shape.sub_chunk), out.scores)) return "scores: " + *why;
  if (!fma_stage(p.values.instruction))
    if (auto why = lookup(p.arch, with_n(p.values.instruction, dv), out.values))
      return fmt::format("values (n = d_v = {}): {}", dv, *why);
  if (!fma_stage(p.state.instruction))
    if (auto why = lookup(p.arch, with_n(p.state.instruction, dv), out.state))
      return fmt::format("state (n = d_v = {}): {}", dv, *why);
  return std::nullopt;
}

std::optional<mma::Instruction> instruction(const Pipeline& p, const std::string& name, int n) {
  if (fma_stage(name)) return std::nullopt;
  return mma::find_instruction(p.arch, with_n(name, n));
}

quant::QuantSpec spec_of(const Format& element, quant::Grouping g) {
  quant::QuantSpec s;
  s.name = format_name(element) + " " + g.name;
  s.element = element;
  s.grouping = std::move(g);
  return s;
}

}  // namespace

std::optional<std::string> Pipeline::validate(int dk, int dv) const {
  if (auto why = shape.validate()) return "chunk shape: " + *why;
  if (dk < 1 || dv < 1) return fmt::format("d_k = {}, d_v = {}: both must be at least 1", dk, dv);
  Instructions in;
  if (auto why = resolve(*this, dv, in)) return why;

  const Granularity g = scores.granularity;
  if (!in.scores) {
    if (g != Granularity::none) return fmt::format("scores: fp32-fma takes no scales (granularity {})", to_string(g));
  } else {
    const mma::Atom& a = in.scores->atom;
    if (auto why = check_operands(*in.scores, false)) return "scores: " + *why;
    if (shape.sub_chunk % a.m != 0 || shape.sub_chunk % a.n != 0)
      return fmt::format("scores: a sub-chunk of {} tokens is not a whole number of {} x {} tiles of {}",
                         shape.sub_chunk, a.m, a.n, a.name.view());
    if (needs_scale(a.a) == (g == Granularity::none))
      return needs_scale(a.a) ? fmt::format("scores: {} operands need a scale (per-thread, per-block or per-token)",
                                            format_name(a.a))
                              : fmt::format("scores: {} operands are cast, not scaled (granularity none, not {})",
                                            format_name(a.a), to_string(g));
    if (g == Granularity::per_channel) return "scores: per-channel scales do not factor out of Q~ K~^T";
    if (g != Granularity::none && g != Granularity::per_thread && g != Granularity::per_warp &&
        g != Granularity::per_block && g != Granularity::per_token)
      return fmt::format("scores: granularity {} is not one of none, per-thread, per-warp, per-block, per-token",
                         to_string(g));
    if (g == Granularity::per_thread || g == Granularity::per_warp) {
      if (a.c_fragment.empty()) return "scores: " + a.name.str() + " has no accumulator fragment to derive per-thread groups from";
      if (auto why = score_tiling().validate()) return "scores: per-thread tiling: " + *why;
    }
  }

  if (!in.values) {
    if (values.p != Granularity::none || values.v != Granularity::none)
      return "values: fp32-fma takes no scales (p and v granularity none)";
  } else {
    if (auto why = check_operands(*in.values, true)) return "values: " + *why;
    const bool scaled = needs_scale(in.values->atom.a);
    if (scaled && !(values.p == Granularity::per_block || values.p == Granularity::per_token))
      return fmt::format("values: P in {} needs a scale: per-block (the chunk) or per-token, not {}",
                         format_name(in.values->atom.a), to_string(values.p));
    if (scaled && values.v != Granularity::per_channel)
      return fmt::format("values: V in {} needs per-channel scales, not {}", format_name(in.values->atom.b),
                         to_string(values.v));
    if (!scaled && (values.p != Granularity::none || values.v != Granularity::none))
      return fmt::format("values: {} operands are cast, not scaled (p and v granularity none)",
                         format_name(in.values->atom.a));
    if (auto why = mma::KLoop{values.mmas_per_flush, true}.validate(in.values->atom, shape.chunk, false))
      return "values: " + *why;
  }

  if (in.state) {
    if (auto why = check_operands(*in.state, true)) return "state: " + *why;
    if (needs_scale(in.state->atom.a))
      return fmt::format("state: {} operands would need scales; the state stage casts (bf16, fp16)",
                         format_name(in.state->atom.a));
  }
  return std::nullopt;
}

quant::ThreadTiling Pipeline::score_tiling() const {
  const mma::Instruction in = mma::find_instruction(arch, with_n(scores.instruction, shape.sub_chunk));
  quant::ThreadTiling t;
  t.atom = in.atom;
  t.warps = shape.sub_chunk / in.atom.m * t.warps_per_unit();
  t.block_q = shape.sub_chunk;
  t.block_k = shape.sub_chunk;
  return t;
}

std::optional<mma::Instruction> Pipeline::score_instruction() const {
  return instruction(*this, scores.instruction, shape.sub_chunk);
}
std::optional<mma::Instruction> Pipeline::value_instruction(int dv) const {
  return instruction(*this, values.instruction, dv);
}
std::optional<mma::Instruction> Pipeline::state_instruction(int dv) const {
  return instruction(*this, state.instruction, dv);
}

std::optional<quant::QuantSpec> Pipeline::score_spec(quant::Operand operand) const {
  const auto in = score_instruction();
  if (!in) return std::nullopt;
  const Format& element = operand == quant::Operand::q ? in->atom.a : in->atom.b;
  switch (scores.granularity) {
    case Granularity::per_thread: return spec_of(element, quant::grouping::per_thread(score_tiling(), operand));
    case Granularity::per_warp: return spec_of(element, quant::grouping::per_warp(score_tiling(), operand));
    case Granularity::per_block: return spec_of(element, quant::grouping::per_block(shape.sub_chunk));
    case Granularity::per_token: return spec_of(element, quant::grouping::per_token());
    default: return std::nullopt;
  }
}

// The operand formats do not depend on n: any legal n (8) names the instruction.
std::optional<quant::QuantSpec> Pipeline::p_spec() const {
  const auto in = value_instruction(8);
  if (!in || values.p == Granularity::none) return std::nullopt;
  return spec_of(in->atom.a, values.p == Granularity::per_block ? quant::grouping::per_tensor()
                                                                : quant::grouping::per_token());
}

std::optional<quant::QuantSpec> Pipeline::v_spec() const {
  const auto in = value_instruction(8);
  if (!in || values.v == Granularity::none) return std::nullopt;
  return spec_of(in->atom.b, quant::grouping::per_channel());
}

// ---- presets -------------------------------------------------------------------------------------

namespace {

constexpr std::string_view kMmaBf16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
constexpr std::string_view kMmaS8 = "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32";
constexpr std::string_view kMmaS4 = "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32";
constexpr std::string_view kMmaE4m3 = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32";
constexpr std::string_view kWgmmaBf16 = "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16";
constexpr std::string_view kWgmmaE4m3 = "wgmma.mma_async.sync.aligned.m64nNk32.f32.e4m3.e4m3";
// FP8 P V: the fp32 buffer takes a fresh FP22 accumulator every 2 MMAs (64 keys, SageAttention2's
// KV block).
constexpr int kFp8MmasPerFlush = 2;

const std::vector<PresetInfo> kPresets{
    {"fp32", "every matmul one fp32 fma per product (a SIMT kernel): the floor of the fp32 steps"},
    {"bf16", "GLA's kernel precision (fla chunk_gla): bf16 operands, fp32 accumulation; scores mma.sync "
             "m16n8k16, P V and state wgmma"},
    {"int8", "scores INT8 per-thread (mma.sync m16n8k32), no smoothing; P V and state bf16"},
    {"int8-smooth", "scores INT8 per-thread with Q+K smoothing and both correction terms; P V and state bf16"},
    {"int4", "scores INT4 per-thread (mma.sync m16n8k64), no smoothing; P V and state bf16"},
    {"int4-smooth", "scores INT4 per-thread with Q+K smoothing and both correction terms; P V and state bf16"},
    {"bf16-fp8", "scores bf16; P V in E4M3 (wgmma, P per token, V per channel, flush every 2 MMAs)"},
    {"fp8", "proposal 050: scores E4M3 per sub-chunk (mma.sync m16n8k32, Hopper's f16 path) and P V E4M3"},
    {"int8-smooth-fp8", "the Hopper variant: scores INT8 per-thread smoothed, P V E4M3"},
    {"int4-fp8", "scores INT4 per-thread unsmoothed, P V E4M3"},
    {"int4-smooth-fp8", "the proposal: scores INT4 per-thread smoothed, P V E4M3"},
};

}  // namespace

const std::vector<PresetInfo>& preset_list() { return kPresets; }

Pipeline preset(std::string_view name, const ChunkShape& shape) {
  Pipeline p;
  p.name = std::string(name);
  p.shape = shape;
  p.scores.instruction = std::string(kMmaBf16);
  p.values.instruction = std::string(kWgmmaBf16);
  p.state.instruction = std::string(kWgmmaBf16);
  const auto fp8_values = [&] {
    p.values = {std::string(kWgmmaE4m3), Granularity::per_token, Granularity::per_channel, kFp8MmasPerFlush};
  };
  const auto integer_scores = [&](std::string_view instruction, bool smooth) {
    p.scores = {std::string(instruction), Granularity::per_thread, smooth};
  };
  if (name == "fp32") {
    p.scores.instruction = p.values.instruction = p.state.instruction = std::string(kFp32Fma);
  } else if (name == "bf16") {
  } else if (name == "int8" || name == "int8-smooth") {
    integer_scores(kMmaS8, name == "int8-smooth");
  } else if (name == "int4" || name == "int4-smooth") {
    integer_scores(kMmaS4, name == "int4-smooth");
  } else if (name == "bf16-fp8") {
    fp8_values();
  } else if (name == "fp8") {
    p.scores = {std::string(kMmaE4m3), Granularity::per_block, false};
    fp8_values();
  } else if (name == "int8-smooth-fp8") {
    integer_scores(kMmaS8, true);
    fp8_values();
  } else if (name == "int4-fp8" || name == "int4-smooth-fp8") {
    integer_scores(kMmaS4, name == "int4-smooth-fp8");
    fp8_values();
  } else {
    std::string names;
    for (const PresetInfo& i : kPresets) names += (names.empty() ? "" : ", ") + std::string(i.name);
    throw std::invalid_argument(fmt::format("unknown linear-attention preset '{}' (presets: {})", name, names));
  }
  for (const PresetInfo& i : kPresets)
    if (i.name == name) p.follows = std::string(i.summary);
  return p;
}

// ---- forward -------------------------------------------------------------------------------------

namespace {

float value_of(std::uint32_t bits) { return attention::steps::bits_float(bits); }

MatrixCode cast(const Format& f, const MatrixF& x) {
  MatrixCode codes(x.rows(), x.cols());
  const ConversionOptions rn{.rounding = Rounding::nearest_even,
                             .overflow = f.has_inf() ? Overflow::inf : Overflow::saturate};
  encode(f, std::span<const float>(x.data(), std::size_t(x.size())), std::span<Code>(codes.data(), std::size_t(codes.size())), rn);
  return codes;
}

MatrixCode fp32_bits(const MatrixF& x) {
  MatrixCode bits(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.size(); ++i) bits.data()[i] = attention::steps::float_bits(x.data()[i]);
  return bits;
}

// A quantized or cast operand of an MMA: codes, and the scale of each row (rows of Q~, K~, P) or
// column (V); no scales for a cast.
struct Operand {
  MatrixCode codes;
  std::vector<float> scales;
  bool scaled() const { return !scales.empty(); }
};

struct Context {
  const Pipeline& p;
  int dk = 0, dv = 0;
  Instructions in;
  std::optional<quant::QuantSpec> q_spec, k_spec, p_spec, v_spec;
  quant::QuantizedTensor scratch;

  Context(const Pipeline& pipeline, int dk_, int dv_) : p(pipeline), dk(dk_), dv(dv_) {
    if (auto why = resolve(p, dv, in)) throw std::invalid_argument(*why);
    q_spec = p.score_spec(quant::Operand::q);
    k_spec = p.score_spec(quant::Operand::k);
    p_spec = p.p_spec();
    v_spec = p.v_spec();
  }

  // Rows of x as MMA A operand rows (by_rows) or V's columns (per-channel scales).
  Operand operand(const MatrixF& x, const std::optional<quant::QuantSpec>& spec, const Format& element,
                  bool scale_per_column, std::string_view name) {
    if (!spec) return {cast(element, x), {}};
    quant::quantize_into(x, *spec, scratch, name);
    Operand o{scratch.codes.topLeftCorner(x.rows(), scratch.padded_cols), {}};
    const int count = int(scale_per_column ? x.cols() : x.rows());
    o.scales.resize(std::size_t(count));
    for (int i = 0; i < count; ++i)
      o.scales[std::size_t(i)] = scratch.scales[std::size_t(scale_per_column ? scratch.group_of(0, i) : scratch.group_of(i, 0))];
    return o;
  }
};

// D = A B (+ C) through an instruction: A (M x K) codes, B (K x N) codes, C fp32 bits.
MatrixCode product(const mma::Instruction& in, const MatrixCode& a, const MatrixCode& b, const MatrixCode& c,
                   int mmas_per_flush = 0) {
  return mma::gemm(in, {a, b, c}, mma::KLoop{mmas_per_flush, true});
}

// Widens codes to the same number of columns (the quantizer pads to whole instructions).
MatrixCode padded_cols(const MatrixCode& m, Eigen::Index cols) {
  if (m.cols() == cols) return m;
  MatrixCode out = MatrixCode::Zero(m.rows(), cols);
  out.leftCols(m.cols()) = m;
  return out;
}

struct Chunk {
  int first = 0, length = 0;
  MatrixF g;  // length x dk: log2 running sums
};

// The inter-sub-chunk scores of query sub-chunk i against keys [0, i c): into P.
void score_strip(Context& cx, const MatrixF& q, const MatrixF& k, const Chunk& ch, int i, MatrixF& P) {
  const int c = cx.p.shape.sub_chunk, dk = cx.dk;
  const int qi = i * c, qn = std::min(c, ch.length - qi), keys = i * c;
  const float* n = &ch.g(qi, 0);
  MatrixF qg(qn, dk), kg(keys, dk);
  for (int t = 0; t < qn; ++t)
    for (int x = 0; x < dk; ++x) qg(t, x) = steps::gated(q(ch.first + qi + t, x), ch.g(qi + t, x), n[x]);
  for (int s = 0; s < keys; ++s)
    for (int x = 0; x < dk; ++x) kg(s, x) = steps::gated(k(ch.first + s, x), n[x], ch.g(s, x));

  if (!cx.in.scores) {
    for (int t = 0; t < qn; ++t)
      for (int s = 0; s < keys; ++s) P(qi + t, s) = steps::dot(&qg(t, 0), &kg(s, 0), dk);
    return;
  }
  const bool smooth = cx.p.scores.smooth;
  quant::Smoothed<float> sq, sk;
  quant::smooth_into(qg, 0, smooth, sq);
  quant::smooth_into(kg, c, smooth, sk);
  const mma::Instruction& in = *cx.in.scores;
  Operand a = cx.operand(sq.residual, cx.q_spec, in.atom.a, false, "Q~");
  Operand b = cx.operand(sk.residual, cx.k_spec, in.atom.b, false, "K~");
  const Eigen::Index depth = std::max(a.codes.cols(), b.codes.cols());
  const MatrixCode d = product(in, padded_cols(a.codes, depth), padded_cols(b.codes, depth).transpose(),
                               MatrixCode::Zero(qn, keys));
  const bool integer = in.atom.d == formats::s32;
  std::vector<float> key_term(static_cast<std::size_t>(keys)), query_term(static_cast<std::size_t>(qn * i));
  if (smooth) {
    for (int s = 0; s < keys; ++s) key_term[std::size_t(s)] = steps::dot(&sq.means(0, 0), &sk.residual(s, 0), dk);
    if (cx.p.scores.correction == quant::ScoreCorrection::full)
      for (int t = 0; t < qn; ++t)
        for (int j = 0; j < i; ++j) query_term[std::size_t(t * i + j)] = steps::dot(&qg(t, 0), &sk.means(j, 0), dk);
  }
  for (int t = 0; t < qn; ++t)
    for (int s = 0; s < keys; ++s) {
      const std::uint32_t acc = d(t, s);
      float score = value_of(acc);
      if (a.scaled()) {
        const float scale = steps::score_scale(a.scales[std::size_t(t)], b.scales[std::size_t(s)]);
        score = integer ? steps::dequantize_score(std::int32_t(acc), scale) : steps::dequantize_score(score, scale);
      }
      if (smooth) score = steps::corrected_score(score, key_term[std::size_t(s)], query_term[std::size_t(t * i + s / c)]);
      P(qi + t, s) = score;
    }
}

MatrixF intra_output(Context& cx, const MatrixF& P, const MatrixF& v_chunk) {
  const int L = int(P.rows()), dv = cx.dv;
  MatrixF o(L, dv);
  if (!cx.in.values) {
    for (int t = 0; t < L; ++t)
      for (int x = 0; x < dv; ++x) {
        float acc = 0.0f;
        for (int s = 0; s <= t; ++s) acc = steps::fma_rn(P(t, s), v_chunk(s, x), acc);
        o(t, x) = acc;
      }
    return o;
  }
  const mma::Instruction& in = *cx.in.values;
  const Operand p = cx.operand(P, cx.p_spec, in.atom.a, false, "P");
  const Operand v = cx.operand(v_chunk, cx.v_spec, in.atom.b, true, "V");
  const MatrixCode r = product(in, p.codes, v.codes, MatrixCode::Zero(L, dv), cx.p.values.mmas_per_flush);
  for (int t = 0; t < L; ++t)
    for (int x = 0; x < dv; ++x)
      o(t, x) = p.scaled() ? steps::dequantize_value(value_of(r(t, x)), p.scales[std::size_t(t)], v.scales[std::size_t(x)])
                           : value_of(r(t, x));
  return o;
}

MatrixF inter_output(Context& cx, const MatrixF& q, const Chunk& ch, const MatrixF& state) {
  const int L = ch.length, dk = cx.dk, dv = cx.dv;
  MatrixF a(L, dk);
  for (int t = 0; t < L; ++t)
    for (int x = 0; x < dk; ++x) a(t, x) = steps::gated(q(ch.first + t, x), ch.g(t, x), 0.0f);
  MatrixF o(L, dv);
  if (!cx.in.state) {
    for (int t = 0; t < L; ++t)
      for (int y = 0; y < dv; ++y) {
        float acc = 0.0f;
        for (int x = 0; x < dk; ++x) acc = steps::fma_rn(a(t, x), state(x, y), acc);
        o(t, y) = acc;
      }
    return o;
  }
  const mma::Instruction& in = *cx.in.state;
  const MatrixCode r = product(in, cast(in.atom.a, a), cast(in.atom.b, state), MatrixCode::Zero(L, dv));
  for (Eigen::Index i = 0; i < r.size(); ++i) o.data()[i] = value_of(r.data()[i]);
  return o;
}

MatrixF next_state(Context& cx, const MatrixF& k, const MatrixF& v, const Chunk& ch, const MatrixF& state) {
  const int L = ch.length, dk = cx.dk, dv = cx.dv;
  const float* last = &ch.g(L - 1, 0);
  MatrixF decayed(dk, dv), kd_t(dk, L);
  for (int x = 0; x < dk; ++x) {
    const float factor = steps::decay(last[x], 0.0f);
    for (int y = 0; y < dv; ++y) decayed(x, y) = steps::mul_rn(state(x, y), factor);
    for (int s = 0; s < L; ++s) kd_t(x, s) = steps::gated(k(ch.first + s, x), last[x], ch.g(s, x));
  }
  MatrixF out(dk, dv);
  if (!cx.in.state) {
    for (int x = 0; x < dk; ++x)
      for (int y = 0; y < dv; ++y) {
        float acc = decayed(x, y);
        for (int s = 0; s < L; ++s) acc = steps::fma_rn(kd_t(x, s), v(ch.first + s, y), acc);
        out(x, y) = acc;
      }
    return out;
  }
  const mma::Instruction& in = *cx.in.state;
  const MatrixCode r =
      product(in, cast(in.atom.a, kd_t), cast(in.atom.b, MatrixF(v.middleRows(ch.first, L))), fp32_bits(decayed));
  for (Eigen::Index i = 0; i < r.size(); ++i) out.data()[i] = value_of(r.data()[i]);
  return out;
}

// The shared prologue: inputs checked, the pipeline validated for their dimensions.
void check(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v, const MatrixF& log_alpha,
           const MatrixF* initial_state) {
  const MatrixD s0 = initial_state ? initial_state->cast<double>() : MatrixD();
  if (auto why = check_linear_inputs(q.cast<double>(), k.cast<double>(), v.cast<double>(), log_alpha.cast<double>(),
                                     initial_state ? &s0 : nullptr))
    throw std::invalid_argument(*why);
  if (auto why = pipeline.validate(int(q.cols()), int(v.cols())))
    throw std::invalid_argument("pipeline " + pipeline.name + ": " + *why);
}

// Calls body(chunk) for every chunk in order, with its log2 running sums.
template <class Body>
void for_each_chunk(const Pipeline& pipeline, const MatrixF& log_alpha, Body&& body) {
  const int tokens = int(log_alpha.rows()), dk = int(log_alpha.cols()), C = pipeline.shape.chunk;
  for (int first = 0; first < tokens; first += C) {
    Chunk ch{first, std::min(C, tokens - first), MatrixF(std::min(C, tokens - first), dk)};
    for (int t = 0; t < ch.length; ++t)
      for (int x = 0; x < dk; ++x) {
        const float l = steps::log2_gate(log_alpha(first + t, x));
        ch.g(t, x) = t == 0 ? l : steps::gate_sum(ch.g(t - 1, x), l);
      }
    body(ch);
  }
}

}  // namespace

IntraResult intra_chunk(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                        const MatrixF& log_alpha) {
  check(pipeline, q, k, v, log_alpha, nullptr);
  const int tokens = int(q.rows()), dk = int(q.cols()), dv = int(v.cols()), c = pipeline.shape.sub_chunk;
  Context cx(pipeline, dk, dv);
  IntraResult r{MatrixF(tokens, dv), MatrixF::Zero(tokens, pipeline.shape.chunk)};
  for_each_chunk(pipeline, log_alpha, [&](const Chunk& ch) {
    const int first = ch.first;
    MatrixF P = MatrixF::Zero(ch.length, ch.length);
    for (int i = 0; i * c < ch.length; ++i) {
      if (i > 0) score_strip(cx, q, k, ch, i, P);
      const int qi = i * c, qn = std::min(c, ch.length - qi);
      for (int t = qi; t < qi + qn; ++t)
        for (int s = qi; s <= t; ++s)
          P(t, s) = steps::diagonal_score(&q(first + t, 0), &ch.g(t, 0), &k(first + s, 0), &ch.g(s, 0), dk);
    }
    r.intra.middleRows(first, ch.length) = intra_output(cx, P, v.middleRows(first, ch.length));
    r.scores.block(first, 0, ch.length, ch.length) = P;
  });
  return r;
}

InterResult inter_chunk(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                        const MatrixF& log_alpha, const MatrixF* initial_state) {
  check(pipeline, q, k, v, log_alpha, initial_state);
  const int dk = int(q.cols()), dv = int(v.cols());
  Context cx(pipeline, dk, dv);
  InterResult r{MatrixF(q.rows(), dv), initial_state ? *initial_state : MatrixF::Zero(dk, dv)};
  for_each_chunk(pipeline, log_alpha, [&](const Chunk& ch) {
    r.inter.middleRows(ch.first, ch.length) = inter_output(cx, q, ch, r.state);
    r.state = next_state(cx, k, v, ch, r.state);
  });
  return r;
}

ForwardResult combine(const InterResult& inter, const IntraResult& intra) {
  if (inter.inter.rows() != intra.intra.rows() || inter.inter.cols() != intra.intra.cols())
    throw std::invalid_argument(fmt::format("combine: inter-chunk output {} x {}, intra-chunk {} x {}",
                                            inter.inter.rows(), inter.inter.cols(), intra.intra.rows(), intra.intra.cols()));
  ForwardResult r{MatrixF(intra.intra.rows(), intra.intra.cols()), intra.intra, intra.scores, inter.state};
  for (Eigen::Index i = 0; i < r.output.size(); ++i)
    r.output.data()[i] = steps::add_outputs(inter.inter.data()[i], intra.intra.data()[i]);
  return r;
}

ForwardResult forward(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                      const MatrixF& log_alpha, const MatrixF* initial_state) {
  return combine(inter_chunk(pipeline, q, k, v, log_alpha, initial_state), intra_chunk(pipeline, q, k, v, log_alpha));
}

}  // namespace lowbit::linear
