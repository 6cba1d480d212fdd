#!/usr/bin/env python3
"""bench_convert's side-by-side timing of lowbit against the Python peers on one core.

bench_convert (experiments/bench/bench_convert.cpp) writes the inputs and a request, runs this
script with the interpreter of its --python option, and puts the response in its tables. Why a
script that calls lowbit through ctypes rather than timing each side in its own process: the
peers are Python libraries, and only in one process do both sides read the same input buffers,
write into buffers allocated alike, run on the same thread and get measured by the same clock
(CPU time of the thread) in rounds that alternate lowbit, peer, lowbit, peer, ..., so that noise
on a shared machine hits both alike. A ctypes call costs about a microsecond, below 1e-4 of one
timed conversion of 2^24 values.

Peers, each where it has the conversion (else reported as not measured, with the reason):
  torch     `x.to(dtype)` and `out.copy_(x)` into a preallocated tensor, torch.set_num_threads(1)
  ml_dtypes `x.astype(dtype)` and `np.copyto(out, x, casting="unsafe")` into a preallocated array
Before timing, each peer's codes are compared with lowbit's on every input; a peer that differs is
not timed. Only the inputs' conversion is compared: the benchmark's inputs never overflow and hold
no NaN, so the peers' overflow rules (torch and ml_dtypes differ from one another and between
versions) do not enter.

The peers install from PyPI into a venv under build/ (never committed); PyPI's Linux torch wheel
brings the CUDA libraries along (about 5 GB), of which only the CPU conversions are used here:
  python3 -m venv build/peer-venv && build/peer-venv/bin/pip install torch ml_dtypes numpy
  build/experiments/bench_convert --python build/peer-venv/bin/python

Usage: convert_peers.py --request REQUEST.json --response RESPONSE.json
  REQUEST  {"library": lowbit_c_api path, "rounds": R,
            "cases": [{"name", "format", "rounding", "overflow", "input": "float32"|"bfloat16",
                       "output": "8"|"16"|"packed4", "inputs": raw little-endian file, "count": n}]}
  RESPONSE {"versions": {...}, "missing": {peer: reason}, "lowbit_variant": {case: text},
            "results": [{"case", "peer", "measured": bool, "reason", "rounds", "peer_cpu_seconds",
                         "lowbit_cpu_seconds", "speedup", "peer_wall_seconds", "lowbit_wall_seconds"}]}
  speedup: the median over rounds of (peer time / lowbit time) in the same round.
"""
import argparse
import ctypes
import json
import os
import platform
import statistics
import sys
import time

# One thread for every library, set before they load.
for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[variable] = "1"

import numpy as np  # noqa: E402  (after the thread settings)


def log(message):
    print(f"convert_peers: {message}", file=sys.stderr, flush=True)


def import_peer(name):
    """The module, or None and the reason it is missing."""
    try:
        module = __import__(name)
        return module, None
    except Exception as e:  # ImportError, or a broken install raising something else
        return None, f"{name} is not importable with {sys.executable}: {type(e).__name__}: {e}"


class Lowbit:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.lowbit_encode_into.argtypes = [ctypes.c_char_p] * 4 + [ctypes.c_void_p, ctypes.c_uint64,
                                                                         ctypes.c_char_p, ctypes.c_void_p,
                                                                         ctypes.c_char_p, ctypes.c_uint64]
        self.lib.lowbit_fast_variant.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_char_p, ctypes.c_uint64,
                                                                         ctypes.c_char_p, ctypes.c_uint64]
        self.error = ctypes.create_string_buffer(512)

    def check(self, status):
        if status != 0:
            raise RuntimeError(f"lowbit: {self.error.value.decode()}")

    def encoder(self, case, inputs, out):
        """A call with no arguments that converts `inputs` into `out`."""
        args = [case[k].encode() for k in ("format", "rounding", "overflow", "input")]
        in_pointer, count, output = inputs.ctypes.data, inputs.size, case["output"].encode()
        out_pointer, error, error_size = out.ctypes.data, self.error, len(self.error)
        encode = self.lib.lowbit_encode_into

        def run():
            self.check(encode(*args, in_pointer, count, output, out_pointer, error, error_size))
        return run

    def variant(self, case):
        text = ctypes.create_string_buffer(64)
        self.check(self.lib.lowbit_fast_variant(*[case[k].encode() for k in ("format", "rounding", "overflow")], text,
                                                len(text), self.error, len(self.error)))
        return text.value.decode()


# The peers' names for lowbit's formats, per output: one code per byte, or two per byte.
TORCH_DTYPES = {"8": {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e4m3fnuz": "float8_e4m3fnuz",
                      "e5m2fnuz": "float8_e5m2fnuz", "ue8m0": "float8_e8m0fnu"},
                "packed4": {"e2m1": "float4_e2m1fn_x2"}}
ML_DTYPES = {"8": {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1": "float4_e2m1fn", "e2m3": "float6_e2m3fn",
                   "e3m2": "float6_e3m2fn", "e3m4": "float8_e3m4", "e4m3fnuz": "float8_e4m3fnuz",
                   "e5m2fnuz": "float8_e5m2fnuz", "ue8m0": "float8_e8m0fnu"}}


def torch_contenders(torch, case, inputs):
    """{name: call} for torch's conversions of this case, or a reason they do not exist."""
    name = TORCH_DTYPES.get(case["output"], {}).get(case["format"])
    if name is None or not hasattr(torch, name):
        what = "two codes per byte" if case["output"] == "packed4" else "one code per byte"
        return None, f"torch {torch.__version__} has no dtype for {case['format']} with {what}"
    dtype = getattr(torch, name)
    x = torch.from_numpy(inputs)
    if case["input"] == "bfloat16":
        x = x.view(torch.bfloat16)
    try:
        out = torch.empty(x.shape, dtype=dtype)
        out[:64].copy_(x[:64])  # does torch have this conversion at all?
    except Exception as e:
        return None, f"torch {torch.__version__} cannot convert {x.dtype} to {name}: {type(e).__name__}: {e}"

    return {"torch .to()": (lambda: x.to(dtype), lambda r: r.view(torch.uint8).numpy()),
            "torch copy_": (lambda: out.copy_(x), lambda r: out.view(torch.uint8).numpy())}, None


