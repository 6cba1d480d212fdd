#include "emulation/mma/engine.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <type_traits>

#include <fmt/format.h>

#include "emulation/convert.hpp"
#include "emulation/mma/arithmetic.hpp"

namespace lowbit::mma::detail {
namespace {

constexpr std::uint32_t kFp32PositiveInf = 0x7f80'0000, kFp32NegativeInf = 0xff80'0000;
constexpr std::uint32_t kFp16PositiveInf = 0x7c00, kFp16NegativeInf = 0xfc00;
constexpr int kMaxChunk = 64;
// Operand formats up to tf32 (19 bits: a 2^19-entry table, 8 MiB, built on first use).
constexpr int kMaxTableBits = 19;
// The exponent zero codes decode with: low enough that a zero product's ea + eb never reaches a
// model's zero-term exponent (the kernel gives zero products e_zero itself where it matters).
constexpr int kZeroCodeExponent = -(1 << 20);

// A code of f, as the arithmetic sees it in format `as` (f itself, or the format it unpacks to).
Decoded decode_one(const Format& f, const Format& as, Code code) {
  Decoded d;
  if (f.is_nan_code(code)) {
    d.special = Special::nan;
    return d;
  }
  const double value = decode(f, code);
  d.negative = std::signbit(value) ? -1 : 0;
  if (f.is_inf_code(code)) {
    d.special = Special::inf;
    return d;
  }
  const double magnitude = std::fabs(value);
  if (f.is_integer()) {
    d.magnitude = std::int32_t(magnitude);
    return d;
  }
  d.exponent = kZeroCodeExponent;
  if (magnitude == 0) return d;
  d.exponent = std::max(std::ilogb(magnitude), as.min_exponent());
  const double significand = std::ldexp(magnitude, as.mantissa_bits - d.exponent);
  if (significand != std::floor(significand) || magnitude > max_finite(as))
    throw std::invalid_argument(fmt::format("{} code 0x{:x} ({}) is not a value of {}, which it unpacks to",
                                            format_name(f), code, value, format_name(as)));
  d.magnitude = std::int32_t(significand);  // an integer < 2^(m+1)
  return d;
}

std::int64_t shifted(std::int64_t magnitude, int pre, int right) { return (magnitude << pre) >> std::min(right, 63); }

// ---------------------------------------------------------------------------------------------
// The lane kernel: one chunk of `Count` products for kLanes outputs at once, A's row (one value
// per t, broadcast) against kLanes columns of B (B's k-major copy, `stride` apart per t). It
// decodes the accumulators (binary32 or binary16 bits), finds each output's E (the max of the
// accumulator's exponent, or e_zero when it is zero, and the products' exponents, a zero product
// counting as e_zero) and returns each output's exact sum of trunc(term * 2^(F - E)), accumulator
// included. Lane is int32_t when the model's bound allows (one AVX2 register per vector), else
// int64_t. With Blend = false zero products keep their (very low) ea + eb, which cannot change E
// (see Engine::Engine). NaN/Inf inputs give garbage here; the caller overrides those outputs.
// Written with GCC vector extensions and compiled twice, dispatched once at load time: for AVX2
// (variable per-lane shifts) and for the x86-64 baseline.
// ---------------------------------------------------------------------------------------------

// (-Wpsabi: these vectors never cross a call boundary; helpers are always inlined.)
#pragma GCC diagnostic ignored "-Wpsabi"
using Int32x8 = std::int32_t __attribute__((vector_size(32)));
using Int64x8 = std::int64_t __attribute__((vector_size(64)));
static_assert(kLanes == 8);

[[gnu::always_inline]] inline Int32x8 load8(const std::int32_t* p) {
  Int32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A model's shifts and its accumulator's encoding (see Engine::Engine).
struct Shifts {
  int zero_exponent;
  int pre, extra;          // products: value * 2^(F - E) = (magnitude << pre) >> (E - exponent + extra)
  int acc_pre, acc_extra;  // the accumulator likewise
  int acc_fraction, acc_field_mask, acc_bias, acc_sign_bit;  // binary32 (23, 0xff, 127, 31) or binary16 (10, 0x1f, 15, 15)
};

template <class Lane, int Count, bool Blend>
[[gnu::always_inline]] inline void product_sums(const std::int32_t* ma, const std::int32_t* ea, const std::int32_t* na,
                                                const std::int32_t* mb, const std::int32_t* eb, const std::int32_t* nb,
                                                std::ptrdiff_t stride, const std::uint32_t* acc_bits,
                                                const Shifts& shift, std::int32_t* E, std::int64_t* sums) {
  using Vector = std::conditional_t<sizeof(Lane) == 4, Int32x8, Int64x8>;
  constexpr int kWidest = int(sizeof(Lane)) * 8 - 1;
  Int32x8 bits;
  std::memcpy(&bits, acc_bits, sizeof bits);
  const Int32x8 field = (bits >> shift.acc_fraction) & shift.acc_field_mask;
  const Int32x8 fraction = bits & ((1 << shift.acc_fraction) - 1);
  const Int32x8 acc_magnitude = field != 0 ? fraction | (1 << shift.acc_fraction) : fraction;
  const Int32x8 acc_exponent = field != 0 ? field - shift.acc_bias : Int32x8{} + (1 - shift.acc_bias);
  const Int32x8 acc_negative = -((bits >> shift.acc_sign_bit) & 1);
  Int32x8 e_max = acc_magnitude != 0 ? acc_exponent : shift.zero_exponent;

  Vector product[Count];
  Int32x8 exponent[Count];
  for (int t = 0; t < Count; ++t) {
    const Vector m = __builtin_convertvector(load8(mb + t * stride), Vector) * Lane(ma[t]);
    Int32x8 e = load8(eb + t * stride) + ea[t];
    if constexpr (Blend) e = __builtin_convertvector(m != 0, Int32x8) ? e : shift.zero_exponent;
    product[t] = m;
    exponent[t] = e;
    e_max = e_max > e ? e_max : e;
  }
  Vector sum = {};
  for (int t = 0; t < Count; ++t) {
    const Vector sign = __builtin_convertvector(load8(nb + t * stride) ^ na[t], Vector);
    Int32x8 right = e_max - exponent[t] + shift.extra;
    right = right < kWidest ? right : kWidest;
    const Vector v = (product[t] << shift.pre) >> __builtin_convertvector(right, Vector);
    sum += (v ^ sign) - sign;
  }
  Int32x8 right = e_max - acc_exponent + shift.acc_extra;
  right = right < 63 ? right : 63;
  const Int64x8 acc = (__builtin_convertvector(acc_magnitude, Int64x8) << shift.acc_pre) >>
                      __builtin_convertvector(right, Int64x8);
  const Int64x8 acc_sign = __builtin_convertvector(acc_negative, Int64x8);
  const Int64x8 total = __builtin_convertvector(sum, Int64x8) + ((acc ^ acc_sign) - acc_sign);
  std::memcpy(E, &e_max, sizeof e_max);
  std::memcpy(sums, &total, sizeof total);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LOWBIT_SIMD_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define LOWBIT_SIMD_CLONES
#endif

using ProductSums = void (*)(const std::int32_t*, const std::int32_t*, const std::int32_t*, const std::int32_t*,
                             const std::int32_t*, const std::int32_t*, std::ptrdiff_t, const std::uint32_t*,
                             const Shifts&, std::int32_t*, std::int64_t*);

#define LOWBIT_PRODUCT_SUMS(NAME, LANE, COUNT, BLEND)                                                            \
  LOWBIT_SIMD_CLONES void NAME(const std::int32_t* ma, const std::int32_t* ea, const std::int32_t* na,            \
                               const std::int32_t* mb, const std::int32_t* eb, const std::int32_t* nb,            \
                               std::ptrdiff_t stride, const std::uint32_t* acc_bits, const Shifts& shift,        \
                               std::int32_t* E, std::int64_t* sums) {                                             \
    product_sums<LANE, COUNT, BLEND>(ma, ea, na, mb, eb, nb, stride, acc_bits, shift, E, sums);                   \
  }
LOWBIT_PRODUCT_SUMS(sums32_16, std::int32_t, 16, false)
LOWBIT_PRODUCT_SUMS(sums32_32, std::int32_t, 32, false)
LOWBIT_PRODUCT_SUMS(sums32_16_blend, std::int32_t, 16, true)
LOWBIT_PRODUCT_SUMS(sums32_32_blend, std::int32_t, 32, true)
LOWBIT_PRODUCT_SUMS(sums64_1_blend, std::int64_t, 1, true)
LOWBIT_PRODUCT_SUMS(sums64_2_blend, std::int64_t, 2, true)
LOWBIT_PRODUCT_SUMS(sums64_4_blend, std::int64_t, 4, true)
LOWBIT_PRODUCT_SUMS(sums64_8_blend, std::int64_t, 8, true)
LOWBIT_PRODUCT_SUMS(sums64_16_blend, std::int64_t, 16, true)
LOWBIT_PRODUCT_SUMS(sums64_32_blend, std::int64_t, 32, true)
LOWBIT_PRODUCT_SUMS(sums64_64_blend, std::int64_t, 64, true)
#undef LOWBIT_PRODUCT_SUMS

// The kernel for a chunk length, lane width and blend; the int64 blending kernels run every model
// (every chunk that divides a modeled k: a power of two up to kMaxChunk).
ProductSums product_sums_kernel(int chunk, bool narrow, bool blend) {
  if (narrow && chunk == 16) return blend ? sums32_16_blend : sums32_16;
  if (narrow && chunk == 32) return blend ? sums32_32_blend : sums32_32;
  switch (chunk) {
    case 1: return sums64_1_blend;
    case 2: return sums64_2_blend;
    case 4: return sums64_4_blend;
    case 8: return sums64_8_blend;
    case 16: return sums64_16_blend;
    case 32: return sums64_32_blend;
    case 64: return sums64_64_blend;
  }
  return nullptr;
}

}  // namespace

const std::vector<Decoded>& decode_table(const Format& f, const Format& as) {
  static std::mutex mutex;
  static std::vector<std::tuple<Format, Format, std::unique_ptr<std::vector<Decoded>>>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [format, format_as, table] : cache)
    if (format == f && format_as == as) return *table;
  if (f.code_bits() > kMaxTableBits)
    throw std::invalid_argument(fmt::format("decode_table: {} is wider than {} bits", format_name(f), kMaxTableBits));
  auto table = std::make_unique<std::vector<Decoded>>(std::size_t(f.code_count_minus_one()) + 1);
  for (Code c = 0; c < table->size(); ++c) (*table)[c] = decode_one(f, as, c);
  cache.emplace_back(f, as, std::move(table));
  return *std::get<2>(cache.back());
}

// The accumulator between chunks, decoded like an element.
struct Engine::Acc {
  std::int64_t magnitude = 0;
  int exponent = 0;
  bool negative = false;
  Special special = Special::finite;
};

Engine::Engine(const Instruction& instruction)
    : instruction_(instruction),
      p_(instruction.model.fused),
      table_a_(&decode_table(instruction.atom.a, p_.arithmetic_format(instruction.atom.a))),
      table_b_(&decode_table(instruction.atom.b, p_.arithmetic_format(instruction.atom.b))) {
  const Atom& at = instruction_.atom;
  order_.resize(std::size_t(at.k));
  if (instruction_.model.arithmetic == Arithmetic::integer) {
    for (int k = 0; k < at.k; ++k) order_[std::size_t(k)] = k;
    return;
  }
  if (auto why = p_.validate(at.k)) throw std::invalid_argument(at.name.str() + ": " + *why);
  if (p_.chunk > kMaxChunk) throw std::invalid_argument(fmt::format("{}: chunk {} > {}", at.name.view(), p_.chunk, kMaxChunk));
  if (p_.scale_mode != ScaleMode::none && !at.block_scaled())
    throw std::invalid_argument(at.name.str() + ": a block-scaled model needs a scale format");
  if (p_.scale_mode == ScaleMode::per_product && at.scale.mantissa_bits != 0)
    throw std::invalid_argument(at.name.str() + ": per-product scales must be powers of two");
  if (p_.scale_mode == ScaleMode::per_group && (p_.interleave != 0 || at.scale_block % p_.group != 0))
    throw std::invalid_argument(at.name.str() + ": per-group scaling needs k in order and groups inside a scale block");
  const int chunks = at.k / p_.chunk;
  std::size_t next = 0;
  for (int c = 0; c < chunks; ++c)
    for (int k = 0; k < at.k; ++k)
      if ((p_.interleave ? (k / p_.interleave) % chunks : k / p_.chunk) == c) order_[next++] = k;

  // Bounds on the terms (from the formats, not by scanning the tables: an Engine is made per tile).
  // A magnitude is below 2^(m+1); an integer's is at most 2^(bits-1).
  const auto largest_magnitude = [](const Format& f) {
    return f.is_integer() ? std::int64_t(1) << (f.code_bits() - 1) : (std::int64_t(2) << f.mantissa_bits) - 1;
  };
  // The largest value in units of the format's smallest subnormal spacing: magnitude << (e - emin).
  const auto widest = [](const Format& f) {
    return std::int64_t(std::ldexp(max_finite(f), f.mantissa_bits - f.min_exponent()));
  };
  const Format& a_as = p_.arithmetic_format(at.a);
  const Format& b_as = p_.arithmetic_format(at.b);
  int product_fraction = a_as.mantissa_bits + b_as.mantissa_bits;
  std::int64_t widest_term = 0;  // before the shift
  if (p_.scale_mode == ScaleMode::per_group) {
    const int fs = at.scale.mantissa_bits;
    product_fraction = at.a.mantissa_bits + at.b.mantissa_bits - at.a.min_exponent() - at.b.min_exponent() + 2 * fs;
    const std::int64_t scale_max = std::int64_t(1) << (fs + 1);
    widest_term = p_.group * widest(at.a) * widest(at.b) * scale_max * scale_max;
  } else {
    widest_term = largest_magnitude(a_as) * largest_magnitude(b_as);
  }
  acc_format_ = at.c;
  product_shift_ = p_.fraction_bits - product_fraction;
  acc_shift_ = p_.fraction_bits - acc_format_.mantissa_bits;
  // The exact final rounding goes through a double: every chunk sum must stay below 2^53.
  const double bound = double(p_.chunk) * std::ldexp(double(widest_term), std::max(product_shift_, 0)) +
                       std::ldexp(double(std::int64_t(2) << acc_format_.mantissa_bits), std::max(acc_shift_, 0));
  if (bound >= 0x1p53) throw std::invalid_argument(at.name.str() + ": this model's chunk sums could exceed 53 bits");
  if (p_.scale_mode == ScaleMode::per_group) return;  // group sums run in group_chunk

  // The products of a chunk fit 32-bit lanes when their shifted sum stays below 2^31. A zero
  // product's exponent (e_zero) cannot change E when every nonzero product's exponent and the
  // accumulator's smallest exponent lie above e_zero: the accumulator (or e_zero, when it is zero)
  // starts the max, and a zero product's ea + eb (zero codes decode with kZeroCodeExponent) stays
  // below it. Otherwise (bf16, scaled products) the kernel blends.
  const bool narrow = double(p_.chunk) * std::ldexp(double(widest_term), std::max(product_shift_, 0)) < 0x1p31;
  const bool blend = p_.scale_mode != ScaleMode::none || a_as.min_exponent() + b_as.min_exponent() <= p_.zero_exponent ||
                     acc_format_.min_exponent() <= p_.zero_exponent;
  product_sums_ = reinterpret_cast<void (*)()>(product_sums_kernel(p_.chunk, narrow, blend));
  if (!product_sums_) throw std::invalid_argument(fmt::format("{}: no product-sum kernel for chunk L={}", at.name.view(), p_.chunk));
}

Operand Engine::decode(std::span<const std::uint32_t> codes, Eigen::Index lines, Eigen::Index K, Eigen::Index depth,
                       std::span<const std::uint32_t> scales, bool as_b) const {
  const Atom& at = instruction_.atom;
  const auto& table = as_b ? *table_b_ : *table_a_;
  const Eigen::Index steps = depth / at.k;
  const Eigen::Index blocks = at.scale_block ? K / at.scale_block : 0;
  const auto element = [&](Eigen::Index line, Eigen::Index k) { return as_b ? codes[k * lines + line] : codes[line * K + k]; };
  const auto scale_code = [&](Eigen::Index line, Eigen::Index block) {
    // A UE4M3 scale's sign bit is ignored (MMA-Sim); the table holds 7-bit codes.
    return (as_b ? scales[block * lines + line] : scales[line * blocks + block]) & at.scale.code_count_minus_one();
  };
  Operand op;
  op.K = K;
  op.lines = lines;
  op.depth = depth;
  const auto size = std::size_t(lines * depth);
  op.magnitude.resize(size);
  op.exponent.resize(size);
  op.negative.resize(size);
  op.codes.resize(size);
  op.special_step.assign(std::size_t(lines * steps), 0);
  if (at.block_scaled()) {
    const auto& scale_table = decode_table(at.scale);
    op.scale.resize(std::size_t(lines * blocks));
    for (Eigen::Index line = 0; line < lines; ++line)
      for (Eigen::Index block = 0; block < blocks; ++block)
        op.scale[std::size_t(line * blocks + block)] = scale_table[scale_code(line, block)];
  }
  for (Eigen::Index line = 0; line < lines; ++line)
    for (Eigen::Index q = 0; q < depth; ++q) {
      const Eigen::Index s = q / at.k, k = s * at.k + order_[std::size_t(q % at.k)];
      const Code code = k < K ? element(line, k) : 0;  // padding: +0 in every modeled format
      Decoded d = table[code];
      bool special = d.special != Special::finite;
      if (at.block_scaled() && k < K) {
        const Decoded& scale = op.scale[std::size_t(line * blocks + k / at.scale_block)];
        special = special || scale.special != Special::finite;
        if (p_.scale_mode == ScaleMode::per_product) d.exponent += scale.exponent;
      }
      const auto at_q = std::size_t(line * depth + q);
      op.magnitude[at_q] = d.magnitude;
      op.exponent[at_q] = d.exponent;
      op.negative[at_q] = d.negative;
      op.codes[at_q] = code;
      if (special) op.special_step[std::size_t(line * steps + s)] = 1;
    }
  if (as_b) {
    op.k_stride = (lines + kLanes - 1) / kLanes * kLanes;
    const auto k_size = std::size_t(depth * op.k_stride);
    op.k_magnitude.assign(k_size, 0);
    op.k_exponent.assign(k_size, kZeroCodeExponent);
    op.k_negative.assign(k_size, 0);
    for (Eigen::Index line = 0; line < lines; ++line)
      for (Eigen::Index q = 0; q < depth; ++q) {
        const auto from = std::size_t(line * depth + q), to = std::size_t(q * op.k_stride + line);
        op.k_magnitude[to] = op.magnitude[from];
        op.k_exponent[to] = op.exponent[from];
        op.k_negative[to] = op.negative[from];
      }
  }
  return op;
}

void Engine::run_all(const Operand& a, const Operand& b, const std::uint32_t* c, std::uint32_t* d,
                     const KLoop& loop) const {
  const Eigen::Index M = a.lines, N = b.lines;
  // Column blocks keep a few columns of B hot while every row of A passes over them.
  constexpr Eigen::Index kColumnBlock = 4 * kLanes;
  for (Eigen::Index j0 = 0; j0 < N; j0 += kColumnBlock)
    for (Eigen::Index i = 0; i < M; ++i)
      for (Eigen::Index j = j0; j < std::min(N, j0 + kColumnBlock); j += kLanes) {
        const int lanes = int(std::min<Eigen::Index>(kLanes, N - j));
        run(a, i, b, j, lanes, c + i * N + j, d + i * N + j, loop);
      }
}

void Engine::run(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes,
                 const std::uint32_t* c_bits, std::uint32_t* d, const KLoop& loop) const {
  const Eigen::Index steps = a.depth / instruction_.atom.k;
  std::array<std::uint32_t, kLanes> acc{};  // lanes beyond `lanes` run on +0 and are dropped
  if (loop.mmas_per_flush == 0) {
    std::copy(c_bits, c_bits + lanes, acc.begin());
    for (Eigen::Index s = 0; s < steps; ++s) step(a, i, b, j0, lanes, s, acc.data());
    std::copy(acc.begin(), acc.begin() + lanes, d);
    return;
  }
  const bool half = instruction_.atom.d == formats::fp16;
  std::copy(c_bits, c_bits + lanes, d);  // the fp32 accumulator
  for (Eigen::Index first = 0; first < steps; first += loop.mmas_per_flush) {
    acc.fill(0);  // a fresh register: +0
    for (Eigen::Index s = first; s < std::min<Eigen::Index>(steps, first + loop.mmas_per_flush); ++s)
      step(a, i, b, j0, lanes, s, acc.data());
    for (int l = 0; l < lanes; ++l)
      d[l] = accumulator_add(formats::fp32, d[l],
                             half ? std::bit_cast<std::uint32_t>(float(lowbit::decode(formats::fp16, acc[l]))) : acc[l]);
  }
}

void Engine::step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes, Eigen::Index s,
                  std::uint32_t* acc) const {
  if (instruction_.model.arithmetic == Arithmetic::integer) {
    for (int l = 0; l < lanes; ++l) acc[l] = integer_step(a, i, b, j0 + l, s, acc[l]);
    return;
  }
  const Eigen::Index steps = a.depth / instruction_.atom.k;
  bool special = a.special_step[std::size_t(i * steps + s)];
  for (int l = 0; l < lanes; ++l) special = special || b.special_step[std::size_t((j0 + l) * steps + s)];
  const bool after = p_.c_entry == CEntry::added_after;
  std::array<std::uint32_t, kLanes> c{};
  if (after) std::copy(acc, acc + kLanes, c.begin()), std::fill(acc, acc + kLanes, 0u);
  for (int first = 0; first < instruction_.atom.k; first += p_.chunk) {
    const Eigen::Index q = s * instruction_.atom.k + first;
    if (product_sums_) {
      chunk_lanes(a, i, b, j0, lanes, q, acc, special);
    } else {
      for (int l = 0; l < lanes; ++l) acc[l] = group_chunk(a, i, b, j0 + l, q, acc[l], special);
    }
  }
  if (after)
    for (int l = 0; l < lanes; ++l) acc[l] = accumulator_add(acc_format_, acc[l], c[std::size_t(l)]);
}

void Engine::chunk_lanes(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j0, int lanes,
                         Eigen::Index first, std::uint32_t* acc_bits, bool special) const {
  std::int32_t E[kLanes];
  std::int64_t sums[kLanes];
  const auto ia = std::size_t(i * a.depth + first), ib = std::size_t(first * b.k_stride + j0);
  const Shifts shift{p_.zero_exponent,
                     std::max(product_shift_, 0),
                     std::max(-product_shift_, 0),
                     std::max(acc_shift_, 0),
                     std::max(-acc_shift_, 0),
                     acc_format_.mantissa_bits,
                     acc_format_.exponent_field_max(),
                     acc_format_.bias,
                     acc_format_.code_bits() - 1};
  reinterpret_cast<ProductSums>(product_sums_)(&a.magnitude[ia], &a.exponent[ia], &a.negative[ia], &b.k_magnitude[ib],
                                               &b.k_exponent[ib], &b.k_negative[ib], b.k_stride, acc_bits, shift, E,
                                               sums);
  for (int l = 0; l < lanes; ++l) {
    if (special || special_accumulator(acc_bits[l]))
      if (auto result = special_result(a, i, b, j0 + l, first, accumulator(acc_bits[l]))) {
        acc_bits[l] = *result;
        continue;
      }
    acc_bits[l] = round(sums[l], E[l] - p_.fraction_bits);
  }
}

std::uint32_t Engine::group_chunk(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j,
                                  Eigen::Index first, std::uint32_t acc_bits, bool special) const {
  const Acc acc = accumulator(acc_bits);
  if (special || acc.special != Special::finite)
    if (auto result = special_result(a, i, b, j, first, acc)) return *result;
  // Group sums in units of 2^(emin_a + emin_b - fraction_a - fraction_b); a group is a zero term
  // when all its products are zero or a scale is zero (a sum that cancels keeps its exponent).
  const Atom& at = instruction_.atom;
  const int min_a = at.a.min_exponent(), min_b = at.b.min_exponent();
  const Eigen::Index blocks = a.K / at.scale_block;
  const std::size_t ia = std::size_t(i * a.depth + first), ib = std::size_t(j * b.depth + first);
  std::int64_t magnitude[kMaxChunk], negative[kMaxChunk];
  std::int32_t exponent[kMaxChunk];
  int E = acc.magnitude ? acc.exponent : p_.zero_exponent;
  int count = 0;
  for (int g = 0; g < p_.chunk; g += p_.group, ++count) {
    std::int64_t group_sum = 0;
    bool nonzero = false;
    for (std::size_t t = std::size_t(g); t < std::size_t(g + p_.group); ++t) {
      const std::int64_t m = std::int64_t(a.magnitude[ia + t]) * b.magnitude[ib + t];
      const std::int64_t term = m ? m << ((a.exponent[ia + t] - min_a) + (b.exponent[ib + t] - min_b)) : 0;
      const std::int64_t sign = a.negative[ia + t] ^ b.negative[ib + t];
      group_sum += (term ^ sign) - sign;
      nonzero = nonzero || m != 0;
    }
    const Eigen::Index block = (first + g) / at.scale_block;  // per-group models keep k in order
    const Decoded& sa = a.scale[std::size_t(i * blocks + block)];
    const Decoded& sb = b.scale[std::size_t(j * blocks + block)];
    const bool zero = !nonzero || sa.magnitude == 0 || sb.magnitude == 0;
    magnitude[count] = (group_sum < 0 ? -group_sum : group_sum) * sa.magnitude * sb.magnitude;
    negative[count] = group_sum < 0 ? -1 : 0;
    exponent[count] = zero ? p_.zero_exponent : sa.exponent + sb.exponent;
    E = std::max(E, exponent[count]);
  }
  const int pre = std::max(product_shift_, 0), extra = std::max(-product_shift_, 0);
  std::int64_t sum = 0;
  for (int t = 0; t < count; ++t) {
    const std::int64_t v = shifted(magnitude[t], pre, E - exponent[t] + extra);
    sum += (v ^ negative[t]) - negative[t];
  }
  if (acc.magnitude) {
    const std::int64_t v = shifted(acc.magnitude, std::max(acc_shift_, 0), E - acc.exponent + std::max(-acc_shift_, 0));
    sum += acc.negative ? -v : v;
  }
  return round(sum, E - p_.fraction_bits);
}

bool Engine::special_accumulator(std::uint32_t bits) const {
  const auto mask = std::uint32_t(acc_format_.exponent_field_max());
  return ((bits >> acc_format_.mantissa_bits) & mask) == mask;
}

Engine::Acc Engine::accumulator(std::uint32_t bits) const {
  const int fraction_bits = acc_format_.mantissa_bits;
  const auto mask = std::uint32_t(acc_format_.exponent_field_max());
  const std::uint32_t field = (bits >> fraction_bits) & mask, fraction = bits & ((1u << fraction_bits) - 1);
  Acc acc;
  acc.negative = ((bits >> (fraction_bits + acc_format_.exponent_bits)) & 1) != 0;
  if (field == mask) {
    acc.special = fraction ? Special::nan : Special::inf;
    return acc;
  }
  acc.magnitude = field ? fraction | (1u << fraction_bits) : fraction;
  acc.exponent = field ? int(field) - acc_format_.bias : acc_format_.min_exponent();
  return acc;
}

std::optional<std::uint32_t> Engine::special_result(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j,
                                                    Eigen::Index first, const Acc& acc) const {
  const Atom& at = instruction_.atom;
  bool nan = acc.special == Special::nan;
  bool positive_inf = acc.special == Special::inf && !acc.negative;
  bool negative_inf = acc.special == Special::inf && acc.negative;
  const Eigen::Index blocks = at.scale_block ? a.K / at.scale_block : 0;
  for (int t = 0; t < p_.chunk; ++t) {
    const Eigen::Index q = first + t, k = (q / at.k) * at.k + order_[std::size_t(q % at.k)];
    const Decoded& da = (*table_a_)[a.codes[std::size_t(i * a.depth + q)]];
    const Decoded& db = (*table_b_)[b.codes[std::size_t(j * b.depth + q)]];
    if (at.block_scaled() && k < a.K &&
        (a.scale[std::size_t(i * blocks + k / at.scale_block)].special != Special::finite ||
         b.scale[std::size_t(j * blocks + k / at.scale_block)].special != Special::finite))
      nan = true;
    if (da.special == Special::nan || db.special == Special::nan) {
      nan = true;
    } else if (da.special == Special::inf || db.special == Special::inf) {
      const bool times_zero = (da.special == Special::finite && da.magnitude == 0) ||
                              (db.special == Special::finite && db.magnitude == 0);
      if (times_zero) nan = true;
      else (da.negative != db.negative ? negative_inf : positive_inf) = true;
    }
  }
  if (!nan && !positive_inf && !negative_inf) return std::nullopt;
  if (nan || (positive_inf && negative_inf)) return canonical_nan_bits(acc_format_);
  const bool half = acc_format_ == formats::fp16;
  if (positive_inf) return half ? kFp16PositiveInf : kFp32PositiveInf;
  return half ? kFp16NegativeInf : kFp32NegativeInf;
}

std::uint32_t Engine::round(std::int64_t sum, int scale_exponent) const {
  static const ConversionOptions toward_zero{Rounding::toward_zero};
  static const ConversionOptions nearest_even_to_inf{Rounding::nearest_even, Overflow::inf};
  if (sum == 0) return 0;  // an exact zero is +0
  if (p_.rounding != OutputRounding::rne_fp16) {
    // A normal binary32 result, rounded toward zero, is the leading 24 (or 14, e8m13) bits of
    // |sum|: the hot path. Subnormal and overflowing results go through encode() below.
    const std::uint64_t magnitude = std::uint64_t(sum < 0 ? -sum : sum);
    const int top = 63 - std::countl_zero(magnitude);
    const int exponent = top + scale_exponent;
    if (exponent >= -126 && exponent <= 127) {
      const std::uint64_t significand = top >= 23 ? magnitude >> (top - 23) : magnitude << (23 - top);
      const std::uint32_t cleared = p_.rounding == OutputRounding::rz_e8m13 ? 0x3ffu : 0u;
      return (sum < 0 ? 0x8000'0000u : 0u) | (std::uint32_t(exponent + 127) << 23) |
             (std::uint32_t(significand) & 0x7f'ffffu & ~cleared);
    }
  }
  const double x = std::ldexp(double(sum), scale_exponent);  // exact: |sum| < 2^53
  // A nonzero sum that rounds to zero keeps its sign or gives +0 (FusedDotAdd::rounded_zero_keeps_sign).
  const auto unsigned_zero = [this](std::uint32_t bits, std::uint32_t magnitude_mask) {
    return (bits & magnitude_mask) == 0 && !p_.rounded_zero_keeps_sign ? 0u : bits;
  };
  switch (p_.rounding) {
    case OutputRounding::rz_fp32:
    case OutputRounding::rz_e8m13:
      // Overflow gives Inf although the rounding is toward zero (recorded on an H200: bf16).
      if (std::fabs(x) >= 0x1p128) return x < 0 ? kFp32NegativeInf : kFp32PositiveInf;
      if (p_.rounding == OutputRounding::rz_fp32) return unsigned_zero(encode(formats::fp32, x, toward_zero), 0x7fff'ffffu);
      // s e8 m13 -> binary32, low 10 bits zero
      return unsigned_zero(encode(formats::e8m13, x, toward_zero) << 10, 0x7fff'ffffu);
    case OutputRounding::rne_fp16: return unsigned_zero(encode(formats::fp16, x, nearest_even_to_inf), 0x7fffu);
  }
  return 0;
}

std::uint32_t Engine::integer_step(const Operand& a, Eigen::Index i, const Operand& b, Eigen::Index j, Eigen::Index s,
                                   std::uint32_t c_bits) const {
  const int k = instruction_.atom.k;
  const std::size_t ia = std::size_t(i * a.depth + s * k), ib = std::size_t(j * b.depth + s * k);
  std::int64_t sum = std::int32_t(c_bits);
  for (int t = 0; t < k; ++t) {
    const std::int64_t product = std::int64_t(a.magnitude[ia + t]) * b.magnitude[ib + t];
    sum += (a.negative[ia + t] ^ b.negative[ib + t]) ? -product : product;
  }
  if (instruction_.model.integer.saturate)
    sum = std::clamp<std::int64_t>(sum, INT32_MIN, INT32_MAX);
  return std::uint32_t(sum);  // wraps modulo 2^32
}

}  // namespace lowbit::mma::detail

namespace lowbit::mma {
std::uint32_t canonical_nan_bits(const Format& accumulator) {
  return accumulator == formats::fp16 ? 0x7fffu : 0x7fff'ffffu;
}

std::uint32_t accumulator_add(const Format& accumulator, std::uint32_t x, std::uint32_t y) {
  if (accumulator == formats::fp32) {
    const float sum = std::bit_cast<float>(x) + std::bit_cast<float>(y);
    return std::isnan(sum) ? canonical_nan_bits(accumulator) : std::bit_cast<std::uint32_t>(sum);
  }
  if (accumulator != formats::fp16)
    throw std::invalid_argument("accumulator_add: " + format_name(accumulator) + " is not fp32 or fp16");
  const double sum = decode(formats::fp16, x) + decode(formats::fp16, y);  // exact: both are binary16
  if (std::isnan(sum)) return canonical_nan_bits(accumulator);
  return encode(formats::fp16, sum, {Rounding::nearest_even, Overflow::inf});
}
}  // namespace lowbit::mma
