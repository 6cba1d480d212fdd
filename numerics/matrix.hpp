// The matrix vocabulary shared by every layer: dense, row-major Eigen matrices (a token per
// row, as attention tensors are laid out), and read-only views of row-major memory.
#pragma once

#include <cstdint>

#include <Eigen/Dense>

namespace lowbit {

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixF = Matrix<float>;
using MatrixD = Matrix<double>;
using MatrixCode = Matrix<std::uint32_t>;  // element codes of a Format

template <class T>
using MatrixView = Eigen::Map<const Matrix<T>>;

}  // namespace lowbit
