"""A target's claim as a frozen, typed value (``Target.claim``).

:class:`Claim` holds what the target's own accountant says of one calibrated run: ε, δ, the
accountant's name, the :class:`~targets.common.value_enum.Unit` it protects, μ where it is a μ-GDP
claim, and typed fields for what the harness reads:

* ``step``: the headline noisy step (its noise law, noise multiplier, sensitivity, std or scale);
* ``composition``: the event tree the claim charges, in the manner of dp-accounting's ``DpEvent``
  (:class:`GaussianStep`, :class:`LaplaceStep`, :class:`NoiseStep`, :class:`Sampled`,
  :class:`Composed`, :class:`Series`, :class:`Unstated`);
* ``trace``: the law of one DP-SGD step of its trace (:class:`TraceLaw`), where it releases one;
* ``notes``: the rest of the accountant's internals (orders, per-module ε, ...), for the record.

No field has a silent default: a field the target does not state is ``None`` (or absent from the
notes), and reading it through :meth:`Claim.require`, the properties, :meth:`Claim.trace_law` or
:meth:`Claim.note` raises :class:`ClaimFieldMissing`, naming the claim and the field.

A stored result holds :meth:`Claim.to_dict`: the typed fields (``typed``), which
:meth:`Claim.from_dict` reads back into an equal claim, beside the flat ``details`` mapping earlier
versions wrote (read where ``typed`` is absent). ``details=`` in the constructor (and the
``details`` attribute) still work, with a DeprecationWarning.
"""
from __future__ import annotations

import dataclasses
import math
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

import torch

from targets.common.value_enum import Unit


class ClaimFieldMissing(ValueError):
    """A claim read for a field its target does not state."""

    def __init__(self, claim: Claim | None, field: str, why: str = "") -> None:
        who = f"the claim of {claim.accountant!r} (unit {claim.unit_text!r})" if claim is not None else "the claim"
        super().__init__(f"{who} does not state {field!r}{': ' + why if why else ''}; the target's claim() "
                         f"must state it (see docs/your-target.md, 'The claim')")
        self.field = field


# ------------------------------------------------------------------------------------------- events
@dataclass(frozen=True)
class GaussianStep:
    """A Gaussian mechanism: noise N(0, (noise_multiplier·sensitivity)² I), Δ in ℓ2."""

    noise_multiplier: float
    sensitivity: float
    kind = "gaussian"

    @property
    def law(self) -> str:
        return "gaussian"

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * self.sensitivity


@dataclass(frozen=True)
class LaplaceStep:
    """A Laplace mechanism: i.i.d. Laplace(0, scale) noise, Δ in ℓ1."""

    scale: float
    sensitivity: float
    kind = "laplace"

    @property
    def law(self) -> str:
        return "laplace"


@dataclass(frozen=True)
class NoiseStep:
    """A noisy step of any other law (or one stated only in part): each field ``None`` where unstated."""

    law: str | None = None
    noise_std: float | None = None
    sensitivity: float | None = None
    noise_multiplier: float | None = None
    laplace_scale: float | None = None
    kind = "step"


@dataclass(frozen=True)
class Sampled:
    """`event` run on a subsample drawn at rate `q` by `sampler` (``poisson``, ``fixed-size ...``)."""

    q: float
    event: Event
    sampler: str = "poisson"
    kind = "sampled"


@dataclass(frozen=True)
class Composed:
    """`event` composed with itself `count` times."""

    event: Event
    count: int
    kind = "composed"


@dataclass(frozen=True)
class Series:
    """The composition of different events, in order."""

    events: tuple[Event, ...]
    kind = "series"


@dataclass(frozen=True)
class Unstated:
    """A composition the claim does not state as an event tree, and why."""

    reason: str
    kind = "unstated"


#: the composition of a claim that states none
UNSTATED = Unstated("not stated by the target")

Event = Union[GaussianStep, LaplaceStep, NoiseStep, Sampled, Composed, Series, Unstated]
_EVENTS: dict[str, type] = {c.kind: c for c in (GaussianStep, LaplaceStep, NoiseStep, Sampled, Composed, Series, Unstated)}


