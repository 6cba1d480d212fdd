"""lowbit's SageAttention2-8b Hopper kernels on your own GPU tensors, from Python.

The kernels come from liblowbit_sage2.so (the C interface kernels/attention/lowbit_sage2.h, built by
CMake beside the kernels: build/kernels/liblowbit_sage2.so), loaded with ctypes; this module needs
neither lowbit's C++ core nor a Python of the build's version, so it can be loaded from its file
alone on a GPU machine (experiments/bench/bench_attention.py --library does). What the kernels
compute is the emulated preset sage2-8b-ex2 (exp2="sm90-ex2") or sage2-8b (exp2="polynomial"), with
--set row-sum=pv where row_sum="pv", every bit of the output and the LSE (tests/attention_gpu/test_sage2_c_api_gpu.cpp checks it).

    attn = lowbit.gpu.Sage2Attention(batch=4, heads_q=32, tokens=8192, head_dim=128, causal=True)
    out, lse = attn(q, k, v)          # torch CUDA tensors, fp16 or bf16, [B, H, N, d]
    attn.quantize(q, k, v)            # or in two steps: the quantization ...
    out, lse = attn.attention_quantized()   # ... and the attention kernel on its operands
    lowbit.gpu.sm_clock_mhz()         # the SM clock now, measured on the GPU (for benchmarks)

Tensors are torch CUDA tensors (contiguous, on the current device, the problem's dtype and shape:
[batch, heads, tokens, head_dim] for layout "bhnd", [batch, tokens, heads, head_dim] for "bnhd"; the
LSE float32 [batch, heads_q, tokens]) or raw device pointers as integers. Launches go to the given
stream (a torch.cuda.Stream or a cudaStream_t as an integer), by default torch's current stream
(the default stream where torch is not installed).
The library is the `library` argument, else $LOWBIT_SAGE2_LIBRARY. Errors: ValueError for a problem
or tensor the kernels refuse, with the library's text; RuntimeError for a CUDA failure; OSError when
the library cannot be loaded.
"""

import ctypes
import json
import os

__all__ = ["Library", "load", "Sage2Attention", "sm_clock_mhz"]

_ABI_VERSION = 2  # LOWBIT_SAGE2_ABI_VERSION of lowbit_sage2.h
_INVALID = 1  # LOWBIT_SAGE2_INVALID (refused arguments); LOWBIT_SAGE2_FAILED is 2
_CHOICES = {  # the problem's enumerations, as lowbit_sage2.h numbers them
    "dtype": ("fp16", "bf16"),
    "layout": ("bhnd", "bnhd"),
    "exp2": ("polynomial", "sm90-ex2"),
    "schedule": ("serial", "overlapped"),
    "row_sum": ("lanes", "pv"),
}
_TORCH_DTYPES = {"fp16": "torch.float16", "bf16": "torch.bfloat16"}


class _Problem(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in
                ("batch", "heads_q", "heads_kv", "tokens", "head_dim", "causal", "dtype", "layout", "exp2", "schedule",
                 "row_sum")]


