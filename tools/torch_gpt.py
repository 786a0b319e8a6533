"""torch_gpt.py — a PyTorch reference GPT for handgrad, written with torch.nn modules and autograd.

Nobody derived a gradient here: PyTorch's autograd does it. That is the point of the cross-check
(tools/crosscheck.py): handgrad's hand-written backward against an implementation whose
backward nobody on this project wrote.

The module layout is nanoGPT's (model.py), so state_dict() keys are exactly nanoGPT's:
  transformer.wte.weight, transformer.wpe.weight, transformer.h.{i}.ln_1.weight/.bias,
  transformer.h.{i}.attn.c_attn.weight/.bias, .attn.c_proj.*, .ln_2.*, .mlp.c_fc.*, .mlp.c_proj.*,
  transformer.ln_f.*, lm_head.weight
and it honours every handgrad config choice (lib/model/config.h):
  bias layout  gpt2: every bias; course: no Q/K/V bias; lesson14: no attention biases;
               none: no biases at all, LayerNorm included. A missing attention bias that
               nanoGPT's bias=True layout expects is a zero *buffer* (in state_dict, never
               trained), exactly as handgrad checkpoints store a zero tensor for it;
  tie_weights  lm_head.weight is the wte Parameter itself (nanoGPT's weight tying);
  gelu         erf (nn.GELU()) or tanh (approximate='tanh');
  pos_encoding learned (wpe) or sinusoidal: table[t,2i] = sin(t/10000^(2i/C)),
               table[t,2i+1] = cos(...), a non-persistent buffer (not in state_dict); or rope:
               no wpe, q and k of every head turned by θ_{t,i} = t·base^(−2i/hs), pairs
               (i, i + hs/2) (half-split, as GPT-NeoX and Hugging Face's Llama);
  norm         layernorm, or rmsnorm: x / √(mean(x²) + eps) · weight, no bias (names ln_1, ln_2,
               ln_f kept);
  mlp          gelu (c_fc 4C, c_proj), relu2 (relu(x)², same shapes), or swiglu: c_fc (2H, C)
               holds the gate W1 and the up projection W3 stacked, silu(gate) ⊙ up, then
               c_proj (C, H), H = ⌈8C/3⌉ rounded up to a multiple of 32;
  qk_norm      the gain-less RMSNorm of every head of q and k, after rope; scores still ·1/√hs;
  logit_softcap  S > 0: logits = S·tanh(z/S) before the loss;
  dropout      after the embeddings, on the attention probabilities, after each branch's
               projection (nanoGPT's four sites). By default torch's own random masks; the
               cross-check plugs in handgrad's hash masks (handgrad_keep below) instead.

Also here: loading a handgrad checkpoint (its safetensors file read by tools/safetensors_io.py).
"""
import json
import math
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# ----------------------------------------------------------------------------------------------
# safetensors files (tools/safetensors_io.py: stdlib + numpy, no torch)

from safetensors_io import read_safetensors, write_safetensors  # noqa: E402,F401


# ----------------------------------------------------------------------------------------------
# The config: handgrad's checkpoint JSON (lib/checkpoint/checkpoint.cpp config_to_json).

def normalize_config(c):
    """Fills handgrad's defaults for keys a nanoGPT model_args lacks; returns a new dict."""
    c = dict(c)
    if "bias_layout" not in c:
        bias, qkv = c.get("bias", True), c.get("qkv_bias", True)
        c["bias_layout"] = "none" if not bias else ("gpt2" if qkv else "course")
    c.setdefault("tie_weights", True)
    c.setdefault("pos_encoding", "learned")
    c.setdefault("gelu", "erf")
    c.setdefault("init", "gpt2")
    c.setdefault("dropout", 0.0)
    c.setdefault("norm", "layernorm")
    c.setdefault("mlp", "gelu")
    c.setdefault("rope_base", 10000.0)
    c.setdefault("qk_norm", False)
    c.setdefault("logit_softcap", 0.0)
    c.setdefault("init_zero_proj", False)
    c["bias"] = c["bias_layout"] != "none"
    c["qkv_bias"] = c["bias_layout"] == "gpt2"
    return c


def has_qkv_bias(c): return c["bias_layout"] == "gpt2"
def has_attn_proj_bias(c): return c["bias_layout"] in ("gpt2", "course")
def has_mlp_bias(c): return c["bias_layout"] != "none"
def has_ln_bias(c): return c["bias_layout"] != "none" and c["norm"] == "layernorm"


