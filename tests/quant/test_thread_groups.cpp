// Per-thread groups against the PTX ISA's fragment formulas, written out here procedurally
// (independent of layout.hpp's bases), and against the SageAttention2 paper's statement.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "emulation/mma/instruction.hpp"
#include "emulation/quant/quantize.hpp"
#include "emulation/quant/thread_groups.hpp"
#include "tensors.hpp"

using namespace lowbit;
using namespace lowbit::quant;

namespace {

struct Element {
  int row, col;
};

// PTX ISA, "Matrix Fragments for mma.m16n8k*" accumulator C/D (.s32/.f32), 4 values per thread:
// groupID = laneid >> 2, threadID_in_group = laneid % 4,
// row = groupID for c0, c1 and groupID + 8 for c2, c3; col = threadID_in_group * 2 + (i & 1).
Element ptx_mma_m16n8_c(int lane, int i) {
  const int group_id = lane >> 2, tig = lane % 4;
  return {i < 2 ? group_id : group_id + 8, tig * 2 + (i & 1)};
}
// PTX ISA, mma.m8n8k16 / m8n8k32 accumulator: row = groupID, col = threadID_in_group * 2 + i.
Element ptx_mma_m8n8_c(int lane, int i) { return {lane >> 2, (lane % 4) * 2 + i}; }
// PTX ISA, "wgmma .m64nNk* register fragment D": warp w of the warpgroup owns rows 16w..16w+15;
// row = 16w + groupID + 8 * ((i >> 1) & 1), col = 8 * (i >> 2) + threadID_in_group * 2 + (i & 1).
Element ptx_wgmma_m64_d(int thread, int i) {
  const int warp = thread / 32, lane = thread % 32;
  return {16 * warp + (lane >> 2) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + (lane % 4) * 2 + (i & 1)};
}

// The partition of rows implied by "rows one thread holds share a scale": the classes of the
// transitive closure, by repeated merging of sets (a plain method, not union-find).
using Partition = std::set<std::set<int>>;
Partition closure(std::vector<std::set<int>> sets) {
  bool merged = true;
  while (merged) {
    merged = false;
    for (std::size_t a = 0; a < sets.size() && !merged; ++a)
      for (std::size_t b = a + 1; b < sets.size() && !merged; ++b) {
        bool meet = false;
        for (int r : sets[b]) meet = meet || sets[a].count(r);
        if (meet) {
          sets[a].insert(sets[b].begin(), sets[b].end());
          sets.erase(sets.begin() + std::ptrdiff_t(b));
          merged = true;
        }
      }
  }
  return Partition(sets.begin(), sets.end());
}

// Expected Q and K partitions of a block from a PTX formula: units of `threads` threads, each
// covering rows_per_unit x block_k with m x n tiles of `values` values per thread. Per thread,
// the rows one thread holds share a scale; per warp, the rows the 32 threads of one warp
// (thread / 32 of its unit) hold.
struct Expected {
  Partition q, k;
};
template <class Formula>
Expected expected_groups(Formula formula, int threads, int values, int m, int n, int units, int block_q, int block_k,
                         bool per_warp) {
  std::map<std::pair<int, int>, std::set<int>> q_sets, k_sets;  // by (unit, thread or warp)
  const int rows_per_unit = block_q / units;
  for (int u = 0; u < units; ++u)
    for (int t = 0; t < threads; ++t) {
      const std::pair<int, int> holder{u, per_warp ? t / 32 : t};
      for (int tm = 0; tm < rows_per_unit / m; ++tm)
        for (int tn = 0; tn < block_k / n; ++tn)
          for (int i = 0; i < values; ++i) {
            const Element e = formula(t, i);
            q_sets[holder].insert(u * rows_per_unit + tm * m + e.row);
            k_sets[holder].insert(tn * n + e.col);
          }
    }
  const auto sets = [](const std::map<std::pair<int, int>, std::set<int>>& by_holder) {
    std::vector<std::set<int>> v;
    for (const auto& [holder, rows] : by_holder) v.push_back(rows);
    return v;
  };
  return {closure(sets(q_sets)), closure(sets(k_sets))};
}

Partition partition_of(const BlockGroups& g) {
  std::map<int, std::set<int>> by_group;
  for (int r = 0; r < g.block_rows; ++r) by_group[g.group_of_row[std::size_t(r)]].insert(r);
  Partition p;
  for (auto& [id, rows] : by_group) p.insert(rows);
  return p;
}

}  // namespace

