#!/usr/bin/env python3
"""SageAttention2's own Hopper kernel (SageAttention2-8b, sm90) timed the way bench_attention.py times SDPA.

A measuring reference only. SageAttention's sources are not part of lowbit: they are extracted, at a
fixed commit, into an untracked folder (--src, default .sage2-ref/, with the commit hash in
<src>/COMMIT), and this script JIT-compiles from there, with torch.utils.cpp_extension.load and the nvcc
flags of SageAttention's setup.py for sm90, two extensions: the attention kernel
(csrc/qattn/qk_int_sv_f8_cuda_sm90.cu: INT8 Q.K^T and FP8 P.V with wgmma, an FP32 buffer over the
FP22 accumulator, "fp32+fp32") and the fused quantization kernels (csrc/fused/fused.cu). The per-thread
INT8 quantization of Q and K is SageAttention's Triton kernel (sageattention/triton/quant_per_thread.py),
loaded from the same folder. SageAttention's Python package is not installed: the compiled modules are
called directly, in the order sageattention/core.py's sageattn_qk_int8_pv_fp8_cuda_sm90 calls them.

Timed, for each head dim d, causal or not, and token count N (batch --batch, --heads heads, fp16 inputs
in the [batch, heads, tokens, dim] layout, "HND"):
  sage2_8b      the attention kernel alone (qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf, the one
                core.py uses on sm90) on inputs quantized beforehand by SageAttention's own quantization
                of random fp16 data: INT8 Q/K with per-thread scales, FP8 e4m3 V (transposed, permuted) with
                per-channel scales.
  sage2_8b_e2e  the whole sm90 path from fp16 q, k, v with core.py's sm90 defaults: smooth_k=True
                (k - mean_k over tokens), qk_quant_gran="per_thread" (Triton), per-channel FP8 V without
                smoothing, pv_accum_dtype="fp32+fp32", then the kernel above.
  sage2_8b_loop (with --loop) the kernel alone, the mean of --repeats calls issued back to back between two
                CUDA events: its host-side work per call (three TMA descriptors, the op's dispatch) then overlaps
                the kernel, where the per-call events count any of it the GPU waits for.
  --qk-quant-gran per_warp: Q and K quantized per warp and per block (SageAttention's CUDA kernels, core.py's
                other sm90 option and the default of SageAttention's own bench/bench_qk_int8_pv_fp8_cuda_sm90.py);
                the kernels' names then end in _per_warp.
  sdpa_flash, sdpa_cudnn   (with --with-sdpa) PyTorch SDPA on the same fp16 inputs, as bench_attention.py.
TOPS = 4 B H N^2 d / time, halved for causal; median of --repeats timed runs (CUDA events around each
run) after --warmup runs. Before timing, one small case per d (B=1, H=2, N=1024, causal and not) is
compared with SDPA in float32 (relative L1 error); the run stops if it is NaN or above 0.1.
Writes <out>/<gpu>.csv (gpu,kernel,d,causal,n,tops) and <out>/<gpu>.provenance.json, prints a table.
"""
import argparse
import concurrent.futures
import datetime
import importlib.util
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

try:
    import torch

    from bench_attention import time_ms, write_tops_csv  # the lowbit and SDPA timings' method and CSV
except ImportError:  # --help works without it; main() says what is missing
    torch = None

# Flags of SageAttention's setup.py (commit in <src>/COMMIT) for its sm90 build. setup.py's host flags
# also hold -g -fopenmp -lgomp, which only touch the host-side binding code; they are left out here.
NVCC_FLAGS = [
    "-O3",
    "-std=c++17",
    "-U__CUDA_NO_HALF_OPERATORS__",
    "-U__CUDA_NO_HALF_CONVERSIONS__",
    "--use_fast_math",
    "--threads=8",
    "-diag-suppress=174",
    "-gencode", "arch=compute_90a,code=sm_90a",
]
CXX_FLAGS = ["-O3", "-std=c++17", "-DENABLE_BF16"]

