#!/usr/bin/env python3
"""crosscheck.py — handgrad against PyTorch autograd, tensor by tensor (run by `make crosscheck`).

  crosscheck.py params --dir DIR NAME...   for each NAME, DIR/NAME.ckpt.safetensors (the initial
                                           model) and DIR/NAME.dump.safetensors (build/crosscheck's
                                           reference data): logits, loss, every gradient, the
                                           weights after 3 AdamW (or Muon) steps, in float32 and
                                           float64
  crosscheck.py eval --ckpt C --data F     build/eval's whole-split loss against the reference's
  crosscheck.py sample --pt P --ckpt C     build/sample --temperature=0 against greedy decoding of
                                           the PyTorch model in P (a nanoGPT-format ckpt.pt)
  crosscheck.py make-nanogpt --data F --out D   a small nanoGPT-format D/ckpt.pt + D/meta.pkl
  crosscheck.py hf --hf DIR --ckpt C        a Hugging Face GPT-2 checkpoint DIR and its conversion C
                                           (convert.py from-hf): build/logits on C against GPT-2's
                                           forward on DIR's tensors as stored (hf_gpt2.hf_logits,
                                           float64) and against torch_gpt loading C; and that
                                           forgetting Conv1D's transpose would be caught
  crosscheck.py hf-errors --hf DIR --tmp T  convert.py from-hf on broken copies of DIR: one
                                           "error:" line each, exit status 1, no output file

Relative error of a tensor a (handgrad) against b (PyTorch):  max|a − b| / max|b|, the worst
element's error measured on the scale of the tensor (an elementwise |a−b|/|b| would blow up on
entries that are ~0 by chance, which every gradient has). Scalars (loss, grad norm): |a−b|/|b|.

Tolerances (TOL below; measured values in docs/pytorch-parity.md):
  float32  logits, loss, grad norm: 1e-5;  gradients: 1e-4;  PyTorch's clipping + AdamW (+ Muon)
           replayed on handgrad's gradients: 1e-6 (the float32 weights after 3 steps are printed only)
  float64  logits, loss: 1e-13;  grad norm, gradients: 1e-12;  weights after 3 steps: 1e-10
The float32 bounds cover a different summation order in two BLAS libraries (OpenBLAS against
PyTorch's), a few ulps per layer; float64 shows the math is the same to ~1e-15.

One exclusion, in the weights after the steps only: the K third of attn.c_attn.bias (gpt2
layout). Its exact gradient is 0 (adding q·b_k to every score of a row leaves the softmax
unchanged), so both sides hold round-off of ~1e-9, and Adam's first step, m̂/√v̂ = sign(g),
turns any round-off into a full ±lr step of either sign. Its gradient is still compared (within
the whole c_attn.bias tensor) and reported as a fraction of that tensor's scale.

Exit status 1 when any check is over its tolerance.
"""
import argparse
import pickle
import json
import math
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_gpt2  # noqa: E402
import safetensors_io  # noqa: E402
import muon_reference  # noqa: E402
import torch_gpt  # noqa: E402

TOL = {
    "float32": {"logits": 1e-5, "loss": 1e-5, "grad_norm": 1e-5, "grad": 1e-4, "replay": 1e-6},
    "float64": {"logits": 1e-13, "loss": 1e-13, "grad_norm": 1e-12, "grad": 1e-12, "step3": 1e-10},
}
PREFIX = {"float32": "f32", "float64": "f64"}