// Derivable at compile time, so a CUDA kernel can compute the same map (LOWBIT_HD constexpr).
static_assert(derive_groups(ThreadTiling{}, GroupScope::thread).q.count == 32);
static_assert(derive_groups(ThreadTiling{}, GroupScope::thread).k.count == 4);

TEST_CASE("mma.m16n8k64.s4, 4 warps, 128x64: the paper's 32 Q groups and 4 K groups", "[groups]") {
  const ThreadTiling t{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64};
  REQUIRE_FALSE(t.validate());
  const QkGroups g = derive_groups(t, GroupScope::thread);
  CHECK(g.q.count == 32);
  CHECK(g.k.count == 4);
  // SageAttention2 §3.3 / App. A.6: in warp w's 32 rows, tokens i, 8+i, 16+i, 24+i share a Q
  // scale; keys 8j+2i and 8j+2i+1 (j = 0..7) share a K scale.
  for (int r = 0; r < 128; ++r)
    for (int s = 0; s < 128; ++s)
      CHECK((g.q.group_of_row[std::size_t(r)] == g.q.group_of_row[std::size_t(s)]) ==
            (r / 32 == s / 32 && r % 8 == s % 8));
  for (int a = 0; a < 64; ++a)
    for (int b = 0; b < 64; ++b)
      CHECK((g.k.group_of_row[std::size_t(a)] == g.k.group_of_row[std::size_t(b)]) == ((a % 8) / 2 == (b % 8) / 2));
}

TEST_CASE("per-thread groups equal the closure of the PTX fragment formulas", "[groups]") {
  struct Case {
    ThreadTiling tiling;
    int units;
    bool wgmma, m8n8;
  };
  const std::vector<Case> cases{
      {{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64}, 4, false, false},
      {{mma::atoms::mma_m16n8k32_s32_s8_s8, 4, 128, 64}, 4, false, false},
      {{mma::atoms::mma_m16n8k32_s32_s8_s8, 8, 128, 64}, 8, false, false},
      {{mma::atoms::mma_m16n8k64_s32_s4_s4, 2, 64, 32}, 2, false, false},
      {{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 256, 128}, 4, false, false},
      {{mma::atoms::mma_m8n8k32_s32_s4_s4, 4, 32, 64}, 4, false, true},
      {{mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64}, 1, true, false},
      {{mma::atoms::wgmma_m64nNk32_s32_s8_s8(128), 4, 64, 128}, 1, true, false},
      {{mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 8, 128, 64}, 2, true, false},
  };
  for (const Case& c : cases)
    for (bool per_warp : {false, true}) {
      const ThreadTiling& t = c.tiling;
      INFO(t.atom.name.view() << " warps=" << t.warps << " " << t.block_q << "x" << t.block_k << " per_warp=" << per_warp);
      REQUIRE_FALSE(t.validate());
      const QkGroups g = derive_groups(t, per_warp ? GroupScope::warp : GroupScope::thread);
      Expected e;
      if (c.wgmma)
        e = expected_groups(ptx_wgmma_m64_d, 128, t.atom.n / 2, 64, t.atom.n, c.units, t.block_q, t.block_k, per_warp);
      else if (c.m8n8)
        e = expected_groups(ptx_mma_m8n8_c, 32, 2, 8, 8, c.units, t.block_q, t.block_k, per_warp);
      else
        e = expected_groups(ptx_mma_m16n8_c, 32, 4, 16, 8, c.units, t.block_q, t.block_k, per_warp);
      CHECK(partition_of(g.q) == e.q);
      CHECK(partition_of(g.k) == e.k);
    }
}

TEST_CASE("wgmma m64n64k32 s8 with one warpgroup on 128 rows: 32 Q groups, 4 K groups", "[groups]") {
  const QkGroups g = derive_groups({mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64}, GroupScope::thread);
  CHECK(g.q.count == 32);
  CHECK(g.k.count == 4);
  // Thread (warp w, groupID i) holds rows 16w + i + {0, 8} of both m64 tiles.
  CHECK(g.q.group_of_row[3] == g.q.group_of_row[11]);
  CHECK(g.q.group_of_row[3] == g.q.group_of_row[67]);
  CHECK(g.q.group_of_row[3] != g.q.group_of_row[19]);
}

