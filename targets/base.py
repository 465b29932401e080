"""Target contracts: config, claim, release views, and the target registry.

A *target* is a DP-GNN trainer built from a *target ε*: its paper's accountant calibrates the
noise, :meth:`Target.claim` reports what that accountant says, and :meth:`Target.fit` trains once
on a graph and returns a :class:`Release` with the views an adversary may observe.

Planted bugs change the *release*, never the claim: the gap between the two is exactly what an
audit must find.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar, cast

import torch

from targets.common.accounting import check_delta, check_epsilon
from targets.common.claim import (Claim, ClaimFieldMissing, Composed, GaussianStep, LaplaceStep, NoiseStep,  # noqa: F401
                                  Sampled, Series, TraceLaw, Unstated)
from targets.common.catalogue import Entry
from targets.common.noise import NoiseLaw  # noqa: F401
from targets.common.value_enum import Level, Unit
from targets.common.probe import (SampledStep, StepDeclaration, StepMap, TightPair, WitnessPlan,
                                  derived_step_maps, mechanism_declarations)
from targets.common.config_keys import config_fields, config_help, parse_assignments, replace_config  # noqa: F401
from targets.common.registry import Registry
from targets.common.runtime import (GLOBAL_RNG_LOCK, child_generator, noise_generator, one_torch_thread,  # noqa: F401
                                    resolve_device, seeded, split_accuracies)


#: the views' names, weakest first
LEVELS: tuple[Level, ...] = tuple(Level)
#: how a witness reaches a step declared through ``Target.declared_steps`` (the default witness plan)
DECLARED_WITNESS_HOW = "the witness graph, whose features are the declared step's input X"


@dataclass
class TargetConfig:
    """Fields every target config has. Subclasses add their hyperparameters, with spec defaults.

    Args:
        epsilon (float): the target ε the accountant calibrates the noise to (default: 1.0).
        delta (float, optional): δ in [0, 1) (0: pure ε-DP, for an accountant that gives it); ``None``
            applies the paper's own δ rule to the graph.
        bug (str, optional): a planted bug from the target's ``bugs`` (default: none).
        device (str): ``cpu``, ``cuda`` or ``auto``.
    """

    epsilon: float = 1.0
    delta: float | None = None
    bug: str | None = None
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_epsilon(self.epsilon)
        if self.delta is not None:
            check_delta(self.delta, pure=True)  # 0: a pure ε-DP claim's δ, pinned (public_params)

    # ------------------------------------------------------------------ constraints (every config's checks)
    def require(self, key: str, ok: bool, what: str) -> None:
        """Raise ``The 'key' parameter must be WHAT, got VALUE`` unless `ok`."""
        if not ok:
            raise ValueError(f"The {key!r} parameter must be {what}, got {getattr(self, key)!r}")

    def require_all(self, checks: list[tuple[str, bool, str]]) -> None:
        """:meth:`require` on every (key, ok, what), in order."""
        for key, ok, what in checks:
            self.require(key, ok, what)

    def require_int(self, key: str, low: int, *, optional: bool = False) -> None:
        """An int ≥ `low` (None allowed where `optional`)."""
        value = getattr(self, key)
        if value is None and optional:
            return
        self.require(key, isinstance(value, int) and not isinstance(value, bool) and value >= low, f"an int >= {low}")

    def require_choice(self, key: str, options: tuple[str, ...]) -> None:
        self.require(key, getattr(self, key) in options, f"one of {', '.join(options)}")

    def require_number(self, key: str, *, above: float | None = None, at_least: float | None = None,
                       below: float | None = None, what: str = "a finite number") -> None:
        """A finite number (not a bool) with the given bounds, described as `what`."""
        v = getattr(self, key)
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
            and (above is None or v > above) and (at_least is None or v >= at_least) and (below is None or v < below)
        self.require(key, ok, what)


@dataclass
class MechanismStep:
    """One released noisy intermediate, as a white-box auditor sees it.

    Args:
        output: the released tensor.
        mean: the noiseless value of ``output`` under a given graph (with everything the step
            depends on that was released before it held fixed). The auditor knows the algorithm.
        noise_std: per-entry std of the Gaussian noise when ``output = mean + N(0, std²)`` exactly
            (no post-processing); ``None`` when the law is not a plain Gaussian.
        row_projected: the output is ``Π(mean + N(0, std²))`` with each row projected to the unit
            ball (or sphere): the auditor rescales rows before the Gaussian likelihood ratio.
        name: a label (e.g. ``hop 3``).
        log_density: where the auditor can evaluate it, ``log_density(graph)`` = the log-density
            of ``output`` under the mechanism run on ``graph`` (up to a constant that does not
            depend on the graph): the exact likelihood ratio is then a difference of two calls
            (e.g. objective perturbation, whose minimiser determines the noise).
        mean_key: where not ``None``, every step with an equal key has the same ``mean``
            function (e.g. a step whose mean depends on nothing released before it), so an attack
            scoring many releases may compute ``mean(g0)``, ``mean(g1)`` once per key.
        support: optional, with ``mean_rows``, for a 2-D+ ``output``: ``support(g0, g1)`` = the
            rows (a sorted index tensor) outside which ``mean(g0)`` and ``mean(g1)`` are equal
            whatever was released before, or ``None`` where the step cannot tell (then the
            auditor computes whole means); ``mean_rows(graph, rows)`` = ``mean(graph)[rows]``,
            bitwise, without the other rows (for the graphs and rows of a ``support`` call). An auditor that reads only the rows where the worlds
            differ computes those.
        gaussian_law: where ``output``'s law is Gaussian with a full covariance (e.g. the end of
            several hidden linear noisy hops), ``gaussian_law(graph) -> (mean, cov)``: each column
            of ``output`` is independently N(mean[:, c], cov) on that graph (mean n × h, cov n × n,
            float64). The exact ε of a pair then follows from the two laws.
        laplace_scale: the scale b where ``output = mean + Laplace(0, b)``, i.i.d. per entry, exactly
            (density e^{−|x|/b}/(2b); ``noise_std`` then stays None). The declared-model check tests
            this law (shape, scale, independence); give ``log_density`` too for the exact
            likelihood ratio, whose supremum over outputs, Σ|mean(g1) − mean(g0)|/b, is the pair's
            ε at δ = 0.
    """

    output: torch.Tensor
    mean: Callable[[Any], torch.Tensor]
    noise_std: float | None = None
    name: str = ""
    row_projected: bool = False
    mean_key: Any = None
    log_density: Callable[[Any], float] | None = None
    support: Callable[[Any, Any], torch.Tensor | None] | None = None
    mean_rows: Callable[[Any, torch.Tensor], torch.Tensor] | None = None
    gaussian_law: Callable[[Any], tuple[torch.Tensor, torch.Tensor]] | None = None
    laplace_scale: float | None = None


class Lazy:
    """A view computed on first use (e.g. a classifier trained only if an attack asks for it).

    The computation must draw its randomness from a generator split off at fit time, so the
    release is the same whether or not the view is used.
    """

    def __init__(self, compute: Callable[[], Any]) -> None:
        self._compute = compute
        self._done = False
        self._value: Any = None

    def get(self) -> Any:
        if not self._done:
            self._value, self._done = self._compute(), True
        return self._value

    def __eq__(self, other: object) -> bool:
        """Two views are equal when their values are (computing them if need be)."""
        return resolve(self) == resolve(other)

    __hash__ = None  # type: ignore[assignment]


class LazyDict(Mapping):
    """A read-only mapping whose ``eager`` entries are at hand and whose other entries come from
    a :class:`Lazy` mapping computed on first access to one of them (or on iteration): e.g. a
    release's ``weights``, with the embedding's parameters eager and a lazily trained classifier's."""

    def __init__(self, eager: dict[str, Any], rest: Lazy, rest_shapes: dict[str, tuple[int, ...]] | None = None
                 ) -> None:
        """`rest_shapes`, where given, are the lazy entries' tensor shapes, known without computing
        them (a model's parameter shapes); they are checked when the entries are computed."""
        self._eager = dict(eager)
        self._rest = rest
        self.rest_shapes = None if rest_shapes is None else {k: tuple(v) for k, v in rest_shapes.items()}

    def _computed(self) -> dict[str, Any]:
        done = self._rest._done
        rest = self._rest.get()
        if not done and self.rest_shapes is not None:
            got = {k: tuple(v.shape) for k, v in rest.items() if isinstance(v, torch.Tensor)}
            if got != self.rest_shapes:
                raise AssertionError(f"lazy entries' shapes {got} differ from the declared {self.rest_shapes}")
        return rest

    def __getitem__(self, key: str) -> Any:
        if key in self._eager:
            return self._eager[key]
        return self._computed()[key]

    def __iter__(self) -> Iterator[str]:
        yield from self._eager
        yield from (k for k in self._computed() if k not in self._eager)

    @property
    def computed(self) -> bool:
        """Whether the lazy entries have been computed."""
        return self._rest._done

    def eager_items(self) -> list[tuple[str, Any]]:
        """The entries at hand (computes nothing)."""
        return list(self._eager.items())

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __repr__(self) -> str:
        return f"LazyDict(eager={list(self._eager)}, rest={'computed' if self._rest._done else 'pending'})"


