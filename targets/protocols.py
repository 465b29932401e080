"""The target contract's optional parts, one small protocol each, with the defaults the harness uses.

A target's minimum is :class:`targets.core.TargetCore` (config, claim, fit, levels, unit, bugs). Every
other thing the harness reads of a target belongs to one of the protocols below: a mixin class
whose methods are the defaults, which a target overrides in its own package where it has something
to say. :class:`targets.target.Target`, the base every target subclasses, is the core with every
protocol mixed in, so a target that overrides a hook keeps working as before.

* :class:`Batching`: cost and batching (``fit_batch``, trial and setup costs, per-worker caches);
* :class:`Preprocessing`: the graph the claim is read on (preprocessing, public pins, assumptions);
* :class:`Probing`: the sensitivity probe's hooks (declared steps, step maps, tight pair, noiseless map);
* :class:`Witnessing`: whether and how a mechanism-level witness is played;
* :class:`GradientCanary`: a trace that takes a gradient canary (its dimension);
* :class:`NeighbourSampling`: the public out-degrees and the neighbour sampler's size;
* :class:`Catalogued`: the bug catalogue's entries and the attacks' contract fixtures.

:func:`implements` says whether a target states a protocol itself (overrides one of its members, or
mixes it into a bare core), which is what the harness asks before it relies on one.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from targets.common.catalogue import Entry
from targets.common.claim import Claim
from targets.common.config_keys import replace_config
from targets.common.probe import (SampledStep, StepDeclaration, StepMap, TightPair, WitnessPlan, derived_step_maps,
                                  mechanism_declarations)
from targets.common.value_enum import Level, Unit
from targets.release import Release

if TYPE_CHECKING:
    from targets.core import TargetCore

#: seconds one trial of a view takes on the reference machine, for a target that declares none
#: (:meth:`Batching.trial_cost`): on the high side of the built-in targets' measured costs
TRIAL_COST = {Level.MECHANISM: 0.01, Level.TRACE: 0.05, Level.WEIGHTS: 0.5, Level.API: 0.5}
#: seconds of a run's setup on the reference machine, for a target that declares none (:meth:`Batching.setup_cost`)
SETUP_COST = 2.0
#: how a witness reaches a step declared through ``Probing.declared_steps`` (the default witness plan)
DECLARED_WITNESS_HOW = "the witness graph, whose features are the declared step's input X"


class Protocol:
    """A part of the target contract: its members are the names it declares (:func:`implements`)."""

    @classmethod
    def members(cls) -> tuple[str, ...]:
        return tuple(k for k in vars(cls) if not k.startswith("_") and k != "members")


class Batching(Protocol):
    """Cost and batching: what a trial costs and how many run at once."""

    #: True where :meth:`fit_batch` does genuinely vectorised work (the game then batches by default)
    batched: ClassVar[bool] = False
    #: a batched target's own auto batch for the mechanism view on CPU (None: the game's default)
    auto_batch: ClassVar[int | None] = None
    #: True where :meth:`fit_batch` trains on one thread per core while the game's thread waits, so
    #: the game scores the previous batch meanwhile (its pipeline; on CUDA it always does)
    score_alongside: ClassVar[bool] = False
    #: seconds one trial of each view takes at the default configuration on the reference machine
    #: (:meth:`trial_cost`; measured by ``benchmarks/calibrate_costs.py``), and of a run's setup on a
    #: new canary (:meth:`setup_cost`); a view left out costs :data:`TRIAL_COST`
    trial_costs: ClassVar[dict[Level, float]] = {}
    setup_seconds: ClassVar[float | None] = None

    def fit_batch(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """Train ``len(rngs)`` independent runs on the same `graph`, run j with randomness from
        ``rngs[j]`` only, each generator consumed exactly as ``fit`` would consume it: so
        ``fit_batch(graph, rngs)[j]`` releases what ``fit(graph, rngs[j])`` does.

        Default: one ``fit`` per generator. Targets that vectorise it set ``batched = True``.
        """
        return [self.fit(graph, rng) for rng in rngs]  # type: ignore[attr-defined]

    def trial_cost(self, level: Level) -> float:
        """Seconds one trial of the `level` view takes at this configuration on the reference machine
        (one core of the project's 2-core box, ``benchmarks/calibrate_costs.py``): what a budget in
        work units spends per trial (:mod:`audit.budget`). A declared number, never a measurement, so
        that a budget in units plays the same trials on any machine. Default: the class's
        ``trial_costs`` table, else :data:`TRIAL_COST` by view."""
        return float(self.trial_costs.get(level, TRIAL_COST[level]))

    def setup_cost(self) -> float:
        """Seconds, on the reference machine, of the work a run does on a new canary before its first
        trial (the pair, the declared-model check, per-world caches): what a budget in work units
        charges the first pilot of each (view, canary). Default: ``setup_seconds``, else :data:`SETUP_COST`."""
        return float(SETUP_COST if self.setup_seconds is None else self.setup_seconds)

    def prepare(self, graph: Any) -> None:
        """Work that depends on neither the secret bit nor the canary (cached per worker)."""

    def cached_work(self) -> str | None:
        """One line on the work :meth:`prepare` (or a per-worker cache) does once and every trial
        reuses, for the result record; ``None`` when there is none."""
        return None


class Preprocessing(Protocol):
    """The graph the claim is read on: the paper's preprocessing, public pins and stated assumptions."""

    def preprocess(self, graph: Any) -> tuple[Any, str | None]:
        """The paper's own preprocessing of a dataset (e.g. isolated nodes dropped), applied by
        ``train`` and the audit before anything else: the graph to use and a one-line notice
        (None when nothing changed). Default: the graph as it is."""
        return graph, None

    @property
    def receptive_hops(self) -> int | None:
        """Hops of message passing behind one released row (an edge changes the rows of nodes
        within this many hops of it); None where unknown or unbounded. Default: ``config.hops``."""
        hops = getattr(self.config, "hops", None)  # type: ignore[attr-defined]
        return hops if isinstance(hops, int) and hops >= 0 else None

    def public_params(self, graph: Any) -> dict[str, Any]:
        """Graph-derived quantities the paper treats as public, pinned from the base graph.

        The game applies these to the config before playing, so both worlds are trained with the
        noise calibrated on the base graph (a private edge count or minimum degree must not move
        the noise between worlds). Default: δ, when the paper's δ rule reads the graph.
        """
        return {"delta": self.claim(graph).delta} if self.config.delta is None else {}  # type: ignore[attr-defined]

    def claim_assumptions(self, graph: Any) -> list[str]:
        """The assumptions the paper's claim states that `graph` breaks (a degree range, no isolated
        node, ...), one line each; empty where the claim covers the graph. A pair with a world
        outside them is still audited under the standard definition (the verdict), and the paper's
        conditional reading is reported beside it. Default: the paper states none."""
        return []

    def pair_params(self, g0: Any, g1: Any) -> dict[str, Any]:
        """The public parameters pinned for a neighbouring pair (called on the unpinned target).

        A quantity the calibration reads from private data is charged at the worse of the two
        worlds. Default: :meth:`public_params` of each world that the claim's stated assumptions
        cover (:meth:`claim_assumptions`); where the two differ, the pins whose claim charges more
        (the larger ε, then δ, noise std and sensitivity of its claim on either world)."""
        options = [self.public_params(g) for g in (g0, g1) if not self.claim_assumptions(g)]
        if not options:
            options = [self.public_params(g1)]
        if all(o == options[0] for o in options):
            return options[0]
        return max(options, key=lambda pins: charge_of(type(self)(replace_config(self.config, **pins)), g0, g1))  # type: ignore

    def charged_claim(self, g0: Any, g1: Any) -> Claim:
        """The claim an audit of the pair compares against: the claim on each world, the worse (the
        larger ε, then δ) taken, with both worlds' ε in ``per_world_epsilon`` where they differ."""
        claims = [self.claim(g0), self.claim(g1)]  # type: ignore[attr-defined]
        worse = max(claims, key=lambda c: (c.epsilon, c.delta))
        if claims[0].epsilon == claims[1].epsilon and claims[0].delta == claims[1].delta:
            return worse
        return dataclasses.replace(worse, per_world_epsilon=(claims[0].epsilon, claims[1].epsilon))


class Probing(Protocol):
    """The sensitivity probe's hooks: the noisy steps the claim charges, and the noiseless map."""

    def noiseless(self, graph: Any) -> torch.Tensor | None:
        """The deterministic part of the mechanism's output on `graph` (for canary search), if any."""
        return None

    def declared_steps(self, graph: Any) -> list[StepDeclaration]:
        """The noisy steps this target releases, declared for the probe: each a mean map reading the
        graph and its features, a noise law and a claimed Δ (:class:`targets.common.probe.StepDeclaration`).
        Default: none (the probe then says "not probed")."""
        return []

    def step_maps(self, graph: Any) -> list[StepMap | SampledStep]:
        """Every noisy step the claim charges, as the sensitivity probe reads it
        (:mod:`targets.common.probe`). Default: derived from :meth:`declared_steps` (where it declares
        none, from one fit's mechanism steps at the claim's Δ), protecting the target's unit. A target
        whose steps read an input the declarations cannot express (a previous hop, a released
        embedding, a sampled batch) overrides it with its own adapter."""
        kinds = ("node",) if self.unit is Unit.NODE else ("edge",)  # type: ignore[attr-defined]
        declared = self.declared_steps(graph) or mechanism_declarations(self, graph)
        return derived_step_maps(declared, kinds, int(graph.x.size(1)))

    def tight_pair(self, graph: Any, rng: Any) -> TightPair | None:
        """A neighbouring pair built from the paper's own worst case, measured beside the probe's
        search (e.g. a spec's tight canary); None where there is none (the default)."""
        return None

    @classmethod
    def probed_by_declaration(cls) -> bool:
        """Whether the probe reads this target through its declared steps alone (it declares
        :meth:`declared_steps` and keeps the default :meth:`step_maps`)."""
        return cls.step_maps is Probing.step_maps and cls.declared_steps is not Probing.declared_steps


class Witnessing(Protocol):
    """Whether, and how, a mechanism-level witness is played through the target's own pipeline."""

    def takes_witness(self) -> bool:
        """Whether a mechanism-level witness of this configuration can be played through the
        target's own pipeline (``--canary auto`` runs the probe only then). Default: where the
        target is probed by its declarations, whose steps read the features a witness graph carries."""
        return _by_declaration(type(self))

    @classmethod
    def witness_plan(cls, doc: dict[str, Any], params: dict[str, str]) -> WitnessPlan | None:
        """How the game plays the witness `doc` (a loaded witness file, its ``path`` included) with the
        run's own ``--set`` `params`; None where the target cannot take the witness's input. Default:
        for a target probed by its declarations, the witness graph as the dataset and the witness pair
        as the canary (a declared step's input X is the features, which the witness graph stores);
        otherwise None."""
        if not _by_declaration(cls):
            return None
        path = doc["path"]
        return WitnessPlan(doc["target"], f"witness:{path}", f"witness:{path}", params, DECLARED_WITNESS_HOW)


class GradientCanary(Protocol):
    """A ``trace`` that takes a gradient canary: the length of one clipped gradient."""

    def dimension(self, graph: Any) -> int:
        """The length of one clipped gradient in the ``trace`` (what a gradient canary adds to). A
        target whose trace takes gradient canaries declares it; the default has none."""
        raise NotImplementedError(f"{type(self).__name__} declares no gradient dimension (no gradient canary)")

    def takes_gradient_canary(self, graph: Any = None) -> bool:
        """Whether a gradient canary can join this configuration's ``trace`` (what ``--attack auto``
        asks before choosing a trace attack). Default: the target offers a trace and declares its
        :meth:`dimension`; targets whose trace takes a canary only in some configurations say so."""
        return Level.TRACE in self.levels and _declares(type(self), GradientCanary, "dimension")  # type: ignore


class NeighbourSampling(Protocol):
    """What a node canary's exposure is computed from: public out-degrees and the sampler's size."""

    def outdegrees(self, graph: Any) -> torch.Tensor:
        """The out-degrees the target's neighbour sampler treats as public, one per node (what a
        node canary's exposure is computed from). Default: the graph's own out-degrees."""
        return torch.bincount(graph.edge_index[0].cpu(), minlength=graph.num_nodes)

    def neighbour_sample_size(self) -> int:
        """How many out-neighbours the target's sampler keeps per node (M), where it samples; 1 for a
        target that does not sample neighbours (the default)."""
        return 1

    def records_node_scale(self) -> bool:
        """Whether a whole-node canary (``canaries.gradient.DiracNode``) enters this target's trace as the
        node's whole contribution k_t·g and each step records k_t (``canary_scale``) in both worlds, a
        reading the target's accountant charges (HeterPoisson). Default False: the canary is then a fixed
        gradient on the node's own sampling coin, which no step reveals."""
        return False


class Catalogued(Protocol):
    """The bug catalogue (``python -m audit regress``) and the attacks' contract fixtures."""

    #: this target's entries in the bug catalogue, and its planted bugs that no attack of this
    #: version catches yet, with the reason (bug → why)
    catalogue: ClassVar[tuple[Entry, ...]] = ()
    not_yet_caught: ClassVar[dict[str, str]] = {}
    #: small audits where this target fixtures an attack's contract check (``audit.testing.check_attack``):
    #: attack name → (``--set`` params, canary); a ``"bug"`` key plants that bug, a ``"dataset"`` key names the dataset
    attack_fixtures: ClassVar[dict[str, tuple[dict[str, str], str]]] = {}


#: every optional protocol, in the order the contract lists them
PROTOCOLS: tuple[type[Protocol], ...] = (Batching, Preprocessing, Probing, Witnessing, GradientCanary,
                                         NeighbourSampling, Catalogued)


def _declares(cls: type, protocol: type[Protocol], member: str) -> bool:
    """Whether `cls` takes `member` from somewhere other than `protocol`'s default."""
    own = getattr(cls, member, None)
    default = protocol.__dict__.get(member)
    default = getattr(default, "__func__", default)
    own = getattr(own, "__func__", own)
    return own is not None and own is not default


def _by_declaration(cls: type) -> bool:
    probed = getattr(cls, "probed_by_declaration", None)
    return bool(probed()) if probed is not None else False


def implements(target: Any, protocol: type[Protocol], member: str | None = None) -> bool:
    """Whether `target` (an instance or a class) states `protocol` itself: it overrides one of the
    protocol's members (only `member`, where given), or, built on a bare core, mixes the protocol in
    with at least the member. A target that keeps every default of a protocol does not implement it."""
    cls = target if isinstance(target, type) else type(target)
    if not issubclass(cls, protocol):
        return False
    names = (member,) if member is not None else protocol.members()
    return any(_declares(cls, protocol, name) for name in names)


def charge_of(target: TargetCore, g0: Any, g1: Any) -> tuple[float, ...]:
    """How much `target`'s claim charges a pair, for comparing pins: the largest (ε, δ, noise std,
    sensitivity) of its claim on the two worlds (an unstated std or Δ ranks lowest).

    Where two pins tie in ε and δ, the larger noise std wins. That is deliberate, not the weaker
    audit by accident: both pins are calibrated to the same claim and differ in which world's data
    they were read from, and a pin read from a quantity the pair moves (a minimum degree, a degree
    bound) is a valid public bound of both worlds only at the worse world, where it calibrates more
    noise. The smaller-noise pin would play a world outside its own calibration (a degree below the
    pinned minimum), which is a configuration the claim never covered, so its VIOLATION would be a
    false alarm, not the adversary's worst case (tests/test_relation.py). The adversary's choice is
    the pair (the canaries), not a calibration neither world admits."""
    def key(c: Claim) -> tuple[float, ...]:
        return (c.epsilon, c.delta, float(c.stated("noise_std") or 0.0), float(c.stated("sensitivity") or 0.0))

    return max(key(target.claim(g)) for g in (g0, g1))
