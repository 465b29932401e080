"""Gradient canaries: two worlds that differ by one Dirac gradient canary (white-box audit).

:class:`DiracGradient` (Nasr et al. 2021/2023; the HeterPoisson paper's Algorithm 5): the canary
is a virtual extra example whose clipped gradient is ``C·e_j`` — at the target's clip norm C, on
one parameter coordinate j — added to the clipped sum at every step where its own Poisson(q) coin
comes up (always when q = 1). ``g0`` is the graph itself; ``g1`` is a shallow copy carrying
``canary_gradient`` (a length-d float32 tensor) as a graph attribute, which the DP-SGD targets
(``targets.heterpoisson``, ``targets.dpsgd_gcn``, ``targets.dpdgc``) read in ``fit``. Those targets
split the canary's coin off their generator in *both* worlds (DPDGC needs none: its canary runs at
q = 1), so the two worlds see identical batches and noise until the canary changes the model.

Coordinate choice (``info["chosen_by"]``): one *probe* run of the target with its ``no-noise``
bug (a noiseless run; when the target has no such bug, a normal run), on a generator drawn from
the canary rng (never a scored trial); j = the coordinate with the smallest total |clean clipped
sum| over the probe's steps, i.e. the one natural gradients use least. If the target has no trace
(no probe possible), j = the last coordinate.

``info`` also records the claimed noise law the attacks need (``noise``, ``noise_std``,
``sampling_rate``, ``clip_norm``) read from the target's claim, so an attack scores under the
*claimed* mechanism even when a planted bug changes the released one. A target whose claim's
``noise_std`` is not its trace's (DPDGC: that of Z) states the trace's own law
(``Claim.trace``, a :class:`targets.base.TraceLaw` with the canary's norm); a claim that states no
trace law is an error here (``ClaimFieldMissing``), never a law guessed.

:class:`DiracNode` (``dirac-node``) puts the same canary on a whole training node z of HeterPoisson:
the target adds k_t·C·e_j at step t, k_t = 1[z central] + 2·(other stars in which z survives as a
peripheral), and records k_t in both worlds' traces; z is chosen from public structure (its class
docstring says how).

Why a wrong released std keeps the Gaussian audit valid: with Gaussian noise, q = 1 and the rest
of the sum known, gradient-lrt's score Σ_t (⟨x_t, g^c⟩ − ‖g^c‖²/2)/s² (s the *claimed* std) is a
linear statistic of the released Gaussian noise whatever its true std s': normal with the same
variance T‖g^c‖²s'²/s⁴ in both worlds and means ±T‖g^c‖²/(2s²), symmetric about 0. Its trade-off
curve is exactly Gaussian (μ = √T‖g^c‖/s'), so the gdp estimator at the threshold 0 holds.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from canaries.base import Canary, CanaryPair
from targets.base import GradientCanary, Level, NeighbourSampling, Unit, implements


def _replace_bug(target: Any, bug: str | None) -> Any:
    from targets.base import replace_config

    return type(target)(replace_config(target.config, bug=bug))


class DiracGradient(Canary):
    name = "dirac-gradient"
    unit = Unit.NODE
    relation = "gradient"

    def __init__(self, probe: bool = True, magnitude: float | None = None) -> None:
        self.probe = probe
        self.magnitude = magnitude

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        if target is None or not implements(target, GradientCanary, "dimension"):
            raise ValueError("the dirac-gradient canary needs a DP-SGD target that declares dimension(graph)")
        # a target whose trace is not its headline mechanism names the trace's claimed law itself
        # (e.g. DPDGC: DP-Emb's std 2σ·g·C, and a canary of g·C for one group of g examples)
        law = target.claim(graph).trace_law()
        magnitude = float(self.magnitude) if self.magnitude is not None else law.canary_norm
        d = int(target.dimension(graph))
        j, chosen_by = d - 1, "last coordinate (no probe run)"
        if self.probe and Level.TRACE in target.levels:
            probe_target = target
            has_bug = "no-noise" in target.bugs
            if has_bug:
                probe_target = _replace_bug(target, "no-noise")
            elif target.config.bug is not None:
                probe_target = _replace_bug(target, None)
            seed = int(rng.integers(0, 2**62))
            trace = probe_target.fit(graph, torch.Generator().manual_seed(seed)).view(Level.TRACE)
            usage = torch.stack([s.clean.double().abs() for s in trace]).sum(0)
            j = int(torch.argmin(usage).item())
            chosen_by = (f"argmin over coordinates of sum_t |clean clipped sum_t| in one "
                         f"{'noiseless ' if has_bug else ''}probe run (probe seed {seed} from the canary rng, "
                         f"independent of the scored trials); probe usage {float(usage[j]):.3g} "
                         f"vs median {float(usage.median()):.3g}")
        gc = self.vector(d, j, magnitude)
        g1 = copy.copy(graph)
        g1.canary_gradient = gc
        if Level.TRACE in target.levels:
            unread = canary_unread(target, graph, g1, law.sampling_rate)
            if unread:
                raise ValueError(unread)
        info = {
            "canary": self.name, "coordinate": j, "magnitude": magnitude, "dimension": d,
            "chosen_by": chosen_by,
            "inclusion": "virtual extra example with its own Poisson(q) coin per step (q = 1: every step)",
            "noise": law.noise, "noise_std": law.noise_std,
            "sampling_rate": law.sampling_rate, "clip_norm": law.clip_norm,
        }
        info.update(self.describe(d))
        return CanaryPair(graph, g1, info)

    def vector(self, d: int, j: int, magnitude: float) -> torch.Tensor:
        """The canary's clipped gradient: ``magnitude·e_j``."""
        gc = torch.zeros(d, dtype=torch.float32)
        gc[j] = magnitude
        return gc

    def describe(self, d: int) -> dict[str, Any]:
        return {}


