"""hf_gpt2.py — Hugging Face's GPT-2 checkpoints (gpt2, gpt2-medium, gpt2-large, gpt2-xl): read into
handgrad's tensor names, run as Hugging Face lays them out, and written with random weights.

Hugging Face's layout (GPT2LMHeadModel, model.safetensors + config.json):
  wte.weight (V, C), wpe.weight (n_positions, C), ln_f.weight / .bias (C), and for each block i
  h.{i}.ln_1.*, h.{i}.ln_2.* (C); h.{i}.attn.c_attn.weight (C, 3C) and .bias (3C);
  h.{i}.attn.c_proj.weight (C, C); h.{i}.mlp.c_fc.weight (C, 4C); h.{i}.mlp.c_proj.weight (4C, C);
  each with a bias of its output width. Every name may carry a "transformer." prefix (files saved
  from GPT2LMHeadModel have it, the hub's gpt2 files do not).
  * The four matrices are Conv1D weights, stored (in, out) and applied as x @ W + b; handgrad's
    (and nanoGPT's) linear layers store (out, in) and compute x @ W^T + b, so each is transposed.
    c_proj of attention is square: a conversion that forgets the transpose has every shape right
    and every number wrong, which only a forward pass shows (crosscheck.py hf does one).
  * h.{i}.attn.bias (the causal mask, (1, 1, n_positions, n_positions)) and h.{i}.attn.masked_bias
    (the score a masked position gets) are buffers, not weights: dropped.
  * The LM head is tied to wte: lm_head.weight is usually absent (safetensors stores a shared
    tensor once); when present it must equal wte.weight.
  * config.json's activation_function is "gelu_new" (GELU's tanh form, handgrad's --gelu=tanh);
    LayerNorm's epsilon 1e-5 (handgrad's); n_inner null (4C).

The sizes, as (n_layer, n_head, n_embd): SIZES below. n_head is not in the weights' shapes, which
is why config.json is needed.
"""
import json
import os

import numpy as np

import safetensors_io as io

SIZES = {"gpt2": (12, 12, 768), "gpt2-medium": (24, 16, 1024), "gpt2-large": (36, 20, 1280),
         "gpt2-xl": (48, 25, 1600)}
GPT2_VOCAB = 50257
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
BUFFERS = ("attn.bias", "attn.masked_bias")


class HFError(Exception):
    """A file that is not a GPT-2 checkpoint this converter understands; the message says why."""


def _paths(src):
    """DIR (with model.safetensors and config.json) or DIR/model.safetensors (config.json beside it)."""
    if os.path.isdir(src):
        st, cfg = os.path.join(src, "model.safetensors"), os.path.join(src, "config.json")
    else:
        st, cfg = src, os.path.join(os.path.dirname(os.path.abspath(src)), "config.json")
    for p in (st, cfg):
        if not os.path.isfile(p):
            raise HFError(f"no {p} (a Hugging Face GPT-2 checkpoint is model.safetensors with config.json beside it)")
    return st, cfg


def read_hf(src):
    """(config dict, OrderedDict name -> numpy array with the "transformer." prefix removed)."""
    st, cfg_path = _paths(src)
    try:
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise HFError(f"{cfg_path}: not JSON ({e})")
    try:
        tensors, _ = io.read_safetensors(st)
    except (OSError, ValueError, KeyError, UnicodeDecodeError) as e:
        raise HFError(f"{st}: not a safetensors file this reader knows ({type(e).__name__}: {e})")
    out = {}
    for name, a in tensors.items():
        out[name[len("transformer."):] if name.startswith("transformer.") else name] = a
    return cfg, out


