"""HeterPoisson: node-level DP-SGD for GNNs (Xiang, Wang & Wang, IEEE S&P 2024).

Paper: "Preserving Node-level Privacy in Graph Neural Networks" (papers/heterpoisson.txt,
spec specs/heterpoisson.md).

Mechanism (one training step, Algorithm 1 with the Heter-Poisson sampler of Algorithms 2-3)
-------------------------------------------------------------------------------------------
1. Central nodes: every training node is drawn independently with probability ``q_b``
   (``sampling_rate``).
2. Neighbour sampling: every central node ``i`` keeps each in-neighbour ``j`` (an edge
   ``j → i``) independently with probability ``min(1, M / outdeg_G(j))`` (``M`` = ``neighbors``).
   Out-degrees are taken in the whole public graph ``G`` (``graph.public_outdeg`` when the graph
   carries it, else the given ``edge_index``). Peripheral candidates are all in-neighbours
   (training nodes and the non-sensitive non-training nodes, as in the authors' code).
3. Overlap removal: a peripheral copy of *any* central node of the batch is dropped (NULL =
   absent), whatever the order of the batch, so no node is ever central and peripheral at once.
   An isolated central node gets a single-node sub-graph.
4. Each star sub-graph ``{i} ∪ N_i`` is one example: its loss is the central node's cross
   entropy; per-sub-graph gradients (torch.func) are clipped to ``clip_norm`` (0.5) in ℓ2 over
   all parameters and summed.
5. Noise on the sum: SML ``√W · s · N(0, I_d)`` with ONE ``W ~ Exp(1)`` per step for the whole
   d-dimensional gradient (``noise="sml"``), or Gaussian ``s · N(0, I_d)`` (``noise="gaussian"``);
   ``s = noise_multiplier · 2·clip_norm`` (the paper's σ is in units of 2c = 1). The noisy sum is
   divided by the *expected* batch size ``q_b · n_train`` and fed to Adam (lr 0.01, [code]).
6. Exactly the accounted ``T`` steps are run (``steps``, or ``ceil(epochs / q_b)``).

Model: K = 1 message-passing layer (only 1-hop stars exist), backbones ``gcn`` (symmetric
normalisation with degrees inside the undirected star), ``sage`` (mean over N_i ∪ {i}), ``gin``
(Σ N_i + (1+λ) x_i, λ learnable); then Linear(f, hidden) → ELU → Linear(hidden, C).
Inference (``api``): each query node samples up to ``test_neighbors`` (13) in-neighbours uniformly
among *non-training* nodes (the paper's inference privacy), with a sampling seed fixed at fit
time (so a query is deterministic; the randomness is not privacy noise).

Unit and accountant
-------------------
Node-level, add/remove one training node with its features, label and all incident (directed)
edges, degrees fixed by the public graph (the paper's S2). The accountant is Theorem 2: per-step
RDP ``r(α) = ln E_{k~ρ} B_k(α) / (α−1)`` with ``ρ = q_b·δ_{0.5} + (1−q_b)·Poisson(q_b M)`` (the
D→∞ worst case of the binomial mixture; closed form, no truncation), ``B_k`` the 1-D Laplace
Rényi moment with scale ``σ/√2`` -- exact (``accountant="exact"``, [code], default) or with the
paper's looser ``+1/2`` second term (``accountant="paper"``); T-fold composition and the
Balle et al. 2020 conversion over α ∈ linspace(1.0001, 10, 100) ∪ {11..256}. ``noise="gaussian"``
replaces ``ln B_k`` by ``α(α−1)k²/(2σ²)`` with ``k ~ Bin(D, q_b·min(1, M/D))`` at the largest
out-degree D (``max_degree``, default |V|−1: the theorem's range). ``remove_overlap=False`` (the
Fig. 6 ablation) uses ``ρ(k+½) = q_b·Pois(k)``. δ defaults to ``n_train^{-1.1}``; ``q_b``
defaults to ``min(1, batch_size / n_train)`` with the paper's expected batch 4096 (so q_b = 1 on
the small harness graphs: pass ``sampling_rate`` for amplification). ``noise_multiplier`` set in
the config overrides calibration (the claim then says which ε that σ gets).

Release views
-------------
* ``trace``: a :class:`HeterPoissonTrace`, one :class:`TraceStep` per step run, with
  ``noisy`` (the released noisy summed gradient, flat float32 vector of length d, parameters in
  ``model.parameters()`` order, see ``trace.shapes``), ``central`` (the batch's central node ids),
  ``canary_in`` (whether the canary gradient was added; None without canary) and ``clean`` (the
  noiseless clipped sum including the canary: *instrumentation* for white-box auditors who know the
  rest of the batch, not part of the paper's release) and ``canary_scale`` (the whole-node canary's
  multiplier of g_c at that step, see below; None otherwise). ``trace.noisy_matrix()`` stacks them (T×d).
* ``weights``: the val-selected checkpoint; ``api``: ``predict(graph, nodes=None)`` → softmax.

Gradient-canary hook
--------------------
``fit(graph, rng, canary_gradient=g_c, canary_node=z)`` (or the graph attributes
``graph.canary_gradient`` / ``graph.canary_node``) adds ``g_c`` -- a length-d vector, or a T×d
matrix with one row per step run, already at the intended norm (it is NOT clipped) -- to the
clipped sum at every step where the canary is sampled. With ``canary_node = z`` (a training node)
the canary is included exactly when z is drawn central (z's own sub-graph gradient still counts);
without it, the canary is a virtual extra example with its own Poisson(q_b) coin drawn from a
generator split off ``rng`` at the start of fit, so two worlds that differ only by the canary see
identical batches and identical noise. ``HeterPoisson.dimension(graph)`` gives d.

Whole-node canary: with ``canary_whole_node=True`` (or ``graph.canary_whole_node``) the canary stands
for everything node z can do to a step: its own star when z is central (norm c) and every other
star in which z survives overlap removal as a peripheral (2c each, a star with vs without z). The
step adds ``scale_t · g_c`` with ``scale_t = 1[z central] + 2·m_t``, m_t the number of those other
stars, read off the sampled batch (no random draw, so both worlds see the same m_t; z and its edges
are in the graph in both). Each step records ``canary_scale = scale_t`` in *both* worlds (world 0
sets ``canary_node`` and the flag without a gradient): auditor instrumentation like ``clean``.
The correct sampler at ``sampling_rate = 1`` gives scale_t = 1 at every step (z is central and
never a peripheral): exactly the ``δ_{1/2}`` the accountant charges. ``order-overlap`` raises it at
q_b = 1 (z survives in the stars of out-neighbours that come earlier in the shuffled batch);
``isolated-fallback`` only where z is not central (q_b < 1): overlap removal drops a central z's
fallback copies.

Suspected flaw in the paper (auditable with the ``trace`` view) [ours]
---------------------------------------------------------------------
Lemma 1 (a spherical noise's d-dimensional Rényi divergence equals the 1-D one) holds for the
Gaussian but not for SML when d ≥ 3: the released vector's norm (||noise||² = W·s²·χ²_d, with
χ²_d/d → 1) reveals W, and given W the step is a Gaussian mechanism with std s·√W, whose privacy
loss is unbounded as W → 0 (the d-dimensional SML density is unbounded at its centre; D_α = ∞ for
α > d/(d−2)). In the W-revealed limit the default csbm run (q_b = 1, T = 9, σ = 1.41 for ε = 4)
has δ(4) ≈ 0.21 against the claimed 3.3e-3, and on the paper's Facebook setting a single step
already has δ(2) ≥ 6e-5 > 1.63e-5. A full-vector auditor that estimates W from the norm of the
released (minus known) gradient and applies the conditional Gaussian likelihood ratio should
exceed the claim.

Shapes: x is n×f; d = f·h + h + h·C + C (+1 for GIN's λ). Cost: one fit on csbm (q_b = 1,
T = 9) takes ≈ 0.1-0.5 s; Cora ≈ 6 s, CiteSeer ≈ 15 s (per-example gradients of d ≈ 0.2-0.5 M).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import logsumexp
from scipy.stats import binom
from torch import nn

from targets.accounting import calibrate_decreasing, check_delta, rdp_to_dp
from targets.base import Claim, Release, Target, TargetConfig, child_generator, seeded
from targets.dpsgd import assign_flat_grad, canary_from, clip_rows, flatten, per_example_gradients
from targets.trace import HeterPoissonTrace, TraceStep

#: α grid: the authors' linspace(1.0001, 10, 100), plus the integers 11..256 (spec §4.2).
ORDERS: tuple[float, ...] = tuple(float(a) for a in np.linspace(1.0001, 10.0, 100)) + tuple(
    float(a) for a in range(11, 257)
)
NOISES = ("sml", "gaussian")
ACCOUNTANTS = ("exact", "paper")
BACKBONES = ("gcn", "sage", "gin")
_CHUNK = 512  # per-example gradients are computed in chunks of this many sub-graphs


# ---------------------------------------------------------------------------------------------
# accounting (Theorem 2 and variants)
# ---------------------------------------------------------------------------------------------
def _log_poisson_laplace_moment(a: np.ndarray, b: float, shift: float, lam: float, exact: bool) -> np.ndarray:
    """ln E_{k~Poisson(lam)} B_{k+shift}(α) for the 1-D Laplace pair with scale b (closed form).

    exact: B_k = α/(2α−1)·e^{(α−1)k/b} + (α−1)/(2α−1)·e^{−αk/b}; paper: second term 1/2.
    E_Pois[e^{ck}] = exp(lam·(e^c − 1)).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        t1 = np.log(a / (2 * a - 1)) + (a - 1) * shift / b + lam * np.expm1((a - 1) / b)
        if exact:
            t2 = np.log((a - 1) / (2 * a - 1)) - a * shift / b + lam * np.expm1(-a / b)
        else:
            t2 = np.full_like(a, math.log(0.5))
        out = np.logaddexp(t1, t2)
    return np.where(np.isnan(out), np.inf, out)


