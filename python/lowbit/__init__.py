"""lowbit: bit-exact emulation of low-precision number formats, tensor-core MMA instructions and
quantized attention pipelines, from Python.

Every function runs lowbit's C++ core (the same code as the ``lowbit`` program), so its results
equal the program's bit for bit:

    formats()                     the preset number formats, as Format objects
    Format("e4m3")                a format: its parameters, limits and codes
    encode(x, "e4m3")             float values -> codes (the vectorized encoder where it serves)
    decode(codes, "e4m3")         codes -> values
    convert(x, "e4m3")            the values the format stores for x (encode, then decode)
    quantize(x, "int4", ...)      a tensor -> codes, scales and groups, as a kernel quantizes it
    mma(name, a, b, c)            one tensor-core instruction (mma.sync, wgmma) on one tile
    attention(q, k, v, preset=)   an attention pipeline, every stage kept
    run("smoothing", q, k, v)     an experiment of ``lowbit run``: its tables and folder
    presets(), stages(), instructions(), instruction(name), experiments()

lowbit.gpu runs the SageAttention2-8b Hopper kernels themselves on torch CUDA tensors (ctypes over
liblowbit_sage2.so; see its docstring).

Arrays: numpy arrays (float32, float64, float16, and ml_dtypes' bfloat16 and fp8/fp6/fp4 dtypes)
and torch tensors (CPU or CUDA; float32, float16, bfloat16 and the fp8 dtypes) are read without a
copy when C-contiguous on the CPU (CUDA tensors are copied to the host). Results are numpy arrays,
or torch tensors (on the input's device) when the input was one. Bad input raises ValueError or
TypeError with the message the ``lowbit`` program prints. Long calls release the GIL.
"""

import csv
import pathlib
import tempfile

import numpy as np

from . import _core
from ._arrays import bits as _bits, codes as _codes, is_torch

__all__ = ["Format", "formats", "encode", "decode", "convert", "quantize", "mma", "attention", "compare", "presets", "stages",
           "instructions", "instruction", "experiments", "run"]


class Format(_core.Format):
    """A number format: a preset name ("e4m3", "bf16", "int4", "ue8m0", ...) or a spec
    ("e4m3:bias=8:no-subnormals", "p3109:k=8:p=3", "e3m4", "int6"); ``lowbit format --help`` lists
    the options.

    Attributes: name, origin (where a preset comes from), kind ("floating" or "integer"), bits,
    exponent_bits, mantissa_bits, bias, signed, subnormals, has_zero, storage_bits, nan and inf
    (how they are encoded: "none", "ieee", "top", "negative-zero"), the limits max_finite,
    lowest_finite, min_normal, min_positive, min_exponent, max_exponent, and the codes
    max_finite_code and canonical_nan_code (None without NaN).

    >>> f = lowbit.Format("e4m3")
    >>> f.max_finite, f.min_positive, f.nan
    (448.0, 0.001953125, 'top')
    >>> float(f.values()[0x7e])
    448.0
    """

    def __init__(self, spec):
        super().__init__(spec.name if isinstance(spec, _core.Format) else spec)

    def codes(self):
        """Every code of the format, 0 .. 2^bits - 1, as an unsigned integer array (formats of up to 16 bits)."""
        if self.bits > 16:
            raise ValueError(f"format {self.name} has 2^{self.bits} codes; codes() lists formats of up to 16 bits")
        return np.arange(1 << self.bits, dtype=np.uint32)

    def values(self):
        """The value of every code (index = code), as float64; NaN codes are NaN (formats of up to 16 bits)."""
        return decode(self.codes(), self, dtype=np.float64)


def _spec(format):
    return format.name if isinstance(format, _core.Format) else str(format)


def formats():
    """The preset formats, in the order ``lowbit formats`` lists them (a list of Format)."""
    return [Format(f.name) for f in _core.preset_formats()]