def resolve(value: Any) -> Any:
    """The value of a possibly :class:`Lazy` view."""
    return value.get() if isinstance(value, Lazy) else value


@dataclass
class Release:
    """What one training run releases, by threat level (a target offers what it can).

    * ``api``: ``predict(graph, nodes) -> posteriors`` (n_query × classes); each call a fresh
      release where the target's inference is randomised.
    * ``weights``: final parameters (name → tensor).
    * ``mechanism``: the noisy intermediates the DP proof is about (:class:`MechanismStep`).
    * ``trace``: every noisy update of a DP-SGD run.

    ``info`` is the release's record (a target writes it, attacks add their query counts); what the
    harness reads of it, it reads through the typed properties below.
    """

    api: Callable[..., torch.Tensor] | None = None
    weights: dict[str, torch.Tensor] | None = None
    mechanism: list[MechanismStep] | None = None
    trace: Any = None
    info: dict[str, Any] = field(default_factory=dict)

    def recorded(self, key: str) -> Any:
        """The release's record of `key`, or None where the record is silent on it."""
        return self.info[key] if key in self.info else None

    def count(self, key: str, k: int) -> None:
        """Add `k` to the record's counter `key` (an attack's queries)."""
        self.info[key] = (self.recorded(key) or 0) + k

    @property
    def noise_std(self) -> float | None:
        """The noise std the release's record states (a release whose mechanism steps leave it unset)."""
        return self.recorded("noise_std")

    @property
    def accuracy(self) -> Any:
        """Split → accuracy of the trained classifier (or a :class:`Lazy` of it); None if none."""
        return self.recorded("accuracy")

    @property
    def fresh_noise_per_query(self) -> bool:
        """Whether each api call is a fresh noisy release."""
        return bool(self.recorded("fresh_noise_per_query"))

    @property
    def solver(self) -> dict[str, Any] | None:
        """How an optimisation-based release was computed (``{"name", "steps", "lr"}``)."""
        return self.recorded("solver")

    @property
    def noise_free_problem(self) -> Callable[[Any], Any] | None:
        """graph → the release's objective without its noise (objective perturbation)."""
        return self.recorded("noise_free_problem")

    @property
    def beta(self) -> float | None:
        """The scale β of an objective-perturbation release's noise density."""
        return self.recorded("beta")

    @property
    def target(self) -> Any:
        """The target that released it, where the release carries it (for shadow models)."""
        return self.recorded("target")

    @property
    def levels(self) -> tuple[Level, ...]:
        return tuple(level for level in LEVELS if getattr(self, level.value) is not None)

    def view(self, level: Level | str) -> Any:
        if level not in LEVELS:
            raise ValueError(f"unknown level {level!r}; known: {', '.join(LEVELS)}")
        value = getattr(self, Level(level).value)
        if value is None:
            raise ValueError(f"this release offers no {level!r} view; it offers {', '.join(self.levels)}")
        return resolve(value)