def swiglu_hidden(C):
    """lib/layers/swiglu.h: ⌈8C/3⌉ rounded up to a multiple of 32."""
    return ((8 * C + 2) // 3 + 31) // 32 * 32


def parameter_names(c):
    """handgrad's tensor table (lib/model/gpt.cpp walk_parameters): every trained tensor, in order."""
    names = ["transformer.wte.weight"]
    if c["pos_encoding"] == "learned":
        names.append("transformer.wpe.weight")
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}."
        for part, has_bias in (("ln_1", has_ln_bias), ("attn.c_attn", has_qkv_bias),
                               ("attn.c_proj", has_attn_proj_bias), ("ln_2", has_ln_bias),
                               ("mlp.c_fc", has_mlp_bias), ("mlp.c_proj", has_mlp_bias)):
            names.append(p + part + ".weight")
            if has_bias(c): names.append(p + part + ".bias")
    names.append("transformer.ln_f.weight")
    if has_ln_bias(c): names.append("transformer.ln_f.bias")
    if not c["tie_weights"]:
        names.append("lm_head.weight")
    return names


def standin_names(c):
    """Zero attention biases stored so a nanoGPT bias=True model loads the weights (as
    lib/checkpoint/checkpoint.cpp standin_biases): name -> length."""
    out = OrderedDict()
    if not has_mlp_bias(c):
        return out
    C = c["n_embd"]
    for i in range(c["n_layer"]):
        p = f"transformer.h.{i}.attn."
        if not has_qkv_bias(c): out[p + "c_attn.bias"] = 3 * C
        if not has_attn_proj_bias(c): out[p + "c_proj.bias"] = C
    return out


# ----------------------------------------------------------------------------------------------
# handgrad's dropout masks (lib/core/rng.h, lib/model/gpt_choices.h dropout_at), recomputed bit for bit.

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def _mix64_int(z):
    z &= _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def _mix64_np(z):
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def handgrad_keep(step_key, layer, site, n, p):
    """keep_i = hash_uniform(key, i) >= p for i < n, with key = mix64(step_key ^ mix64((layer+1)*4
    + site)); sites: 0 embeddings, 1 attention probabilities, 2 attention branch, 3 MLP branch."""
    key = _mix64_int(step_key ^ _mix64_int((layer + 1) * 4 + site))
    i = np.arange(1, n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        u = (_mix64_np(np.uint64(key) + np.uint64(_GOLDEN) * i) >> np.uint64(40)).astype(np.float64)
    return u * (1.0 / 16777216.0) >= float(np.float32(p))


class Dropout(nn.Module):
    """nn.Dropout, except that when the model's dropout_key is set, the mask is handgrad's."""

    def __init__(self, p, layer, site, shared):
        super().__init__()
        self.p, self.layer, self.site, self.shared = p, layer, site, shared

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        key = self.shared.get("key")
        if key is None:
            return F.dropout(x, self.p, True)
        keep = handgrad_keep(key, self.layer, self.site, x.numel(), self.p)
        if x.dtype == torch.float32:  # handgrad: scale = 1.0f / (1.0f - p) in float
            scale = np.float32(1) / (np.float32(1) - np.float32(self.p))
        else:
            scale = 1.0 / (1.0 - float(np.float32(self.p)))
        mult = torch.from_numpy(keep.astype(np.float64) * float(scale)).to(x.dtype).view(x.shape)
        return x * mult


# ----------------------------------------------------------------------------------------------
# The model, nanoGPT's layout.

def _linear(cin, cout, bias, standin):
    lin = nn.Linear(cin, cout, bias=bias)
    if not bias and standin:  # a zero bias nanoGPT's layout expects: in state_dict, never trained
        del lin.bias
        lin.register_buffer("bias", torch.zeros(cout))
    return lin


# handgrad's LayerNorm (and RMSNorm) eps is the float 1e-5f in both precisions (lib/layers/layernorm.h); PyTorch
# rounds eps to float32 for float32 tensors anyway, and in float64 the difference (~1e-13 in eps)
# would show as ~1e-10 in the outputs, so the reference uses the same float32-rounded value.
LN_EPS = float(np.float32(1e-5))


class LayerNorm(nn.Module):
    """nanoGPT's LayerNorm: weight, and a bias unless the layout has none. eps 1e-5 (LN_EPS)."""

    def __init__(self, C, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))
        self.bias = nn.Parameter(torch.zeros(C)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, LN_EPS)


