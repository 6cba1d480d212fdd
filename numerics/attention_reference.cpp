#include "numerics/attention_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "numerics/compensated_sum.hpp"
#include "numerics/parallel.hpp"

namespace lowbit {
namespace {

constexpr int kQueryTile = 32, kKeyTile = 256;

// Scores of queries [q0, q0 + rows) against keys [k0, k0 + cols), masked entries -inf.
void scores(const MatrixD& q, const Tensor4& k, int b, int g, int q0, int k0, int cols, bool causal, double scale,
            MatrixD& s) {
  const MatrixD kt = MatrixView<float>(k.row(b, g, k0), cols, k.dim).cast<double>();
  s.noalias() = q * kt.transpose();
  s *= scale;
  if (causal)
    for (Eigen::Index r = 0; r < s.rows(); ++r)
      for (int c = 0; c < cols; ++c)
        if (k0 + c > q0 + r) s(r, c) = -std::numeric_limits<double>::infinity();
}

}  // namespace

ReferenceAttention reference_attention(const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                       const ReferenceOptions& options) {
  if (q.batch != k.batch || q.batch != v.batch || k.heads != v.heads || q.heads % k.heads != 0 ||
      k.tokens != v.tokens || q.dim != k.dim)
    throw std::invalid_argument(fmt::format("reference_attention: shapes do not fit: Q {}, K {}, V {}", q.shape_text(),
                                            k.shape_text(), v.shape_text()));
  const int group = q.heads / k.heads, dv = v.dim;
  const double scale = 1.0 / std::sqrt(double(q.dim));
  ReferenceAttention out;
  out.output.assign(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(q.tokens) * std::size_t(dv), 0.0);
  out.lse.assign(std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(q.tokens), 0.0);
  const int tiles = (q.tokens + kQueryTile - 1) / kQueryTile;
  const std::size_t items = std::size_t(q.batch) * std::size_t(q.heads) * std::size_t(tiles);
  parallel_for(items, options.threads, [&](std::size_t item, unsigned) {
    const int tile = int(item % std::size_t(tiles));
    const int h = int(item / std::size_t(tiles) % std::size_t(q.heads));
    const int b = int(item / std::size_t(tiles) / std::size_t(q.heads));
    const int g = h / group, q0 = tile * kQueryTile, rows = std::min(kQueryTile, q.tokens - q0);
    const MatrixD qt = MatrixView<float>(q.row(b, h, q0), rows, q.dim).cast<double>();
    // Keys any query of the tile sees.
    const int keys = options.causal ? std::min(k.tokens, q0 + rows) : k.tokens;
    MatrixD s;
    std::vector<double> m(static_cast<std::size_t>(rows), -std::numeric_limits<double>::infinity());
    for (int k0 = 0; k0 < keys; k0 += kKeyTile) {
      const int cols = std::min(kKeyTile, keys - k0);
      scores(qt, k, b, g, q0, k0, cols, options.causal, scale, s);
      for (int r = 0; r < rows; ++r) m[std::size_t(r)] = std::max(m[std::size_t(r)], s.row(r).maxCoeff());
    }
    const auto n_rows = static_cast<std::size_t>(rows);
    std::vector<CompensatedSum> l(n_rows), o(n_rows * std::size_t(dv));
    MatrixD p, part;
    for (int k0 = 0; k0 < keys; k0 += kKeyTile) {
      const int cols = std::min(kKeyTile, keys - k0);
      scores(qt, k, b, g, q0, k0, cols, options.causal, scale, s);
      p.resize(rows, cols);
      for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) p(r, c) = std::exp(s(r, c) - m[std::size_t(r)]);  // exp(-inf) = 0
      part.noalias() = p * MatrixView<float>(v.row(b, g, k0), cols, dv).cast<double>();
      for (int r = 0; r < rows; ++r) {
        l[std::size_t(r)].add(p.row(r).sum());
        for (int c = 0; c < dv; ++c) o[std::size_t(r) * std::size_t(dv) + std::size_t(c)].add(part(r, c));
      }
    }
    for (int r = 0; r < rows; ++r) {
      const std::size_t row = (std::size_t(b) * std::size_t(q.heads) + std::size_t(h)) * std::size_t(q.tokens) +
                              std::size_t(q0 + r);
      const double sum = l[std::size_t(r)].value();
      for (int c = 0; c < dv; ++c)
        out.output[row * std::size_t(dv) + std::size_t(c)] = o[std::size_t(r) * std::size_t(dv) + std::size_t(c)].value() / sum;
      out.lse[row] = m[std::size_t(r)] + std::log(sum);
    }
  });
  return out;
}

}  // namespace lowbit
