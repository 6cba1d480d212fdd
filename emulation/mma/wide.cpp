#include "emulation/mma/wide.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"

namespace lowbit::mma {
namespace {

// max(ilogb x, -126) of a float (the engine's exponent of a binary32 operand), from its bits.
int float_exponent(float x) {
  const int field = int(std::bit_cast<std::uint32_t>(x) >> 23 & 0xffu);
  return field ? field - 127 : -126;
}

}  // namespace

WideAccumulation::WideAccumulation(const Instruction& in) : model_(in.model), accumulator_(in.atom.d), k_(in.atom.k) {
  const FusedDotAdd& p = model_.fused;
  if (model_.arithmetic == Arithmetic::fused_dot_add) {
    if (p.scale_mode == ScaleMode::per_product)
      throw std::invalid_argument(in.atom.name.str() + ": per-product block scales have no wide-operand model");
    if (auto why = p.validate(k_)) throw std::invalid_argument(in.atom.name.str() + ": " + *why);
    const int chunks = k_ / p.chunk;
    for (int c = 0; c < chunks; ++c)
      for (int k = 0; k < k_; ++k)
        if ((p.interleave ? (k / p.interleave) % chunks : k / p.chunk) == c) order_.push_back(k);
  }
}

float WideAccumulation::chunk(const float* a, const float* b, std::ptrdiff_t stride, const int* ks, int count,
                              float acc) const {
  const FusedDotAdd& p = model_.fused;
  const int per_term = p.scale_mode == ScaleMode::per_group ? p.group : 1;
  double terms[64];
  int exponents[64];
  int n = 0;
  for (int t = 0; t < count; t += per_term, ++n) {
    double sum = 0;  // a group's products, exact in double for the group sizes the models use
    int e = p.zero_exponent;
    for (int u = t; u < t + per_term; ++u) {
      const float x = a[ks[u]], y = b[std::ptrdiff_t(ks[u]) * stride];
      sum += double(x) * double(y);
      if (per_term == 1 && x != 0 && y != 0) e = float_exponent(x) + float_exponent(y);
    }
    if (!std::isfinite(sum)) return float(sum);  // no NaN rules here: the sum shows it
    if (per_term > 1 && sum != 0) e = std::ilogb(sum);
    terms[n] = sum;
    exponents[n] = e;
  }
  int E = acc != 0 ? std::max(std::ilogb(double(acc)), accumulator_.min_exponent()) : p.zero_exponent;
  for (int t = 0; t < n; ++t) E = std::max(E, exponents[t]);
  // Each term truncated to a multiple of 2^(E - F): integers below 2^(F + 3), so their sum is
  // exact in double.
  const double scale = std::ldexp(1.0, p.fraction_bits - E);
  double sum = std::trunc(double(acc) * scale);
  for (int t = 0; t < n; ++t) sum += std::trunc(terms[t] * scale);
  if (sum == 0) return 0.0f;  // an exact zero is +0
  const double x = sum / scale;
  float r = 0;
  const double magnitude = std::fabs(x);
  if (p.rounding != OutputRounding::rne_fp16 && magnitude >= 0x1p-126 && magnitude < 0x1p128) {
    // A normal result toward zero: x's leading 24 (FP22: 14) bits, cut from its double.
    const int kept = p.rounding == OutputRounding::rz_e8m13 ? 13 : 23;
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(x) & ~((std::uint64_t(1) << (52 - kept)) - 1);
    r = float(std::bit_cast<double>(bits));
  } else {
    switch (p.rounding) {
      case OutputRounding::rz_fp32:
        r = magnitude >= 0x1p128 ? float(x < 0 ? -INFINITY : INFINITY)
                                 : float(decode(formats::fp32, encode(formats::fp32, x, {Rounding::toward_zero})));
        break;
      case OutputRounding::rz_e8m13:
        r = magnitude >= 0x1p128 ? float(x < 0 ? -INFINITY : INFINITY)
                                 : float(decode(formats::e8m13, encode(formats::e8m13, x, {Rounding::toward_zero})));
        break;
      case OutputRounding::rne_fp16:
        r = float(decode(formats::fp16, encode(formats::fp16, x, {Rounding::nearest_even, Overflow::inf})));
        break;
    }
  }
  if (r == 0 && !p.rounded_zero_keeps_sign) r = 0.0f;
  return r;
}

float WideAccumulation::step(const float* a, const float* b, std::ptrdiff_t stride, float acc) const {
  const FusedDotAdd& p = model_.fused;
  const bool after = p.c_entry == CEntry::added_after;
  float chain = after ? 0.0f : acc;
  for (int first = 0; first < k_; first += p.chunk) chain = chunk(a, b, stride, &order_[std::size_t(first)], p.chunk, chain);
  if (!after) return chain;
  const auto bits = [&](float v) {
    return accumulator_ == formats::fp16 ? std::uint32_t(encode(formats::fp16, double(v))) : std::bit_cast<std::uint32_t>(v);
  };
  const std::uint32_t d = accumulator_add(accumulator_, bits(chain), bits(acc));
  return accumulator_ == formats::fp16 ? float(decode(formats::fp16, d)) : std::bit_cast<float>(d);
}

float WideAccumulation::dot(const float* a, const float* b, std::ptrdiff_t stride, int K, float c) const {
  if (K % k_ != 0)
    throw std::invalid_argument("WideAccumulation::dot: K = " + std::to_string(K) + " is not a multiple of k = " +
                                std::to_string(k_));
  if (model_.arithmetic == Arithmetic::integer) {
    double sum = c;
    for (int t = 0; t < K; ++t) sum += double(a[t]) * double(b[std::ptrdiff_t(t) * stride]);
    return float(sum);
  }
  float acc = c;
  for (int s = 0; s < K; s += k_) acc = step(a + s, b + std::ptrdiff_t(s) * stride, stride, acc);
  return acc;
}

}  // namespace lowbit::mma
