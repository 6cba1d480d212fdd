#!/usr/bin/env python3
"""The sage2-8b kernels called from Python (lowbit.gpu over liblowbit_sage2.so), recorded on a GPU and
checked against the emulator here, every bit.

  record OUT --library LIB   (on a Hopper GPU with torch and numpy; ml_dtypes for bf16) runs each
      configuration below through lowbit.gpu (python/lowbit/gpu.py, loaded from its file), in its
      layout and dtype, one or two steps, and writes OUT/NAME/{q,k,v,out,lse}.npy ([batch, heads,
      tokens, dim] and [batch, heads, tokens]; bf16 as ml_dtypes saves it) and OUT/manifest.json;
  check DIR --lowbit PROGRAM  runs `lowbit attention --preset P --against out.npy --against-lse lse.npy`
      on each recorded configuration: every output code and LSE value must equal the emulated preset's
      (sage2-8b-ex2 for exp2 sm90-ex2, sage2-8b for the polynomial; --set row-sum=pv for row_sum "pv").
      Exits 1 when any differ.

ctest python_gpu_vectors checks the recorded tests/data/attention_python_gpu/ (tests/attention_gpu/CMakeLists.txt).
"""
import argparse
import importlib.util
import json
import pathlib
import subprocess
import sys

# name: batch, heads_q, heads_kv, tokens, head_dim, causal, dtype, layout, exp2, schedule, two steps, row sums
CONFIGS = {
    "d128-causal-fp16-bhnd-ex2": (1, 4, 2, 200, 128, True, "fp16", "bhnd", "sm90-ex2", "serial", False, "lanes"),
    "d64-bf16-bnhd-poly": (1, 2, 2, 200, 64, False, "bf16", "bnhd", "polynomial", "serial", False, "lanes"),
    "d128-bf16-bnhd-ex2-overlapped-steps": (1, 2, 1, 256, 128, False, "bf16", "bnhd", "sm90-ex2", "overlapped", True, "lanes"),
    "d64-causal-fp16-bhnd-ex2-steps": (2, 2, 2, 130, 64, True, "fp16", "bhnd", "sm90-ex2", "serial", True, "lanes"),
    "d128-bf16-bnhd-ex2-pv": (1, 2, 2, 300, 128, False, "bf16", "bnhd", "sm90-ex2", "serial", False, "pv"),
    "d64-causal-fp16-bhnd-ex2-pv-steps": (2, 2, 1, 200, 64, True, "fp16", "bhnd", "sm90-ex2", "serial", True, "pv"),
}
PRESETS = {"sm90-ex2": "sage2-8b-ex2", "polynomial": "sage2-8b"}


def record(out, library):
    import numpy as np
    import torch

    spec = importlib.util.spec_from_file_location("lowbit_gpu", pathlib.Path(__file__).resolve().parents[2] / "python/lowbit/gpu.py")
    gpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu)
    lib = gpu.load(library)
    manifest = {"library": lib.provenance, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                "command": " ".join(sys.argv), "configs": {}}
    generator = torch.Generator(device="cuda").manual_seed(20261207)
    for name, (b, hq, hkv, n, d, causal, dtype, layout, exp2, schedule, steps, row_sum) in CONFIGS.items():
        tdtype = torch.float16 if dtype == "fp16" else torch.bfloat16
        shape = (lambda h: (b, h, n, d)) if layout == "bhnd" else (lambda h: (b, n, h, d))
        # Normal values, K with a channel bias (what its smoothing takes out).
        bias = torch.zeros(d, device="cuda")
        bias[5] = 12.0
        q = torch.randn(shape(hq), device="cuda", generator=generator).to(tdtype)
        k = (torch.randn(shape(hkv), device="cuda", generator=generator) + bias).to(tdtype)
        v = torch.randn(shape(hkv), device="cuda", generator=generator).to(tdtype)
        with gpu.Sage2Attention(b, hq, n, d, heads_kv=hkv, causal=causal, dtype=dtype, layout=layout, exp2=exp2,
                                schedule=schedule, row_sum=row_sum, library=lib) as attn:
            if steps:
                attn.quantize(q, k, v)
                o, lse = attn.attention_quantized()
            else:
                o, lse = attn(q, k, v)
        torch.cuda.synchronize()
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        for label, t in (("q", q), ("k", k), ("v", v), ("out", o)):
            t = (t if layout == "bhnd" else t.transpose(1, 2)).contiguous().cpu()
            if dtype == "fp16":
                array = t.numpy()
            else:
                import ml_dtypes
                array = t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
            np.save(folder / f"{label}.npy", array)
        np.save(folder / "lse.npy", lse.cpu().numpy())
        manifest["configs"][name] = {"preset": PRESETS[exp2], "causal": causal, "dtype": dtype, "layout": layout,
                                     "sets": [f"row-sum={row_sum}"], "schedule": schedule, "two_steps": steps, "batch": b, "heads_q": hq, "heads_kv": hkv,
                                     "tokens": n, "head_dim": d}
        print(f"{name}: recorded")
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


def check(folder, lowbit):
    try:
        manifest = json.loads((folder / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"{folder}/manifest.json: not readable ({e})")
        return 1
    failures = 0
    for name, config in manifest["configs"].items():
        files = {label: folder / name / f"{label}.npy" for label in ("q", "k", "v", "out", "lse")}
        command = [lowbit, "attention", "--preset", config["preset"], "--q", files["q"], "--k", files["k"], "--v",
                   files["v"], "--against", files["out"], "--against-lse", files["lse"]] + (["--causal"] if config["causal"] else [])
        for assignment in config.get("sets", []):  # recorded before row sums had a choice: none
            command += ["--set", assignment]
        run = subprocess.run(list(map(str, command)), capture_output=True, text=True)
        verdicts = [line for line in run.stdout.splitlines() if line.startswith("against ") and line.endswith(" differ")]
        equal = run.returncode == 0 and len(verdicts) == 2 and all(" 0 of " in line for line in verdicts)
        print(f"{name}: {'; '.join(verdicts) or run.stderr.strip()}" + ("" if equal else f" (exit {run.returncode}): FAILED"))
        failures += not equal
    if not manifest["configs"]:
        print(f"{folder}: no configuration recorded")
        return 1
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("record", help="run the configurations on the GPU through lowbit.gpu, write them")
    r.add_argument("out", type=pathlib.Path)
    r.add_argument("--library", required=True, help="liblowbit_sage2.so")
    c = sub.add_parser("check", help="compare a recorded folder with the emulator, every bit")
    c.add_argument("folder", type=pathlib.Path)
    c.add_argument("--lowbit", required=True, help="the lowbit program")
    args = parser.parse_args()
    return record(args.out, args.library) if args.mode == "record" else check(args.folder, args.lowbit)


if __name__ == "__main__":
    sys.exit(main())