def event_to_dict(event: Event) -> dict[str, Any]:
    """An event tree as JSON (``{"type": kind, ...}``)."""
    out: dict[str, Any] = {"type": event.kind}
    for f in dataclasses.fields(event):
        v = getattr(event, f.name)
        if isinstance(v, tuple):
            out[f.name] = [event_to_dict(e) for e in v]
        elif dataclasses.is_dataclass(v):
            out[f.name] = event_to_dict(v)
        else:
            out[f.name] = v
    return out


def event_from_dict(d: Mapping[str, Any]) -> Event:
    """The event tree :func:`event_to_dict` wrote."""
    cls = _EVENTS.get(d["type"])
    if cls is None:
        raise ValueError(f"unknown claim event {d['type']!r}; known: {', '.join(_EVENTS)}")
    kw = {k: v for k, v in d.items() if k != "type"}
    if cls is Sampled or cls is Composed:
        kw["event"] = event_from_dict(kw["event"])
    if cls is Series:
        kw["events"] = tuple(event_from_dict(e) for e in kw["events"])
    return cls(**kw)


def describe(event: Event) -> str:
    """One line for an event tree: ``10 × Sampled(q=0.1, Gaussian(σ=1.2, Δ=1)) + Laplace(b=2, Δ=1)``."""
    if isinstance(event, GaussianStep):
        return f"Gaussian(σ={event.noise_multiplier:.6g}, Δ={event.sensitivity:.6g})"
    if isinstance(event, LaplaceStep):
        return f"Laplace(b={event.scale:.6g}, Δ={event.sensitivity:.6g})"
    if isinstance(event, NoiseStep):
        stated = {k: v for k, v in dataclasses.asdict(event).items() if v is not None}
        return f"Step({', '.join(f'{k}={v:.6g}' if isinstance(v, float) else f'{k}={v}' for k, v in stated.items())})"
    if isinstance(event, Sampled):
        return f"Sampled(q={event.q:.6g}, {event.sampler}, {describe(event.event)})"
    if isinstance(event, Composed):
        return f"{event.count} × {describe(event.event)}"
    if isinstance(event, Series):
        return " + ".join(describe(e) for e in event.events)
    return f"unstated: {event.reason}"


def leaves(event: Event) -> list[Event]:
    """The noisy steps of an event tree, in order (each once, whatever its count)."""
    if isinstance(event, (Sampled, Composed)):
        return leaves(event.event)
    if isinstance(event, Series):
        return [s for e in event.events for s in leaves(e)]
    return [] if isinstance(event, Unstated) else [event]


# ------------------------------------------------------------------------------------------- trace law
@dataclass(frozen=True)
class TraceLaw:
    """One DP-SGD step's claimed law: the noise law and std of the clipped sum, the clip norm, the
    norm of a gradient canary (one example's contribution), and the Poisson sampling rate."""

    noise: str
    noise_std: float
    clip_norm: float
    canary_norm: float
    sampling_rate: float


# ------------------------------------------------------------------------------------------- notes
class Notes(Mapping):
    """The accountant's other internals, frozen, as JSON values (what a result records of them)."""

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items = tuple((str(k), jsonable(v)) for k, v in (items or {}).items())

    def __getitem__(self, key: str) -> Any:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self):
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Notes) and dict(self._items) == dict(other._items)

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._items, key=lambda kv: kv[0])) if all(
            isinstance(v, (int, float, str, bool, type(None))) for _, v in self._items) else len(self._items))

    def __repr__(self) -> str:
        return f"Notes({dict(self._items)!r})"


def jsonable(value: Any) -> Any:
    """`value` as JSON writes it (∞ and NaN as strings, tuples as lists, 1-element tensors as numbers)."""
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        return str(value)
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    return str(value)