def ml_dtypes_contenders(ml_dtypes, case, inputs):
    name = ML_DTYPES.get(case["output"], {}).get(case["format"])
    if name is None or not hasattr(ml_dtypes, name):
        what = "two codes per byte" if case["output"] == "packed4" else "one code per byte"
        return None, f"ml_dtypes {ml_dtypes.__version__} has no dtype for {case['format']} with {what}"
    dtype = np.dtype(getattr(ml_dtypes, name))
    x = inputs.view(ml_dtypes.bfloat16) if case["input"] == "bfloat16" else inputs
    out = np.empty(x.shape, dtype)
    return {"ml_dtypes astype": (lambda: x.astype(dtype), lambda r: r.view(np.uint8)),
            "ml_dtypes copyto": (lambda: np.copyto(out, x, casting="unsafe"), lambda r: out.view(np.uint8))}, None


def timed(call):
    cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
    result = call()
    return time.thread_time_ns() - cpu, time.perf_counter_ns() - wall, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--request", required=True)
    parser.add_argument("--response", required=True)
    args = parser.parse_args()
    with open(args.request) as f:
        request = json.load(f)

    versions = {"python": platform.python_version(), "numpy": np.__version__}
    missing, peers = {}, {}
    for name, contenders in (("torch", torch_contenders), ("ml_dtypes", ml_dtypes_contenders)):
        module, why = import_peer(name)
        if module is None:
            missing[name] = why
            continue
        versions[name] = module.__version__
        peers[name] = (module, contenders)
    if "torch" in peers:
        peers["torch"][0].set_num_threads(1)
        versions["torch threads"] = peers["torch"][0].get_num_threads()
    lowbit = Lowbit(request["library"])
    rounds = int(request["rounds"])

    results, variants = [], {}
    for case in request["cases"]:
        dtype = np.float32 if case["input"] == "float32" else np.uint16
        inputs = np.fromfile(case["inputs"], dtype=dtype)
        if inputs.size != case["count"]:
            raise SystemExit(f"convert_peers: {case['inputs']}: {inputs.size} values, expected {case['count']}")
        codes_out = np.empty((inputs.size + 1) // 2 if case["output"] == "packed4" else inputs.size,
                             np.uint16 if case["output"] == "16" else np.uint8)
        run_lowbit = lowbit.encoder(case, inputs, codes_out)
        run_lowbit()
        lowbit_codes = codes_out.copy()
        variants[case["name"]] = lowbit.variant(case)

        contenders = {}
        for peer, why in missing.items():
            results.append({"case": case["name"], "peer": peer, "measured": False, "reason": why})
        for peer, (module, make) in peers.items():
            made, why = make(module, case, inputs)
            if made is None:
                results.append({"case": case["name"], "peer": peer, "measured": False, "reason": why})
                continue
            for name, (call, codes_of) in made.items():
                peer_codes = codes_of(call())
                differ = int(np.count_nonzero(peer_codes != lowbit_codes)) if peer_codes.shape == lowbit_codes.shape \
                    else -1
                if differ != 0:
                    first = int(np.flatnonzero(peer_codes != lowbit_codes)[0]) if differ > 0 else 0
                    reason = (f"codes differ from lowbit's on {differ} of {inputs.size} inputs (first: element {first}, "
                              f"input bits {int(inputs.view(np.uint32 if dtype == np.float32 else np.uint16)[first]):#x}, "
                              f"{name} {int(peer_codes[first]):#x}, lowbit {int(lowbit_codes[first]):#x})"
                              if differ > 0 else f"output shape {peer_codes.shape}, lowbit's {lowbit_codes.shape}")
                    results.append({"case": case["name"], "peer": name, "measured": False, "reason": reason})
                    continue
                contenders[name] = call

        log(f"{case['name']}: {rounds} rounds of lowbit ({variants[case['name']]}) against "
            f"{', '.join(contenders) or 'no peer'}")
        samples = {name: {"peer": [], "lowbit": []} for name in contenders}
        for r in range(rounds):
            for k, (name, call) in enumerate(contenders.items()):
                # lowbit first in even turns, the peer first in odd ones.
                order = (("lowbit", run_lowbit), ("peer", call))
                for side, f in order if (r + k) % 2 == 0 else order[::-1]:
                    cpu, wall, _ = timed(f)
                    samples[name][side].append((cpu * 1e-9, wall * 1e-9))
        for name, s in samples.items():
            peer_cpu = [c for c, _ in s["peer"]]
            lowbit_cpu = [c for c, _ in s["lowbit"]]
            results.append({
                "case": case["name"], "peer": name, "measured": True, "rounds": rounds,
                "peer_cpu_seconds": statistics.median(peer_cpu),
                "lowbit_cpu_seconds": statistics.median(lowbit_cpu),
                "speedup": statistics.median(p / l for p, l in zip(peer_cpu, lowbit_cpu)),
                "peer_wall_seconds": statistics.median(w for _, w in s["peer"]),
                "lowbit_wall_seconds": statistics.median(w for _, w in s["lowbit"]),
            })

    with open(args.response, "w") as f:
        json.dump({"versions": versions, "missing": missing, "lowbit_variant": variants, "results": results}, f,
                  indent=1)


if __name__ == "__main__":
    main()
