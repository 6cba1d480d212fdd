#!/usr/bin/env python3
"""Capture what a released attention kernel writes, bit for bit, for lowbit to replay.

Two steps:
  capture.py inputs DIR [--only NAME]
                                  (numpy only; here) writes the capture set's inputs: for each
                                  configuration NAME of CONFIGS, DIR/NAME.{q,k,v}.npy (float32 values
                                  already rounded to the kernel's input format, [batch, heads, tokens,
                                  dim]) and DIR/set.json (shapes, causal, format, seed, distribution).
  capture.py fresh DIR [--seed S]  (numpy) the same for FRESH's shapes, drawn from a seed nobody chose
                                  (os.urandom; set.json records it, so the replay makes them again).
  capture.py run DIR OUT --kernel KERNEL [--kernel ...]
                                  (on the GPU machine, torch) runs each kernel on each configuration
                                  and writes OUT/KERNEL/NAME.out.npy (the output the kernel wrote, as
                                  float32 values, [batch, heads, tokens, dim]), OUT/KERNEL/NAME.lse.npy
                                  (its log-sum-exp, float32 [batch, heads, tokens]) and
                                  OUT/KERNEL/provenance.json (package, version, GPU, driver, torch).
  capture.py run ... --q Q.npy --k K.npy --v V.npy [--causal] --name NAME
                                  one input of your own instead of a set (float32/float16 .npy).
  capture.py record OUT/KERNEL DEST [--keep NAME ...]
                                  (numpy; here) a run's folder as a committed replay record:
                                  DEST/set.json (the set's configurations with the sha256 of the
                                  kernel's output and LSE, and for fa3-fp8 of its E4M3 operands and
                                  descales, for sageattn2-* of its operands), DEST/provenance.json,
                                  the whole arrays of the --keep configurations, and for sageattn2-*
                                  every K mean (NAME.km.npy: torch's, which the replay gives the preset)
                                  (tests/attention/thirdparty_replay.py replays it).

Kernels:
  sdpa-flash   PyTorch's flash backend (aten::_scaled_dot_product_flash_attention, the
               FlashAttention-2 kernel PyTorch vendors) in the set's format (fp16 or bf16); K and V
               heads as they are where the op takes them, else repeated (the same values either way).
  fa3-fp8      FlashAttention-3's forward (PyPI fa3-fwd, flash_attn_func) on E4M3 Q, K, V with
               per-(batch, KV head) descales amax / 448 (Q over its head group), bf16 output; the
               E4M3 codes and descales are written beside the output (NAME.{q,k,v}8.npy as uint8,
               NAME.descale.npy [3, batch, kv_heads]) so the emulator reads the kernel's own operands
               (fa3_fp8_operands() makes the same bytes with numpy).
  fa3-bf16     FlashAttention-3's forward on bf16 Q, K, V.
  sageattn2-sm90
               SageAttention2's Hopper path as sageattention/core.py's sageattn_qk_int8_pv_fp8_cuda_sm90
               calls it with its defaults (per-thread INT8 Q, K by its Triton kernels, K minus its mean,
               per-channel FP8 V, the "fp32+fp32" kernel qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf),
               from sources at a fixed commit (--sage2-src, with COMMIT) compiled as
               experiments/bench/bench_sageattention2.py compiles them. The LSE is the kernel's own (log2
               units, P's offset 8.807 in it), not core.py's natural-log correction. Its operands are written
               beside the output: NAME.{q8,k8}.npy (INT8 codes as uint8), NAME.{qscale,kscale}.npy (the
               kernel's per-thread scale layouts), NAME.km.npy (K's mean, [batch, kv_heads, 1, dim]),
               NAME.v8.npy (E4M3 codes of V transposed, padded to 128 keys and permuted, as the kernel reads
               them, [batch, kv_heads, dim, keys]) and NAME.vscale.npy ([batch, kv_heads, dim]).
  sageattn2-sm90-per-warp
               the same with qk_quant_gran="per_warp" (Q per warp, K per block, by its CUDA quantizers).
  sageattn2-sm89
               SageAttention2's Ada path, core.py's sageattn_qk_int8_pv_fp8_cuda with its defaults, which
               setup.py also builds for sm90 (mma.sync kernels): per-thread INT8 Q, K by its Triton kernels
               (BLKQ 128, WARPQ 32, BLKK 64, WARPK 64), K minus its mean, per-channel FP8 V at 2.25, the
               "fp32+fp16" kernel qk_int8_sv_f8_accum_f16_fuse_v_scale_attn_inst_buf. Operands written as
               for sageattn2-sm90 (V padded to 64 keys only).
  sageattn2-sm89-per-warp
               the same with qk_quant_gran="per_warp".
  sageattn2-sm89-fp32
               the same with pv_accum_dtype="fp32+fp32" (V at 448, qk_int8_sv_f8_accum_f32_fuse_v_scale_attn_inst_buf).
"""
import argparse
import datetime
import hashlib
import os
import json
import pathlib
import platform
import subprocess
import sys