class RMSNorm(nn.Module):
    """x / √(mean(x²) + eps) · weight over the last dimension, eps as LayerNorm's (torch 1.13 has
    no F.rms_norm). With weight None, the gain-less form QK-norm uses."""

    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return rms_norm(x, self.weight)


def rms_norm(x, weight=None):
    y = x * (1.0 / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + LN_EPS))
    return y if weight is None else y * weight


def make_norm(c):
    return RMSNorm(c["n_embd"]) if c["norm"] == "rmsnorm" else LayerNorm(c["n_embd"], has_ln_bias(c))


def rope_table(T, hs, base):
    """cos θ, sin θ (T, hs/2), θ_{t,i} = t·base^(−2i/hs), in float64 (lib/layers/rope.h)."""
    i = np.arange(hs // 2, dtype=np.float64)
    angle = np.arange(T, dtype=np.float64)[:, None] * np.power(base, -2.0 * i / hs)[None, :]
    return np.cos(angle), np.sin(angle)


def rope(x, cos, sin):
    """x (B, nh, T, hs): pair (i, i + hs/2) turned by θ_{t,i}."""
    h = x.size(-1) // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class CausalSelfAttention(nn.Module):
    def __init__(self, c, layer, shared):
        super().__init__()
        C, standin = c["n_embd"], has_mlp_bias(c)
        self.n_head, self.qk_norm = c["n_head"], c["qk_norm"]
        self.c_attn = _linear(C, 3 * C, has_qkv_bias(c), standin)
        self.c_proj = _linear(C, C, has_attn_proj_bias(c), standin)
        self.attn_dropout = Dropout(c["dropout"], layer, 1, shared)
        self.resid_dropout = Dropout(c["dropout"], layer, 2, shared)
        T = c["block_size"]
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)), persistent=False)

    def forward(self, x, rope_cs=None):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if rope_cs is not None:  # rotate, then normalise (lib/layers/qknorm.h)
            cos, sin = rope_cs[0][:T], rope_cs[1][:T]
            q, k = rope(q, cos, sin), rope(k, cos, sin)
        if self.qk_norm:
            q, k = rms_norm(q), rms_norm(k)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))  # (B, nh, T, T)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, c, layer, shared):
        super().__init__()
        C, self.kind = c["n_embd"], c["mlp"]
        self.hidden = swiglu_hidden(C) if self.kind == "swiglu" else 4 * C
        width = 2 * self.hidden if self.kind == "swiglu" else self.hidden  # swiglu: [W1; W3]
        self.c_fc = nn.Linear(C, width, bias=has_mlp_bias(c))
        self.gelu = nn.GELU(approximate="tanh" if c["gelu"] == "tanh" else "none")
        self.c_proj = nn.Linear(self.hidden, C, bias=has_mlp_bias(c))
        self.dropout = Dropout(c["dropout"], layer, 3, shared)

    def act(self, h):
        if self.kind == "swiglu":
            gate, up = h.split(self.hidden, dim=-1)
            return F.silu(gate) * up
        if self.kind == "relu2":
            return F.relu(h).square()
        return self.gelu(h)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, c, layer, shared):
        super().__init__()
        self.ln_1 = make_norm(c)
        self.attn = CausalSelfAttention(c, layer, shared)
        self.ln_2 = make_norm(c)
        self.mlp = MLP(c, layer, shared)

    def forward(self, x, rope_cs=None):
        x = x + self.attn(self.ln_1(x), rope_cs)
        return x + self.mlp(self.ln_2(x))