#: seeds of the fits :func:`canary_unread` compares (apart from every trial's, probe's and check's)
_READ_CHECK_SEEDS = tuple(0x5EAD0 + i for i in range(4))


def canary_unread(target: Any, graph: Data, g1: Data, q: float | None) -> str | None:
    """Why the target's trace ignores ``graph.canary_gradient``, or None: the two worlds fitted on the same
    generator release the same trace, at a step that records the canary in (``TraceStep.canary_in``) or, where
    no step records it, on every one of :data:`_READ_CHECK_SEEDS` while the chance that the canary's coins all
    came up empty there, (1 − q)^(T·fits), is below 1e-3. A target that declares ``dimension`` but never adds the
    canary would otherwise play two identical worlds, and the pair's exact ε would be the declared law's."""
    identical = 0
    for seed in _READ_CHECK_SEEDS:
        t0, t1 = (target.fit(g, torch.Generator().manual_seed(seed)).view(Level.TRACE) for g in (graph, g1))
        if len(t0) == 0:
            return None
        if len(t0) != len(t1) or any(not torch.equal(a.noisy, b.noisy) for a, b in zip(t0, t1)):
            return None
        identical += 1
        if any(step.canary_in for step in t1):
            break
        if any(step.canary_in is not None for step in t1):
            continue  # recorded, and the coins all came up empty: another seed
        empty = (1.0 - float(q)) ** (len(t1) * identical) if q is not None and 0 < q < 1 else 0.0
        if empty < 1e-3:
            break
    else:
        return None
    return (f"the target declares dimension(graph) but its trace does not read graph.canary_gradient: both worlds "
            f"release the same trace on {identical} shared seed(s) (docs/your-target.md, 'A DP-SGD trace view')")


class SpreadGradient(DiracGradient):
    """A canary gradient of the same ℓ2 norm spread evenly over every coordinate: ``C·1/√d``.

    Under spherical noise (Gaussian, or the SML's single scale per step) direction does not
    matter and this canary is exactly as visible as the Dirac one. Under noise that is a product
    of independent 1-D laws (e.g. a Laplace scale drawn per coordinate), its ℓ1 norm √d·C is what
    the per-coordinate laws see: the privacy loss becomes a sum of d small bounded terms, close
    to a Gaussian one, whose tails exceed the 1-D Laplace bound the claim was computed for.
    """

    name = "spread-gradient"
    #: how many of the last coordinates carry C/√k each (None: all d)
    coordinates: int | None = None
    chosen_by = "fixed direction (every coordinate), chosen before any run"

    def __init__(self, magnitude: float | None = None) -> None:
        super().__init__(probe=False, magnitude=magnitude)

    def vector(self, d: int, j: int, magnitude: float) -> torch.Tensor:
        k = d if self.coordinates is None else self.coordinates
        if d < k:
            raise ValueError(f"the {self.name} canary needs at least {k} coordinates, got {d}")
        gc = torch.zeros(d, dtype=torch.float32)
        gc[d - k:] = magnitude / k**0.5
        return gc

    def describe(self, d: int) -> dict[str, Any]:
        k = d if self.coordinates is None else self.coordinates
        where = f"all {d} coordinates" if self.coordinates is None else f"the last {k} of {d} coordinates"
        return {"direction": f"{where}, magnitude C/sqrt({k}) each (l1 norm sqrt({k})·C)",
                "coordinate": None, "chosen_by": self.chosen_by}


