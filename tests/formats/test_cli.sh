#!/usr/bin/env bash
# End-to-end tests of `lowbit convert`, `lowbit formats` and `lowbit format` against the built
# binary. Usage: test_cli.sh LOWBIT GROUP, GROUP one of convert, stochastic, from-double,
# formats, format, bad-arguments (each a ctest test). Expected codes are worked out by hand in
# the comments.
set -uo pipefail
lowbit=$1
group=$2
failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# expect_equal NAME ACTUAL EXPECTED
expect_equal() {
  [ "$2" == "$3" ] || fail "$1: got [$2], expected [$3]"
}
# expect_contains NAME TEXT NEEDLE
expect_contains() {
  case "$2" in *"$3"*) ;; *) fail "$1: [$2] does not contain [$3]" ;; esac
}
# run_lowbit STDIN ARGS...: sets out, err, status
run_lowbit() {
  local input=$1
  shift
  printf '%b' "$input" | "$lowbit" "$@" >"$work/out" 2>"$work/err"
  status=$?
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}

case "$group" in
convert)
  # e4m3 with Overflow::nan (CUDA __NV_NOSAT): 1 = 0b0'0111'000; 464 is the tie between 448
  # (0x7e, even) and the overflow; 0x43e88000 = 465 overflows to NaN; -inf keeps its sign.
  run_lowbit '1\n448\n464\n0x43e88000\nnan\n-0\nbogus\n0x1234\n  2.5  \n# comment\n\n-inf\n1e-9\n' \
    convert --to e4m3 --overflow nan
  expect_equal "e4m3 output" "$out" "0x38 1
0x7e 448
0x7e 448
0x7f nan
0x7f nan
0x80 -0
error
error
0x42 2.5
0xff nan
0x00 0"
  expect_equal "exit status with invalid lines" "$status" 1
  expect_contains "error names line 7" "$err" "line 7: 'bogus'"
  expect_contains "error names line 8" "$err" "line 8: '0x1234'"
  expect_contains "summary" "$err" "2 invalid line(s)"
  # All valid: exit 0. Saturation is the default: 1000 -> 448.
  run_lowbit '1000\n-0.0078125\n0x3f800000\n' convert --to e4m3
  expect_equal "saturate output" "$out" "0x7e 448
0x84 -0.0078125
0x38 1"
  expect_equal "exit status, all valid" "$status" 0
  # fnuz: -0 and negative underflow become +0 (0x80 is NaN there); e2m1 prints one hex digit.
  run_lowbit '-0\n-1e-30\n' convert --to e4m3fnuz
  expect_equal "fnuz zero" "$out" "0x00 0
0x00 0"
  # Toward zero: 2.9 -> 2 (0b0'10'0), -3.9 -> -3 (0b1'10'1), -7 -> -6 (0b1'11'1, no overflow).
  run_lowbit '2.9\n-3.9\n-7\n' convert --to e2m1 --rounding toward-zero
  expect_equal "e2m1 toward zero" "$out" "0x4 2
0xd -3
0xf -6"
  # A bit pattern is 0x and exactly 8 hex digits, nothing else: signed or fractional hex (which
  # strtof reads as hex floats: -0x3f800000 is -1.06e9), 0X, a bad digit, 9 digits or a stray x
  # are invalid lines; the run goes on to the valid last line and exits 1.
  bad_hex=(-0x3f800000 +0x3f800000 -0x1.8p1 0x1.8p1 0X3F800000 0x3f80000g 0x3f8000000 1x5)
  run_lowbit "$(printf '%s\\n' "${bad_hex[@]}")0x3f800000\n" convert --to e4m3
  expect_equal "bad hex output" "$out" "$(printf 'error\n%.0s' "${bad_hex[@]}")"$'\n'"0x38 1"
  expect_equal "bad hex: exit status" "$status" 1
  for i in "${!bad_hex[@]}"; do
    expect_contains "bad hex ${bad_hex[$i]}" "$err" "line $((i + 1)): '${bad_hex[$i]}' is not a float32"
  done
  expect_contains "bad hex summary" "$err" "${#bad_hex[@]} invalid line(s)"
  # Decimals beyond float32 read as +-Inf, which follows the overflow policy (NaN 0x7f/0xff, or
  # saturation to +-448 = 0b0'1111'110); below float32's smallest subnormal they read as 0.
  run_lowbit '1e999\n-1e999\n1e-999\n' convert --to e4m3 --overflow nan
  expect_equal "1e999, overflow nan" "$out" "0x7f nan
