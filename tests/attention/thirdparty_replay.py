#!/usr/bin/env python3
"""Replays a committed capture of a released kernel (verification/captures/KERNEL/) on the CPU.

usage: thirdparty_replay.py LOWBIT CAPTURE_DIR WORK_DIR

For each configuration of CAPTURE_DIR/set.json: its inputs are made again by
experiments/thirdparty/capture.py (their sha256 must be the captured ones), `lowbit attention` runs
the kernel's preset on them, and the output and LSE it writes must have the sha256 the kernel's had
(every code, every LSE bit). Where the capture keeps the kernel's arrays (NAME.out.npy, NAME.lse.npy),
`lowbit attention --against` compares them too and must report 0 differ. Exit 77 without numpy.
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

PRESETS = {"sdpa-flash": "sdpa-flash-{format}"}


def digest(path):
    return hashlib.sha256(np.load(path).astype("<f4").tobytes()).hexdigest()


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    lowbit, folder, work = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    work.mkdir(parents=True, exist_ok=True)
    captured = json.loads((folder / "set.json").read_text())
    preset_of = PRESETS[captured["kernel"]]
    passed = failed = 0
    for c in captured["configs"]:
        name = c["name"]
        tensors, entry = capture.make_inputs(name)
        if entry["sha256"] != c["sha256"]:
            print(f"{name}: FAILED: capture.py no longer makes the captured inputs (sha256 {entry['sha256']} != {c['sha256']})")
            failed += 1
            continue
        for role, t in zip("qkv", tensors):
            np.save(work / f"{name}.{role}.npy", t)
        out, lse = work / f"{name}.out.npy", work / f"{name}.lse.npy"
        command = [lowbit, "attention", "--preset", preset_of.format(format=c["format"]), "--q", str(work / f"{name}.q.npy"),
                   "--k", str(work / f"{name}.k.npy"), "--v", str(work / f"{name}.v.npy"), "--out", str(out),
                   "--out-lse", str(lse), "--threads", "0"]
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
