#!/usr/bin/env python3
"""Replays a committed capture of a released kernel (verification/captures/KERNEL/) on the CPU.

usage: thirdparty_replay.py LOWBIT CAPTURE_DIR WORK_DIR [NAME ...]

For each configuration of CAPTURE_DIR/set.json (or the NAMEs): its inputs are made again by
experiments/thirdparty/capture.py (their sha256 must be the captured ones), `lowbit attention` runs
the kernel's preset on them, and the output and LSE it writes must have the sha256 the kernel's had
(every code, every LSE bit). The inputs as each kernel reads them: fp16 or bf16 (sdpa-flash, in the
set's format), bf16 (fa3-bf16), E4M3 codes with descales per (batch, KV head) (fa3-fp8: made by
capture.fa3_fp8_operands, whose sha256 must be the ones the kernel got), fp16 or bf16 with the K mean
torch computed for it (sageattn2-*: NAME.km.npy, given as --key-mean). Where the capture keeps the
kernel's arrays (NAME.out.npy, NAME.lse.npy), `lowbit attention --against` compares them too and must
report 0 differ. Exit 77 without numpy (or, for fa3-fp8, ml_dtypes).
"""
import hashlib
import json
import pathlib
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("thirdparty_replay: numpy is missing; skipped")
    sys.exit(77)

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "thirdparty"))
import capture  # noqa: E402  (the capture set's inputs, made as on the GPU machine)

PRESETS = {"sdpa-flash": "sdpa-flash-{format}", "fa3-bf16": "fa3-bf16", "fa3-fp8": "fa3-fp8"}
PRESETS.update({kernel: kernel for kernel in capture.SAGE2_KERNELS})  # each SageAttention2 kernel is its preset


def kernel_inputs(kernel, tensors, c, work, folder):
    """The inputs as the kernel reads them, and the options they need; or None and a problem."""
    name = c["name"]
    if kernel in capture.SAGE2_KERNELS:  # fp16 or bf16 files: the output and the K mean follow their format
        import ml_dtypes

        key_mean = folder / f"{name}.km.npy"
        if capture.digest(np.load(key_mean)) != c["operands_sha256"]["km"]:
            return None, f"{key_mean} is not the K mean the kernel's wrapper computed (sha256)"
        dtype = np.float16 if c["format"] == "fp16" else ml_dtypes.bfloat16
        return [x.astype(dtype) for x in tensors], ["--key-mean", str(key_mean)]
    if kernel == "fa3-fp8":
        import ml_dtypes

        codes, descales = capture.fa3_fp8_operands(*tensors)
        made = {r: capture.digest(x) for r, x in zip("qkv", codes)}
        made["descale"] = capture.digest(descales)
        if made != c["operands_sha256"]:
            return None, "capture.fa3_fp8_operands does not make the kernel's E4M3 operands and descales"
        tensors = [x.view(ml_dtypes.float8_e4m3fn).astype(np.float32) for x in codes]
        np.save(work / f"{name}.descale.npy", descales)
        options = ["--descale", str(work / f"{name}.descale.npy")]
        return tensors, options + [a for r in "qkv" for a in ("--set", f"{r}=e4m3:none")]
    if kernel == "fa3-bf16":
        tensors = [capture.round_to(x, "bf16") for x in tensors]
    return tensors, []


def digest(path):
    return capture.digest(np.load(path))


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    lowbit, folder, work, only = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3]), sys.argv[4:]
    work.mkdir(parents=True, exist_ok=True)
    captured = json.loads((folder / "set.json").read_text())
    kernel = captured["kernel"]
    preset_of = PRESETS[kernel]
    if kernel == "fa3-fp8" or kernel in capture.SAGE2_KERNELS:
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            print(f"thirdparty_replay: ml_dtypes is missing ({kernel}'s operands); skipped")
            return 77
    unknown = set(only) - {c["name"] for c in captured["configs"]}
    if unknown:
        print(f"thirdparty_replay: not in {folder / 'set.json'}: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    passed = failed = 0
    for c in captured["configs"]:
        name = c["name"]
        if only and name not in only:
            continue
        tensors, entry = capture.inputs_of(c)
        if entry["sha256"] != c["sha256"]:
            print(f"{name}: FAILED: capture.py no longer makes the captured inputs (sha256 {entry['sha256']} != {c['sha256']})")
            failed += 1
            continue
        tensors, options = kernel_inputs(kernel, tensors, c, work, folder)
        if tensors is None:
            print(f"{name}: FAILED: {options}")
            failed += 1
            continue
        for role, t in zip("qkv", tensors):
            np.save(work / f"{name}.{role}.npy", t)
        out, lse = work / f"{name}.out.npy", work / f"{name}.lse.npy"
        command = [lowbit, "attention", "--preset", preset_of.format(format=c["format"]), "--q", str(work / f"{name}.q.npy"),
                   "--k", str(work / f"{name}.k.npy"), "--v", str(work / f"{name}.v.npy"), "--out", str(out),
                   "--out-lse", str(lse), "--threads", "0"] + options
        if c["causal"]:
            command.append("--causal")
        kept = folder / f"{name}.out.npy"
        if kept.exists():
            command += ["--against", str(kept), "--against-lse", str(folder / f"{name}.lse.npy")]
        run = subprocess.run(command, capture_output=True, text=True)
        report = [line for line in run.stdout.splitlines() if line.startswith("against ") and " of " in line]
        problems = []
        if run.returncode != 0:
            problems.append(f"lowbit exited {run.returncode}: {run.stderr.strip() or ' '.join(report)}")
        else:
            if digest(out) != c["output_sha256"]:
                problems.append("the output's sha256 is not the kernel's")
            if digest(lse) != c["lse_sha256"]:
                problems.append("the LSE's sha256 is not the kernel's")
        if problems:
            print(f"{name}: FAILED: " + "; ".join(problems))
            failed += 1
        else:
            whole = f"; {'; '.join(r.split(': ', 1)[1] for r in report)}" if report else ""
            print(f"{name}: every output code and LSE value the kernel's (sha256){whole}")
            passed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