# ------------------------------------------------------------------------------------------- the claim
_UNIT = re.compile(r"^(edge|node)\b")
#: the flat keys of the stored ``details`` that the typed fields own
_STEP_KEYS = ("noise", "noise_std", "noise_multiplier", "sensitivity", "laplace_scale")
_TRACE_KEYS = ("trace_noise", "trace_noise_std", "clip_norm", "canary_norm", "sampling_rate")


def parse_unit(unit: Unit | str) -> tuple[Unit, str]:
    """(the unit, the wording after it): ``"edge (one undirected edge)"`` → (EDGE, ``" (one undirected edge)"``)."""
    if isinstance(unit, Unit):
        return unit, ""
    m = _UNIT.match(str(unit))
    if m is None:
        raise ValueError(f"a claim's unit must start with 'edge' or 'node', got {unit!r}")
    return Unit(m.group(1)), str(unit)[m.end():]


@dataclass(frozen=True, init=False)
class Claim:
    """What the target's own accountant says of one calibrated run (module docstring).

    ``per_world_epsilon`` is set on a claim charged at the worse of a pair's two worlds
    (``Target.charged_claim``) where they differ: each world's ε, world 0 first.
    """

    epsilon: float
    delta: float
    accountant: str
    unit: Unit
    gdp_mu: float | None
    queries: int
    per_world_epsilon: tuple[float, float] | None
    unit_note: str
    step: GaussianStep | LaplaceStep | NoiseStep | None
    composition: Event
    trace: TraceLaw | None
    notes: Notes

    def __init__(self, epsilon: float, delta: float, accountant: str, unit: Unit | str,
                 gdp_mu: float | None = None, details: Mapping[str, Any] | None = None, queries: int = 1,
                 per_world_epsilon: tuple[float, float] | None = None, *, unit_note: str | None = None,
                 step: GaussianStep | LaplaceStep | NoiseStep | None = None, composition: Event | None = None,
                 trace: TraceLaw | None = None, notes: Mapping[str, Any] | None = None) -> None:
        parsed, note = parse_unit(unit)
        typed = {"step": step, "composition": composition, "trace": trace, "notes": notes}
        if details is not None:
            warnings.warn("Claim(details=...) is deprecated: state the claim's step, composition, trace and "
                          "notes as typed fields (docs/your-target.md)", DeprecationWarning, stacklevel=2)
            typed = _from_details(details)
        values = dict(epsilon=epsilon, delta=delta, accountant=accountant, unit=parsed, gdp_mu=gdp_mu,
                      queries=queries, per_world_epsilon=None if per_world_epsilon is None else tuple(per_world_epsilon),
                      unit_note=note if unit_note is None else unit_note, step=typed["step"],
                      composition=typed["composition"] if typed["composition"] is not None
                      else UNSTATED,
                      trace=typed["trace"],
                      notes=typed["notes"] if isinstance(typed["notes"], Notes) else Notes(typed["notes"]))
        for k, v in values.items():
            object.__setattr__(self, k, v)

    # -------------------------------------------------------------- reading, with no silent default
    @property
    def unit_text(self) -> str:
        """The unit as the target worded it (``edge (one undirected edge)``)."""
        return f"{self.unit.value}{self.unit_note}"

    def require(self, field: str) -> Any:
        """The headline step's `field` (``noise_std``, ``noise_multiplier``, ``sensitivity``, ``law``,
        ``laplace_scale``, ``scale``); :class:`ClaimFieldMissing` where the claim does not state it."""
        value = getattr(self.step, field, None) if self.step is not None else None
        if value is None:
            raise ClaimFieldMissing(self, field, "no headline step states it" if self.step is None else "")
        return value

    @property
    def noise_std(self) -> float:
        return float(self.require("noise_std"))

    @property
    def noise_multiplier(self) -> float:
        return float(self.require("noise_multiplier"))

    @property
    def sensitivity(self) -> float:
        return float(self.require("sensitivity"))

    def stated(self, field: str) -> Any:
        """The headline step's `field`, or None where the claim does not state it (for a caller that
        handles the unstated case itself, e.g. "not probed")."""
        return getattr(self.step, field, None) if self.step is not None else None

    def trace_law(self) -> TraceLaw:
        """The law the claim charges one step of its DP-SGD trace with (what a gradient canary and the
        trace attacks read)."""
        if self.trace is None:
            raise ClaimFieldMissing(self, "trace", "the law of one DP-SGD step (noise, noise_std, clip_norm, "
                                                   "canary_norm, sampling_rate)")
        return self.trace

    def note(self, key: str) -> Any:
        """One of the accountant's other internals; :class:`ClaimFieldMissing` where not stated."""
        if key not in self.notes:
            raise ClaimFieldMissing(self, key)
        return self.notes[key]

    # -------------------------------------------------------------- stored form
    def to_dict(self) -> dict[str, Any]:
        """The claim as JSON: its scalar fields and the flat ``details`` earlier versions stored."""
        return {"epsilon": jsonable(self.epsilon), "delta": self.delta, "accountant": self.accountant,
                "unit": self.unit_text, "gdp_mu": self.gdp_mu, "details": _to_details(self),
                "queries": self.queries,
                "typed": {"step": None if self.step is None else event_to_dict(self.step),
                          "composition": event_to_dict(self.composition),
                          "trace": None if self.trace is None else dataclasses.asdict(self.trace),
                          "notes": dict(self.notes)}}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Claim:
        """The claim :meth:`to_dict` stored."""
        details = dict(d.get("details") or {})
        per_world = details.pop("per_world_epsilon", None)
        typed = d.get("typed")
        if typed is not None:  # a result of this version: its typed fields as stored
            fields = {"step": None if typed["step"] is None else event_from_dict(typed["step"]),
                      "composition": event_from_dict(typed["composition"]),
                      "trace": None if typed["trace"] is None else TraceLaw(**typed["trace"]), "notes": typed["notes"]}
        else:  # an earlier version's result: its flat details read as a pre-typed target's
            fields = _from_details(details)
        eps = d["epsilon"]
        return cls(epsilon=float(eps) if isinstance(eps, str) else eps, delta=d["delta"], accountant=d["accountant"],
                   unit=d["unit"], gdp_mu=d.get("gdp_mu"), queries=d.get("queries", 1),
                   per_world_epsilon=None if per_world is None else tuple(per_world), **fields)

    @property
    def details(self) -> dict[str, Any]:
        """Deprecated: the flat mapping of earlier versions (a write to it rewrites the typed fields)."""
        warnings.warn("Claim.details is deprecated: read the typed fields (claim.noise_std, claim.step, "
                      "claim.trace_law(), claim.note(key))", DeprecationWarning, stacklevel=2)
        flat = _to_details(self)
        flat.pop("per_world_epsilon", None)
        return _LegacyDetails(self, flat)


