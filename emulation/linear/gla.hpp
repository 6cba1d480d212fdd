// Chunkwise gated linear attention (GLA with secondary chunking) run the way a GPU kernel runs
// it, with the intra-chunk matmuls in low precision: the setting of the INT4/FP8 smoothing
// proposal (../shared/papers/int4-smoothing-for-chunkwise-linear-attention-proposal.md).
//
// A Pipeline is a record of three matmul stages, each an instruction of the MMA registry (or
// fp32-fma: one fp32 fma per product in index order, a SIMT loop) with its operands' quantization:
//   scores: the inter-sub-chunk Q~ K~^T (query sub-chunk i against every key sub-chunk j < i)
//   values: the intra-chunk P V
//   state:  the inter-chunk (Q .* Lambda) S and the state update K_dec^T V
// forward() runs one head, chunk by chunk, in the steps of linear_steps.hpp:
//   a. gates: log2 running sums g within the chunk (fp32)
//   b. for each query sub-chunk i: Q~_i = gated(Q_i, g, n_i) once, K~ = gated(K_j, n_i, g) for every
//      j < i (the keys' factor depends on i: a kernel gates and quantizes K per (i, j) pair);
//      smoothing (scores.smooth): Q~_i minus its mean, each K~_j minus its own mean
//      (quant::smooth_into, means in double rounded once); quantize Q~_i and the K~ strip
//      (quant::quantize: per-thread groups of the score instruction's tile, sub_chunk x sub_chunk;
//      per-block: one scale per sub-chunk; per-token); the MMA through mma::gemm over d_k;
//      dequantize once per pair of scales; smoothed: + qbar . gamma(K~_s) + Q~_t . kbar_j (both
//      terms: without softmax the row bias stays, ScoreCorrection::full)
//   c. the diagonal blocks in fp32 (diagonal_score)
//   d. P (L x L, zero above the diagonal) times V_chunk: P and V quantized (values.p: cast, one
//      scale per chunk, or per row; values.v: cast or per channel over the chunk), the MMA through
//      mma::gemm (two-level accumulation with values.mmas_per_flush), dequantize_value
//   e. o = (gated(Q, g, 0) S) + o_intra; S <- S .* decay(g_last) + K_dec^T V (the MMA takes the
//      decayed S as its accumulator, as the kernel's registers hold it)
// Element casts (granularity none) round to nearest even; quantized codes saturate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "emulation/attention/pipeline.hpp"
#include "emulation/mma/instruction.hpp"
#include "emulation/quant/quantize.hpp"
#include "emulation/quant/smoothing.hpp"
#include "numerics/linear_attention.hpp"
#include "numerics/matrix.hpp"

namespace lowbit::linear {

// The attention pipeline's vocabulary (emulation/attention/pipeline.hpp): kFp32Fma (no tensor
// core: one fp32 fma per product, in index order, from the accumulator) and Granularity. The
// stages here take: scores none (a cast), per-thread, per-warp (what one thread / warp holds in the
// score instruction's tile), per-block (one scale per sub-chunk of Q~ or K~), per-token; values.p
// none, per-block (one scale for the chunk's P), per-token (per row of P); values.v none,
// per-channel (over the chunk's tokens).
using attention::Granularity;
using attention::kFp32Fma;

struct ScoreStage {
  std::string instruction = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32";
  Granularity granularity = Granularity::none;
  bool smooth = false;  // Q~ and K~ minus their sub-chunk means, with the correction terms
  // full: + qbar . gamma(K~_s) + Q~_t . kbar_j (exact); softmax: the row bias Q~_t . kbar_j dropped,
  // as SageAttention2 drops it under softmax (an ablation: without softmax it does not vanish).
  quant::ScoreCorrection correction = quant::ScoreCorrection::full;
};

struct ValueStage {
  std::string instruction = "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16";  // nN: n = d_v
  Granularity p = Granularity::none;  // none, per_block (the chunk), per_token
  Granularity v = Granularity::none;  // none, per_channel
  int mmas_per_flush = 0;             // two-level accumulation: MMAs per fresh accumulator (0: one)
};

struct StateStage {
  std::string instruction = "wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16";  // nN: n = d_v
};

struct Pipeline {
  std::string name;
  std::string follows;  // what it models
  std::string arch = "sm_90";
  ChunkShape shape;
  ScoreStage scores;
  ValueStage values;
  StateStage state;

  // Why this pipeline cannot run heads of key dimension dk and value dimension dv, or nothing.
  std::optional<std::string> validate(int dk, int dv) const;
  // The stages' instructions, "nN" resolved (scores: n = sub_chunk; values, state: n = d_v); none
  // for fp32-fma. Throw mma::UnknownInstruction.
  std::optional<mma::Instruction> score_instruction() const;
  std::optional<mma::Instruction> value_instruction(int dv) const;
  std::optional<mma::Instruction> state_instruction(int dv) const;
  // The scores' per-thread tiling (validate() first): one sub_chunk x sub_chunk tile of the
  // score instruction, computed by sub_chunk / m thread units.
  quant::ThreadTiling score_tiling() const;
  // The quantizer specs (validate() first); none where the operands are cast. Q~ and K~ are
  // quantized per query sub-chunk i (Q~_i; the K~ strip of every j < i, whose per-thread and
  // per-block groups repeat every sub-chunk); P of one chunk (per-block: one scale, per_tensor over
  // the chunk); V of one chunk (per channel).
  std::optional<quant::QuantSpec> score_spec(quant::Operand operand) const;
  std::optional<quant::QuantSpec> p_spec() const;
  std::optional<quant::QuantSpec> v_spec() const;
};

// ---- presets -------------------------------------------------------------------------------------

struct PresetInfo {
  std::string_view name, summary;
};
const std::vector<PresetInfo>& preset_list();
// Throws std::invalid_argument listing the presets for an unknown name.
Pipeline preset(std::string_view name, const ChunkShape& shape = {});

// ---- forward -------------------------------------------------------------------------------------

// A kernel splits the forward pass as fla's chunk_gla does: the intra-chunk part (scores, P V)
// needs no state; the inter-chunk part (the state before each chunk, its contribution to the
// output) needs no scores. forward() = combine(inter_chunk(), intra_chunk()), element by element
// o = add_outputs(inter, intra).
struct IntraResult {
  MatrixF intra;   // tokens x d_v: the intra-chunk output (what an intra-chunk kernel writes)
  MatrixF scores;  // tokens x C: P as the P V stage receives it (gla_chunk_scores' layout)
};
struct InterResult {
  MatrixF inter;  // tokens x d_v: (Q .* Lambda) S, S the state before each token's chunk
  MatrixF state;  // d_k x d_v after the last chunk
};
struct ForwardResult {
  MatrixF output;  // tokens x d_v: inter-chunk + intra-chunk
  MatrixF intra;   // tokens x d_v
  MatrixF scores;  // tokens x C
  MatrixF state;   // d_k x d_v after the last chunk
};

// One head. Each throws std::invalid_argument naming the input for bad shapes or values
// (NaN/Inf, log_alpha > 0; numerics' check_linear_inputs) and for a pipeline that does not validate.
IntraResult intra_chunk(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                        const MatrixF& log_alpha);
InterResult inter_chunk(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                        const MatrixF& log_alpha, const MatrixF* initial_state = nullptr);
ForwardResult combine(const InterResult& inter, const IntraResult& intra);
ForwardResult forward(const Pipeline& pipeline, const MatrixF& q, const MatrixF& k, const MatrixF& v,
                      const MatrixF& log_alpha, const MatrixF* initial_state = nullptr);

}  // namespace lowbit::linear
