#include "emulation/quant/block_scaled.hpp"

#include <bit>
#include <stdexcept>
#include <string>

namespace lowbit::quant {
namespace {

// Why `t` cannot be operand `which` of the instruction, or nothing.
std::optional<std::string> mismatch(const QuantizedTensor& t, const char* which, const Format& element,
                                    const mma::Atom& at) {
  const std::string prefix = std::string("block_scaled_matmul: ") + which + " (" + t.spec.name + ") ";
  if (t.spec.element != element)
    return prefix + "holds " + format_name(t.spec.element) + " codes; " + at.name.str() + " takes " + format_name(element);
  if (t.spec.scale.format != at.scale)
    return prefix + "has " + format_name(t.spec.scale.format) + " scales; " + at.name.str() + " takes " +
           format_name(at.scale);
  const Grouping& g = t.spec.grouping;
  if (g.row_period != 1 || g.groups_per_period != 1 || g.col_block != at.scale_block)
    return prefix + "is grouped " + g.name + "; " + at.name.str() + " scales 1x" + std::to_string(at.scale_block) +
           " blocks along K";
  return std::nullopt;
}

// Codes rows x K (zero beyond t's columns) and block scale codes rows x (K / block).
void operand(const QuantizedTensor& t, Eigen::Index K, int block, MatrixCode& codes, MatrixCode& scales) {
  codes = MatrixCode::Zero(t.rows, K);
  const Eigen::Index kept = std::min<Eigen::Index>(K, t.padded_cols);
  codes.leftCols(kept) = t.codes.topLeftCorner(t.rows, kept);
  scales = MatrixCode::Zero(t.rows, K / block);
  for (int r = 0; r < t.rows; ++r)
    for (int g = 0; g < t.col_groups && g < K / block; ++g) scales(r, g) = t.scale_codes[std::size_t(t.group_of(r, g * block))];
}

}  // namespace

MatrixF block_scaled_matmul(const QuantizedTensor& a, const QuantizedTensor& b, const mma::Instruction& instruction,
                            const mma::KLoop& loop) {
  const mma::Atom& at = instruction.atom;
  if (!at.block_scaled()) throw std::invalid_argument("block_scaled_matmul: " + at.name.str() + " takes no block scales");
  for (const auto& why : {mismatch(a, "a", at.a, at), mismatch(b, "b", at.b, at)})
    if (why) throw std::invalid_argument(*why);
  if (a.cols != b.cols)
    throw std::invalid_argument("block_scaled_matmul: reduction lengths differ (" + std::to_string(a.cols) + " vs " +
                                std::to_string(b.cols) + ")");
  const Eigen::Index K = (std::max(a.padded_cols, b.padded_cols) + at.k - 1) / at.k * at.k;
  MatrixCode a_codes, a_scales, b_codes, b_scales;
  operand(a, K, at.scale_block, a_codes, a_scales);
  operand(b, K, at.scale_block, b_codes, b_scales);
  const MatrixCode b_k_major = b_codes.transpose(), b_scales_k_major = b_scales.transpose();
  const MatrixCode c = MatrixCode::Zero(a.rows, b.rows);  // +0 in binary32
  const MatrixCode d = mma::gemm(instruction, {a_codes, b_k_major, c, &a_scales, &b_scales_k_major}, loop);
  MatrixF out(a.rows, b.rows);
  for (int i = 0; i < a.rows; ++i)
    for (int j = 0; j < b.rows; ++j) out(i, j) = std::bit_cast<float>(d(i, j)) * (a.outer_of(i) * b.outer_of(j));
  return out;
}

}  // namespace lowbit::quant
