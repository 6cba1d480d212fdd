#!/usr/bin/env python3
"""The order in which experiments/bench/bench_attention.py times the kernels, without a GPU.

Runs it against a stand-in binary and a stand-in torch (SDPA only: no FA3 wheel) (a temporary folder first on PYTHONPATH),
both of which log what they time, and checks the order: without --interleave the binary times every
shape first; with it, the binary runs once per shape right before the other kernels time that shape,
or right after with --others-first; --others-first alone is refused. Checks too that lowbit.json
then holds every shape's measurements and that the provenance says which order ran. With --library
(lowbit's kernels in the process: no GPU here) it checks the turns of time_in_turn, which times every
kernel of a shape launch by launch in rotation, and the refused combinations of flags.
"""
import importlib.util
import json
import random
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
TORCH = '''
import os
__version__ = "stand-in"
float16 = bfloat16 = float8_e4m3fn = float32 = None
def log(what):
    with open(os.environ["ORDER_LOG"], "a") as f:
        f.write(what + "\\n")
class _Event:
    def __init__(self, **kwargs): pass
    def record(self): pass
    def synchronize(self): pass
    def elapsed_time(self, other): return 1.0
class cuda:
    Event = _Event
    get_device_name = staticmethod(lambda: "Stand-in GPU")
    empty_cache = staticmethod(lambda: None)
    _sleep = staticmethod(lambda cycles: None)
class backends:
    class cudnn:
        version = staticmethod(lambda: 0)
class _Tensor:
    def __init__(self, d, n): self.d, self.n = d, n
def randn(b, h, n, d, **kwargs):
    return _Tensor(d, n)
'''
NN = '''
from torch import log
class functional:
    @staticmethod
    def scaled_dot_product_attention(q, k, v, is_causal):
        log(f"others {q.d} {'yes' if is_causal else 'no'} {q.n}")
'''
ATTENTION = '''
import contextlib
class SDPBackend:
    FLASH_ATTENTION, CUDNN_ATTENTION = 1, 2
@contextlib.contextmanager
def sdpa_kernel(backend):
    yield
'''
BINARY = '''#!/usr/bin/env python3
import json, os, sys
arg = lambda k: sys.argv[sys.argv.index(k) + 1]
shapes = [(int(d), c == "yes", int(n)) for d in arg("--dims").split(",") for c in arg("--causal").split(",")
          for n in arg("--tokens").split(",")]
with open(os.environ["ORDER_LOG"], "a") as f:
    f.writelines(f"binary {d} {'yes' if c else 'no'} {n}\\n" for d, c, n in shapes)
json.dump({"provenance": {}, "method": "stand-in", "measurements": [
    {"kernel": "lowbit_ex2", "d": d, "causal": c, "n": n, "tops": 1.0} for d, c, n in shapes]}, open(arg("--json"), "w"))
'''


