#!/usr/bin/env python3
"""The attention kernel's KV loop in SASS, without a GPU: registers, spills, the loop's instructions.

Compiles one instantiation of sage2_attention_kernel (a copy of kernels/attention/sage2_attention_kernel.cu,
or of the sage2_kernels.cu that held every kernel before it, whose launch functions instantiate only
it) to a cubin for sm_90a, disassembles it, and prints
ptxas's registers and spills and the KV loop: the innermost backward branch around both the IGMMA
(Q K^T) and the QGMMA (P V) instructions, its instruction count, its opcodes and any local loads or
stores in it. With --against OTHER (another version of the kernel's source) it compiles both and says
whether their KV loops, and their whole kernels, are the same instructions (register numbers and
labels aside), showing the first differences where not: how to check that a change to one kernel
left the other instantiations' code alone.

  scripts/sass_attention_loop.py --head-dim 128 --causal no
  scripts/sass_attention_loop.py --head-dim 64 --causal yes --against /tmp/old/sage2_attention_kernel.cu

Needs nvcc (CUDA 13) and nvdisasm: the toolkit's, or PyPI's nvidia-cuda-nvdisasm (`pip download
--no-deps nvidia-cuda-nvdisasm`, unzip the wheel, NVDISASM=.../nvidia/cu13/bin/nvdisasm). Run from
the repository root. Seconds per instantiation.
"""
import argparse
import collections
import difflib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
KERNEL = "sage2_attention_kernel"
# The launch functions from the first of these to the namespace's end are replaced by one that
# instantiates the kernel (sage2_attention_kernel.cu; sage2_kernels.cu before the kernels' split).
FIRST_LAUNCH = ("void upload_attention_groups(", "void launch_statistics(")
NAMESPACE_END = "}  // namespace lowbit::kernels::attention::detail"
NVCC_FLAGS = ["-DBOOST_ALL_NO_LIB", "-DFMT_SHARED", f"-I{REPO}", "-isystem=/usr/include/eigen3", "-O3", "-DNDEBUG",
              "-arch=sm_90a", "--expt-relaxed-constexpr", "-std=c++20", "-x", "cu", "-cubin", "-Xptxas", "-v"]
INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")
LABEL = re.compile(r"^\s*(\.L_x_\d+):")
BRANCH_TARGET = re.compile(r"BRA.*`\((\.L_x_\d+)\)")


def fail(message):
    sys.exit(f"sass_attention_loop: {message}")


def one_instantiation(source, out_type, head_dim, causal, exp2, schedule, row_sum):
    """The source with its launch functions replaced by one that instantiates the chosen kernel (the row
    sums named only where they are not the lanes', so that sources before steps::RowSum compile too)."""
    text = source.read_text()
    starts = [text.index(mark) for mark in FIRST_LAUNCH if mark in text]
    if not starts or NAMESPACE_END not in text:
        fail(f"{source}: none of {FIRST_LAUNCH} or no '{NAMESPACE_END}' to cut the launch functions at")
    start, end = min(starts), text.index(NAMESPACE_END)
    launch = f"""void launch_attention(const AttentionParams& p, const Sage2Problem&, std::uintptr_t stream) {{
  attention_for<{out_type}, {head_dim}, {str(causal).lower()}, steps::Exp2Unit::{exp2}, false, false, Sage2Schedule::{schedule}{row_sum}>(p, reinterpret_cast<cudaStream_t>(stream));
}}
"""
    return text[:start] + launch + text[end:]


def compile_kernel(source, args, work, nvdisasm):
    """(ptxas's resource line for the kernel, the kernel's instructions and labels) of one source."""
    out_type = {"fp16": "__half", "bf16": "__nv_bfloat16"}[args.dtype]
    exp2 = {"sm90-ex2": "sm90_ex2", "poly5": "polynomial"}[args.exp2]
    work.mkdir(parents=True, exist_ok=True)
    copy = work / "sage2_kernels.cu"  # the same name for every source: the anonymous namespace's name follows it
    row_sum = ", steps::RowSum::pv" if args.row_sum == "pv" else ""
    copy.write_text(one_instantiation(source, out_type, args.head_dim, args.causal == "yes", exp2, args.schedule, row_sum))
    cubin = work / "kernel.cubin"
    defines = [f"-D{d}" for d in args.define]
    built = subprocess.run(["nvcc", *NVCC_FLAGS, *defines, str(copy), "-o", str(cubin)], capture_output=True, text=True)
    if built.returncode != 0:
        errors = [line for line in built.stderr.splitlines() if "error" in line] or built.stderr.splitlines()[-10:]
        fail(f"nvcc failed on {source}:\n" + "\n".join(errors[:20]))
    resources, entry = "", False
    for line in built.stderr.splitlines():
        if "Compiling entry function" in line:
            entry = KERNEL in line
        elif entry and ("registers" in line or "spill" in line):
            resources += line.split(":", 1)[-1].strip() + "; "
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True)
    if sass.returncode != 0:
        fail(f"{nvdisasm} failed: {sass.stderr.strip()}")
    (work / "kernel.sass").write_text(sass.stdout)
    lines = sass.stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if re.search(rf"\.text\..*{KERNEL}", line)]
    if not starts:
        fail(f"no {KERNEL} in the SASS of {source}")
    instructions, labels = [], {}
    for line in lines[starts[-1]:]:
        if (m := LABEL.match(line)):
            labels[m.group(1)] = len(instructions)
        elif (m := INSTRUCTION.match(line)):
            instructions.append(m.group(1))
    return resources.rstrip("; "), instructions, labels