TEST_CASE("per-warp, mma.sync: one Q group per warp's rows, one K group per block", "[groups]") {
  const QkGroups g = derive_groups({mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64}, GroupScope::warp);
  CHECK(g.q.count == 4);
  CHECK(g.k.count == 1);
  for (int r = 0; r < 128; ++r) CHECK(g.q.group_of_row[std::size_t(r)] == r / 32);
}

TEST_CASE("per-warp, wgmma: a warp's rows are 16w..16w+15 of every 64-row tile, not the warpgroup's", "[groups]") {
  // One warpgroup on 128 rows (two m64 tiles): warp w holds rows 16w + {0..15} and 64 + 16w + {0..15}.
  const QkGroups one = derive_groups({mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64}, GroupScope::warp);
  CHECK(one.q.count == 4);
  CHECK(one.k.count == 1);
  for (int r = 0; r < 128; ++r)
    for (int s = 0; s < 128; ++s)
      CHECK((one.q.group_of_row[std::size_t(r)] == one.q.group_of_row[std::size_t(s)]) == (r % 64 / 16 == s % 64 / 16));
  // Two warpgroups, 64 rows each: 8 warps, 8 groups of 16 consecutive rows.
  const QkGroups two = derive_groups({mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 8, 128, 64}, GroupScope::warp);
  CHECK(two.q.count == 8);
  for (int r = 0; r < 128; ++r) CHECK(two.q.group_of_row[std::size_t(r)] == r / 16);
  const Grouping q = grouping::per_warp({mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 4, 128, 64}, Operand::q);
  CHECK(q.name.rfind("per-warp(", 0) == 0);
  CHECK(q.groups_per_period == 4);
}

// The quantizer reads the registry's own records: each named atom is the one find_instruction
// makes from its PTX name (the m8n8 shapes are not modeled: layout.hpp maps only their accumulator).
TEST_CASE("the quantizer's atoms are the MMA registry's records", "[groups][registry]") {
  std::vector<mma::Atom> atoms{mma::atoms::mma_m16n8k32_s32_s8_s8, mma::atoms::mma_m16n8k64_s32_s4_s4};
  for (int n = 8; n <= 256; n += 8) atoms.push_back(mma::atoms::wgmma_m64nNk32_s32_s8_s8(n));
  for (const mma::Atom& atom : atoms) {
    INFO(atom.name.view());
    CHECK(mma::find_instruction("sm_90", atom.name.view()).atom == atom);
  }
  for (const mma::Atom& atom : {mma::atoms::mma_m8n8k16_s32_s8_s8, mma::atoms::mma_m8n8k32_s32_s4_s4}) {
    CHECK(atom.name.view().starts_with("mma.sync.aligned.m8n8k"));
    CHECK(atom.c_fragment == layout::mma_m8n8_c);
    CHECK_THROWS_AS(mma::find_instruction("sm_80", atom.name.view()), mma::UnknownInstruction);
  }
}

TEST_CASE("invalid tilings are named precisely", "[groups]") {
  CHECK(ThreadTiling{mma::atoms::wgmma_m64nNk32_s32_s8_s8(64), 3, 128, 64}.validate().value_or("").find("warps=3") != std::string::npos);
  CHECK(ThreadTiling{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 96, 64}.validate().value_or("").find("block_q=96") != std::string::npos);
  CHECK(ThreadTiling{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 60}.validate().value_or("").find("block_k=60") != std::string::npos);
  CHECK(ThreadTiling{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 1024, 64}.validate().value_or("").find("at most 512") != std::string::npos);
  const mma::Atom tcgen05 = mma::make_atom({.issue = mma::Issue::tcgen05, .m = 128, .n = 64, .k = 32, .d = formats::fp32,
                                            .a = formats::e4m3, .b = formats::e4m3, .kind = "kind::f8f6f4"});
  CHECK(ThreadTiling{tcgen05, 4, 128, 64}.validate().value_or("").find("no accumulator fragment") != std::string::npos);
  CHECK_THROWS_WITH(grouping::per_thread({mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 96, 64}, Operand::q),
                    Catch::Contains("block_q=96"));
}

