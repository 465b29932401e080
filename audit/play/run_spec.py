"""What a run is: its spec (every option that decides its trials) and its setup (the graph, the
target with the graph's public parameters pinned, and the claim), built once per run."""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

from audit.play import data as datasets
from audit.stats import estimators
from audit.records.log import get as _logger
from targets import base as targets
from audit.stats.kinds import AUTO, Method, Mode

log = _logger(__name__)


@dataclass
class AuditSpec:
    """Everything that determines an audit's trials (and, with trials/estimator, its result)."""

    target: str = targets.DEFAULT_TARGET
    epsilon: float = 1.0
    delta: float | None = None
    bug: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    dataset: str = "csbm"
    canary: str = AUTO
    attack: str = AUTO
    #: a :class:`targets.base.Level` (a level's name is turned into one), or ``auto``
    level: targets.Level | str = AUTO
    trials: int = 1000
    seed: int = 0
    confidence: float = 0.95
    #: a :class:`audit.stats.kinds.Method` (a method's name is turned into one), or ``auto``
    estimator: Method | str = Method.AUTO
    #: a :class:`audit.stats.kinds.Mode` (its name is turned into one)
    mode: Mode | str = Mode.MULTI
    device: str = "cpu"
    data_root: str | None = None
    batch: int = 0
    #: which independent stream of trials (0: the run's own; the portfolio's pilots play stream 1, so
    #: no trial a choice read is ever reported)
    trial_stream: int = 0

    def __post_init__(self) -> None:
        if self.epsilon <= 0 or math.isnan(self.epsilon):
            raise ValueError(f"epsilon must be > 0, got {self.epsilon!r}")
        if self.delta is not None and not (0 <= self.delta < 1):
            raise ValueError(f"--delta (the audit's δ) must be in [0, 1) (0: a pure ε-DP claim), got {self.delta!r}")
        if self.trials < 8 or self.trials % 2:
            raise ValueError(f"trials must be an even number >= 8, got {self.trials!r}")
        if not (0.5 <= self.confidence < 1):
            raise ValueError(f"confidence must be in [0.5, 1), got {self.confidence!r}")
        if self.mode not in tuple(Mode):
            raise ValueError(f"mode must be {' or '.join(repr(m.value) for m in Mode)}, got {self.mode!r}")
        self.mode = Mode(self.mode)
        if not isinstance(self.batch, int) or self.batch < 0:
            raise ValueError(f"batch must be an int >= 0 (0 = auto), got {self.batch!r}")
        if self.estimator not in (Method.AUTO, *estimators.METHODS):
            raise ValueError(f"unknown estimator {self.estimator!r}; known: auto, {', '.join(estimators.METHODS)}")
        self.estimator = Method(self.estimator)
        if self.level != AUTO:
            if self.level not in targets.LEVELS:
                raise ValueError(f"unknown level {self.level!r}; known: auto, {', '.join(targets.LEVELS)}")
            self.level = targets.Level(self.level)

    def key(self) -> str:
        """Hash of the fields that determine trial outcomes (not trials, confidence, estimator, nor
        the batch size: batched and one-at-a-time runs play the same trials)."""
        d = asdict(self)
        for k in ("trials", "confidence", "estimator", "data_root", "batch"):
            d.pop(k)
        if not d["trial_stream"]:
            d.pop("trial_stream")  # stream 0 keeps the keys of runs stored before streams existed
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]

    def setup_key(self) -> tuple[Any, ...]:
        """The fields :func:`setup_run` reads (runs that differ only in attack, canary, level, trials,
        estimator or trial stream share a setup: :mod:`audit.play.shared_setup`)."""
        return (self.target, self.epsilon, self.delta, self.bug, tuple(sorted(self.params.items())), self.dataset,
                self.seed, self.device, self.data_root)


def stream_seed(spec: AuditSpec) -> int:
    """The seed of the spec's trials: the run seed for stream 0, else one derived from (seed, stream)."""
    if not spec.trial_stream:
        return spec.seed
    return int(np.random.SeedSequence([spec.seed, spec.trial_stream, 0x57EA]).generate_state(1)[0])


def build_target(spec: AuditSpec) -> targets.Target:
    return targets.build(spec.target, epsilon=spec.epsilon, delta=spec.delta, bug=spec.bug,
                         device=spec.device, **spec.params)


class RunSetup(NamedTuple):
    """What a run plays on: the preprocessed graph, the target with the graph's public parameters
    pinned, and the target's claim."""

    graph: Any
    target: targets.Target
    claim: targets.Claim


def setup_run(spec: AuditSpec) -> RunSetup:
    """The run's graph, target and claim (:class:`RunSetup`). It reads only the spec's target,
    ε, δ, bug, parameters, device, dataset and seed: runs that differ in attack, canary, level,
    trials or estimator share it."""
    try:
        target = build_target(spec)
        graph = preprocessed(target, datasets.load(spec.dataset, root=spec.data_root, seed=spec.seed))
        pinned = target.public_params(graph)
        if pinned:
            target = type(target)(targets.replace_config(target.config, **pinned))
        claim = target.claim(graph)
    except ValueError as err:
        if spec.delta is not None and "delta" in str(err):
            raise ValueError(f"--delta {spec.delta:g} was refused by target {spec.target!r}: {err}") from err
        raise
    return RunSetup(graph, target, check_claim(spec, claim))


def check_claim(spec: AuditSpec, claim: targets.Claim) -> targets.Claim:
    """`claim`, once its δ is one an audit can read: in [0, 1) (0: pure ε-DP). A δ outside is the
    target's accountant's output, not the user's ``--delta``, and the error says so; at δ = 0 an
    ``--estimator`` of a Gaussian curve is refused before any trial."""
    delta = claim.delta
    if not (isinstance(delta, (int, float)) and 0 <= delta < 1):
        given = f" (from --delta {spec.delta:g})" if spec.delta is not None else " (no --delta was given)"
        raise ValueError(f"target {spec.target!r} claims δ = {delta!r}{given}: an audit reads a claim's δ in "
                         "[0, 1) (0: pure ε-DP); the target's accountant returned it")
    if delta == 0 and spec.estimator in estimators.GAUSSIAN_CURVE_METHODS:
        raise ValueError(f"--estimator {spec.estimator} on target {spec.target!r}, whose claim has δ = 0: "
                         + estimators.pure_refusal(spec.estimator))
    return claim


def preprocessed(target: targets.Target, graph: Any) -> Any:
    """`graph` after the target's own preprocessing, with its one-line notice on stderr."""
    graph, notice = target.preprocess(graph)
    if notice:
        log.info(notice)
    return graph
