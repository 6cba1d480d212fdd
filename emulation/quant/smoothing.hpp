// Smoothing Q, K, V before quantization, and the corrections that undo it (SageAttention2 §3.2,
// §3.6; the linear-attention proposal). Templates over the scalar, so the identities can be
// checked in exact rational arithmetic (boost::multiprecision::cpp_rational).
//
//   gamma(Q_i) = Q_i - qbar_i   (qbar_i: channel mean of Q block i, b_q rows)
//   gamma(K_j) = K_j - kbar_j   (kbar: channel mean of all of K, or of K block j)
//   Q_i K_j^T  = gamma(Q_i) gamma(K_j)^T            <- quantized product
//              + qbar_i gamma(K_j)^T                <- Delta S: the GEMV, one row per Q block
//              + (gamma(Q_i) + qbar_i) kbar_j^T     <- B: the row bias = Q_i kbar_j^T
// B is constant along a row of S when K has one mean, so softmax removes it (SageAttention2
// drops it); with a mean per K block, or without softmax (linear attention), it stays.
//   V: gamma(V) = V - vbar;  P V = P gamma(V) + rowsum(P) vbar  (rowsum(P) = 1 after softmax).
#pragma once

#include <algorithm>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "numerics/matrix.hpp"

namespace lowbit::quant {

// Means of float data are accumulated in double and rounded once.
template <class T>
using MeanAccumulator = std::conditional_t<std::is_same_v<T, float>, double, T>;

template <class T>
struct Smoothed {
  Matrix<T> residual;  // x - mean of its block
  Matrix<T> means;     // one row per block of block_rows rows (one row: block_rows = 0)
  int block_rows = 0;  // 0: one mean over all rows
  bool enabled = true;

  int block_of(int row) const { return block_rows > 0 ? row / block_rows : 0; }
};

// Subtracts the channel mean of each block of rows (block_rows = 0: of all rows; a ragged last
// block uses its own rows) into `out`, reusing its storage. enabled = false keeps x and records
// zero means. The mean of a block is float(sum / count) with the sum in double: mean_chunk = 0
// adds the rows in order; mean_chunk = c > 0 sums each run of c rows in order from zero and adds
// those partial sums in order (as a kernel whose thread blocks each sum c keys: SageAttention2's
// K mean, Sage2HopperRecipe::key_mean_chunk).
template <class T>
void smooth_into(const Matrix<T>& x, int block_rows, bool enabled, Smoothed<T>& out, int mean_chunk = 0) {
  if (block_rows < 0) throw std::invalid_argument("smooth: block_rows=" + std::to_string(block_rows) + " is negative");
  if (mean_chunk < 0) throw std::invalid_argument("smooth: mean_chunk=" + std::to_string(mean_chunk) + " is negative");
  using A = MeanAccumulator<T>;
  const int rows = int(x.rows()), cols = int(x.cols());
  const int blocks = block_rows > 0 ? (rows + block_rows - 1) / block_rows : 1;
  out.block_rows = block_rows;
  out.enabled = enabled;
  out.means.setZero(blocks, cols);
  if (!enabled) {
    out.residual = x;
    return;
  }
  out.residual.resize(rows, cols);
  std::vector<A> sum(static_cast<std::size_t>(cols)), partial(static_cast<std::size_t>(cols));
  for (int b = 0; b < blocks; ++b) {  // row by row: the memory order of row-major tensors
    const int first = block_rows > 0 ? b * block_rows : 0;
    const int last = block_rows > 0 ? std::min(rows, first + block_rows) : rows;
    const int run = mean_chunk > 0 ? mean_chunk : last - first;
    std::fill(sum.begin(), sum.end(), A(0));
    for (int chunk = first; chunk < last; chunk += run) {
      std::fill(partial.begin(), partial.end(), A(0));  // 0 + x is exact: one chunk is the plain sum
      for (int r = chunk; r < std::min(last, chunk + run); ++r)
        for (int c = 0; c < cols; ++c) partial[std::size_t(c)] += A(x(r, c));
      for (int c = 0; c < cols; ++c) sum[std::size_t(c)] += partial[std::size_t(c)];
    }
    for (int c = 0; c < cols; ++c) out.means(b, c) = T(sum[std::size_t(c)] / A(last - first));
    for (int r = first; r < last; ++r)
      for (int c = 0; c < cols; ++c) out.residual(r, c) = x(r, c) - out.means(b, c);
  }
}

template <class T>
Smoothed<T> smooth(const Matrix<T>& x, int block_rows, bool enabled = true, int mean_chunk = 0) {
  Smoothed<T> s;
  smooth_into(x, block_rows, enabled, s, mean_chunk);
  return s;
}

// Delta S: qbar_b gamma(K)^T for each Q block b (rows: Q blocks, columns: keys).
template <class T>
Matrix<T> score_correction(const Smoothed<T>& q, const Smoothed<T>& k) {
  return q.means * k.residual.transpose();
}

// B[i][jb] = Q_i kbar_jb = (gamma(Q_i) + qbar_i) kbar_jb (columns: K blocks).
template <class T>
Matrix<T> row_bias(const Smoothed<T>& q, const Smoothed<T>& k) {
  Matrix<T> q_full = q.residual;
  for (int r = 0; r < int(q_full.rows()); ++r) q_full.row(r) += q.means.row(q.block_of(r));
  return q_full * k.means.transpose();
}

enum class ScoreCorrection {
  softmax,  // + Delta S; B dropped (needs one K mean, so that B is constant along each row)
  full,     // + Delta S + B: Q K^T itself (linear attention, or per-block K means)
};

// S = product + Delta S (+ B), where product ~ gamma(Q) gamma(K)^T (quantized or exact).
template <class T>
Matrix<T> correct_scores(const Matrix<T>& product, const Smoothed<T>& q, const Smoothed<T>& k, ScoreCorrection which) {
  if (product.rows() != q.residual.rows() || product.cols() != k.residual.rows())
    throw std::invalid_argument("correct_scores: product is " + std::to_string(product.rows()) + "x" +
                                std::to_string(product.cols()) + ", Q has " + std::to_string(q.residual.rows()) +
                                " rows and K " + std::to_string(k.residual.rows()));
  if (which == ScoreCorrection::softmax && k.enabled && k.means.rows() != 1)
    throw std::invalid_argument(
        "correct_scores: K was smoothed per block, so its row bias Q kbar_j differs between K blocks and softmax "
        "does not remove it; use ScoreCorrection::full");
  Matrix<T> s = product;
  if (q.enabled) {
    const Matrix<T> delta = score_correction(q, k);
    for (int r = 0; r < int(s.rows()); ++r) s.row(r) += delta.row(q.block_of(r));
  }
  if (which == ScoreCorrection::full && k.enabled) {
    const Matrix<T> bias = row_bias(q, k);
    for (int r = 0; r < int(s.rows()); ++r)
      for (int j = 0; j < int(s.cols()); ++j) s(r, j) += bias(r, k.block_of(j));
  }
  return s;
}

// Adds back the V mean: O = O' + w vbar^T, w = rowsum of the weights that multiplied V
// (all ones after softmax; rowsum(S .* D) in linear attention).
template <class T>
Matrix<T> correct_output(const Matrix<T>& output, const Smoothed<T>& v, const Matrix<T>& row_weight_sums) {
  if (v.means.rows() != 1) throw std::invalid_argument("correct_output: V must be smoothed with one mean");
  return output + row_weight_sums * v.means;
}

}  // namespace lowbit::quant
