"""What a target tells the sensitivity probe about its noisy steps (the ``Target.step_maps`` hook).

A :class:`StepMap` describes one released noisy step the way its DP proof sees it: the step's
noiseless output is ``apply(graph, X)`` for an input matrix X (n × h) that is held fixed between the
two worlds (the previously released hop, the public encoder output, the released DP-Emb weights W,
the features themselves, ...). The claim bounds ``‖apply(g1, X) − apply(g0, X)‖`` (``norm``:
``l2`` = Frobenius for Gaussian mechanisms, ``l1`` = Σ of every entry's absolute change for Laplace
mechanisms, ``l21`` = Σ of row ℓ2 norms, e.g. GCON's Ψ) over
neighbouring (g0, g1) and X in the claim's *domain*: rows of ℓ2 norm at most ``radius``.
``realised(graph)`` is the X the target itself computes on that graph (``None`` where the probe
only searches the domain). A map that is linear in X column by column (``linear``) is searched
exactly through its matrix; any other map by projected ascent.

A :class:`SampledStep` is a step whose change the probe can only measure on sampled couplings
(one DP-SGD step: a batch drawn, world 0 the same batch without the canary node).

A :class:`StepDeclaration` is what a target that writes no adapter declares instead (the
``Target.declared_steps`` hook): a mean map reading the graph and its features, the noise law and
the claimed Δ. :func:`derived_step_maps` turns declarations into step maps, so a user's target is
probed from its declarations alone.

A target's adapters call the target's own code (its aggregation, propagation, projection), never
a re-implementation, so a bug in the target is a bug in the map.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch


#: the norms a claimed Δ may be stated in (module docstring)
NORMS = ("l2", "l1", "l21")


@dataclass
class StepMap:
    """One noisy step of a target, as a map of a held-fixed input X (module docstring).

    Args:
        name: the step (``hop k``, ``Z``, ...); ``covers`` lists the released steps it stands for
            (steps with one map and one domain, e.g. every hop of GAP, are probed once).
        norm: ``l2``, ``l1`` or ``l21``.
        kinds: canary kinds the claim protects (``edge`` = one undirected edge, ``directed`` =
            one directed entry u→v, ``node`` = add/remove one node with its edges).
        extra_kinds: kinds measured for information only (e.g. an undirected edge against a
            directed claim), never part of the verdict.
        apply: ``(graph, X) -> output`` (float64).
        claimed: ``(g0, g1) -> Δ`` the claim charges for this pair, or ``None`` when the pair is
            outside the claim's domain (e.g. an isolated node under CARIBOU's D_min ≥ 1).
        radius: domain of X: rows of ℓ2 norm ≤ radius; ``None``: only the realised X.
        width: h, the number of columns of X (0: as many as the rows the change reads).
        realised: the target's own X on a graph, if the probe can compute it.
        linear: ``apply`` is linear in X column by column (the probe then searches X exactly
            through ``apply(g, I)``); otherwise X is searched by projected ascent.
        node_excludes_row: node canaries exclude the canary node's own output row (add/remove:
            the absent node has no row; DPDGC's partial DP of Z without row r).
        degree_bound: the public degree bound the step relies on (sizes hub families).
        in_domain: ``(g0, g1, kind, canary) -> bool``: pairs the probe may use (search restriction).
        input_is_features: X is the graph's own features (a declared step): a witness then stores
            its X as its graph's features, so the witness graph carries X into the target's step.
    """

    name: str
    norm: str
    kinds: tuple[str, ...]
    apply: Callable[[Any, torch.Tensor], torch.Tensor]
    claimed: Callable[[Any, Any], float | None]
    radius: float | None
    width: int
    realised: Callable[[Any], torch.Tensor | None] | None = None
    extra_kinds: tuple[str, ...] = ()
    covers: list[str] = field(default_factory=list)
    linear: bool = True
    node_excludes_row: bool = True
    degree_bound: int | None = None
    in_domain: Callable[..., bool] | None = None
    note: str = ""
    input_is_features: bool = False

    @property
    def hub_size(self) -> int:
        """Leaves of the hub family: 4D + 1 where the step has a degree bound D (an unbounded hub
        then moves √(4D+1) ≈ 2√D), else 12."""
        return (4 * self.degree_bound + 1) if self.degree_bound is not None else 12


@dataclass
class Coupling:
    """One sampled coupling of a :class:`SampledStep`: the measured change, the Δ the claim
    charges for it, and what was sampled (recorded in the witness)."""

    measured: float
    claimed: float
    info: dict[str, Any]


@dataclass
class SampledStep:
    """A noisy step measured on sampled couplings (module docstring), node canaries only.

    Args:
        change: ``(graph, node, batch_seed, model_seed) -> Coupling``: world 1 = `graph` with
            `node` in the sampled batch, world 0 = the same batch without it.
        sources: ``(graph, candidates, rng, use_families) -> [(label, graph, nodes)]``: the graphs
            and canary nodes to probe (the given graph's first).
        batch_seeds, model_seeds: the couplings tried per node.
        describe: one line for a coupling's ``info`` (what the witness says it found).
    """

    name: str
    norm: str
    kinds: tuple[str, ...]
    change: Callable[[Any, int, int, int], Coupling]
    sources: Callable[[Any, int, np.random.Generator, bool], list[tuple[str, Any, list[int]]]]
    batch_seeds: tuple[int, ...] = (7, 1007, 2007, 3007)
    model_seeds: tuple[int, ...] = (0, 1)
    describe: Callable[[dict[str, Any]], str] = lambda info: ""
    covers: list[str] = field(default_factory=list)
    note: str = ""
    radius: float | None = None
    extra_kinds: tuple[str, ...] = ()


@dataclass
class TightPair:
    """A neighbouring pair a target constructs from its paper's worst case (e.g. a spec's tight
    canary), measured on the step named ``step`` beside the probe's search.

    Args:
        label: what it is (``GCON tight canary (spec §7.1)``), the witness's ``found_by``.
        g0, g1, kind, canary: the pair (world 1 has the canary).
        summary: ``(given_pairs) -> dict``: the target's own numbers on the pair, compared with the
            given graph's canaries ``given_pairs`` = [(canary, h0, h1)].
        render: one report line from the summary (with ``measured``, ``claimed``, ``witness`` added).
    """

    label: str
    step: str
    g0: Any
    g1: Any
    kind: str
    canary: Any
    summary: Callable[[list[tuple[Any, Any, Any]]], dict[str, Any]]
    render: Callable[[dict[str, Any]], str]


@dataclass
class WitnessPlan:
    """How the game plays a witness: ``run --target T --dataset D --canary C --set PARAMS``, and
    how the witness's input reaches the target's step (``how``)."""

    target: str
    dataset: str
    canary: str
    params: dict[str, str]
    how: str

    def argv(self) -> list[str]:
        sets = [f"{k}={v}" for k, v in self.params.items()]
        return ["--target", self.target, "--dataset", self.dataset, "--canary", self.canary,
                *(["--set", " ".join(sets)] if sets else [])]


# ---------------------------------------------------------------------------------------------
# declared steps: a probe for any target
# ---------------------------------------------------------------------------------------------
@dataclass
class StepDeclaration:
    """One noisy step a target declares: ``release = mean(graph) + noise``.

    Args:
        name: the step.
        mean: ``graph -> tensor``: the noiseless output on *any* graph, reading its ``edge_index``
            and its features ``x`` (the probe passes float64 features and graphs of any size).
        sensitivity: the claimed Δ of ``mean`` between neighbouring graphs, in ``norm``; or
            ``(g0, g1) -> Δ`` (``None`` for a pair outside the claim's domain).
        noise: the noise law (``gaussian``, ``laplace``, ...) with ``noise_std`` its scale.
        feature_bound: the claim's domain of features: rows of ℓ2 norm ≤ this bound (the probe
            then searches adversarial features over it); ``None``: the claim holds for the given
            features only, and the probe reads those.
        linear: ``mean`` is linear in ``x`` (column by column): the probe then searches the features
            exactly; otherwise by projected gradient ascent through ``mean`` (a search, not a proof).
        norm: the norm the claimed Δ is in: ``l2`` (a Gaussian step), ``l1`` (a Laplace step: the
            sum of absolute changes of every entry) or ``l21`` (Σ of row ℓ2 norms).
    """

    name: str
    mean: Callable[[Any], torch.Tensor]
    sensitivity: float | Callable[[Any, Any], float | None]
    noise: str = "gaussian"
    noise_std: float | None = None
    feature_bound: float | None = None
    linear: bool = False
    norm: str = "l2"

    def __post_init__(self) -> None:
        if self.norm not in NORMS:
            raise ValueError(f"The 'norm' parameter of StepDeclaration must be one of {', '.join(NORMS)}. "
                             f"Got {self.norm!r}.")


def with_features(graph: Any, x: torch.Tensor) -> Any:
    """A shallow copy of `graph` whose features are `x` (float64)."""
    g = copy.copy(graph)
    g.x = x.double()
    return g


def derived_step_maps(declarations: list[StepDeclaration], kinds: tuple[str, ...], width: int) -> list[StepMap]:
    """The step maps of declared steps (module docstring): X is the features (`width` columns),
    ``apply(g, X)`` = ``mean`` on `g` with features X, ``realised`` = the graph's own features."""
    return [_derived(d, kinds, width) for d in declarations]