def encode(x, format, rounding="nearest-even", overflow="saturate", *, seed=0, random_bits=32, out=None, threads=1):
    """Encode float values into a format's codes.

    x: float32, float64, float16, bfloat16 or fp8 values (numpy, ml_dtypes or torch); float32
        and bfloat16 into codes of up to 16 bits take the vectorized encoder (convert_fast.hpp),
        with the scalar encoder's results bit for bit.
    format: a Format or its name or spec.
    rounding: nearest-even, nearest-away, toward-zero, toward-positive, toward-negative, odd or
        stochastic (seed and random_bits: element i draws its bits from (seed, i), whatever the
        threads).
    overflow: what too-large values and infinities become: saturate, inf or nan.
    out: a C-contiguous numpy array of x's size and the codes' unsigned dtype to write into (no
        allocation); it is returned.
    threads: threads to split x over (1: the calling thread only; 0: every core).

    Returns the codes, in the narrowest unsigned integer dtype that holds them (uint8, uint16,
    uint32), shaped as x; the codes `echo X | lowbit convert --to FORMAT` prints.
    """
    data, element, origin = _bits(x)
    if out is not None and not isinstance(out, np.ndarray):
        raise TypeError("out: expected a numpy array")
    codes = _core.encode(data, element, _spec(format), rounding, overflow, seed, random_bits, out, threads)
    return out if out is not None else origin.out(codes)


def decode(codes, format, dtype=None):
    """The values of codes (unsigned integers, or the two's complement bits of signed ones).

    dtype: float32 (the default where every value of the format is a float32) or float64.
    Raises ValueError for a code wider than the format.
    """
    data, origin = _codes(codes)
    spec = _spec(format)
    float64 = not _core.fits_float32(spec) if dtype is None else np.dtype(dtype) == np.float64
    if dtype is not None and np.dtype(dtype) not in (np.float32, np.float64):
        raise TypeError(f"dtype: expected float32 or float64, not {np.dtype(dtype)}")
    return origin.out(_core.decode(data, spec, float64))


def convert(x, format, rounding="nearest-even", overflow="saturate", *, seed=0, random_bits=32, threads=1):
    """The value the format stores for each element of x (encode, then decode).

    The arguments are encode()'s. Returns float32 values (float64 for float64 input, or where
    the format's values are not all float32), shaped as x.
    """
    data, element, origin = _bits(x)
    spec = _spec(format)
    codes = _core.encode(data, element, spec, rounding, overflow, seed, random_bits, None, threads)
    return origin.out(_core.decode(codes, spec, element == "fp64" or not _core.fits_float32(spec)))


def _stage_list(stages):
    if stages is None:
        return []
    if isinstance(stages, dict):
        def text(value):
            return ("on" if value else "off") if isinstance(value, bool) else str(value)
        return [f"{stage}={text(value)}" for stage, value in stages.items()]
    if isinstance(stages, str):
        raise TypeError("stages: expected a dict {stage: value} or a list of 'STAGE=VALUE'")
    return [str(s) for s in stages]


def quantize(x, format, granularity="per-token", *, role="q", instruction=None, target=None, preset="sage2-8b",
             stages=None):
    """Quantize a tensor as an attention kernel quantizes Q, K or V: codes, scales and groups.

    x: a 2-D tensor, tokens x dim (float32, float16 or bfloat16).
    format: the element format (int8, int4, e4m3, e5m2, e2m1, ...).
    granularity: none, per-tensor, per-block, per-warp, per-thread, per-token, per-channel
        (V), nvfp4, mx (``lowbit attention --help``).
    role: "q", "k" or "v": which operand's groups (per-thread and per-warp groups differ for Q
        and K; per-block: block-q queries or block-kv keys).
    instruction: the Q K^T instruction the per-thread and per-warp groups come from (its
        accumulator fragment), e.g. "mma.sync.m16n8k32.row.col.s32.s8.s8.s32"; default: the preset's.
    target: the code magnitude a group's amax maps to (default: the format's max finite).
    preset, stages: the pipeline whose tiling (block-q, block-kv, warps) decides the groups.

    Returns a dict: codes (padded_rows x padded_cols, unsigned), scale_codes and scales (float32),
    one per group, groups (each element's group index, padded shape), outer_scales, shape,
    padded_shape, element, scale_format, grouping, instruction, nonfinite.
    """
    data, element, _ = _bits(x)
    operand = f"{_spec(format)}:{granularity}" + ("" if target is None else f":{target}")
    return _core.quantize(data, element, role, operand, instruction, preset, _stage_list(stages))


def instructions():
    """One line per modeled tensor-core instruction family (as ``lowbit verify-vectors --help``)."""
    return _core.instructions()


