"""A float64 numpy forward pass of a llama- or qwen2-architecture GGUF file, with its tokenizer.

Shared by capture_smollm2.py (SmolLM2-135M, llama), capture_qwen.py (Qwen2.5-Coder-1.5B, qwen2),
compare_llamacpp.py and experiments/end_to_end/. The `gguf` package reads the file and
dequantizes the weights (Q4_0/Q4_1/Q8_0/Q4_K/Q6_K/F16/F32: whatever gguf.quants knows); the
tokenizer is the file's byte-level BPE (tokenizer.ggml.*), built with `tokenizers`.

The forward pass, in float64:
    x = embed[ids]
    per layer:  h = rmsnorm(x) * attn_norm
                q, k, v = h Wq^T + bq, h Wk^T + bk, h Wv^T + bv   (biases: qwen2 only)
                q, k = rope(q), rope(k)                         (base from the file, position t = 0, 1, ...)
                a_h = softmax(q_h k_g^T / sqrt(d) + causal mask) v_g,  g = h // (heads / kv_heads)   (GQA)
                x += concat(a) Wo^T
                h = rmsnorm(x) * ffn_norm;  x += (silu(h Wg^T) * h Wu^T) Wd^T
    logits = (rmsnorm(x) * output_norm) output^T               (output: token_embd where the file ties them)

Channel order of Q and K. The architectures differ in how llama.cpp stores Wq and Wk:
  llama  llama.cpp's converter permutes the rows of Wq and Wk within each head so that its rope
         (LLAMA_ROPE_TYPE_NORM) pairs adjacent channels (2i, 2i+1). channel_order "hf" undoes the
         permutation and pairs channel i with i + d/2 (Hugging Face's rotate_half), giving the original
         checkpoint's order; "gguf" keeps llama.cpp's order and pairs adjacent channels.
  qwen2  stored unpermuted: llama.cpp's rope for qwen2 is LLAMA_ROPE_TYPE_NEOX, which pairs i with i + d/2
         on the original order. Both channel orders are the original checkpoint's, with rotate_half.
Either way the pairing is frequency base^(-2i/d) for pair i, and pairing="adjacent" / "hf" can force the
wrong one (a check that the logits notice).

Weights are kept as the float32 that gguf.quants.dequantize returns (6 GB for a 1.5B model, half of float64)
and widened to float64 layer by layer as the pass uses them: exact, so the pass computes what it would with
float64 weights.
"""
import os

# BLAS on one thread: sums in a fixed order, so a rerun writes the same bytes. LOWBIT_BLAS_THREADS=N runs the
# pass's own parts on N threads instead (in_parallel: the linear layers' row blocks, exact_attention's blocks),
# each computed as on one thread; BLAS's own threads would spin against them.
THREADS = max(1, int(os.environ.get("LOWBIT_BLAS_THREADS", "1")))
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_var] = "1"

import hashlib  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

# Per architecture (general.architecture): whether Q, K, V have biases, whether llama.cpp's converter permuted
# Wq and Wk's rows for adjacent-pair rope, and the default system message of the chat template.
ARCHITECTURES = {
    "llama": {"qkv_bias": False, "rope_permuted": True},
    "qwen2": {"qkv_bias": True, "rope_permuted": False},
}

# tokenizer.ggml.pre -> the pre-tokenizer llama.cpp applies (llama-vocab.cpp), as `tokenizers` pieces.
QWEN2_REGEX = (r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = ("smollm", "qwen2")

CONTROL, USER_DEFINED = 3, 4  # llama.cpp's token types of <|im_start|>, <|endoftext|>, <tool_call>, ...


def in_parallel(function, items):
    """function(item) for every item, on THREADS threads (numpy's loops and BLAS release the GIL)."""
    if THREADS == 1:
        for item in items:
            function(item)
        return
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(function, items))  # list(): an item's exception raises here


