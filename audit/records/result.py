"""The result of one audit run (DESIGN.md, "Result"): a typed, frozen record.

:meth:`Result.to_dict` gives the JSON every run writes (``results/*.json``, the SQLite store), key for
key as before this class existed; :meth:`Result.from_dict` reads one back (older files too: a key
they lack reads as None, a key this class does not know is kept in ``extra`` and written back).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from audit.stats.kinds import Mode

#: the record's format: bumped when a field is added or changes meaning, and part of every run's code
#: key (:func:`audit.records.provenance.code_identity`), so a stored result or campaign row of an older
#: format never reads as current (2: ``pair_epsilon`` and ``slack``)
FORMAT = 2

#: keys written only by multi-run audits (a one-run audit writes ``mode`` instead)
#: fields added later, written only when set
_OPTIONAL = ("code", "power", "declared", "reused_trials", "estimator_choice", "sequential", "one_run",
             "pair_epsilon", "slack")
_MULTI_ONLY = ("batch", "cached_per_worker", "trials_played", "trials_wall_s")


def readable_name(target: str) -> str:
    """The target as a file-name prefix: a built-in name as it is, ``path/to/my_target.py:Class`` as
    ``my_target.Class``, ``package.module:Class`` as ``package.module.Class`` (never a dotfile; the
    run's key, beside it in every name, tells two files of one stem apart)."""
    source, _, cls = target.rpartition(":")
    if not source:
        return target.replace("/", ".").lstrip(".") or "target"
    stem = source.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    stem = stem[:-3] if stem.endswith(".py") else stem
    return f"{stem}.{cls}".lstrip(".")


def number(x: Any) -> float:
    """A record's number field as a float: ``"inf"`` or ``"∞"`` strings read as ∞, None as nan."""
    if isinstance(x, str):
        return float(x.replace("∞", "inf"))
    return float("nan") if x is None else float(x)


def verdict(eps_lb: float, claimed: float) -> str:
    """VIOLATION when the lower bound exceeds the claim, else CONSISTENT."""
    return "VIOLATION" if eps_lb > claimed else "CONSISTENT"


#: the fields a pilot's result shares with its run's result (:meth:`Result.as_pilot`)
_SHARED_WITH_RUN = ("claim", "config", "code", "versions", "dataset", "store", "target", "accountant",
                    "claimed_epsilon", "claimed_delta", "confidence", "assumption")


@dataclass(frozen=True)
class Result:
    """One run: what was audited, the claim, the estimate and the verdict.

    ``eps_lb``, ``ci`` and ``max_certifiable_eps`` are as the estimate writes them (a float, or
    ``"inf"``); ``claimed_epsilon`` likewise. ``mode`` is ``"multi"`` or ``"one-run"``; the per-worker
    fields (``batch``, ``cached_per_worker``, ``trials_played``, ``trials_wall_s``) belong to multi-run
    audits.
    """

    target: str
    config: dict[str, Any]
    dataset: str
    canary: dict[str, Any]
    attack: str
    level: str
    trials: int
    seed: int
    key: str
    claimed_epsilon: Any
    claimed_delta: float | None
    accountant: str | None
    claim: dict[str, Any]
    eps_lb: Any
    ci: Any
    mu_lb: float | None
    method: str
    assumption: str | None
    confidence: float
    estimate: dict[str, Any]
    auc: float | None
    tpr_at_fpr: dict[str, float]
    max_certifiable_eps: Any
    tightness: float | None
    attack_queries_per_trial: int | None
    verdict: str
    wall_time_s: float
    store: str
    versions: dict[str, str]
    run_id: str | None = None
    mode: str = "multi"
    batch: int | None = None
    cached_per_worker: str | None = None
    trials_played: int | None = None
    trials_wall_s: float | None = None
    #: the code that played the trials (:func:`audit.records.provenance.code_identity`)
    code: dict[str, Any] | None = None
    #: how much the verdict knows (:func:`audit.records.power.power`)
    power: dict[str, Any] | None = None
    #: the check of the target's declared noise model against its real releases (:mod:`audit.declared_model.declared`)
    declared: dict[str, Any] | None = None
    #: trials found in the store (same options and code) and reused rather than played
    reused_trials: int | None = None
    #: why this estimator (auto: the claim, the declared-model check, the held-out shape test)
    estimator_choice: str | None = None
    #: sequential or fixed budget: ``on``, and for a sequential run the looks' schedule and levels, the
    #: looks evaluated, the trials used of the budget and why it stopped (:mod:`audit.play.sequential_run`)
    sequential: dict[str, Any] | None = None
    #: one-run audits: both analyses of the guesses, named (Steinke et al.'s, the verdict's; f-DP's)
    one_run: dict[str, Any] | None = None
    #: the exact ε of the played pair on the run's view, or why it is not computable
    #: (:class:`audit.stats.pair_epsilon.PairEpsilon`)
    pair_epsilon: dict[str, Any] | None = None
    #: claim → exact ε of the played pair → ε_lb, and their ratios (:func:`audit.stats.pair_epsilon.slack`)
    slack: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The run's JSON record (the keys and values runs have always written)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        if self.mode == Mode.ONE_RUN:
            for k in _MULTI_ONLY:
                out.pop(k)
        else:
            out.pop("mode")
        for k in _OPTIONAL:  # absent from records written before they existed: keep those round trips exact
            if out[k] is None:
                out.pop(k)
        out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        """A result read back from its JSON record."""
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values = {k: d.get(k) for k in names}
        values["mode"] = d.get("mode", "multi")
        values["canary"] = d.get("canary") or {}
        values["claim"] = d.get("claim") or {}
        values["tpr_at_fpr"] = d.get("tpr_at_fpr") or {}
        values["estimate"] = d.get("estimate") or {}
        values["config"] = d.get("config") or {}
        values["versions"] = d.get("versions") or {}
        return cls(**values, extra={k: v for k, v in d.items() if k not in names})

    def as_pilot(self) -> dict[str, Any]:
        """This result as the run it piloted keeps it (no file of its own; its trials stay in the store
        under ``key``): what it shares with that run's result (target, claim, code, ...) left out."""
        return {k: v for k, v in self.to_dict().items() if k not in _SHARED_WITH_RUN}

    def replace(self, **changes: Any) -> Result:
        return dataclasses.replace(self, **changes)

    # read access by key, for code written against the dict this record replaces
    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.to_dict().get(key, default)
