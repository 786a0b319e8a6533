#!/usr/bin/env python3
"""muon_reference.py — Muon in PyTorch, the reference lib/optim/muon.h is checked against (by
tools/crosscheck.py, `make crosscheck`).

For each weight W (rows, cols) with gradient G and momentum buffer M (starts at 0):

    M <- mu*M + G;  U = G + mu*M                     Nesterov momentum
    O = NS5(U / (||U||_F + 1e-7))                    quintic Newton-Schulz, (a, b, c) below,
                                                     on U^T when rows > cols, transposed back
    W <- W*(1 - lr*wd) - lr * 0.2*sqrt(max(rows, cols)) * O

Written from that description with torch operations only, on the tensors' own dtype.
"""
import torch

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)


def newton_schulz5(g, steps=5, eps=1e-7):
    """The orthogonal factor of g, approximately: five steps of X <- aX + (bA + cA^2)X, A = XX^T."""
    a, b, c = NS_COEFFICIENTS
    tall = g.size(0) > g.size(1)
    x = g.T if tall else g
    x = x / (torch.linalg.norm(x) + eps)
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


class Muon(torch.optim.Optimizer):
    """Muon for 2-D weights; every parameter given to it must be a matrix."""

    def __init__(self, params, lr, momentum=0.95, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                assert p.dim() == 2, "Muon trains matrices only"
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.mul_(mu).add_(p.grad)
                update = newton_schulz5(p.grad + mu * buf)
                p.mul_(1 - lr * wd)
                p.add_(update, alpha=-lr * 0.2 * max(p.shape) ** 0.5)


def is_muon_parameter(name, p):
    """A block's linear weight: c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj (lib/optim/muon.h's rule)."""
    return p.dim() == 2 and name.startswith("transformer.h.") and name.endswith(".weight") and ".ln_" not in name


if __name__ == "__main__":  # a quick look: the singular values NS5 leaves
    torch.manual_seed(0)
    s = torch.linalg.svdvals(newton_schulz5(torch.randn(128, 512, dtype=torch.float64)))
    print(f"NS5 of a 128x512 Gaussian: singular values in [{s.min():.3f}, {s.max():.3f}]")
