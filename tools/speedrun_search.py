#!/usr/bin/env python3
"""speedrun_search.py — the search behind the `speedrun` preset: which recipe reaches the lowest
whole-val loss on tiny Shakespeare in a fixed time budget on this machine?

    make speedrun-search                          # the candidates below, 600 s each, table to stdout
    tools/speedrun_search.py --only base,wide192  # some of them
    tools/speedrun_search.py --budget 300 --jobs 2 --out table.md

How a candidate is scored, in two phases:
  1. speed (sequential, the machine to itself): `build/bench` times the candidate's training step
     on all cores, a model replica per core; the iterations that fit are 0.98 · budget / step time, the rule
     `train --time_budget` itself uses (lib/train/trainer.h, plan_time_budget).
  2. quality (in parallel, `--jobs` single-threaded runs): `build/train --max_iters=N` with the
     schedule laid over those N iterations, then `build/eval` over the whole val split.
Phase 2 counts iterations, not seconds, so its result does not depend on what else the machine
is doing: the runs can share it, and rerunning the search gives the same losses bit for bit
(one thread each). The winner is then confirmed for real, clock and all, by `make speedrun`.

Every candidate is a preset (--preset, PRESET below unless named) with some flags changed; the
table says what each bought against the first row.
"""
import argparse
import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time

BIN = os.environ.get("HANDGRAD_BIN", "build")
DATA = os.environ.get("HANDGRAD_DATA", "data/tinyshakespeare/input.txt")

