// The operands of forward(): per (batch, KV head), K and V are smoothed, quantized and laid out once
// as the products read them (prepare_kv); per Q head, Q with its per-token factors (prepare_q).
// transform_qk first applies the pipeline's rotation or migration to Q and K together;
// prepare_group does all three for one (batch, KV head). The loop over blocks that reads them is
// forward.cpp's.
//
// prepare_operands() is the same preparation as a public entry, for a kernel that runs the blocks
// itself (kernels/attention/variant_attention.hpp): it checks its arguments as forward() does
// (check_arguments, the same std::invalid_argument), applies the causal tile as forward() does, and
// returns every group's operands, forward()'s very values (one code path: forward() calls
// prepare_group too). Its K and V hold all keys (no split-KV pass).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "emulation/attention/pipeline.hpp"
#include "emulation/mma/wide.hpp"

namespace lowbit::attention::detail {

// An operand as the products read it: codes (rows x depth), their values where the product is
// computed directly (integers: exact; products of values: floats), and block scale codes.
struct Operand {
  MatrixCode codes;                 // rows x depth
  std::vector<std::int16_t> ints;   // integer elements
  std::vector<float> floats;        // values (fp32-fma, wide): code times its block scale
  MatrixCode scale_codes;           // rows x (depth / block), block-scaled
};

inline bool block_scaled(const OperandStage& op) { return op.granularity == Granularity::nvfp4 || op.granularity == Granularity::mx; }

// ---- one (batch, KV head) and its Q heads --------------------------------------------------------------

struct Shape {
  int tokens, keys, head_dim, value_dim;
  int tokens_padded, keys_padded, depth;  // depth: head_dim padded to the QK instruction's k
};

struct PreparedKv {
  QuantizedHead k, v;
  Operand k_operand;               // keys_padded x depth
  MatrixCode k_codes_t;            // depth x keys_padded (B of a floating QK instruction)
  MatrixCode k_scales_t;           // (depth / block) x keys_padded
  std::vector<float> k_scale;      // per key
  MatrixF k_smoothed;              // keys x head_dim: the k' of the Q-smoothing correction
  Operand v_operand;               // keys_padded x value_dim (block-scaled: from V^T)
  MatrixCode v_scales;             // (keys_padded / block) x value_dim
  std::vector<float> v_scale;      // per channel, applied after normalization
  DescaleStage descale;            // softmax flash3: this (batch, KV head)'s
};

struct PreparedQ {
  QuantizedHead q;
  Operand operand;                 // tokens_padded x depth
  std::vector<float> row_scale;    // per token: fold_softmax_scale(scale, softmax_scale_log2)
  MatrixF means;                   // blocks x head_dim (Q smoothing), else empty
  std::vector<float> lse_bias;     // per token: steps::smoothing_bias of the row and K's mean (K smoothed), else 0
};

struct Context {
  const Pipeline& pipeline;
  Shape shape;
  bool causal;
  int causal_offset;  // a row's last visible key minus the row (CausalAlign)
  float softmax_scale_log2;
  float softmax_scale;  // flash2's LSE: 1 / sqrt(d) as a float
  int kv_block_begin, kv_block_end;  // ForwardOptions'
  bool qk_values, qk_integer, pv_values;  // products of values (fp32-fma, wide); exact integer QK^T
  std::optional<mma::Instruction> qk, pv;
  std::optional<mma::WideAccumulation> qk_wide, pv_wide;
};

// Q and K transformed together (SmoothAttn's factors read both; under GQA over all the group's Q heads).
// A row's scale outside the MMA: its group's scale, or (block-scaled) its outer scale.
float row_scale(const quant::QuantizedTensor& t, const OperandStage& stage, int row);
void transform_qk(const Pipeline& pl, std::vector<MatrixF>& qs, MatrixF& k);
// key_mean: K's mean as given (ForwardOptions::key_means of this head), or nullptr.
PreparedKv prepare_kv(const Context& cx, const MatrixF& k_in, const MatrixF& v_in, const float* key_mean);
PreparedQ prepare_q(const Context& cx, const MatrixF& q_in, const std::vector<float>& k_mean);

// forward()'s checks of its arguments: shapes, the pipeline's validate(), descales, key means, NaN/Inf.
// Throws std::invalid_argument naming the input.
void check_arguments(const Pipeline& pl, const Tensor4& q, const Tensor4& k, const Tensor4& v, const ForwardOptions& options);
// The pipeline with its causal tile (TilingStage::kv_block) as block_kv.
Pipeline tiled_pipeline(const Pipeline& pl, bool causal);
// The shapes, instructions and scales of a pass (arguments checked, the causal tile applied).
Context make_context(const Pipeline& pl, const Tensor4& q, const Tensor4& k, const Tensor4& v, const ForwardOptions& options);

// One (batch b, KV head g): K and V, and the group's Q heads in order (on options.threads threads).
struct PreparedGroup {
  PreparedKv kv;
  std::vector<PreparedQ> q;
};
PreparedGroup prepare_group(const Context& cx, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                            const ForwardOptions& options, int b, int g);

// output_codes: output rounded to output_format (nearest even, overflow to Inf), as forward() writes them.
void round_output(ForwardResult& result);

}  // namespace lowbit::attention::detail

namespace lowbit::attention {

struct PreparedOperands {
  std::unique_ptr<const Pipeline> pipeline;  // as run: the causal tile applied (context refers to it)
  detail::Context context;
  std::vector<detail::PreparedGroup> groups;  // [batch * kv_heads]
};
// Every operand forward(pipeline, q, k, v, options) prepares (see above). Throws as forward().
PreparedOperands prepare_operands(const Pipeline& pipeline, const Tensor4& q, const Tensor4& k, const Tensor4& v,
                                  const ForwardOptions& options = {});

}  // namespace lowbit::attention