def handgrad_config(cfg):
    """handgrad's config (lib/checkpoint/checkpoint.cpp config_to_json's keys) from config.json."""
    if not isinstance(cfg, dict):
        raise HFError("config.json is not a JSON object")
    for key in ("vocab_size", "n_positions", "n_layer", "n_head", "n_embd"):
        if not isinstance(cfg.get(key), int) or cfg[key] < 1:
            raise HFError(f"config.json: '{key}' is missing or not a positive integer")
    if cfg.get("model_type", "gpt2") != "gpt2":
        raise HFError(f"config.json: model_type '{cfg['model_type']}' is not gpt2")
    act = cfg.get("activation_function", "gelu_new")
    gelu = {"gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu": "erf"}.get(act)
    if gelu is None:
        raise HFError(f"config.json: activation_function '{act}' (handgrad has gelu_new, gelu_pytorch_tanh, gelu)")
    checks = [(cfg.get("layer_norm_epsilon", 1e-5) == 1e-5, "layer_norm_epsilon must be 1e-5"),
              (cfg.get("n_inner") in (None, 4 * cfg["n_embd"]), "n_inner must be null or 4 * n_embd"),
              (cfg.get("scale_attn_weights", True), "scale_attn_weights must be true"),
              (not cfg.get("scale_attn_by_inverse_layer_idx", False), "scale_attn_by_inverse_layer_idx must be false"),
              (cfg.get("tie_word_embeddings", True), "tie_word_embeddings must be true"),
              (cfg["n_embd"] % cfg["n_head"] == 0, "n_embd must be a multiple of n_head"),
              (cfg["vocab_size"] == GPT2_VOCAB, f"vocab_size must be GPT-2's {GPT2_VOCAB} (its tokenizer's)")]
    for ok, msg in checks:
        if not ok:
            raise HFError(f"config.json: {msg}")
    return dict(vocab_size=cfg["vocab_size"], block_size=cfg["n_positions"], n_layer=cfg["n_layer"],
                n_head=cfg["n_head"], n_embd=cfg["n_embd"], dropout=0.0, bias=True, qkv_bias=True,
                bias_layout="gpt2", tie_weights=True, pos_encoding="learned", gelu=gelu, init="gpt2",
                norm="layernorm", mlp="gelu", rope_base=10000.0, qk_norm=False, logit_softcap=0.0,
                init_zero_proj=False)


def handgrad_name(hf):
    """The handgrad / nanoGPT name of a Hugging Face weight (prefix already removed)."""
    return "lm_head.weight" if hf == "lm_head.weight" else "transformer." + hf


def handgrad_shape(c, name):
    """The shape handgrad's table gives a tensor of the gpt2 layout (out, in for the linears)."""
    V, P, C = c["vocab_size"], c["block_size"], c["n_embd"]
    if name == "transformer.wte.weight": return (V, C)
    if name == "transformer.wpe.weight": return (P, C)
    out = {"attn.c_attn": 3 * C, "mlp.c_fc": 4 * C}.get(name.split(".", 3)[-1].rsplit(".", 1)[0], C)
    if name.endswith("mlp.c_proj.weight"): return (C, 4 * C)
    return (out, C) if name.endswith(".weight") and "ln_" not in name else (out,)


def to_handgrad_tensors(c, sd, names):
    """sd (read_hf's) -> [(handgrad name, float32 array)] in the order of `names` (handgrad's table,
    for handgrad config c). Conv1D weights transposed; buffers dropped; a present lm_head.weight
    must equal wte; every shape checked."""
    wanted = set(names)
    out = {}
    for hf, a in sd.items():
        if hf.startswith("h.") and any(hf.endswith("." + b) for b in BUFFERS):
            continue
        if hf == "lm_head.weight":
            if "wte.weight" not in sd or not np.array_equal(a, sd["wte.weight"]):
                raise HFError("lm_head.weight differs from wte.weight: handgrad's GPT-2 ties the two")
            continue
        name = handgrad_name(hf)
        if name not in wanted:
            raise HFError(f"unexpected tensor '{hf}' for this config")
        if a.dtype not in (np.float32, np.float16, np.float64):
            raise HFError(f"tensor '{hf}' has dtype {a.dtype}, not a float")
        a = a.astype(np.float32)
        conv1d = any(hf.endswith("." + w) for w in CONV1D)
        want = handgrad_shape(c, name)[::-1] if conv1d else handgrad_shape(c, name)  # as Hugging Face stores it
        if a.shape != want:
            raise HFError(f"tensor '{hf}' has shape {list(a.shape)}, expected {list(want)}")
        if conv1d:
            a = np.ascontiguousarray(a.T)  # Conv1D (in, out) -> linear (out, in)
        out[name] = a
    missing = [n for n in names if n not in out]
    if missing:
        raise HFError(f"{len(missing)} tensors missing, first: {missing[0]}")
    return [(n, out[n]) for n in names]


# ----------------------------------------------------------------------------------------------
# GPT-2's forward pass on Hugging Face's tensors as they are stored (float64, numpy): Conv1D is
# x @ W + b, the mask is the file's attn.bias buffer with attn.masked_bias where it is 0, GELU is
# gelu_new. It shares nothing with the conversion above, so it checks it.