def _derived(d: StepDeclaration, kinds: tuple[str, ...], width: int) -> StepMap:
    def apply(graph: Any, x: torch.Tensor) -> torch.Tensor:
        return d.mean(with_features(graph, x)).double()

    def claimed(g0: Any, g1: Any) -> float | None:
        return d.sensitivity(g0, g1) if callable(d.sensitivity) else float(d.sensitivity)

    def realised(graph: Any) -> torch.Tensor | None:
        return None if getattr(graph, "x", None) is None else graph.x.double()

    domain = (f"feature rows ‖x‖ ≤ {d.feature_bound:g}" if d.feature_bound is not None
              else "the given features only (no feature bound declared)")
    return StepMap(name=d.name, norm=d.norm, kinds=kinds, apply=apply, claimed=claimed, radius=d.feature_bound,
                   width=width, realised=realised, covers=[d.name], linear=d.linear, input_is_features=True,
                   note=f"declared: mean(graph) + {d.noise} noise; X = the features; domain: {domain}")


def mechanism_declarations(target: Any, graph: Any) -> list[StepDeclaration]:
    """Declarations read from what a target releases where it declares none: each ``MechanismStep`` of
    one fit (seed 0), at the claim's Δ (``Claim.sensitivity``, in ℓ2), on the given features
    only (no feature bound is declared) and not taken as linear. Empty where the target has no
    mechanism view, states no Δ, or releases a step that is not a plain Gaussian one."""
    if "mechanism" not in [str(getattr(level, "value", level)) for level in target.levels]:
        return []
    claim = target.claim(graph)
    delta = claim.stated("sensitivity")
    if delta is None:
        return []
    release = target.fit(graph, torch.Generator().manual_seed(0))
    steps = list(release.mechanism or [])
    if not steps or not all(_plain_gaussian(s) for s in steps):
        return []  # an ℓ2 Δ is the claim of plain Gaussian steps only: another law is left "not probed"
    return [StepDeclaration(s.name or f"step {i + 1}", s.mean, sensitivity=float(delta), noise_std=s.noise_std)
            for i, s in enumerate(steps)]


def _plain_gaussian(step: Any) -> bool:
    """``output = mean + N(0, std²)``: a mean map, a std, no other law, no projection."""
    return (getattr(step, "mean", None) is not None and step.noise_std is not None
            and step.log_density is None and not step.row_projected)
