// Gated linear attention (GLA, Yang et al. 2024) in float64: the plain recurrence and the
// chunkwise form with secondary chunking, the references every emulated variant is measured
// against.
//
// One head: q, k (tokens x d_k), v (tokens x d_v), log_alpha (tokens x d_k, every value <= 0:
// the data-dependent forget gate alpha_t = exp(log_alpha_t) of each key channel).
//   recurrent:  S_t = diag(alpha_t) S_{t-1} + k_t v_t^T    (S: d_k x d_v, S_{-1} = initial state)
//               o_t = S_t^T q_t
// Chunkwise (chunks of C tokens, sub-chunks of c; the last of each may be shorter). In a chunk,
// G_t = sum of log_alpha over the chunk's tokens up to and including t, so the gate products are
// exp(G_t - G_s) = prod_{s < u <= t} alpha_u:
//   inter-chunk:  o_t = (q_t .* exp(G_t))^T S                       (S: the state before the chunk)
//   intra-chunk:  o_t += sum_{s <= t in the chunk} P_ts v_s,  P_ts = sum_c q_tc k_sc exp(G_tc - G_sc)
//     inter-sub-chunk blocks (query sub-chunk i, key sub-chunk j < i), with n = G at the first row
//     of sub-chunk i, both gate factors <= 1 (GLA's secondary chunking, stable in low precision):
//                   P_[i][j] = (Q_[i] .* exp(G_[i] - n)) (K_[j] .* exp(n - G_[j]))^T
//     diagonal blocks (s, t in one sub-chunk): P_ts elementwise in log space
//   state:        S <- diag(exp(G_last)) S + (K .* exp(G_last - G))^T V
// Both forms are the same function of the inputs; tests/linear checks that they agree.
#pragma once

#include <optional>
#include <string>

#include "numerics/matrix.hpp"

namespace lowbit {

struct LinearAttentionResult {
  MatrixD output;  // tokens x d_v
  MatrixD state;   // d_k x d_v: the state after the last token
};

struct ChunkShape {
  int chunk = 64;      // C: tokens per chunk
  int sub_chunk = 16;  // c: tokens per sub-chunk; divides C

  std::optional<std::string> validate() const;
};

// The shapes and values of one head's inputs, or why they do not fit: d_k, d_v >= 1, tokens >= 1,
// equal token counts, log_alpha shaped like k, every value finite and log_alpha <= 0; the
// initial state (optional) d_k x d_v and finite.
std::optional<std::string> check_linear_inputs(const MatrixD& q, const MatrixD& k, const MatrixD& v,
                                               const MatrixD& log_alpha, const MatrixD* initial_state = nullptr);

// Both throw std::invalid_argument with check_linear_inputs' reason (or the chunk shape's).
LinearAttentionResult gla_recurrent(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& log_alpha,
                                    const MatrixD* initial_state = nullptr);
LinearAttentionResult gla_chunkwise(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& log_alpha,
                                    const ChunkShape& shape, const MatrixD* initial_state = nullptr);

// G: each chunk's running sums of log_alpha (tokens x d_k), in token order.
MatrixD chunk_log_gate_sums(const MatrixD& log_alpha, int chunk);

// The intra-chunk scores P (after gating), tokens x C: row t holds P_ts for the keys s of t's
// chunk, in column s - (first token of the chunk); zero for s > t and past a short last chunk.
MatrixD gla_chunk_scores(const MatrixD& q, const MatrixD& k, const MatrixD& log_alpha, int chunk);

// Where a score of gla_chunk_scores' layout lies: on a diagonal sub-chunk block (s and t in one
// sub-chunk, s <= t), on an inter-sub-chunk block (s in an earlier sub-chunk), or nowhere (s > t,
// or past the end).
enum class ScoreBlock { none, diagonal, inter_sub_chunk };
ScoreBlock score_block(int token, int column, int tokens, const ChunkShape& shape);

}  // namespace lowbit