def kv_loop(instructions, labels):
    """(first, last) index of the innermost backward branch's range holding an IGMMA and a QGMMA."""
    igmma = [k for k, s in enumerate(instructions) if "IGMMA" in s]
    qgmma = [k for k, s in enumerate(instructions) if "QGMMA" in s]
    loops = []
    for k, s in enumerate(instructions):
        m = BRANCH_TARGET.search(s)
        if m and labels.get(m.group(1), k + 1) <= k:
            first = labels[m.group(1)]
            if any(first <= x <= k for x in igmma) and any(first <= x <= k for x in qgmma):
                loops.append((first, k))
    if not loops:
        fail("no backward branch around both the IGMMA and the QGMMA instructions")
    return min(loops, key=lambda r: r[1] - r[0])


def opcode(instruction):
    return re.sub(r"^@!?U?P\w+\s+", "", instruction).split()[0]


def normalized(instructions):
    """Register numbers, predicates, labels and symbol names dropped: what stays is the instructions."""
    out = []
    for s in instructions:
        s = re.sub(r"`\([^)]*\)", "`(L)", s)
        s = re.sub(r"\bU?R\d+\b", "R", s)
        s = re.sub(r"\bU?P\d\b", "P", s)
        out.append(s)
    return out


def report(name, resources, instructions, loop):
    body = instructions[loop[0]:loop[1] + 1]
    counts = collections.Counter(opcode(s).split(".")[0] for s in body)
    local = [s for s in body if opcode(s).startswith(("LDL", "STL"))]
    print(f"{name}: {resources or 'no ptxas resource line'}")
    print(f"  {len(instructions)} instructions; KV loop: {len(body)} instructions (at {loop[0]}-{loop[1]}), "
          f"local loads and stores in it: {len(local)}")
    print("  its opcodes: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))))
    for s in local:
        print(f"    {s}")


def compare(what, mine, theirs):
    a, b = normalized(mine), normalized(theirs)
    if a == b:
        print(f"{what}: the same {len(a)} instructions")
        return
    diff = [line for line in difflib.unified_diff(b, a, "against", "source", lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    print(f"{what}: differ ({len(b)} against {len(a)} instructions, {len(diff)} lines of difference); the first:")
    for line in diff[:12]:
        print(f"    {line}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", default=str(REPO / "kernels/attention/sage2_attention_kernel.cu"), help="the kernel's source")
    parser.add_argument("--head-dim", type=int, choices=(64, 128), default=128)
    parser.add_argument("--causal", choices=("no", "yes"), default="no")
    parser.add_argument("--exp2", choices=("sm90-ex2", "poly5"), default="sm90-ex2")
    parser.add_argument("--dtype", choices=("fp16", "bf16"), default="fp16", help="the output type")
    parser.add_argument("--schedule", choices=("serial", "overlapped"), default="serial", help="the kernel's schedule (Sage2Schedule)")
    parser.add_argument("--row-sum", choices=("lanes", "pv"), default="lanes",
                        help="the softmax's row sums: the lanes', or the P V wgmma's (steps::RowSum::pv)")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="a preprocessor definition for nvcc, as a build with CMAKE_CUDA_FLAGS=-DNAME=VALUE has it; repeatable")
    parser.add_argument("--against", help="another version of the source, compared instruction by instruction")
    parser.add_argument("--keep", help="a folder to keep the copies, cubins and SASS in")
    args = parser.parse_args()
    if not shutil.which("nvcc"):
        fail("nvcc is not on PATH")
    nvdisasm = os.environ.get("NVDISASM") or shutil.which("nvdisasm") or "/usr/local/cuda/bin/nvdisasm"
    if not os.access(nvdisasm, os.X_OK):
        fail(f"no nvdisasm (tried $NVDISASM, PATH, {nvdisasm}); PyPI's nvidia-cuda-nvdisasm has one: "
             "pip download --no-deps nvidia-cuda-nvdisasm, unzip it, NVDISASM=<it>/nvidia/cu13/bin/nvdisasm")
    sources = [pathlib.Path(args.source)] + ([pathlib.Path(args.against)] if args.against else [])
    for source in sources:
        if not source.is_file():
            fail(f"{source}: no such file")
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(args.keep or scratch)
        print(f"{KERNEL}<{args.dtype}, d = {args.head_dim}, causal {args.causal}, {args.exp2}, {args.schedule}, "
              f"row sums {args.row_sum}>, sm_90a")
        results = []
        for tag, source in zip(("source", "against"), sources):
            resources, instructions, labels = compile_kernel(source, args, root / tag, nvdisasm)
            loop = kv_loop(instructions, labels)
            report(f"{tag} ({source})", resources, instructions, loop)
            results.append((instructions, loop))
        if len(results) == 2:
            (mine, my_loop), (theirs, their_loop) = results
            compare("KV loops", mine[my_loop[0]:my_loop[1] + 1], theirs[their_loop[0]:their_loop[1] + 1])
            compare("whole kernels", mine, theirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
