#include "numerics/attention.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace lowbit {

MatrixD softmax_rows(const MatrixD& scores) {
  MatrixD p(scores.rows(), scores.cols());
  for (Eigen::Index i = 0; i < scores.rows(); ++i) {
    const double m = scores.row(i).maxCoeff();
    p.row(i) = (scores.row(i).array() - m).exp();
    p.row(i) /= p.row(i).sum();
  }
  return p;
}

MatrixD attention_from_scores(const MatrixD& scores, const MatrixD& v) {
  if (scores.cols() != v.rows())
    throw std::invalid_argument("attention: " + std::to_string(scores.cols()) + " keys but " +
                                std::to_string(v.rows()) + " value rows");
  return softmax_rows(scores) * v;
}

MatrixD attention_reference(const MatrixD& q, const MatrixD& k, const MatrixD& v) {
  if (q.cols() != k.cols())
    throw std::invalid_argument("attention: Q has " + std::to_string(q.cols()) + " channels, K " +
                                std::to_string(k.cols()));
  const MatrixD s = (q * k.transpose()) / std::sqrt(double(q.cols()));
  return attention_from_scores(s, v);
}

}  // namespace lowbit
