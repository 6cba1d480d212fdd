// The recipe's per-thread Q and K groups, derived and checked on the host once, then uploaded to
// each kernel translation unit that reads them (groups.cuh).
#include <mutex>
#include <stdexcept>
#include <string>

#include "emulation/attention/sage2_hopper.hpp"
#include "emulation/layout.hpp"
#include "emulation/quant/thread_groups.hpp"
#include "kernels/attention/sage2_kernels.cuh"

namespace lowbit::kernels::attention::detail {

using lowbit::attention::Sage2HopperRecipe;
using lowbit::attention::sage2_8b_hopper;

void upload_groups(int head_dim) {
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    quant::QkGroups both[2];
    for (int d : {64, 128}) {
      const Sage2HopperRecipe recipe = sage2_8b_hopper(d);
      if (auto why = recipe.validate()) {
        failure = "sage2-8b recipe for d=" + std::to_string(d) + ": " + *why;
        return;
      }
      const quant::QkGroups g = quant::derive_groups(recipe.qk_tiling(), quant::GroupScope::thread);
      // The attention kernel reads one Q scale and one K scale per thread.
      const layout::Fragment s = layout::wgmma_m64_d(recipe.block_kv);
      for (int unit = 0; unit < recipe.qk_tiling().units(); ++unit)
        for (int t = 0; t < s.threads(); ++t)
          for (int v = 0; v < s.value_count; ++v) {
            const layout::Offset at = s(t, v), first = s(t, 0);
            if (g.q.group_of_row[unit * 64 + at.row] != g.q.group_of_row[unit * 64 + first.row] ||
                g.k.group_of_row[at.col] != g.k.group_of_row[first.col])
              failure = "sage2-8b recipe for d=" + std::to_string(d) + ": thread " + std::to_string(t) +
                        " holds two Q or K groups; the kernel has one score scale per thread";
          }
      both[d == 128] = g;
    }
    if (!failure.empty()) return;
    upload_quantize_groups(both);
    upload_attention_groups(both);
    upload_in_place_attention_groups(both);
    upload_smooth_v_attention_groups(both);
    upload_pv_row_sum_attention_groups(both);
  });
  if (!failure.empty()) throw std::logic_error(failure);
  (void)head_dim;
}

}  // namespace lowbit::kernels::attention::detail

