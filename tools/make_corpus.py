#!/usr/bin/env python3
"""make_corpus.py — a large text made from tiny Shakespeare, the same bytes on every run.

  make_corpus.py --mb 2000 --out corpus.txt [--src data/tinyshakespeare/input.txt] [--seed 1]

The source is cut into its speeches (paragraphs between blank lines); the output is copy after
copy of them, each copy in another order drawn from a seeded random.Random, until --mb million
bytes are written (the last copy cut at a speech). A corpus far larger than memory whose
characters are tiny Shakespeare's 65: what docs/data.md's measurement trains on.
"""
import argparse
import random

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--mb", type=float, required=True, help="size in millions of bytes")
ap.add_argument("--out", required=True)
ap.add_argument("--src", default="data/tinyshakespeare/input.txt")
ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()

with open(a.src, "rb") as f:
    speeches = [s + b"\n\n" for s in f.read().strip().split(b"\n\n")]
rng = random.Random(a.seed)
target = int(a.mb * 1e6)
written = 0
with open(a.out, "wb") as out:
    while written < target:
        order = list(range(len(speeches)))
        rng.shuffle(order)
        chunk = []
        for i in order:
            if written >= target:
                break
            chunk.append(speeches[i])
            written += len(speeches[i])
        out.write(b"".join(chunk))
print("wrote %s: %d bytes" % (a.out, written))