def instruction(name, arch="sm_90"):
    """An instruction's atom and model: m, n, k, the operand and accumulator formats, block scales,
    and how far its model is verified (verified, reported, inferred, published)."""
    return _core.instruction(arch, name)


def _operand_codes(x, format, name):
    """Codes of an MMA operand: integer arrays are codes; float arrays must hold values of the format."""
    if is_torch(x) and not x.is_floating_point() or not is_torch(x) and np.asarray(x).dtype.kind in "uib":
        return _codes(x, name)[0].astype(np.uint32)
    data, element, _ = _bits(x, name)
    codes = _core.encode(data, element, format, "nearest-even", "saturate", 0, 32, None, 1)
    back = _core.decode(codes, format, True)
    given = np.asarray(data)
    if element in ("fp32", "fp64"):
        given = given.astype(np.float64)
    else:  # the bits of a 16- or 8-bit dtype: codes of its format
        given = _core.decode(given.view(f"u{given.itemsize}"), element, True)
    same = (back == given) | (np.isnan(back) & np.isnan(given))
    if not same.all():
        i = np.unravel_index(int(np.flatnonzero(~same)[0]), same.shape)
        raise ValueError(f"{name}{list(map(int, i))} = {float(given[i])!r} is not a value of {format} "
                         f"(nearest: {float(back[i])!r}); "
                         f"pass codes (an integer array) or values of the format")
    return codes.astype(np.uint32)


def mma(name, a, b, c=None, *, arch="sm_90", scale_a=None, scale_b=None):
    """D = A B + C through one tensor-core instruction's model, bit for bit (as ``lowbit
    verify-vectors`` checks every recorded GPU tile).

    name: the PTX instruction, e.g. "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" or
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" (instructions() lists them).
    a: m x k, b: k x n (math orientation, row-major): integer arrays of codes of the
        instruction's operand formats, or float arrays whose every value the format holds.
    c: m x n accumulator: float32 (f32), float16 (f16) or int32 (s32) values; None: zeros.
    scale_a (m x k/block), scale_b (k/block x n): block-scale codes of block-scaled instructions.
    arch: the architecture whose model runs ("sm_80", "sm_89", "sm_90", "sm_100", "sm_120").

    Returns D (m x n) as float32, float16 or int32.
    """
    info = _core.instruction(arch, name)
    acc = {"fp32": np.float32, "fp16": np.float16, "int32": np.int32}[info["d"]]
    a_codes = _operand_codes(a, info["a"], "a")
    b_codes = _operand_codes(b, info["b"], "b")
    if c is None:
        c_bits = np.zeros((info["m"], info["n"]), np.uint32)
    else:
        c_values = c.detach().cpu().numpy() if hasattr(c, "detach") else np.asarray(c)
        c_bits = np.ascontiguousarray(c_values, dtype=acc)
        c_bits = c_bits.view(np.uint16 if acc is np.float16 else np.uint32).astype(np.uint32)
    sa = None if scale_a is None else _codes(scale_a, "scale_a")[0].astype(np.uint32)
    sb = None if scale_b is None else _codes(scale_b, "scale_b")[0].astype(np.uint32)
    d = _core.mma(arch, name, a_codes, b_codes, c_bits, sa, sb)
    return d.astype(np.uint16).view(np.float16) if acc is np.float16 else d.view(acc)


def presets():
    """The attention presets: {name: the kernel it follows} (``lowbit attention --help``)."""
    return dict(_core.presets())


def stages():
    """The stages of an attention pipeline: [(stage, values it takes, what it is)]."""
    return [tuple(s) for s in _core.stage_list()]