class _LegacyDetails(dict):
    """The deprecated ``Claim.details`` view: a change to it rewrites the claim's typed fields."""

    def __init__(self, claim: Claim, flat: dict[str, Any]) -> None:
        super().__init__(flat)
        self._claim = claim

    def _sync(self) -> None:
        typed = _from_details(dict(self))
        typed["composition"] = typed["composition"] or self._claim.composition
        typed["notes"] = Notes(typed["notes"])
        for k, v in typed.items():
            object.__setattr__(self._claim, k, v)

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._sync()

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._sync()

    def pop(self, key: str, *default: Any) -> Any:
        value = super().pop(key, *default)
        self._sync()
        return value

    def update(self, *args: Any, **kwargs: Any) -> None:
        super().update(*args, **kwargs)
        self._sync()

    def setdefault(self, key: str, default: Any = None) -> Any:
        value = super().setdefault(key, default)
        self._sync()
        return value


def _num(v: Any) -> Any:
    return float(v) if isinstance(v, str) and v in ("inf", "-inf", "nan") else v


def _to_details(claim: Claim) -> dict[str, Any]:
    """The flat mapping: the step's keys, the trace's (``trace_*`` only where they differ from the
    step's), the composition as a tree, the notes, and ``per_world_epsilon``."""
    out: dict[str, Any] = {}
    s = claim.step
    if s is not None:
        if isinstance(s, GaussianStep):
            out.update(noise="gaussian", noise_multiplier=s.noise_multiplier, sensitivity=s.sensitivity,
                       noise_std=s.noise_std)
        elif isinstance(s, LaplaceStep):
            out.update(noise="laplace", laplace_scale=s.scale, sensitivity=s.sensitivity)
        else:
            out.update({k: getattr(s, k if k != "noise" else "law") for k in _STEP_KEYS
                        if getattr(s, k if k != "noise" else "law") is not None})
        out["step_kind"] = s.kind
    t = claim.trace
    if t is not None:
        if out.get("noise") != t.noise:
            out["trace_noise"] = t.noise
        if out.get("noise_std") != t.noise_std:
            out["trace_noise_std"] = t.noise_std
        out.update(clip_norm=t.clip_norm, canary_norm=t.canary_norm, sampling_rate=t.sampling_rate)
    if claim.composition != UNSTATED:
        out["composition"] = describe(claim.composition)
    for k, v in claim.notes.items():
        out.setdefault(k, v)
    if claim.per_world_epsilon is not None:
        out["per_world_epsilon"] = list(claim.per_world_epsilon)
    return {k: jsonable(v) for k, v in out.items()}


