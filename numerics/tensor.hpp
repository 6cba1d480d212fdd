// Attention tensors as kernels take them: [batch, heads, tokens, dim], float32, row-major (C
// order), each value usually an fp16 or bf16 number widened exactly.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "numerics/matrix.hpp"

namespace lowbit {

struct Tensor4 {
  int batch = 0, heads = 0, tokens = 0, dim = 0;
  std::vector<float> values;  // batch x heads x tokens x dim

  Tensor4() = default;
  Tensor4(int batch_, int heads_, int tokens_, int dim_)
      : batch(batch_), heads(heads_), tokens(tokens_), dim(dim_), values(count(batch_, heads_, tokens_, dim_)) {}

  std::size_t size() const { return values.size(); }
  // Index of (b, h, t, 0) in `values`.
  std::size_t offset(int b, int h, int t) const {
    return ((std::size_t(b) * std::size_t(heads) + std::size_t(h)) * std::size_t(tokens) + std::size_t(t)) *
           std::size_t(dim);
  }
  const float* row(int b, int h, int t) const { return values.data() + offset(b, h, t); }
  float* row(int b, int h, int t) { return values.data() + offset(b, h, t); }
  // One head as a tokens x dim matrix (a copy).
  MatrixF head(int b, int h) const { return MatrixView<float>(row(b, h, 0), tokens, dim); }
  std::span<const float> head_values(int b, int h) const {
    return {row(b, h, 0), std::size_t(tokens) * std::size_t(dim)};
  }
  std::string shape_text() const { return fmt::format("[{}, {}, {}, {}]", batch, heads, tokens, dim); }

  // Batch 1 of these heads (tokens x dim matrices of one shape), in order.
  static Tensor4 from_heads(const std::vector<MatrixF>& heads) {
    if (heads.empty()) throw std::invalid_argument("Tensor4::from_heads: no heads");
    Tensor4 t(1, int(heads.size()), int(heads.front().rows()), int(heads.front().cols()));
    for (std::size_t h = 0; h < heads.size(); ++h) {
      if (heads[h].rows() != t.tokens || heads[h].cols() != t.dim)
        throw std::invalid_argument(fmt::format("Tensor4::from_heads: head {} is {} x {}, head 0 {} x {}", h, heads[h].rows(),
                                                heads[h].cols(), t.tokens, t.dim));
      std::copy(heads[h].data(), heads[h].data() + heads[h].size(), t.values.begin() + std::ptrdiff_t(t.offset(0, int(h), 0)));
    }
    return t;
  }

  static std::size_t count(int b, int h, int t, int d) {
    if (b < 1 || h < 1 || t < 1 || d < 1)
      throw std::invalid_argument(fmt::format("tensor shape [{}, {}, {}, {}] has an empty dimension", b, h, t, d));
    return std::size_t(b) * std::size_t(h) * std::size_t(t) * std::size_t(d);
  }
};

}  // namespace lowbit
