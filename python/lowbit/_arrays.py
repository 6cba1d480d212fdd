"""How the package hands arrays to the C++ core (python/src/arrays.hpp) and back.

An input becomes a C-contiguous CPU array of its elements' bits, with the lowbit format of its
elements: float32 and float64 as they are, float16 and bfloat16 as 16-bit integers, the 8-bit
dtypes of ml_dtypes and torch (fp8, fp6, fp4) as 8-bit integers. numpy arrays go through the
buffer protocol and torch tensors through DLPack; neither is copied when it is already
C-contiguous on the CPU. A CUDA tensor is copied to the host (the core runs on the CPU), and the
results go back to its device.
"""

import sys

import numpy as np

# numpy / ml_dtypes dtype names and the lowbit format of their elements.
_NUMPY_ELEMENTS = {
    "float32": "fp32",
    "float64": "fp64",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
    "float8_e4m3fnuz": "e4m3fnuz",
    "float8_e5m2fnuz": "e5m2fnuz",
    "float8_e3m4": "e3m4",
    "float8_e8m0fnu": "ue8m0",
    "float6_e2m3fn": "e2m3",
    "float6_e3m2fn": "e3m2",
    "float4_e2m1fn": "e2m1",
}
# torch dtype names (str(dtype) without "torch.") and theirs: the same names as numpy's, fewer of them.
_TORCH_ELEMENTS = {name: _NUMPY_ELEMENTS[name] for name in (
    "float32", "float64", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e8m0fnu")}
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.float64}


def _torch():
    return sys.modules.get("torch")


def is_torch(x):
    torch = _torch()
    return torch is not None and isinstance(x, torch.Tensor)


class Origin:
    """Where an input came from, so that outputs go back the same way (numpy, or torch on a device)."""

    def __init__(self, device=None):
        self.device = device  # None: numpy; else the torch device

    def out(self, array):
        if self.device is None or not isinstance(array, np.ndarray):
            return array
        tensor = _torch().from_numpy(array)
        return tensor if self.device.type == "cpu" else tensor.to(self.device)


def bits(x, name="x"):
    """(array of bits for the core, lowbit element format, Origin) of a numpy array, torch tensor or array-like."""
    if is_torch(x):
        torch = _torch()
        dtype = str(x.dtype).removeprefix("torch.")
        element = _TORCH_ELEMENTS.get(dtype)
        if element is None:
            raise TypeError(f"{name}: torch dtype {x.dtype} is not taken (float32, float64, float16, bfloat16 or "
                            f"an fp8 dtype: {', '.join(k for k in _TORCH_ELEMENTS if k.startswith('float8'))})")
        origin = Origin(x.device)
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()  # a copy: the core runs on the host
        t = t.contiguous()
        size = t.element_size()
        if size in (1, 2):  # DLPack has no fp8 / bfloat16 for every consumer: hand over the bits
            t = t.view(torch.uint8 if size == 1 else torch.int16)
        return t, element, origin
    a = np.asarray(x)
    element = _NUMPY_ELEMENTS.get(a.dtype.name)
    if element is None:
        raise TypeError(f"{name}: dtype {a.dtype} is not taken (float32, float64, float16, or of ml_dtypes: "
                        f"bfloat16, {', '.join(k for k in _NUMPY_ELEMENTS if k.startswith(('float8', 'float6', 'float4')))})")
    a = np.ascontiguousarray(a if a.dtype.isnative else a.astype(a.dtype.newbyteorder("=")))
    if element not in ("fp32", "fp64"):
        a = a.view(_BITS[a.dtype.itemsize])
    return a, element, Origin()


def codes(x, name="codes"):
    """(unsigned integer array of codes, Origin) of integer input.

    Unsigned arrays of up to 32 bits are taken as they are, signed ones as their two's complement
    bits; wider integers must lie in 0 .. 2^32 - 1.
    """
    if is_torch(x):
        origin = Origin(x.device)
        x = x.detach().cpu().numpy()
    else:
        origin = Origin()
    a = np.asarray(x)
    if a.dtype.kind not in "ui" and a.dtype != np.bool_:
        raise TypeError(f"{name}: expected integer codes, not dtype {a.dtype}")
    if a.dtype.kind in "ui" and a.dtype.itemsize <= 4:  # signed: the two's complement bits
        return np.ascontiguousarray(a).view(_BITS[a.dtype.itemsize]), origin
    if a.size and (a.min() < 0 or a.max() > 0xFFFFFFFF):
        bad = int(np.flatnonzero((a < 0) | (a > 0xFFFFFFFF))[0])
        raise ValueError(f"{name}: element {bad} ({a.flat[bad]}) is not a code (0 .. 2^32 - 1)")
    return np.ascontiguousarray(a, dtype=np.uint32), origin
