"""Tensor files written by numpy, ml_dtypes (bfloat16 .npy) and a plain-Python .safetensors
writer (the format's own spec: 8-byte little-endian header length, JSON header, data) read by
`lowbit attention` exactly as the same values in float32: the outputs are identical bit for bit.
Usage: npy_interop.py LOWBIT_PROGRAM SCRATCH_DIR. Exit 77 (skipped) without numpy or ml_dtypes."""
import json
import os
import struct
import subprocess
import sys

try:
    import numpy as np
    import ml_dtypes
except ImportError as e:
    print(f"skipped: {e}")
    sys.exit(77)

program, scratch = sys.argv[1], sys.argv[2]
os.makedirs(scratch, exist_ok=True)
rng = np.random.default_rng(5)


def values(shape, bias):
    # bfloat16 values that float16 also holds exactly (magnitudes well inside float16's range)
    x = (rng.normal(size=shape) + bias * rng.normal(size=shape[-1])).astype(np.float32)
    return x.astype(ml_dtypes.bfloat16).astype(np.float32)


tensors = {"q": values((1, 4, 150, 64), 1.0), "k": values((1, 2, 150, 64), 3.0), "v": values((1, 2, 150, 64), 2.0)}
assert all(np.array_equal(t.astype(np.float16).astype(np.float32), t) for t in tensors.values())


def save_safetensors(path, arrays, dtype):
    header, blobs, offset = {}, [], 0
    for name, a in arrays.items():
        raw = a.astype({"F16": np.float16, "BF16": ml_dtypes.bfloat16, "F32": np.float32}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


variants = {}
for kind, dtype in (("f32", np.float32), ("f16", np.float16), ("bf16", ml_dtypes.bfloat16)):
    paths = {}
    for name, t in tensors.items():
        paths[name] = os.path.join(scratch, f"{name}_{kind}.npy")
        np.save(paths[name], t.astype(dtype))
    variants[f"npy {kind}"] = paths
for dtype in ("F32", "F16", "BF16"):
    path = os.path.join(scratch, f"qkv_{dtype}.safetensors")
    save_safetensors(path, tensors, dtype)
    variants[f"safetensors {dtype}"] = {name: f"{path}:{name}" for name in tensors}

with open(os.path.join(scratch, "q_bf16.npy"), "rb") as f:
    descr = f.read(128)
print("ml_dtypes writes bfloat16 .npy headers as:", descr[10:60])

outputs = {}
for label, paths in variants.items():
    out = os.path.join(scratch, "out_" + label.replace(" ", "_") + ".npy")
    command = [program, "attention", "--preset", "fp32", "--causal", "--set", "output=fp32", "--q", paths["q"],
               "--k", paths["k"], "--v", paths["v"], "--out", out]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        print(f"{label}: lowbit failed:\n{result.stdout}{result.stderr}")
        sys.exit(1)
    outputs[label] = np.load(out)
    print(f"{label}: {result.stdout.splitlines()[-3]}")

first = next(iter(outputs.values()))
different = [label for label, o in outputs.items() if not np.array_equal(o.view(np.uint32), first.view(np.uint32))]
if different:
    print("outputs differ from the float32 .npy run:", different)
    sys.exit(1)
print(f"all {len(outputs)} encodings of the same values gave the same output, bit for bit")
