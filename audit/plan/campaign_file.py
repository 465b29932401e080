"""The campaign file (``campaigns/<name>.toml``): its keys, the rows it declares, and :func:`load`, which
reads and checks it (:class:`CampaignError` names the file and block of a mistake). :mod:`audit.plan.campaign`
runs what it declares.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from audit.records.campaign_report import REPO
from audit.stats.kinds import AUTO

CAMPAIGNS = REPO / "campaigns"

_CAMPAIGN_KEYS = {"name", "datasets", "epsilons", "seed", "confidence", "roc_epsilon", "description"}
_BLOCK_KEYS = {"target", "epsilons", "datasets", "attacks", "trials", "params", "note", "explain", "quick",
               "canary", "level", "estimator", "delta", "bug", "utility"}
_QUICK_KEYS = _BLOCK_KEYS - {"target", "quick", "note", "explain"} | {"targets"}


class CampaignError(ValueError):
    """A mistake in a campaign file, with the file and the block it is in."""


@dataclass
class Row:
    """One audit of the campaign, and what the README says beside it."""

    spec: Any  # audit.play.game.AuditSpec
    block: int
    note: str = ""
    explain: str = ""
    utility: bool = True

    @property
    def label(self) -> str:
        """target, ε, attack, dataset, and what tells the row from its neighbours: the bug, the
        canary (where the file names one) and the parameters the file sets."""
        s = self.spec
        extra = ([f"bug={s.bug}"] if s.bug else []) + ([f"canary={s.canary}"] if s.canary != AUTO else [])
        extra += [f"{k}={v}" for k, v in sorted(s.params.items())]
        return f"{s.target} ε={s.epsilon:g} {s.attack} {s.dataset}" + (f" [{' '.join(extra)}]" if extra else "")


@dataclass
class Campaign:
    name: str
    path: Path
    quick: bool
    rows: list[Row]
    confidence: float = 0.95
    roc_epsilon: float | None = None
    description: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    def default_out(self) -> Path:
        return Path("results") / f"campaign-{self.name}{'-quick' if self.quick else ''}"


def find_config(config: str | Path) -> Path:
    """A campaign file by path, or by name in ``campaigns/`` (``default`` → campaigns/default.toml)."""
    path = Path(config)
    if path.is_file():
        return path
    for candidate in (CAMPAIGNS / f"{config}.toml", CAMPAIGNS / str(config), Path("campaigns") / f"{config}.toml"):
        if candidate.is_file():
            return candidate
    known = sorted(p.stem for p in CAMPAIGNS.glob("*.toml")) if CAMPAIGNS.is_dir() else []
    raise CampaignError(f"no campaign {str(config)!r}: not a file, and not a name in {CAMPAIGNS} "
                        f"(known: {', '.join(known) or 'none'})")


def _where(path: Path, i: int | None) -> str:
    return f"{path.name}" + (f", [[audit]] block {i + 1}" if i is not None else "")


def _unknown(keys: set[str], allowed: set[str], where: str, section: str) -> None:
    bad = sorted(set(keys) - allowed)
    if bad:
        raise CampaignError(f"{where}: unknown key(s) {', '.join(map(repr, bad))} in {section}; "
                            f"allowed: {', '.join(sorted(allowed))}")


def _list(value: Any, where: str, key: str, kind: type | tuple[type, ...]) -> list[Any]:
    if isinstance(value, kind) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not value:
        raise CampaignError(f"{where}: {key!r} must be a non-empty list (empty grid)")
    for v in value:
        if not isinstance(v, kind) or isinstance(v, bool):
            raise CampaignError(f"{where}: {key!r} holds {v!r}, not a {getattr(kind, '__name__', kind)}")
    return value


def _trials_for(trials: Any, dataset: str, attack: str, where: str) -> int:
    """``trials`` is an int, or a table keyed by dataset, attack or 'attack/dataset' (with 'default')."""
    if isinstance(trials, dict):
        for k in (f"{attack}/{dataset}", attack, dataset, "default"):
            if k in trials:
                return _trials_for(trials[k], dataset, attack, where)
        raise CampaignError(f"{where}: 'trials' has no entry for {attack}/{dataset} (add a 'default')")
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 8 or trials % 2:
        raise CampaignError(f"{where}: trials must be an even integer >= 8, got {trials!r}")
    return trials


def _text_for(text: Any, dataset: str, attack: str, eps: float, where: str, key: str) -> str:
    """A note/explain is a string, or a table keyed by 'attack/dataset', attack, dataset, 'eps=E' or 'default'."""
    if isinstance(text, str):
        return text
    if isinstance(text, dict):
        for k in (f"{attack}/{dataset}", attack, dataset, f"eps={eps:g}", "default"):
            if isinstance(text.get(k), str):
                return text[k]
        return ""
    raise CampaignError(f"{where}: {key!r} must be a string or a table of strings")


def load(config: str | Path, *, quick: bool = False, only: str | None = None) -> Campaign:
    """Read and validate a campaign file and expand it into rows (``quick``: apply ``[quick]``)."""
    from attacks import base as attacks_registry
    from audit.play import data as datasets
    from audit.play.game import AuditSpec
    from targets import base as targets

    path = find_config(config)
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise CampaignError(f"{path.name}: not valid TOML: {err}") from None
    _unknown(set(raw), {"campaign", "quick", "audit"}, path.name, "the top level")
    head = raw.get("campaign", {})
    _unknown(set(head), _CAMPAIGN_KEYS, path.name, "[campaign]")
    qsec = raw.get("quick", {})
    _unknown(set(qsec), _QUICK_KEYS, path.name, "[quick]")
    blocks = raw.get("audit", [])
    if not isinstance(blocks, list) or not blocks:
        raise CampaignError(f"{path.name}: no [[audit]] blocks (empty grid)")
    name = head.get("name", path.stem)
    seed = head.get("seed", 0)
    confidence = float(head.get("confidence", 0.95))
    known_targets = set(targets.available())
    known_attacks = set(attacks_registry.available())
    known_data = set(datasets.names())
    rows: list[Row] = []
    for i, block in enumerate(blocks):
        where = _where(path, i)
        _unknown(set(block), _BLOCK_KEYS, where, "[[audit]]")
        if "target" not in block:
            raise CampaignError(f"{where}: missing 'target'")
        b = dict(block)
        if quick:
            q = b.get("quick", True)
            if q is False:
                continue
            qtargets = qsec.get("targets")
            if qtargets is not None and b["target"] not in qtargets:
                continue
            b.update({k: v for k, v in qsec.items() if k != "targets"})
            if isinstance(q, dict):
                _unknown(set(q), _QUICK_KEYS - {"targets"}, where, "its quick table")
                b.update(q)
            elif q is not True:
                raise CampaignError(f"{where}: 'quick' must be true, false or a table")
        target = b["target"]
        if only is not None and target != only:
            continue
        if target not in known_targets and ":" not in target:
            raise CampaignError(f"{where}: unknown target {target!r}; known: {', '.join(sorted(known_targets))}")
        epsilons = _list(b.get("epsilons", head.get("epsilons")), where, "epsilons", (int, float))
        for e in epsilons:
            if not e > 0 or not math.isfinite(e):
                raise CampaignError(f"{where}: every ε must be a finite number > 0, got {e!r}")
        data = _list(b.get("datasets", head.get("datasets")), where, "datasets", str)
        for d in data:
            if d not in known_data and not d.startswith("witness:"):
                raise CampaignError(f"{where}: unknown dataset {d!r}; known: {', '.join(sorted(known_data))}")
        params = b.get("params", {})
        if not isinstance(params, dict):
            raise CampaignError(f"{where}: 'params' must be a table")
        params = {str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in params.items()}
        try:  # unknown/invalid hyperparameters and bugs name themselves here, before anything runs
            probe = targets.build(target, epsilon=float(epsilons[0]), delta=b.get("delta"), bug=b.get("bug"),
                                  **params)
        except (ValueError, TypeError) as err:
            raise CampaignError(f"{where}: {err}") from None
        attacks = _list(b.get("attacks", ["auto"]), where, "attacks", str)
        if attacks == ["auto"]:
            attacks = attacks_registry.auto_attacks(probe)
        for a in attacks:
            if a not in known_attacks and ":" not in a:
                raise CampaignError(f"{where}: unknown attack {a!r}; known: {', '.join(sorted(known_attacks))}")
            level = b.get("level", "auto")
            need = attacks_registry.get(a).levels
            if level != AUTO and level not in need or not set(need) & set(probe.levels):
                raise CampaignError(f"{where}: attack {a!r} needs the {'/'.join(need)} view; target {target!r} "
                                    f"offers {', '.join(probe.levels)}")
        for key in ("note", "explain"):
            if key in b and not isinstance(b[key], (str, dict)):
                raise CampaignError(f"{where}: {key!r} must be a string or a table of strings")
        for d in data:
            for a in attacks:
                trials = _trials_for(b.get("trials", 1000), d, a, where)
                for e in epsilons:
                    try:
                        spec = AuditSpec(target=target, epsilon=float(e), delta=b.get("delta"), bug=b.get("bug"),
                                         params=params, dataset=d, canary=b.get("canary", "auto"), attack=a,
                                         level=b.get("level", "auto"), trials=trials, seed=seed,
                                         confidence=confidence, estimator=b.get("estimator", "auto"))
                    except ValueError as err:
                        raise CampaignError(f"{where}: {err}") from None
                    rows.append(Row(spec, i, note=_text_for(b.get("note", ""), d, a, e, where, "note"),
                                    explain=_text_for(b.get("explain", ""), d, a, e, where, "explain"),
                                    utility=bool(b.get("utility", True))))
    if not rows:
        raise CampaignError(f"{path.name}: the grid is empty"
                            + (f" for target {only!r}" if only else "") + (" under --quick" if quick else ""))
    roc = head.get("roc_epsilon")
    return Campaign(name=name, path=path, quick=quick, rows=rows, confidence=confidence,
                    roc_epsilon=float(roc) if roc is not None else None,
                    description=head.get("description", ""), raw=raw)