import numpy as np

# The capture set: shapes that keep PyTorch's flash backend on its one-pass kernel (batch x heads x
# ceil(tokens / 64) >= 0.8 x 2 x 132 SMs), and smaller ones on which it splits the keys into 2 to 8
# ranges (flash_api.cpp's num_splits_heuristic), down to 37 tokens and one.
CONFIGS = [
    # name, batch, heads, kv_heads, tokens, dim, causal, format, distribution
    ("d128-gqa-ragged", 1, 16, 4, 1000, 128, False, "fp16", "outliers"),
    ("d128-causal", 1, 16, 16, 1000, 128, True, "fp16", "outliers"),
    ("d64-gqa-causal", 2, 8, 2, 900, 64, True, "fp16", "heavy"),
    ("d64-heavy", 1, 16, 16, 833, 64, False, "fp16", "heavy"),
    ("bf16-d128-gqa", 1, 16, 4, 1000, 128, False, "bf16", "outliers"),
    ("bf16-d64-causal", 2, 8, 8, 900, 64, True, "bf16", "outliers"),
    ("split-d64", 1, 2, 2, 512, 64, False, "fp16", "outliers"),
    ("split-d128-causal", 1, 4, 1, 700, 128, True, "fp16", "outliers"),
    ("split-bf16-d64", 2, 3, 3, 1500, 64, False, "bf16", "heavy"),
    ("split-d128-many", 1, 1, 1, 2048, 128, False, "fp16", "heavy"),
    ("d64-causal-gqa-3000", 1, 6, 2, 3000, 64, True, "fp16", "outliers"),
    ("tiny-d64-causal", 1, 1, 1, 37, 64, True, "fp16", "outliers"),
    ("one-token-d128", 1, 2, 2, 1, 128, False, "bf16", "outliers"),
]
# Real activations: the SmolLM2-135M capture's four layers as a batch of 4 (9 heads, 3 KV heads,
# d = 64, 1,024 tokens, causal), fp16 as stored.
SMOLLM2 = pathlib.Path(__file__).resolve().parents[1] / "data" / "smollm2-135m"
SMOLLM2_LAYERS = ("00", "10", "20", "29")

# SageAttention2's kernels: the attention extension, qk_quant_gran and pv_accum_dtype of each.
SAGE2_KERNELS = {
    "sageattn2-sm90": ("sm90", "per_thread", "fp32+fp32"),
    "sageattn2-sm90-per-warp": ("sm90", "per_warp", "fp32+fp32"),
    "sageattn2-sm89": ("sm89", "per_thread", "fp32+fp16"),
    "sageattn2-sm89-per-warp": ("sm89", "per_warp", "fp32+fp16"),
    "sageattn2-sm89-fp32": ("sm89", "per_thread", "fp32+fp32"),
}
KERNELS = ["sdpa-flash", "fa3-fp8", "fa3-bf16"] + list(SAGE2_KERNELS)


