#include "numerics/attention_backward_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "numerics/parallel.hpp"

namespace lowbit {
namespace {

constexpr int kTile = 64;

MatrixD rows_of(const Tensor4& t, int b, int h, int first, int count) {
  return MatrixView<float>(t.row(b, h, first), count, t.dim).cast<double>();
}

// p (rows x cols) of queries [q0, q0 + rows) and keys [k0, k0 + cols) from their lse; masked: 0.
void probabilities(const MatrixD& q, const MatrixD& k, const double* lse, int q0, int k0, bool causal, double scale,
                   MatrixD& p) {
  p.noalias() = q * k.transpose();
  for (Eigen::Index r = 0; r < p.rows(); ++r)
    for (Eigen::Index c = 0; c < p.cols(); ++c)
      p(r, c) = causal && k0 + c > q0 + r ? 0.0 : std::exp(p(r, c) * scale - lse[r]);
}

}  // namespace

ReferenceGradients reference_attention_backward(const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                                const Tensor4& d_out, const ReferenceOptions& options) {
  if (d_out.batch != q.batch || d_out.heads != q.heads || d_out.tokens != q.tokens || d_out.dim != v.dim)
    throw std::invalid_argument(fmt::format("reference_attention_backward: dO {} does not fit Q {} and V {}",
                                            d_out.shape_text(), q.shape_text(), v.shape_text()));
  ReferenceGradients out;
  out.forward = reference_attention(q, k, v, options);  // checks the other shapes
  const int group = q.heads / k.heads, d = q.dim, dv = v.dim;
  const double scale = 1.0 / std::sqrt(double(d));
  out.dq.assign(q.size(), 0.0);
  out.dk.assign(k.size(), 0.0);
  out.dv.assign(v.size(), 0.0);

  // D_i = dO_i . O_i.
  std::vector<double> delta(out.forward.lse.size());
  for (std::size_t row = 0; row < delta.size(); ++row) {
    double sum = 0;
    for (int c = 0; c < dv; ++c)
      sum += double(d_out.values[row * std::size_t(dv) + std::size_t(c)]) * out.forward.output[row * std::size_t(dv) + std::size_t(c)];
    delta[row] = sum;
  }
  const auto row_index = [&](int b, int h, int t) {
    return (std::size_t(b) * std::size_t(q.heads) + std::size_t(h)) * std::size_t(q.tokens) + std::size_t(t);
  };

  // dS of a (query tile, key tile), with p.
  const auto tile_ds = [&](int b, int h, int q0, int rows, int k0, int cols, const MatrixD& qt, const MatrixD& kt,
                           MatrixD& p, MatrixD& ds) {
    const int g = h / group;
    probabilities(qt, kt, &out.forward.lse[row_index(b, h, q0)], q0, k0, options.causal, scale, p);
    const MatrixD dot = rows_of(d_out, b, h, q0, rows);
    ds.noalias() = dot * rows_of(v, b, g, k0, cols).transpose();  // dP
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) ds(r, c) = p(r, c) * (ds(r, c) - delta[row_index(b, h, q0 + r)]);
  };

  // Pass 1: dQ per tile of queries.
  const int q_tiles = (q.tokens + kTile - 1) / kTile, k_tiles = (k.tokens + kTile - 1) / kTile;
  parallel_for(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(q_tiles), options.threads,
               [&](std::size_t item, unsigned) {
                 const int tile = int(item % std::size_t(q_tiles)), h = int(item / std::size_t(q_tiles) % std::size_t(q.heads));
                 const int b = int(item / std::size_t(q_tiles) / std::size_t(q.heads)), g = h / group;
                 const int q0 = tile * kTile, rows = std::min(kTile, q.tokens - q0);
                 const int keys = options.causal ? std::min(k.tokens, q0 + rows) : k.tokens;
                 const MatrixD qt = rows_of(q, b, h, q0, rows);
                 MatrixD dq = MatrixD::Zero(rows, d), p, ds;
                 for (int k0 = 0; k0 < keys; k0 += kTile) {
                   const int cols = std::min(kTile, k.tokens - k0);
                   const MatrixD kt = rows_of(k, b, g, k0, cols);
                   tile_ds(b, h, q0, rows, k0, cols, qt, kt, p, ds);
                   dq.noalias() += ds * kt;
                 }
                 dq *= scale;
                 Eigen::Map<MatrixD>(out.dq.data() + q.offset(b, h, q0), rows, d) = dq;
               });

  // Pass 2: dK, dV per tile of keys, over every Q head of the KV head.
  parallel_for(std::size_t(k.batch) * std::size_t(k.heads) * std::size_t(k_tiles), options.threads,
               [&](std::size_t item, unsigned) {
                 const int tile = int(item % std::size_t(k_tiles)), g = int(item / std::size_t(k_tiles) % std::size_t(k.heads));
                 const int b = int(item / std::size_t(k_tiles) / std::size_t(k.heads));
                 const int k0 = tile * kTile, cols = std::min(kTile, k.tokens - k0);
                 const MatrixD kt = rows_of(k, b, g, k0, cols);
                 MatrixD dk = MatrixD::Zero(cols, d), dvt = MatrixD::Zero(cols, dv), p, ds;
                 for (int h = g * group; h < (g + 1) * group; ++h)
                   for (int q0 = options.causal ? k0 / kTile * kTile : 0; q0 < q.tokens; q0 += kTile) {
                     const int rows = std::min(kTile, q.tokens - q0);
                     const MatrixD qt = rows_of(q, b, h, q0, rows);
                     tile_ds(b, h, q0, rows, k0, cols, qt, kt, p, ds);
                     dk.noalias() += ds.transpose() * qt;
                     dvt.noalias() += p.transpose() * rows_of(d_out, b, h, q0, rows);
                   }
                 dk *= scale;
                 Eigen::Map<MatrixD>(out.dk.data() + k.offset(b, g, k0), cols, d) = dk;
                 Eigen::Map<MatrixD>(out.dv.data() + v.offset(b, g, k0), cols, dv) = dvt;
               });
  return out;
}

}  // namespace lowbit