def attention(q, k, v, preset="sage2-8b", causal=False, stages=None, *, threads=0, keep_operands=True, descale=None,
              key_mean=None):
    """Run an emulated attention pipeline, as ``lowbit attention`` does, keeping every stage.

    q, k, v: [heads, tokens, dim] or [batch, heads, tokens, dim] (float32, float16 or bfloat16;
        K and V heads divide Q heads: GQA).
    preset: presets() lists them (sage2-8b, fa3-fp8, sage3, fp32, ...).
    causal: top-left causal mask (key j visible to query i when j <= i), PyTorch's is_causal.
    stages: stages changed from the preset, {stage: value} or ["STAGE=VALUE", ...] in order,
        as the program's --set (stages() lists them), e.g. {"accumulation": "two-level:1"}.
    threads: threads (0: every core), as the program's --threads.
    keep_operands: keep the quantized Q, K, V (codes, scales, means) in the result.
    descale: fa3-fp8: FlashAttention-3's q_descale, k_descale, v_descale as the kernel takes them,
        [3, batch, kv_heads] (numpy or torch), for Q, K, V of E4M3 values as they are (stages
        q=e4m3:none, k=e4m3:none, v=e4m3:none); as the program's --descale.
    key_mean: sageattn2-*: K's mean as SageAttention2's wrapper computed it (torch's k.mean(),
        whose reduction order is not modelled), [batch, kv_heads, 1, dim] or [batch, kv_heads, dim],
        in place of the emulated one; as the program's --key-mean.

    Returns a dict:
        output            the output rounded to the output format (Q's format unless the stages
                          say otherwise), as float32: what ``--out`` writes, bit for bit
        output_codes      the same as codes of output_format
        output_format     its format's name
        output_unrounded  the float32 output before rounding
        lse               [batch, heads, tokens]: natural log of the softmax denominator
                          (sageattn2-*: the kernel's own, log2 of the K-smoothed scores' sum)
        q, k, v           one dict per (batch, head) (index batch * heads + head; k, v: per KV
                          head): codes, scale_codes, scales, groups, mean (the smoothing means),
                          outer_scales, shape, padded_shape, element, scale_format, grouping
        macs              multiply-accumulates emulated
        preset, follows, stages  the pipeline that ran: its preset, the kernel it follows, and
                          every stage's value
    Arrays keep the inputs' rank (no batch axis for 3-D inputs); torch inputs give torch tensors
    (top-level arrays) on their device.
    """
    qd, qe, origin = _bits(q, "q")
    kd, ke, _ = _bits(k, "k")
    vd, ve, _ = _bits(v, "v")
    descales = []
    if descale is not None:
        d = _float32(descale, "descale")
        if d.ndim != 3 or d.shape[0] != 3:
            raise ValueError(f"descale: FlashAttention-3's descales are [3, batch, kv_heads], not shape {d.shape}")
        descales = d.ravel().tolist()
    key_means = [] if key_mean is None else _float32(key_mean, "key_mean").ravel().tolist()
    r = _core.attention(qd, qe, kd, ke, vd, ve, preset, _stage_list(stages), bool(causal), int(threads),
                        bool(keep_operands), descales, key_means)
    for key in ("output", "output_codes", "output_unrounded", "lse"):
        r[key] = origin.out(r[key])
    return r


def _float32(x, name):
    """A float32 C-contiguous numpy array of x's values (torch tensors from any device)."""
    if is_torch(x):
        x = x.detach().float().cpu().numpy()
    try:
        return np.ascontiguousarray(np.asarray(x, dtype=np.float32))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name}: not an array of numbers ({e})") from None


def compare(kernel_output, emulated, kernel_lse=None):
    """Compare a kernel's attention output, every code, with an emulated one, as ``lowbit attention
    --against`` does.

    kernel_output: the output the kernel wrote, the shape of emulated["output"] (any float dtype
        that holds the output format's values exactly; torch tensors from any device).
    emulated: the dict attention() returned for the same inputs (its output, output_format, lse).
    kernel_lse: the log-sum-exp the kernel returned, [batch, heads, tokens] (or without batch),
        compared bit for bit with emulated["lse"]; None: not compared.

    Returns a dict: compared and differ (output elements), lse_compared and lse_differ, ulps
    ({distance in units in the last place of the output format: count}; -1 where either side is
    NaN or infinite), first (the first differing element: batch, head, row, column, kernel,
    emulated, and row_lse_differs, whether that row's LSE differs too, which points at the softmax
    statistics rather than the P V product; None when nothing differs).
    """
    ours = _float32(emulated["output"], "emulated output")
    theirs = _float32(kernel_output, "kernel_output")
    if theirs.shape != ours.shape:
        raise ValueError(f"kernel_output: shape {theirs.shape}, the emulated output is {ours.shape}")
    if kernel_lse is None:
        lse_k = lse_e = np.zeros(0, np.float32)
    else:
        lse_k, lse_e = _float32(kernel_lse, "kernel_lse"), _float32(emulated["lse"], "emulated lse")
        if lse_k.shape != lse_e.shape:
            raise ValueError(f"kernel_lse: shape {lse_k.shape}, the emulated LSE is {lse_e.shape}")
    return _core.compare(theirs.reshape(-1).reshape(ours.shape), ours, emulated["output_format"], lse_k.reshape(-1),
                         lse_e.reshape(-1))


