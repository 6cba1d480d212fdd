// bench_mma: emulated multiply-accumulates per second per core for the e4m3 wgmma and f16
// mma.sync models, beside the exact-rational reference (the same algorithm with Boost
// cpp_rational) on the same inputs, with the ratio. The two must agree bit for bit on every
// output the reference computes; the program exits 1 if they do not.
//
// Rates are per CPU second of this thread (CLOCK_THREAD_CPUTIME_ID): "per core" and robust to a
// shared machine; wall-clock rates are printed beside them. Writes results/bench_mma.csv and .md
// with provenance.
#include <time.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "emulation/mma/arithmetic.hpp"
#include "emulation/mma/gemm.hpp"
#include "emulation/mma/reference.hpp"
#include "experiments/common/results.hpp"

using namespace lowbit;
using namespace lowbit::mma;

namespace {

struct Case {
  std::string label;
  std::string arch, name;
  Eigen::Index M = 0, N = 0, K = 0;  // the GEMM (tile cases: the instruction's shape)
  int mmas_per_flush = 0;
  bool tile = false;                   // one instruction through execute(), else gemm()
  Eigen::Index reference_rows = 0, reference_cols = 0;  // the block the reference recomputes
};

struct Clock {
  double cpu = 0, wall = 0;
};

Clock now() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return {double(t.tv_sec) + 1e-9 * double(t.tv_nsec),
          std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count()};
}

Clock since(const Clock& start) {
  const Clock t = now();
  return {t.cpu - start.cpu, t.wall - start.wall};
}

// Finite codes (no NaN/Inf) of the format, uniformly.
MatrixCode finite_codes(const Format& f, Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  MatrixCode m(rows, cols);
  for (auto& x : m.reshaped()) {
    do x = Code(rng()) & f.code_count_minus_one();
    while (f.is_nan_code(x) || f.is_inf_code(x));
  }
  return m;
}

