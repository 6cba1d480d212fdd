#!/usr/bin/env python3
"""Write a copy of a GGUF whose token_embd rows that a text's tokens never read are zero (issue 36, part 3).

Why: real_scale_sweeps.sh needs SmolLM2-135M's GGUF (98 MB) on the GPU machine, and a call carries at
most 64 MiB, the repository included. The Q8_0 token embedding is 30 MB of it, but a capture of N
tokens of one text reads only the rows of that text's token ids (1,688 of 49,152 for the saltmarsh
text): the others, zeroed, make the file compress to about 63 MB with xz, two pieces of one call each.
The capture's forward pass never reads the output head (logits_for="none"), so the captured Q, K, V
are those of the whole file. Every other byte is the original's.

    trim_gguf.py GGUF TEXT OUT   (needs numpy, gguf and tokenizers; run from the repository root)

Prints a JSON record (the source's and the copy's SHA-256, the text, the rows kept) that
real_scale_sweeps.sh checks the joined copy against.
"""
import hashlib
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments" / "data"))
import capture_smollm2  # noqa: E402  (its Model: the file's tokenizer)

import numpy as np  # noqa: E402


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    source, text_path, out = (Path(a) for a in sys.argv[1:])
    model = capture_smollm2.Model(source, "hf")
    used = sorted(set(model.encode(text_path.read_text(encoding="utf-8"))))
    import gguf  # after capture_smollm2, which sets one BLAS thread before numpy's first import

    embedding = next(t for t in gguf.GGUFReader(str(source)).tensors if t.name == "token_embd.weight")
    rows = int(embedding.shape[-1])
    row_bytes = int(embedding.n_bytes) // rows
    if row_bytes * rows != int(embedding.n_bytes):
        sys.exit(f"{source}: token_embd.weight's {embedding.n_bytes} bytes are not {rows} whole rows")
    shutil.copyfile(source, out)
    data = np.memmap(out, dtype=np.uint8, mode="r+", offset=int(embedding.data_offset), shape=(rows, row_bytes))
    keep = np.zeros(rows, dtype=bool)
    keep[used] = True
    data[~keep] = 0  # Q8_0 blocks of zero scale and zero codes: rows of zeros
    data.flush()
    del data
    print(json.dumps({"source": source.name, "source_sha256": sha256(source), "trimmed_sha256": sha256(out),
                      "text": str(text_path), "token_embd_rows": rows, "rows_kept": len(used),
                      "what": "token_embd rows of ids the text does not use set to zero bytes"}, indent=1))


if __name__ == "__main__":
    main()