def _from_details(details: Mapping[str, Any]) -> dict[str, Any]:
    """The typed fields of a flat mapping (:func:`_to_details`'s, or a pre-typed target's ``details``):
    its step keys make the headline step, its trace keys the trace law (only where the noise law, a
    std, the clip norm and the sampling rate are all stated; ``canary_norm`` is the clip norm where
    not given, a gradient canary's norm by definition), ``composition`` the tree, the rest the notes."""
    d = {k: _num(v) for k, v in details.items()}
    kind = d.pop("step_kind", None)
    step: Any = None
    gaussian = None
    if kind == "gaussian" and d.get("noise_multiplier") is not None and d.get("sensitivity") is not None:
        gaussian = GaussianStep(float(d["noise_multiplier"]), float(d["sensitivity"]))
    if gaussian is not None and d.get("noise") == "gaussian" and d.get("noise_std") in (None, gaussian.noise_std):
        step = gaussian  # else a key was changed (a std rescaled in place): the step as the keys now say
        for k in ("noise", "noise_multiplier", "sensitivity", "noise_std"):
            d.pop(k, None)
    elif kind == "laplace" and d.get("laplace_scale") is not None and d.get("sensitivity") is not None:
        step = LaplaceStep(float(d.pop("laplace_scale")), float(d.pop("sensitivity")))
        d.pop("noise", None)
    trace_law = d.get("trace_noise", d.get("noise"))
    trace_std = d.get("trace_noise_std", d.get("noise_std", step.noise_std if isinstance(step, GaussianStep) else None))
    trace_law = trace_law if trace_law is not None else (step.law if step is not None else None)
    trace = None
    if trace_law is not None and trace_std is not None and "clip_norm" in d and d.get("sampling_rate") is not None:
        trace = TraceLaw(noise=str(trace_law), noise_std=float(trace_std), clip_norm=float(d["clip_norm"]),
                         canary_norm=float(d.get("canary_norm", d["clip_norm"])), sampling_rate=float(d["sampling_rate"]))
        for k in _TRACE_KEYS:
            d.pop(k, None)
    if step is None and any(d.get(k) is not None for k in _STEP_KEYS):
        step = NoiseStep(**{("law" if k == "noise" else k): d.pop(k) for k in _STEP_KEYS if d.get(k) is not None})
        for k in _STEP_KEYS:
            if k in d and d[k] is None:
                d.pop(k)
    composition = d.pop("composition", None)  # a description (or, where a mapping, the tree itself)
    composition = event_from_dict(composition) if isinstance(composition, Mapping) else None
    return {"step": step, "composition": composition, "trace": trace, "notes": d}