def run(folder, *flags, binary=True):
    """(exit status, the log's lines, lowbit.json, the provenance's method) of one run."""
    log = folder / "order.log"
    log.unlink(missing_ok=True)
    out = folder / "out"
    run = subprocess.run([sys.executable, str(REPO / "experiments/bench/bench_attention.py"),
                          *(["--binary", str(folder / "binary")] if binary else []),
                          "--dims", "64,128", "--tokens", "1024", "--out", str(out), *flags],
                         env={"PYTHONPATH": str(folder), "ORDER_LOG": str(log), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True)
    if run.returncode != 0:
        return run.returncode, [], None, None
    # SDPA runs a shape many times (warm-up, repeats, two backends): one line for each run of lines.
    lines = []
    for line in log.read_text().splitlines():
        if not lines or lines[-1] != line:
            lines.append(line)
    provenance = json.loads(next(out.glob("*.provenance.json")).read_text())
    return 0, lines, json.loads((out / "lowbit.json").read_text()), provenance["method"]


def in_turn(folder):
    """time_in_turn's launches: the kernels in rotation (each `burst` times a turn), warm-up rounds first, then
    a time and a clock reading per timed launch, the first burst // 2 of each turn not counted."""
    sys.path.insert(0, str(folder))  # the stand-in torch
    spec = importlib.util.spec_from_file_location("bench_attention", REPO / "experiments/bench/bench_attention.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    failures = []
    names = ("lowbit_ex2", "fa3_fp8", "sdpa_flash")
    for burst in (1, 2):
        launched = []
        runs = {name: (lambda name=name: launched.append(name)) for name in names}
        clocks = iter(range(1000, 2000))
        records = bench.time_in_turn(runs, 2, 3, burst, lambda: float(next(clocks)))
        turns = [name for name in runs for _ in range(burst)]
        if launched != turns * 5:
            failures.append(f"burst {burst}: time_in_turn launched {launched}, expected 5 rounds of {turns}")
        counted = [launch >= burst // 2 for launch in range(burst)] * 3
        for name, record in records.items():
            if record["ms"] != [1.0] * 3 * burst or record["counted"] != counted:
                failures.append(f"burst {burst}: {name}'s record is {record}, expected {3 * burst} launches counted {counted}")
        # The clock is read once after each timed launch, in launch order.
        mhz = sorted(m for record in records.values() for m in record["mhz"])
        if mhz != [float(m) for m in range(1000, 1000 + 9 * burst)] or records["fa3_fp8"]["mhz"][0] != 1000.0 + burst:
            failures.append(f"burst {burst}: clocks read {[r['mhz'] for r in records.values()]}")
    # Shuffled: each timed round a permutation of its own (the draws of the given generator), every
    # launch's predecessor recorded; the same seed, the same order.
    launched = []
    runs = {name: (lambda name=name: launched.append(name)) for name in names}
    records = bench.time_in_turn(runs, 1, 20, 2, None, random.Random(7))
    timed = launched[2 * len(names):]
    rounds = [timed[i:i + 2 * len(names)] for i in range(0, len(timed), 2 * len(names))]
    draws = random.Random(7)
    orders = [draws.sample(list(names), len(names)) for _ in range(20)]
    if rounds != [[name for name in order for _ in range(2)] for order in orders]:
        failures.append(f"shuffled: the rounds ran {rounds[:3]}..., expected the generator's orders {orders[:3]}...")
    if len({tuple(order) for order in orders}) < 2:
        failures.append("shuffled: every round drew the same order")
    after = {name: [] for name in names}
    for previous, name in zip([None] + timed, timed):
        after[name].append(previous)
    if any(records[name]["after"] != after[name] for name in names):
        failures.append(f"shuffled: predecessors recorded {[records[n]['after'][:4] for n in names]}, launched {timed[:8]}")
    print("--library: time_in_turn launches in rotation" if not failures else "--library: wrong turns")
    return failures


def main():
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        (folder / "torch/nn/attention").mkdir(parents=True)
        (folder / "torch/__init__.py").write_text(TORCH)
        (folder / "torch/nn/__init__.py").write_text(NN)
        (folder / "torch/nn/attention/__init__.py").write_text(ATTENTION)
        (folder / "binary").write_text(BINARY)
        (folder / "binary").chmod(0o755)
        # Shapes in the program's order: d, then causal (no, yes), then N.
        shapes = ["64 no 1024", "64 yes 1024", "128 no 1024", "128 yes 1024"]
        expected = {
            (): [f"binary {s}" for s in shapes] + [f"others {s}" for s in shapes],
            ("--interleave",): [line for s in shapes for line in (f"binary {s}", f"others {s}")],
            ("--interleave", "--others-first"): [line for s in shapes for line in (f"others {s}", f"binary {s}")],
        }
        for flags, order in expected.items():
            status, lines, lowbit, method = run(folder, *flags)
            name = " ".join(flags) or "(default)"
            if status != 0:
                failures.append(f"{name}: exit {status}")
                continue
            if lines != order:
                failures.append(f"{name}: timed in the order {lines}, expected {order}")
            if len(lowbit["measurements"]) != 4:
                failures.append(f"{name}: lowbit.json holds {len(lowbit['measurements'])} measurements, expected 4")
            said = "right after" if "--others-first" in flags else "right before" if flags else None
            if (said is None and "interleaved" in method) or (said is not None and said not in method):
                failures.append(f"{name}: the provenance's method says {method!r}")
            print(f"{name}: {len(lines)} steps in order" if lines == order else f"{name}: wrong order")
        refused = {"--others-first alone": (("--others-first",), True),
                   "--binary with --library": (("--library", "lib.so"), True),
                   "--library with --interleave": (("--library", "lib.so", "--interleave"), False),
                   "--burst without --library": (("--burst", "4"), True),
                   "--burst 0": (("--library", "lib.so", "--burst", "0"), False),
                   "--inputs without --library": (("--inputs", "attention-like"), True),
                   "--order without --library": (("--order", "fixed"), True),
                   "--row-sum without --library": (("--row-sum", "lanes,pv"), True),
                   "--row-sum of another name": (("--library", "lib.so", "--row-sum", "quad"), False),
                   "--alt-library without --library": (("--alt-library", "x=lib.so"), True),
                   "--alt-library without a path": (("--library", "lib.so", "--alt-library", "x"), False),
                   "--alt-library twice by one name": (("--library", "lib.so", "--alt-library", "x=a.so", "--alt-library",
                                                        "x=b.so"), False),
                   "--alt-end-to-end without --alt-library": (("--library", "lib.so", "--alt-end-to-end"), False),
                   "neither --binary nor --library": ((), False)}
        for name, (flags, binary) in refused.items():
            status, *_ = run(folder, *flags, binary=binary)
            if status != 2:
                failures.append(f"{name}: exit {status}, expected 2 (a usage error)")
        failures += in_turn(folder)
    for failure in failures:
        print("FAILED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