def sml_log_moment(orders, noise_multiplier: float, sampling_rate: float, neighbors: float, *,
                   exact: bool = True, remove_overlap: bool = True) -> np.ndarray:
    """ln Σ_k ρ(k) B_k(α) (Theorem 2) with ρ's worst case D → ∞: (1−q)·Poisson(qM) + q·δ_{½}."""
    a = np.asarray(orders, dtype=float)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    b = noise_multiplier / math.sqrt(2.0)
    q, lam = float(sampling_rate), float(sampling_rate) * float(neighbors)
    parts = []
    if q < 1:
        parts.append(math.log1p(-q) + _log_poisson_laplace_moment(a, b, 0.0, lam, exact))
    if q > 0:
        parts.append(math.log(q) + _log_poisson_laplace_moment(a, b, 0.5, 0.0 if remove_overlap else lam, exact))
    with np.errstate(invalid="ignore"):
        return np.logaddexp.reduce(np.stack(parts), axis=0)


_BINOM_CACHE: dict[tuple[int, float], tuple[np.ndarray, np.ndarray]] = {}


def _binom_support(max_degree: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    key = (int(max_degree), float(p))
    if key not in _BINOM_CACHE:
        ks = np.arange(max_degree + 1, dtype=float)
        lw = binom.logpmf(ks, max_degree, p)
        keep = np.isfinite(lw)
        _BINOM_CACHE.clear()
        _BINOM_CACHE[key] = (ks[keep], lw[keep])
    return _BINOM_CACHE[key]


def gaussian_log_moment(orders, noise_multiplier: float, sampling_rate: float, neighbors: float,
                        max_degree: int, *, remove_overlap: bool = True) -> np.ndarray:
    """ln Σ_k ρ_D(k) e^{α(α−1)k²/(2σ²)} with ρ_D = (1−q)·Bin(D, q·min(1, M/D)) + q·δ_{½} at D = max_degree."""
    a = np.asarray(orders, dtype=float)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    q = float(sampling_rate)
    if max_degree <= 0:
        ks, lw = np.zeros(1), np.zeros(1)
    else:
        ks, lw = _binom_support(max_degree, q * min(1.0, neighbors / max_degree))
    c = a * (a - 1) / (2.0 * noise_multiplier**2)
    parts = []
    if q < 1:
        parts.append(math.log1p(-q) + logsumexp(lw[:, None] + np.outer(ks**2, c), axis=0))
    if q > 0:
        if remove_overlap:
            parts.append(math.log(q) + 0.25 * c)
        else:
            parts.append(math.log(q) + logsumexp(lw[:, None] + np.outer((ks + 0.5) ** 2, c), axis=0))
    return np.logaddexp.reduce(np.stack(parts), axis=0)


def heterpoisson_epsilon(noise_multiplier: float, *, sampling_rate: float, steps: int, delta: float,
                         neighbors: float = 1, noise: str = "sml", accountant: str = "exact",
                         remove_overlap: bool = True, max_degree: int | None = None,
                         orders=ORDERS) -> tuple[float, float]:
    """(ε, best α) of T steps (Theorem 2 + RDP composition + Balle et al. 2020 conversion)."""
    check_delta(delta)
    a = np.asarray(orders, dtype=float)
    if noise == "sml":
        lm = sml_log_moment(a, noise_multiplier, sampling_rate, neighbors,
                            exact=(accountant == "exact"), remove_overlap=remove_overlap)
    elif noise == "gaussian":
        if max_degree is None:
            raise ValueError("the Gaussian accountant needs max_degree")
        lm = gaussian_log_moment(a, noise_multiplier, sampling_rate, neighbors, max_degree,
                                 remove_overlap=remove_overlap)
    else:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    with np.errstate(invalid="ignore", over="ignore"):
        rdp = steps * lm / (a - 1)
    return rdp_to_dp(a, rdp, delta, conversion="improved")


def sml_sample(shape_d: int, std: float, rng: torch.Generator, *, per_coordinate: bool = False,
               dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """One draw of LAP(0, std² I_d): √W·std·Z with a single W ~ Exp(1) (per coordinate if asked)."""
    w = torch.empty(shape_d if per_coordinate else 1, dtype=torch.float64).exponential_(1.0, generator=rng)
    z = torch.randn(shape_d, generator=rng, dtype=torch.float64)
    return (w.sqrt() * std * z).to(dtype)


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------
@dataclass
class HeterPoissonConfig(TargetConfig):
    """HeterPoisson hyperparameters (spec §5 defaults; [code] where the paper is silent).

    Args:
        sampling_rate: q_b; None → min(1, batch_size / n_train) (the paper's 4096 rule).
        batch_size: expected batch for the paper's q_b rule (4096).
        epochs: E; steps T = ceil(E / q_b) when ``steps`` is None (paper: 9).
        steps: T, the accounted (and run) number of steps; None → ceil(epochs / q_b).
        neighbors: M, the neighbour multiplier (1 for auditing; the paper tunes 1-4).
        test_neighbors: N_test, neighbours per query node at inference (13).
        noise: ``sml`` (paper) or ``gaussian`` (Fig. 5 variant).
        accountant: ``exact`` (exact Laplace B_k, [code]) or ``paper`` (Theorem 2's ``+1/2`` term).
        backbone: ``gcn``, ``sage`` or ``gin`` (K = 1).
        hidden: hidden width (128). clip_norm: c (0.5). lr: Adam learning rate (0.01).
        remove_overlap: enforce step 5 (True; False is the Fig. 6 ablation, accounted as such).
        noise_multiplier: σ in units of 2c; None → calibrated from epsilon.
        max_degree: D for the Gaussian accountant; None → |V| − 1.
        eval_every: steps between validation checkpoints (None → about 10 evaluations per run).
        unit: ``node`` (the only level).
    """

    sampling_rate: float | None = None
    batch_size: int = 4096
    epochs: float = 9.0
    steps: int | None = None
    neighbors: int = 1
    test_neighbors: int = 13
    noise: str = "sml"
    accountant: str = "exact"
    backbone: str = "gin"
    hidden: int = 128
    clip_norm: float = 0.5
    lr: float = 0.01
    remove_overlap: bool = True
    noise_multiplier: float | None = None
    max_degree: int | None = None
    eval_every: int | None = None
    unit: str = "node"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sampling_rate is not None and not (0.0 < float(self.sampling_rate) <= 1.0):
            raise ValueError(f"The 'sampling_rate' parameter must be a float in (0, 1], got {self.sampling_rate!r}")
        _int_at_least("batch_size", self.batch_size, 1)
        if not (isinstance(self.epochs, (int, float)) and self.epochs > 0):
            raise ValueError(f"The 'epochs' parameter must be a number > 0, got {self.epochs!r}")
        if self.steps is not None:
            _int_at_least("steps", self.steps, 1)
        _int_at_least("neighbors", self.neighbors, 1)
        _int_at_least("test_neighbors", self.test_neighbors, 0)
        _int_at_least("hidden", self.hidden, 1)
        if self.noise not in NOISES:
            raise ValueError(f"The 'noise' parameter must be one of {', '.join(NOISES)}, got {self.noise!r}")
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(
                f"The 'accountant' parameter must be one of {', '.join(ACCOUNTANTS)}, got {self.accountant!r}")
        if self.backbone not in BACKBONES:
            raise ValueError(
                f"The 'backbone' parameter must be one of {', '.join(BACKBONES)}, got {self.backbone!r}")
        if not (isinstance(self.clip_norm, (int, float)) and self.clip_norm > 0):
            raise ValueError(f"The 'clip_norm' parameter must be a float > 0, got {self.clip_norm!r}")
        if not (isinstance(self.lr, (int, float)) and self.lr > 0):
            raise ValueError(f"The 'lr' parameter must be a float > 0, got {self.lr!r}")
        if self.noise_multiplier is not None and not (self.noise_multiplier > 0):
            raise ValueError(f"The 'noise_multiplier' parameter must be a float > 0, got {self.noise_multiplier!r}")
        if self.max_degree is not None:
            _int_at_least("max_degree", self.max_degree, 0)
        if self.eval_every is not None:
            _int_at_least("eval_every", self.eval_every, 1)
        if self.unit != "node":
            raise ValueError(f"The 'unit' parameter must be 'node' (HeterPoisson is node-level), got {self.unit!r}")


def _int_at_least(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"The {name!r} parameter must be an int >= {low}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# release objects
# ---------------------------------------------------------------------------------------------
@dataclass
class Batch:
    """A Heter-Poisson batch: central nodes and kept peripheral edges (src → dst central)."""

    central: torch.Tensor
    src: torch.Tensor
    dst: torch.Tensor


class StarNet(nn.Module):
    """One message-passing layer on a star + MLP head; input rows are [x_i, Σ_{j∈N_i} x_j, |N_i|]."""

    def __init__(self, features: int, hidden: int, classes: int, backbone: str) -> None:
        super().__init__()
        self.features, self.backbone = features, backbone
        self.lin1 = nn.Linear(features, hidden)
        self.lin2 = nn.Linear(hidden, classes)
        if backbone == "gin":
            self.gin_eps = nn.Parameter(torch.zeros(1))

    def forward(self, packed: torch.Tensor) -> torch.Tensor:
        f = self.features
        x, s, n = packed[:, :f], packed[:, f:2 * f], packed[:, 2 * f:2 * f + 1]
        if self.backbone == "gcn":  # undirected star with self-loops: d_i = n+1, d_j = 2
            a = x / (n + 1) + s / torch.sqrt(2 * (n + 1))
        elif self.backbone == "sage":
            a = (x + s) / (n + 1)
        else:
            a = s + (1 + self.gin_eps) * x
        return self.lin2(F.elu(self.lin1(a)))


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class HeterPoisson(Target[HeterPoissonConfig]):
    """HeterPoisson + SML node-level DP-SGD (see the module docstring)."""

    name: ClassVar[str] = "heterpoisson"
    Config: ClassVar[type[TargetConfig]] = HeterPoissonConfig
    levels: tuple[str, ...] = ("api", "weights", "trace")
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "adds no noise to the summed gradients while claiming the calibrated epsilon",
        "order-overlap": "[code] drops a central node's peripheral copy only where that central node "
                         "comes earlier in the shuffled batch, so a node can be central and peripheral",
        "isolated-fallback": "[code] gives an isolated central node M uniformly drawn nodes (with "
                             "replacement) as peripherals, so any node enters unrelated sub-graphs",
        "extra-steps": "[code] runs whole epochs of ceil(1/q_b) batches (at least one step more) "
                       "while accounting ceil(epochs/q_b) steps",
        "per-coordinate-scale": "draws the Laplace scale W per coordinate (product of 1-D Laplaces, "
                                "l1-shaped) while accounting spherical SML noise",
    }
    #: (dataset, setting, ε) → accuracy %, spec §8 Table 2 (transductive, "ours"), M tuned by the authors.
    published_accuracy: ClassVar[dict] = {
        **{("facebook", "gin", 16): 76.5},
        **{("twitch", "gin", e): v for e, v in zip((2, 4, 8, 16), (65.3, 65.9, 66.1, 66.4))},
        **{("computers", "gin", e): v for e, v in zip((2, 4, 8, 16), (73.8, 79.1, 82.8, 84.2))},
        **{("pubmed", "gin", e): v for e, v in zip((2, 4, 8, 16), (81.4, 82.9, 84.4, 84.9))},
        **{("reddit", "gin", e): v for e, v in zip((2, 4, 8, 16), (65.4, 74.6, 80.6, 84.1))},
        **{("facebook", "sage", e): v for e, v in zip((2, 4, 8, 16), (74.2, 74.7, 75.2, 75.5))},
        **{("twitch", "sage", e): v for e, v in zip((2, 4, 8, 16), (65.5, 66.4, 66.9, 66.9))},
        **{("computers", "sage", e): v for e, v in zip((2, 4, 8, 16), (74.3, 79.2, 82.0, 83.8))},
        **{("pubmed", "sage", e): v for e, v in zip((2, 4, 8, 16), (79.8, 80.8, 81.6, 82.1))},
        **{("reddit", "sage", e): v for e, v in zip((2, 4, 8, 16), (69.2, 76.0, 81.1, 84.1))},
        # GCN, Amazon-Computers, from the inductive Table 4 (spec §8)
        ("computers", "gcn", 2): 74.8,
        ("computers", "gcn", 4): 79.6,
    }

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._sigma_cache: dict[tuple, float] = {}

    # ------------------------------------------------------------------ plan and accountant
    def plan(self, graph: Any = None) -> dict[str, Any]:
        """Sampling rate, accounted/run steps, δ, Gaussian D, σ and the absolute noise std."""
        cfg = self.config
        n_train = int(graph.train_mask.sum()) if graph is not None else None
        if cfg.sampling_rate is not None:
            q = float(cfg.sampling_rate)
        else:
            if n_train is None:
                raise ValueError("sampling_rate=None needs a graph (q_b = batch_size / n_train)")
            q = min(1.0, cfg.batch_size / max(n_train, 1))
        steps = int(cfg.steps) if cfg.steps is not None else int(math.ceil(cfg.epochs / q - 1e-9))
        if cfg.delta is not None:
            delta = float(cfg.delta)
        else:
            if n_train is None:
                raise ValueError("delta=None needs a graph (delta = n_train^-1.1)")
            delta = float(max(n_train, 2)) ** -1.1
        max_degree = None
        if cfg.noise == "gaussian":
            if cfg.max_degree is not None:
                max_degree = int(cfg.max_degree)
            elif graph is not None:
                max_degree = int(graph.num_nodes) - 1
            else:
                raise ValueError("the Gaussian accountant needs max_degree or a graph")
        run_steps = steps
        if self.bug("extra-steps"):
            run_steps = max(steps + 1, int(math.ceil(steps * q - 1e-9)) * int(math.ceil(1.0 / q - 1e-9)))
        kw = dict(sampling_rate=q, steps=steps, delta=delta, neighbors=cfg.neighbors, noise=cfg.noise,
                  accountant=cfg.accountant, remove_overlap=cfg.remove_overlap, max_degree=max_degree)
        if cfg.noise_multiplier is not None:
            sigma = float(cfg.noise_multiplier)
        else:
            key = tuple(sorted(kw.items())) + (("epsilon", cfg.epsilon),)
            if key not in self._sigma_cache:
                self._sigma_cache[key] = calibrate_decreasing(
                    lambda s: heterpoisson_epsilon(s, **kw)[0], cfg.epsilon, lo=0.05, hi=1.0, rtol=1e-7)
            sigma = self._sigma_cache[key]
        eps, alpha = heterpoisson_epsilon(sigma, **kw)
        return dict(kw, n_train=n_train, run_steps=run_steps, noise_multiplier=sigma,
                    noise_std=sigma * 2 * cfg.clip_norm, epsilon=eps, order=alpha,
                    expected_batch=q * n_train if n_train is not None else None)

    def claim(self, graph: Any) -> Claim:
        p = self.plan(graph)
        cfg = self.config
        details = {
            "noise_multiplier": p["noise_multiplier"],
            "noise_std": p["noise_std"],
            "noise": cfg.noise,
            "noise_law": ("SML: sqrt(W)*noise_std*N(0,I), one W~Exp(1) per step" if cfg.noise == "sml"
                          else "Gaussian N(0, noise_std^2 I)"),
            "laplace_scale": p["noise_std"] / math.sqrt(2) if cfg.noise == "sml" else None,
            "sensitivity": 2 * cfg.clip_norm,
            "sensitivity_note": "k units of 2c per affected sub-graph, c (k=0.5) when the node is central",
            "clip_norm": cfg.clip_norm,
            "sampling_rate": p["sampling_rate"],
            "neighbors": cfg.neighbors,
            "steps": p["steps"],
            "steps_run": p["run_steps"],
            "expected_batch": p["expected_batch"],
            "n_train": p["n_train"],
            "accountant_variant": cfg.accountant,
            "rho": ("q*delta_0.5 + (1-q)*Poisson(q*M)" if cfg.noise == "sml"
                    else f"q*delta_0.5 + (1-q)*Bin(D={p['max_degree']}, q*min(1,M/D))"),
            "remove_overlap": cfg.remove_overlap,
            "max_degree": p["max_degree"],
            "order": p["order"],
            "orders": "linspace(1.0001,10,100) + 11..256",
            "conversion": "Balle et al. 2020 (improved)",
            "target_epsilon": cfg.epsilon,
            "calibrated": cfg.noise_multiplier is None,
        }
        return Claim(epsilon=p["epsilon"], delta=p["delta"],
                     accountant=f"heterpoisson-theorem2-{cfg.accountant}-{cfg.noise}",
                     unit="node (add/remove a training node with features, label and incident edges; "
                          "degrees from the public graph)",
                     gdp_mu=None, details=details)

    # ------------------------------------------------------------------ sampler
    @staticmethod
    def outdegrees(graph: Any) -> torch.Tensor:
        deg = getattr(graph, "public_outdeg", None)
        if deg is not None:
            return torch.as_tensor(deg).long().cpu()
        return torch.bincount(graph.edge_index[0].cpu(), minlength=graph.num_nodes)

    def sample_batch(self, graph: Any, rng: torch.Generator, sampling_rate: float | None = None,
                     *, _cache: dict | None = None) -> Batch:
        """One Heter-Poisson batch (CPU tensors): central ids and kept peripheral edges src → dst."""
        cache = _cache if _cache is not None else self._sampler_cache(graph)
        q = self.plan(graph)["sampling_rate"] if sampling_rate is None else float(sampling_rate)
        n, train_idx, src, dst, keep_p = cache["n"], cache["train_idx"], cache["src"], cache["dst"], cache["keep_p"]
        coins = torch.rand(train_idx.numel(), generator=rng)
        central = train_idx[coins < q]
        is_central = torch.zeros(n, dtype=torch.bool)
        is_central[central] = True
        sel = is_central[dst]
        e_src, e_dst, p = src[sel], dst[sel], keep_p[sel]
        kept = torch.rand(e_src.numel(), generator=rng) < p
        e_src, e_dst = e_src[kept], e_dst[kept]
        if self.bug("isolated-fallback"):
            iso = central[cache["indeg"][central] == 0]
            if iso.numel():
                m = self.config.neighbors
                extra = torch.randint(0, n, (iso.numel() * m,), generator=rng)
                e_src = torch.cat([e_src, extra])
                e_dst = torch.cat([e_dst, iso.repeat_interleave(m)])
        if self.bug("order-overlap"):
            pos = torch.full((n,), -1, dtype=torch.long)
            pos[central[torch.randperm(central.numel(), generator=rng)]] = torch.arange(central.numel())
            drop = is_central[e_src] & (pos[e_src] < pos[e_dst])
        else:
            drop = is_central[e_src]
        keep = ~drop
        return Batch(central=central, src=e_src[keep], dst=e_dst[keep])

    def _sampler_cache(self, graph: Any) -> dict:
        src, dst = graph.edge_index[0].cpu(), graph.edge_index[1].cpu()
        outdeg = self.outdegrees(graph)
        keep_p = torch.clamp(self.config.neighbors / outdeg[src].clamp(min=1).double(), max=1.0)
        return dict(n=int(graph.num_nodes), src=src, dst=dst, keep_p=keep_p,
                    train_idx=graph.train_mask.cpu().nonzero().view(-1),
                    indeg=torch.bincount(dst, minlength=graph.num_nodes))

    # ------------------------------------------------------------------ model helpers
    def dimension(self, graph: Any) -> int:
        f, c, h = graph.x.size(1), int(graph.y.max()) + 1, self.config.hidden
        return f * h + h + h * c + c + (1 if self.config.backbone == "gin" else 0)

    def _pack(self, x: torch.Tensor, centers: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
        """Rows [x_i, Σ_{j→i kept} x_j, |N_i|] for the central nodes `centers` (on x's device)."""
        n = x.size(0)
        local = torch.full((n,), -1, dtype=torch.long)
        local[centers] = torch.arange(centers.numel())
        li = local[dst].to(x.device)
        s = torch.zeros(centers.numel(), x.size(1), device=x.device, dtype=x.dtype)
        s.index_add_(0, li, x[src.to(x.device)])
        cnt = torch.bincount(li, minlength=centers.numel()).to(x.dtype).unsqueeze(1)
        return torch.cat([x[centers.to(x.device)], s, cnt], dim=1)

    def _inference_edges(self, graph: Any, nodes: torch.Tensor, gen: torch.Generator,
                         train_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Up to N_test in-neighbours per query node, uniform without replacement among non-training nodes."""
        src, dst = graph.edge_index[0].cpu(), graph.edge_index[1].cpu()
        key = torch.rand(src.numel(), generator=gen, dtype=torch.float64)  # one key per edge: a node's
        is_query = torch.zeros(graph.num_nodes, dtype=torch.bool)          # sample ignores the query set
        is_query[nodes] = True
        sel = is_query[dst] & ~train_mask[src]
        src, dst, key = src[sel], dst[sel], key[sel]
        if src.numel() == 0:
            return src, dst
        order = torch.argsort(dst.double() * 2.0 + key)  # group by dst, random order inside a group
        src, dst = src[order], dst[order]
        first = torch.zeros(graph.num_nodes, dtype=torch.long)
        counts = torch.bincount(dst, minlength=graph.num_nodes)
        first[1:] = torch.cumsum(counts, 0)[:-1]
        rank = torch.arange(dst.numel()) - first[dst]
        keep = rank < self.config.test_neighbors
        return src[keep], dst[keep]

    def _predict_fn(self, model: StarNet, seed: int, train_mask: torch.Tensor):
        device = self.device

        @torch.no_grad()
        def predict(graph: Any, nodes=None) -> torch.Tensor:
            nodes = (torch.arange(graph.num_nodes) if nodes is None
                     else torch.as_tensor(nodes, dtype=torch.long).view(-1).cpu())
            gen = torch.Generator().manual_seed(seed)
            tm = train_mask if train_mask.numel() == graph.num_nodes else graph.train_mask.cpu()
            uniq, inv = torch.unique(nodes, return_inverse=True)
            src, dst = self._inference_edges(graph, uniq, gen, tm)
            x = graph.x.float().to(device)
            packed = self._pack(x, uniq, src, dst)
            model.eval()
            return F.softmax(model(packed), dim=1).float().cpu()[inv]

        return predict

    # ------------------------------------------------------------------ training
    @staticmethod
    def node_canary_scale(batch: Batch, node: int) -> float:
        """How many clip norms c node z can move this batch's clipped sum by: c for its own star
        when it is central, and 2c for every other star in which it survives as a peripheral."""
        central = bool((batch.central == node).any())
        stars = torch.unique(batch.dst[batch.src == node]).numel()
        return float(central) + 2.0 * stars

    def fit(self, graph: Any, rng: torch.Generator, *, canary_gradient: torch.Tensor | None = None,
            canary_node: int | None = None, canary_whole_node: bool | None = None) -> Release:
        cfg = self.config
        p = self.plan(graph)
        q, T_run = p["sampling_rate"], p["run_steps"]
        std = 0.0 if self.bug("no-noise") else p["noise_std"]
        device = self.device
        canary_gradient, canary_node = canary_from(graph, canary_gradient, canary_node)
        if canary_whole_node is None:
            canary_whole_node = bool(getattr(graph, "canary_whole_node", False))
        if canary_whole_node:
            if canary_node is None:
                raise ValueError("canary_whole_node needs canary_node")
            if not bool(graph.train_mask[int(canary_node)]):
                raise ValueError(f"canary_node {canary_node} is not a training node")
        cache = self._sampler_cache(graph)
        train_mask = graph.train_mask.cpu()
        x = graph.x.float().to(device)
        y = graph.y.long().to(device)
        classes = int(graph.y.max()) + 1
        with seeded(rng):
            model = StarNet(x.size(1), cfg.hidden, classes, cfg.backbone).to(device)
        canary_rng = child_generator(rng)  # always split, so worlds with and without canary align
        infer_seed = int(torch.randint(0, 2**62, (1,), generator=rng).item())
        shapes = {k: tuple(v.shape) for k, v in model.named_parameters()}
        d = sum(v.numel() for v in model.parameters())
        gc = None
        if canary_gradient is not None:
            gc = torch.as_tensor(canary_gradient, dtype=torch.float32).to(device)
            if gc.shape[-1] != d or gc.dim() not in (1, 2) or (gc.dim() == 2 and gc.size(0) < T_run):
                raise ValueError(f"canary_gradient must have shape ({d},) or ({T_run}, {d}), got {tuple(gc.shape)}")
            if canary_node is not None and not bool(train_mask[int(canary_node)]):
                raise ValueError(f"canary_node {canary_node} is not a training node")
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        expected_batch = max(q * int(train_mask.sum()), 1e-12)
        trace = HeterPoissonTrace(noise=cfg.noise, noise_std=std, clip_norm=cfg.clip_norm, sampling_rate=q,
                                  expected_batch=expected_batch, accounted_steps=p["steps"], shapes=shapes)
        predict = self._predict_fn(model, infer_seed, train_mask)
        eval_every = cfg.eval_every or max(1, T_run // 10)
        val_idx = graph.val_mask.cpu().nonzero().view(-1)
        best = (-1.0, None)

        def loss_of(out, target):
            return F.cross_entropy(out.unsqueeze(0), target.unsqueeze(0))

        for t in range(T_run):
            batch = self.sample_batch(graph, rng, q, _cache=cache)
            model.train()
            total = torch.zeros(d, device=device)
            if batch.central.numel():
                packed = self._pack(x, batch.central, batch.src, batch.dst)
                yc = y[batch.central.to(device)]
                for i in range(0, packed.size(0), _CHUNK):
                    grads = per_example_gradients(model, loss_of, packed[i:i + _CHUNK], yc[i:i + _CHUNK])
                    total += clip_rows(flatten(grads), cfg.clip_norm).sum(0)
            canary_in = None
            scale = self.node_canary_scale(batch, int(canary_node)) if canary_whole_node else None
            if gc is not None:
                coin = bool(torch.rand(1, generator=canary_rng).item() < q)
                if scale is not None:
                    canary_in = scale > 0
                else:
                    canary_in = bool((batch.central == int(canary_node)).any()) if canary_node is not None else coin
                if canary_in:
                    g = gc[t] if gc.dim() == 2 else gc
                    total = total + (g if scale is None else scale * g)
            if cfg.noise == "sml":
                noise = sml_sample(d, std, rng, per_coordinate=self.bug("per-coordinate-scale"))
            else:
                noise = std * torch.randn(d, generator=rng, dtype=torch.float64).float()
            noisy = total + noise.to(device)
            trace.steps.append(TraceStep(noisy=noisy.detach().cpu(), central=batch.central.clone(),
                                         canary_in=canary_in, clean=total.detach().cpu(), canary_scale=scale))
            assign_flat_grad(model, noisy / expected_batch)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if (t + 1) % eval_every == 0 or t == T_run - 1:
                if val_idx.numel():
                    pred = predict(graph, val_idx).argmax(1)
                    acc = float((pred == graph.y.cpu()[val_idx]).float().mean())
                else:
                    acc = 0.0
                if acc >= best[0]:
                    best = (acc, {k: v.detach().clone() for k, v in model.state_dict().items()})
        if best[1] is not None:
            model.load_state_dict(best[1])
        accuracy = {}
        with torch.no_grad():
            probs = predict(graph)
        pred = probs.argmax(1)
        ycpu = graph.y.cpu()
        for split in ("train", "val", "test"):
            mask = getattr(graph, f"{split}_mask").cpu()
            accuracy[split] = float((pred[mask] == ycpu[mask]).float().mean()) if mask.any() else float("nan")
        weights = {k: v.detach().cpu().clone() for k, v in model.named_parameters()}
        info = {
            "accuracy": accuracy,
            "steps_run": T_run,
            "steps_accounted": p["steps"],
            "sampling_rate": q,
            "noise_multiplier": p["noise_multiplier"],
            "noise_std": std,
            "mean_batch": float(np.mean([s.central.numel() for s in trace.steps])) if trace.steps else 0.0,
            "fresh_noise_per_query": False,
            "randomised_inference": "neighbour sampling with a seed fixed at fit time",
            "dimension": d,
        }
        return Release(api=predict, weights=weights, mechanism=None, trace=trace, info=info)