KERNELS = ["sage2_8b", "sage2_8b_loop", "sage2_8b_e2e", "sage2_8b_per_warp", "sage2_8b_per_warp_loop",
           "sage2_8b_per_warp_e2e", "sdpa_flash", "sdpa_cudnn"]


def cuda_home() -> str:
    from torch.utils.cpp_extension import CUDA_HOME
    return CUDA_HOME or "/usr/local/cuda"


def nvcc_version() -> str:
    try:
        out = subprocess.run([os.path.join(cuda_home(), "bin", "nvcc"), "--version"], capture_output=True, text=True).stdout
        m = re.search(r"release [^\n]*", out)
        return m.group(0) if m else out.strip().splitlines()[-1]
    except OSError as e:
        return f"unknown ({e})"


# SageAttention's attention extensions as its setup.py lists them. setup.py builds _qattn_sm89 (mma.sync
# kernels: INT8 Q.K^T m16n8k32, FP8 P.V m16n8k32) for every GPU from sm89 on, sm90 included.
ATTENTION_EXTENSIONS = {
    "sm90": ["csrc/qattn/pybind_sm90.cpp", "csrc/qattn/qk_int_sv_f8_cuda_sm90.cu"],
    "sm89": ["csrc/qattn/pybind_sm89.cpp"] + [f"csrc/qattn/sm89_qk_int8_sv_f8_{kind}.cu" for kind in (
        "accum_f32_attn_inst_buf", "accum_f16_attn_inst_buf", "accum_f32_attn",
        "accum_f32_fuse_v_scale_fuse_v_mean_attn", "accum_f32_fuse_v_scale_attn",
        "accum_f32_fuse_v_scale_attn_inst_buf", "accum_f16_fuse_v_scale_attn_inst_buf")],
}


def build(src: pathlib.Path, build_dir: pathlib.Path, verbose: bool, attention: str = "sm90"):
    """JIT-compiles one of SageAttention's attention extensions (ATTENTION_EXTENSIONS) and its fused
    quantization extension."""
    from torch.utils.cpp_extension import load

    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 16))
    if shutil.which("ninja") is None and (pathlib.Path(sys.executable).parent / "ninja").exists():
        os.environ["PATH"] = f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    src, build_dir = src.resolve(), build_dir.resolve()
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    nvcc_flags = NVCC_FLAGS + [abi] + (["-Xptxas=-v"] if verbose else [])
    cxx_flags = CXX_FLAGS + [abi]
    # The sm90 kernel encodes its TMA descriptors with the driver API (cuTensorMapEncodeTiled): link
    # libcuda as setup.py does, through the toolkit's stub where the driver's library has no plain .so.
    ldflags = ["-lcuda"]
    stubs = pathlib.Path(cuda_home()) / "lib64" / "stubs"
    if (stubs / "libcuda.so").exists():
        ldflags = [f"-L{stubs}"] + ldflags
    specs = [
        (f"sage2ref_qattn_{attention}", ATTENTION_EXTENSIONS[attention], ldflags if attention == "sm90" else []),
        ("sage2ref_fused", ["csrc/fused/pybind.cpp", "csrc/fused/fused.cu"], []),
    ]

    def build_one(name, sources, extra_ldflags):
        directory = build_dir / name
        directory.mkdir(parents=True, exist_ok=True)
        stale_lock = directory / "lock"
        if stale_lock.exists():  # left by an interrupted build; load() would wait on it forever
            print(f"removing stale lock {stale_lock}")
            stale_lock.unlink()
        start = time.perf_counter()
        try:
            module = load(name=name, sources=[str(src / s) for s in sources], extra_cflags=cxx_flags,
                          extra_cuda_cflags=nvcc_flags, extra_ldflags=extra_ldflags,
                          build_directory=str(directory), verbose=verbose)
            return module, time.perf_counter() - start, None
        except Exception as e:  # noqa: BLE001 - any failure here is a build failure, reported plainly
            return None, time.perf_counter() - start, e

    # The two extensions are independent: build them side by side (one nvcc per .cu, each a single
    # translation unit), except with --verbose-build, where their logs would interleave.
    print(f"building {', '.join(name for name, _, _ in specs)} from {src} (MAX_JOBS={os.environ['MAX_JOBS']}, "
          f"{'one after the other' if verbose else 'in parallel'}) ...", flush=True)
    start = time.perf_counter()
    if verbose:
        results = [build_one(*spec) for spec in specs]
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(specs)) as pool:
            results = list(pool.map(lambda spec: build_one(*spec), specs))
    modules, seconds, failed = {}, {}, False
    for (name, sources, _), (module, took, error) in zip(specs, results):
        seconds[name] = took
        if error is None:
            modules[name] = module
            print(f"built {name} in {took:.1f} s", flush=True)
            continue
        failed = True
        print(f"\nERROR: compiling SageAttention's {name} failed after {took:.0f} s.\n"
              f"  sources: {[str(src / s) for s in sources]}\n  nvcc: {nvcc_version()} at {cuda_home()}; "
              f"torch {torch.__version__} (CUDA {torch.version.cuda})\n  nvcc flags: {' '.join(nvcc_flags)}\n"
              f"  build folder: {build_dir / name}\n  compiler output (last 6000 characters):\n"
              + str(error)[-6000:], file=sys.stderr)
    if failed:
        print("Rerun with --verbose-build for the full log. No results were written.", file=sys.stderr)
        sys.exit(2)
    seconds["total"] = time.perf_counter() - start
    print(f"compiled in {seconds['total']:.1f} s", flush=True)
    return modules[f"sage2ref_qattn_{attention}"], modules["sage2ref_fused"], seconds