def sha256_file(path, chunk=1 << 24):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def build_tokenizer(meta):
    """The GGUF's byte-level BPE as a `tokenizers` Tokenizer, and {special token: id}."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    pre = meta.get("tokenizer.ggml.pre")
    if meta["tokenizer.ggml.model"] != "gpt2" or pre not in PRE_TOKENIZERS:
        sys.exit(f"tokenizer {meta['tokenizer.ggml.model']}/{pre}: expected gpt2 with one of {PRE_TOKENIZERS}")
    tokens = meta["tokenizer.ggml.tokens"]
    merges = [tuple(m.split(" ")) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    if pre == "smollm":
        # llama.cpp's "smollm": every digit alone, then GPT-2's byte-level regex.
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    else:
        # llama.cpp's "qwen2": one regex (digits alone, letters with one leading non-letter, ...), then bytes.
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated"),
             pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    special = [t for t, kind in zip(tokens, meta["tokenizer.ggml.token_type"]) if kind in (CONTROL, USER_DEFINED)]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in special])
    return tok, {t: tokens.index(t) for t in special}


def unpermute(w, heads, head_dim):
    """llama.cpp's llama converter wrote HF row (j * d/2 + i) of each head at row (2 i + j); undo it."""
    return w.reshape(heads, head_dim // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)


def rope(x, base, pairing):
    """x [T, heads, d] at positions 0..T-1. 'hf': channel i with i + d/2; 'adjacent': 2i with 2i+1."""
    T, _, d = x.shape
    inv_freq = base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angle = np.arange(T, dtype=np.float64)[:, None] * inv_freq[None, :]
    cos, sin = np.cos(angle)[:, None, :], np.sin(angle)[:, None, :]
    if pairing == "hf":
        a, b = x[..., : d // 2], x[..., d // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = a * cos - b * sin, b * cos + a * sin
    return out


class Model:
    """A llama/qwen2 GGUF's hyperparameters, dequantized weights (float32, used as float64) and tokenizer.

    `progress`: print a line per layer of each forward pass to stderr (long passes).
    """

    BLOCK_WEIGHTS = ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up",
                     "ffn_down")

    def __init__(self, path, channel_order="hf", architecture=None, progress=False):
        import gguf

        reader = gguf.GGUFReader(str(path))
        meta = {name: field.contents() for name, field in reader.fields.items()}
        arch = meta["general.architecture"]
        if arch not in ARCHITECTURES or (architecture is not None and arch != architecture):
            want = architecture or " or ".join(ARCHITECTURES)
            sys.exit(f"{path}: architecture {arch!r}, expected {want}")
        self.architecture, self.spec = arch, ARCHITECTURES[arch]
        self.layers = meta[f"{arch}.block_count"]
        self.heads = meta[f"{arch}.attention.head_count"]
        self.kv_heads = meta[f"{arch}.attention.head_count_kv"]
        self.width = meta[f"{arch}.embedding_length"]
        self.ffn = meta[f"{arch}.feed_forward_length"]
        self.head_dim = self.width // self.heads
        self.rope_base = float(meta[f"{arch}.rope.freq_base"])
        self.eps = float(meta[f"{arch}.attention.layer_norm_rms_epsilon"])
        self.chat_template = meta.get("tokenizer.chat_template")
        self.channel_order = channel_order
        self.progress = progress
        if meta.get(f"{arch}.rope.dimension_count", self.head_dim) != self.head_dim:
            sys.exit(f"{path}: partial rope (dimension_count {meta[f'{arch}.rope.dimension_count']}) is not modelled")
        if self.heads % self.kv_heads:
            sys.exit(f"{path}: {self.heads} query heads are not a multiple of {self.kv_heads} KV heads")

        tensors = {t.name: t for t in reader.tensors}

        def weight(name):
            t = tensors[name]
            return np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)

        self.embed = weight("token_embd.weight")  # [vocab, width]
        self.tied = "output.weight" not in tensors
        self.output = self.embed if self.tied else weight("output.weight")
        self.output_norm = weight("output_norm.weight")
        self.blocks = []
        for layer in range(self.layers):
            b = {n: weight(f"blk.{layer}.{n}.weight") for n in self.BLOCK_WEIGHTS}
            for n in ("attn_q", "attn_k", "attn_v"):
                bias = f"blk.{layer}.{n}.bias"
                if (bias in tensors) != self.spec["qkv_bias"]:
                    sys.exit(f"{path}: {bias} {'missing' if self.spec['qkv_bias'] else 'present'} for {arch}")
                if bias in tensors:
                    b[n + "_bias"] = weight(bias)
            if channel_order == "hf" and self.spec["rope_permuted"]:
                b["attn_q"] = unpermute(b["attn_q"], self.heads, self.head_dim)
                b["attn_k"] = unpermute(b["attn_k"], self.kv_heads, self.head_dim)
                if "attn_q_bias" in b:
                    b["attn_q_bias"] = unpermute(b["attn_q_bias"][:, None], self.heads, self.head_dim)[:, 0]
                    b["attn_k_bias"] = unpermute(b["attn_k_bias"][:, None], self.kv_heads, self.head_dim)[:, 0]
            self.blocks.append(b)
        self.weight_types = sorted({t.tensor_type.name for t in reader.tensors})
        self.tokenizer, self.special = build_tokenizer(meta)

    @property
    def native_pairing(self):
        """The rope pairing that matches the stored channel order."""
        if self.channel_order == "hf" or not self.spec["rope_permuted"]:
            return "hf"
        return "adjacent"

    def encode(self, text):
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids):
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def rope(self, x, pairing):
        return rope(x, self.rope_base, pairing)

    def rms_norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    # Query rows per block of exact_attention: a [512, T] float64 block is 32 MB at 8K tokens, which stays in
    # cache through the elementwise steps where a whole [T, T] array (0.5 GB) streams through memory at each.
    ATTENTION_ROWS = 512

    def exact_attention(self, layer, q, k, v):
        """softmax(q k^T / sqrt(d) + causal mask) v in float64, per query head (KV head h // group).

        Blocked over query rows; each block computes, value for value, what the whole [T, T] score array's rows
        would (every step is per row or elementwise), so the bytes do not depend on the block size. Within a
        block of rows [r0, r1) the keys from r1 on are masked for every row: their scores are never computed,
        and their probabilities are the exact zeros exp(-inf) gives, so the row sums and p v still run over all
        T keys in the same order; the keys before r0 are masked for none, so the mask's -inf is added to the
        keys [r0, r1) alone (adding its zeros elsewhere could only turn a -0 score into +0, which exp maps to
        the same 1). The elementwise steps run in place, in one buffer per thread (fresh arrays cost more in
        page faults than the arithmetic); the blocks run in_parallel.
        """
        T, _, d = q.shape
        group = self.heads // self.kv_heads
        attn = np.empty((T, self.heads, d))
        rows = self.ATTENTION_ROWS
        diagonal_mask = np.triu(np.full((rows, rows), -np.inf), k=1)
        buffers = threading.local()

        def block(head, r0):
            r1 = min(T, r0 + rows)
            if not hasattr(buffers, "p"):
                buffers.p = np.empty((rows, T))
            p = buffers.p[: r1 - r0]
            p[:, r1:] = 0
            s = p[:, :r1]
            np.matmul(q[r0:r1, head], k[:r1, head // group].T, out=s)
            np.divide(s, math.sqrt(d), out=s)
            np.add(s[:, r0:], diagonal_mask[: r1 - r0, : r1 - r0], out=s[:, r0:])
            np.subtract(s, s.max(axis=-1, keepdims=True), out=s)
            np.exp(s, out=s)
            np.divide(p, p.sum(axis=-1, keepdims=True), out=p)
            attn[r0:r1, head] = p @ v[:, head // group]

        in_parallel(lambda b: block(*b), [(head, r0) for head in range(self.heads) for r0 in range(0, T, rows)])
        return attn

    @staticmethod
    def linear(h, b, name):
        """h W^T (+ bias) with the float32-stored weight widened to float64; its blocks of rows in_parallel."""
        w = b[name].astype(np.float64)
        y = np.empty((h.shape[0], w.shape[0]))
        rows = -(-h.shape[0] // THREADS)
        in_parallel(lambda r0: np.matmul(h[r0:r0 + rows], w.T, out=y[r0:r0 + rows]), range(0, h.shape[0], rows))
        if name + "_bias" in b:
            y += b[name + "_bias"].astype(np.float64)
        return y

    def forward(self, ids, capture=(), pairing=None, logits_for="all", attention=None):
        """Logits ([T, vocab], or [vocab] of the last token) and {layer: (q, k, v)} as [T, heads, d].

        attention(layer, q, k, v) -> [T, heads, d] replaces every layer's attention (default:
        exact_attention); q, k after rope, unscaled, [T, heads or kv_heads, d] float64.
        capture: the layers whose q, k, v to return; with logits_for="none" the pass stops after the last of them.
        """
        pairing = pairing or self.native_pairing
        attention = attention or self.exact_attention
        T, d = len(ids), self.head_dim
        x = self.embed[np.asarray(ids)].astype(np.float64)
        captured = {}
        start = time.monotonic()
        for layer, b in enumerate(self.blocks):
            h = self.rms_norm(x, b["attn_norm"].astype(np.float64))
            q = self.rope(self.linear(h, b, "attn_q").reshape(T, self.heads, d), pairing)
            k = self.rope(self.linear(h, b, "attn_k").reshape(T, self.kv_heads, d), pairing)
            v = self.linear(h, b, "attn_v").reshape(T, self.kv_heads, d)
            if layer in capture:
                captured[layer] = (q, k, v)
            attn = attention(layer, q, k, v)
            x = x + self.linear(attn.reshape(T, self.width), b, "attn_output")
            h = self.rms_norm(x, b["ffn_norm"].astype(np.float64))
            gate = self.linear(h, b, "ffn_gate")
            x = x + self.linear(gate / (1 + np.exp(-gate)) * self.linear(h, b, "ffn_up"), b, "ffn_down")
            if self.progress:
                print(f"forward: {T} tokens, layer {layer + 1}/{self.layers}, {time.monotonic() - start:.0f} s",
                      file=sys.stderr, flush=True)
            if capture and layer >= max(capture) and logits_for == "none":
                break
        if logits_for == "none":
            return None, captured
        x = self.rms_norm(x if logits_for == "all" else x[-1:], self.output_norm.astype(np.float64))
        logits = x @ self.output.astype(np.float64).T
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


def text_record(model, text_path, text, text_ids, ids):
    """capture.json's fields of the text: its name, SHA-256, tokens in all and captured, the first ones decoded."""
    return {"text": text_path.name, "text_sha256": hashlib.sha256(text.encode()).hexdigest(),
            "text_tokens": len(text_ids), "tokens": len(ids), "first_tokens": model.decode(ids[:16]),
            "bos_prepended": False}


def save(path, array, dtype):
    a = np.ascontiguousarray(array.astype(dtype))
    if not np.all(np.isfinite(a)):
        sys.exit(f"{path}: non-finite values after conversion to {dtype} (overflow?)")
    np.save(path, a, allow_pickle=False)


def verify(folder):
    """Check the files capture.json lists: SHA-256, .npy format 1.0, dtype, C order, shape."""
    import json

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