def rel_err(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    scale = np.max(np.abs(b)) if b.size else 0.0
    diff = np.max(np.abs(a - b)) if b.size else 0.0
    return float(diff / scale) if scale > 0 else float(diff)


def k_bias_slice(name, C):
    """The elements of tensor `name` excluded from the after-steps comparison (see the top)."""
    return slice(C, 2 * C) if name.endswith("attn.c_attn.bias") else None


def make_optimizer(params, meta):
    """The optimizers as handgrad's trainer runs them, as a list: torch.optim.AdamW with weight
    decay on 2-D tensors only (nanoGPT), betas/eps/weight_decay the float32 values handgrad used,
    exactly; with optimizer "muon", tools/muon_reference.py's Muon for the blocks' matrices (same
    lr and weight decay) and AdamW for the rest."""
    adamw = json.loads(meta["adamw"])
    f32 = lambda x: float(np.float32(x))
    lr = json.loads(meta["lr"])[0]
    muon = [p for n, p in params if meta.get("optimizer") == "muon" and muon_reference.is_muon_parameter(n, p)]
    rest = [p for _, p in params if not any(p is q for q in muon)]
    decay = [p for p in rest if p.dim() >= 2]
    no_decay = [p for p in rest if p.dim() < 2]
    opts = [torch.optim.AdamW([{"params": decay, "weight_decay": f32(adamw["weight_decay"])},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=lr, betas=(f32(adamw["beta1"]), f32(adamw["beta2"])), eps=f32(adamw["eps"]))]
    if muon:
        opts.append(muon_reference.Muon(muon, lr=lr, momentum=f32(meta["muon_momentum"]),
                                        weight_decay=f32(adamw["weight_decay"])))
    return opts


def optimizer_step(params, opts, meta, s):
    """clip_grad_norm_, the step's learning rate (handgrad's warmup-cosine value), each optimizer's step()."""
    grad_clip = float(meta["grad_clip"])
    grads = [p for _, p in params]
    if grad_clip > 0:
        norm = torch.nn.utils.clip_grad_norm_(grads, grad_clip)
    else:
        norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in grads))
    for opt in opts:
        for g in opt.param_groups:
            g["lr"] = json.loads(meta["lr"])[s]
        opt.step()
    return float(norm)


def run_reference(ckpt, dump, meta, dtype):
    """The PyTorch side of build/crosscheck's three steps, on the same weights and batches."""
    model, _, _ = torch_gpt.load_handgrad(ckpt, dtype)
    c = model.config
    if c["dropout"] > 0:
        model.train()  # dropout on, with handgrad's masks (set_dropout_key below)
    params = model.trained_parameters()
    opt = make_optimizer(params, meta)
    keys = [int(k) for k in json.loads(meta["dropout_keys"])]
    out = {"loss": [], "grad_norm": [], "grad": {}, "step3": {}}
    for s in range(len(json.loads(meta["lr"]))):
        idx = torch.from_numpy(dump["idx"][s]).long()
        targets = torch.from_numpy(dump["targets"][s]).long()
        model.set_dropout_key(keys[s])
        for o in opt:
            o.zero_grad(set_to_none=True)
        logits, loss = model(idx, targets)
        loss.backward()
        out["loss"].append(loss.item())
        if s == 0:
            out["logits"] = logits.detach().numpy()
            out["grad"] = {n: p.grad.detach().numpy().copy() for n, p in params}
        out["grad_norm"].append(optimizer_step(params, opt, meta, s))
    out["step3"] = {n: p.detach().numpy().copy() for n, p in params}
    return c, out


def replay_optimizer(ckpt, dump, meta):
    """PyTorch's clipping, schedule and AdamW fed handgrad's own float32 gradients: the optimizer
    alone, without the round-off of two different backward passes (see the top)."""
    model, _, _ = torch_gpt.load_handgrad(ckpt, torch.float32)
    params = model.trained_parameters()
    opt = make_optimizer(params, meta)
    norms = []
    for s in range(len(json.loads(meta["lr"]))):
        prefix = "f32.grad." if s == 0 else f"f32.grad{s}."
        for n, p in params:
            p.grad = torch.from_numpy(dump[prefix + n].copy())
        norms.append(optimizer_step(params, opt, meta, s))
    return {n: p.detach().numpy().copy() for n, p in params}, norms


