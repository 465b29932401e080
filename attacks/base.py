"""The attack contract (every hook the game calls, with its default) and the registry of attacks.

An attack is the adversary of the game: it reads the views of a release it needs (``levels``) and
outputs a score, higher meaning "the secret bit was 1". Everything beyond :meth:`Attack.score` is
optional; the defaults below say what the game does when an attack keeps them.

Adding an attack: one module with a class deriving from :class:`Attack` (``name``, ``levels``,
``score``) and one ``register(name, "package.module:Class")`` line below (or ``register(name, cls)``
from the user's code), or ``--attack package.module:Class`` without registering.
"""
from __future__ import annotations

import inspect
from typing import Any, ClassVar

import numpy as np

from targets import base as targets
from targets.common.registry import Registry
from targets.base import Level, Release, Target, Unit


class Attack:
    """The adversary of the audit game.

    Class attributes:
        name: the registry name.
        levels: the release views it reads, strongest first; the game's default level is the first.
        natural_threshold: a decision threshold fixed before any trial (e.g. 0 for an exact
            log-likelihood ratio), used by the ``gdp`` estimator; None: the estimator holds
            trials out to choose one.
        queries_per_score: API queries one score makes (None: not an API attack).
        reads_probe: set automatically where a subclass overrides :meth:`natural_threshold_for` or
            :meth:`model_scores`: the game then draws one probe release (apart from every trial).
        units: the neighbouring units (:class:`targets.base.Unit`) whose canaries it scores.
        canary_kind: ``"graph"`` (edge and node canaries), ``"gradient"`` (canaries of relation
            ``"gradient"``, inserted into a DP-SGD trace), ``"row"`` (the graph canaries whose world 0
            takes out a training row, relation ``"remove"``) or ``"any"``; the portfolio pairs attacks
            and canaries by it.
    """

    name: ClassVar[str] = ""
    levels: ClassVar[tuple[Level, ...]] = ()
    natural_threshold: ClassVar[float | None] = None
    queries_per_score: int | None = None
    reads_probe: ClassVar[bool] = False
    units: ClassVar[tuple[Unit, ...]] = (Unit.EDGE, Unit.NODE)
    canary_kind: ClassVar[str] = "graph"
    #: the score is the exact privacy loss log p(view | world 1)/p(view | world 0) of the view it reads,
    #: under the target's declared law: its trials are then samples of that loss (audit.stats.pair_epsilon)
    exact_loss: ClassVar[bool] = False
    #: the declared-model check's deviations (``audit.declared_model.declared_joint.JOINT_TESTS``, or ``"any"``) this
    #: score exploits: where the check fails, the portfolio pilots it before the others
    exploits: ClassVar[tuple[str, ...]] = ()
    #: among the scores that exploit a deviation, lower ranks are piloted first (a score built from
    #: the measured law before a learned one)
    exploit_rank: ClassVar[int] = 1
    #: piloted early only once the declared-model check has found a deviation (a score whose fit is
    #: costly beside a trial); otherwise after every other candidate
    after_deviation: ClassVar[bool] = False
    #: reference-machine seconds one score takes beyond the trial's fit (what a budget in work units
    #: charges per trial besides ``Target.trial_cost``); 0 where scoring is cheap beside training
    score_cost: ClassVar[float] = 0.0
    #: reference-machine seconds the attack spends once on a pair before its first score (a law
    #: solved per pair, say), charged once per (view, canary) it is piloted on; 0 where none
    pair_cost: ClassVar[float] = 0.0

    def linear_in_release(self, info: dict[str, Any]) -> bool:
        """Whether the score is a fixed affine function of the release given the pair's public record
        `info` (no mixture, no weight read from the noise): on noise that is Gaussian with one
        covariance in both worlds, its two worlds' scores are then Gaussian with one variance."""
        return False

    @classmethod
    def rests_on_declared_model(cls) -> bool:
        """Whether the score is the declared noise model's likelihood ratio (an a-priori threshold):
        once the declared-model check fails, no audit may rest on it."""
        return cls.natural_threshold is not None or cls.natural_threshold_for is not Attack.natural_threshold_for

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.levels = tuple(Level(level) for level in cls.levels)  # a user's names become enums
        cls.units = tuple(Unit(unit) for unit in cls.units)
        cls.reads_probe = (cls.natural_threshold_for is not Attack.natural_threshold_for
                           or cls.model_scores is not Attack.model_scores)

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        """The score of one release against the canary pair (higher = b = 1)."""
        raise NotImplementedError

    def score_batch(self, releases: list[Release], pair: Any, graph: Any = None) -> list[float]:
        """Scores of many releases of one run; override where work can be shared between them."""
        return [self.score(r, pair, graph) for r in releases]

    def bind_target(self, target: Target) -> None:
        """The game gives the attack the target under audit before any trial (shadow-model attacks
        train copies of it, never on trials). Default: ignored."""

    def bind_run(self, seed: int) -> None:
        """The game gives the attack the run's seed before any trial (an attack that draws releases of
        its own derives their generators from it, in a namespace apart from every trial's). Default:
        ignored."""

    @classmethod
    def pair_units(cls, target: Target, level: Level) -> float:
        """Work units the attack spends once per pair before its first score (what a budget in units
        charges for it, :class:`audit.plan.portfolio.Meter`). Default: :attr:`pair_cost`."""
        return cls.pair_cost

    @classmethod
    def pair_units_on(cls, target: Target, level: Level, release: Release | None) -> float:
        """:meth:`pair_units`, where the cost depends on the release's shape read off `release` (one
        probe release of the target; None: not drawn). Default: :meth:`pair_units`."""
        return cls.pair_units(target, level)

    def same_score_as(self, release: Release, graph: Any, declared: dict[str, Any] | None) -> str | None:
        """The registered attack whose score equals this one's on the target's releases (read off one
        probe release of `graph`), given the declared-model check's record at the view (None: not
        run): the portfolio then pilots only one of them on a pair. Default: None."""
        return None

    def natural_threshold_for(self, release: Release | None) -> float | None:
        """The threshold fixed a priori for this target's releases (``gdp`` estimator), read off one
        probe release. Default: :attr:`natural_threshold`."""
        return self.natural_threshold

    def model_scores(self, release: Release | None, pair: Any) -> tuple[np.ndarray, np.ndarray] | None:
        """Scores of releases drawn from the attack's own model of each world (OUT, IN), apart from
        every trial. Where the attack gives them, the game fixes the ``cp`` threshold before any
        trial by the cp selection rule on these draws, so every trial counts. Default: None."""
        return None

    def applies_to(self, release: Release, graph: Any = None) -> bool:
        """Whether the attack can score this target's releases, read off one probe release of
        `graph` (the portfolio asks before piloting it; an override may take the release alone).
        Default: True."""
        return True

    def asks_applies(self, release: Release, graph: Any) -> bool:
        """:meth:`applies_to`, given the graph where the override takes it."""
        if len(inspect.signature(self.applies_to).parameters) >= 2:
            return bool(self.applies_to(release, graph))
        return bool(self.applies_to(release))

    def pointed_by(self, release: Release) -> str | None:
        """Why this target's release points to the attack (the portfolio pilots it early), read off one
        probe release; None (the default) where it declares nothing this attack reads specially."""
        return None

    def queries_for(self, pair: Any) -> int | None:
        """API queries one score makes on `pair` (recorded in the result). Default:
        :attr:`queries_per_score`."""
        return self.queries_per_score


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------
REGISTRY: Registry[Attack] = Registry("attack", Attack)


