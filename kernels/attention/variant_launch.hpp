// The sage2-4b family's kernel launch as plain host data (no CUDA types): the compile-time choices
// (which QK and P V instructions, head dimension, accumulation) and the operands the emulator
// prepared (attention::prepare_operands), laid out as the kernel reads them. variant_attention.cpp
// fills it; variant_kernel.cu copies it to the GPU, runs the kernel and copies the output back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "emulation/attention/kernel_steps.hpp"

namespace lowbit::kernels::attention {

enum class QkInstruction : std::uint8_t { s4, s8 };            // mma.sync m16n8k64 s4, m16n8k32 s8
enum class PvInstruction : std::uint8_t { e4m3, e5m2, s8, f16 };  // m16n8k32 e4m3/e5m2/s8, m16n8k16 f16 (f32/s32 out)

struct VariantLaunch {
  // Compile-time choices.
  QkInstruction qk = QkInstruction::s4;
  PvInstruction pv = PvInstruction::e4m3;
  int head_dim = 128;     // 64 or 128; the value dimension is the same, Q K^T's depth too
  bool in_place = false;  // o rescaled and accumulated in the P V accumulator; else two-level
  // Run-time choices.
  int mmas_per_flush = 0;     // two-level: k steps per fresh accumulator (0: the KV block)
  bool p_toward_zero = false; // P's cast (int8, fp16): cvt.rzi / cvt.rz, else nearest even
  // P per block: each block's P divided by s_P = amax(P of the tile's queries) / p_target before its cast,
  // R multiplied by s_P (two-level only); else P is cast at its static scale.
  bool p_per_block = false;
  float p_target = 0;         // per block: the largest finite value of P's format
  bool smooth_q = false, smooth_v = false;
  bool causal = false;
  int causal_offset = 0;      // a row's last visible key minus the row
  bool descending = false;    // KV blocks last to first
  float softmax_scale_log2 = 0, p_log2_scale = 0;
  lowbit::attention::steps::Exp2 exp2;
  // Shapes.
  int batch = 0, heads = 0, kv_heads = 0, tokens = 0, keys = 0, tokens_padded = 0, keys_padded = 0;
  // Operands (row-major; "bh": batch * heads + head, "bg": batch * kv_heads + KV head).
  std::vector<std::int8_t> q;       // [bh][tokens_padded][head_dim] integer values
  std::vector<std::int8_t> k;       // [bg][keys_padded][head_dim]
  std::vector<float> q_scale;       // [bh][tokens_padded]: Q's row scale, the softmax scale folded in
  std::vector<float> k_scale;       // [bg][keys_padded]
  std::vector<float> q_means;       // smooth_q: [bh][tokens_padded / 128][head_dim]
  std::vector<float> k_smoothed;    // smooth_q: [bg][keys][head_dim], the k' of the correction
  std::vector<std::uint16_t> v;     // [bg][keys_padded][head_dim] codes in V's format
  std::vector<float> v_scale;       // [bg][head_dim]
  std::vector<float> v_mean;        // smooth_v: [bg][head_dim]
  std::vector<float> lse_bias;      // [bh][tokens]

  // Why the kernel cannot run this launch (a choice it has no instance for, shapes, operand sizes), or nothing.
  std::optional<std::string> validate() const;
};

struct VariantOutput {
  std::vector<float> output;  // [bh][tokens][head_dim], before rounding
  std::vector<float> lse;     // [bh][tokens]
  float kernel_ms = 0;        // the kernel alone (CUDA events around its launch)
};

// Runs the kernel on the first GPU. Throws std::invalid_argument with validate()'s reason before any CUDA
// call, std::runtime_error naming the CUDA call that failed.
VariantOutput run_variant(const VariantLaunch& launch);

}  // namespace lowbit::kernels::attention
