"""experiments/data/gguf_forward.py on tiny synthetic GGUF files (no model download): the llama/qwen2 switch
(Q/K/V biases, llama.cpp's row permutation of Wq and Wk for llama only), quantized tensors read the right way round,
a Q4_K block dequantized as the format says, the forward pass against a plain reference, the qwen2 pre-tokenizer.

Needs gguf and tokenizers (./dev.sh test installs them with the SmolLM2 packages); without them it skips itself.
"""

import math
import pathlib
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="gguf is not installed (./dev.sh test installs it)")
pytest.importorskip("tokenizers", reason="tokenizers is not installed (./dev.sh test installs it)")

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "data"))
import gguf_forward  # noqa: E402

Q = gguf.GGMLQuantizationType
LAYERS, WIDTH, HEADS, KV_HEADS, FFN = 2, 256, 4, 2, 512  # d = 64; Q4_K rows need a multiple of 256 columns
D = WIDTH // HEADS
BASE, EPS = 1e4, 1e-6


def byte_vocab():
    """GPT-2's byte-to-unicode map: the 256 one-byte tokens of a byte-level BPE."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def q4k_block(rng):
    """One random Q4_K block (256 weights, 144 bytes) and its first 32 weights by the format's definition:
    y = d * sc - dmin * m per 32-weight sub-block, sc and m the low 6 bits of scales[j] and scales[j + 4] (j < 4),
    the weight's 4 bits the low nibble of qs[l] for l < 32."""
    d, dmin = np.float16(0.01), np.float16(0.003)
    scales = rng.integers(0, 256, 12, dtype=np.uint8)
    qs = rng.integers(0, 256, 128, dtype=np.uint8)
    raw = np.concatenate([np.array([d, dmin], dtype="<f2").view(np.uint8), scales, qs])
    sc, m = scales[0] & 63, scales[4] & 63
    first = float(d) * sc * (qs[:32] & 0xF) - float(dmin) * m
    return raw, first


def rope_hf(x):
    T, _, d = x.shape
    inv = BASE ** (-np.arange(0, d, 2) / d)
    ang = np.arange(T)[:, None, None] * inv[None, None, :]
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * np.cos(ang) - b * np.sin(ang), b * np.cos(ang) + a * np.sin(ang)], axis=-1)


def reference_forward(w, ids, bias):
    """The transformer written out plainly (HF order, rotate_half rope, GQA), from the unquantized weights."""
    rms = lambda x, g: x / np.sqrt(np.mean(x * x, -1, keepdims=True) + EPS) * g  # noqa: E731
    x = w["token_embd"][ids]
    T = len(ids)
    for L in range(LAYERS):
        p = lambda n: w[f"blk.{L}.{n}"]  # noqa: E731
        h = rms(x, p("attn_norm"))
        q = h @ p("attn_q").T + (p("attn_q_b") if bias else 0)
        k = h @ p("attn_k").T + (p("attn_k_b") if bias else 0)
        v = h @ p("attn_v").T + (p("attn_v_b") if bias else 0)
        q, k, v = rope_hf(q.reshape(T, HEADS, D)), rope_hf(k.reshape(T, KV_HEADS, D)), v.reshape(T, KV_HEADS, D)
        out = np.zeros((T, HEADS, D))
        for hd in range(HEADS):
            g = hd // (HEADS // KV_HEADS)
            for t in range(T):
                s = q[t, hd] @ k[: t + 1, g].T / math.sqrt(D)
                e = np.exp(s - s.max())
                out[t, hd] = (e / e.sum()) @ v[: t + 1, g]
        x = x + out.reshape(T, WIDTH) @ p("attn_output").T
        h = rms(x, p("ffn_norm"))
        gt = h @ p("ffn_gate").T
        x = x + (gt / (1 + np.exp(-gt)) * (h @ p("ffn_up").T)) @ p("ffn_down").T
    return rms(x, w["output_norm"]) @ w["output"].T


