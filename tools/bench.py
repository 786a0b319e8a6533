#!/usr/bin/env python3
"""`make bench`: handgrad's build/bench and the same step in PyTorch, side by side, in one session.

Prints a table of ms/step, the speed-up, achieved GFLOP/s against the sgemm ceiling measured in
the same run, and peak memory of both. Ratios, not absolute times, are the result: both sides
run on the same machine minutes apart.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.environ.get("HANDGRAD_BIN", "build")
RUNS = [  # (label, preset, batch, block, dropout, steps)
    ("course, B=12 T=64", "course", 12, 64, 0.0, 20),
    ("baby GPT, B=64 T=256, dropout 0", "shakespeare-char", 64, 256, 0.0, 3),
    ("baby GPT, B=64 T=256, dropout 0.2", "shakespeare-char", 64, 256, 0.2, 3),
    ("GPT-2 small, B=4 T=64", "gpt2", 4, 64, 0.0, 3),
]


def handgrad(preset, B, T, p, steps):
    """The faster of handgrad's two thread settings: all threads on every layer (--batch_threads=1),
    or one model replica per core on B / cores rows each (--batch_threads=cores), as PyTorch gets
    the best of its thread settings."""
    cores = os.cpu_count()
    best = None
    for bt in [1] + ([cores] if cores > 1 and B % cores == 0 else []):
        cmd = [f"{BUILD}/bench", f"--preset={preset}", f"--batch_size={B}", f"--block_size={T}", f"--dropout={p}",
               f"--steps={steps}", "--warmup=1", f"--batch_threads={bt}", "--json"]
        r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
        if best is None or r["ms_median"] < best["ms_median"]:
            best = r
    return best


def torch(preset, B, T, p, steps):
    cmd = [sys.executable, os.path.join(HERE, "bench_torch.py"), "--preset", preset, "--batch_size", str(B),
           "--block_size", str(T), "--dropout", str(p), "--steps", str(steps), "--warmup", "1", "--json"]
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def main():
    only = sys.argv[1:]  # optional labels' first words to run, e.g. "course"
    rows = []
    for label, preset, B, T, p, steps in RUNS:
        if only and not any(label.startswith(o) for o in only):
            continue
        h = handgrad(preset, B, T, p, steps)
        t = torch(preset, B, T, p, steps)
        rows.append((label, h, t))
        print(f"{label}: handgrad {h['ms_median']:.1f} ms ({h['batch_threads']} batch threads), "
              f"PyTorch {t['ms_median']:.1f} ms ({t['torch_threads']} torch + {t['blas_threads']} BLAS threads)",
              flush=True)
    print()
    print("| run | handgrad ms/step | PyTorch ms/step | speed-up | handgrad GFLOP/s | of sgemm ceiling "
          "| peak MiB handgrad / PyTorch |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, h, t in rows:
        print(f"| {label} | {h['ms_median']:.1f} | {t['ms_median']:.1f} | {t['ms_median'] / h['ms_median']:.2f}× "
              f"| {h['gflops']:.1f} | {100 * h['ceiling_ratio']:.0f} % of {h['sgemm_ceiling_gflops']:.0f} "
              f"| {h['peak_rss_mib']:.0f} / {t['peak_rss_mib']:.0f} ({h['peak_rss_mib'] / t['peak_rss_mib']:.2f}×) |")


if __name__ == "__main__":
    main()
