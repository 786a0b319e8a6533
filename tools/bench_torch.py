#!/usr/bin/env python3
"""The PyTorch side of `make bench`: the training iteration a nanoGPT user runs on a CPU.

Not a lean PyTorch step but nanoGPT's own work, iteration for iteration, so that a ratio against
it is the speed-up that user would see:

  model      nanoGPT's GPT: token + learned position embeddings, pre-LayerNorm blocks whose
             attention is the explicit softmax(q kᵀ / √hs) with a registered causal-mask buffer
             (what nanoGPT runs when PyTorch, as 1.13, has no scaled_dot_product_attention),
             GELU (erf) MLP of 4·C, dropout at its four sites, lm_head sharing wte's weight,
             biases in every Linear and LayerNorm or in none (--bias, nanoGPT's default False);
             N(0, 0.02) init, the residual projections at 0.02 / √(2·n_layer)
  optimizer  AdamW (not fused: that is CUDA-only) with two groups, weight decay on every
             parameter of two or more dimensions and none on the rest
  iteration  the learning rate of the warmup-then-cosine schedule; per micro-step a forward,
             the next batch drawn, a backward of loss / gradient_accumulation_steps; gradient
             norm clipped at --grad_clip; step; gradients set to None
  batches    B random windows of a uint16 token file, read through a numpy memmap opened
             afresh for every batch, starts drawn with torch.randint from the global generator
  timing     the wall clock from the end of one iteration to the end of the next, batch
             drawing and all, as nanoGPT prints `time … ms` for each iteration

The random streams follow nanoGPT's order too (seed 1337; the model's construction and init;
the first batch; an optional loss estimate of --eval_iters batches per split at iteration 0;
then per micro-step: forward with its dropout masks, next batch), so with the same data,
flags and threads the per-iteration losses are nanoGPT's.

The token files are made here from a text file: its sorted distinct characters are the
vocabulary, the first 90 % of the text is train, the rest val (written once, under --cache).

  /usr/bin/python3 tools/bench_torch.py --data data/tinyshakespeare/input.txt \\
      --n_layer 4 --n_head 4 --n_embd 128 --block_size 64 --batch_size 12 --iters 30 --log
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_gpt import LayerNorm  # weight, and a bias or none; eps 1e-5, as nanoGPT's


# ----------------------------------------------------------------------------------------------
# The model

class Attention(nn.Module):
    """Causal multi-head self-attention, written out: the path PyTorch 1.13 takes."""

    def __init__(self, cfg):
        super().__init__()
        C, T = cfg.n_embd, cfg.block_size
        self.c_attn = nn.Linear(C, 3 * C, bias=cfg.bias)  # q, k, v for every head at once
        self.c_proj = nn.Linear(C, C, bias=cfg.bias)
        self.attn_dropout = nn.Dropout(cfg.dropout)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head = cfg.n_head
        # 1 on and below the diagonal; a buffer sliced to (T, T) and compared with 0 every forward.
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):  # x: (B, T, C)
        B, T, C = x.shape
        hs = C // self.n_head
        heads = [z.view(B, T, self.n_head, hs).transpose(1, 2) for z in self.c_attn(x).split(C, dim=2)]
        q, k, v = heads  # each (B, NH, T, hs)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, NH, T, T)
        scores = scores.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        probs = self.attn_dropout(F.softmax(scores, dim=-1))
        y = (probs @ v).transpose(1, 2).contiguous().view(B, T, C)  # heads side by side again
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd, cfg.bias)
        self.attn = Attention(cfg)
        self.ln_2 = LayerNorm(cfg.n_embd, cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Built in nanoGPT's module order, so its constructors and its init draw the same numbers
    from the seeded generator (and its parameters have nanoGPT's names)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            drop=nn.Dropout(cfg.dropout),
            h=nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer)),
            ln_f=LayerNorm(cfg.n_embd, cfg.bias),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # one matrix: embedding and unembedding
        # Every Linear and Embedding in module order (the shared matrix twice, as wte and as
        # lm_head): N(0, 0.02), biases 0. Then each block's two residual projections again,
        # narrower, so the residual stream's variance does not grow with depth.
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for block in self.transformer.h:
            for proj in (block.attn.c_proj, block.mlp.c_proj):
                nn.init.normal_(proj.weight, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def forward(self, idx, targets):  # idx, targets: (B, T) int64
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T, dtype=torch.long))
        x = self.transformer.drop(x)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)


def make_optimizer(model, a):
    """AdamW with weight decay on matrices and embeddings (dim >= 2) only; unfused on a CPU."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=a.learning_rate, betas=(a.beta1, a.beta2))


def lr_at(it, a):
    """Linear warmup over warmup_iters, cosine down to min_lr at lr_decay_iters, then min_lr."""
    if it < a.warmup_iters:
        return a.learning_rate * (it + 1) / (a.warmup_iters + 1)
    if it > a.lr_decay_iters:
        return a.min_lr
    progress = (it - a.warmup_iters) / (a.lr_decay_iters - a.warmup_iters)
    return a.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (a.learning_rate - a.min_lr)


# ----------------------------------------------------------------------------------------------
# Data

def token_files(text_path, cache):
    """(train.bin, val.bin, vocabulary size) for a text file: character ids as uint16."""
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    paths = [os.path.join(cache, name) for name in ("train.bin", "val.bin")]
    if not all(os.path.exists(p) for p in paths):
        os.makedirs(cache, exist_ok=True)
        code = {ch: i for i, ch in enumerate(chars)}
        ids = np.array([code[ch] for ch in text], dtype=np.uint16)
        cut = int(len(text) * 0.9)
        for p, part in zip(paths, (ids[:cut], ids[cut:])):
            part.tofile(p + ".tmp")
            os.replace(p + ".tmp", p)
    return paths[0], paths[1], len(chars)