def _layernorm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def hf_logits(cfg, sd, ids, forget_transpose=False):
    """Logits (T, V) for one sequence of token ids. forget_transpose=True computes attention's
    square c_proj as x @ W^T (the mistake a conversion can make without a shape error), so a
    caller can show that the comparison catches it."""
    g = {k: v.astype(np.float64) for k, v in sd.items()}
    T, C, NH = len(ids), cfg["n_embd"], cfg["n_head"]
    hs = C // NH
    act = cfg.get("activation_function", "gelu_new")
    x = g["wte.weight"][ids] + g["wpe.weight"][:T]  # (T, C)
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        h = _layernorm(x, g[p + "ln_1.weight"], g[p + "ln_1.bias"])
        qkv = h @ g[p + "attn.c_attn.weight"] + g[p + "attn.c_attn.bias"]  # (T, 3C)
        q, k, v = (qkv[:, j * C:(j + 1) * C].reshape(T, NH, hs).transpose(1, 0, 2) for j in range(3))
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(hs)  # (NH, T, T)
        mask = g[p + "attn.bias"][0, 0, :T, :T] != 0 if p + "attn.bias" in g else np.tril(np.ones((T, T), bool))
        fill = g[p + "attn.masked_bias"].item() if p + "attn.masked_bias" in g else -np.inf
        scores = np.where(mask, scores, fill)
        att = np.exp(scores - scores.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(1, 0, 2).reshape(T, C)
        w_proj = g[p + "attn.c_proj.weight"]
        x = x + y @ (w_proj.T if forget_transpose else w_proj) + g[p + "attn.c_proj.bias"]
        h = _layernorm(x, g[p + "ln_2.weight"], g[p + "ln_2.bias"])
        u = h @ g[p + "mlp.c_fc.weight"] + g[p + "mlp.c_fc.bias"]
        if act == "gelu":
            from math import erf
            u = 0.5 * u * (1 + np.vectorize(erf)(u / np.sqrt(2)))
        else:
            u = 0.5 * u * (1 + np.tanh(np.sqrt(2 / np.pi) * (u + 0.044715 * u ** 3)))
        x = x + u @ g[p + "mlp.c_proj.weight"] + g[p + "mlp.c_proj.bias"]
    x = _layernorm(x, g["ln_f.weight"], g["ln_f.bias"])
    return x @ g["wte.weight"].T


# ----------------------------------------------------------------------------------------------
# Random-weight models in Hugging Face's exact layout: each size's heads, at reduced width and depth.

def hf_config(size, n_layer, head_size, n_positions):
    """config.json as the hub's for `size`, with the depth, width and context cut down."""
    L, NH, C = SIZES[size]
    return {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
            "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
            "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": n_positions, "n_embd": NH * head_size,
            "n_head": NH, "n_inner": None, "n_layer": n_layer, "n_positions": n_positions, "resid_pdrop": 0.1,
            "scale_attn_weights": True, "summary_activation": None, "summary_first_dropout": 0.1,
            "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
            "vocab_size": GPT2_VOCAB, "handgrad_fixture": f"{size}: {L} layers of {C} cut to {n_layer} of "
                                                          f"{NH * head_size}, random weights"}


def hf_random_tensors(cfg, seed, prefix="", lm_head=False):
    """[(name, array)] in the order Hugging Face's state_dict lists them, with its buffers: weights
    N(0, 0.02²) (residual projections smaller), LayerNorm gains near 1 and every bias nonzero, so
    that a tensor put in the wrong place changes the logits."""
    rng = np.random.default_rng(seed)
    V, P, C, L = cfg["vocab_size"], cfg["n_positions"], cfg["n_embd"], cfg["n_layer"]

    def normal(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    t = [("wte.weight", normal(V, C)), ("wpe.weight", normal(P, C, std=0.01))]
    for i in range(L):
        p = f"h.{i}."
        t += [(p + "ln_1.weight", 1 + normal(C, std=0.1)), (p + "ln_1.bias", normal(C)),
              (p + "attn.bias", np.tril(np.ones((P, P), np.float32)).reshape(1, 1, P, P)),
              (p + "attn.masked_bias", np.array(-1e4, np.float32)),
              (p + "attn.c_attn.weight", normal(C, 3 * C, std=0.2)), (p + "attn.c_attn.bias", normal(3 * C)),
              (p + "attn.c_proj.weight", normal(C, C, std=0.1)), (p + "attn.c_proj.bias", normal(C)),
              (p + "ln_2.weight", 1 + normal(C, std=0.1)), (p + "ln_2.bias", normal(C)),
              (p + "mlp.c_fc.weight", normal(C, 4 * C, std=0.1)), (p + "mlp.c_fc.bias", normal(4 * C)),
              (p + "mlp.c_proj.weight", normal(4 * C, C, std=0.05)), (p + "mlp.c_proj.bias", normal(C))]
    t += [("ln_f.weight", 1 + normal(C, std=0.1)), ("ln_f.bias", normal(C))]
    t = [(prefix + n, a) for n, a in t]
    if lm_head:
        t.append(("lm_head.weight", t[0][1]))
    return t


def write_hf(out_dir, size, n_layer, head_size, n_positions, seed, prefix="", lm_head=False):
    cfg = hf_config(size, n_layer, head_size, n_positions)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    io.write_safetensors(os.path.join(out_dir, "model.safetensors"), hf_random_tensors(cfg, seed, prefix, lm_head),
                         {"format": "pt"})
    return cfg