def sync_fields(obj: Any, record: dict[str, Any], names: tuple[str, ...]) -> None:
    """Make `obj`'s typed fields and its `record` agree: a field left None is read from the record
    under its name, and a field set is written to the record where the record lacks it."""
    for name in names:
        value = getattr(obj, name)
        if value is None and record.get(name) is not None:
            setattr(obj, name, record[name])
        elif value is not None:
            record.setdefault(name, value)


#: seconds one trial of a view takes on the reference machine, for a target that declares none
#: (:meth:`Target.trial_cost`): on the high side of the built-in targets' measured costs
TRIAL_COST = {Level.MECHANISM: 0.01, Level.TRACE: 0.05, Level.WEIGHTS: 0.5, Level.API: 0.5}
#: seconds of a run's setup on the reference machine, for a target that declares none (:meth:`Target.setup_cost`)
SETUP_COST = 2.0

#: a target's config type (``class GAP(Target[GAPConfig])``: ``self.config`` is a GAPConfig)
C = TypeVar("C", bound=TargetConfig)


class Target(ABC, Generic[C]):
    """A DP-GNN trainer under audit, generic in its config type ``C``.

    Subclasses (``class GAP(Target[GAPConfig])``) set ``name``, ``Config`` (the
    :class:`TargetConfig` subclass ``C``), ``unit``, ``levels`` and ``bugs`` (name → one-line
    description), and implement :meth:`claim` and :meth:`fit`. A target is rebuilt from its config
    in every worker, so workers share no state.

    Every other thing the harness reads of a target is a hook declared here with a default, which
    a target overrides where it has something to say (README, "Adding a target"): the game's
    (``batched``/:meth:`fit_batch`, ``auto_batch``, ``score_alongside``, :meth:`prepare`,
    :meth:`cached_work`, :meth:`public_params`, :meth:`preprocess`, :meth:`noiseless`, :meth:`trial_cost`,
    :meth:`setup_cost`,
    ``receptive_hops``), the sensitivity probe's (:meth:`declared_steps`, :meth:`step_maps`,
    :meth:`tight_pair`, :meth:`takes_witness`, :meth:`witness_plan`), the gradient canaries'
    (:meth:`dimension`, :meth:`takes_gradient_canary`, :meth:`outdegrees`,
    :meth:`neighbour_sample_size`), and the catalogue's (``catalogue``, ``not_yet_caught``,
    ``attack_fixtures``). No module outside ``targets/`` names a target or reads anything else.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[TargetConfig]] = TargetConfig
    #: the views the target offers (a class attribute; an instance may narrow it to its config's)
    levels: tuple[Level, ...] = (Level.API,)
    bugs: ClassVar[dict[str, str]] = {}
    #: this target's entries in the bug catalogue (``python -m audit regress``), and its planted bugs
    #: that no attack of this version catches yet, with the reason (bug → why)
    catalogue: ClassVar[tuple[Entry, ...]] = ()
    not_yet_caught: ClassVar[dict[str, str]] = {}
    #: small audits where this target fixtures an attack's contract check (``audit.testing.check_attack``):
    #: attack name → (``--set`` params, canary)
    attack_fixtures: ClassVar[dict[str, tuple[dict[str, str], str]]] = {}
    #: True where :meth:`fit_batch` does genuinely vectorised work (the game then batches by default)
    batched: ClassVar[bool] = False
    #: a batched target's own auto batch for the mechanism view on CPU (None: the game's default)
    auto_batch: ClassVar[int | None] = None
    #: True where :meth:`fit_batch` trains on one thread per core while the game's thread waits, so
    #: the game scores the previous batch meanwhile (its pipeline; on CUDA it always does)
    score_alongside: ClassVar[bool] = False
    #: seconds one trial of each view takes at the default configuration on the reference machine
    #: (:meth:`trial_cost`; measured by ``benchmarks/calibrate_costs.py``), and of a run's setup
    #: on a new canary (:meth:`setup_cost`); a view left out costs :data:`TRIAL_COST`
    trial_costs: ClassVar[dict[Level, float]] = {}
    setup_seconds: ClassVar[float | None] = None
    #: the device the target trains on (from ``config.device``)
    device: torch.device

    config: C

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if isinstance(cls.__dict__.get("levels"), tuple):  # a user's names become levels
            cls.levels = tuple(Level(level) for level in cls.levels)

    def __init__(self, config: C | TargetConfig | None = None, **overrides: Any) -> None:
        config = config if config is not None else self.Config()
        if overrides:
            config = replace_config(config, **overrides)
        if not isinstance(config, self.Config):
            raise TypeError(f"{type(self).__name__} needs a {self.Config.__name__}, got {type(config).__name__}")
        if config.bug is not None and config.bug not in self.bugs:
            known = ", ".join(sorted(self.bugs)) or "none"
            raise ValueError(f"unknown bug {config.bug!r} for target {self.name!r}; known: {known}")
        self.config = cast(C, config)
        self.device = resolve_device(config.device)

    @property
    def unit(self) -> Unit:
        return Unit(getattr(self.config, "unit", Unit.EDGE.value))

    @property
    def receptive_hops(self) -> int | None:
        """Hops of message passing behind one released row (an edge changes the rows of nodes
        within this many hops of it); None where unknown or unbounded. Default: ``config.hops``."""
        hops = getattr(self.config, "hops", None)
        return hops if isinstance(hops, int) and hops >= 0 else None

    @abstractmethod
    def claim(self, graph: Any) -> Claim:
        """The paper's accountant on the calibrated run for this graph."""

    @abstractmethod
    def fit(self, graph: Any, rng: torch.Generator) -> Release:
        """Train once on `graph` with randomness from `rng`; return the release."""

    def fit_batch(self, graph: Any, rngs: list[torch.Generator]) -> list[Release]:
        """Train ``len(rngs)`` independent runs on the same `graph`, run j with randomness from
        ``rngs[j]`` only, each generator consumed exactly as :meth:`fit` would consume it: so
        ``fit_batch(graph, rngs)[j]`` releases what ``fit(graph, rngs[j])`` does.

        Default: one :meth:`fit` per generator. Targets that vectorise it set ``batched = True``.
        """
        return [self.fit(graph, rng) for rng in rngs]

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

    def cached_work(self) -> str | None:
        """One line on the work :meth:`prepare` (or a per-worker cache) does once and every trial
        reuses, for the result record; ``None`` when there is none."""
        return None

    def noiseless(self, graph: Any) -> torch.Tensor | None:
        """The deterministic part of the mechanism's output on `graph` (for canary search), if any."""
        return None

    def takes_gradient_canary(self, graph: Any = None) -> bool:
        """Whether a gradient canary can join this configuration's ``trace`` (what ``--attack auto``
        asks before choosing a trace attack). Default: the target offers a trace and declares its
        :meth:`dimension`; targets whose trace takes a canary only in some configurations say so."""
        return Level.TRACE in self.levels and self.overrides("dimension")

    def dimension(self, graph: Any) -> int:
        """The length of one clipped gradient in the ``trace`` (what a gradient canary adds to). A
        target whose trace takes gradient canaries declares it; the default has none."""
        raise NotImplementedError(f"{type(self).__name__} declares no gradient dimension (no gradient canary)")

    def outdegrees(self, graph: Any) -> torch.Tensor:
        """The out-degrees the target's neighbour sampler treats as public, one per node (what a
        node canary's exposure is computed from). Default: the graph's own out-degrees."""
        return torch.bincount(graph.edge_index[0].cpu(), minlength=graph.num_nodes)

    def neighbour_sample_size(self) -> int:
        """How many out-neighbours the target's sampler keeps per node (M), where it samples; 1 for a
        target that does not sample neighbours (the default)."""
        return 1

    def overrides(self, hook: str) -> bool:
        """Whether this target's class declares its own `hook` (a method of :class:`Target`)."""
        return getattr(type(self), hook) is not getattr(Target, hook)

    def public_params(self, graph: Any) -> dict[str, Any]:
        """Graph-derived quantities the paper treats as public, pinned from the base graph.

        The game applies these to the config before playing, so both worlds are trained with the
        noise calibrated on the base graph (a private edge count or minimum degree must not move
        the noise between worlds). Default: δ, when the paper's δ rule reads the graph.
        """
        return {"delta": self.claim(graph).delta} if self.config.delta is None else {}

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
        return max(options, key=lambda pins: charge_of(type(self)(replace_config(self.config, **pins)), g0, g1))

    def charged_claim(self, g0: Any, g1: Any) -> Claim:
        """The claim an audit of the pair compares against: the claim on each world, the worse (the
        larger ε, then δ) taken, with both worlds' ε in ``per_world_epsilon`` where they differ."""
        claims = [self.claim(g0), self.claim(g1)]
        worse = max(claims, key=lambda c: (c.epsilon, c.delta))
        if claims[0].epsilon == claims[1].epsilon and claims[0].delta == claims[1].delta:
            return worse
        return dataclasses.replace(worse, per_world_epsilon=(claims[0].epsilon, claims[1].epsilon))

    def preprocess(self, graph: Any) -> tuple[Any, str | None]:
        """The paper's own preprocessing of a dataset (e.g. isolated nodes dropped), applied by
        ``train`` and the audit before anything else: the graph to use and a one-line notice
        (None when nothing changed). Default: the graph as it is."""
        return graph, None

    def prepare(self, graph: Any) -> None:
        """Work that depends on neither the secret bit nor the canary (cached per worker)."""

    # ------------------------------------------------------------------ the sensitivity probe's hooks
    def declared_steps(self, graph: Any) -> list[StepDeclaration]:
        """The noisy steps this target releases, declared for the probe: each a mean map reading the
        graph and its features, a noise law and a claimed Δ (:class:`targets.common.probe.StepDeclaration`).
        Default: none (the probe then says "not probed")."""
        return []

    def step_maps(self, graph: Any) -> list[StepMap | SampledStep]:
        """Every noisy step the claim charges, as the sensitivity probe reads it
        (:mod:`targets.common.probe`). Default: derived from :meth:`declared_steps` (where it declares
        none, from one fit's mechanism steps at the claim's Δ), protecting the target's unit. A target whose steps read an input the
        declarations cannot express (a previous hop, a released embedding, a sampled batch)
        overrides it with its own adapter."""
        kinds = ("node",) if self.unit is Unit.NODE else ("edge",)
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
        return cls.step_maps is Target.step_maps and cls.declared_steps is not Target.declared_steps

    def takes_witness(self) -> bool:
        """Whether a mechanism-level witness of this configuration can be played through the
        target's own pipeline (``--canary auto`` runs the probe only then). Default: where the
        target is probed by its declarations, whose steps read the features a witness graph carries."""
        return self.probed_by_declaration()

    @classmethod
    def witness_plan(cls, doc: dict[str, Any], params: dict[str, str]) -> WitnessPlan | None:
        """How the game plays the witness `doc` (a loaded witness file, its ``path`` included) with the
        run's own ``--set`` `params`; None where the target cannot take the witness's input. Default:
        for a target probed by its declarations, the witness graph as the dataset and the witness pair
        as the canary (a declared step's input X is the features, which the witness graph stores);
        otherwise None."""
        if not cls.probed_by_declaration():
            return None
        path = doc["path"]
        return WitnessPlan(doc["target"], f"witness:{path}", f"witness:{path}", params, DECLARED_WITNESS_HOW)

    def bug(self, name: str) -> bool:
        return self.config.bug == name