def sinusoidal_table(T, C):
    """table[t, 2i] = sin(t·ω_i), table[t, 2i+1] = cos(t·ω_i), ω_i = 10000^(−2i/C); in float64."""
    t = np.arange(T, dtype=np.float64)[:, None]
    two_i = (np.arange(C) - np.arange(C) % 2).astype(np.float64)[None, :]
    angle = t * np.power(10000.0, -two_i / C)
    return np.where(np.arange(C)[None, :] % 2 == 0, np.sin(angle), np.cos(angle))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = self.config = normalize_config(config)
        V, C = c["vocab_size"], c["n_embd"]
        self.shared = {"key": None}  # the dropout key every Dropout reads (None: torch's masks)
        modules = dict(wte=nn.Embedding(V, C))
        if c["pos_encoding"] == "learned":
            modules["wpe"] = nn.Embedding(c["block_size"], C)
        modules.update(drop=Dropout(c["dropout"], 0, 0, self.shared),  # handgrad: layer 0, site 0
                       h=nn.ModuleList([Block(c, i, self.shared) for i in range(c["n_layer"])]),
                       ln_f=make_norm(c))
        self.transformer = nn.ModuleDict(modules)
        if c["pos_encoding"] == "sinusoidal":
            self.register_buffer("pos_table", torch.from_numpy(sinusoidal_table(c["block_size"], C)).float(),
                                 persistent=False)
        self.set_rope_tables(torch.float32)
        self.lm_head = nn.Linear(C, V, bias=False)
        if c["tie_weights"]:
            self.lm_head.weight = self.transformer.wte.weight  # one Parameter, two uses

    def set_rope_tables(self, dtype):
        """cos, sin computed in float64 and rounded once to dtype, as handgrad's rope_table."""
        c = self.config
        self.rope_cs = None
        if c["pos_encoding"] == "rope":
            cos, sin = rope_table(c["block_size"], c["n_embd"] // c["n_head"], float(c["rope_base"]))
            self.rope_cs = (torch.from_numpy(cos).to(dtype), torch.from_numpy(sin).to(dtype))

    def to_double(self):
        """Float64 everywhere; the sinusoidal and rope tables are recomputed in double, not widened."""
        self.double()
        if self.config["pos_encoding"] == "sinusoidal":
            c = self.config
            self.pos_table = torch.from_numpy(sinusoidal_table(c["block_size"], c["n_embd"]))
        self.set_rope_tables(torch.float64)
        return self

    def set_dropout_key(self, key):
        self.shared["key"] = key

    def forward(self, idx, targets=None):
        B, T = idx.shape
        tr = self.transformer
        if "wpe" in tr:
            x = tr.wte(idx) + tr.wpe(torch.arange(T))
        elif self.config["pos_encoding"] == "sinusoidal":
            x = tr.wte(idx) + self.pos_table[:T]
        else:  # rope: positions enter inside attention
            x = tr.wte(idx)
        x = tr.drop(x)  # (B, T, C)
        for block in tr.h:
            x = block(x, self.rope_cs)
        logits = self.lm_head(tr.ln_f(x))  # (B, T, V)
        cap = float(self.config["logit_softcap"])
        if cap > 0:
            logits = cap * torch.tanh(logits / cap)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def trained_parameters(self):
        """(name, Parameter) in handgrad's table order; a tied lm_head is not listed twice."""
        sd = dict(self.named_parameters())
        return [(n, sd[n]) for n in parameter_names(self.config)]

    def init_gpt2(self, seed):
        """nanoGPT's _init_weights: N(0, 0.02²), residual projections N(0, 0.02²/2L), biases 0."""
        g = torch.Generator().manual_seed(seed)
        L = self.config["n_layer"]
        with torch.no_grad():
            for name, p in self.named_parameters():
                if ".ln_" in name or name.startswith("transformer.ln_f"):
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                elif name.endswith("bias"):
                    p.zero_()
                else:
                    std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                    p.normal_(0.0, std, generator=g)
        return self


# ----------------------------------------------------------------------------------------------
# handgrad checkpoints

def load_handgrad(path, dtype=torch.float32):
    """A handgrad checkpoint -> (GPT in eval mode, vocab list, metadata dict). Loads with
    strict=True: every tensor the module has must be in the file, and nothing else (optimizer
    moments, optim.m./optim.v., are skipped)."""
    tensors, meta = read_safetensors(path)
    config = json.loads(meta["config"])
    model = GPT(config)
    sd = OrderedDict((k, torch.from_numpy(v)) for k, v in tensors.items() if not k.startswith("optim."))
    want = model.state_dict().keys()
    missing, unexpected = [k for k in want if k not in sd and k != "lm_head.weight"], [k for k in sd if k not in want]
    if missing or unexpected:  # one short line rather than load_state_dict's list of every key
        raise ValueError(f"{path}: {len(missing)} tensors missing (first: {missing[:2]}), "
                         f"{len(unexpected)} unexpected (first: {unexpected[:2]})")
    if model.config["tie_weights"]:
        sd["lm_head.weight"] = sd["transformer.wte.weight"]
    model.load_state_dict(sd, strict=True)
    if dtype == torch.float64:
        model.to_double()
    model.eval()
    return model, json.loads(meta["vocab"]), meta