def round_to(x, fmt):
    """float32 values rounded to nearest even in fp16 or bf16, as torch's .to() does."""
    x = np.asarray(x, dtype=np.float32)
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return rounded.astype(np.uint32).view(np.float32)


def make_tensor(rng, shape, distribution, outlier_channels):
    b, h, n, d = shape
    if distribution == "heavy":
        x = rng.standard_t(3, size=shape)  # heavy tails
    else:
        x = rng.standard_normal(size=shape)
    x *= np.exp(0.5 * rng.standard_normal(size=(1, h, 1, d)))  # channel scales
    if outlier_channels is not None:
        x[..., outlier_channels] = x[..., outlier_channels] * 8 + 12  # large biased channels (K's outliers)
    tokens = rng.random(size=(b, h, n, 1)) < 0.01
    x = np.where(tokens, x * 10, x)  # a few massive tokens
    return x.astype(np.float32)


def drawn_inputs(entry):
    """(q, k, v) of a drawn configuration (its record's shape, format, distribution and seed), and the
    record with their sha256."""
    b, h, hk, n, d = (entry[key] for key in ("batch", "heads", "kv_heads", "tokens", "dim"))
    keys = entry.get("keys", n)
    rng = np.random.default_rng(entry["seed"])
    outliers = rng.choice(d, size=4, replace=False)
    q = round_to(make_tensor(rng, (b, h, n, d), entry["distribution"], None), entry["format"])
    k = round_to(make_tensor(rng, (b, hk, keys, d), entry["distribution"], outliers), entry["format"])
    v = round_to(make_tensor(rng, (b, hk, keys, d), entry["distribution"], None), entry["format"])
    entry = dict(entry, sha256={r: hashlib.sha256(t.tobytes()).hexdigest() for r, t in zip("qkv", (q, k, v))})
    return (q, k, v), entry


# Fresh draws (capture.py fresh): shapes beside the set's, with a seed nobody chose; the last two have
# fewer queries than keys (a decode step's) and more (their first rows see no key under a causal mask,
# which FlashAttention aligns bottom-right; PyTorch's flash backend refuses both when causal).
FRESH = [
    # name, batch, heads, kv_heads, tokens, dim, causal, format, distribution[, keys]
    ("fresh-d128-gqa-causal", 1, 8, 2, 1000, 128, True, "fp16", "outliers"),
    ("fresh-d64", 2, 4, 4, 777, 64, False, "fp16", "heavy"),
    ("fresh-d128-causal-2048", 1, 16, 16, 2048, 128, True, "fp16", "heavy"),
    ("fresh-d64-gqa-3001", 1, 6, 3, 3001, 64, False, "bf16", "outliers"),
    ("fresh-d128-gqa-causal-300-of-1500", 1, 8, 2, 300, 128, True, "bf16", "outliers", 1500),
    ("fresh-d64-causal-600-on-450", 1, 4, 4, 600, 64, True, "fp16", "heavy", 450),
]


def config_entry(config, seed):
    name, b, h, hk, n, d, causal, fmt, dist = config[:9]
    entry = dict(name=name, batch=b, heads=h, kv_heads=hk, tokens=n, dim=d, causal=causal, format=fmt, distribution=dist,
                 seed=seed)
    if len(config) > 9:
        entry["keys"] = config[9]
    return entry