def experiments():
    """The experiments run() runs: {name: what it asks} (``lowbit run --list``)."""
    return dict(_core.experiments())


def _save_npy(path, x, name):
    """x as the program reads a tensor file: float32 '<f4', float16 '<f2' or bfloat16 '<V2' (ml_dtypes)."""
    data, element, _ = _bits(x, name)
    data = np.asarray(data)
    if element == "fp16":
        data = data.view(np.float16)
    elif element == "bf16":
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(f"{name}: bfloat16 tensors go to the experiment through ml_dtypes, which is not installed")
        data = data.view(ml_dtypes.bfloat16)
    elif element != "fp32":
        raise TypeError(f"{name}: the experiments take float32, float16 or bfloat16 tensors, not {element}")
    np.save(path, data)


def _read_csv(path):
    """A CSV the experiments write (its '#' provenance lines skipped) as a list of dicts, numbers as numbers."""
    def value(text):
        for kind in (int, float):
            try:
                return kind(text)
            except ValueError:
                pass
        return text
    with open(path, newline="") as f:
        return [{key: value(v) for key, v in row.items()} for row in csv.DictReader(l for l in f if not l.startswith("#"))]


def run(name, q=None, k=None, v=None, *, out=None, causal=False, threads=0, **options):
    """Run an experiment of ``lowbit run NAME`` (experiments() lists them) and read what it wrote.

    q, k, v: your tensors (as attention() takes them; they replace the experiment's datasets and
        are saved as .npy files under FOLDER/inputs), or None for the experiment's own datasets
        (the smollm2 one reads the capture committed in the source tree the package was built
        from; data_dir="..." points elsewhere).
    out: the folder it writes (default: a new temporary folder).
    causal: your tensors' attention is causal. threads: as --threads (0: every core).
    options: the experiment's other options (``lowbit run NAME --help``), e.g. tokens=4096,
        datasets=["synthetic"]: key_name=value becomes --key-name value, True a flag, a list
        comma-separated.

    Returns a dict: table (summary.csv as a list of dicts, one per row; numbers as numbers),
    tables (every CSV it wrote, by file name), headline (headline.txt) and folder (its path).
    Plots are not drawn (``lowbit plot FOLDER`` draws them). Raises ValueError for an unknown
    experiment and RuntimeError when the experiment exits with an error (its message is on
    stderr, as from the program).
    """
    folder = pathlib.Path(out) if out is not None else pathlib.Path(tempfile.mkdtemp(prefix=f"lowbit-run-{name}-"))
    # --threads only when given: 0 is every experiment's default, and granularity-qk has no such option.
    args = ["--out", str(folder)] + (["--threads", str(int(threads))] if threads else [])
    given = [t is not None for t in (q, k, v)]
    if any(given):
        if not all(given):
            raise ValueError("q, k and v go together")
        inputs = folder / "inputs"
        inputs.mkdir(parents=True, exist_ok=True)
        for tensor_name, tensor in zip("qkv", (q, k, v)):
            _save_npy(inputs / f"{tensor_name}.npy", tensor, tensor_name)
            args += [f"--{tensor_name}", str(inputs / f"{tensor_name}.npy")]
        args += ["--causal"] if causal else []
    elif causal:
        raise ValueError("causal describes your q, k and v: give them")
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not None and value is not False:
            args += [flag, ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)]
    status = _core.run(name, args)
    if status != 0:
        raise RuntimeError(f"lowbit run {name} exited {status} (its message is above, on stderr)")
    tables = {p.name: _read_csv(p) for p in sorted(folder.glob("*.csv"))}
    headline = folder / "headline.txt"
    return {"table": tables.get("summary.csv", []), "tables": tables,
            "headline": headline.read_text().strip() if headline.exists() else "", "folder": str(folder)}