def load_triton_quant(src: pathlib.Path):
    path = src / "sageattention" / "triton" / "quant_per_thread.py"
    spec = importlib.util.spec_from_file_location("sage2ref_quant_per_thread", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Sage2:
    """sageattention/core.py's sageattn_qk_int8_pv_fp8_cuda_sm90, HND layout, calling the modules directly."""

    LAYOUT_HND = 1
    GRANULARITY = {"per_thread": 3, "per_warp": 2}  # core.py: _qk_quant_gran = 3 if "per_thread" else 2
    # The quantizers' tiles as core.py passes them (Q block and warp, K block and warp), V's keys padded
    # to a multiple of V_PAD before its FP8 quantization (1: not padded), V's per-channel target, the kernel.
    BLKQ, WARPQ, BLKK, WARPK = 64, 16, 128, 128
    V_PAD, V_SCALE_MAX = 128, 448.0
    KERNEL = "qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf"

    def __init__(self, qattn, fused, quant, qk_quant_gran="per_thread"):
        self.qattn, self.fused, self.quant = qattn, fused, quant
        self.qk_quant_gran = qk_quant_gran

    def per_channel_fp8(self, v, scale_max=448.0):
        """quant.py's per_channel_fp8(v, "HND", scale_max, smooth_v=False)."""
        b, h_kv, kv_len, head_dim = v.shape
        padded_len = (kv_len + 63) // 64 * 64
        v_transposed_permutted = torch.empty((b, h_kv, head_dim, padded_len), dtype=v.dtype, device=v.device)
        self.fused.transpose_pad_permute_cuda(v, v_transposed_permutted, self.LAYOUT_HND)
        v_fp8 = torch.empty(v_transposed_permutted.shape, dtype=torch.float8_e4m3fn, device=v.device)
        v_scale = torch.empty((b, h_kv, head_dim), dtype=torch.float32, device=v.device)
        torch.empty((b, h_kv, head_dim), dtype=torch.float32, device=v.device)  # quant.py allocates vm either way
        self.fused.scale_fuse_quant_cuda(v_transposed_permutted, v_fp8, v_scale, kv_len, scale_max, self.LAYOUT_HND)
        return v_fp8, v_scale

    def quantize(self, q, k, v, smooth_k=True):
        """Everything core.py does before the attention kernel; returns the kernel's inputs."""
        return self.operands(q, k, v, smooth_k)[:6]

    def operands(self, q, k, v, smooth_k=True):
        """quantize's six kernel inputs, then K's mean (None without smooth_k)."""
        head_dim_og = q.size(-1)
        pad_to = 64 if head_dim_og < 64 else 128 if 64 < head_dim_og < 128 else head_dim_og  # as core.py
        if head_dim_og > 128:
            raise ValueError(f"Unsupported head_dim: {head_dim_og}")
        if pad_to != head_dim_og:
            q, k, v = (torch.nn.functional.pad(x, (0, pad_to - head_dim_og)) for x in (q, k, v))
        km = k.mean(dim=2, keepdim=True) if smooth_k else None
        if self.qk_quant_gran == "per_thread":
            q_int8, q_scale, k_int8, k_scale = self.quant.per_thread_int8(
                q, k, km, tensor_layout="HND", BLKQ=self.BLKQ, WARPQ=self.WARPQ, BLKK=self.BLKK, WARPK=self.WARPK)
        else:  # quant.py's per_warp_int8(q, k, km, BLKQ, WARPQ, BLKK, "HND"), as core.py calls it
            b, h_qo, qo_len, _ = q.shape
            h_kv, kv_len = k.size(1), k.size(2)
            q_int8, k_int8 = torch.empty(q.shape, dtype=torch.int8, device=q.device), torch.empty(k.shape, dtype=torch.int8, device=k.device)
            q_scale = torch.empty((b, h_qo, (qo_len + self.BLKQ - 1) // self.BLKQ * (self.BLKQ // self.WARPQ)),
                                  device=q.device, dtype=torch.float32)
            k_scale = torch.empty((b, h_kv, (kv_len + self.BLKK - 1) // self.BLKK), device=q.device, dtype=torch.float32)
            self.fused.quant_per_warp_int8_cuda(q, q_int8, q_scale, self.BLKQ, self.WARPQ, self.LAYOUT_HND)
            if km is not None:
                self.fused.quant_per_block_int8_fuse_sub_mean_cuda(k, km.squeeze(2), k_int8, k_scale, self.BLKK, self.LAYOUT_HND)
            else:
                self.fused.quant_per_block_int8_cuda(k, k_int8, k_scale, self.BLKK, self.LAYOUT_HND)
        kv_len = k.size(2)
        v_pad_len = -kv_len % self.V_PAD
        if v_pad_len > 0:
            v = torch.cat([v, torch.zeros(v.size(0), v.size(1), v_pad_len, v.size(3), dtype=v.dtype, device=v.device)], dim=2)
        v_fp8, v_scale = self.per_channel_fp8(v, self.V_SCALE_MAX)
        return q_int8, k_int8, v_fp8, q_scale, k_scale, v_scale, km

    def kernel(self, q_int8, k_int8, v_fp8, o, q_scale, k_scale, v_scale, causal, sm_scale, return_lse=False):
        """Writes o; returns the kernel's LSE ([batch, heads, tokens], log2 units with the P offset) with
        return_lse, else an empty tensor."""
        return getattr(self.qattn, self.KERNEL)(
            q_int8, k_int8, v_fp8, o, q_scale, k_scale, v_scale, self.LAYOUT_HND, int(causal),
            self.GRANULARITY[self.qk_quant_gran], sm_scale, int(return_lse))

    def attention(self, q, k, v, causal):
        """sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, "HND", causal) with its defaults, from fp16 q, k, v."""
        head_dim_og = q.size(-1)
        q_int8, k_int8, v_fp8, q_scale, k_scale, v_scale = self.quantize(q, k, v)
        o = torch.empty(q_int8.shape, dtype=q.dtype, device=q.device)
        self.kernel(q_int8, k_int8, v_fp8, o, q_scale, k_scale, v_scale, causal, head_dim_og ** -0.5)
        return o[..., :head_dim_og]


class Sage2Ada(Sage2):
    """sageattention/core.py's sageattn_qk_int8_pv_fp8_cuda (the sm89 kernels: mma.sync, CTA 128 x 64), HND,
    with pv_accum_dtype "fp32+fp16" (its default: V's channels quantized to 2.25, the f16-accumulator FP8
    mma) or "fp32+fp32"; qattn is the sm89 extension."""

    BLKQ, WARPQ, BLKK, WARPK = 128, 32, 64, 64
    V_PAD = 1
    PV_ACCUM = {"fp32+fp16": ("qk_int8_sv_f8_accum_f16_fuse_v_scale_attn_inst_buf", 2.25),
                "fp32+fp32": ("qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf", 448.0)}

    def __init__(self, qattn, fused, quant, qk_quant_gran="per_thread", pv_accum_dtype="fp32+fp16"):
        super().__init__(qattn, fused, quant, qk_quant_gran)
        self.KERNEL, self.V_SCALE_MAX = self.PV_ACCUM[pv_accum_dtype]


def time_loop_ms(run, warmup, repeats):
    """`repeats` runs issued back to back between two CUDA events (after `warmup` runs): the mean per run."""
    for _ in range(warmup):
        run()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        run()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) / repeats


def time_sdpa(backend, q, k, v, causal, warmup, repeats):
    from torch.nn.attention import sdpa_kernel
    with sdpa_kernel(backend):
        return time_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal),
                       warmup, repeats)


def sanity_check(sage, dims):
    """One small case per d against SDPA in float32 (math backend); exits if the relative L1 error is NaN or > 0.1."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    results = []
    for d in dims:
        for causal in (False, True):
            torch.manual_seed(1234 + d + causal)
            q, k, v = (torch.randn(1, 2, 1024, d, device="cuda", dtype=torch.float16) for _ in range(3))
            with sdpa_kernel(SDPBackend.MATH):
                ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
            out = sage.attention(q, k, v, causal).float()
            # the kernel alone on the same quantized inputs, into an output poisoned with NaN
            inputs = sage.quantize(q, k, v)
            poisoned = torch.full(q.shape, float("nan"), dtype=q.dtype, device=q.device)
            sage.kernel(*inputs[:3], poisoned, *inputs[3:], causal, d ** -0.5)
            torch.cuda.synchronize()
            rel_l1 = ((out - ref).abs().sum() / ref.abs().sum()).item()
            unwritten = int(torch.isnan(poisoned).sum().item())
            same = torch.equal(poisoned.float(), out)
            print(f"check d={d} causal={int(causal)} B=1 H=2 N=1024: relative L1 vs SDPA fp32 = {rel_l1:.3e}, "
                  f"kernel-alone output {'identical' if same else 'DIFFERENT'}, unwritten outputs {unwritten}")
            results.append({"d": d, "causal": causal, "rel_l1": rel_l1, "kernel_alone_identical": same,
                            "unwritten": unwritten})
            if math.isnan(rel_l1) or rel_l1 > 0.1 or unwritten:
                print(f"ERROR: SageAttention2 sm90 output is wrong (d={d}, causal={causal}, relative L1 {rel_l1}, "
                      f"{unwritten} outputs unwritten); not timing it. No results were written.", file=sys.stderr)
                sys.exit(3)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", default=".sage2-ref", help="SageAttention sources at a fixed commit (with COMMIT)")
    parser.add_argument("--out", default="build/results/bench_attention/sageattention2")
    parser.add_argument("--build-dir", default="build/sage2-ref-ext", help="where the JIT extensions are built")
    parser.add_argument("--tokens", default="1024,2048,4096,8192,16384,32768")
    parser.add_argument("--dims", default="64,128")
    parser.add_argument("--causal", default="no,yes", help="comma list of no/yes")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--with-sdpa", action="store_true", help="also time sdpa_flash and sdpa_cudnn in this run")
    parser.add_argument("--verbose-build", action="store_true", help="show the compiler output, ptxas -v included")
    parser.add_argument("--build-only", action="store_true", help="compile the extensions, time nothing")
    parser.add_argument("--qk-quant-gran", default="per_thread", choices=["per_thread", "per_warp"],
                        help="Q and K scales per thread (core.py's sm90 default, lowbit's contract) or per warp")
    parser.add_argument("--loop", action="store_true", help="also time the kernel alone back to back (sage2_8b_loop)")
    args = parser.parse_args()

    tokens = [int(x) for x in args.tokens.split(",")]
    dims = [int(x) for x in args.dims.split(",")]
    causals = [{"no": False, "yes": True, "0": False, "1": True}[x.strip().lower()] for x in args.causal.split(",")]
    if any(d not in (64, 128) for d in dims):
        print(f"ERROR: SageAttention2's sm90 kernel is built for head dims 64 and 128 only, not {args.dims}",
              file=sys.stderr)
        return 2
    src = pathlib.Path(args.src)
    commit_file = src / "COMMIT"
    if not (src / "csrc" / "qattn" / "qk_int_sv_f8_cuda_sm90.cu").exists() or not commit_file.exists():
        print(f"ERROR: {src} does not hold SageAttention's sources with a COMMIT file", file=sys.stderr)
        return 2
    if torch is None:
        print("ERROR: PyTorch is not installed (this runs on the GPU machine, whose python3 has it)", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("ERROR: no CUDA device", file=sys.stderr)
        return 2
    gpu = torch.cuda.get_device_name()
    if torch.cuda.get_device_capability() != (9, 0):
        print(f"ERROR: SageAttention2's sm90 kernel needs compute capability 9.0; {gpu} is "
              f"{torch.cuda.get_device_capability()}", file=sys.stderr)
        return 2
    print(f"{gpu}; torch {torch.__version__} (CUDA {torch.version.cuda}); nvcc {nvcc_version()}; "
          f"SageAttention {commit_file.read_text().strip()}", flush=True)

    qattn, fused, build_seconds = build(src, pathlib.Path(args.build_dir), args.verbose_build)
    if args.build_only:
        return 0
    try:
        quant = load_triton_quant(src)
    except Exception as e:  # noqa: BLE001
        print(f"ERROR: loading SageAttention's Triton per-thread quantization failed: {e}", file=sys.stderr)
        return 2
    sage = Sage2(qattn, fused, quant, args.qk_quant_gran)
    suffix = "" if args.qk_quant_gran == "per_thread" else "_per_warp"
    checks = sanity_check(sage, dims)

    from torch.nn.attention import SDPBackend
    rows = []
    for d in dims:
        for causal in causals:
            for n in tokens:
                ops = 4.0 * args.batch * args.heads * n * n * d / (2 if causal else 1)
                q, k, v = (torch.randn(args.batch, args.heads, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
                inputs = sage.quantize(q, k, v)
                o = torch.empty(q.shape, dtype=q.dtype, device=q.device)
                kernel_alone = lambda: sage.kernel(*inputs[:3], o, *inputs[3:], causal, d ** -0.5)
                runs = [(f"sage2_8b{suffix}", lambda: time_ms(kernel_alone, args.warmup, args.repeats))]
                if args.loop:
                    runs += [(f"sage2_8b{suffix}_loop", lambda: time_loop_ms(kernel_alone, args.warmup, args.repeats))]
                runs += [(f"sage2_8b{suffix}_e2e",
                          lambda: time_ms(lambda: sage.attention(q, k, v, causal), args.warmup, args.repeats))]
                if args.with_sdpa:
                    runs += [(name, lambda backend=backend: time_sdpa(backend, q, k, v, causal, args.warmup, args.repeats))
                             for name, backend in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                                                   ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION))]
                for name, run in runs:
                    try:
                        ms = run()
                        rows.append((name, d, causal, n, ops / (ms * 1e-3) / 1e12))
                        print(f"{name:>22} d={d:<3} causal={int(causal)} n={n:<6} {ms:9.3f} ms {rows[-1][4]:7.1f} TOPS",
                              flush=True)
                    except RuntimeError as e:
                        print(f"{name} d={d} causal={causal} n={n}: not run ({str(e).splitlines()[0]})")
                del q, k, v, inputs, o
                torch.cuda.empty_cache()

    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    slug, csv = write_tops_csv(out, gpu, rows)
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    try:
        cudnn_version = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001 - provenance only
        cudnn_version = None
    provenance = {
        "sageattention": {"repo": "thu-ml/SageAttention", "commit": commit_file.read_text().strip(),
                          "src": str(src), "extensions": ["csrc/qattn/qk_int_sv_f8_cuda_sm90.cu", "csrc/fused/fused.cu"],
                          "kernel": "qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf",
                          "path": f"sageattn_qk_int8_pv_fp8_cuda_sm90: tensor_layout=HND, qk_quant_gran={args.qk_quant_gran} "
                                  "(per_thread: Triton, core.py's default; per_warp: the fused CUDA kernels), "
                                  "pv_accum_dtype=fp32+fp32, smooth_k=True, V per-channel FP8 e4m3 without "
                                  "smoothing, sm_scale=d^-0.5; compiled modules called directly (no torch.library "
                                  "custom-op wrapper)"},
        "nvcc_flags": NVCC_FLAGS, "cxx_flags": CXX_FLAGS, "build_seconds": build_seconds,
        "gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "nvcc": nvcc_version(),
        "triton": triton_version, "cudnn": cudnn_version,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([sys.executable] + sys.argv),
        "method": f"CUDA events around each run (the GPU kept busy while Python enqueues it), median of {args.repeats} "
                  f"after {args.warmup} warm-up runs; "
                  f"batch {args.batch}, {args.heads} heads, fp16 randn inputs [batch, heads, tokens, dim]; "
                  "TOPS = 4 B H N^2 d / time, halved for causal; sage2_8b: the attention kernel alone on inputs "
                  "quantized beforehand; sage2_8b_e2e: quantization, K smoothing and the kernel from fp16; "
                  "sage2_8b_loop: the kernel alone, events around --repeats calls back to back, the mean"
                  + ("; SDPA (flash, cuDNN) timed the same way in the same run" if args.with_sdpa else ""),
        "sanity_check": checks,
    }
    (out / f"{slug}.provenance.json").write_text(json.dumps(provenance, indent=2) + "\n")

    table = {}
    for kernel, d, causal, n, tops in rows:
        table.setdefault((d, causal, n), {})[kernel] = tops
    kernels = [k for k in KERNELS if any(k in t for t in table.values())]
    ratios = [(f"sage2_8b{suffix}", "sdpa_flash", "8b x flash"), (f"sage2_8b{suffix}", "sdpa_cudnn", "8b x cudnn"),
              (f"sage2_8b{suffix}_e2e", "sdpa_flash", "e2e x flash")] if args.with_sdpa else []
    print(f"\nTOPS on {gpu}")
    print(f"{'d':>4} {'causal':>6} {'n':>6} " + " ".join(f"{k:>22}" for k in kernels)
          + "".join(f" {label:>11}" for _, _, label in ratios))
    for (d, causal, n), t in sorted(table.items()):
        ratio = lambda mine, other: t.get(mine, 0) / t[other] if t.get(other) else float("nan")
        print(f"{d:>4} {int(causal):>6} {n:>6} " + " ".join(f"{t.get(k, float('nan')):>22.1f}" for k in kernels)
              + "".join(f" {ratio(a, b):>11.2f}" for a, b, _ in ratios))
    print(f"\nwrote {csv} and {out / f'{slug}.provenance.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