0xff nan
0x00 0"
  expect_equal "1e999: exit status" "$status" 0
  run_lowbit '1e999\n-1e999\n' convert --to e4m3
  expect_equal "1e999, saturate" "$out" "0x7e 448
0xfe -448"
  # --help states the input rules: what is skipped, and what 1e999 becomes.
  run_lowbit '' convert --help
  expect_contains "help: skipped lines" "$out" "Blank lines and lines starting"
  expect_contains "help: with # are skipped" "$out" "with # are skipped"
  expect_contains "help: 1e999" "$out" "(1e999) reads as +-Inf, which then follows"
  expect_contains "help: no sign" "$out" "exactly 8 hex"
  # A user format: P3109 K8P1 (bias 64), ties to the even code: 3 -> 4 (code 0x42), 6 -> 4.
  run_lowbit '3\n6\n' convert --to p3109:k=8:p=1
  expect_equal "p3109 k8p1 ties" "$out" "0x42 4
0x42 4"
  ;;
stochastic)
  inputs=$(printf '0.3\\n%.0s' $(seq 200))
  run_lowbit "$inputs" convert --to e2m1 --rounding stochastic --seed 7
  first=$out
  run_lowbit "$inputs" convert --to e2m1 --rounding stochastic --seed 7
  expect_equal "same seed, same codes" "$out" "$first"
  run_lowbit "$inputs" convert --to e2m1 --rounding stochastic --seed 8
  [ "$out" != "$first" ] || fail "another seed gave the same 200 codes"
  # 0.3 lies 0.6 of the way from 0 to 0.5: about 120 of 200 round up (6 sigma = 42).
  ups=$(grep -c '^0x1 0.5$' <<<"$first")
  downs=$(grep -c '^0x0 0$' <<<"$first")
  expect_equal "only the two neighbours" "$((ups + downs))" 200
  [ "$ups" -ge 78 ] && [ "$ups" -le 162 ] || fail "$ups of 200 rounded up, expected 120 +- 42"
  # One random bit: the probability is 0.6 truncated to 1 bit, 0.5.
  run_lowbit "$inputs" convert --to e2m1 --rounding stochastic --seed 7 --random-bits 1
  ups=$(grep -c '^0x1 0.5$' <<<"$out")
  [ "$ups" -ge 58 ] && [ "$ups" -le 142 ] || fail "1 random bit: $ups of 200 rounded up, expected 100 +- 42"
  ;;
from-double)
  # 1.74999999999 is 1.75 as a float32, the e2m1 tie between 1.5 (0x3) and 2 (0x4, even);
  # read as a float64 it lies below the midpoint and rounds once, to 1.5.
  run_lowbit '1.74999999999\n' convert --to e2m1
  expect_equal "through float32" "$out" "0x4 2"
  run_lowbit '1.74999999999\n0x3ffbffffffffffff\n0x3ffc000000000000\n' convert --to e2m1 --from-double
  expect_equal "float64, rounded once" "$out" "0x3 1.5
0x3 1.5
0x4 2"
  # The float64 bit pattern takes exactly 16 hex digits, without a sign.
  run_lowbit '-0x3ffc000000000000\n0x3ffc00000000000\n0x1.cp0\n' convert --to e2m1 --from-double
  expect_equal "float64 bad hex output" "$out" "error
error
error"
  expect_equal "float64 bad hex: exit status" "$status" 1
  expect_contains "float64 signed hex" "$err" "line 1: '-0x3ffc000000000000' is not a float64"
  expect_contains "float64 15 digits" "$err" "line 2: '0x3ffc00000000000' is not a float64"
  expect_contains "float64 hex float" "$err" "line 3: '0x1.cp0' is not a float64"
  ;;