# ---------------------------------------------------------------------------------------------
# config helpers
# ---------------------------------------------------------------------------------------------
def charge_of(target: Target, g0: Any, g1: Any) -> tuple[float, ...]:
    """How much `target`'s claim charges a pair, for comparing pins: the largest (ε, δ, noise std,
    sensitivity) of its claim on the two worlds.

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


# ---------------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------------
REGISTRY: Registry[Target] = Registry("target", Target, sort=True)
REGISTRY.register("gaussian", "targets.gaussian:GaussianMechanism")
REGISTRY.register("gcn", "targets.gcn:NonPrivateGCN")
REGISTRY.register("caribou", "targets.caribou:Caribou")
REGISTRY.register("gap", "targets.gap:GAP")
REGISTRY.register("dpdgc", "targets.dpdgc:DPDGC")
REGISTRY.register("heterpoisson", "targets.heterpoisson:HeterPoisson")
REGISTRY.register("gcon", "targets.gcon:GCON")
REGISTRY.register("dpsgd-gcn", "targets.dpsgd_gcn:DPSGDGCN")
REGISTRY.register("edgerand", "targets.edgerand:EdgeRand")
REGISTRY.register("lapgraph", "targets.lapgraph:LapGraph")


#: the target the main job audits (``AuditSpec``'s default)
DEFAULT_TARGET = "caribou"


def register(name: str, cls: type[Target] | str, *, force: bool = False) -> None:
    """Register a target class (or a ``package.module:Class`` imported on first use)."""
    REGISTRY.register(name, cls, force=force)


def get(name: str) -> type[Target]:
    """A target class by registry name, ``package.module:Class`` or ``path/to/file.py:Class``."""
    return REGISTRY.get(name)


def available() -> list[str]:
    """Names of the registered targets whose modules import."""
    return REGISTRY.available()


def check_release(release: Any, target: Target) -> Release:
    """`release` if it is a :class:`Release`, else a clear error naming the target."""
    if not isinstance(release, Release):
        raise ValueError(f"target {type(target).__module__}.{type(target).__name__}: fit() returned "
                         f"{type(release).__name__}, not a targets.base.Release (wrap its views in Release(...))")
    return release


def on_cpu(target: Target) -> Target:
    """`target` if it runs on the CPU, else the same configuration on the CPU (for work whose result
    must not depend on the run's device, such as choosing the canary)."""
    if target.device.type == "cpu":
        return target
    return type(target)(replace_config(target.config, device="cpu"))


def build(name: str, *, epsilon: float | None = None, delta: float | None = None,
          bug: str | None = None, device: str | None = None, **params: Any) -> Target:
    """Build a target by name with the given ε, δ, bug and ``--set`` parameters."""
    cls = get(name)
    changes: dict[str, Any] = dict(params)
    if epsilon is not None:
        changes["epsilon"] = epsilon
    if delta is not None:
        changes["delta"] = delta
    if bug is not None:
        changes["bug"] = bug
    if device is not None:
        changes["device"] = device
    config = replace_config(cls.Config(), **changes)
    return cls(config)
