// sm90_ex2_structure: how MUFU.EX2 (ex2.approx.ftz.f32) reduces its input, and its tables (the data
// of emulation/sfu/ex2.hpp, emulation/sfu/data/README.md). A research program, run on a GPU:
//   hypotheses        every input with |x| < 130 against 15 models 2^n T[i], where (n, i) split
//                     X = round(x 2^F) (two's complement: floor, nearest, toward zero) or
//                     X = round(|x| 2^F) (sign-magnitude: nearest, toward zero), F = 22, 23, 24,
//                     T measured at the exact points; mismatches per model and exponent, examples.
//   tables OUT_DIR    T+[i] = ex2(i 2^-23) and T-[i] = ex2(-i 2^-23) as consecutive bit-pattern
//                     differences (int8) in OUT_DIR/sm90_ex2_{positive,negative}.delta; and a check
//                     that |x| >= 130 gives +0 / +inf and NaN a NaN.
// Exit 0 when it ran; the findings are in its output.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "emulation/sfu/ex2.hpp"  // sfu::sm90_ex2: the instruction on the device

namespace {

using lowbit::sfu::sm90_ex2;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "sm90_ex2_structure: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// ---- hypotheses ---------------------------------------------------------------------------------
enum Family { kTwosComplement, kSignMagnitude };
enum Mode { kFloor, kNearest, kTowardZero };  // sign-magnitude: floor = toward zero
struct Hypothesis {
  int family, fraction_index, mode;  // fraction bits F = 22 + fraction_index
};
constexpr int kHypotheses = 15;
constexpr int kBuckets = 512;  // sign and biased exponent of x
__constant__ Hypothesis kModels[kHypotheses];

struct Tables {
  const float* positive[3];  // ex2(i 2^-F), F = 22, 23, 24
  const float* negative[3];  // ex2(-i 2^-F)
};

__global__ void fill(float* t, int fraction_bits, float sign) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (1u << fraction_bits)) t[i] = sm90_ex2(sign * ldexpf(float(i), -fraction_bits));
}

__device__ float model(float x, Hypothesis h, const Tables& tables) {
  const int bits = 22 + h.fraction_index;
  const double scaled = ldexp(double(x), bits);  // exact
  const long long mask = (1ll << bits) - 1;
  double r;
  if (h.family == kTwosComplement) {
    const long long fixed = (long long)(h.mode == kFloor ? floor(scaled) : h.mode == kNearest ? rint(scaled) : trunc(scaled));
    r = ldexp(double(tables.positive[h.fraction_index][fixed & mask]), int(fixed >> bits));
  } else {
    const long long fixed = (long long)(h.mode == kNearest ? rint(fabs(scaled)) : trunc(fabs(scaled)));
    const int n = int(fixed >> bits);
    r = x < 0 ? ldexp(double(tables.negative[h.fraction_index][fixed & mask]), -n)
              : ldexp(double(tables.positive[h.fraction_index][fixed & mask]), n);
  }
  if (r < ldexp(1.0, -126)) return 0.0f;
  if (r >= ldexp(1.0, 128)) return INFINITY;
  return float(r);
}

// examples: per model, a count then up to 8 (input, output) bit pairs.
__global__ void sweep(Tables tables, unsigned long long* mismatches, std::uint32_t* examples) {
  __shared__ unsigned int local[kHypotheses * kBuckets];
  for (int k = threadIdx.x; k < kHypotheses * kBuckets; k += blockDim.x) local[k] = 0;
  __syncthreads();
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t u = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < (1ull << 32); u += stride) {
    const float x = __uint_as_float(std::uint32_t(u));
    if (!(fabsf(x) < 130.0f)) continue;
    const float y = sm90_ex2(x);
    for (int h = 0; h < kHypotheses; ++h) {
      if (__float_as_uint(model(x, kModels[h], tables)) == __float_as_uint(y)) continue;
      atomicAdd(&local[h * kBuckets + int(u >> 23)], 1u);
      const unsigned slot = atomicAdd(&examples[h * 17], 1u);
      if (slot < 8) {
        examples[h * 17 + 1 + 2 * slot] = std::uint32_t(u);
        examples[h * 17 + 2 + 2 * slot] = __float_as_uint(y);
      }
    }
  }
  __syncthreads();
  for (int k = threadIdx.x; k < kHypotheses * kBuckets; k += blockDim.x)
    if (local[k]) atomicAdd(&mismatches[k], (unsigned long long)local[k]);
}