// Accumulators: binary32 values of magnitude 2^-8 .. 2^8, either sign.
MatrixCode accumulators(Eigen::Index rows, Eigen::Index cols, std::mt19937_64& rng) {
  MatrixCode m(rows, cols);
  for (auto& x : m.reshaped()) x = (std::uint32_t(rng()) & 0x807f'ffffu) | (std::uint32_t(119 + rng() % 17) << 23);
  return m;
}

struct Result {
  Case c;
  double macs = 0;
  Clock engine;
  double reference_macs = 0;
  Clock reference;
  Eigen::Index compared = 0, agreeing = 0;
  double rate() const { return macs / engine.cpu; }
  double wall_rate() const { return macs / engine.wall; }
  double reference_rate() const { return reference_macs / reference.cpu; }
};

Result run_case(const Case& c, double min_seconds, std::mt19937_64& rng) {
  const Instruction in = find_instruction(c.arch, c.name);
  const Atom& at = in.atom;
  const KLoop loop{c.mmas_per_flush};
  Result r;
  r.c = c;
  // A few operand sets, cycled, so a tile case does not rerun one tile from cache.
  constexpr int kSets = 8;
  std::vector<MatrixCode> a, b, cs;
  for (int s = 0; s < kSets; ++s) {
    a.push_back(finite_codes(at.a, c.M, c.K, rng));
    b.push_back(finite_codes(at.b, c.K, c.N, rng));
    cs.push_back(accumulators(c.M, c.N, rng));
  }
  std::vector<MatrixCode> d(kSets);
  const auto engine = [&](int s) {
    if (!c.tile) return gemm(in, {a[std::size_t(s)], b[std::size_t(s)], cs[std::size_t(s)]}, loop);
    const auto& x = a[std::size_t(s)];
    const auto& y = b[std::size_t(s)];
    const auto& z = cs[std::size_t(s)];
    const auto out = execute(in, {{x.data(), std::size_t(x.size())}, {y.data(), std::size_t(y.size())},
                                  {z.data(), std::size_t(z.size())}});
    return MatrixCode(MatrixView<std::uint32_t>(out.data(), c.M, c.N));
  };
  const Clock start = now();
  for (int rep = 0;; ++rep) {
    d[std::size_t(rep % kSets)] = engine(rep % kSets);
    r.macs += double(c.M) * double(c.N) * double(c.K);
    if (rep + 1 >= kSets && since(start).cpu >= min_seconds) break;
  }
  r.engine = since(start);

  // The reference recomputes a top-left block of operand set 0 (an output depends only on its
  // row of A and column of B).
  const MatrixCode ra = a[0].topRows(c.reference_rows), rb = b[0].leftCols(c.reference_cols);
  const MatrixCode rc = cs[0].topLeftCorner(c.reference_rows, c.reference_cols);
  const Clock ref_start = now();
  const MatrixCode expected = reference_gemm(in, {ra, rb, rc}, loop);
  r.reference = since(ref_start);
  r.reference_macs = double(c.reference_rows) * double(c.reference_cols) * double(c.K);
  const MatrixCode got = d[0].topLeftCorner(c.reference_rows, c.reference_cols);
  r.compared = expected.size();
  for (Eigen::Index i = 0; i < expected.size(); ++i) r.agreeing += expected.data()[i] == got.data()[i];
  return r;
}

std::string rate_text(double r) { return fmt::format("{:.3g}", r); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_mma: emulated MMA throughput per core, beside the exact-rational reference"};
  std::string out_dir = "results";
  double min_seconds = 2.0;
  app.add_option("--out-dir", out_dir, "Where bench_mma.csv and bench_mma.md go");
  app.add_option("--seconds", min_seconds, "CPU seconds per engine measurement (at least)")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  const std::vector<Case> cases{
      {"wgmma e4m3 tile", "sm_90", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3", 64, 256, 32, 0, true, 64, 32},
      {"wgmma e4m3 GEMM, FP32 buffer every 2 MMAs", "sm_90", "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
       256, 256, 4096, 2, false, 4, 8},
      {"mma.sync f16 tile", "sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 16, 8, 16, 0, true, 16, 8},
      {"mma.sync f16 GEMM, one accumulator", "sm_90", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", 256, 256,
       4096, 0, false, 4, 8},
  };
  std::mt19937_64 rng(20251122);
  std::vector<Result> results;
  for (const auto& c : cases) {
    results.push_back(run_case(c, min_seconds, rng));
    const auto& r = results.back();
    fmt::print(stderr, "{}: {} MAC/s per core\n", c.label, rate_text(r.rate()));
  }

  Provenance provenance = Provenance::current();
  const bool avx2 = __builtin_cpu_supports("avx2");
  double load = 0;
  getloadavg(&load, 1);
  const std::string kernel = avx2 ? "avx2" : "x86-64 baseline";
  bool all_agree = true;

  std::string table = fmt::format("| {:<42} | {:>18} | {:>5} | {:>13} | {:>13} | {:>13} | {:>9} | {:>13} |\n", "case",
                                  "M x N x K", "flush", "engine MAC/s", "(wall MAC/s)", "exact MAC/s", "ratio",
                                  "bit-equal");
  table += fmt::format("|{:-<44}|{:->20}|{:->7}|{:->15}|{:->15}|{:->15}|{:->11}|{:->15}|\n", "", "", "", "", "", "", "",
                       "");
  std::string csv =
      "case,arch,instruction,M,N,K,mmas_per_flush,engine_macs,engine_cpu_s,engine_macs_per_cpu_s,engine_wall_s,"
      "engine_macs_per_wall_s,reference_macs,reference_cpu_s,reference_macs_per_cpu_s,ratio,outputs_compared,"
      "outputs_bit_equal\n";
  for (const auto& r : results) {
    const Case& c = r.c;
    all_agree = all_agree && r.agreeing == r.compared;
    table += fmt::format("| {:<42} | {:>18} | {:>5} | {:>13} | {:>13} | {:>13} | {:>9.0f} | {:>13} |\n", c.label,
                         fmt::format("{} x {} x {}", c.M, c.N, c.K), c.mmas_per_flush, rate_text(r.rate()),
                         rate_text(r.wall_rate()), rate_text(r.reference_rate()), r.rate() / r.reference_rate(),
                         fmt::format("{}/{}", r.agreeing, r.compared));
    csv += fmt::format("\"{}\",{},{},{},{},{},{},{:.0f},{:.4f},{:.4g},{:.4f},{:.4g},{:.0f},{:.4f},{:.4g},{:.1f},{},{}\n",
                       c.label, c.arch, c.name, c.M, c.N, c.K, c.mmas_per_flush, r.macs, r.engine.cpu, r.rate(),
                       r.engine.wall, r.wall_rate(), r.reference_macs, r.reference.cpu, r.reference_rate(),
                       r.rate() / r.reference_rate(), r.compared, r.agreeing);
  }
  constexpr double kTarget = 2e8;
  std::string verdict;
  for (const auto& r : results)
    verdict += fmt::format("- {}: {} MAC/s per core, {} the 2e8 target\n", r.c.label, rate_text(r.rate()),
                           r.rate() >= kTarget ? "meets" : "MISSES");
  fmt::print("{}\n{}", table, verdict);
  fmt::print("engine kernel: {}; exact reference: Boost cpp_rational; load average {:.2f}\n", kernel, load);
  fmt::print("{}\n", all_agree ? "engine and reference agree on every compared output"
                               : "DISAGREEMENT between engine and reference");

  try {
    experiments::RunInfo run = experiments::RunInfo::from_args(argc, argv);
    run.machine = provenance;
    run.seeds = {{"operands", 20251122}};
    run.config = {{"seconds", min_seconds}, {"kernel", kernel}, {"load_average", load}};
    for (const auto& c : cases) run.formats["instructions"].push_back({{"arch", c.arch}, {"instruction", c.name}});
    const experiments::ResultDirectory folder(out_dir, run, "bench_mma");
    folder.csv("bench_mma.csv", csv, {fmt::format("kernel={} load_average={:.2f}", kernel, load)});
    folder.markdown("bench_mma.md",
                    "# bench_mma: emulated MMA throughput per core\n\n"
                    "Produced by `build/experiments/bench_mma` (experiments/bench/bench_mma.cpp). Rates are emulated\n"
                    "multiply-accumulates per CPU second of one thread; the exact-rational reference (Boost cpp_rational,\n"
                    "emulation/mma/reference.hpp) recomputes a block of the same outputs, which must be bit-equal.\n\n`" +
                        provenance.comment_line() + "`, compiler " + provenance.compiler + ", engine kernel " + kernel +
                        ", load average " + fmt::format("{:.2f}", load) +
                        " (wall-clock rates suffer on a shared machine).\n\n" + table + "\n" + verdict);
    folder.write_provenance();
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_mma: error: {}\n", e.what());
    return 1;
  }
  return all_agree ? 0 : 1;
}
