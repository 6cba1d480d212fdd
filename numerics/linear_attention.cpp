#include "numerics/linear_attention.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace lowbit {
namespace {

std::optional<std::string> first_nonfinite(const MatrixD& m, const char* name) {
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c)
      if (!std::isfinite(m(r, c))) return fmt::format("{} ({}, {}) is {}", name, r, c, m(r, c));
  return std::nullopt;
}

void require_inputs(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& log_alpha,
                    const MatrixD* initial_state) {
  if (auto why = check_linear_inputs(q, k, v, log_alpha, initial_state)) throw std::invalid_argument(*why);
}

}  // namespace

std::optional<std::string> ChunkShape::validate() const {
  if (sub_chunk < 1) return fmt::format("sub_chunk = {}: must be at least 1", sub_chunk);
  if (chunk < sub_chunk || chunk % sub_chunk != 0)
    return fmt::format("chunk = {}: must be a positive multiple of sub_chunk = {}", chunk, sub_chunk);
  return std::nullopt;
}

std::optional<std::string> check_linear_inputs(const MatrixD& q, const MatrixD& k, const MatrixD& v,
                                               const MatrixD& log_alpha, const MatrixD* initial_state) {
  if (q.rows() < 1 || q.cols() < 1) return fmt::format("Q is {} x {}: empty", q.rows(), q.cols());
  if (k.rows() != q.rows() || k.cols() != q.cols())
    return fmt::format("K is {} x {}, Q is {} x {}: they must match", k.rows(), k.cols(), q.rows(), q.cols());
  if (v.rows() != q.rows() || v.cols() < 1)
    return fmt::format("V is {} x {}: needs {} tokens and at least one channel", v.rows(), v.cols(), q.rows());
  if (log_alpha.rows() != k.rows() || log_alpha.cols() != k.cols())
    return fmt::format("log_alpha is {} x {}, K is {} x {}: one gate per key channel and token", log_alpha.rows(),
                       log_alpha.cols(), k.rows(), k.cols());
  if (initial_state && (initial_state->rows() != k.cols() || initial_state->cols() != v.cols()))
    return fmt::format("the initial state is {} x {}, expected d_k x d_v = {} x {}", initial_state->rows(),
                       initial_state->cols(), k.cols(), v.cols());
  for (auto [m, name] : {std::pair{&q, "Q"}, {&k, "K"}, {&v, "V"}, {&log_alpha, "log_alpha"}})
    if (auto why = first_nonfinite(*m, name)) return why;
  if (initial_state)
    if (auto why = first_nonfinite(*initial_state, "the initial state")) return why;
  for (Eigen::Index r = 0; r < log_alpha.rows(); ++r)
    for (Eigen::Index c = 0; c < log_alpha.cols(); ++c)
      if (log_alpha(r, c) > 0)
        return fmt::format("log_alpha ({}, {}) is {}: a gate must be at most 1 (log_alpha <= 0)", r, c,
                           log_alpha(r, c));
  return std::nullopt;
}

LinearAttentionResult gla_recurrent(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& log_alpha,
                                    const MatrixD* initial_state) {
  require_inputs(q, k, v, log_alpha, initial_state);
  const Eigen::Index tokens = q.rows(), dk = q.cols(), dv = v.cols();
  LinearAttentionResult r{MatrixD(tokens, dv), initial_state ? *initial_state : MatrixD::Zero(dk, dv)};
  for (Eigen::Index t = 0; t < tokens; ++t) {
    for (Eigen::Index c = 0; c < dk; ++c) r.state.row(c) = std::exp(log_alpha(t, c)) * r.state.row(c) + k(t, c) * v.row(t);
    r.output.row(t) = q.row(t) * r.state;
  }
  return r;
}

MatrixD chunk_log_gate_sums(const MatrixD& log_alpha, int chunk) {
  if (chunk < 1) throw std::invalid_argument(fmt::format("chunk = {}: must be at least 1", chunk));
  MatrixD g(log_alpha.rows(), log_alpha.cols());
  for (Eigen::Index t = 0; t < log_alpha.rows(); ++t)
    g.row(t) = t % chunk == 0 ? MatrixD(log_alpha.row(t)) : MatrixD(g.row(t - 1) + log_alpha.row(t));
  return g;
}

