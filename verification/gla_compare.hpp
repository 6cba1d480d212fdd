// The intra-chunk GLA kernels (kernels/linear/gla_intra.hpp) against their emulation
// (linear::intra_chunk), every bit of P and of the intra-chunk output, chunk by chunk, counted by
// stage: P in the diagonal blocks (fp32 steps), P in the inter-sub-chunk strips (the score MMA and
// its quantization), and the output of chunks whose P is equal (the P V stage alone). What
// check_linear_gpu counts and reports.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "emulation/linear/gla.hpp"
#include "kernels/linear/gla_intra.hpp"

namespace lowbit::verification {

struct GlaComparison {
  std::size_t checked = 0, score_mismatches = 0, intra_mismatches = 0;
  // By stage: P in the diagonal blocks, P in the strips, the output where the chunk's P is equal.
  std::size_t diagonal_mismatches = 0, strip_mismatches = 0, pv_only_mismatches = 0;
  std::size_t chunks_checked = 0, chunks_mismatching = 0;
  std::string first_mismatch;
};

inline bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

// Every bit of one head's P and intra-chunk output (GPU: the whole launch, head h at its offset),
// added to `c`.
inline void compare_gla_head(GlaComparison& c, int h, const linear::IntraResult& emu, const std::vector<float>& gpu_scores,
                             const std::vector<float>& gpu_intra) {
  constexpr int C = kernels::kGlaChunk, sub = kernels::kGlaSubChunk;
  const Eigen::Index tokens = emu.intra.rows(), dv = emu.intra.cols();
  const std::size_t score_head = std::size_t(h) * std::size_t(tokens) * C, intra_head = std::size_t(h) * std::size_t(tokens * dv);
  const auto note = [&](const char* stage, Eigen::Index token, Eigen::Index column, float gpu, float expected) {
    if (c.first_mismatch.empty())
      c.first_mismatch = fmt::format("{}: head {} token {} column {}: GPU {:a} emulation {:a}", stage, h, token, column,
                                     gpu, expected);
  };
  for (Eigen::Index first = 0; first < tokens; first += C) {
    std::size_t score_bad = 0, intra_bad = 0;
    for (Eigen::Index t = first; t < first + C; ++t) {
      for (int s = 0; s < C; ++s) {
        const float e = emu.scores(t, s), g = gpu_scores[score_head + std::size_t(t) * C + std::size_t(s)];
        if (same_bits(e, g)) continue;
        ++score_bad;
        ++(s / sub == (t - first) / sub ? c.diagonal_mismatches : c.strip_mismatches);
        note(s / sub == (t - first) / sub ? "P, diagonal block" : "P, strip", t, s, g, e);
      }
      for (Eigen::Index y = 0; y < dv; ++y) {
        const float e = emu.intra(t, y), g = gpu_intra[intra_head + std::size_t(t * dv + y)];
        if (same_bits(e, g)) continue;
        ++intra_bad;
        note(score_bad ? "intra" : "intra (P equal so far)", t, y, g, e);
      }
    }
    c.score_mismatches += score_bad;
    c.intra_mismatches += intra_bad;
    if (!score_bad) c.pv_only_mismatches += intra_bad;
    c.checked += std::size_t(C) * std::size_t(C + dv);
    ++c.chunks_checked;
    if (score_bad || intra_bad) ++c.chunks_mismatching;
  }
}

// Whether any bit of the chunk of head h that starts at token `first` differs (gs, gi: the GPU's P
// and output of that chunk).
inline bool gla_chunk_differs(const linear::IntraResult& emu, Eigen::Index first, const float* gs, const float* gi) {
  constexpr int C = kernels::kGlaChunk;
  const Eigen::Index dv = emu.intra.cols();
  bool bad = false;
  for (Eigen::Index i = 0; i < C * C && !bad; ++i) bad = !same_bits(gs[i], emu.scores(first + i / C, i % C));
  for (Eigen::Index i = 0; i < C * dv && !bad; ++i) bad = !same_bits(gi[i], emu.intra(first + i / dv, i % dv));
  return bad;
}

}  // namespace lowbit::verification
