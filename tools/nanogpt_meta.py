#!/usr/bin/env python3
"""nanogpt_meta.py — a char-level nanoGPT data directory's vocabulary, both ways.

  nanogpt_meta.py DIR            DIR/meta.pkl (nanoGPT's {'vocab_size', 'itos', 'stoi'}) ->
                                 DIR/tokenizer.json, so build/train --data=DIR reads DIR/train.bin
                                 and DIR/val.bin with that vocabulary
  nanogpt_meta.py --to-pkl DIR   DIR/tokenizer.json (build/prepare --tokenizer=char --format=nanogpt
                                 writes one) -> DIR/meta.pkl, for nanoGPT's train.py and sample.py

nanoGPT numbers the characters of sorted(set(text)), in code-point order, as the char tokenizer
does, so the ids in train.bin mean the same characters on both sides. The standard library only.
"""
import argparse
import json
import os
import pickle
import sys


def to_json(d):
    with open(os.path.join(d, "meta.pkl"), "rb") as f:
        meta = pickle.load(f)
    itos = meta["itos"]
    vocab = [itos[i] for i in range(len(itos))]
    if meta.get("vocab_size", len(vocab)) != len(vocab) or any(len(c) != 1 for c in vocab):
        sys.exit("error: %s/meta.pkl: itos is not one character per id 0..vocab_size-1" % d)
    if vocab != sorted(vocab):
        sys.exit("error: %s/meta.pkl: the characters are not in code-point order (the char tokenizer's)" % d)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer": "char", "vocab": vocab}, f, ensure_ascii=False)
        f.write("\n")
    print("wrote %s/tokenizer.json: %d characters" % (d, len(vocab)))


def to_pkl(d):
    with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    if tok.get("tokenizer") != "char":
        sys.exit("error: %s/tokenizer.json: not a char tokenizer (GPT-2's ids need no meta.pkl)" % d)
    vocab = tok["vocab"]
    meta = {"vocab_size": len(vocab), "itos": dict(enumerate(vocab)), "stoi": {c: i for i, c in enumerate(vocab)}}
    with open(os.path.join(d, "meta.pkl"), "wb") as f:
        pickle.dump(meta, f)
    print("wrote %s/meta.pkl: %d characters" % (d, len(vocab)))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--to-pkl", action="store_true", help="tokenizer.json -> meta.pkl")
    a = ap.parse_args()
    (to_pkl if a.to_pkl else to_json)(a.dir)