class Library:
    """liblowbit_sage2.so, loaded; `path` is the file, `provenance` its build and GPU record (a dict)."""

    def __init__(self, path):
        self.path = str(path)
        if not os.path.isfile(self.path):
            raise OSError(f"lowbit.gpu: no library at {self.path} (build the CMake target lowbit_sage2)")
        lib = ctypes.CDLL(self.path)
        if not hasattr(lib, "lowbit_sage2_abi_version"):
            raise OSError(f"lowbit.gpu: {self.path} is not liblowbit_sage2 (no lowbit_sage2_abi_version)")
        lib.lowbit_sage2_abi_version.restype = ctypes.c_int
        if lib.lowbit_sage2_abi_version() != _ABI_VERSION:
            raise OSError(f"lowbit.gpu: {self.path} has interface version {lib.lowbit_sage2_abi_version()}, "
                          f"this module speaks {_ABI_VERSION}")
        err = (ctypes.c_char_p, ctypes.c_size_t)
        ptr, stream = ctypes.c_void_p, ctypes.c_size_t
        signatures = {
            "lowbit_sage2_provenance": (ctypes.c_char_p, ()),
            "lowbit_sage2_validate": (ctypes.c_int, (ctypes.POINTER(_Problem), *err)),
            "lowbit_sage2_workspace_create": (ctypes.c_int, (ctypes.POINTER(_Problem), ctypes.POINTER(ptr), *err)),
            "lowbit_sage2_workspace_destroy": (None, (ptr,)),
            "lowbit_sage2_quantize": (ctypes.c_int, (ptr, ptr, ptr, ptr, stream, *err)),
            "lowbit_sage2_attention_quantized": (ctypes.c_int, (ptr, ptr, ptr, stream, *err)),
            "lowbit_sage2_attention": (ctypes.c_int, (ptr, ptr, ptr, ptr, ptr, ptr, stream, *err)),
            "lowbit_sage2_sm_clock_mhz": (ctypes.c_int, (stream, ctypes.POINTER(ctypes.c_double), *err)),
        }
        for name, (restype, argtypes) in signatures.items():
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        self._lib = lib
        self.provenance = json.loads(lib.lowbit_sage2_provenance().decode())

    def call(self, name, *args):
        """Calls `name` with args and an error buffer; raises with the library's text when it fails:
        ValueError where it refused the arguments (LOWBIT_SAGE2_INVALID), RuntimeError where the GPU or
        CUDA failed (LOWBIT_SAGE2_FAILED)."""
        text = ctypes.create_string_buffer(1024)
        status = getattr(self._lib, name)(*args, text, len(text))
        if status != 0:
            raise (ValueError if status == _INVALID else RuntimeError)(text.value.decode(errors="replace"))

    def destroy(self, workspace):
        self._lib.lowbit_sage2_workspace_destroy(workspace)


_loaded = {}


def load(library=None):
    """The library at `library` (a path or a Library), else at $LOWBIT_SAGE2_LIBRARY; loaded once per path."""
    if isinstance(library, Library):
        return library
    path = library or os.environ.get("LOWBIT_SAGE2_LIBRARY")
    if not path:
        raise OSError("lowbit.gpu: no library given: pass library= or set LOWBIT_SAGE2_LIBRARY to liblowbit_sage2.so")
    path = os.path.abspath(path)
    if path not in _loaded:
        _loaded[path] = Library(path)
    return _loaded[path]


def sm_clock_mhz(stream=None, library=None):
    """The SM clock in MHz, measured on the current GPU after the work queued on `stream` (by default
    torch's current stream); waits for it. For benchmarks: the clock a timed launch ended at."""
    mhz = ctypes.c_double()
    load(library).call("lowbit_sage2_sm_clock_mhz", _stream_handle(stream), ctypes.byref(mhz))
    return mhz.value


def _stream_handle(stream):
    """A cudaStream_t as an integer: torch's current stream for None (the default stream without torch)."""
    if stream is None:
        try:
            import torch
        except ImportError:
            return 0
        return torch.cuda.current_stream().cuda_stream
    return stream if isinstance(stream, int) else stream.cuda_stream