int hypotheses() {
  Hypothesis h[kHypotheses];
  int count = 0;
  for (int f = 0; f < 3; ++f)
    for (int m : {kFloor, kNearest, kTowardZero}) h[count++] = {kTwosComplement, f, m};
  for (int f = 0; f < 3; ++f)
    for (int m : {kNearest, kTowardZero}) h[count++] = {kSignMagnitude, f, m};
  check(cudaMemcpyToSymbol(kModels, h, sizeof h), "cudaMemcpyToSymbol");
  Tables tables;
  for (int f = 0; f < 3; ++f) {
    const std::size_t n = std::size_t(1) << (22 + f);
    float *pos, *neg;
    check(cudaMalloc(&pos, n * 4), "cudaMalloc");
    check(cudaMalloc(&neg, n * 4), "cudaMalloc");
    fill<<<unsigned((n + 255) / 256), 256>>>(pos, 22 + f, 1.0f);
    fill<<<unsigned((n + 255) / 256), 256>>>(neg, 22 + f, -1.0f);
    tables.positive[f] = pos;
    tables.negative[f] = neg;
  }
  unsigned long long* mismatches;
  std::uint32_t* examples;
  check(cudaMalloc(&mismatches, kHypotheses * kBuckets * 8), "cudaMalloc");
  check(cudaMemset(mismatches, 0, kHypotheses * kBuckets * 8), "cudaMemset");
  check(cudaMalloc(&examples, kHypotheses * 17 * 4), "cudaMalloc");
  check(cudaMemset(examples, 0, kHypotheses * 17 * 4), "cudaMemset");
  sweep<<<132 * 8, 256>>>(tables, mismatches, examples);
  check(cudaDeviceSynchronize(), "sweep");
  std::vector<unsigned long long> m(kHypotheses * kBuckets);
  std::vector<std::uint32_t> e(kHypotheses * 17);
  check(cudaMemcpy(m.data(), mismatches, m.size() * 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(e.data(), examples, e.size() * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const char* family[2] = {"two's complement", "sign-magnitude"};
  const char* mode[3] = {"floor", "nearest", "toward zero"};
  for (int k = 0; k < kHypotheses; ++k) {
    unsigned long long total = 0;
    for (int b = 0; b < kBuckets; ++b) total += m[k * kBuckets + b];
    std::printf("%-16s F=%d %-11s mismatches %llu; by (sign, exponent):", family[h[k].family], 22 + h[k].fraction_index,
                mode[h[k].mode], total);
    for (int b = 0, shown = 0; b < kBuckets && shown < 24; ++b)
      if (m[k * kBuckets + b]) std::printf(" %c%d:%llu", b >= 256 ? '-' : '+', (b & 255) - 127, m[k * kBuckets + b]), ++shown;
    std::printf("\n   examples:");
    for (unsigned s = 0; s < 8 && s < e[k * 17]; ++s) {
      float x, y;
      std::memcpy(&x, &e[k * 17 + 1 + 2 * s], 4);
      std::memcpy(&y, &e[k * 17 + 2 + 2 * s], 4);
      std::printf(" ex2(%a)=%a", double(x), double(y));
    }
    std::printf("\n");
  }
  return 0;
}

// ---- tables ---------------------------------------------------------------------------------------
__global__ void fill_bits(std::uint32_t* t, float sign) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (1u << 23)) t[i] = __float_as_uint(sm90_ex2(sign * ldexpf(float(i), -23)));
}
__global__ void outside(unsigned long long* wrong, std::uint32_t* example) {
  const std::uint64_t stride = std::uint64_t(gridDim.x) * blockDim.x;
  for (std::uint64_t u = std::uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; u < (1ull << 32); u += stride) {
    const float x = __uint_as_float(std::uint32_t(u));
    if (fabsf(x) < 130.0f) continue;
    const float y = sm90_ex2(x);
    const bool expected = isnan(x) ? isnan(y) : x < 0 ? __float_as_uint(y) == 0u : y == INFINITY;
    if (!expected && atomicAdd(wrong, 1ull) == 0) example[0] = std::uint32_t(u), example[1] = __float_as_uint(y);
  }
}

int tables(const char* out_dir) {
  const std::size_t n = std::size_t(1) << 23;
  std::uint32_t* device;
  check(cudaMalloc(&device, n * 4), "cudaMalloc");
  for (float sign : {1.0f, -1.0f}) {
    fill_bits<<<unsigned(n / 256), 256>>>(device, sign);
    std::vector<std::uint32_t> t(n);
    check(cudaMemcpy(t.data(), device, n * 4, cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::vector<std::int8_t> delta(n);
    for (std::size_t i = 0; i < n; ++i) {
      const long d = long(t[i]) - long(i ? t[i - 1] : 0x3f800000u);
      if (d < -128 || d > 127) {
        std::fprintf(stderr, "sm90_ex2_structure: difference %ld at %zu does not fit a byte\n", d, i);
        return 1;
      }
      delta[i] = std::int8_t(d);
    }
    char path[4096];
    std::snprintf(path, sizeof path, "%s/sm90_ex2_%s.delta", out_dir, sign > 0 ? "positive" : "negative");
    FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(delta.data(), 1, n, f) != n || std::fclose(f) != 0) {
      std::fprintf(stderr, "sm90_ex2_structure: cannot write %s\n", path);
      return 1;
    }
    float first, last;
    std::memcpy(&first, &t[1], 4);
    std::memcpy(&last, &t[n - 1], 4);
    std::printf("%s: T[1] = %a, T[2^23 - 1] = %a\n", path, double(first), double(last));
  }
  unsigned long long* wrong;
  std::uint32_t* example;
  check(cudaMalloc(&wrong, 8), "cudaMalloc");
  check(cudaMemset(wrong, 0, 8), "cudaMemset");
  check(cudaMalloc(&example, 8), "cudaMalloc");
  outside<<<132 * 8, 256>>>(wrong, example);
  unsigned long long w;
  std::uint32_t ex[2];
  check(cudaMemcpy(&w, wrong, 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
  check(cudaMemcpy(ex, example, 8, cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::printf("inputs with |x| >= 130 or NaN not giving +0 / +inf / NaN: %llu", w);
  if (w) std::printf(" (first: bits %08x -> %08x)", ex[0], ex[1]);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "hypotheses") == 0) return hypotheses();
  if (argc >= 3 && std::strcmp(argv[1], "tables") == 0) return tables(argv[2]);
  std::fprintf(stderr, "usage: sm90_ex2_structure hypotheses | tables OUT_DIR (on a GPU)\n");
  return 2;
}