# The base of every candidate: the GPT-2 block with AdamW, the recipe the search started from
# (the `speedrun` preset is now its winner, docs/speedrun.md).
PRESET = "speedrun-classic"
MODERN = {"norm": "rmsnorm", "pos": "rope", "mlp": "swiglu", "qk_norm": "true", "logit_softcap": 30}
# name, what it tries, flags over --preset=PRESET (model and training flags alike).
CANDIDATES = [
    ("base", "the preset as it stands (speedrun-classic unless --preset names another)", {}),
    ("cosine", "cosine decay to lr/10 (the preset before stage 4)", {"lr_decay": "cosine", "min_lr": 3e-4}),
    ("erf", "GELU, erf form (the search's stage 1 base: nanoGPT's best 10-minute shape)", {"gelu": "erf", "weight_decay": 0.1}),
    ("ctx256", "context 256, batch 8 (same tokens per step)", {"block_size": 256, "batch_size": 8}),
    ("batch8", "batch 8: twice the steps, half the tokens each", {"batch_size": 8}),
    ("batch24", "batch 24", {"batch_size": 24}),
    ("layers3", "3 layers: faster steps", {"n_layer": 3}),
    ("layers2", "2 layers", {"n_layer": 2}),
    ("lr2e-3", "learning rate 2e-3", {"learning_rate": 2e-3}),
    ("lr5e-3", "learning rate 5e-3", {"learning_rate": 5e-3}),
    ("minlr/100", "cosine down to lr/100 instead of lr/10", {"lr_decay": "cosine", "min_lr": 3e-5}),
    ("linear", "linear decay to lr/10 instead of the cosine", {"lr_decay": "linear", "min_lr": 3e-4}),
    ("wide192", "192 wide, 6 heads", {"n_embd": 192, "n_head": 6}),
    ("tied", "tied embedding and head", {"tie_weights": "true"}),
    ("dropout0.1", "dropout 0.1", {"dropout": 0.1}),
    ("wd0.3", "weight decay 0.3", {"weight_decay": 0.3}),
    ("wd1.0", "weight decay 1.0", {"weight_decay": 1.0}),
    ("heads2", "2 heads of 64 (fewer, larger attention products)", {"n_head": 2}),
    ("warmup50", "warmup 50 iterations", {"warmup_iters": 50}),
    ("beta2_0.95", "beta2 0.95", {"beta2": 0.95}),
    # Muon (lib/optim/muon.h) for the blocks' matrices, AdamW for the rest. Its shape rule gives its updates
    # AdamW's RMS, yet in 150-step runs (docs/speedrun.md) 2e-2 beat 1e-2 and 3e-3: the lrs reach past that.
    ("muon", "Muon at the AdamW lr (3e-3)", {"optimizer": "muon"}),
    ("muon_lr1e-2", "Muon, its lr 1e-2", {"optimizer": "muon", "muon_lr": 1e-2}),
    ("muon_lr2e-2", "Muon, its lr 2e-2", {"optimizer": "muon", "muon_lr": 2e-2}),
    ("muon_lr4e-2", "Muon, its lr 4e-2", {"optimizer": "muon", "muon_lr": 4e-2}),
    ("muon_mom0.9", "Muon lr 2e-2, momentum 0.9", {"optimizer": "muon", "muon_lr": 2e-2, "muon_momentum": 0.9}),
    ("muon_momwarm", "Muon lr 2e-2, momentum ramped from 0.85 over 300 steps",
     {"optimizer": "muon", "muon_lr": 2e-2, "muon_momentum_warmup": 300}),
    ("muon_wd0.1", "Muon lr 2e-2, weight decay 0.1", {"optimizer": "muon", "muon_lr": 2e-2, "weight_decay": 0.1}),
    # Today's block, one piece at a time (docs/modern-gpt.md), then together, then with Muon.
    ("rmsnorm", "RMSNorm instead of LayerNorm", {"norm": "rmsnorm"}),
    ("rope", "rotary positions instead of learned ones", {"pos": "rope"}),
    ("swiglu", "SwiGLU MLP instead of GELU", {"mlp": "swiglu"}),
    ("relu2", "ReLU² MLP instead of GELU", {"mlp": "relu2"}),
    ("qk_norm", "QK-norm", {"qk_norm": "true"}),
    ("softcap30", "logit soft cap 30", {"logit_softcap": 30}),
    ("zero_proj", "the blocks' two output projections start at zero", {"init_zero_proj": "true"}),
    ("modern", "rmsnorm + rope + swiglu + qk_norm + softcap 30", MODERN),
    ("modern_muon", "modern, Muon lr 2e-2", {**MODERN, "optimizer": "muon", "muon_lr": 2e-2}),
    ("modern_muon_lr1e-2", "modern, Muon lr 1e-2", {**MODERN, "optimizer": "muon", "muon_lr": 1e-2}),
    ("lean_muon", "rmsnorm + rope + relu2 + qk_norm (the pieces that won alone), Muon lr 2e-2",
     {"norm": "rmsnorm", "pos": "rope", "mlp": "relu2", "qk_norm": "true", "optimizer": "muon", "muon_lr": 2e-2}),
    # Larger models for bf16's faster step (over --preset=speedrun-float32 with --over
    # dtype=bfloat16,optimizer=muon, docs/speedrun.md): at ~18,000 steps its 0.82 M parameters see
    # the 1 M training characters 37 times and fit them more than the val text.
    ("wide192_drop0.1", "192 wide, 6 heads, dropout 0.1", {"n_embd": 192, "n_head": 6, "dropout": 0.1}),
    ("wide192_drop0.05", "192 wide, 6 heads, dropout 0.05", {"n_embd": 192, "n_head": 6, "dropout": 0.05}),
    ("wide192_drop0.2", "192 wide, 6 heads, dropout 0.2", {"n_embd": 192, "n_head": 6, "dropout": 0.2}),
    ("wide160_drop0.1", "160 wide, 5 heads, dropout 0.1", {"n_embd": 160, "n_head": 5, "dropout": 0.1}),
    ("wide256_drop0.2", "256 wide, 4 heads of 64, dropout 0.2", {"n_embd": 256, "n_head": 4, "dropout": 0.2}),
    ("layers6_wide192_drop0.1", "6 layers, 192 wide, 6 heads, dropout 0.1",
     {"n_layer": 6, "n_embd": 192, "n_head": 6, "dropout": 0.1}),
    ("layers6_wide192_drop0.05", "6 layers, 192 wide, 6 heads, dropout 0.05",
     {"n_layer": 6, "n_embd": 192, "n_head": 6, "dropout": 0.05}),
    ("wide192_drop0.05_muon2e-2", "192 wide, 6 heads, dropout 0.05, Muon's lr 2e-2",
     {"n_embd": 192, "n_head": 6, "dropout": 0.05, "muon_lr": 2e-2}),
    # Weight decay with Muon (over --preset=speedrun, whose 0.3 came from the AdamW-only search):
    # one --weight_decay scales both optimizers' decay (lr · wd a step).
    ("wd0.1", "weight decay 0.1", {"weight_decay": 0.1}),
    # Muon's lr below the preset's 1e-2 (over --preset=speedrun: 2e-2 lost to 1e-2 there).
    ("muon7e-3", "Muon's lr 7e-3", {"muon_lr": 7e-3}),
    ("muon5e-3", "Muon's lr 5e-3", {"muon_lr": 5e-3}),
    # The MLP and the projections' init over --preset=speedrun (both won alone in the AdamW-only search).
    ("speedrun_relu2", "ReLU² MLP instead of SwiGLU (a faster step)", {"mlp": "relu2"}),
    ("speedrun_zero_proj", "the blocks' two output projections start at zero", {"init_zero_proj": "true"}),
    # Muon's momentum ramp, the soft cap and the decay's shape over --preset=speedrun.
    ("momwarm300", "Muon's momentum ramped from 0.85 over 300 steps", {"muon_momentum_warmup": 300}),
    ("softcap15", "logit soft cap 15 (30)", {"logit_softcap": 15}),
    # Warmup, stable, then a 1 - sqrt cooldown over the last 0.2 of the run (the preset: a straight line).
    ("wsd0.2", "wsd, cooling down over the last 0.2", {"lr_decay": "wsd", "cooldown_frac": 0.2}),
]

