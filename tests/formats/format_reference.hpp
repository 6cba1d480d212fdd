// An independent model of a format for the tests: the sorted list of its finite values, taken
// from decode of every code, and rounding by exact comparisons of doubles. It states the rules
// written above lowbit::encode in terms of values and neighbours, and knows nothing of how
// convert.cpp manipulates bits.
//
// Ties and round-to-odd are decided on the code's last bit: of the two neighbours of x, T is
// the one nearer zero and A the other; ties-to-even keeps T when code(T) is even, round-to-odd
// keeps T when code(T) is odd. Zero counts as even. Above max finite the value set continues
// with one more value, `beyond` = max + 2^(floor(log2 max) - mantissa_bits) (what rounding with
// an unbounded exponent would reach next), whose code is code(max) + 1; choosing it overflows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "emulation/convert.hpp"
#include "emulation/format.hpp"

namespace lowbit::testing {

inline constexpr Rounding kAllRoundings[]{Rounding::nearest_even,    Rounding::nearest_away,
                                          Rounding::toward_zero,     Rounding::toward_positive,
                                          Rounding::toward_negative, Rounding::odd,
                                          Rounding::stochastic};

// What encode must give for one input.
struct Expected {
  Code code = 0;  // deterministic modes: the result; stochastic: the result when rounding toward zero
  // Stochastic rounding only: the result when rounding away from zero, and the probability of it
  // with infinitely many random bits, (|x| - |T|) / (|A| - |T|). Equal to `code` when x is exact.
  Code away_code = 0;
  double away_fraction = 0;
};

class ReferenceFormat {
 public:
  // f must have at most 16 bits (every code is enumerated).
  explicit ReferenceFormat(const Format& f);

  const Format& format() const { return format_; }
  // Every distinct finite value, ascending; zero appears once.
  const std::vector<double>& values() const { return values_; }
  // The code of a finite value of the format (the one with the smallest magnitude bits where
  // several codes decode to it); zero takes the sign of `negative` where the format has -0.
  Code code_of(double value, bool negative) const;
  // The value rounding with an unbounded exponent reaches after max finite (floating formats).
  double beyond() const { return beyond_; }
  // values() with one more point past each end, where rounding with an unbounded range would go
  // next: -beyond() and beyond() (integers: lowest - 1 and max + 1). Every rounding boundary is
  // one of these points or the midpoint of two neighbours.
  std::vector<double> extended_values() const;

  Expected expected(double x, Rounding rounding, Overflow overflow) const;

 private:
  Expected expected_integer(double x, Rounding rounding) const;
  Code overflow_result(bool negative, Rounding rounding, Overflow overflow) const;
  Code zero_code(bool negative) const;
  bool code_is_odd(double value) const;

  Format format_;
  std::vector<double> values_;
  std::vector<Code> codes_;  // codes_[i] encodes values_[i]; zero: +0
  Code negative_zero_code_ = 0;
  bool has_negative_zero_ = false;
  Code nan_code_ = 0;  // the positive NaN with every magnitude bit set, or the only NaN code
  Code positive_inf_code_ = 0, negative_inf_code_ = 0;
  bool has_inf_ = false, has_nan_ = false;
  double beyond_ = 0;
};

// Every format of at most 16 bits the exhaustive code and boundary tests walk: the presets of at
// most 16 bits and user specs covering each kind of record (fnuz, no subnormals, no zero, no
// specials, P3109 of every precision, 0 mantissa bits, integers, unsigned floats, odd biases).
std::vector<std::string> small_format_specs();

// Readable description of an encode input and options for failure messages.
std::string describe(const Format& f, double x, const ConversionOptions& options);

}  // namespace lowbit::testing
