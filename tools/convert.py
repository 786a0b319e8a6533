#!/usr/bin/env python3
"""convert.py — move weights between handgrad checkpoints and PyTorch / nanoGPT.

  convert.py to-handgrad out/ckpt.pt [--meta data/meta.pkl] -o ckpt.safetensors
      a nanoGPT checkpoint (torch.save of {'model': state_dict, 'model_args': {...}, ...}; the
      '_orig_mod.' prefix torch.compile adds is stripped) and its meta.pkl vocabulary ('itos';
      by default the meta.pkl beside ckpt.pt if there is one) -> a handgrad checkpoint
  convert.py to-pytorch ckpt.safetensors -o out/ckpt.pt
      a handgrad checkpoint -> a nanoGPT-format ckpt.pt whose 'model' entry is a state dict that
      nanoGPT's GPT (and tools/torch_gpt.py's) loads with load_state_dict(strict=True), plus
      meta.pkl (itos/stoi) beside it
  convert.py from-hf DIR|DIR/model.safetensors -o gpt2.safetensors
      a Hugging Face GPT-2 checkpoint (gpt2, gpt2-medium, gpt2-large, gpt2-xl: model.safetensors
      with its config.json) -> a handgrad checkpoint for the gpt2 tokenizer (tools/hf_gpt2.py says
      what is transposed, dropped and tied); needs numpy only
  convert.py make-hf --size gpt2-xl --out DIR [--n_layer 2 --head_size 4 --n_positions 64]
      a random-weight model in Hugging Face's exact layout and naming (config.json +
      model.safetensors), with that size's heads at reduced width and depth: what from-hf is
      tested on, since no real weights can be downloaded in the tests

What each side cannot say, and how it is carried:
  * nanoGPT's model_args has n_layer, n_head, n_embd, block_size, bias, vocab_size, dropout. The
    choices handgrad adds (bias_layout, tie_weights, pos_encoding, gelu, init) go into a separate
    'handgrad_config' entry (nanoGPT's GPTConfig(**model_args) would reject unknown keys), and
    the handgrad metadata strings ride along verbatim as 'handgrad_metadata', so handgrad ->
    PyTorch -> handgrad gives back the same file byte for byte (for a weights-only checkpoint:
    AdamW moments are dropped, nanoGPT's optimizer state has another layout).
  * Without 'handgrad_config' the file is plain nanoGPT: bias=True -> the gpt2 layout, False ->
    none; learned positions, erf GELU; tied when lm_head.weight is absent or equal to wte
    (nanoGPT ties by sharing the tensor, so its state_dict lists it under both names).
  * nanoGPT itself has no sinusoidal positions and no tanh GELU: such handgrad models convert
    (torch_gpt.GPT runs them) but nanoGPT's own GPT would load them wrongly; a warning says so.
  * RMSNorm, rotary positions, SwiGLU or ReLU², QK-norm and the logit soft cap are refused by
    to-pytorch (an error naming each): nanoGPT's GPT has none of them, and some (no wpe, SwiGLU's
    (2H, C) c_fc) would not even load. tools/torch_gpt.py reads such a handgrad checkpoint
    directly (torch_gpt.load_handgrad). init_zero_proj says only how training started.
  * Old nanoGPT checkpoints (no flash attention) carry the causal mask as a buffer named
    transformer.h.{i}.attn.bias of shape (1, 1, T, T); it is not a weight and is skipped.
"""
import argparse
import json
import os
import pickle
import sys
from collections import OrderedDict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_gpt2  # noqa: E402
import safetensors_io  # noqa: E402
# torch and torch_gpt are imported by the nanoGPT conversions only: from-hf and make-hf need numpy alone.

NANOGPT_ARGS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")
HANDGRAD_ONLY = ("bias_layout", "tie_weights", "pos_encoding", "gelu", "init", "norm", "mlp", "rope_base",
                 "qk_norm", "logit_softcap", "init_zero_proj")


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def config_json(c):
    """The config as lib/checkpoint/checkpoint.cpp config_to_json writes it (nlohmann: sorted keys, compact)."""
    keys = ("vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout", "bias", "qkv_bias",
            "bias_layout", "tie_weights", "pos_encoding", "gelu", "init", "norm", "mlp", "rope_base", "qk_norm",
            "logit_softcap", "init_zero_proj")
    return json.dumps({k: c[k] for k in sorted(keys)}, separators=(",", ":"), ensure_ascii=False)


def placeholder_vocab(V):
    """No meta.pkl (e.g. GPT-2's BPE): V distinct characters as stand-in tokens (handgrad's
    tokenizer is one character per token), the same as build/crosscheck's."""
    return [chr(33 + i) if i < 94 else chr(0x100 + i) for i in range(V)]