def check_params(args):
    failures = []
    worst_overall = {}  # (dtype, kind) -> (err, config, tensor)
    for name in args.names:
        ckpt = os.path.join(args.dir, name + ".ckpt.safetensors")
        dump, meta = torch_gpt.read_safetensors(os.path.join(args.dir, name + ".dump.safetensors"))
        results = {}
        for dtype_name, dtype in (("float32", torch.float32), ("float64", torch.float64)):
            c, ref = run_reference(ckpt, dump, meta, dtype)
            results[dtype_name] = ref
        C = c["n_embd"]
        B, T = dump["idx"].shape[1:]
        nparams = sum(int(np.prod(dump["f32.grad." + n].shape)) for n in torch_gpt.parameter_names(c))
        print(f"\n== {name}: layout {c['bias_layout']}, {'tied' if c['tie_weights'] else 'untied'}, "
              f"{c['pos_encoding']} positions, {c['norm']}, "
              f"{'gelu ' + c['gelu'] if c['mlp'] == 'gelu' else c['mlp']}"
              f"{', qk_norm' if c['qk_norm'] else ''}"
              f"{', logit_softcap %g' % c['logit_softcap'] if c['logit_softcap'] > 0 else ''}, dropout {c['dropout']:g}; "
              f"L={c['n_layer']} NH={c['n_head']} C={C} V={c['vocab_size']}, {nparams:,} parameters; "
              f"B={B} T={T}; optimizer {meta.get('optimizer', 'adamw')}" + (f"; CORRUPTED: {meta['corrupt_grad']}" if meta.get("corrupt_grad") else ""))
        print(f"   {'tensor':<40} " + " ".join(f"{h:>11}" for h in
              ("grad f32", "grad f64", "opt replay", "3 steps f32", "3 steps f64")))

        def verdict(dtype_name, kind, err, label):
            tol = TOL[dtype_name][kind]
            bad = not (err <= tol)  # NaN fails
            if bad:
                failures.append(f"{name}: {dtype_name} {kind} {label}: {err:.2e} > {tol:.0e}")
            key = (dtype_name, kind)
            if key not in worst_overall or not (err <= worst_overall[key][0]):
                worst_overall[key] = (err, name, label)
            return "!" if bad else " "

        replay, replay_norms = replay_optimizer(ckpt, dump, meta)
        rows = []
        for t in torch_gpt.parameter_names(c):
            cells = []
            for dtype_name in ("float32", "float64"):
                err = rel_err(dump[f"{PREFIX[dtype_name]}.grad.{t}"], results[dtype_name]["grad"][t])
                cells.append(f"{err:9.1e}{verdict(dtype_name, 'grad', err, t)}")
            err = rel_err(dump[f"f32.step3.{t}"], replay[t])
            cells.append(f"{err:9.1e}{verdict('float32', 'replay', err, t)}")
            for dtype_name in ("float32", "float64"):
                a, b = dump[f"{PREFIX[dtype_name]}.step3.{t}"], results[dtype_name]["step3"][t]
                excl = k_bias_slice(t, C)
                if excl is not None:
                    keep = np.ones(a.shape, bool)
                    keep[excl] = False
                    a, b = a[keep], b[keep]
                err = rel_err(a, b)
                mark = verdict(dtype_name, "step3", err, t) if dtype_name == "float64" else " "
                cells.append(f"{err:9.1e}{mark}")
            rows.append(f"   {t:<40} " + " ".join(f"{x:>11}" for x in cells))
        e_replay_norm = max(abs(a - b) / abs(b) for a, b in zip(dump["f32.grad_norm"], replay_norms))
        rows.append(f"   float32 optimizer replay: clip norms {e_replay_norm:.1e}"
                    f"{verdict('float32', 'grad_norm', e_replay_norm, 'replay grad norm')}")
        print("\n".join(rows))
        for dtype_name in ("float32", "float64"):
            ref, p = results[dtype_name], PREFIX[dtype_name]
            e_logits = rel_err(dump[p + ".logits"], ref["logits"])
            e_loss = max(abs(a - b) / abs(b) for a, b in zip(dump[p + ".loss"], ref["loss"]))
            e_norm = max(abs(a - b) / abs(b) for a, b in zip(dump[p + ".grad_norm"], ref["grad_norm"]))
            m = (verdict(dtype_name, "logits", e_logits, "logits"), verdict(dtype_name, "loss", e_loss, "loss"),
                 verdict(dtype_name, "grad_norm", e_norm, "grad norm"))
            worst_g = max(torch_gpt.parameter_names(c),
                          key=lambda t: rel_err(dump[f"{p}.grad.{t}"], ref["grad"][t]))
            print(f"   {dtype_name}: logits {e_logits:.1e}{m[0]} loss (3 steps) {e_loss:.1e}{m[1]} "
                  f"grad norm (3 steps) {e_norm:.1e}{m[2]}  loss {ref['loss'][0]:.6f} -> {ref['loss'][2]:.6f}, "
                  f"grad norm {ref['grad_norm'][0]:.4f} (clip {float(meta['grad_clip']):g}); "
                  f"worst gradient {worst_g}")
        if c["bias_layout"] == "gpt2":
            for dtype_name in ("float32", "float64"):
                p = PREFIX[dtype_name]
                t = "transformer.h.0.attn.c_attn.bias"
                g = dump[f"{p}.grad.{t}"]
                print(f"   {dtype_name}: K bias gradient (exactly 0 in exact arithmetic): max |g_K| / max |g| = "
                      f"{np.max(np.abs(g[C:2 * C])) / np.max(np.abs(g)):.1e} in h.0")

    print("\nWorst relative error over all configs (max|a-b| / max|b| per tensor):")
    for (dtype_name, kind), (err, cfg, label) in sorted(worst_overall.items()):
        print(f"   {dtype_name:<8} {kind:<10} {err:9.2e}  (tolerance {TOL[dtype_name][kind]:.0e})  {cfg}: {label}")
    if failures:
        print(f"\nFAIL: {len(failures)} checks over tolerance:")
        for f in failures:
            print("   " + f)
        return 1
    print(f"\nPASS: {len(args.names)} configs, every check within tolerance")
    return 0


