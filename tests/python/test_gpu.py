"""lowbit.gpu: the sage2-8b Hopper kernels through liblowbit_sage2.so (ctypes).

The library is $LOWBIT_SAGE2_LIBRARY (./dev.sh test sets it to the build's where the kernels are
built); without it these tests report themselves skipped. Without a GPU: loading, provenance, what
the library and the module refuse and the errors they raise. With a Hopper GPU and torch: the
kernels' output and LSE against lowbit.attention's emulated preset, every bit.
"""
import ctypes.util
import os

import numpy as np
import pytest

import lowbit
import lowbit.gpu as gpu


@pytest.fixture(scope="module")
def library():
    path = os.environ.get("LOWBIT_SAGE2_LIBRARY")
    if not path:
        pytest.skip("LOWBIT_SAGE2_LIBRARY is not set (a build with the CUDA kernels has kernels/liblowbit_sage2.so)")
    return gpu.load(path)


def has_gpu():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def test_the_library_loads_once_and_says_where_it_came_from(library):
    assert gpu.load(library.path) is library
    assert len(library.provenance["git_sha"]) >= 7
    assert ("gpu" in library.provenance) == has_gpu()


def test_a_missing_library_is_named(tmp_path):
    with pytest.raises(OSError, match="no library at .*nothing.so"):
        gpu.load(str(tmp_path / "nothing.so"))


def test_another_shared_library_is_named_as_not_this_one():
    libm = ctypes.util.find_library("m")
    if not libm:
        pytest.skip("no libm to load as the wrong library")
    path = next((p for p in ("/lib/x86_64-linux-gnu/" + libm, "/usr/lib/x86_64-linux-gnu/" + libm) if os.path.isfile(p)), None)
    if not path:
        pytest.skip(f"{libm} is not at a known path")
    with pytest.raises(OSError, match="is not liblowbit_sage2"):
        gpu.load(path)


def test_no_library_given_says_how_to_give_one(monkeypatch):
    monkeypatch.delenv("LOWBIT_SAGE2_LIBRARY", raising=False)
    with pytest.raises(OSError, match="LOWBIT_SAGE2_LIBRARY"):
        gpu.load()


@pytest.mark.parametrize("choice, message", [
    ({"dtype": "fp32"}, "dtype='fp32': one of fp16, bf16"),
    ({"layout": "nhd"}, "layout='nhd': one of bhnd, bnhd"),
    ({"exp2": "ex2"}, "exp2='ex2': one of polynomial, sm90-ex2"),
    ({"schedule": "fast"}, "schedule='fast': one of serial, overlapped"),
    ({"row_sum": "quad"}, "row_sum='quad': one of lanes, pv"),
])
def test_choices_outside_their_values_are_refused_by_name(library, choice, message):
    with pytest.raises(ValueError, match=message):
        gpu.Sage2Attention(1, 2, 256, 128, library=library, **choice)


@pytest.mark.parametrize("shape, message", [
    ({"heads_kv": 3}, "heads_q=4 is not a multiple of heads_kv=3"),
    ({"tokens": 0}, "tokens must be >= 1"),
    ({"row_sum": "pv", "exp2": "polynomial"}, "row sums by P V .* the exp2 sm90-ex2 only"),
    ({"row_sum": "pv", "schedule": "overlapped"}, "row sums by P V .* serial schedule"),
])
def test_problems_the_kernels_refuse_raise_valueerror_with_the_librarys_text(library, shape, message):
    args = {"batch": 1, "heads_q": 4, "tokens": 256, "head_dim": 128, **shape}
    with pytest.raises(ValueError, match=message):
        gpu.Sage2Attention(args.pop("batch"), args.pop("heads_q"), args.pop("tokens"), args.pop("head_dim"), library=library,
                           **args)


def test_an_unsupported_head_dim_is_refused(library):
    with pytest.raises(ValueError, match="lowbit_sage2: .*96"):
        gpu.Sage2Attention(1, 2, 256, 96, library=library)


@pytest.mark.skipif(has_gpu(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_the_workspace_is_a_runtimeerror_naming_cuda(library):
    with pytest.raises(RuntimeError, match="cudaMalloc"):
        gpu.Sage2Attention(1, 2, 256, 128, library=library)


@pytest.mark.skipif(not has_gpu(), reason="needs torch and a Hopper GPU")
@pytest.mark.parametrize("d, causal, dtype, layout, exp2, row_sum", [
    (128, True, "fp16", "bhnd", "sm90-ex2", "lanes"),
    (64, False, "bf16", "bnhd", "polynomial", "lanes"),
    (128, False, "bf16", "bnhd", "sm90-ex2", "pv"),
    (64, True, "fp16", "bhnd", "sm90-ex2", "pv"),
])
def test_the_kernels_equal_the_emulated_preset_every_bit(library, d, causal, dtype, layout, exp2, row_sum):
    import torch

    torch.manual_seed(d)
    tdtype = torch.float16 if dtype == "fp16" else torch.bfloat16
    b, hq, hkv, n = 2, 4, 2, 300
    shape = (lambda h: (b, h, n, d)) if layout == "bhnd" else (lambda h: (b, n, h, d))
    q, k, v = (torch.randn(shape(h), dtype=tdtype, device="cuda") for h in (hq, hkv, hkv))
    with gpu.Sage2Attention(b, hq, n, d, heads_kv=hkv, causal=causal, dtype=dtype, layout=layout, exp2=exp2,
                            row_sum=row_sum, library=library) as attn:
        out, lse = attn(q, k, v)
        with pytest.raises(ValueError, match="k is of shape"):
            attn(q, q, v)
    bhnd = (lambda t: t) if layout == "bhnd" else (lambda t: t.transpose(1, 2))
    emulated = lowbit.attention(*(bhnd(t).contiguous().cpu() for t in (q, k, v)),
                                preset="sage2-8b-ex2" if exp2 == "sm90-ex2" else "sage2-8b", causal=causal,
                                stages={"row-sum": row_sum}, keep_operands=False)
    got = bhnd(out).contiguous().cpu().view(torch.int16).numpy()
    want = emulated["output"].to(tdtype).view(torch.int16).numpy()
    assert np.count_nonzero(got != want) == 0
    assert np.count_nonzero(lse.cpu().view(torch.int32).numpy() != emulated["lse"].view(torch.int32).numpy()) == 0
