#!/usr/bin/env python3
"""plot.py — the pictures of a training run, as PNGs in its out_dir (`make plot`).

    /usr/bin/python3 tools/plot.py OUT_DIR [--prompt TEXT]

(a prompt longer than the model's block_size keeps its last block_size characters, the context
that sampling would give the model)

reads OUT_DIR/log.csv and OUT_DIR/ckpt.safetensors, asks the apps for the numbers (as JSON,
kept next to the pictures), and writes:

    loss.png         training and validation loss against the iteration, with the learning rate
    parameters.png   parameters per component: the course config and GPT-2 small (build/inspect --json)
    attention.png    every head of every layer: its attention matrix for the prompt (build/activations)
    logits.png       the logits (positions × vocabulary) for the prompt, and |Δlogits| after
                     changing the last token: only the last row moves (causality)
    residual.png     ‖H⁽ˡ⁾‖ after each block, with and without the 1/√(2L) scaling of the residual
                     branches, at init (the lesson's draw) and for the trained checkpoint

The apps are taken from $HANDGRAD_BIN (default build/). Needs matplotlib (Debian's
python3-matplotlib) and numpy; run it with /usr/bin/python3.
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

BIN = os.environ.get("HANDGRAD_BIN", "build")
DPI = 100
DEFAULT_PROMPT = "JULIET:\nO Romeo, Romeo! wherefore art thou"


def run_json(args, out_path):
    """Runs a handgrad app that prints JSON; keeps the JSON in out_path and returns it parsed."""
    text = subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout
    with open(out_path, "w") as f:
        f.write(text)
    return json.loads(text)


def shown(token):
    """A token as a tick label: newline and space made visible."""
    return {"\n": "⏎", " ": "␣"}.get(token, token)


def save(fig, path):
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    print(f"wrote {path}")


# --- loss curves --------------------------------------------------------------------------

def read_log(path):
    """log.csv (kind,iter,loss,val_loss,lr,ms_per_iter,tokens_per_s): train rows and eval rows."""
    train, evals = [], []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row["kind"] == "train":
                train.append((int(row["iter"]), float(row["loss"]), float(row["lr"])))
            elif row["kind"] == "eval":
                evals.append((int(row["iter"]), float(row["loss"]), float(row["val_loss"])))
    return train, evals


def plot_loss(log_path, vocab_size, png):
    train, evals = read_log(log_path)
    fig, (ax, axlr) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    if train:
        it, loss, lr = zip(*train)
        ax.plot(it, loss, color="tab:blue", lw=1.2, alpha=0.6, label="train (one batch, at log_interval)")
        axlr.plot(it, lr, color="tab:gray")
    if evals:
        it, tl, vl = zip(*evals)
        ax.plot(it, tl, "o-", color="tab:blue", label="train (estimate at eval)")
        ax.plot(it, vl, "s-", color="tab:orange", label="validation (estimate at eval)")
        best = min(range(len(vl)), key=lambda i: vl[i])
        ax.annotate(f"best val {vl[best]:.4f}", (it[best], vl[best]), textcoords="offset points",
                    xytext=(-10, 18), ha="right", arrowprops={"arrowstyle": "->"})
    if vocab_size:
        ax.axhline(math.log(vocab_size), color="gray", ls=":", lw=1)
        ax.text(0, math.log(vocab_size), f" ln V = ln {vocab_size} = {math.log(vocab_size):.3f} (uniform guess)",
                va="bottom", fontsize=8, color="gray")
    ax.set_ylabel("cross-entropy (nats per character)")
    ax.set_title(f"Training run {os.path.basename(os.path.dirname(os.path.abspath(log_path)))}: loss per character")
    ax.grid(alpha=0.3)
    ax.legend()
    axlr.set_ylabel("learning rate")
    axlr.set_xlabel("iteration")
    axlr.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    axlr.grid(alpha=0.3)
    fig.tight_layout()
    save(fig, png)


# --- parameters per component ----------------------------------------------------------------

COMPONENTS = [("embedding", "embeddings"), ("attention", "attention"), ("mlp", "MLP"),
              ("block_layernorm", "block\nLayerNorms"), ("final_layernorm", "final\nLayerNorm"),
              ("lm_head", "LM head\n(0 if tied)")]


def percent(n, total):
    share = 100 * n / total
    return f"{share:.1f} %" if share >= 1 or n == 0 else f"{share:.2f} %" if share >= 0.01 else "< 0.01 %"


def plot_parameters(inspects, png):
    fig, axes = plt.subplots(1, len(inspects), figsize=(6 * len(inspects), 4.5))
    for ax, (title, j) in zip(np.atleast_1d(axes), inspects):
        p = j["parameters"]
        names = [label for _, label in COMPONENTS]
        counts = [p[key] for key, _ in COMPONENTS]
        bars = ax.bar(range(len(counts)), counts, color=["tab:purple", "tab:blue", "tab:green", "tab:olive",
                                                         "tab:brown", "tab:gray"])
        for b, n in zip(bars, counts):
            ax.text(b.get_x() + b.get_width() / 2, b.get_height(), f"{n:,}\n{percent(n, p['total'])}",
                    ha="center", va="bottom", fontsize=8)
        c = j["config"]
        ax.set_title(f"{title}: {p['total']:,} parameters\n(L={c['n_layer']}, NH={c['n_head']}, C={c['n_embd']}, "
                     f"V={c['vocab_size']}, T={c['block_size']}, {'tied' if c['tie_weights'] else 'untied'})")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylabel("parameters")
        ax.set_ylim(0, max(counts) * 1.2)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    fig.tight_layout()
    save(fig, png)


# --- attention, logits, residual stream ------------------------------------------------------

def plot_attention(acts, png):
    att = np.array(acts["attention"])  # (L, NH, T, T)
    L, NH, T, _ = att.shape
    labels = [shown(t) for t in acts["tokens"]]
    step = max(1, math.ceil(T / 48))  # at most ~48 character labels per axis
    fig, axes = plt.subplots(L, NH, figsize=(3.3 * NH + 1.2, 3.3 * L + 0.9), squeeze=False, constrained_layout=True)
    # A square-root colour scale: the many small probabilities stay visible next to the peaks.
    norm = matplotlib.colors.PowerNorm(gamma=0.5, vmin=0, vmax=1)
    cmap = matplotlib.cm.get_cmap("viridis").copy()
    cmap.set_bad("0.85")  # above the diagonal: masked (causal), shown grey
    future = np.triu(np.ones((T, T), dtype=bool), k=1)
    for l in range(L):
        for h in range(NH):
            ax = axes[l][h]
            im = ax.imshow(np.ma.array(att[l, h], mask=future), cmap=cmap, norm=norm, interpolation="nearest")
            ax.set_title(f"layer {l}, head {h}", fontsize=9)
            ax.set_xticks(range(0, T, step))
            ax.set_yticks(range(0, T, step))
            ax.set_xticklabels(labels[::step] if l == L - 1 else [], fontsize=5)
            ax.set_yticklabels(labels[::step] if h == 0 else [], fontsize=5)
            ax.tick_params(length=0, pad=1)
    fig.suptitle(f"Attention probabilities: query position (row) attends to key position (column); grey: the future, masked\n"
                 f"prompt {acts['prompt']!r}, {acts['source']}", fontsize=10)
    fig.colorbar(im, ax=axes, shrink=0.5, label="attention probability (square-root scale)")
    save(fig, png)


def plot_logits(acts, png):
    logits = np.array(acts["logits"])         # (T, V)
    delta = np.array(acts["delta_logits"])    # (T, V)
    T, V = logits.shape
    rows = [shown(t) for t in acts["tokens"]]
    cols = [shown(t) for t in acts["vocab"]]
    ch = acts["changed"]
    fig, axes = plt.subplots(1, 2, figsize=(16, max(5, 0.16 * T + 2)))
    lim = np.abs(logits).max()
    for ax, data, title, kw in [
            (axes[0], logits, "logits for the prompt", {"cmap": "RdBu_r", "vmin": -lim, "vmax": lim}),
            (axes[1], delta,
             f"|Δlogits| after changing the last token {shown(ch['from'])!r} → {shown(ch['to'])!r}\n"
             f"rows 0–{T - 2}: max {delta[:-1].max():.3g} (causal);  last row: max {delta[-1].max():.3g}",
             {"cmap": "magma", "vmin": 0})]:
        im = ax.imshow(data, aspect="auto", interpolation="nearest", **kw)
        ax.set_title(title, fontsize=10)
        ax.set_xticks(range(V))
        ax.set_xticklabels(cols, fontsize=6)
        ax.set_yticks(range(T))
        ax.set_yticklabels([f"{r} {t}" for t, r in enumerate(rows)], fontsize=5)
        ax.set_xlabel("next-token vocabulary")
        ax.set_ylabel("position (input character)")
        fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"prompt {acts['prompt']!r}, {acts['source']}", fontsize=10)
    fig.tight_layout()
    save(fig, png)


def plot_residual(panels, png):
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.2), squeeze=False)
    for ax, (title, acts) in zip(axes[0], panels):
        r = acts["residual_norms"]
        plain, scaled = np.array(r["plain"]), np.array(r["scaled"])
        depth = np.arange(len(plain))
        ax.plot(depth, plain, "o-", label=f"as is: ‖H(L)‖/‖H(0)‖ = {plain[-1] / plain[0]:.2f}")
        ax.plot(depth, scaled, "s-", label=f"branches × 1/√(2L) = {r['factor']:.3f}: {scaled[-1] / scaled[0]:.2f}")
        ax.set_xticks(depth)
        ax.set_xticklabels(["embed"] + [f"block {l}" for l in range(len(plain) - 1)])
        ax.set_ylabel("‖H(l)‖ (Frobenius, T × C)")
        ax.set_ylim(0, None)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=9)
    fig.suptitle("Residual-stream norm after each block", fontsize=11)
    fig.tight_layout()
    save(fig, png)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--prompt", default=DEFAULT_PROMPT)
    ap.add_argument("--init", default="lesson14", help="the init drawn for the residual picture's left panel")
    a = ap.parse_args()
    out = a.out_dir
    ckpt = os.path.join(out, "ckpt.safetensors")
    log = os.path.join(out, "log.csv")
    for path in (ckpt, log):
        if not os.path.exists(path):
            sys.exit(f"error: {path} does not exist (run `make train`, or give another run's out_dir)")

    acts = run_json([f"{BIN}/activations", f"--ckpt={ckpt}", f"--prompt={a.prompt}", "--crop"],
                    f"{out}/activations.json")
    init = run_json([f"{BIN}/activations", f"--ckpt={ckpt}", f"--prompt={a.prompt}", "--crop", f"--fresh_init={a.init}"],
                    f"{out}/activations_init.json")
    inspects = [(name, run_json([f"{BIN}/inspect", f"--preset={preset}", "--json"], f"{out}/inspect_{preset}.json"))
                for name, preset in [("course config", "course"), ("GPT-2 small", "gpt2")]]

    plot_loss(log, acts["config"]["vocab_size"], f"{out}/loss.png")
    plot_parameters(inspects, f"{out}/parameters.png")
    plot_attention(acts, f"{out}/attention.png")
    plot_logits(acts, f"{out}/logits.png")
    plot_residual([(f"at init ({a.init}, seed 14), the checkpoint's config", init),
                   ("trained checkpoint", acts)], f"{out}/residual.png")


if __name__ == "__main__":
    main()
