#!/usr/bin/env python3
"""The baby GPT's training step at 1, 2, 4, ... threads, up to the cores present, f32 and bf16.

For each thread count t, build/train runs a few iterations with --threads=t (its defaults
otherwise: the matmul backend and the batch threads chosen at start-up for that count) and the
median ms per iteration of the timed iterations is read from the run's log.csv. Parallel
efficiency is the one-thread time over t times the t-thread time: 100 % is perfect scaling.
Runs alternate over the thread counts, so a machine whose speed drifts slows them alike.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile


def thread_counts(cores):
    counts, t = [], 1
    while t < cores:
        counts.append(t)
        t *= 2
    return counts + [cores]


def step_ms(binary, data, threads, dtype, iters, extra):
    with tempfile.TemporaryDirectory() as out:
        cmd = [binary, "--preset=shakespeare-char", f"--threads={threads}", f"--dtype={dtype}",
               f"--max_iters={iters}", "--eval_interval=100000", "--eval_iters=1", "--log_interval=1",
               f"--data={data}", f"--out_dir={out}"] + extra
        run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} failed: {run.stderr.strip().splitlines()[-1:]}")
        with open(os.path.join(out, "log.csv")) as f:
            rows = [r for r in csv.DictReader(f) if r["kind"] == "train" and int(r["iter"]) >= 2]
        return statistics.median(float(r["ms_per_iter"]) for r in rows)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default=os.path.join(os.environ.get("HANDGRAD_BIN", "build"), "train"))
    p.add_argument("--data", default="data/tinyshakespeare/input.txt")
    p.add_argument("--cores", type=int, default=os.cpu_count())
    p.add_argument("--iters", type=int, default=8, help="iterations a run (the first two are not timed)")
    p.add_argument("--runs", type=int, default=2, help="runs per thread count, alternated")
    p.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    p.add_argument("extra", nargs="*", help="more flags for build/train")
    a = p.parse_args()
    counts = thread_counts(a.cores)
    for dtype in a.dtypes:
        ms = {t: [] for t in counts}
        for _ in range(a.runs):
            for t in counts:
                ms[t].append(step_ms(a.bin, a.data, t, dtype, a.iters, a.extra))
        base = statistics.median(ms[1])
        print(f"baby GPT, {dtype}: {a.cores} cores present")
        print(f"{'threads':>7} {'ms/step':>9} {'speed-up':>8} {'efficiency':>10}")
        for t in counts:
            m = statistics.median(ms[t])
            print(f"{t:>7} {m:>9.1f} {base / m:>7.2f}x {100 * base / (t * m):>9.0f} %")


if __name__ == "__main__":
    main()
