#!/usr/bin/env python3
"""Two builds' kernels compared function by function in SASS, without a GPU.

  scripts/sass_compare.py BEFORE AFTER

BEFORE and AFTER are comma-separated lists of object files, cubins or `cuobjdump -sass` dumps (a
file ending in .sass is read as a dump; anything else goes through cuobjdump -sass). A kernel is
matched by its mangled name with the anonymous namespace's per-file part dropped (it follows the
source file's name), so a kernel moved to another file is still compared with itself. Per kernel:
  identical          the same instructions, registers, encodings and scheduling bits
  same text          the same instruction text, other encodings (scheduling bits)
  same but registers the same instructions up to register and predicate numbers
  different          other instructions (the counts are shown)
  missing            in one build only
Exit status 0 when every kernel is identical. How the attention kernels were split without changing
an instruction (docs/attention-kernel-tuning.md):
  cuobjdump needs CUDA's toolkit, or PyPI's nvidia-cuda-cuobjdump (pip download --no-deps, unzip the
  wheel, CUOBJDUMP=.../nvidia/cu13/bin/cuobjdump).
"""
import os
import re
import shutil
import subprocess
import sys

FUNCTION = re.compile(r"\s*Function : (\S+)")
INSTRUCTION = re.compile(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")  # 5 digits past 64 KiB of code
ANONYMOUS = re.compile(r"\d+_GLOBAL__N__\w+?_cu_[0-9a-f]{8}")


def dump(path):
    if path.endswith(".sass"):
        return open(path).read()
    cuobjdump = os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump") or "/usr/local/cuda/bin/cuobjdump"
    return subprocess.run([cuobjdump, "-sass", path], capture_output=True, text=True, check=True).stdout


def kernels(paths, names):
    """{normalized name: [lines, whitespace collapsed]}; names gets normalized -> mangled."""
    out = {}
    for path in paths.split(","):
        current = None
        for line in dump(path).splitlines():
            if (m := FUNCTION.match(line)):
                key = ANONYMOUS.sub("_GLOBAL__N_", m.group(1))
                names.setdefault(key, m.group(1))
                current = out.setdefault(key, [])
            elif current is not None and line.strip() and not re.match(r"\s*\.{3,}", line):
                current.append(" ".join(line.split()))
    return out


def instructions(lines):
    return [m.group(1) for line in lines if (m := INSTRUCTION.match(line))]


def without_registers(text):
    return [re.sub(r"\bU?P\d\b", "P", re.sub(r"\bU?R\d+\b", "R", s)) for s in text]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    names = {}
    before, after = kernels(sys.argv[1], names), kernels(sys.argv[2], names)
    keys = sorted(set(before) | set(after))
    demangled = dict(zip(keys, subprocess.run(["c++filt"], input="\n".join(names[k] for k in keys), capture_output=True,
                                              text=True).stdout.splitlines())) if shutil.which("c++filt") else {}
    differ = 0
    for key in keys:
        name = demangled.get(key, key).split("(lowbit::kernels")[0]
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            verdict = f"missing in {'BEFORE' if a is None else 'AFTER'}"
        elif a == b:
            verdict = f"identical ({len(instructions(a))} instructions)"
        else:
            ia, ib = instructions(a), instructions(b)
            verdict = ("same text, other encodings" if ia == ib else "same but registers" if
                       without_registers(ia) == without_registers(ib) else f"different ({len(ia)} -> {len(ib)} instructions)")
        differ += not verdict.startswith("identical")
        print(f"{verdict}: {name}")
    print(f"{len(keys)} kernels, {len(keys) - differ} identical, {differ} not")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