# Training flags that change the step's time: the batch, the optimizer (Muon's Newton–Schulz), the dtype.
STEP_FLAGS = {"batch_size", "optimizer", "dtype"}
MODEL_FLAGS = {"n_layer", "n_head", "n_embd", "block_size", "dropout", "gelu", "tie_weights", "bias_layout", "pos",
               "init", "bias", "norm", "mlp", "qk_norm", "logit_softcap", "init_zero_proj"}


def flag_list(flags):
    return [f"--{k}={v}" for k, v in flags.items()]


def step_ms(flags, threads):
    """Median ms per training step on `threads` threads (a replica of the model per thread, as
    `--batch_threads=auto` trains the preset on this machine), from build/bench."""
    bench_flags = {k: v for k, v in flags.items() if k in MODEL_FLAGS or k in STEP_FLAGS}
    cmd = [f"{BIN}/bench", f"--preset={PRESET}", "--json", "--steps=20", f"--threads={threads}",
           f"--batch_threads={threads}"] + flag_list(bench_flags)
    if "batch_size" not in bench_flags:
        cmd.append("--batch_size=16")  # the preset's training batch (bench's default is the course's 12)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["ms_median"]


def train_and_eval(name, flags, iters, out_root):
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    cmd = [f"{BIN}/train", f"--preset={PRESET}", f"--data={DATA}", f"--out_dir={out_dir}", "--time_budget=0",
           f"--max_iters={iters}", "--eval_interval=1000000", "--eval_iters=5", "--log_interval=500",
           "--threads=1", "--batch_threads=1"] + flag_list(flags)
    with open(os.path.join(out_dir, "train.log"), "w") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, env=env)
    ev = subprocess.run([f"{BIN}/eval", f"--ckpt={out_dir}/ckpt.safetensors", f"--data={DATA}", "--split=val",
                         "--json", "--threads=1"], check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(ev)["loss"]


def main():
    global PRESET
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=600, help="seconds of training per candidate")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for the speed phase")
    ap.add_argument("--jobs", type=int, default=os.cpu_count(), help="single-threaded training runs at once")
    ap.add_argument("--only", default="", help="comma-separated candidate names")
    ap.add_argument("--iters", type=int, default=0, help="skip phase 1: every candidate trains this many iterations "
                    "(for candidates that change only the training recipe, e.g. the iterations `make speedrun` planned)")
    ap.add_argument("--over", default="", help="flags under every candidate's own, e.g. n_layer=3,learning_rate=5e-3 "
                    "(a later stage of the search, from the earlier stage's winner)")
    ap.add_argument("--preset", default=PRESET, help="the preset every candidate starts from (the tables in "
                    "docs/speedrun.md name theirs)")
    ap.add_argument("--out_root", default="out-speedrun-search")
    ap.add_argument("--out", default="", help="also write the table (markdown) here")
    args = ap.parse_args()
    PRESET = args.preset

    over = dict(kv.split("=", 1) for kv in args.over.split(",") if kv)
    chosen = [(name, what, {**over, **flags}) for name, what, flags in CANDIDATES
              if not args.only or name in args.only.split(",")]
    if not chosen:
        sys.exit(f"error: no candidate named in --only={args.only}")
    # Candidates that differ only in training flags share one timing: the step is the same, and
    # timing it twice would hand them different iteration counts through timing noise alone.
    speed, timed = {}, {}
    if args.iters:
        print(f"phase 1 skipped: {args.iters} iterations each", file=sys.stderr)
    else:
        print(f"phase 1: step times on {args.threads} threads", file=sys.stderr)
    for name, _, flags in chosen:
        if args.iters:
            speed[name] = 0.98 * args.budget * 1000 / args.iters  # the step time those iterations imply
            continue
        shape = tuple(sorted((k, str(v)) for k, v in flags.items() if k in MODEL_FLAGS or k in STEP_FLAGS))
        if shape not in timed:
            timed[shape] = step_ms(flags, args.threads)
        speed[name] = timed[shape]
        print(f"  {name}: {speed[name]:.1f} ms/step", file=sys.stderr)
    iters = {name: args.iters or int(0.98 * args.budget * 1000 / speed[name]) for name, _, _ in chosen}

    print(f"phase 2: training, {args.jobs} at a time", file=sys.stderr)
    t0 = time.time()
    with cf.ThreadPoolExecutor(args.jobs) as pool:
        futures = {name: pool.submit(train_and_eval, name, flags, iters[name], args.out_root)
                   for name, _, flags in chosen}
        loss = {}
        for name, _, _ in chosen:
            loss[name] = futures[name].result()
            print(f"  {name}: {iters[name]} iters, whole-val loss {loss[name]:.4f} ({time.time() - t0:.0f} s)",
                  file=sys.stderr)
            table_of(chosen, speed, iters, loss, args)

    print(table_of(chosen, speed, iters, loss, args))


def table_of(chosen, speed, iters, loss, args):
    """The markdown table of the candidates done so far (also written to --out as each ends)."""
    ref = loss.get(chosen[0][0])
    base = f"; every candidate over {args.over}" if args.over else ""
    lines = [f"Budget {args.budget:.0f} s of training per candidate; step times on {args.threads} threads{base}.", "",
             "| candidate | what it tries | ms/step | iterations | whole-val loss | vs first |",
             "|---|---|---:|---:|---:|---:|"]
    for name, what, _ in chosen:
        if name in loss:
            vs = f"{loss[name] - ref:+.4f}" if ref is not None else ""
            lines.append(f"| {name} | {what} | {speed[name]:.1f} | {iters[name]} | {loss[name]:.4f} | {vs} |")
    table = "\n".join(lines)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(table + "\n")
    return table

if __name__ == "__main__":
    main()
