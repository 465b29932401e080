"""GCON's perturbed objective: the losses with their derivative bounds, the objective and its
minimisers."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

# ---------------------------------------------------------------------------------------------
# losses and their derivative bounds (Appendix F)
# ---------------------------------------------------------------------------------------------
def loss_constants(loss: str, classes: int, huber_delta: float = 0.2) -> tuple[float, float, float]:
    """(c1, c2, c3) = sups of |ℓ'|, |ℓ''|, |ℓ'''| of the per-entry loss (already divided by c)."""
    c = float(classes)
    if loss == "msm":
        return 1.0 / c, 1.0 / (4.0 * c), 1.0 / (6.0 * math.sqrt(3.0) * c)
    if loss == "huber":
        return huber_delta / c, 1.0 / c, 48.0 * math.sqrt(5.0) / (125.0 * c * huber_delta)
    raise ValueError(f"unknown loss {loss!r}")


def loss_terms(x: torch.Tensor, y: torch.Tensor, loss: str, classes: int, huber_delta: float
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-entry ℓ(x; y), ℓ'(x; y), ℓ''(x; y) (entries of the n1×c logit matrix)."""
    if loss == "msm":
        s = torch.sigmoid(x)
        value = (nn.functional.softplus(x) - y * x) / classes
        return value, (s - y) / classes, s * (1.0 - s) / classes
    r = x - y
    q = torch.sqrt(1.0 + (r / huber_delta) ** 2)
    return huber_delta**2 * (q - 1.0) / classes, r / (classes * q), 1.0 / (classes * q**3)



# ---------------------------------------------------------------------------------------------
# the perturbed objective and its minimisers
# ---------------------------------------------------------------------------------------------
@dataclass
class Problem:
    """L_priv(Θ) = (1/n1)Σ ℓ(ZΘ; Y) + (λ/2)‖Θ‖² + (1/n1)⟨B, Θ⟩ (λ = Λ + Λ' + wd); separable in columns."""

    z: torch.Tensor  # n1 × d (float64)
    y: torch.Tensor  # n1 × c (float64, 0/1)
    b: torch.Tensor  # d × c
    lam: float
    loss: str
    huber_delta: float
    #: the class count c that ℓ is divided by, where it is not the number of columns present (a
    #: problem made of copies of one column: :meth:`noise_columns`)
    c: int | None = None

    @property
    def classes(self) -> int:
        return self.y.size(1) if self.c is None else self.c

    def noise_columns(self, j: int, b: torch.Tensor) -> Problem:
        """Column j (d = 1) repeated once per noise value in `b` (length N, copy i with noise b[i]);
        ℓ keeps this problem's class count, so each copy is column j's own objective under that noise."""
        n1 = self.z.size(0)
        return Problem(self.z, self.y[:, j:j + 1].expand(n1, b.numel()), b[None, :], self.lam, self.loss,
                       self.huber_delta, self.classes)

    def solve_adam(self, epochs: int, lr: float) -> torch.Tensor:
        """:func:`solve_adam` on this problem: the minimiser GCON releases with ``optimizer=adam``."""
        return solve_adam(self, epochs, lr)

    def columns(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-column objective values (c,), gradient (d×c))."""
        n1 = self.z.size(0)
        value, d1, _ = loss_terms(self.z @ theta, self.y, self.loss, self.classes, self.huber_delta)
        f = value.sum(0) / n1 + 0.5 * self.lam * (theta**2).sum(0) + (self.b * theta).sum(0) / n1
        g = (self.z.T @ d1 + self.b) / n1 + self.lam * theta
        return f, g

    def objective(self, theta: torch.Tensor) -> torch.Tensor:
        return self.columns(theta)[0].sum()

    def hessians(self, theta: torch.Tensor) -> torch.Tensor:
        """c × d × d: Zᵀ diag(ℓ''_j) Z / n1 + λI."""
        n1, d = self.z.shape
        _, _, d2 = loss_terms(self.z @ theta, self.y, self.loss, self.classes, self.huber_delta)
        h = torch.einsum("ij,ik,il->jkl", d2, self.z, self.z) / n1
        return h + self.lam * torch.eye(d, dtype=h.dtype, device=h.device)


def solve_newton(p: Problem, tol: float, max_iter: int = 200, first_hessians: torch.Tensor | None = None
                 ) -> torch.Tensor:
    """Damped Newton per column from Θ = 0 (Armijo backtracking) until every ‖∇_j‖ ≤ tol.

    ``first_hessians``: ``p.hessians(0)`` where the caller has it (it does not depend on the noise
    term: a batch of runs computes it once)."""
    d, c = p.b.shape
    theta = torch.zeros(d, c, dtype=torch.float64, device=p.b.device)
    for it in range(max_iter):
        f, g = p.columns(theta)
        if g.norm(dim=0).max().item() <= tol:
            break
        h = first_hessians if it == 0 and first_hessians is not None else p.hessians(theta)
        step = -torch.linalg.solve(h, g.T.unsqueeze(-1)).squeeze(-1).T  # d × c
        slope = (g * step).sum(0)  # < 0
        t = torch.ones(c, dtype=torch.float64, device=theta.device)
        # near the optimum (tiny Newton decrement) take the full step: f differences are rounding
        full = -slope < 1e-14
        for _ in range(60):
            f_new, _ = p.columns(theta + step * t)
            ok = full | (f_new <= f + 1e-4 * t * slope)
            if bool(ok.all()):
                break
            t = torch.where(ok, t, 0.5 * t)
        theta = theta + step * t
    return theta


def solve_lbfgs(p: Problem, tol: float) -> torch.Tensor:
    """scipy L-BFGS-B per column in float64 from Θ = 0 (gtol = tol)."""
    from scipy.optimize import minimize

    d, c = p.b.shape
    cols = []
    for j in range(c):
        sub = Problem(p.z, p.y[:, j:j + 1], p.b[:, j:j + 1], p.lam, p.loss, p.huber_delta)
        sub_c = p.classes  # the loss is divided by the full c

        def fun(w: np.ndarray, sub: Problem = sub, sub_c: int = sub_c) -> tuple[float, np.ndarray]:
            th = torch.from_numpy(w).view(d, 1).to(p.z.device)
            value, d1, _ = loss_terms(sub.z @ th, sub.y, sub.loss, sub_c, sub.huber_delta)
            n1 = sub.z.size(0)
            f = value.sum() / n1 + 0.5 * sub.lam * (th**2).sum() + (sub.b * th).sum() / n1
            g = (sub.z.T @ d1 + sub.b) / n1 + sub.lam * th
            return float(f), g.view(-1).cpu().numpy()

        res = minimize(fun, np.zeros(d), jac=True, method="L-BFGS-B",
                       options={"gtol": tol, "ftol": 0.0, "maxiter": 20000, "maxcor": 30})
        cols.append(torch.from_numpy(res.x))
    return torch.stack(cols, 1).to(p.b.device)


def solve_adam(p: Problem, epochs: int, lr: float) -> torch.Tensor:
    """Full-batch Adam from Θ = 0 for `epochs` steps (the paper's experiments; approximate)."""
    d, c = p.b.shape
    theta = torch.zeros(d, c, dtype=torch.float64, device=p.b.device, requires_grad=True)
    opt = torch.optim.Adam([theta], lr=lr)
    for _ in range(epochs):
        opt.zero_grad()
        with torch.no_grad():
            _, g = p.columns(theta)
        theta.grad = g
        opt.step()
    return theta.detach()

