#!/usr/bin/env python3
"""The same training step in PyTorch, for `make bench`: forward, backward, clip, AdamW.

The model is tools/torch_gpt.py's nanoGPT-shaped GPT (ordinary torch.nn modules, autograd,
PyTorch's own dropout). Each (config, thread setting) runs in a fresh process, because
OpenBLAS reads its thread count when it loads; the best setting is reported, as the issue asks.

  /usr/bin/python3 tools/bench_torch.py --preset course --batch_size 12 --steps 10 --json
"""
import argparse
import json
import os
import subprocess
import sys
import time

PRESETS = {
    "course": dict(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, bias_layout="course",
                   tie_weights=False),
    "shakespeare-char": dict(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384, bias_layout="gpt2",
                             tie_weights=True),
    "gpt2": dict(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768, bias_layout="gpt2",
                 tie_weights=True),
}


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_one(args):
    """Times the step in this process (threads already fixed by the environment)."""
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_gpt import GPT

    torch.manual_seed(1)
    torch.set_num_threads(args.torch_threads)
    c = dict(PRESETS[args.preset], dropout=args.dropout, pos_encoding="learned", gelu="erf", init="gpt2")
    if args.block_size:
        c["block_size"] = args.block_size
    model = GPT(c)
    model.train()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.99), eps=1e-8)
    B, T, V = args.batch_size, c["block_size"], c["vocab_size"]
    times = []
    for i in range(args.warmup + args.steps):
        x = torch.randint(0, V, (B, T))
        y = torch.randint(0, V, (B, T))
        t0 = time.perf_counter()
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if i >= args.warmup:
            times.append(1000 * (time.perf_counter() - t0))
    times.sort()
    return {"ms_median": times[len(times) // 2], "ms_min": times[0], "ms_max": times[-1],
            "peak_rss_mib": peak_rss_mib()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="course", choices=sorted(PRESETS))
    ap.add_argument("--batch_size", type=int, default=12)
    ap.add_argument("--block_size", type=int, default=0)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--torch_threads", type=int, default=0, help="internal: one setting, this process")
    ap.add_argument("--blas_threads", type=int, default=0, help="internal")
    args = ap.parse_args()
    if args.torch_threads:
        print(json.dumps(run_one(args)))
        return
    cores = os.cpu_count() or 1
    # (PyTorch intra-op threads, OpenBLAS threads): both on all cores oversubscribes, so try the splits.
    settings = sorted({(1, cores), (cores, 1), (cores, cores)})
    results = []
    for torch_threads, blas_threads in settings:
        env = dict(os.environ, OMP_NUM_THREADS=str(torch_threads), OPENBLAS_NUM_THREADS=str(blas_threads))
        cmd = [sys.executable, __file__, "--preset", args.preset, "--batch_size", str(args.batch_size),
               "--block_size", str(args.block_size), "--dropout", str(args.dropout), "--steps", str(args.steps),
               "--warmup", str(args.warmup), "--torch_threads", str(torch_threads)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        r.update(torch_threads=torch_threads, blas_threads=blas_threads)
        results.append(r)
    best = dict(min(results, key=lambda r: r["ms_median"]))
    best["all_settings"] = results
    print(json.dumps(best) if args.json else
          f"PyTorch: {best['ms_median']:.1f} ms/step median with {best['torch_threads']} torch + "
          f"{best['blas_threads']} BLAS threads; peak RSS {best['peak_rss_mib']:.0f} MiB")


if __name__ == "__main__":
    main()