def llama_cpp_permute(w, heads):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute: HF rows -> adjacent-pair rope rows."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_model(path, arch, rng, bias=None, q4k_attn_output=False):
    """A tiny GGUF of `arch` and the float64 weights it holds (HF order), for reference_forward."""
    bias = arch == "qwen2" if bias is None else bias
    vocab = byte_vocab() + ["Ġt", "he", "Ġthe", "<|im_start|>", "<|im_end|>"]
    merges = ["Ġ t", "h e", "Ġt he"]
    types = [1] * (len(vocab) - 2) + [3, 3]
    w = {"token_embd": rng.standard_normal((len(vocab), WIDTH)) * 0.5,
         "output": rng.standard_normal((len(vocab), WIDTH)) * 0.1,
         "output_norm": 1 + 0.1 * rng.standard_normal(WIDTH)}
    shapes = {"attn_q": (WIDTH, WIDTH), "attn_k": (KV_HEADS * D, WIDTH), "attn_v": (KV_HEADS * D, WIDTH),
              "attn_output": (WIDTH, WIDTH), "ffn_gate": (FFN, WIDTH), "ffn_up": (FFN, WIDTH), "ffn_down": (WIDTH, FFN)}
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_block_count(LAYERS)
    writer.add_context_length(64)
    writer.add_embedding_length(WIDTH)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(BASE)
    writer.add_layer_norm_rms_eps(EPS)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2" if arch == "qwen2" else "smollm")
    writer.add_token_list(vocab)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    f32 = lambda name, a: writer.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    f32("token_embd.weight", w["token_embd"])
    f32("output.weight", w["output"])
    f32("output_norm.weight", w["output_norm"])
    for L in range(LAYERS):
        for n in ("attn_norm", "ffn_norm"):
            w[f"blk.{L}.{n}"] = (1 + 0.1 * rng.standard_normal(WIDTH)).astype(np.float32).astype(np.float64)
            f32(f"blk.{L}.{n}.weight", w[f"blk.{L}.{n}"])
        for n, shape in shapes.items():
            a = rng.standard_normal(shape) / math.sqrt(shape[1])
            if n == "attn_output" and q4k_attn_output:
                blocks = [q4k_block(rng)[0] for _ in range(shape[0] * shape[1] // 256)]
                raw = np.concatenate(blocks).reshape(shape[0], -1)
                writer.add_tensor(f"blk.{L}.{n}.weight", raw, raw_dtype=Q.Q4_K)
                w[f"blk.{L}.{n}"] = gguf.quants.dequantize(raw, Q.Q4_K).astype(np.float64)
                continue
            if n == "ffn_up":  # one Q8_0 tensor: the quantized values are what the model computes with
                raw = gguf.quants.quantize(a.astype(np.float32), Q.Q8_0)
                writer.add_tensor(f"blk.{L}.{n}.weight", raw, raw_dtype=Q.Q8_0)
                w[f"blk.{L}.{n}"] = gguf.quants.dequantize(raw, Q.Q8_0).astype(np.float64)
                continue
            a = a.astype(np.float32).astype(np.float64)
            w[f"blk.{L}.{n}"] = a
            stored = llama_cpp_permute(a, HEADS if n == "attn_q" else KV_HEADS) if (
                arch == "llama" and n in ("attn_q", "attn_k")) else a
            f32(f"blk.{L}.{n}.weight", stored)
        if bias:
            for n, size in (("attn_q", WIDTH), ("attn_k", KV_HEADS * D), ("attn_v", KV_HEADS * D)):
                # K's bias carries a large outlier channel, as Qwen2.5's does.
                b = 40.0 * (np.arange(size) % D == 5) + 0.1 * rng.standard_normal(size)
                w[f"blk.{L}.{n}_b"] = b.astype(np.float32).astype(np.float64)
                f32(f"blk.{L}.{n}.bias", w[f"blk.{L}.{n}_b"])
    for k in ("token_embd", "output", "output_norm"):
        w[k] = w[k].astype(np.float32).astype(np.float64)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return w


@pytest.fixture(scope="module")
def qwen2(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny-qwen2.gguf"
    return path, write_model(path, "qwen2", np.random.default_rng(1), q4k_attn_output=True)


def test_q4k_block_as_the_format_defines_it():
    raw, first = q4k_block(np.random.default_rng(7))
    got = gguf.quants.dequantize(raw[None], Q.Q4_K)[0]
    assert got.shape == (256,)
    np.testing.assert_allclose(got[:32], first, rtol=0, atol=1e-6)


def test_qwen2_reads_hyperparameters_and_biases(qwen2):
    path, w = qwen2
    m = gguf_forward.Model(path, architecture="qwen2")
    assert (m.architecture, m.layers, m.heads, m.kv_heads, m.head_dim, m.ffn) == ("qwen2", LAYERS, HEADS, KV_HEADS, D, FFN)
    assert m.rope_base == BASE and m.native_pairing == "hf" and not m.tied
    b = m.blocks[1]
    np.testing.assert_array_equal(b["attn_k_bias"].astype(np.float64), w["blk.1.attn_k_b"])
    np.testing.assert_array_equal(b["attn_q"].astype(np.float64), w["blk.1.attn_q"])  # qwen2: not permuted
    np.testing.assert_array_equal(b["attn_output"].astype(np.float64), w["blk.1.attn_output"])  # Q4_K, [out, in]
    np.testing.assert_array_equal(b["ffn_up"].astype(np.float64), w["blk.1.ffn_up"])  # Q8_0
    with pytest.raises(SystemExit, match="expected llama"):
        gguf_forward.Model(path, architecture="llama")


def test_qwen2_forward_matches_the_plain_reference(qwen2):
    path, w = qwen2
    m = gguf_forward.Model(path)
    ids = [3, 70, 256, 9, 9, 120, 44, 258, 1, 17, 200, 5]
    logits, cap = m.forward(ids, capture=(0,))
    ref = reference_forward(w, ids, bias=True)
    assert logits.shape == (len(ids), len(w["output"]))
    np.testing.assert_allclose(logits, ref, rtol=0, atol=1e-9 * np.abs(ref).max())
    # The K bias's outlier channel (5 of each KV head) survives into the captured K (rope mixes it with 5 + 32).
    k = cap[0][1]
    assert np.abs(k[0, :, 5]).min() > 5 * np.abs(k[0, :, 10:30]).max()
    wrong, _ = m.forward(ids, pairing="adjacent")
    assert np.abs(wrong - ref).max() > 1e-3 * np.abs(ref).max()


def test_llama_unpermutes_and_both_orders_agree(tmp_path):
    path = tmp_path / "tiny-llama.gguf"
    w = write_model(path, "llama", np.random.default_rng(2))
    ids = [40, 41, 42, 256, 7, 8, 99]
    hf = gguf_forward.Model(path, "hf", architecture="llama")
    ggml = gguf_forward.Model(path, "gguf", architecture="llama")
    assert "attn_q_bias" not in hf.blocks[0] and ggml.native_pairing == "adjacent"
    np.testing.assert_array_equal(hf.blocks[0]["attn_q"].astype(np.float64), w["blk.0.attn_q"])
    ref = reference_forward(w, ids, bias=False)
    lh, ch = hf.forward(ids, capture=(1,))
    lg, cg = ggml.forward(ids, capture=(1,))
    np.testing.assert_allclose(lh, ref, rtol=0, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(lg, ref, rtol=0, atol=1e-9 * np.abs(ref).max())
    hf_to_gguf = np.arange(D).reshape(2, -1).T.reshape(-1)
    np.testing.assert_allclose(ch[1][1][..., hf_to_gguf], cg[1][1], rtol=0, atol=1e-12)


def test_bias_presence_must_match_the_architecture(tmp_path):
    path = tmp_path / "qwen2-without-biases.gguf"
    write_model(path, "qwen2", np.random.default_rng(3), bias=False)
    with pytest.raises(SystemExit, match="attn_q.bias missing for qwen2"):
        gguf_forward.Model(path)


def test_qwen2_pre_tokenizer(qwen2):
    m = gguf_forward.Model(qwen2[0])
    ids = m.encode("the 2026 theme<|im_end|>")
    assert m.decode(ids) == "the 2026 theme<|im_end|>"
    pieces = [m.tokenizer.id_to_token(i) for i in ids]
    # Digits one by one (qwen2's \p{N}), " the" merged, the special token whole.
    assert pieces[:2] == ["t", "he"] and pieces.count("2") == 2 and "Ġthe" in pieces
    assert pieces[-1] == "<|im_end|>" and m.special["<|im_end|>"] == ids[-1]
