"""What one training run releases (:class:`Release`), its noisy steps (:class:`MechanismStep`), and
views computed on first use (:class:`Lazy`, :class:`LazyDict`)."""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from targets.common.value_enum import Level

#: the views' names, weakest first
LEVELS: tuple[Level, ...] = tuple(Level)


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
