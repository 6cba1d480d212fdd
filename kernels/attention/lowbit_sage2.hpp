// The C records of lowbit_sage2.h as the C++ API's (sage2_attention.hpp): one translation, shared by
// the library and by its tests. Host code only.
#pragma once

#include <optional>
#include <string>

#include "kernels/attention/lowbit_sage2.h"
#include "kernels/attention/sage2_attention.hpp"

namespace lowbit::kernels::attention {

// Why the record's enumerations hold a value outside theirs, or nothing (the rest is
// Sage2Problem::validate's).
inline std::optional<std::string> invalid_field(const lowbit_sage2_problem& c) {
  const auto outside = [](int value, int count) { return value < 0 || value >= count; };
  if (c.causal != 0 && c.causal != 1) return "causal must be 0 or 1, not " + std::to_string(c.causal);
  if (outside(c.dtype, 2)) return "dtype must be 0 (fp16) or 1 (bf16), not " + std::to_string(c.dtype);
  if (outside(c.layout, 2)) return "layout must be 0 (bhnd) or 1 (bnhd), not " + std::to_string(c.layout);
  if (outside(c.exp2, 2)) return "exp2 must be 0 (polynomial) or 1 (sm90-ex2), not " + std::to_string(c.exp2);
  if (outside(c.schedule, 2)) return "schedule must be 0 (serial) or 1 (overlapped), not " + std::to_string(c.schedule);
  if (outside(c.row_sum, 2)) return "row_sum must be 0 (lanes) or 1 (pv), not " + std::to_string(c.row_sum);
  return std::nullopt;
}

// The problem the record describes; its enumerations must be valid (invalid_field).
inline Sage2Problem to_sage2_problem(const lowbit_sage2_problem& c) {
  Sage2Problem p;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.tokens = c.tokens;
  p.head_dim = c.head_dim;
  p.causal = c.causal == 1;
  p.dtype = c.dtype == LOWBIT_SAGE2_BF16 ? DType::bf16 : DType::fp16;
  p.layout = c.layout == LOWBIT_SAGE2_BNHD ? Layout::bnhd : Layout::bhnd;
  p.exp2 = c.exp2 == LOWBIT_SAGE2_EXP2_SM90_EX2 ? lowbit::attention::steps::Exp2Unit::sm90_ex2
                                               : lowbit::attention::steps::Exp2Unit::polynomial;
  p.schedule = c.schedule == LOWBIT_SAGE2_OVERLAPPED ? Sage2Schedule::overlapped : Sage2Schedule::serial;
  p.row_sum = c.row_sum == LOWBIT_SAGE2_ROW_SUM_PV ? lowbit::attention::steps::RowSum::pv
                                                   : lowbit::attention::steps::RowSum::lanes;
  return p;
}

}  // namespace lowbit::kernels::attention
