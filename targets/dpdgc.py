"""DPDGC: differentially private decoupled graph convolutions (Chien et al., NeurIPS 2023).

Paper: Chien, Chen, Pan, Li, Özgür, Milenkovic, *Differentially Private Decoupled Graph
Convolutions for Multigranular Topology Protection* (arXiv 2307.06422); spec
``shared/specs/dpdgc.md``.

Pipeline (spec §2.1, §4.2):

1. (node GDP only) bound every column sum of A by ``max_degree`` = D (a per-column random subset,
   the choice fixed by a hash of (seed, row, column) so that the same edge gets the same fate in
   both worlds).
2. **DP-Emb**: train ``W ∈ R^{n×h}``, ``b ∈ R^h`` of ``logits_i = SELU(A_i W + b) R`` (R a fixed,
   untrained random orthogonal head) with DP-Adam: fixed-size batches of B labelled nodes drawn
   uniformly without replacement, per-example clipping to ``clip``, Gaussian noise of std
   ``2σ·f(g)·clip`` on the sum (replace-one adjacency, group size g), then every row of W is
   projected back to norm ``norm_scale`` = c.
3. **Embedding**: ``Z = A W + 1 bᵀ + N(0, s²)`` with ``s = σ·Δ_Z`` (computed in float64), cached.
4. **Classifier**: LINKX-style over (X_i, Z_i): plain Adam with dropout/BatchNorm under edge GDP,
   DP-Adam (group size 1, noise ``2σ·clip``) under k-neighbour and node GDP.
5. **Inference**: ``softmax(classifier(X_v, Z_v))`` from the cached Z; no fresh noise per query.

Adjacency levels (``unit``, ``k``) and what each protects:

* ``unit="edge"``: one **directed** entry A[r, j] (Thm G.1): Δ_Z = c, g = 1. ``undirected_edge``
  protects both directions instead (Δ_Z = √2·c, g = 2; not in the paper, spec §9.5).
* ``unit="node", k=K``: k-neighbour GDP N_K (Thm 5.4): X_r, Y_r and up to K entries of row r and of
  column r; Δ_Z = c√K, g = K + 1; no degree bound. K = 0 releases Z without noise.
* ``unit="node", k=None``: node GDP (Thm 5.3) on the degree-bounded graph: Δ_Z = c√(2D),
  g = 2D + 1 (``node_group="sound"``, spec §9.4) or D + 1 (``"paper"``).

Accountant (spec §3.3–3.5; the reference code's autodp set-up, which the paper's Lemma F.1 turns
into (ε, δ)): one noise multiplier σ shared by every component,
``RDP(α) = RDP_wor(α; q=B/m, σ, T_enc) + [α/(2σ²) if Z is noisy] + [RDP_wor(α; q, σ, T_clf) under
node/N_k]`` with ``RDP_wor`` the sampled-without-replacement Gaussian bound of Wang, Balle &
Kasiviswanathan 2019 (Thm 27, replace-one), ``T = ⌊epochs·m/B⌋`` per module, and
``ε = min_α RDP(α) + log(1/(αδ))/(α−1) + log(1 − 1/α)`` (Lemma F.1). δ (paper rule, code values):
``10^-digits(#directed edges)`` under edge GDP, ``10^-digits(m)`` otherwise. The group size g does
not enter the accountant: it only scales the DP-Emb noise, linearly by default (``group_scaling``).

Releases (shapes: n nodes, F features, C classes, h = ``hidden``):

* ``api``: ``predict(graph, nodes) -> n_query × C`` posteriors (X from ``graph``, Z cached).
* ``weights``: ``emb.W`` (n×h), ``emb.b`` (h), ``emb.R`` (h×C) and the classifier's parameters.
* ``mechanism``: one step, Z (n×h, float64): ``mean(graph) = A(graph)·W + b`` with the released W, b
  held fixed, ``noise_std = s``. Under node GDP the degree bound's hash seed is not released: the
  mean uses a fixed public seed and ``noise_std`` is None (a projection statistic, not an exact LLR).
* ``trace`` (k-neighbour and node GDP only, where DP-Emb's DP-SGD carries the node-level claim): a
  :class:`targets.trace.HeterPoissonTrace`, one ``TraceStep`` per DP-Adam step of DP-Emb:
  ``noisy`` = the released noisy *sum* [grad_W (n×h, row-major) | grad_b (h)] before the division
  by B, ``central`` = the batch, ``clean`` = the noiseless clipped sum including any canary and
  ``canary_in`` (auditor instrumentation). Built on first use by replaying DP-Emb from the
  generator state it started from (checked to give back the released W), so fits that never read
  it hold no T×d floats and draw exactly what they drew before.

Gradient canary: ``graph.canary_gradient`` (``canaries.gradient.DiracGradient``; length
``dimension(graph)`` = n·h + h, or T×d) is added, unclipped, to every step's clipped sum. Only with
full-batch DP-Emb (``batch_size`` ≥ m, q = 1): fixed-size batches give a virtual example no
inclusion coin of its own. At q = 1 the wor accountant is the plain Gaussian's (``T·α/(2σ²)``,
replace-one sensitivity 2·C against noise 2σ·C per unit of group). The claim names the trace's law
for the canary: ``trace_noise_std`` (the claimed DP-Emb std 2σ·f(g)·C) and ``canary_norm`` = g·C.

Planted bugs: ``no-noise``; ``norm-noop`` (the reference code's weight-row normalisation that never
takes effect: rows keep their trained norms while the noise is still scaled by c, spec §8.1);
``sqrt-group-noise`` (DP-Emb noise ``2σ√g`` while the claim assumes linear group scaling, §8.2).

Cost: the paper's 100 + 100 epochs give T = ⌊100·m/B⌋ steps per module; on the csbm default
(m = 180, B = 64) that is 281 + 281 cheap steps (about a second); on Cora with the paper's 75 %
split (m = 2031) 3173 + 3173 steps (tens of seconds on one core).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from scipy.special import gammaln, logsumexp

from targets.accounting import calibrate_decreasing, gap_delta, gdp_epsilon, gaussian_rdp, rdp_to_dp
from targets.base import Claim, Lazy, MechanismStep, Release, Target, TargetConfig, seeded
from targets.dpsgd import assign_flat_grad, canary_from, clip_rows, flatten, noisy_sum, per_example_gradients
from targets.trace import HeterPoissonTrace, TraceStep

#: RDP orders for Lemma F.1 (spec §3.5: fine steps up to 10, coarse beyond).
ORDERS: tuple[float, ...] = tuple(
    [1.0 + x / 10.0 for x in range(1, 100)] + list(range(11, 65)) + [80, 96, 112, 128]
)

#: The paper's 75/10/15 random split (spec §4.1), drawn once from this seed.
PAPER_SPLIT_SEED = 12345


# ---------------------------------------------------------------------------------------------
# accounting
# ---------------------------------------------------------------------------------------------
def wor_gaussian_rdp(orders: tuple[float, ...], sampling_rate: float, noise_multiplier: float,
                     steps: int) -> np.ndarray:
    """RDP of `steps` Gaussian steps on fixed-size batches sampled without replacement.

    Wang, Balle & Kasiviswanathan (AISTATS 2019), Thm 27 (replace-one relation), the bound autodp's
    ``AmplificationBySampling(PoissonSampling=False)`` uses in the reference code. Same terms as
    ``dp_accounting``'s implementation (orders ≤ 256), vectorised over the orders: the forward
    differences of exp(cgf) are computed once per σ. Non-integer orders interpolate the cumulant
    (WBK19 Cor. 10).
    """
    from dp_accounting.rdp.rdp_privacy_accountant import _get_forward_diffs

    a = np.asarray(orders, dtype=float)
    if np.any(a <= 1) or np.any(a > 256):
        raise ValueError("orders must lie in (1, 256]")
    if steps == 0 or sampling_rate == 0:
        return np.zeros_like(a)
    if noise_multiplier <= 0:
        return np.full_like(a, np.inf)
    if sampling_rate >= 1.0:
        return steps * a / (2.0 * noise_multiplier**2)
    s2 = 2.0 * noise_multiplier**2
    top = int(math.ceil(a.max()))
    deltas, _ = _get_forward_diffs(lambda x: x * (x + 1.0) / s2, top)
    i = np.arange(2, top + 1)
    lo = deltas[2 * (i // 2) - 1]
    hi = deltas[2 * ((i + 1) // 2) - 1]
    term = np.minimum(math.log(4.0) + 0.5 * (lo + hi), math.log(2.0) + (i - 1) * i / s2)
    f2 = 2.0 / s2
    term[0] = min(math.log(4.0) + f2 + math.log1p(-math.exp(-f2)), f2 + math.log(2.0))
    term = term + i * math.log(sampling_rate)
    log_a = np.zeros(top + 1)  # log A_α for integer α (A_1 = 1)
    for alpha in range(2, top + 1):
        k = i[: alpha - 1]
        log_comb = gammaln(alpha + 1) - gammaln(k + 1) - gammaln(alpha - k + 1)
        log_a[alpha] = logsumexp(np.concatenate([[0.0], log_comb + term[: alpha - 1]]))
    fl = np.floor(a).astype(int)
    ce = np.ceil(a).astype(int)
    t = a - fl
    return steps * ((1 - t) * log_a[fl] + t * log_a[ce]) / (a - 1.0)


def lemma_f1_epsilon(orders: tuple[float, ...], rdp: np.ndarray, delta: float) -> tuple[float, float]:
    """Paper Lemma F.1: ε = min_α RDP(α) + log(1/(αδ))/(α−1) + log(1 − 1/α); returns (ε, α*)."""
    return rdp_to_dp(orders, rdp, delta, conversion="improved")


_SIGMA_CACHE: dict[tuple, float] = {}


#: DPDGC's calibration: Brent on log σ (far fewer accountant calls than bisection; each costs
#: ~0.2 s here), σ to within 1e-7 relative, on the safe side
CALIBRATION: dict[str, Any] = {"method": "brent", "lo": 0.25, "hi": 2.0, "grow": 2.0, "slide": True,
                               "limits": (1e-6, 1e8), "rtol": 1e-7 / 4, "nudge": 1e-7}


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------
_CHOICES = {
    "unit": ("edge", "node"),
    "group_scaling": ("linear", "sqrt"),
    "node_group": ("sound", "paper"),
    "projection": ("sphere", "ball"),
    "checkpoint": ("best-val", "last"),
    "split": ("graph", "paper"),
}


@dataclass
class DPDGCConfig(TargetConfig):
    """DPDGC hyperparameters (spec §2.4 defaults).

    Args:
        unit (str): ``edge`` (one directed entry) or ``node`` (k-neighbour when ``k`` is set, else
            node GDP with degree bound ``max_degree``) (default: ``edge``).
        k (int, optional): k of k-neighbour GDP; only with ``unit="node"`` (default: None).
        max_degree (int): D, the column-sum bound under node GDP (default: 100).
        hidden (int): h, width of W and of the classifier (default: 64).
        norm_scale (float): c, the row norm of W (default: 1e-8, the paper's experiments, Alg. 2).
        epochs_encoder (int): DP-Emb epochs (default: 100).
        epochs_classifier (int): classifier epochs (default: 100).
        batch_size (int): B, capped at the number of training nodes (default: 64).
        lr (float): Adam learning rate of both stages (default: 1e-3).
        encoder_weight_decay (float): Adam weight decay of DP-Emb (default: 1e-5, code).
        clip (float): per-example clip norm (default: 1.0).
        dropout (float, optional): classifier dropout; None = 0.5 for edge, 0 otherwise.
        batch_norm (bool, optional): classifier BatchNorm; None = on for edge, off otherwise.
        group_scaling (str): DP-Emb noise ``2σ·f(g)``: ``linear`` f(g)=g (sound) or ``sqrt`` (code).
        node_group (str): node-GDP group size: ``sound`` 2D+1 or ``paper`` D+1.
        undirected_edge (bool): under edge GDP protect both directions (Δ_Z = √2c, g = 2).
        projection (str): after each step put W's rows ``sphere`` (= c) or in the ``ball`` (≤ c).
        rescale_z (bool): feed (Z − b)/c to the classifier instead of Z (post-processing; not in
            the paper; makes utility independent of c) (default: False).
        checkpoint (str): classifier released at the ``best-val`` epoch (code) or the ``last``.
        split (str): ``graph`` masks, or the ``paper``'s 75/10/15 random split (seed 12345).
        num_train (int, optional): m assumed by the accountant (for reproducing worked numbers
            from the CLI); a fit refuses a graph whose training set differs (default: the graph's).
        num_edges (int, optional): #directed edges for the edge δ rule (default: the graph's).
    """

    unit: str = "edge"
    k: int | None = None
    max_degree: int = 100
    hidden: int = 64
    norm_scale: float = 1e-8
    epochs_encoder: int = 100
    epochs_classifier: int = 100
    batch_size: int = 64
    lr: float = 1e-3
    encoder_weight_decay: float = 1e-5
    clip: float = 1.0
    dropout: float | None = None
    batch_norm: bool | None = None
    group_scaling: str = "linear"
    node_group: str = "sound"
    undirected_edge: bool = False
    projection: str = "sphere"
    rescale_z: bool = False
    checkpoint: str = "best-val"
    split: str = "graph"
    num_train: int | None = None
    num_edges: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name, options in _CHOICES.items():
            value = getattr(self, name)
            if value not in options:
                raise ValueError(f"The {name!r} parameter must be one of {', '.join(options)}, got {value!r}")
        _int_at_least(self, "k", 0, optional=True)
        if self.k is not None and self.unit != "node":
            raise ValueError(f"The 'k' parameter needs unit='node' (k-neighbour GDP), got unit={self.unit!r}")
        _int_at_least(self, "max_degree", 1)
        _int_at_least(self, "hidden", 1)
        _int_at_least(self, "epochs_encoder", 0)
        _int_at_least(self, "epochs_classifier", 1)
        _int_at_least(self, "batch_size", 1)
        _int_at_least(self, "num_train", 1, optional=True)
        _int_at_least(self, "num_edges", 1, optional=True)
        for name in ("norm_scale", "lr", "clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
                raise ValueError(f"The {name!r} parameter must be a finite float > 0, got {value!r}")
        wd = self.encoder_weight_decay
        if isinstance(wd, bool) or not isinstance(wd, (int, float)) or not wd >= 0:
            raise ValueError(f"The 'encoder_weight_decay' parameter must be a float >= 0, got {wd!r}")
        if self.dropout is not None and not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            raise ValueError(f"The 'dropout' parameter must be a float in [0, 1), got {self.dropout!r}")

    @property
    def level(self) -> str:
        """``edge``, ``kneighbour`` or ``node``."""
        if self.unit == "edge":
            return "edge"
        return "node" if self.k is None else "kneighbour"


def _int_at_least(cfg: Any, name: str, low: int, optional: bool = False) -> None:
    value = getattr(cfg, name)
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"The {name!r} parameter must be an int >= {low}, got {value!r}")


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
class _LinkX(nn.Module):
    """LINKX-style classifier over [X | Z] (spec §2.3): MLP_X (2 layers), residual over X and Z."""

    def __init__(self, features: int, hidden: int, classes: int, dropout: float, batch_norm: bool):
        super().__init__()
        self.features = features
        norm = (lambda d: nn.BatchNorm1d(d)) if batch_norm else (lambda d: nn.Identity())
        self.mlp_x = nn.Sequential(nn.Linear(features, hidden), norm(hidden), nn.Dropout(dropout),
                                   nn.SELU(), nn.Linear(hidden, hidden))
        self.bn1 = norm(2 * hidden)
        self.mlp_w = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.Dropout(dropout), nn.SELU(),
                                   nn.Linear(hidden, hidden))
        self.bn2 = norm(hidden)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, classes)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        hx = self.mlp_x(inp[:, :self.features])
        ha = inp[:, self.features:]
        u = F.selu(self.drop(self.bn1(torch.cat([hx, ha], dim=1))))
        u = self.mlp_w(u) + hx + ha
        u = F.selu(self.drop(self.bn2(u)))
        return self.head(u)


def _ce(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(out.unsqueeze(0), y.unsqueeze(0))


def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (a fixed hash of uint64 keys)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def bound_column_degree(edge_index: torch.Tensor, n: int, max_degree: int, seed: int) -> torch.Tensor:
    """Keep at most `max_degree` entries per column of A (A[i, j] = 1 for edge (i, j)).

    Each column keeps its entries of smallest hash(seed, i, j): a uniformly random subset, and the
    same edge gets the same priority in both worlds (spec §9.8; no off-by-one).
    """
    if edge_index.numel() == 0:
        return edge_index
    src, dst = edge_index[0].cpu().numpy().astype(np.uint64), edge_index[1].cpu().numpy().astype(np.uint64)
    key = _splitmix(_splitmix(np.uint64(seed) ^ (src * np.uint64(n) + dst)))
    order = np.lexsort((key, dst.astype(np.int64)))  # by column, then priority
    cols = dst[order].astype(np.int64)
    start = np.searchsorted(cols, cols, side="left")
    rank = np.arange(len(cols)) - start
    keep = np.sort(order[rank < max_degree])
    return edge_index[:, torch.as_tensor(keep, dtype=torch.long)]


# ---------------------------------------------------------------------------------------------
# target
# ---------------------------------------------------------------------------------------------
class DPDGC(Target[DPDGCConfig]):
    """DPDGC (see the module docstring)."""

    name: ClassVar[str] = "dpdgc"
    Config: ClassVar[type[TargetConfig]] = DPDGCConfig
    levels: tuple[str, ...] = ("api", "weights", "mechanism", "trace")
    bugs: ClassVar[dict[str, str]] = {
        "no-noise": "every noise std is 0 (DP-Emb, Z, classifier) while the calibrated ε is claimed",
        "norm-noop": "W's rows are never projected to norm c (reference code's no-op normalisation) "
                     "while the Z noise stays σ·c·Δ: Z's true sensitivity is max‖W_j‖ ≫ c",
        "sqrt-group-noise": "DP-Emb noise scales with √g instead of the claimed g (reference code)",
    }
    published_accuracy: ClassVar[dict] = {
        # paper Table 2 (spec §6.3): (dataset, setting, ε) → test accuracy %
        **{(d, "edge", 1.0): a for d, a in [("squirrel", 38.18), ("chameleon", 53.83), ("facebook", 62.04),
                                            ("pubmed", 88.59), ("computers", 87.74), ("cora", 77.71),
                                            ("photo", 92.59)]},
        **{(d, "k=1", 16.0): a for d, a in [("squirrel", 42.71), ("chameleon", 48.63), ("facebook", 80.94),
                                            ("pubmed", 84.33), ("computers", 83.49), ("cora", 59.98),
                                            ("photo", 88.38)]},
        **{(d, "k=5", 16.0): a for d, a in [("squirrel", 41.00), ("chameleon", 47.22), ("facebook", 76.84),
                                            ("pubmed", 84.31), ("computers", 80.60), ("cora", 59.56),
                                            ("photo", 87.02)]},
        **{(d, "k=25", 16.0): a for d, a in [("squirrel", 40.51), ("chameleon", 46.32), ("facebook", 68.66),
                                             ("pubmed", 84.27), ("computers", 78.25), ("cora", 59.26),
                                             ("photo", 84.82)]},
        **{(d, "node", 16.0): a for d, a in [("squirrel", 36.17), ("chameleon", 46.43), ("facebook", 56.65),
                                             ("pubmed", 84.55), ("computers", 76.62), ("cora", 58.97),
                                             ("photo", 82.15)]},
        **{(d, "non-private", math.inf): a for d, a in [("squirrel", 79.92), ("chameleon", 79.24),
                                                         ("facebook", 86.06), ("pubmed", 88.34),
                                                         ("computers", 92.27), ("cora", 82.44),
                                                         ("photo", 94.98)]},
    }

    def __init__(self, config: TargetConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        self._claims: dict[tuple, Claim] = {}
        self._last: tuple[torch.Tensor, torch.Tensor, int] | None = None

    # ------------------------------------------------------------------ structure
    def _masks(self, graph: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.config.split == "graph":
            return graph.train_mask.cpu(), graph.val_mask.cpu(), graph.test_mask.cpu()
        n = graph.num_nodes
        perm = torch.as_tensor(np.random.default_rng(PAPER_SPLIT_SEED).permutation(n))
        n_val, n_test = round(0.1 * n), round(0.15 * n)
        masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
        masks[1][perm[:n_val]] = True
        masks[2][perm[n_val:n_val + n_test]] = True
        masks[0][perm[n_val + n_test:]] = True
        return masks[0], masks[1], masks[2]

    def group_size(self) -> int:
        """g: DP-Emb examples one neighbouring relation can change (spec §3.3, §9.4–9.5)."""
        cfg = self.config
        if cfg.level == "edge":
            return 2 if cfg.undirected_edge else 1
        if cfg.level == "kneighbour":
            return cfg.k + 1
        return 2 * cfg.max_degree + 1 if cfg.node_group == "sound" else cfg.max_degree + 1

    def z_sensitivity(self) -> float:
        """Δ_Z: L2 sensitivity of [A·W]_{\\r} with rows of W at norm c (spec §3.1)."""
        cfg = self.config
        c = cfg.norm_scale
        if cfg.level == "edge":
            return c * (math.sqrt(2.0) if cfg.undirected_edge else 1.0)
        if cfg.level == "kneighbour":
            return c * math.sqrt(cfg.k)
        return c * math.sqrt(2 * cfg.max_degree)

    def offers_trace(self) -> bool:
        """DP-Emb's trace is released where its DP-SGD carries a node-level claim (N_k and node)."""
        return self.config.level != "edge"

    def takes_gradient_canary(self, graph: Any = None) -> bool:
        """Under k-neighbour/node GDP with full-batch DP-Emb (q = 1) on `graph` (see :meth:`_canary`)."""
        return self.offers_trace() and graph is not None and self.claim(graph).details["sampling_rate"] >= 1.0

    def dimension(self, graph: Any) -> int:
        """d of DP-Emb's flattened gradient [grad_W (n×h, row-major), grad_b (h)]."""
        return graph.num_nodes * self.config.hidden + self.config.hidden

    def canary_norm(self) -> float:
        """Norm of the Dirac canary's gradient: g·C.

        One neighbouring change touches g DP-Emb examples (spec §3.3), each clipped to C, and their
        gradients can all point the same way (spec §10, "DP-SGD parts"): g·C is within the
        replace-one sensitivity 2·g·C that the linear group scaling calibrates the noise to.
        """
        return self.group_size() * self.config.clip

    def _schedule(self, m: int) -> tuple[int, int, int]:
        """(B, T_enc, T_clf): batch capped at m, T = ⌊epochs·m/B⌋ per module (spec §3.3)."""
        cfg = self.config
        b = min(cfg.batch_size, m)
        return b, (cfg.epochs_encoder * m) // b, (cfg.epochs_classifier * m) // b

    # ------------------------------------------------------------------ accountant
    def _rdp(self, sigma: float, q: float, t_enc: int, t_clf: int) -> np.ndarray:
        sgd = wor_gaussian_rdp(ORDERS, q, sigma, 1)
        rdp = t_enc * sgd
        if self.z_sensitivity() > 0:
            rdp = rdp + gaussian_rdp(ORDERS, sigma)
        if self.config.level != "edge":
            rdp = rdp + t_clf * sgd
        return rdp

    def claim(self, graph: Any) -> Claim:
        cfg = self.config
        m_graph = int(self._masks(graph)[0].sum())
        m = cfg.num_train if cfg.num_train is not None else m_graph
        n_edges = cfg.num_edges if cfg.num_edges is not None else int(graph.edge_index.size(1))
        if cfg.delta is not None:
            delta, delta_rule = cfg.delta, "given"
        elif cfg.level == "edge":
            delta, delta_rule = gap_delta(n_edges), "10^-digits(#directed edges)"
        else:
            delta, delta_rule = gap_delta(m), "10^-digits(#training nodes)"
        key = (m, delta)
        if key in self._claims:
            return self._claims[key]
        batch, t_enc, t_clf = self._schedule(m)
        q = batch / m

        def eps_of(sigma: float) -> float:
            return lemma_f1_epsilon(ORDERS, self._rdp(sigma, q, t_enc, t_clf), delta)[0]

        cache_key = (cfg.epsilon, delta, q, t_enc, t_clf, cfg.level, self.z_sensitivity() > 0)
        if cache_key not in _SIGMA_CACHE:
            _SIGMA_CACHE[cache_key] = calibrate_decreasing(eps_of, cfg.epsilon, **CALIBRATION)
        sigma = _SIGMA_CACHE[cache_key]
        eps, order = lemma_f1_epsilon(ORDERS, self._rdp(sigma, q, t_enc, t_clf), delta)
        g = self.group_size()
        f_g = g if cfg.group_scaling == "linear" else math.sqrt(g)
        dz = self.z_sensitivity()
        eps_z = lemma_f1_epsilon(ORDERS, gaussian_rdp(ORDERS, sigma), delta)[0] if dz > 0 else 0.0
        components = ["SGD_enc(wor)"] + (["Gaussian(Z)"] if dz > 0 else []) + \
                     (["SGD_clf(wor)"] if cfg.level != "edge" else [])
        unit = {"edge": "edge (one directed entry A[r,j])" if not cfg.undirected_edge
                else "edge (one undirected edge, both entries)",
                "kneighbour": f"node (k-neighbour, k={cfg.k}: X_r, Y_r, ≤k row and ≤k column entries)",
                "node": f"node (replace node r; out-degree bounded by D={cfg.max_degree})"}[cfg.level]
        details = {
            "noise_multiplier": sigma,
            "noise_std": sigma * dz,
            "sensitivity": dz,
            "norm_scale": cfg.norm_scale,
            "level": cfg.level,
            "group_size": g,
            "group_scaling": cfg.group_scaling,
            "encoder_noise_std": 2.0 * sigma * f_g * cfg.clip,
            "encoder_noise_multiplier": 2.0 * sigma * f_g,
            "classifier_noise_std": 2.0 * sigma * cfg.clip if cfg.level != "edge" else None,
            "clip": cfg.clip,
            "num_train": m,
            "batch_size": batch,
            "sampling_rate": q,
            "sampling": "fixed-size without replacement (replace-one, WBK19 Thm 27)",
            "steps_encoder": t_enc,
            "steps_classifier": t_clf if cfg.level != "edge" else 0,
            "components": components,
            "order": order,
            "epsilon_z_only": eps_z,
            "epsilon_z_only_exact": gdp_epsilon(1.0 / sigma, delta) if dz > 0 else 0.0,
            "conversion": "Lemma F.1 (improved RDP→DP)",
            "delta_rule": delta_rule,
            "num_directed_edges": n_edges,
        }
        if self.offers_trace():
            # the noise law of the trace (DP-Emb's DP-Adam sums), as claimed, for gradient canaries
            details.update(trace_noise_std=details["encoder_noise_std"], canary_norm=self.canary_norm(),
                           clip_norm=cfg.clip)
        claim = Claim(epsilon=eps, delta=delta, accountant="rdp-wor (DPDGC, one shared σ, Lemma F.1)",
                      unit=unit, details=details)
        self._claims[key] = claim
        return claim

    # ------------------------------------------------------------------ graph pieces
    def _edges(self, graph: Any, seed: int) -> torch.Tensor:
        ei = graph.edge_index.cpu()
        if self.config.level == "node":
            ei = bound_column_degree(ei, graph.num_nodes, self.config.max_degree, seed)
        return ei

    def _adjacency(self, edge_index: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
        values = torch.ones(edge_index.size(1), dtype=dtype)
        return torch.sparse_coo_tensor(edge_index, values, (n, n), check_invariants=False).coalesce().to(self.device)

    def _project(self, w: torch.Tensor) -> None:
        """Rows of W to norm c (sphere) or ≤ c (ball), in place: post-processing (spec §9.1)."""
        if self.bug("norm-noop"):
            return  # the reference code assigns the normalised rows into a throw-away state_dict
        c = self.config.norm_scale
        norms = w.norm(dim=1, keepdim=True).clamp_min(1e-300)
        factor = c / norms if self.config.projection == "sphere" else torch.clamp(c / norms, max=1.0)
        w.mul_(factor)

    # ------------------------------------------------------------------ training
    def _encoder_noise_std(self, sigma: float) -> float:
        """The std DP-Emb's noise actually has: 2σ·f(g)·C (planted bugs included)."""
        cfg = self.config
        g = self.group_size()
        scaled_g = math.sqrt(g) if (cfg.group_scaling == "sqrt" or self.bug("sqrt-group-noise")) else float(g)
        return 0.0 if self.bug("no-noise") else 2.0 * sigma * scaled_g * cfg.clip

    def _train_encoder(self, edge_index: torch.Tensor, n: int, y: torch.Tensor, train_idx: torch.Tensor,
                       classes: int, sigma: float, rng: torch.Generator, canary: torch.Tensor | None = None,
                       trace: HeterPoissonTrace | None = None
                       ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """DP-Emb's projected DP-Adam. `canary` (d or T×d, not clipped) is added to every step's
        clipped sum; where `trace` is given, each step's noisy and clean sums are appended to it."""
        cfg, dev = self.config, self.device
        h = cfg.hidden
        if classes > h:
            raise ValueError(f"DP-Emb's head needs hidden >= classes, got hidden={h} < {classes}")
        bound = 1.0 / math.sqrt(n)
        w = ((torch.rand(n, h, generator=rng) * 2 - 1) * bound).to(dev)
        b = ((torch.rand(h, generator=rng) * 2 - 1) * bound).to(dev)
        u, _, vt = torch.linalg.svd(torch.randn(h, h, generator=rng))
        head = ((u @ vt)[:classes].t() * math.sqrt(6.0 / h)).to(dev)  # R: h × C, fixed
        self._project(w)
        m = train_idx.numel()
        batch, t_enc, _ = self._schedule(m)
        std = self._encoder_noise_std(sigma)
        self._encoder_std = std
        adj = self._adjacency(edge_index, n, torch.float32)
        adj_t = self._adjacency(edge_index.flip(0), n, torch.float32)
        row_deg = torch.bincount(edge_index[0], minlength=n).float().to(dev)
        w.requires_grad_(True)
        b.requires_grad_(True)
        opt = torch.optim.Adam([w, b], lr=cfg.lr, weight_decay=cfg.encoder_weight_decay)
        y_dev = y.to(dev)
        for t in range(t_enc):
            idx = train_idx[torch.randperm(m, generator=rng)[:batch]].to(dev)
            with torch.no_grad():
                pre_all = torch.sparse.mm(adj, w)
            pre = (pre_all[idx] + b).detach().requires_grad_(True)
            loss = F.cross_entropy(F.selu(pre) @ head, y_dev[idx], reduction="sum")
            (gpre,) = torch.autograd.grad(loss, pre)  # row i = ∂loss_i/∂pre_i
            with torch.no_grad():
                # ∂loss_i/∂W = a_iᵀ g_i, ∂loss_i/∂b = g_i: ‖·‖² = (deg_i + 1)‖g_i‖²
                norms = gpre.norm(dim=1) * torch.sqrt(row_deg[idx] + 1.0)
                scale = torch.clamp(cfg.clip / (norms + 1e-12), max=1.0)
                gs = gpre * scale[:, None]
                scattered = torch.zeros(n, h, device=dev)
                scattered[idx] = gs
                grad_w = torch.sparse.mm(adj_t, scattered)
                grad_b = gs.sum(0)
                noise = torch.randn(n * h + h, generator=rng).to(dev) * std
                clean = torch.cat([grad_w.reshape(-1), grad_b])
                if canary is not None:
                    clean = clean + (canary[t] if canary.dim() == 2 else canary)
                noisy = clean + noise
                if trace is not None:
                    trace.steps.append(TraceStep(noisy=noisy.cpu(), central=idx.cpu(),
                                                 canary_in=True if canary is not None else None, clean=clean.cpu()))
                w.grad = noisy[: n * h].view(n, h) / batch
                b.grad = noisy[n * h:] / batch
            opt.step()
            with torch.no_grad():
                self._project(w)
        w = w.detach()
        with torch.no_grad():
            self._project(w)
        if not self.bug("norm-noop"):
            assert float(w.norm(dim=1).max()) <= cfg.norm_scale * (1 + 1e-5), "W rows exceed c"
        return w, b.detach(), head

    def _train_classifier(self, inputs: torch.Tensor, y: torch.Tensor, masks: tuple, classes: int,
                          sigma: float, rng: torch.Generator) -> tuple[nn.Module, dict[str, float]]:
        cfg, dev = self.config, self.device
        private = cfg.level != "edge"
        dropout = cfg.dropout if cfg.dropout is not None else (0.0 if private else 0.5)
        batch_norm = cfg.batch_norm if cfg.batch_norm is not None else not private
        if private and (batch_norm or dropout > 0):
            raise ValueError("DP-Adam needs per-example gradients: batch_norm=False and dropout=0 under node GDP")
        features = inputs.size(1) - cfg.hidden
        model = _LinkX(features, cfg.hidden, classes, dropout, batch_norm).to(dev)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        train_idx = torch.nonzero(masks[0]).view(-1)
        m = train_idx.numel()
        batch, _, t_clf = self._schedule(m)
        per_epoch = max(1, m // batch)
        steps = t_clf if private else cfg.epochs_classifier * per_epoch
        std = 0.0 if self.bug("no-noise") else 2.0 * sigma * cfg.clip
        y_dev = y.to(dev)
        best, best_val, best_state = None, -1.0, None
        perm = torch.randperm(m, generator=rng)
        for step in range(steps):
            model.train()
            if private:
                idx = train_idx[torch.randperm(m, generator=rng)[:batch]].to(dev)
                grads = per_example_gradients(model, _ce, inputs[idx], y_dev[idx])
                clipped = clip_rows(flatten(grads), cfg.clip)
                assign_flat_grad(model, noisy_sum(clipped, std, rng) / batch)
            else:
                pos = step % per_epoch
                if pos == 0:
                    perm = torch.randperm(m, generator=rng)
                idx = train_idx[perm[pos * batch:(pos + 1) * batch]].to(dev)
                opt.zero_grad()
                F.cross_entropy(model(inputs[idx]), y_dev[idx]).backward()
            opt.step()
            if (step + 1) % per_epoch == 0 or step + 1 == steps:
                acc = self._accuracy(model, inputs, y_dev, masks)
                if cfg.checkpoint == "last" or acc["val"] > best_val:
                    best_val, best = acc["val"], acc
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        model.load_state_dict(best_state)
        model.eval()
        return model, best

    @staticmethod
    def _accuracy(model: nn.Module, inputs: torch.Tensor, y: torch.Tensor, masks: tuple) -> dict[str, float]:
        model.eval()
        with torch.no_grad():
            pred = model(inputs).argmax(1)
        out = {}
        for name, mask in zip(("train", "val", "test"), masks):
            mask = mask.to(pred.device)
            out[name] = float((pred[mask] == y[mask]).float().mean()) if int(mask.sum()) else float("nan")
        return out

    def _classifier_inputs(self, x: torch.Tensor, z: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        zin = (z - b.double()) / self.config.norm_scale if self.config.rescale_z else z
        return torch.cat([x.to(self.device).float(), zin.float()], dim=1)

    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        cfg, dev = self.config, self.device
        masks = self._masks(graph)
        m = int(masks[0].sum())
        if cfg.num_train is not None and cfg.num_train != m:
            raise ValueError(f"num_train={cfg.num_train} is for accounting only; this graph has {m} "
                             "training nodes (unset num_train to fit it)")
        if m == 0:
            raise ValueError("DPDGC needs at least one training node")
        claim = self.claim(graph)
        sigma = claim.details["noise_multiplier"]
        n = graph.num_nodes
        y = graph.y.cpu()
        classes = int(y.max()) + 1
        train_idx = torch.nonzero(masks[0]).view(-1)
        canary = self._canary(graph, claim)
        hash_seed = int(torch.randint(0, 2**62, (1,), generator=rng))
        edges = self._edges(graph, hash_seed)
        encoder_args = (edges, n, y, train_idx, classes, sigma)
        encoder_state = rng.get_state()  # the trace view replays DP-Emb from here (no draw)
        w, b, head = self._train_encoder(*encoder_args, rng, canary)
        self._last = (w, b, hash_seed)
        w64, b64 = w.double(), b.double()

        # The degree bound's hash seed is internal randomness, not released: under node GDP the
        # auditor's mean uses a fixed public seed instead, so the step is no exact Gaussian LLR
        # (noise_std None below: a projection statistic with a held-out threshold). Conditioning
        # on the run's own seed would test the bound on a quantity the adversary never sees.
        bounded = cfg.level == "node"
        mean_seed = 0 if bounded else hash_seed

        def mean(g: Any) -> torch.Tensor:
            adj = self._adjacency(self._edges(g, mean_seed), g.num_nodes, torch.float64)
            return torch.sparse.mm(adj, w64) + b64

        z_std = 0.0 if self.bug("no-noise") else claim.details["noise_std"]
        noise = torch.randn(n, cfg.hidden, generator=rng, dtype=torch.float64).to(dev)
        adj_run = self._adjacency(edges, n, torch.float64)
        z = (torch.sparse.mm(adj_run, w64) + b64) + z_std * noise
        inputs = self._classifier_inputs(graph.x, z, b)
        with seeded(rng):  # module init and dropout draw from torch's global RNG, seeded from rng
            model, acc = self._train_classifier(inputs, y, masks, classes, sigma, rng)

        def predict(g: Any, nodes: Any = None) -> torch.Tensor:
            with torch.no_grad():
                probs = F.softmax(model(self._classifier_inputs(g.x, z, b)), dim=1).cpu()
            return probs if nodes is None else probs[torch.as_tensor(nodes, dtype=torch.long)]

        weights = {"emb.W": w.cpu(), "emb.b": b.cpu(), "emb.R": head.cpu(),
                   **{f"clf.{k}": v.detach().cpu() for k, v in model.state_dict().items()}}
        # noise_std is the algorithm's (claimed) std; planted bugs change the output, not this
        step = MechanismStep(output=z, mean=mean, noise_std=None if bounded else claim.details["noise_std"],
                             name="Z = A·W + b + N" + (" (mean with a public degree-bound seed)" if bounded else ""))
        info = {
            "accuracy": acc,
            "fresh_noise_per_query": False,
            "max_row_norm": float(w.norm(dim=1).max()),
            "noise_multiplier": sigma,
            "z_noise_std": z_std,
            "encoder_noise_std": self._encoder_std,
            "degree_hash_seed": hash_seed,
        }
        trace = None
        if self.offers_trace():
            trace = Lazy(lambda: self._replay_trace(encoder_state, encoder_args, canary, w))
        return Release(api=predict, weights=weights, mechanism=[step], trace=trace, info=info)

    def _canary(self, graph: Any, claim: Claim) -> torch.Tensor | None:
        """The Dirac gradient canary world 1 carries (``graph.canary_gradient``), checked."""
        gc, node = canary_from(graph)
        if gc is None:
            return None
        if node is not None:
            raise ValueError("DPDGC's gradient canary is a virtual example: canary_node is not supported")
        if not self.offers_trace():
            raise ValueError("DPDGC takes a gradient canary only under k-neighbour or node GDP (unit='node'), "
                             "where it releases DP-Emb's trace")
        if claim.details["sampling_rate"] < 1.0:
            raise ValueError("DPDGC's gradient canary needs full-batch DP-Emb (batch_size >= #training nodes, "
                             "q = 1): its batches are fixed-size without replacement, so a virtual example has "
                             "no inclusion coin that the accountant covers")
        d, steps = self.dimension(graph), claim.details["steps_encoder"]
        gc = torch.as_tensor(gc, dtype=torch.float32)
        if gc.shape[-1] != d or gc.dim() not in (1, 2) or (gc.dim() == 2 and gc.size(0) < steps):
            raise ValueError(f"canary_gradient must have shape ({d},) or ({steps}, {d}), got {tuple(gc.shape)}")
        return gc.to(self.device)

    def _replay_trace(self, state: torch.Tensor, encoder_args: tuple, canary: torch.Tensor | None,
                      w: torch.Tensor) -> HeterPoissonTrace:
        """DP-Emb's trace: the encoder re-run from the generator state it started from, recording.

        Recording during fit would hold T×d×2 floats per release whether or not an attack reads
        them (GBs at the paper's settings); the replay is checked to give back the released W.
        """
        n, train_idx, sigma = encoder_args[1], encoder_args[3], encoder_args[5]
        m = train_idx.numel()
        batch, t_enc, _ = self._schedule(m)
        h = self.config.hidden
        trace = HeterPoissonTrace(noise="gaussian", noise_std=self._encoder_noise_std(sigma),
                                  clip_norm=self.config.clip, sampling_rate=batch / m, expected_batch=batch,
                                  accounted_steps=t_enc, shapes={"emb.W": (n, h), "emb.b": (h,)})
        gen = torch.Generator()
        gen.set_state(state)
        w_again, _, _ = self._train_encoder(*encoder_args, gen, canary, trace)
        if not torch.equal(w_again, w):
            raise RuntimeError("replaying DP-Emb did not reproduce the released W (non-deterministic kernels?)")
        return trace

    def noiseless(self, graph: Any) -> torch.Tensor | None:
        """A·W + b with the last fit's W, b (or, before any fit, those of a reference fit, seed 0)."""
        if self._last is None:
            self.fit(graph, torch.Generator().manual_seed(0))
        w, b, hash_seed = self._last
        adj = self._adjacency(self._edges(graph, hash_seed), graph.num_nodes, torch.float64)
        return torch.sparse.mm(adj, w.double()) + b.double()