def encode(vocab, text):
    stoi = {s: i for i, s in enumerate(vocab)}
    return np.array([stoi[ch] for ch in text], dtype=np.int64)


def check_eval(args):
    model, vocab, _ = torch_gpt.load_handgrad(args.ckpt, torch.float32)
    with open(args.data, encoding="utf-8") as f:
        ids = encode(vocab, f.read())
    n_train = int(len(ids) * 0.9)  # handgrad's split_train_val, nanoGPT's prepare.py
    ids = ids[n_train:] if args.split == "val" else ids[:n_train]
    T = model.config["block_size"]
    windows = (len(ids) - 1) // T  # i = 0, T, 2T, ... with i + T + 1 <= len
    total = 0.0
    with torch.no_grad():
        for w0 in range(0, windows, 64):
            w = np.arange(w0, min(windows, w0 + 64))
            x = torch.from_numpy(np.stack([ids[i * T:i * T + T] for i in w]))
            y = torch.from_numpy(np.stack([ids[i * T + 1:i * T + T + 1] for i in w]))
            _, loss = model(x, y)
            total += loss.item() * len(w) * T
    ref = total / (windows * T)
    out = subprocess.run([os.path.join(args.bin, "eval"), "--ckpt", args.ckpt, "--data", args.data,
                          "--split", args.split, "--json"], check=True, capture_output=True, text=True).stdout
    hg = json.loads(out)
    err = abs(hg["loss"] - ref) / abs(ref)
    ok = hg["tokens"] == windows * T and err <= 1e-5
    print(f"eval on the {args.split} split ({windows * T} tokens, {windows} windows of {T}): build/eval "
          f"{hg['loss']:.7f}, PyTorch {ref:.7f}, relative error {err:.1e} (tolerance 1e-5) "
          f"{'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def greedy(model, ids, n):
    T = model.config["block_size"]
    ids = list(ids)
    with torch.no_grad():
        for _ in range(n):
            logits, _ = model(torch.tensor([ids[-T:]]))
            ids.append(int(torch.argmax(logits[0, -1])))  # first maximum, as handgrad's greedy
    return ids


def check_sample(args):
    ck = torch.load(args.pt, map_location="cpu")
    sd = {k[len("_orig_mod."):] if k.startswith("_orig_mod.") else k: v for k, v in ck["model"].items()}
    config = dict(ck["model_args"], **ck.get("handgrad_config", {}))
    model = torch_gpt.GPT(config)
    model.load_state_dict(sd, strict=True)
    model.eval()
    with open(args.meta, "rb") as f:
        itos = pickle.load(f)["itos"]
    vocab = [itos[i] for i in range(len(itos))]
    prompt = encode(vocab, args.start)
    ref = "".join(vocab[i] for i in greedy(model, prompt, args.n))
    out = subprocess.run([os.path.join(args.bin, "sample"), "--ckpt", args.ckpt, "--start", args.start,
                          "--temperature=0", f"--max_new_tokens={args.n}"], check=True, capture_output=True,
                         text=True).stdout
    hg = out.split("\n---------------\n")[0]
    ok = hg == ref
    print(f"greedy continuation of {args.start!r}, {args.n} tokens: build/sample and PyTorch "
          f"{'agree' if ok else 'DIFFER'}: {ref[len(args.start):][:60]!r}...")
    if not ok:
        first = next((i for i, (a, b) in enumerate(zip(hg, ref)) if a != b), min(len(hg), len(ref)))
        print(f"   first difference at character {first}: handgrad {hg[first:first + 20]!r}, "
              f"PyTorch {ref[first:first + 20]!r}")
    return 0 if ok else 1


def make_nanogpt(args):
    """A nanoGPT-format checkpoint made with torch_gpt (nanoGPT itself is not installed): nanoGPT's
    architecture (bias=True, tied, learned positions, erf GELU), nanoGPT's init, trained briefly
    on the text with torch.optim.AdamW so the greedy continuation is not degenerate; saved as
    nanoGPT's train.py does (keys with torch.compile's '_orig_mod.' prefix, model_args,
    iter_num, best_val_loss as a tensor) with the character vocabulary in meta.pkl."""
    torch.manual_seed(args.seed)
    # Sharp attention makes denormal probabilities, which slow training 5-20x. Flush them to
    # zero (this model is only the thing being converted, never compared as a reference), on one
    # thread: the flush mode is per thread, and torch's worker threads do not inherit it.
    torch.set_num_threads(1)
    torch.set_flush_denormal(True)
    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)
    model_args = dict(n_layer=2, n_head=4, n_embd=64, block_size=32, bias=True, vocab_size=len(chars), dropout=0.0)
    model = torch_gpt.GPT(dict(model_args, tie_weights=True)).init_gpt2(args.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.99))
    B, T = 16, model_args["block_size"]
    for it in range(args.iters):
        ix = torch.randint(len(data) - T - 1, (B,))
        x = torch.stack([data[i:i + T] for i in ix])
        y = torch.stack([data[i + 1:i + T + 1] for i in ix])
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    os.makedirs(args.out, exist_ok=True)
    sd = {"_orig_mod." + k: v for k, v in model.state_dict().items()}
    torch.save({"model": sd, "model_args": model_args, "iter_num": args.iters,
                "best_val_loss": torch.tensor(loss.item()), "config": {}}, os.path.join(args.out, "ckpt.pt"))
    with open(os.path.join(args.out, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": stoi}, f)
    print(f"wrote {args.out}/ckpt.pt and meta.pkl: nanoGPT layout, {args.iters} AdamW steps, loss {loss.item():.3f}")
    return 0


HF_PROMPT = "ROMEO:\nBut soft, what light through yonder window breaks? It's the east, and Juliet is the sun."


def check_hf(args):
    cfg, sd = hf_gpt2.read_hf(args.hf)
    run = lambda cmd, stdin: subprocess.run(cmd, input=stdin, check=True, capture_output=True, text=True).stdout
    ids = [int(x) for x in run([os.path.join(args.bin, "tokenize"), "--tokenizer=gpt2", f"--gpt2_dir={args.gpt2_dir}"],
                               HF_PROMPT).split()][:cfg["n_positions"]]
    out = os.path.splitext(args.ckpt)[0] + ".logits.safetensors"
    run([os.path.join(args.bin, "logits"), f"--ckpt={args.ckpt}", f"--out={out}"], " ".join(map(str, ids)))
    hg = safetensors_io.read_safetensors(out)[0]["logits"].astype(np.float64)
    ref = hf_gpt2.hf_logits(cfg, sd, ids)
    model, _, _ = torch_gpt.load_handgrad(args.ckpt, torch.float32)
    with torch.no_grad():
        tg = model(torch.tensor([ids]))[0][0].double().numpy()
    bug = hf_gpt2.hf_logits(cfg, sd, ids, forget_transpose=True)
    err_ref, err_torch, err_bug = rel_err(hg, ref), rel_err(hg, tg), rel_err(bug, ref)
    tol = TOL["float32"]["logits"]
    ok = err_ref <= tol and err_torch <= tol and err_bug > 100 * tol
    name = cfg.get("handgrad_fixture", args.hf)
    print(f"{name}: logits of {len(ids)} tokens x {cfg['vocab_size']}: build/logits against Hugging Face's layout "
          f"in float64 {err_ref:.1e}, against torch_gpt {err_torch:.1e} (tolerance {tol:g}); an untransposed "
          f"attn.c_proj would be off by {err_bug:.1e} {'PASS' if ok else 'FAIL'}")
    return 0 if ok else 1


def check_hf_errors(args):
    """convert.py from-hf on broken copies of a Hugging Face fixture: each must end with one
    'error: ...' line naming the flaw, exit status 1, and no output file."""
    import shutil
    cfg, sd = hf_gpt2.read_hf(args.hf)
    tensors = list(safetensors_io.read_safetensors(os.path.join(args.hf, "model.safetensors"))[0].items())
    cases = [
        ("no config.json", None, tensors, "config.json"),
        ("no n_head", {k: v for k, v in cfg.items() if k != "n_head"}, tensors, "'n_head' is missing"),
        ("relu", dict(cfg, activation_function="relu"), tensors, "activation_function 'relu'"),
        ("another vocabulary", dict(cfg, vocab_size=1000), tensors, "vocab_size must be GPT-2's"),
        ("a tensor missing", cfg, [t for t in tensors if not t[0].endswith("h.1.attn.c_proj.weight")],
         "missing, first: transformer.h.1.attn.c_proj.weight"),
        ("an extra tensor", cfg, tensors + [("h.0.attn.rotary", np.zeros(4, np.float32))], "unexpected tensor"),
        ("an untied head", cfg, tensors + [("lm_head.weight", tensors[0][1] + 1)], "lm_head.weight differs"),
        ("c_fc stored (out, in)", cfg, [(n, a.T.copy()) if n.endswith("h.0.mlp.c_fc.weight") else (n, a)
                                         for n, a in tensors], "'h.0.mlp.c_fc.weight' has shape"),
        ("integer weights", cfg, [(n, a.astype(np.int32)) if n.endswith("ln_f.bias") else (n, a) for n, a in tensors],
         "not a float"),
        ("not safetensors", cfg, b"\x10\x00\x00\x00\x00\x00\x00\x00{not json", "not a safetensors file"),
    ]
    failed = 0
    for what, config, body, phrase in cases:
        d = os.path.join(args.tmp, "broken")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        if config is not None:
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump(config, f)
        if isinstance(body, bytes):
            with open(os.path.join(d, "model.safetensors"), "wb") as f:
                f.write(body)
        else:
            safetensors_io.write_safetensors(os.path.join(d, "model.safetensors"), body)
        out = os.path.join(args.tmp, "broken.safetensors")
        if os.path.exists(out):
            os.remove(out)
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "convert.py"),
                            "from-hf", d, "-o", out], capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0] \
            and not os.path.exists(out)
        failed += not ok
        print(f"from-hf with {what}: {'ok' if ok else 'FAIL'}: {lines[-1] if lines else '(no message)'}")
    return 1 if failed else 0