def make_inputs(name):
    """The capture set's configuration NAME: (q, k, v) float32 values in its format, and its record."""
    if name == "smollm2":
        q, k, v = (np.concatenate([np.load(SMOLLM2 / f"layer{l}_{r}.npy") for l in SMOLLM2_LAYERS]).astype(np.float32)
                   for r in "qkv")
        entry = dict(name=name, batch=q.shape[0], heads=q.shape[1], kv_heads=k.shape[1], tokens=q.shape[2], dim=q.shape[3],
                     causal=True, format="fp16", distribution="SmolLM2-135M layers " + ", ".join(SMOLLM2_LAYERS), seed=None)
    else:
        i = [c[0] for c in CONFIGS].index(name)
        return drawn_inputs(config_entry(CONFIGS[i], 1000 + i))
    entry["sha256"] = {r: hashlib.sha256(t.tobytes()).hexdigest() for r, t in zip("qkv", (q, k, v))}
    return (q, k, v), entry


def fa3_fp8_operands(q, k, v):
    """FlashAttention-3 FP8's operands as run_fa3 makes them on the GPU, with numpy and ml_dtypes: E4M3
    codes (uint8, [batch, heads, tokens, dim]) of q, k, v (float32 arrays), one scale per (batch, KV
    head), Q's over its head group: amax * float32(1 / 448) (torch divides by a scalar through its
    reciprocal), codes = RN(x / scale); and the scales as the kernel's descales, [3, batch, kv_heads]."""
    import ml_dtypes

    hk = k.shape[1]
    codes, scales = [], []
    for t in (q, k, v):
        b, h, n, d = t.shape
        g = t.reshape(b, hk, h // hk, n, d)
        amax = np.maximum(np.abs(g).max(axis=(2, 3, 4)), np.float32(1e-30)).astype(np.float32)
        scale = (amax * np.float32(1.0 / 448.0)).astype(np.float32)
        codes.append((g / scale[:, :, None, None, None]).astype(ml_dtypes.float8_e4m3fn).reshape(t.shape).view(np.uint8))
        scales.append(scale)
    return codes, np.stack(scales)


def digest(array):
    """sha256 of an array's bytes as float32 (outputs, LSE, descales) or as they are (uint8 codes)."""
    a = np.asarray(array)
    return hashlib.sha256((a if a.dtype == np.uint8 else a.astype("<f4")).tobytes()).hexdigest()


def cmd_record(args):
    folder, dest = pathlib.Path(args.run), pathlib.Path(args.dest)
    kernel = folder.name
    provenance_file = folder / "provenance.json"
    set_file = folder.parent / "set.json"
    for f in (provenance_file, set_file):
        if not f.exists():
            print(f"capture.py record: {f} is missing (a folder OUT/KERNEL written by 'run', and OUT/set.json)", file=sys.stderr)
            return 2
    captured = json.loads(provenance_file.read_text())["configurations"]
    recorded_set = json.loads(set_file.read_text())
    configs = [c for c in recorded_set["configs"] if c["name"] in captured]
    dest.mkdir(parents=True, exist_ok=True)
    for c in configs:
        name = c["name"]
        c["output_sha256"] = digest(np.load(folder / f"{name}.out.npy"))
        c["lse_sha256"] = digest(np.load(folder / f"{name}.lse.npy"))
        if kernel == "fa3-fp8":
            c["operands_sha256"] = {r: digest(np.load(folder / f"{name}.{r}8.npy")) for r in "qkv"}
            c["operands_sha256"]["descale"] = digest(np.load(folder / f"{name}.descale.npy"))
        if kernel in SAGE2_KERNELS:  # the K mean always (the replay's --key-mean), the other operands where kept
            c["operands_sha256"] = {part: digest(np.load(folder / f"{name}.{part}.npy"))
                                    for part in ("q8", "k8", "v8", "qscale", "kscale", "vscale", "km")
                                    if part == "km" or (folder / f"{name}.{part}.npy").exists()}
            np.save(dest / f"{name}.km.npy", np.load(folder / f"{name}.km.npy"))  # the replay's --key-mean
    for name in args.keep or []:
        if name not in captured:
            print(f"capture.py record: --keep {name}: not in this run", file=sys.stderr)
            return 2
        for part in ("out", "lse"):
            np.save(dest / f"{name}.{part}.npy", np.load(folder / f"{name}.{part}.npy"))
    (dest / "set.json").write_text(json.dumps({"generator": recorded_set["generator"], "kernel": kernel,
                                               "configs": configs}, indent=1) + "\n")
    (dest / "provenance.json").write_text(provenance_file.read_text())
    print(f"capture.py record: {len(configs)} configurations of {kernel} in {dest}")
    return 0


def config_names():
    return [c[0] for c in CONFIGS] + ["smollm2"]


def inputs_of(entry):
    """A recorded configuration's inputs made again: the set's by name, a fresh draw from its seed."""
    if entry["name"] in config_names():
        return make_inputs(entry["name"])
    return drawn_inputs({key: value for key, value in entry.items() if key != "sha256"})


def write_set(out, made, generator):
    out.mkdir(parents=True, exist_ok=True)
    for tensors, entry in made:
        for role, t in zip("qkv", tensors):
            np.save(out / f"{entry['name']}.{role}.npy", t)
    (out / "set.json").write_text(json.dumps({"configs": [entry for _, entry in made], "generator": generator},
                                             indent=1) + "\n")
    print(f"capture.py: {len(made)} configurations in {out}")


def cmd_inputs(args):
    write_set(pathlib.Path(args.dir), [make_inputs(name) for name in args.only or config_names()],
              "experiments/thirdparty/capture.py inputs")


def cmd_fresh(args):
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(7), "little")
    write_set(pathlib.Path(args.dir), [drawn_inputs(config_entry(c, seed + j)) for j, c in enumerate(FRESH)],
              "experiments/thirdparty/capture.py fresh")