TEST_CASE("a per-thread grouping repeats its block map down the tensor", "[groups]") {
  const ThreadTiling t{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64};
  const Grouping q = grouping::per_thread(t, Operand::q), k = grouping::per_thread(t, Operand::k);
  CHECK(q.row_period == 128);
  CHECK(q.groups_per_period == 32);
  CHECK(k.row_period == 64);
  CHECK(k.groups_per_period == 4);
  CHECK(q.col_multiple == 64);  // the head dimension is padded to whole k64 instructions
  const QuantizedTensor qt = quantize(MatrixF::Ones(256, 64), presets::int4(q));
  CHECK(qt.group_count() == 64);
  CHECK(qt.group_of(0, 0) == 0);
  CHECK(qt.group_of(8, 5) == 0);
  CHECK(qt.group_of(33, 0) == 9);
  CHECK(qt.group_of(128 + 24, 0) == 32);
}

TEST_CASE("per-token and per-thread coincide when a block has one token per group", "[groups][property]") {
  // mma.m8n8k32.s4: each thread holds one row of its 8-row tile, so with 4 warps and
  // block_q = 32 every Q group is a single token.
  const ThreadTiling t{mma::atoms::mma_m8n8k32_s32_s4_s4, 4, 32, 64};
  const QkGroups g = derive_groups(t, GroupScope::thread);
  REQUIRE(g.q.count == 32);
  MatrixF x = test::normal_tensor(96, 64, 7);
  for (int i = 0; i < x.size(); ++i) x.data()[i] *= float(1 + i % 13);
  const QuantizedTensor per_thread = quantize(x, presets::int4(grouping::per_thread(t, Operand::q)));
  const QuantizedTensor per_token = quantize(x, presets::int4(grouping::per_token()));
  CHECK(per_thread.codes == per_token.codes);
  for (int r = 0; r < 96; ++r) CHECK(per_thread.scales[std::size_t(per_thread.group_of(r, 0))] == per_token.scales[std::size_t(r)]);
  CHECK(dequantize(per_thread) == dequantize(per_token));
}

TEST_CASE("per-thread equals per-token on m16n8k64 when the rows of each group share their amax", "[groups][property]") {
  const ThreadTiling t{mma::atoms::mma_m16n8k64_s32_s4_s4, 4, 128, 64};
  MatrixF x = test::normal_tensor(256, 128, 11);
  // Give every row the same max: its largest element set to 5 (any group then has amax 5).
  for (int r = 0; r < x.rows(); ++r) {
    Eigen::Index c;
    x.row(r).cwiseAbs().maxCoeff(&c);
    x(r, c) = 5.0f;
  }
  const QuantizedTensor a = quantize(x, presets::int4(grouping::per_thread(t, Operand::q)));
  const QuantizedTensor b = quantize(x, presets::int4(grouping::per_token()));
  CHECK(a.codes == b.codes);
  CHECK(dequantize(a) == dequantize(b));
}

TEST_CASE("simple granularities: group membership by their definitions", "[groups]") {
  const MatrixF x = MatrixF::Ones(200, 96);
  struct Case {
    Grouping g;
    bool (*same)(int r1, int c1, int r2, int c2);
  };
  const std::vector<Case> cases{
      {grouping::per_tensor(), [](int, int, int, int) { return true; }},
      {grouping::per_block(64), [](int r1, int, int r2, int) { return r1 / 64 == r2 / 64; }},
      {grouping::per_token(), [](int r1, int, int r2, int) { return r1 == r2; }},
      {grouping::per_channel(), [](int, int c1, int, int c2) { return c1 == c2; }},
      {grouping::per_channel_block(64), [](int r1, int c1, int r2, int c2) { return r1 / 64 == r2 / 64 && c1 == c2; }},
      {grouping::microscale(16), [](int r1, int c1, int r2, int c2) { return r1 == r2 && c1 / 16 == c2 / 16; }},
  };
  std::mt19937_64 rng(3);
  for (const Case& c : cases) {
    INFO(c.g.name);
    const QuantizedTensor q = quantize(x, presets::int8(c.g));
    std::size_t wrong = 0;
    for (int i = 0; i < 20000; ++i) {
      const int r1 = int(rng() % 200), c1 = int(rng() % 96);
      const int r2 = rng() % 2 ? r1 : int(rng() % 200), c2 = rng() % 2 ? c1 : int(rng() % 96);
      wrong += (q.group_of(r1, c1) == q.group_of(r2, c2)) != c.same(r1, c1, r2, c2);
    }
    CHECK(wrong == 0);
  }
}