class Sage2Attention:
    """The sage2-8b kernels for one problem, with the device buffers of its quantized operands.

    batch, heads_q, tokens, head_dim (64 or 128); heads_kv (default heads_q; GQA: a divisor of
    heads_q); causal; dtype "fp16" or "bf16" (Q, K, V and the output); layout "bhnd" or "bnhd";
    exp2 "sm90-ex2" (MUFU.EX2, preset sage2-8b-ex2) or "polynomial" (sage2-8b); schedule "serial" or
    "overlapped" (the same bits); row_sum "lanes" (the presets') or "pv" (the row sums by the P V
    wgmma: row-sum=pv, serial with sm90-ex2 only). The problem is checked here (ValueError naming what is wrong), the
    buffers allocated on the current device. close() frees them (also a context manager).
    """

    def __init__(self, batch, heads_q, tokens, head_dim, *, heads_kv=None, causal=False, dtype="fp16", layout="bhnd",
                 exp2="sm90-ex2", schedule="serial", row_sum="lanes", library=None):
        choices = {"dtype": dtype, "layout": layout, "exp2": exp2, "schedule": schedule, "row_sum": row_sum}
        for name, value in choices.items():
            if value not in _CHOICES[name]:
                raise ValueError(f"lowbit.gpu: {name}={value!r}: one of {', '.join(_CHOICES[name])}")
        self.batch, self.heads_q, self.tokens, self.head_dim = batch, heads_q, tokens, head_dim
        self.heads_kv = heads_q if heads_kv is None else heads_kv
        self.causal, self.dtype, self.layout, self.exp2, self.schedule = bool(causal), dtype, layout, exp2, schedule
        self.row_sum = row_sum
        self._library = load(library)
        self._problem = _Problem(batch, heads_q, self.heads_kv, tokens, head_dim, int(self.causal),
                                 *(_CHOICES[name].index(value) for name, value in choices.items()))
        self._library.call("lowbit_sage2_validate", ctypes.byref(self._problem))
        workspace = ctypes.c_void_p()
        self._library.call("lowbit_sage2_workspace_create", ctypes.byref(self._problem), ctypes.byref(workspace))
        self._workspace = workspace

    def shape(self, heads):
        """The shape of Q (heads_q) or K and V (heads_kv) in the problem's layout."""
        if self.layout == "bhnd":
            return (self.batch, heads, self.tokens, self.head_dim)
        return (self.batch, self.tokens, heads, self.head_dim)

    @property
    def lse_shape(self):
        return (self.batch, self.heads_q, self.tokens)

    def _pointer(self, x, name, shape, dtype):
        """x's device address, after checking a tensor's device, dtype, shape and contiguity."""
        if isinstance(x, int):
            if x == 0:
                raise ValueError(f"lowbit.gpu: {name} is a null pointer")
            return x
        if not hasattr(x, "data_ptr"):
            raise TypeError(f"lowbit.gpu: {name} must be a torch CUDA tensor or a device pointer (int), not {type(x).__name__}")
        import torch

        problems = []
        if not x.is_cuda or x.device.index != torch.cuda.current_device():
            problems.append(f"on {x.device}, not the current CUDA device cuda:{torch.cuda.current_device()}")
        if str(x.dtype) != dtype:
            problems.append(f"of dtype {x.dtype}, not {dtype}")
        if tuple(x.shape) != shape:
            problems.append(f"of shape {tuple(x.shape)}, not {shape}")
        if not x.is_contiguous():
            problems.append("not contiguous")
        if problems:
            raise ValueError(f"lowbit.gpu: {name} is " + " and ".join(problems))
        return x.data_ptr()

    def _inputs(self, q, k, v):
        dtype = _TORCH_DTYPES[self.dtype]
        return (self._pointer(q, "q", self.shape(self.heads_q), dtype), self._pointer(k, "k", self.shape(self.heads_kv), dtype),
                self._pointer(v, "v", self.shape(self.heads_kv), dtype))

    def _outputs(self, out, lse):
        """out and lse (new torch tensors where None) and their addresses."""
        if out is None or lse is None:
            import torch

            dtype = torch.float16 if self.dtype == "fp16" else torch.bfloat16
            out = torch.empty(self.shape(self.heads_q), dtype=dtype, device="cuda") if out is None else out
            lse = torch.empty(self.lse_shape, dtype=torch.float32, device="cuda") if lse is None else lse
        return out, lse, (self._pointer(out, "out", self.shape(self.heads_q), _TORCH_DTYPES[self.dtype]),
                          self._pointer(lse, "lse", self.lse_shape, "torch.float32"))

    def _live(self):
        if self._workspace is None:
            raise ValueError("lowbit.gpu: this Sage2Attention was closed")
        return self._workspace

    def quantize(self, q, k, v, stream=None):
        """Step 1: Q, K, V -> the quantized operands held here."""
        self._library.call("lowbit_sage2_quantize", self._live(), *self._inputs(q, k, v), _stream_handle(stream))

    def attention_quantized(self, out=None, lse=None, stream=None):
        """Step 2: the attention kernel on the operands of the last quantize(); returns (out, lse)."""
        out, lse, pointers = self._outputs(out, lse)
        self._library.call("lowbit_sage2_attention_quantized", self._live(), *pointers, _stream_handle(stream))
        return out, lse

    def __call__(self, q, k, v, out=None, lse=None, stream=None):
        """Both steps; returns (out, lse)."""
        inputs = self._inputs(q, k, v)
        out, lse, pointers = self._outputs(out, lse)
        self._library.call("lowbit_sage2_attention", self._live(), *inputs, *pointers, _stream_handle(stream))
        return out, lse

    def close(self):
        if getattr(self, "_workspace", None) is not None:
            self._library.destroy(self._workspace)
            self._workspace = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