LinearAttentionResult gla_chunkwise(const MatrixD& q, const MatrixD& k, const MatrixD& v, const MatrixD& log_alpha,
                                    const ChunkShape& shape, const MatrixD* initial_state) {
  if (auto why = shape.validate()) throw std::invalid_argument("chunk shape: " + *why);
  require_inputs(q, k, v, log_alpha, initial_state);
  const int tokens = int(q.rows()), dk = int(q.cols()), dv = int(v.cols()), c = shape.sub_chunk;
  const MatrixD g = chunk_log_gate_sums(log_alpha, shape.chunk);
  LinearAttentionResult r{MatrixD::Zero(tokens, dv), initial_state ? *initial_state : MatrixD::Zero(dk, dv)};
  for (int first = 0; first < tokens; first += shape.chunk) {
    const int length = std::min(shape.chunk, tokens - first);
    const auto rows = [&](const MatrixD& m, int from, int count) { return m.middleRows(first + from, count); };
    const MatrixD gc = rows(g, 0, length);
    // Inter-chunk: the state before the chunk, decayed to each token.
    r.output.middleRows(first, length) = (rows(q, 0, length).array() * gc.array().exp()).matrix() * r.state;
    for (int i = 0; i * c < length; ++i) {
      const int qi = i * c, qn = std::min(c, length - qi);
      const Eigen::RowVectorXd n = gc.row(qi);
      const MatrixD q_gated = (rows(q, qi, qn).array() * (gc.middleRows(qi, qn).rowwise() - n).array().exp()).matrix();
      for (int j = 0; j < i; ++j) {
        const int kj = j * c;
        const MatrixD k_gated =
            (rows(k, kj, c).array() * ((-gc.middleRows(kj, c)).rowwise() + n).array().exp()).matrix();
        r.output.middleRows(first + qi, qn) += (q_gated * k_gated.transpose()) * rows(v, kj, c);
      }
      for (int t = 0; t < qn; ++t)
        for (int s = 0; s <= t; ++s) {
          const double p = (rows(q, qi + t, 1).array() * rows(k, qi + s, 1).array() *
                            (gc.row(qi + t) - gc.row(qi + s)).array().exp())
                               .sum();
          r.output.row(first + qi + t) += p * v.row(first + qi + s);
        }
    }
    const Eigen::RowVectorXd last = gc.row(length - 1);
    const MatrixD k_decayed = (rows(k, 0, length).array() * ((-gc).rowwise() + last).array().exp()).matrix();
    r.state = last.array().exp().matrix().asDiagonal() * r.state + k_decayed.transpose() * rows(v, 0, length);
  }
  return r;
}

MatrixD gla_chunk_scores(const MatrixD& q, const MatrixD& k, const MatrixD& log_alpha, int chunk) {
  const MatrixD v_unused = MatrixD::Zero(q.rows(), 1);
  require_inputs(q, k, v_unused, log_alpha, nullptr);
  const MatrixD g = chunk_log_gate_sums(log_alpha, chunk);
  const int tokens = int(q.rows());
  MatrixD p = MatrixD::Zero(tokens, chunk);
  for (int t = 0; t < tokens; ++t) {
    const int first = t / chunk * chunk;
    for (int s = first; s <= t; ++s)
      p(t, s - first) = (q.row(t).array() * k.row(s).array() * (g.row(t) - g.row(s)).array().exp()).sum();
  }
  return p;
}

ScoreBlock score_block(int token, int column, int tokens, const ChunkShape& shape) {
  const int first = token / shape.chunk * shape.chunk, key = first + column;
  if (column < 0 || column >= shape.chunk || key > token || key >= tokens || token >= tokens) return ScoreBlock::none;
  return (key - first) / shape.sub_chunk == (token - first) / shape.sub_chunk ? ScoreBlock::diagonal
                                                                                : ScoreBlock::inter_sub_chunk;
}

}  // namespace lowbit