def main():
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("params")
    p.add_argument("--dir", required=True)
    p.add_argument("names", nargs="+")
    e = sub.add_parser("eval")
    e.add_argument("--ckpt", required=True)
    e.add_argument("--data", required=True)
    e.add_argument("--split", default="val", choices=["val", "train"])
    e.add_argument("--bin", default="build")
    s = sub.add_parser("sample")
    s.add_argument("--pt", required=True)
    s.add_argument("--meta", required=True)
    s.add_argument("--ckpt", required=True)
    s.add_argument("--start", default="ROMEO:")
    s.add_argument("--n", type=int, default=200)
    s.add_argument("--bin", default="build")
    m = sub.add_parser("make-nanogpt")
    m.add_argument("--data", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--iters", type=int, default=150)
    m.add_argument("--seed", type=int, default=1337)
    h = sub.add_parser("hf")
    h.add_argument("--hf", required=True, help="the Hugging Face checkpoint (directory)")
    h.add_argument("--ckpt", required=True, help="its conversion (convert.py from-hf)")
    h.add_argument("--gpt2_dir", default="data/gpt2")
    h.add_argument("--bin", default="build")
    he = sub.add_parser("hf-errors")
    he.add_argument("--hf", required=True, help="a Hugging Face fixture (convert.py make-hf) to break")
    he.add_argument("--tmp", required=True, help="a directory for the broken copies")
    args = ap.parse_args()
    return {"params": check_params, "eval": check_eval, "sample": check_sample,
            "make-nanogpt": make_nanogpt, "hf": check_hf, "hf-errors": check_hf_errors}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
