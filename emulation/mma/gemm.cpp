#include "emulation/mma/gemm.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "emulation/mma/engine.hpp"

namespace lowbit::mma {
namespace {

void expect_shape(std::string_view name, const MatrixCode& m, Eigen::Index rows, Eigen::Index cols) {
  if (m.rows() != rows || m.cols() != cols)
    throw std::invalid_argument(
        fmt::format("gemm: {} is {} x {}, expected {} x {}", name, m.rows(), m.cols(), rows, cols));
}

void expect_codes(std::string_view name, const MatrixCode& m, std::uint32_t largest) {
  for (Eigen::Index i = 0; i < m.size(); ++i)
    if (m.data()[i] > largest)
      throw std::invalid_argument(fmt::format("gemm: {} element ({}, {}) is 0x{:x}, wider than its format", name,
                                              i / m.cols(), i % m.cols(), m.data()[i]));
}

}  // namespace

std::optional<std::string> KLoop::validate(const Atom& atom, Eigen::Index K, bool block_scaled) const {
  if (mmas_per_flush < 0) return fmt::format("mmas_per_flush = {} is negative", mmas_per_flush);
  if (K < 1) return fmt::format("K = {}: nothing to multiply", K);
  if (K % atom.k != 0 && !pad_k)
    return fmt::format("K = {} is not a multiple of the instruction's k = {} (set pad_k to pad with zeros)", K, atom.k);
  if (K % atom.k != 0 && block_scaled)
    return fmt::format("K = {}: block-scaled instructions need K a multiple of k = {}", K, atom.k);
  if (mmas_per_flush > 0 && atom.d == formats::s32) return std::string("integer accumulators are not flushed into fp32");
  return std::nullopt;
}

MatrixCode gemm(const Instruction& instruction, const GemmOperands& op, const KLoop& loop) {
  const Atom& at = instruction.atom;
  const Eigen::Index M = op.a.rows(), K = op.a.cols(), N = op.b.cols();
  if (auto why = loop.validate(at, K, at.block_scaled())) throw std::invalid_argument("gemm: " + *why);
  expect_shape("B", op.b, K, N);
  expect_shape("C", op.c, M, N);
  expect_codes("A", op.a, at.a.code_count_minus_one());
  expect_codes("B", op.b, at.b.code_count_minus_one());
  expect_codes("C", op.c, loop.mmas_per_flush > 0 ? formats::fp32.code_count_minus_one() : at.c.code_count_minus_one());
  std::span<const std::uint32_t> scale_a, scale_b;
  if (at.block_scaled()) {
    if (!op.scale_a || !op.scale_b) throw std::invalid_argument("gemm: " + at.name.str() + " needs scale_a and scale_b");
    const Eigen::Index blocks = K / at.scale_block;
    expect_shape("scale_a", *op.scale_a, M, blocks);
    expect_shape("scale_b", *op.scale_b, blocks, N);
    expect_codes("scale_a", *op.scale_a, 0xff);
    expect_codes("scale_b", *op.scale_b, 0xff);
    scale_a = {op.scale_a->data(), std::size_t(op.scale_a->size())};
    scale_b = {op.scale_b->data(), std::size_t(op.scale_b->size())};
  } else if (op.scale_a || op.scale_b) {
    throw std::invalid_argument("gemm: " + at.name.str() + " takes no scale factors");
  }
  const Eigen::Index depth = (K + at.k - 1) / at.k * at.k;
  const detail::Engine engine(instruction);
  const auto a = engine.decode({op.a.data(), std::size_t(op.a.size())}, M, K, depth, scale_a, false);
  const auto b = engine.decode({op.b.data(), std::size_t(op.b.size())}, N, K, depth, scale_b, true);
  MatrixCode d(M, N);
  engine.run_all(a, b, op.c.data(), d.data(), loop);
  return d;
}

}  // namespace lowbit::mma
