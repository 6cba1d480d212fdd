#include "emulation/quant/rotation.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace lowbit::quant {

MigratedQk smooth_attn(const MatrixF& q, const MatrixF& k, double alpha) {
  if (!(alpha > 0 && alpha <= 1)) throw std::invalid_argument("smooth_attn: alpha=" + std::to_string(alpha) + " is outside (0, 1]");
  if (q.cols() != k.cols())
    throw std::invalid_argument("smooth_attn: Q has " + std::to_string(q.cols()) + " channels, K " + std::to_string(k.cols()));
  MigratedQk m{q, k, std::vector<double>(std::size_t(q.cols()), 1.0)};
  for (int c = 0; c < int(q.cols()); ++c) {
    const double aq = q.col(c).cwiseAbs().maxCoeff(), ak = k.col(c).cwiseAbs().maxCoeff();
    if (aq > 0 && ak > 0) m.factor[std::size_t(c)] = std::pow(aq, alpha) / std::pow(ak, 1 - alpha);
    for (int r = 0; r < int(q.rows()); ++r) m.q(r, c) = float(double(q(r, c)) / m.factor[std::size_t(c)]);
    for (int r = 0; r < int(k.rows()); ++r) m.k(r, c) = float(double(k(r, c)) * m.factor[std::size_t(c)]);
  }
  return m;
}

RandomHadamard::RandomHadamard(int dim, std::uint64_t seed) {
  if (dim < 1 || (dim & (dim - 1)) != 0)
    throw std::invalid_argument("RandomHadamard: dim=" + std::to_string(dim) + " is not a power of two");
  std::mt19937_64 engine(seed);
  signs_.resize(std::size_t(dim));
  for (double& s : signs_) s = (engine() >> 63) ? -1.0 : 1.0;
}

namespace {
// In-place unnormalised Walsh-Hadamard transform (Sylvester order): v <- v Hadamard(n).
void walsh_hadamard(double* v, int n) {
  for (int h = 1; h < n; h *= 2)
    for (int i = 0; i < n; i += 2 * h)
      for (int j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
}
}  // namespace

MatrixD RandomHadamard::matrix() const {
  const int d = dim();
  MatrixD h = MatrixD::Zero(d, d);
  for (int r = 0; r < d; ++r) {
    h(r, r) = 1.0;
    walsh_hadamard(h.row(r).data(), d);  // row r of Hadamard(d)
  }
  // H = Hadamard diag(signs) / sqrt(d): column c scaled by signs[c].
  for (int c = 0; c < d; ++c) h.col(c) *= signs_[std::size_t(c)] / std::sqrt(double(d));
  return h;
}

MatrixF RandomHadamard::apply(const MatrixF& x) const {
  const int d = dim();
  if (x.cols() != d)
    throw std::invalid_argument("RandomHadamard: input has " + std::to_string(x.cols()) + " columns, rotation " + std::to_string(d));
  MatrixF out(x.rows(), d);
  std::vector<double> row(static_cast<std::size_t>(d));
  const double norm = 1 / std::sqrt(double(d));
  for (int r = 0; r < int(x.rows()); ++r) {
    for (int c = 0; c < d; ++c) row[std::size_t(c)] = x(r, c);
    walsh_hadamard(row.data(), d);  // x Hadamard (Hadamard is symmetric)
    for (int c = 0; c < d; ++c) out(r, c) = float(row[std::size_t(c)] * signs_[std::size_t(c)] * norm);
  }
  return out;
}

}  // namespace lowbit::quant