def register(name: str, cls: type[Attack] | str, *, force: bool = False) -> None:
    """Register an attack class, or a ``package.module:Class`` imported on first use."""
    REGISTRY.register(name, cls, force=force)


def get(name: str) -> type[Attack]:
    """An attack class by registry name, ``package.module:Class`` or ``path/to/file.py:Class``."""
    return REGISTRY.get(name)


def available() -> list[str]:
    """Names of the registered attacks whose modules import (in registration order)."""
    return REGISTRY.available()


register("mechanism-lrt", "attacks.mechanism:MechanismLRT")
register("linkteller", "attacks.linkteller:LinkTeller")
register("gmia", "attacks.gmia:GMIA")
register("lira", "attacks.lira:LiRA")
register("lira-online", "attacks.lira:OnlineLiRA")
register("rmia", "attacks.lira:RMIA")
register("gradient-projection", "attacks.gradient:ProjectedGradientCanary")
register("gradient-lrt", "attacks.gradient:FullVectorGradientCanary")
register("edge-correlation", "attacks.correlation:EdgeCorrelation")
register("gradient-l1", "attacks.gradient:ProductLaplaceGradientCanary")
register("fresh-query", "attacks.fresh_query:FreshQuery")
register("adam-lrt", "attacks.adam_lrt:AdamLRT")
register("exact-rows", "attacks.exact_rows:ExactRows")
register("learned-mechanism", "attacks.learned:LearnedMechanism")
register("learned-trace", "attacks.learned:LearnedTrace")
register("learned-weights", "attacks.learned:LearnedWeights")
register("learned-api", "attacks.learned:LearnedAPI")
register("measured-law", "attacks.measured_law:MeasuredLawLRT")
register("realised-mean-lrt", "attacks.realised_mean:RealisedMeanLRT")
register("gradient-max", "attacks.step_max:StepMax")
register("measured-scale", "attacks.measured_scale:MeasuredScaleLRT")
register("shuffle-lrt", "attacks.shuffle_lrt:ShuffleLRT")