class SplitGradient(SpreadGradient):
    """A canary gradient of ℓ2 norm C split evenly over three coordinates: ``C/√3`` on each of the
    last three.

    Against a product of 1-D Laplace laws of scale b, the product-Laplace LLR (attack
    ``gradient-l1``) is at its maximum ``√3·C/b`` exactly on the orthant {x_i ≥ c_i}, an event of
    probability 1/8 in the IN world and e^{−√3·C/b}/8 in the OUT world: a privacy loss √3 times the
    1-D Laplace's, on an event frequent enough for ``cp`` to certify. Spread over all d coordinates
    (:class:`SpreadGradient`) the same loss is split into d tiny terms and its tail is out of reach
    of any trial budget; three is the k that maximises the cp bound at 4,000 trials (√k·C/b against
    the event's mass 2^−k). Under the SML the three coordinates are a 3-D SML, whose orthant event
    has a smaller loss (tests/test_gradient_audit.py computes both).
    """

    name = "split-gradient"
    coordinates = 3
    chosen_by = "fixed coordinates (the noise is i.i.d. across coordinates), chosen before any run"


class DiracNode(DiracGradient):
    """A Dirac gradient canary that stands for a whole training node z (HeterPoisson's unit).

    The target adds ``k_t · C·e_j`` at step t, k_t = 1[z central] + 2·(number of other stars in
    which z survives as a peripheral), and records k_t in the trace of both worlds (see
    ``targets.heterpoisson``, ``canary_whole_node``). ``g0`` and ``g1`` both carry
    ``canary_node = z`` and ``canary_whole_node = True``; ``g1`` also carries the gradient.

    z is chosen from public structure only, before any run: the training node whose copy
    neighbour sampling keeps in the most other training stars, i.e. the largest
    ``E(1 + 2K)²`` with ``K ~ Bin(t_z, min(1, M/outdeg(z)))`` (t_z = z's out-edges to training
    nodes): the sensitivity z would reach if overlap removal let every such copy through.
    Ties go to the smallest id. The coordinate j is DiracGradient's.
    """

    name = "dirac-node"
    unit = Unit.NODE

    @classmethod
    def pointed_by(cls, target: Any, graph: Any) -> str | None:
        if implements(target, NeighbourSampling, "neighbour_sample_size"):
            return (f"the target samples up to {target.neighbour_sample_size()} neighbour(s) per node: a whole "
                    "node's gradient can enter other nodes' stars")
        return None

    def worlds(self, graph: Data, rng: np.random.Generator, target: Any = None) -> CanaryPair:
        pair = super().worlds(graph, rng, target)
        neighbors = float(target.neighbour_sample_size())
        z, exposure, t_z, p_z = exposed_training_node(graph, neighbors, target.outdegrees(graph))
        g0, g1 = copy.copy(graph), pair.g1
        for g in (g0, g1):
            g.canary_node = z
            g.canary_whole_node = True
        info = dict(pair.info)
        recorded = bool(target.records_node_scale())
        info.update({
            "canary": self.name, "node": z, "node_scale_recorded": recorded,
            "node_chosen_by": (f"public structure, before any run: argmax over training nodes of E(1+2K)^2, "
                               f"K ~ Bin(training out-neighbours, min(1, M/outdeg)); z = {z}: {t_z} training "
                               f"out-neighbours, keep probability {p_z:.3g}, E(1+2K)^2 = {exposure:.3g}"),
            "inclusion": "whole node: k_t = 1[z central] + 2·(other stars keeping z) times C·e_j, k_t recorded "
                         "in the trace (canary_scale) in both worlds" if recorded else
                         "C·e_j on z's own sampling coin: the target takes no whole-node canary (it records no k_t)",
            "node_training_out_degree": t_z, "node_keep_probability": p_z,
        })
        return CanaryPair(g0, g1, info)


def exposed_training_node(graph: Data, neighbors: float, outdeg: torch.Tensor) -> tuple[int, float, int, float]:
    """(z, E(1+2K)², t_z, p_z) for the training node maximising E(1+2K)², K ~ Bin(t_z, p_z)."""
    train = graph.train_mask.cpu()
    src, dst = graph.edge_index[0].cpu(), graph.edge_index[1].cpu()
    t = torch.bincount(src[train[dst]], minlength=graph.num_nodes).double()
    p = torch.clamp(neighbors / outdeg.double().clamp(min=1), max=1.0)
    mean = t * p
    second = mean * (1 - p) + mean**2  # E K² of a binomial
    exposure = 1 + 4 * mean + 4 * second
    exposure[~train] = -1.0
    z = int(torch.argmax(exposure).item())  # first maximum: the smallest id among ties
    return z, float(exposure[z]), int(t[z]), float(p[z])