def draw_batch(path, B, T):
    """B windows of T + 1 tokens at random starts: inputs are the first T, targets the last T."""
    tokens = np.memmap(path, dtype=np.uint16, mode="r")  # opened again for every batch
    starts = torch.randint(len(tokens) - T, (B,))
    rows = torch.stack([torch.from_numpy(tokens[s:s + T + 1].astype(np.int64)) for s in starts])
    return rows[:, :T].contiguous(), rows[:, 1:].contiguous()


# ----------------------------------------------------------------------------------------------
# The run

def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def parse_bool(s):
    if s.lower() in ("true", "1"):
        return True
    if s.lower() in ("false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected True or False, got '{s}'")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.error = lambda msg: sys.exit(f"error: {msg}")  # one line, not the usage text
    add = ap.add_argument
    add("--data", default="data/tinyshakespeare/input.txt", help="a UTF-8 text file")
    add("--cache", default="build/bench-data", help="where train.bin and val.bin are written")
    add("--n_layer", type=int, default=4)
    add("--n_head", type=int, default=4)
    add("--n_embd", type=int, default=128)
    add("--block_size", type=int, default=64)
    add("--vocab_size", type=int, default=0, help="default: the text's distinct characters")
    add("--bias", type=parse_bool, default=False, help="True: biases in every Linear and LayerNorm")
    add("--dropout", type=float, default=0.0)
    add("--batch_size", type=int, default=12)
    add("--gradient_accumulation_steps", type=int, default=1)
    add("--learning_rate", type=float, default=1e-3)
    add("--min_lr", type=float, default=1e-4)
    add("--warmup_iters", type=int, default=100)
    add("--lr_decay_iters", type=int, default=2000)
    add("--beta1", type=float, default=0.9)
    add("--beta2", type=float, default=0.99)
    add("--weight_decay", type=float, default=0.1)
    add("--grad_clip", type=float, default=1.0, help="0 disables")
    add("--seed", type=int, default=1337)
    add("--eval_iters", type=int, default=0, help="batches per split of a loss estimate at iteration 0")
    add("--iters", type=int, default=20, help="iterations run")
    add("--warmup", type=int, default=2, help="first iterations left out of the timing")
    add("--threads", type=int, default=0, help="torch.set_num_threads; 0: PyTorch's default")
    add("--log", action="store_true", help="a line per iteration: loss and time")
    add("--json", action="store_true", help="one JSON object")
    a = ap.parse_args(argv)
    if not os.path.isfile(a.data):
        ap.error(f"{a.data}: no such file")
    if a.iters <= a.warmup or a.warmup < 0:
        ap.error("--iters must exceed --warmup (>= 0)")
    for name in ("n_layer", "n_head", "n_embd", "block_size", "batch_size", "gradient_accumulation_steps"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be positive")
    if a.n_embd % a.n_head:
        ap.error(f"--n_embd ({a.n_embd}) must be divisible by --n_head ({a.n_head})")
    if not 0 <= a.dropout < 1:
        ap.error("--dropout must be in [0, 1)")
    return a


@torch.no_grad()
def estimate_loss(model, splits, a):
    model.eval()
    out = [sum(model(*draw_batch(p, a.batch_size, a.block_size)).item() for _ in range(a.eval_iters)) / a.eval_iters
           for p in splits]
    model.train()
    return out


def run(a):
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train_bin, val_bin, V = token_files(a.data, a.cache)
    if a.vocab_size and a.vocab_size < V:
        raise SystemExit(f"error: --vocab_size={a.vocab_size} but {a.data} has {V} distinct characters")
    cfg = argparse.Namespace(vocab_size=a.vocab_size or V, block_size=a.block_size, n_layer=a.n_layer,
                             n_head=a.n_head, n_embd=a.n_embd, dropout=a.dropout, bias=a.bias)
    model = GPT(cfg)
    opt = make_optimizer(model, a)
    K, B, T = a.gradient_accumulation_steps, a.batch_size, a.block_size

    x, y = draw_batch(train_bin, B, T)
    times, losses = [], []
    t_end = time.time()
    for it in range(a.iters):
        for group in opt.param_groups:
            group["lr"] = lr_at(it, a)
        if it == 0 and a.eval_iters:
            tr, va = estimate_loss(model, (train_bin, val_bin), a)
            if a.log:
                print(f"step 0: train loss {tr:.4f}, val loss {va:.4f}", flush=True)
        for _ in range(K):
            loss = model(x, y) / K
            x, y = draw_batch(train_bin, B, T)  # the next micro-step's batch, as nanoGPT draws it
            loss.backward()
        if a.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        t = time.time()
        times.append(1000 * (t - t_end))
        t_end = t
        losses.append(loss.item() * K)
        if a.log:
            print(f"iter {it}: loss {losses[-1]:.4f}, time {times[-1]:.2f}ms", flush=True)

    timed = sorted(times[a.warmup:])
    return {"ms_median": timed[len(timed) // 2], "ms_min": timed[0], "ms_max": timed[-1], "ms_all": times,
            "losses": losses, "peak_rss_mib": peak_rss_mib(), "torch_threads": torch.get_num_threads(),
            "parameters": sum(p.numel() for p in model.parameters()), "bias": a.bias, "vocab_size": cfg.vocab_size}


def main():
    a = parse_args(sys.argv[1:])
    r = run(a)
    if a.json:
        print(json.dumps(r))
    else:
        print(f"PyTorch {torch.__version__} (nanoGPT's loop), {r['torch_threads']} torch threads: "
              f"{r['ms_median']:.1f} ms/iter median of {a.iters - a.warmup} (min {r['ms_min']:.1f}, "
              f"max {r['ms_max']:.1f}); peak RSS {r['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