def provenance(kernel, torch, sage2_src=None):
    info = {
        "kernel": kernel,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "command": " ".join(sys.argv),
    }
    try:
        info["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        info["driver"] = "unknown"
    if kernel.startswith("fa3"):
        import importlib.metadata
        info["package"] = "fa3-fwd " + importlib.metadata.version("fa3-fwd")
    elif kernel in SAGE2_KERNELS:
        attention, granularity, pv_accum = SAGE2_KERNELS[kernel]
        function = "sageattn_qk_int8_pv_fp8_cuda" + ("_sm90" if attention == "sm90" else "")
        info["package"] = ("thu-ml/SageAttention " + (sage2_src / "COMMIT").read_text().strip() +
                           f" ({function}: qk_quant_gran={granularity}, smooth_k, {pv_accum}; extension _qattn_{attention} "
                           "compiled with setup.py's sm90 flags by experiments/bench/bench_sageattention2.py)")
    else:
        info["package"] = "torch " + torch.__version__ + " (aten::_scaled_dot_product_flash_attention)"
    return info


def run_sdpa_flash(torch, q, k, v, causal, fmt):
    dtype = torch.float16 if fmt == "fp16" else torch.bfloat16
    group = q.shape[1] // k.shape[1]
    qd, kd, vd = (torch.from_numpy(t).cuda().to(dtype) for t in (q, k, v))
    try:  # K and V heads as they are (the kernel's own GQA), where the op takes them
        result = torch.ops.aten._scaled_dot_product_flash_attention(qd, kd, vd, 0.0, causal, False)
        how = "native"
    except RuntimeError:
        kd, vd = kd.repeat_interleave(group, dim=1), vd.repeat_interleave(group, dim=1)
        result = torch.ops.aten._scaled_dot_product_flash_attention(qd, kd, vd, 0.0, causal, False)
        how = "K, V heads repeated"
    if group > 1:
        print(f"  GQA: {how}", flush=True)
    return result[0].float().cpu().numpy(), result[1].float().cpu().numpy(), {}


def run_fa3(torch, q, k, v, causal, fmt, fp8):
    import fa3_fwd_interface as fa3

    b, h, n, d = q.shape
    hk = k.shape[1]
    group = h // hk
    to_bnhd = lambda t: torch.from_numpy(t).cuda().permute(0, 2, 1, 3).contiguous()
    qd, kd, vd = to_bnhd(q), to_bnhd(k), to_bnhd(v)
    extra = {}
    if fp8:
        def quantize(t, heads_per_scale):
            g = t.reshape(b, t.shape[1], hk, heads_per_scale, d)  # [batch, tokens, heads, dim]: its own tokens
            amax = g.abs().amax(dim=(1, 3, 4)).clamp_min(1e-30)  # [b, hk]
            scale = amax / 448.0
            codes = (g / scale[:, None, :, None, None]).to(torch.float8_e4m3fn).reshape(t.shape)
            return codes, scale.float().contiguous()
        (q8, qs), (k8, ks), (v8, vs) = quantize(qd, group), quantize(kd, 1), quantize(vd, 1)
        out, lse = fa3.flash_attn_func(q8, k8, v8, causal=causal, q_descale=qs, k_descale=ks, v_descale=vs,
                                       return_attn_probs=True)
        back = lambda t: t.view(torch.uint8).permute(0, 2, 1, 3).contiguous().cpu().numpy()
        extra = {"q8": back(q8), "k8": back(k8), "v8": back(v8),
                 "descale": torch.stack([qs, ks, vs]).cpu().numpy()}
    else:
        bf = lambda t: t.to(torch.bfloat16)
        out, lse = fa3.flash_attn_func(bf(qd), bf(kd), bf(vd), causal=causal, return_attn_probs=True)
    return out.float().permute(0, 2, 1, 3).contiguous().cpu().numpy(), lse.float().cpu().numpy(), extra




class Sage2Reference:
    """SageAttention2's paths (bench_sageattention2.Sage2, Sage2Ada), each extension compiled on first use."""

    def __init__(self, src, build_dir):
        self.src, self.build_dir, self.modules = pathlib.Path(src), pathlib.Path(build_dir), {}

    def __call__(self, torch, q, k, v, causal, fmt, kernel):
        sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
        import bench_sageattention2 as bench

        attention, granularity, pv_accum = SAGE2_KERNELS[kernel]
        if attention not in self.modules:
            qattn, fused, _ = bench.build(self.src, self.build_dir, False, attention)
            self.modules[attention] = qattn, fused, bench.load_triton_quant(self.src)
        if attention == "sm90":
            sage = bench.Sage2(*self.modules[attention], qk_quant_gran=granularity)
        else:
            sage = bench.Sage2Ada(*self.modules[attention], qk_quant_gran=granularity, pv_accum_dtype=pv_accum)
        dtype = torch.float16 if fmt == "fp16" else torch.bfloat16
        qd, kd, vd = (torch.from_numpy(t).cuda().to(dtype) for t in (q, k, v))
        q8, k8, v8, qs, ks, vs, km = sage.operands(qd, kd, vd)
        o = torch.empty(q8.shape, dtype=dtype, device=q8.device)
        lse = sage.kernel(q8, k8, v8, o, qs, ks, vs, causal, q.shape[-1] ** -0.5, return_lse=True)
        numpy = lambda t: t.cpu().numpy()
        extra = {"q8": numpy(q8).view(np.uint8), "k8": numpy(k8).view(np.uint8), "v8": numpy(v8.view(torch.uint8)),
                 "qscale": numpy(qs), "kscale": numpy(ks), "vscale": numpy(vs), "km": numpy(km.float())}
        return numpy(o[..., :q.shape[-1]].float()), numpy(lse.float()), extra


def cmd_run(args):
    import torch

    if not torch.cuda.is_available():
        print("capture.py: no CUDA GPU", file=sys.stderr)
        return 77
    if args.q:
        configs = [dict(name=args.name, causal=args.causal, format=args.format, files=(args.q, args.k, args.v))]
    else:
        root = pathlib.Path(args.dir)
        configs = json.loads((root / "set.json").read_text())["configs"]
        for c in configs:
            c["files"] = tuple(str(root / f"{c['name']}.{r}.npy") for r in "qkv")
    out_root = pathlib.Path(args.out)
    sage2 = Sage2Reference(args.sage2_src, args.sage2_build)
    status = 0
    for kernel in args.kernel:
        folder = out_root / kernel
        folder.mkdir(parents=True, exist_ok=True)
        done = []
        for c in configs:
            q, k, v = (np.load(f).astype(np.float32) for f in c["files"])
            if q.ndim == 3:
                q, k, v = q[None], k[None], v[None]
            try:
                if kernel == "sdpa-flash":
                    out, lse, extra = run_sdpa_flash(torch, q, k, v, c["causal"], c["format"])
                elif kernel in ("fa3-fp8", "fa3-bf16"):
                    out, lse, extra = run_fa3(torch, q, k, v, c["causal"], c["format"], kernel == "fa3-fp8")
                elif kernel in SAGE2_KERNELS:
                    out, lse, extra = sage2(torch, q, k, v, c["causal"], c["format"], kernel)
                else:
                    print(f"capture.py: unknown kernel {kernel}", file=sys.stderr)
                    return 2
            except Exception as e:  # a kernel that refuses a shape is recorded, the others run on
                print(f"capture.py: {kernel} {c['name']}: {type(e).__name__}: {e}", file=sys.stderr)
                status = 1
                continue
            np.save(folder / f"{c['name']}.out.npy", out)
            np.save(folder / f"{c['name']}.lse.npy", lse)
            for key, value in extra.items():
                np.save(folder / f"{c['name']}.{key}.npy", value)
            done.append(c["name"])
            print(f"{kernel:10s} {c['name']:18s} out {tuple(out.shape)} nan {int(np.isnan(out).sum())}", flush=True)
        info = provenance(kernel, torch, sage2.src)
        info["configurations"] = done
        (folder / "provenance.json").write_text(json.dumps(info, indent=1) + "\n")
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("inputs", help="write the capture set's inputs (numpy)")
    p.add_argument("dir")
    p.add_argument("--only", action="append", choices=config_names(), help="this configuration only (repeatable)")
    p = sub.add_parser("fresh", help="write fresh draws beside the set's shapes, from a random seed (numpy)")
    p.add_argument("dir")
    p.add_argument("--seed", type=int, help="the seed (default: from os.urandom; set.json records it)")
    p = sub.add_parser("run", help="run kernels on a set or one input (GPU)")
    p.add_argument("dir", nargs="?", help="a folder written by 'inputs'")
    p.add_argument("out")
    p.add_argument("--kernel", action="append", required=True, choices=KERNELS)
    p.add_argument("--sage2-src", default=".sage2-ref", help="SageAttention's sources at a fixed commit, with COMMIT "
                   "(sageattn2-*; default: %(default)s)")
    p.add_argument("--sage2-build", default="build/sage2-ref-ext", help="where they are compiled (default: %(default)s)")
    p.add_argument("--q")
    p.add_argument("--k")
    p.add_argument("--v")
    p.add_argument("--causal", action="store_true")
    p.add_argument("--format", choices=["fp16", "bf16"], default="fp16")
    p.add_argument("--name", default="input")
    p = sub.add_parser("record", help="a run's folder as a committed replay record (numpy)")
    p.add_argument("run", help="OUT/KERNEL, written by 'run'")
    p.add_argument("dest")
    p.add_argument("--keep", action="append", choices=config_names(), help="keep this configuration's arrays whole")
    args = parser.parse_args()
    if args.command == "inputs":
        cmd_inputs(args)
        return 0
    if args.command == "fresh":
        cmd_fresh(args)
        return 0
    if args.command == "record":
        return cmd_record(args)
    if bool(args.q) != bool(args.k) or bool(args.q) != bool(args.v) or bool(args.q) == bool(args.dir):
        parser.error("run takes a set folder, or --q, --k and --v")
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
