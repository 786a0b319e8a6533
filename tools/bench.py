#!/usr/bin/env python3
"""`make bench`: handgrad's build/train against nanoGPT's training loop, side by side, in one session.

Each side is what its user runs. handgrad: `build/train` with a preset and no tuning flags (only
the run's length, its data and a scratch out_dir), its ms/iter read from log.csv. PyTorch:
tools/bench_torch.py, nanoGPT's model, optimizer and per-iteration loop, timed as nanoGPT times
an iteration, at nanoGPT's fastest thread setting for the recipe. The recipes are nanoGPT's own.

handgrad runs once per entry of HANDGRAD_SIDES: f32 with the defaults, and bf16 (--dtype=bfloat16)
when build/train accepts --dtype (its --help says so); a side it does not accept is left out. Two
more sides are handgrad's alone: each dtype with --attention=materialized, the attention that keeps
the T×T probabilities, in the same rounds, shown in a table of their own next to the default (flash)
step. Then the memory table: the activations of the baby GPT's training step at batch 64 and
T = 256, 1024, 4096 under each --attention and --recompute, as build/train's memory check counts
them (build/inspect --json, which prints that count; nothing is run).

This machine's speed drifts by tens of percent within minutes, so every recipe runs as
--runs rounds (the order flipped from round to round), and the result is the median of the
rounds' ratios. build/bench measures the ceilings in the same run (the best of several tries):
the best library product (2048³, each matmul backend) and the machine's peak (a loop of
independent FMAs on every thread, f32; bf16 dot products where the CPU has them), with each
recipe's step as a fraction of them and its floor: its FLOPs at the best library rate.

--unpinned runs both sides with OPENBLAS_CORETYPE removed from their environment (OpenBLAS then
picks its kernels for the CPU itself); only the benchmark's commands see that.

  /usr/bin/python3 tools/bench.py --runs 3 --data data/tinyshakespeare/input.txt [--only course] [--unpinned]
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("HANDGRAD_BIN", "build")


@dataclass
class Recipe:
    name: str
    label: str
    handgrad: list   # build/train's flags: a preset, and only what the recipe itself changes
    torch: dict      # tools/bench_torch.py's flags: the same recipe as nanoGPT runs it
    iters: int       # iterations per run, of which the first `warmup` are not timed
    warmup: int
    torch_threads: int  # nanoGPT's fastest thread setting for this recipe on this machine (0: PyTorch's default)

    def flops_per_iter(self):
        """Training FLOPs of one iteration: 3 × (2 per weight + 2·T·C twice per layer for attention) per token."""
        t = self.torch
        L, C, T, B, V = t["n_layer"], t["n_embd"], t["block_size"], t["batch_size"], t.get("vocab_size", 65)
        return 3 * (2 * (12 * L * C * C + C * V) + 4 * T * C * L) * B * T


# nanoGPT's recipes. The baby GPT is config/train_shakespeare_char.py; the course is its README's
# CPU run (that config with --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128
# --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0); GPT-2 small is train.py's default model
# on the same characters. nanoGPT's bias is train.py's default (False) unless a recipe sets it.
# PyTorch's threads are nanoGPT's fastest on this 2-core machine (docs/performance.md): its default
# (one thread here) for the course's small products, two for the larger models.
# PyTorch's iterations take a few to reach their pace (the baby GPT's first five fall from ~28 s to
# ~20 s), so those are left out of the timing.
BABY = dict(n_layer=6, n_head=6, n_embd=384, block_size=256, batch_size=64, learning_rate=1e-3, min_lr=1e-4,
            warmup_iters=100, lr_decay_iters=5000, beta2=0.99, bias=False)
RECIPES = [
    Recipe("course", "course: 4/4/128, T 64, B 12", ["--preset=course"],
           dict(n_layer=4, n_head=4, n_embd=128, block_size=64, batch_size=12, dropout=0.0, learning_rate=1e-3,
                min_lr=1e-4, warmup_iters=100, lr_decay_iters=2000, beta2=0.99, bias=False), 40, 10, 0),
    Recipe("baby", "baby GPT: 6/6/384, T 256, B 64, dropout 0.2", ["--preset=shakespeare-char"],
           dict(BABY, dropout=0.2), 8, 4, 2),
    Recipe("baby0", "baby GPT, dropout 0", ["--preset=shakespeare-char", "--dropout=0"],
           dict(BABY, dropout=0.0), 8, 4, 2),
    Recipe("gpt2", "GPT-2 small: 12/12/768, T 64, B 4", ["--preset=gpt2", "--batch_size=4", "--block_size=64"],
           dict(n_layer=12, n_head=12, n_embd=768, block_size=64, batch_size=4, dropout=0.0, learning_rate=6e-4,
                min_lr=6e-5, warmup_iters=2000, lr_decay_iters=600000, beta2=0.95, bias=False), 10, 4, 2),
]


# handgrad's columns: a name and the flags it adds to build/train's. A side is run when build/train
# --help lists its flags (or it adds none). The sides in MATERIALIZED are compared with handgrad's
# default step only (the attention table), not with nanoGPT's.
HANDGRAD_SIDES = [
    ("handgrad f32", []),
    ("handgrad bf16", ["--dtype=bfloat16"]),
    ("handgrad f32 materialized", ["--attention=materialized"]),
    ("handgrad bf16 materialized", ["--dtype=bfloat16", "--attention=materialized"]),
]
MATERIALIZED = {"handgrad f32 materialized": "handgrad f32", "handgrad bf16 materialized": "handgrad bf16"}
MEMORY_T = [256, 1024, 4096]

ENV = dict(os.environ)  # both sides' environment (--unpinned removes OPENBLAS_CORETYPE from it)


def sides_supported():
    helptext = subprocess.run([f"{BUILD}/train", "--help"], capture_output=True, text=True).stdout
    return [(name, flags) for name, flags in HANDGRAD_SIDES
            if all(f.split("=")[0] in helptext for f in flags)]


def run_measured(cmd, out_path):
    """Runs cmd with stdout and stderr to out_path; returns (exit status, peak RSS in MiB)."""
    with open(out_path, "w") as out:
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=ENV)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, usage.ru_maxrss / 1024


def fail(what, log_path):
    with open(log_path) as f:
        tail = f.read()[-2000:]
    sys.exit(f"error: {what} failed; the end of its output ({log_path}):\n{tail}")


def median(xs):
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def run_handgrad(r, data, scratch, extra):
    out_dir = os.path.join(scratch, f"hg-{r.name}")
    log = out_dir + ".log"
    shutil.rmtree(out_dir, ignore_errors=True)
    # Only the run's length and bookkeeping: a loss estimate of one batch at the start and the
    # end (their time is not in ms/iter), a log line per iteration.
    cmd = [f"{BUILD}/train", *r.handgrad, *extra, f"--max_iters={r.iters}", "--eval_interval=1000000", "--eval_iters=1",
           "--log_interval=1", "--always_save_checkpoint=false", f"--data={data}", f"--out_dir={out_dir}"]
    rc, rss = run_measured(cmd, log)
    if rc != 0:
        fail(" ".join(cmd), log)
    with open(os.path.join(out_dir, "log.csv")) as f:
        ms = [float(row["ms_per_iter"]) for row in csv.DictReader(f) if row["kind"] == "train"]
    with open(log) as f:
        text = f.read()
    model = re.search(r"^model: [^(]*\((.*)\)$", text, re.M)
    threads = re.search(r"^threads: (.*?), SIMD", text, re.M)
    matmul = re.search(r"^matmul: (\S+)", text, re.M)
    shutil.rmtree(out_dir, ignore_errors=True)
    return {"ms": median(ms[r.warmup:]), "rss": rss, "layout": model.group(1) if model else "?",
            "threads": threads.group(1) if threads else "?", "matmul": matmul.group(1) if matmul else "openblas"}


def run_torch(r, data, scratch, threads):
    threads = threads or r.torch_threads
    log = os.path.join(scratch, f"pt-{r.name}.log")
    cmd = [sys.executable, os.path.join(HERE, "bench_torch.py"), f"--data={data}",
           f"--cache={os.path.join(scratch, 'tokens')}", f"--iters={r.iters}", f"--warmup={r.warmup}", "--json"]
    cmd += [f"--{k}={v}" for k, v in r.torch.items()]
    if threads:
        cmd.append(f"--threads={threads}")
    rc, rss = run_measured(cmd, log)
    if rc != 0:
        fail(" ".join(cmd), log)
    with open(log) as f:
        j = json.loads(f.read().strip().splitlines()[-1])
    return {"ms": j["ms_median"], "rss": rss, "threads": j["torch_threads"],
            "layout": f"bias={j['bias']}, tied, dropout {r.torch.get('dropout', 0.0)}"}


def torch_version():
    cmd = [sys.executable, "-c", "import torch; print(torch.__version__)"]
    return subprocess.run(cmd, capture_output=True, text=True).stdout.strip() or "?"


def ceilings():
    """build/bench's ceilings on all threads, on a tiny model: the best library product (2048³) and
    each backend's, and the machine's peak (f32 FMAs; bf16 dot products, 0 without them)."""
    cmd = [f"{BUILD}/bench", "--preset=lesson14", "--batch_size=1", "--steps=1", "--warmup=0", "--json"]
    j = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True, env=ENV).stdout)
    return {"library": j["sgemm_ceiling_gflops"], "backends": j.get("library_gflops", {}),
            "peak": j.get("peak_f32_gflops", 0.0), "peak_bf16": j.get("peak_bf16_gflops", 0.0)}


def memory_table():
    """The baby GPT's activations at batch 64 for each T in MEMORY_T, per --attention and --recompute:
    build/inspect's training_memory, the memory check's count. Empty when inspect has none."""
    rows = []
    for T in MEMORY_T:
        cmd = [f"{BUILD}/inspect", "--preset=shakespeare-char", f"--block_size={T}", "--batch_size=64", "--json"]
        out = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        if out.returncode != 0:
            return []
        rows.append((T, json.loads(out.stdout).get("training_memory", [])))
    return rows if all(r for _, r in rows) else []


def main():
    ap = argparse.ArgumentParser(description="handgrad's build/train against nanoGPT's loop in PyTorch")
    ap.error = lambda msg: sys.exit(f"error: {msg}")  # one line, not the usage text
    ap.add_argument("--runs", type=int, default=int(os.environ.get("BENCH_RUNS", "3")),
                    help="pairs per recipe (default: $BENCH_RUNS, else 3)")
    ap.add_argument("--data", default="data/tinyshakespeare/input.txt")
    ap.add_argument("--only", nargs="*", default=[], help=f"recipes: {' '.join(r.name for r in RECIPES)}")
    ap.add_argument("--torch_threads", type=int, default=0, help="PyTorch's threads for every recipe (0: each recipe's own)")
    ap.add_argument("--unpinned", action="store_true",
                    help="run both sides without OPENBLAS_CORETYPE (this benchmark's commands only)")
    a = ap.parse_args()
    if a.unpinned:
        ENV.pop("OPENBLAS_CORETYPE", None)
    unknown = set(a.only) - {r.name for r in RECIPES}
    if unknown or a.runs < 1:
        ap.error(f"unknown recipe {sorted(unknown)}" if unknown else "--runs must be positive")
    if not os.path.exists(a.data):
        ap.error(f"{a.data} does not exist (make data)")
    recipes = [r for r in RECIPES if not a.only or r.name in a.only]

    scratch = tempfile.mkdtemp(prefix="handgrad-bench-")
    # handgrad's start-up choices (--batch_threads=auto, --matmul=auto) start from an empty cache,
    # as a new user's first run does, and are kept for the later rounds, as that user's later runs
    # keep them: a choice remembered from an earlier session (maybe a busy one) is not reused.
    ENV["HANDGRAD_CACHE_DIR"] = os.path.join(scratch, "startup-cache")
    sides = sides_supported()
    print(f"bench: {a.runs} rounds per recipe; sides: nanoGPT's loop, {', '.join(n for n, _ in sides)}; "
          f"OPENBLAS_CORETYPE={ENV.get('OPENBLAS_CORETYPE', '(unset)')}; load average {os.getloadavg()[0]:.2f} "
          f"at the start", flush=True)
    tries = [ceilings()]
    rows = []
    t_start = time.time()
    for r in recipes:
        rounds = []
        for i in range(a.runs):
            order = ["torch"] + [n for n, _ in sides]
            if i % 2:
                order.reverse()
            res = {}
            for side in order:
                res[side] = (run_torch(r, a.data, scratch, a.torch_threads) if side == "torch"
                             else run_handgrad(r, a.data, scratch, dict(sides)[side]))
            rounds.append(res)
            print(f"  {r.name} round {i + 1}: nanoGPT loop {res['torch']['ms']:.1f} ms" +
                  "".join(f", {n} {res[n]['ms']:.1f} ms ({res['torch']['ms'] / res[n]['ms']:.2f}×)" for n, _ in sides),
                  flush=True)
        tries.append(ceilings())
        rows.append((r, rounds))
    shutil.rmtree(scratch, ignore_errors=True)
    best = {k: max(t[k] for t in tries) for k in ("library", "peak", "peak_bf16")}
    backends = {}
    for t in tries:
        for name, g in t["backends"].items():
            backends[name] = max(backends.get(name, 0.0), g)

    print(f"\nceilings, best of {len(tries)} tries on all threads: machine peak {best['peak']:.0f} GFLOP/s f32"
          + (f", {best['peak_bf16']:.0f} bf16" if best["peak_bf16"] else " (no bf16 dot product on this CPU)")
          + f"; best library product {best['library']:.0f} GFLOP/s ("
          + ", ".join(f"{n} {g:.0f}" for n, g in backends.items()) + ")")
    print(f"load average {os.getloadavg()[0]:.2f} at the end; {(time.time() - t_start) / 60:.1f} min\n")
    print("nanoGPT's loop: tools/bench_torch.py, PyTorch " + torch_version() + "; handgrad: build/train, ms/iter from its log.csv\n")
    against_torch = [(n, f) for n, f in sides if n not in MATERIALIZED]
    head = "| recipe | nanoGPT's loop ms/iter |"
    rule = "|---|---:|"
    for n, _ in against_torch:
        head += f" {n} ms/iter | speed-up, median of {a.runs} (range) | GFLOP/s: % of peak, % of best library |"
        rule += "---:|---:|---:|"
    print(head + " floor at the best library rate | peak MiB nanoGPT / handgrad |")
    print(rule + "---:|---:|")
    for r, rounds in rows:
        pt = median([p["torch"]["ms"] for p in rounds])
        line = f"| {r.label} | {pt:.1f} |"
        for n, _ in against_torch:
            ratios = [p["torch"]["ms"] / p[n]["ms"] for p in rounds]
            hg = median([p[n]["ms"] for p in rounds])
            gflops = r.flops_per_iter() / (hg / 1000) / 1e9
            peak = best["peak_bf16"] if "bf16" in n and best["peak_bf16"] else best["peak"]
            line += (f" {hg:.1f} | {median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f}) "
                     f"| {gflops:.0f}: {100 * gflops / peak:.0f} %, {100 * gflops / best['library']:.0f} % |")
        floor = r.flops_per_iter() / (best["library"] * 1e9) * 1000
        rss_pt = max(p["torch"]["rss"] for p in rounds)
        rss_hg = max(p[sides[0][0]]["rss"] for p in rounds)
        print(line + f" {floor:.1f} ms | {rss_pt:.0f} / {rss_hg:.0f} ({rss_hg / rss_pt:.2f}×) |")
    print()
    compared = [(n, MATERIALIZED[n]) for n, _ in sides if n in MATERIALIZED and MATERIALIZED[n] in dict(sides)]
    if compared:
        print("handgrad's attention: the default (flash: one number a row kept) against --attention=materialized "
              "(the T×T probabilities kept), same rounds\n")
        print("| recipe |" + "".join(f" {d} ms/iter | {m} ms/iter | flash / materialized, median of {a.runs} (range) |"
                                     for m, d in compared))
        print("|---|" + "---:|---:|---:|" * len(compared))
        for r, rounds in rows:
            line = f"| {r.label} |"
            for m, d in compared:
                ratios = [p[d]["ms"] / p[m]["ms"] for p in rounds]
                line += (f" {median([p[d]['ms'] for p in rounds]):.1f} | {median([p[m]['ms'] for p in rounds]):.1f} "
                         f"| {median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f}) |")
            print(line)
        print()
    mem = memory_table()
    if mem:
        plans = [(p["attention"], p["recompute"]) for p in mem[0][1]]
        print("activations and backward scratch of the baby GPT's training step (batch 64, float32; bfloat16 in "
              "brackets), GiB, as build/train's memory check counts them\n")
        print("| T |" + "".join(f" --attention={a} --recompute={c} |" for a, c in plans))
        print("|---:|" + "---:|" * len(plans))
        def gib(cell, dtype):  # absent: more than any machine holds (memory_need refused it)
            return f"{cell[dtype]['activation_bytes'] / 2 ** 30:.2f}" if dtype in cell else "—"
        for T, cells in mem:
            print(f"| {T} |" + "".join(f" {gib(p, 'float32')} ({gib(p, 'bfloat16')}) |" for p in cells))
        print()
    for r, rounds in rows:
        t, h = rounds[0]["torch"], rounds[0][sides[0][0]]
        print(f"{r.name}: nanoGPT's loop {t['layout']}, {t['threads']} torch threads; "
              f"handgrad {' '.join(r.handgrad)}: {h['layout']}, threads {h['threads']}, matmul {h['matmul']}")

if __name__ == "__main__":
    main()
