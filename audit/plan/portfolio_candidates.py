"""The default portfolio's candidates (:mod:`audit.plan.portfolio`, step 1): every (level, attack, canary)
the target's views allow, read from the registries and the target's declarations, in the order they are
piloted, and the attacks left out with the reason; the one probe release they read.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from attacks import base as attacks
from canaries import base as canaries
from targets import base as targets
from targets.base import Level


#: strongest first: the order candidates of one canary are piloted in
LEVEL_ORDER = (Level.MECHANISM, Level.TRACE, Level.WEIGHTS, Level.API)
#: views whose trials are cheap: every canary is piloted on them before any view that trains a model
CHEAP_LEVELS = (Level.MECHANISM, Level.TRACE)


#: a candidate row's ``status`` once its pilot was played (otherwise "not piloted: <why>")
PILOTED = "piloted"


@dataclass(frozen=True)
class Candidate:
    level: Level
    attack: str
    canary: str
    #: why the target's declarations put it early (:func:`candidates`); empty where nothing did
    pointed_by: str = field(default="", compare=False)
    #: the pair's exact ε where :func:`audit.plan.portfolio_choice.choose` chose it by that ε (no pilot showed a
    #: signal): the certificate then plays the whole budget in the score's own order; None otherwise
    by_exact_eps: float | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        return f"{self.attack} / {self.canary} @ {self.level}"


# ---------------------------------------------------------------------------------------------
# candidates
# ---------------------------------------------------------------------------------------------
def candidates(target: targets.Target, graph: Any) -> tuple[list[Candidate], list[dict[str, Any]]]:
    """The candidates the target's views allow, in the order they are piloted, and the attacks left
    out with the reason (an attack whose ``applies_to`` refuses the target's probe release)."""
    gradient_ok = target.takes_gradient_canary(graph)
    names = [c for c in canaries.available() if not c.startswith("witness")]
    gradient = {c for c in names if canaries.get(c).relation == "gradient"}
    playable = set(canaries.relation_canaries(target, graph))  # a needs_map canary only where a map is declared
    graph_canaries = ["auto"] + [c for c in names if c in playable]
    gradient_canaries = [c for c in names if c in gradient] if gradient_ok else []
    classic = _classic(target, graph)
    probes: dict[str, targets.Release | None] = {}
    skipped: list[dict[str, Any]] = [
        {"attack": "every attack", "level": "every view", "canary": c,
         "why": "the canary reads the target's noiseless map (needs_map), which this target does not declare"}
        for c in names if c not in gradient and c not in playable and canaries.get(c).unit == target.unit]
    found: list[tuple[tuple[int, ...], Candidate]] = []
    pointed = {c: why for c in graph_canaries[1:] + gradient_canaries
               if (why := canaries.get(c).pointed_by(target, graph))}
    for a_rank, name in enumerate(attacks.available()):
        cls = attacks.get(name)
        if target.unit not in cls.units:
            continue
        for level in cls.levels:
            if level not in target.levels:
                continue
            if level == Level.TRACE and not gradient_canaries and not probe_release(target, graph, probes).trace:
                skipped.append({"attack": name, "level": level, "why": "the release offers no trace on a graph "
                                "canary, and the target takes no gradient canary"})
                continue
            pool = _canaries_for(cls.canary_kind, level, graph_canaries, gradient_canaries)
            if not pool:
                continue
            if not _applies(cls, level, target, graph, probes):
                skipped.append({"attack": name, "level": level, "why": "its applies_to refuses this target's release"})
                continue
            attack_why = _pointed_attack(cls, target, graph, probes)
            for c_rank, canary in enumerate(pool):
                first = next((k for k, (a, c) in enumerate(classic) if a == name and canary in ("auto", c)),
                             len(classic))
                why = "; ".join(w for w in (attack_why, pointed.get(canary)) if w)
                tier = 0 if first == 0 else 1 if why else 3 if cls.after_deviation else 2
                cost = 0 if level in CHEAP_LEVELS else 1
                found.append(((tier, first, cost, c_rank, LEVEL_ORDER.index(level), a_rank),
                              Candidate(level, name, canary, why)))
    found.sort(key=lambda item: item[0])
    return [c for _, c in found], skipped


def _classic(target: targets.Target, graph: Any) -> list[tuple[str, str]]:
    """The single-attack default of earlier versions (``attacks.auto_attacks`` with its canary),
    piloted first."""
    try:
        return [(a, canaries.auto_canary(target, graph, a)) for a in attacks.auto_attacks(target, graph)]
    except ValueError:
        return []


def _canaries_for(kind: str, level: Level, graph_canaries: list[str], gradient_canaries: list[str]) -> list[str]:
    if kind == "gradient":
        return gradient_canaries
    if kind == "any" and level == Level.TRACE and gradient_canaries:
        return gradient_canaries
    if kind == "row":  # a canary that is one of the training rows: world 0 takes it out
        return [c for c in graph_canaries if c != "auto" and canaries.get(c).relation == "remove"]
    return graph_canaries


def _applies(cls: type[attacks.Attack], level: Level, target: targets.Target, graph: Any,
             probes: dict[str, targets.Release | None]) -> bool:
    """The attack's ``applies_to`` on one probe release of the base graph (drawn once, only for an
    attack that overrides the default, from a generator no trial uses)."""
    if cls.applies_to is attacks.Attack.applies_to:
        return True
    return cls().asks_applies(probe_release(target, graph, probes), graph)


def _pointed_attack(cls: type[attacks.Attack], target: targets.Target, graph: Any,
                    probes: dict[str, targets.Release | None]) -> str | None:
    """Why the target's release points to the attack (:meth:`attacks.base.Attack.pointed_by`)."""
    if cls.pointed_by is attacks.Attack.pointed_by:
        return None
    return cls().pointed_by(probe_release(target, graph, probes))


def probe_release(target: targets.Target, graph: Any, probes: dict[str, targets.Release | None]) -> targets.Release:
    """One release of the base graph, drawn once, from a generator no trial uses."""
    if probes.get("release") is None:
        target.prepare(graph)
        rng = torch.Generator().manual_seed(int(np.random.SeedSequence([0xA991, 1]).generate_state(1)[0]))
        probes["release"] = targets.check_release(target.fit(graph, rng), target)
    return probes["release"]