class DrawsOwnReleases(Attack):
    """An attack that fits on releases it draws from the target itself (learned, measured-law,
    measured-scale): it keeps the bound target and run seed, from which its own generators derive."""

    def __init__(self) -> None:
        self.target: Target | None = None
        self.run_seed: int | None = None

    def bind_target(self, target: Target) -> None:
        self.target = target

    def bind_run(self, seed: int) -> None:
        self.run_seed = int(seed)


#: ``reversed:NAME`` is attack NAME with its score negated (the portfolio's choice where a pilot's
#: held-out trials read the other tail: lower means IN)
REVERSED = "reversed:"


class Reversed(Attack):
    """Another attack with its score negated (higher = IN again)."""

    def __init__(self, inner: Attack) -> None:
        self.inner = inner
        self.name = REVERSED + inner.name
        self.levels = inner.levels
        self.queries_per_score = inner.queries_per_score

    def score(self, release: Release, pair: Any, graph: Any = None) -> float:
        return -self.inner.score(release, pair, graph)

    def score_batch(self, releases: list[Release], pair: Any, graph: Any = None) -> list[float]:
        return [-s for s in self.inner.score_batch(releases, pair, graph)]

    def bind_target(self, target: Target) -> None:
        self.inner.bind_target(target)

    def bind_run(self, seed: int) -> None:
        self.inner.bind_run(seed)

    def queries_for(self, pair: Any) -> int | None:
        return self.inner.queries_for(pair)


def make(name: str) -> Attack:
    if name.startswith(REVERSED):
        return Reversed(make(name[len(REVERSED):]))
    return get(name)()


# ---------------------------------------------------------------------------------------------
# the automatic choice
# ---------------------------------------------------------------------------------------------
def auto_attack(target: targets.Target, graph: Any = None) -> str:
    """The strongest available attack for the target's views: white-box first. Trace attacks need
    a gradient canary, so they are chosen only where the configuration takes one."""
    have = set(available())
    node = target.unit is targets.Unit.NODE
    preference = [(Level.TRACE, "gradient-lrt"), (Level.TRACE, "gradient-projection"),
                  (Level.MECHANISM, "mechanism-lrt"), (Level.API, "lira-online" if node else "linkteller"),
                  (Level.API, "gmia" if node else "linkteller")]
    for level, attack in preference:
        # DP-SGD traces carry node-level claims; the mechanism view carries edge-level ones
        if level == Level.TRACE and not node or level == Level.MECHANISM and node:
            continue
        if level == Level.TRACE and not target.takes_gradient_canary(graph):
            continue
        if level in target.levels and attack in have:
            return attack
    raise ValueError(f"no attack in this version fits the views of target {target.name!r} "
                     f"({', '.join(target.levels)}, {target.unit} level); pass --attack explicitly")


def auto_attacks(target: targets.Target, graph: Any = None) -> list[str]:
    """What ``--attack auto`` runs: every trace attack for a DP-SGD (trace) claim, so the paper's
    projected audit is reported beside the full-vector one; otherwise the strongest single attack."""
    best = auto_attack(target, graph)
    if best in ("gradient-lrt", "gradient-projection"):
        have = set(available())
        return [a for a in ("gradient-lrt", "gradient-projection") if a in have]
    return [best]