formats)
  run_lowbit '' formats
  expect_equal "exit status" "$status" 0
  for name in fp32 tf32 bf16 fp16 e4m3 e4m3fnuz e5m2 e5m2fnuz e3m4 e2m3 e3m2 e2m1 ue8m0 ue4m3 e8m13 int8 int4 uint8 uint4; do
    grep -q "^$name " <<<"$out" || fail "lowbit formats does not list $name"
  done
  expect_contains "e4m3 row" "$(grep '^e4m3 ' <<<"$out")" "448"
  # Descriptions are derived from the records: e4m3 NaN is S.1111.111 (0x7f/0xff), fnuz NaN is
  # the negative-zero code 0b1'0000'000, ue8m0 is 2^(code - 127) with NaN 0b1111'1111.
  expect_contains "e4m3 description" "$(grep '^e4m3 ' <<<"$out")" "OCP FP8 E4M3 (fn): bias 7, NaN 0x7f/0xff, no Inf"
  expect_contains "e4m3fnuz description" "$(grep '^e4m3fnuz ' <<<"$out")" "bias 8, NaN 0x80, no Inf"
  expect_contains "e5m2 description" "$(grep '^e5m2 ' <<<"$out")" "OCP FP8 E5M2: bias 15, IEEE Inf/NaN"
  expect_contains "e2m1 description" "$(grep '^e2m1 ' <<<"$out")" "OCP FP4 E2M1: bias 1, no Inf/NaN"
  expect_contains "ue8m0 description" "$(grep '^ue8m0 ' <<<"$out")" "unsigned, bias 127, no zero, NaN 0xff, no Inf"
  expect_contains "int8 description" "$(grep '^int8 ' <<<"$out")" "two's complement integer: -128 .. 127"
  expect_contains "uint4 description" "$(grep '^uint4 ' <<<"$out")" "unsigned integer: 0 .. 15"
  expect_contains "spec hint" "$out" "p3109:k=K:p=P"
  ;;
format)
  # P3109 K8P3 signed extended: bias 2^(8-3-1) = 16, NaN 0x80, Inf 0x7f/0xff, max 0x7e =
  # 1.5 * 2^15 = 49152.
  run_lowbit '' format p3109:k=8:p=3
  expect_equal "exit status" "$status" 0
  expect_equal "code rows" "$(grep -cE '^0x[0-9a-f]{2} ' <<<"$out")" 256
  expect_contains "bias" "$out" "bias           16"
  expect_contains "max finite" "$out" "max finite     49152  (0x7e)"
  expect_equal "NaN row" "$(grep '^0x80 ' <<<"$out" | tr -s ' ')" "0x80 0b1'00000'00 nan"
  expect_equal "Inf row" "$(grep '^0x7f ' <<<"$out" | tr -s ' ')" "0x7f 0b0'11111'11 inf"
  expect_equal "-Inf row" "$(grep '^0xff ' <<<"$out" | tr -s ' ')" "0xff 0b1'11111'11 -inf"
  # Unsigned finite K8P1: 8 exponent bits, bias 2^(8-1) = 128, NaN is the top code 0xff, no
  # Inf; 0xfe = 2^(254-128).
  run_lowbit '' format p3109:k=8:p=1:unsigned:finite
  expect_equal "unsigned NaN row" "$(grep '^0xff ' <<<"$out" | tr -s ' ')" "0xff 0b11111111 nan"
  expect_equal "unsigned max row" "$(grep '^0xfe ' <<<"$out" | tr -s ' ')" "0xfe 0b11111110 8.507059173023462e+37"
  # e2m1: 16 rows, 0b0'11'1 = 6.
  run_lowbit '' format e2m1
  expect_equal "e2m1 rows" "$(grep -cE '^0x[0-9a-f] ' <<<"$out")" 16
  expect_equal "e2m1 max row" "$(grep '^0x7 ' <<<"$out" | tr -s ' ')" "0x7 0b0'11'1 6"
  # More than 8 bits: parameters only.
  run_lowbit '' format fp16
  expect_equal "fp16 has no table" "$(grep -cE '^0x[0-9a-f]{4} ' <<<"$out")" 0
  expect_contains "fp16 max" "$out" "max finite     65504"
  ;;
bad-arguments)
  run_lowbit '' format e4m3:bias=99999
  expect_equal "bad spec status" "$status" 2
  expect_contains "bad spec names the field" "$err" "bias=99999"
  run_lowbit '' format e4m3:nan=sometimes
  expect_contains "unknown NaN policy" "$err" "nan: unknown NaN encoding 'sometimes'"
  run_lowbit '1\n' convert --to e4m3 --overflow inf
  expect_equal "overflow=inf without Inf: status" "$status" 2
  expect_contains "overflow=inf without Inf" "$err" "e4m3 has no Inf"
  run_lowbit '1\n' convert --to nonsense
  expect_equal "unknown format status" "$status" 2
  expect_contains "unknown format" "$err" "unknown format 'nonsense'"
  run_lowbit '1\n' convert --to e4m3 --rounding stochastic --random-bits 0
  expect_equal "random bits 0: status" "$status" 2
  expect_contains "random bits 0" "$err" "random_bits=0"
  run_lowbit '1\n' convert --to e4m3 --rounding sideways
  [ "$status" -ne 0 ] || fail "--rounding sideways was accepted"
  ;;
*)
  echo "unknown group '$group'" >&2
  exit 2
  ;;
esac

[ "$failures" -eq 0 ] && echo "$group: all checks passed"
exit $((failures > 0))
