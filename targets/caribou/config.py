"""CARIBOU's config: every hyperparameter, with the spec's defaults (see :mod:`targets.caribou`)."""
from __future__ import annotations

from dataclasses import dataclass

from targets.base import TargetConfig


# ---------------------------------------------------------------------------------------------
@dataclass
class CaribouConfig(TargetConfig):
    """CARIBOU hyperparameters (specs/caribou.md §2.6 defaults).

    ``dropout``: the paper does not give it and GAP's default is 0; 0.5 is chosen because it gives the
    encoder alone its best validation accuracy on Cora/Photo (it reproduces the paper's MLP row best).
    ``x0_dropout`` is explained at :class:`~targets.caribou.model.ClassificationModule` and tuned on
    validation by ``benchmarks/utility.py``.

    Args:
        unit (str): ``edge`` (EDP, one undirected edge) or ``node`` (NDP, a node with its incident edges).
        hops (int): K, the number of Contractive Graph Layer hops in PCMP, each noised and projected.
        contraction (float): C_L in [0, 1), the contraction coefficient of the CGL (Eq. 4).
        alpha1 (float): α1 in [0, 1], weight of the topology term Â·X; α2 = 1 − α1 weighs the global mean.
        beta (float): β > 0, weight of the residual X⁽⁰⁾ re-injected at every hop.
        accountant (str): ``gdp`` (edge: μ = sqrt(M)/σ, exact GDP conversion; node: RDP, improved conversion)
            or ``rdp_paper`` (Theorem 11's RDP, classic conversion).
        pam (str): compositions charged: ``m`` (convergent M(K, C_L)), ``kprime`` or ``linear`` (M = K).
        projection (str): per-row projection after each hop's noise: ``ball`` or ``sphere`` (GAP's normalisation).
        hidden (int): h, the width of the encoder, of every X⁽ᵏ⁾ and of the classification module.
        encoder_epochs (int): encoder pre-training epochs (edge: full-batch Adam; node: DP-SGD epochs).
        cm_epochs (int): classification-module epochs (edge: full-batch Adam; node: DP-SGD epochs).
        lr (float): Adam learning rate of the encoder and the classification module (the paper: 0.001).
        weight_decay (float): Adam's L2 penalty of the encoder and the classification module (GAP's 0).
        dropout (float): dropout rate in the encoder and the classification module, edge level only.
        x0_dropout (float): training-time probability of zeroing a node's whole X⁽⁰⁾ channel in the CM (edge).
        degree_bound (int): node level: D_max, the degree bound enforced by random edge sampling.
        batch_size (int): node level: expected DP-SGD batch; Poisson rate q = batch_size / n_train.
        clip (float): node level: C, the per-example gradient clip norm of DP-SGD.
        queries (int): Q, fresh PCMP releases (inference calls) the claim composes, μ·sqrt(Q).
        noise_multiplier (float, optional): σ at which the claim is evaluated; None calibrates it to ε.
        d_min (int, optional): public D_min of Eq. 6/8; None reads the graph's minimum degree.
        d_max (int, optional): public D_max of Eq. 8; None uses min(the graph's maximum degree, degree_bound).
    """

    unit: str = "edge"
    hops: int = 10
    contraction: float = 0.8
    alpha1: float = 0.9
    beta: float = 1.0
    accountant: str = "gdp"
    pam: str = "m"
    projection: str = "ball"
    hidden: int = 64
    encoder_epochs: int = 100
    cm_epochs: int = 100
    lr: float = 1e-3
    weight_decay: float = 0.0
    dropout: float = 0.5
    x0_dropout: float = 0.0
    degree_bound: int = 100
    batch_size: int = 256
    clip: float = 1.0
    queries: int = 1
    noise_multiplier: float | None = None
    d_min: int | None = None
    d_max: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        checks = [
            ("unit", self.unit in ("edge", "node"), "'edge' or 'node'"),
            ("hops", isinstance(self.hops, int) and self.hops >= 1, "an int >= 1"),
            ("contraction", 0 <= self.contraction < 1, "a float in [0, 1)"),
            ("alpha1", 0 <= self.alpha1 <= 1, "a float in [0, 1]"),
            ("beta", self.beta > 0, "a float > 0"),
            ("accountant", self.accountant in ("gdp", "rdp_paper"), "'gdp' or 'rdp_paper'"),
            ("pam", self.pam in ("m", "kprime", "linear"), "'m', 'kprime' or 'linear'"),
            ("projection", self.projection in ("ball", "sphere"), "'ball' or 'sphere'"),
            ("hidden", self.hidden >= 1, "an int >= 1"),
            ("encoder_epochs", self.encoder_epochs >= 0, "an int >= 0"),
            ("cm_epochs", self.cm_epochs >= 1, "an int >= 1"),
            ("lr", self.lr > 0, "a float > 0"),
            ("weight_decay", self.weight_decay >= 0, "a float >= 0"),
            ("dropout", 0 <= self.dropout < 1, "a float in [0, 1)"),
            ("x0_dropout", 0 <= self.x0_dropout < 1, "a float in [0, 1)"),
            ("degree_bound", self.degree_bound >= 1, "an int >= 1"),
            ("batch_size", self.batch_size >= 1, "an int >= 1"),
            ("clip", self.clip > 0, "a float > 0"),
            ("queries", self.queries >= 1, "an int >= 1"),
            ("noise_multiplier", self.noise_multiplier is None or self.noise_multiplier > 0, "None or > 0"),
            ("d_min", self.d_min is None or self.d_min >= 1, "None or an int >= 1"),
            ("d_max", self.d_max is None or self.d_max >= 1, "None or an int >= 1"),
        ]
        self.require_all(checks)