def to_handgrad(args):
    import torch
    import torch_gpt
    try:
        ck = torch.load(args.ckpt, map_location="cpu")
    except Exception as e:  # not a file torch.save wrote: one line, not a traceback
        die(f"{args.ckpt}: cannot read it as a PyTorch checkpoint: {e}")
    if not isinstance(ck, dict) or "model" not in ck or "model_args" not in ck:
        die(f"{args.ckpt}: not a nanoGPT checkpoint (no 'model' and 'model_args')")
    sd = OrderedDict()
    for k, v in ck["model"].items():
        sd[k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k] = v
    for k in [k for k in sd if k.endswith(".attn.bias") and sd[k].dim() == 4]:
        del sd[k]  # an old nanoGPT's causal-mask buffer, not a weight
    extra = ck.get("handgrad_config", {})
    config = dict({k: ck["model_args"][k] for k in NANOGPT_ARGS if k in ck["model_args"]}, **extra)
    if "tie_weights" not in extra:
        config["tie_weights"] = "lm_head.weight" not in sd or torch.equal(sd["lm_head.weight"],
                                                                          sd["transformer.wte.weight"])
    config["dropout"] = float(config.get("dropout", 0.0))
    c = torch_gpt.normalize_config(config)
    if c["tie_weights"] and "lm_head.weight" in sd:
        if not torch.equal(sd["lm_head.weight"], sd["transformer.wte.weight"]):
            die("the config ties lm_head to wte, but lm_head.weight differs from transformer.wte.weight")
        del sd["lm_head.weight"]
    names, standins = torch_gpt.parameter_names(c), torch_gpt.standin_names(c)
    unexpected = [k for k in sd if k not in names and k not in standins]
    missing = [k for k in list(names) + list(standins) if k not in sd]
    if missing or unexpected:
        die(f"state dict does not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for k in standins:
        if torch.count_nonzero(sd[k]) != 0:
            die(f"tensor '{k}' is not zero, but the '{c['bias_layout']}' layout has no such bias")
    tensors = [(k, sd[k].detach().float().numpy()) for k in names] + \
              [(k, sd[k].detach().float().numpy()) for k in standins]

    meta = ck.get("handgrad_metadata")
    if meta is None:
        meta_path = args.meta or os.path.join(os.path.dirname(os.path.abspath(args.ckpt)), "meta.pkl")
        if os.path.exists(meta_path):
            with open(meta_path, "rb") as f:
                itos = pickle.load(f)["itos"]
            vocab = [itos[i] for i in range(len(itos))]
        else:
            print(f"warning: no {meta_path}: placeholder characters stand in for the vocabulary", file=sys.stderr)
            vocab = placeholder_vocab(c["vocab_size"])
        if len(vocab) != c["vocab_size"]:
            die(f"the vocabulary has {len(vocab)} tokens but vocab_size is {c['vocab_size']}")
        best = ck.get("best_val_loss", 1e9)
        meta = {"config": config_json(c), "vocab": json.dumps(vocab, separators=(",", ":"), ensure_ascii=False),
                "iter_num": str(int(ck.get("iter_num", 0))), "best_val_loss": "%.17g" % float(best),
                "adam_step": "0", "rng_batch": "0", "train_config": "{}"}
    torch_gpt.write_safetensors(args.out, tensors, meta)
    print(f"wrote {args.out}: {c['bias_layout']} layout, {'tied' if c['tie_weights'] else 'untied'}, "
          f"{sum(t.size for _, t in tensors[:len(names)]):,} parameters")


def to_pytorch(args):
    import torch
    import torch_gpt
    try:
        model, vocab, meta = torch_gpt.load_handgrad(args.ckpt)
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        die(f"{args.ckpt}: not a handgrad checkpoint ({type(e).__name__}: {e})")
    c = model.config
    beyond = [what for what, used in (("RMSNorm", c["norm"] == "rmsnorm"), ("rotary positions", c["pos_encoding"] == "rope"),
                                      (f"the {c['mlp']} MLP", c["mlp"] != "gelu"), ("QK-norm", c["qk_norm"]),
                                      ("logit soft-capping", float(c["logit_softcap"]) > 0)) if used]
    if beyond:
        die(f"{args.ckpt}: nanoGPT's GPT cannot express {', '.join(beyond)}; not converted "
            "(tools/torch_gpt.py loads this checkpoint itself: torch_gpt.load_handgrad)")
    if c["pos_encoding"] != "learned" or c["gelu"] != "erf":
        print(f"warning: {c['pos_encoding']} positions / {c['gelu']} GELU: tools/torch_gpt.py runs this model, "
              "nanoGPT's own GPT (learned positions, erf GELU) would load it but compute something else",
              file=sys.stderr)
    sd = model.state_dict()  # nanoGPT's keys; a tied lm_head.weight shares wte's storage
    model_args = {k: c[k] for k in NANOGPT_ARGS}
    ck = {"model": sd, "model_args": model_args, "iter_num": int(meta.get("iter_num", 0)),
          "best_val_loss": float(meta.get("best_val_loss", 1e9)), "config": {},
          "handgrad_config": {k: c[k] for k in HANDGRAD_ONLY},
          "handgrad_metadata": {k: v for k, v in meta.items()}}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    torch.save(ck, args.out)
    meta_path = os.path.join(os.path.dirname(os.path.abspath(args.out)), "meta.pkl")
    with open(meta_path, "wb") as f:
        pickle.dump({"vocab_size": len(vocab), "itos": dict(enumerate(vocab)),
                     "stoi": {s: i for i, s in enumerate(vocab)}}, f)
    # What the file promises, checked: a fresh nanoGPT-layout GPT loads it strictly.
    fresh = torch_gpt.GPT(dict(model_args, **ck["handgrad_config"]))
    fresh.load_state_dict(torch.load(args.out, map_location="cpu")["model"], strict=True)
    print(f"wrote {args.out} and {meta_path}: {len(sd)} state_dict entries")


def handgrad_metadata(c, vocab, tokenizer):
    """The metadata of a fresh handgrad checkpoint (lib/checkpoint/checkpoint.h): nothing trained yet."""
    return {"config": config_json(c), "tokenizer": tokenizer,
            "vocab": json.dumps(vocab, separators=(",", ":"), ensure_ascii=False),
            "iter_num": "0", "best_val_loss": "%.17g" % 1e9, "adam_step": "0", "rng_batch": "0", "train_config": "{}"}


def parameter_names(c):
    """handgrad's tensor table for a gpt2-layout, tied, learned-position config (torch_gpt's
    parameter_names for that case, without importing torch)."""
    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    for i in range(c["n_layer"]):
        for part in ("ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"):
            names += [f"transformer.h.{i}.{part}.weight", f"transformer.h.{i}.{part}.bias"]
    return names + ["transformer.ln_f.weight", "transformer.ln_f.bias"]


def from_hf(args):
    try:
        cfg, sd = hf_gpt2.read_hf(args.src)
        c = hf_gpt2.handgrad_config(cfg)
        tensors = hf_gpt2.to_handgrad_tensors(c, sd, parameter_names(c))
    except hf_gpt2.HFError as e:
        die(f"{args.src}: {e}")
    safetensors_io.write_safetensors(args.out, tensors, handgrad_metadata(c, [], "gpt2"))
    print(f"wrote {args.out}: GPT-2 with {c['n_layer']} layers, {c['n_head']} heads, n_embd {c['n_embd']}, "
          f"context {c['block_size']}, GELU {c['gelu']}, {sum(t.size for _, t in tensors):,} parameters")


def make_hf(args):
    cfg = hf_gpt2.write_hf(args.out, args.size, args.n_layer, args.head_size, args.n_positions, args.seed,
                           prefix="transformer." if args.prefix else "", lm_head=args.lm_head)
    print(f"wrote {args.out}/config.json and model.safetensors: {args.size}'s {cfg['n_head']} heads, "
          f"n_embd {cfg['n_embd']}, {cfg['n_layer']} layers, context {cfg['n_positions']}, random weights")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("to-handgrad")
    h.add_argument("ckpt")
    h.add_argument("--meta", help="meta.pkl with 'itos' (default: beside the checkpoint)")
    h.add_argument("-o", "--out", required=True)
    p = sub.add_parser("to-pytorch")
    p.add_argument("ckpt")
    p.add_argument("-o", "--out", required=True)
    f = sub.add_parser("from-hf")
    f.add_argument("src", help="a directory with model.safetensors and config.json, or the model.safetensors")
    f.add_argument("-o", "--out", required=True)
    m = sub.add_parser("make-hf")
    m.add_argument("--size", required=True, choices=sorted(hf_gpt2.SIZES))
    m.add_argument("--out", required=True)
    m.add_argument("--n_layer", type=int, default=2)
    m.add_argument("--head_size", type=int, default=4, help="n_embd = n_head (the size's) x head_size")
    m.add_argument("--n_positions", type=int, default=64)
    m.add_argument("--seed", type=int, default=1337)
    m.add_argument("--prefix", action="store_true", help="names with 'transformer.' (as GPT2LMHeadModel saves them)")
    m.add_argument("--lm_head", action="store_true", help="store the tied lm_head.weight too")
    args = ap.parse_args()
    {"to-handgrad": to_handgrad, "to-pytorch": to_pytorch, "from-hf": from_hf, "make-hf": make_hf}[args.cmd](args)


if __name__ == "__main__":
    main()
