"""Audit campaigns: a declared grid of audits, run into one results folder with one README.

A campaign is a TOML file (``campaigns/<name>.toml``)::

    [campaign]
    name = "default"            # results/campaign-<name>/ unless --out
    datasets = ["csbm", "cora"] # default for every block
    epsilons = [1, 2, 4, 8]     # default for every block
    seed = 0
    confidence = 0.95
    roc_epsilon = 4             # the ε whose ROC curves are drawn (nearest one per target)

    [quick]                     # what --quick changes (CI): any block key, for every block
    datasets = ["csbm"]
    trials = 40

    [[audit]]                   # one block = one target × its ε × attacks × datasets
    target = "caribou"
    epsilons = [1, 2, 4, 8]
    attacks = ["mechanism-lrt", "linkteller"]
    trials = 2000               # or a table: {csbm = 2000, cora = 1000, linkteller = 100}
    params = {encoder_epochs = 20}
    note = "why these params"   # shown beside the rows
    explain = "..."             # why a VIOLATION of this block is expected (else flagged UNEXPLAINED)
    quick = false               # leave out of --quick, or a table of keys that --quick overrides

Each row is one :class:`audit.game.AuditSpec`, run by :func:`audit.game.run_audit` into the
folder (its result JSON, its trials in the folder's SQLite store). A rerun skips every row whose
result JSON holds the same spec key and trial count, and resumes unfinished rows trial by trial.
``campaign.json`` holds every row, with the ROC points needed to redraw the plots, so the README
and plots can be regenerated (``--report-only``) without the SQLite store.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from audit.report import REPO, num, roc_points, short, write_campaign_report
from audit.result import Result

CAMPAIGNS = REPO / "campaigns"

_CAMPAIGN_KEYS = {"name", "datasets", "epsilons", "seed", "confidence", "roc_epsilon", "description"}
_BLOCK_KEYS = {"target", "epsilons", "datasets", "attacks", "trials", "params", "note", "explain", "quick",
               "canary", "level", "estimator", "delta", "bug", "utility"}
_QUICK_KEYS = _BLOCK_KEYS - {"target", "quick", "note", "explain"} | {"targets"}


class CampaignError(ValueError):
    """A mistake in a campaign file, with the file and the block it is in."""


# ---------------------------------------------------------------------------------------------
# the campaign file
# ---------------------------------------------------------------------------------------------
@dataclass
class Row:
    """One audit of the campaign, and what the README says beside it."""

    spec: Any  # audit.game.AuditSpec
    block: int
    note: str = ""
    explain: str = ""
    utility: bool = True

    @property
    def label(self) -> str:
        s = self.spec
        return f"{s.target} ε={s.epsilon:g} {s.attack} {s.dataset}"


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
    from audit import data as datasets
    from audit.game import AuditSpec
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
            if d not in known_data:
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
            if a not in known_attacks:
                raise CampaignError(f"{where}: unknown attack {a!r}; known: {', '.join(sorted(known_attacks))}")
            level = b.get("level", "auto")
            need = attacks_registry.get(a).levels
            if level != "auto" and level not in need or not set(need) & set(probe.levels):
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


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------
def _existing(out: Path, key: str, trials: int, estimator: str) -> Result | None:
    """A finished result in `out` with this spec key and trial count (and estimator, unless auto)."""
    for p in sorted(out.glob("*.json")):
        if p.name in ("campaign.json", "utility.json"):
            continue
        try:
            r = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(r, dict) or r.get("key") != key or r.get("trials") != trials:
            continue
        if estimator == "auto" or r.get("method") == estimator:
            return Result.from_dict(r)
    return None


def _utility_key(spec: Any) -> str:
    d = {"target": spec.target, "params": spec.params, "epsilon": spec.epsilon, "delta": spec.delta,
         "bug": spec.bug, "dataset": spec.dataset, "seed": spec.seed}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def utility(spec: Any, out: Path) -> float | None:
    """Val-selected test accuracy (%) of one private fit at the row's (target, params, ε, dataset),
    computed once and cached in ``out/utility.json``. None where the target is not a classifier."""
    import torch

    from audit import data as datasets
    from targets.base import build, resolve

    cache_path = out / "utility.json"
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    key = _utility_key(spec)
    if key in cache:
        return cache[key]["accuracy"]
    t0 = time.time()
    target = build(spec.target, epsilon=spec.epsilon, delta=spec.delta, bug=spec.bug, device=spec.device,
                   **spec.params)
    graph = datasets.load(spec.dataset, root=spec.data_root, seed=spec.seed)
    release = target.fit(graph, torch.Generator().manual_seed(spec.seed))
    acc = resolve(release.info.get("accuracy"))
    value = None
    if isinstance(acc, dict):
        test = acc.get("test", acc.get("test_acc"))
        value = None if test is None else 100.0 * float(test)
    elif isinstance(acc, (int, float)):
        value = 100.0 * float(acc)
    cache[key] = {"target": spec.target, "params": spec.params, "epsilon": spec.epsilon, "dataset": spec.dataset,
                  "accuracy": value, "detail": acc if isinstance(acc, dict) else None, "seconds": time.time() - t0}
    cache_path.write_text(json.dumps(cache, indent=2, sort_keys=True, default=float))
    return value


def _row_record(row: Row, result: Result | None, *, util: float | None, wall: float,
                roc: dict[str, list[float]] | None, error: str | None = None) -> dict[str, Any]:
    s = row.spec
    rec: dict[str, Any] = {"target": s.target, "dataset": s.dataset, "attack": s.attack, "epsilon": s.epsilon,
                           "params": s.params, "bug": s.bug, "trials": s.trials, "key": s.key(),
                           "block": row.block, "note": row.note, "explain": row.explain, "utility": util,
                           "wall_time_s": wall, "error": error}
    if result is not None:
        claim = result.claim
        rec.update({"run_id": result.run_id, "unit": claim.get("unit"), "level": result.level,
                    "canary": result.canary.get("canary"),
                    "claimed_epsilon": result.claimed_epsilon, "claimed_delta": result.claimed_delta,
                    "accountant": result.accountant, "eps_lb": result.eps_lb, "ci": result.ci,
                    "method": result.method, "tightness": result.tightness,
                    "verdict": result.verdict, "auc": result.auc,
                    "tpr_at_fpr": result.tpr_at_fpr, "gdp_mu": claim.get("gdp_mu"),
                    "max_certifiable_eps": result.max_certifiable_eps, "trials": result.trials,
                    "audit_wall_time_s": result.wall_time_s, "roc": roc})
    else:
        rec["verdict"] = "ERROR"
    return rec


def _git() -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=20,
                                  check=True).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None

    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def _machine() -> dict[str, Any]:
    import os

    import torch

    return {"host": platform.node(), "system": f"{platform.system()} {platform.release()}",
            "machine": platform.machine(), "processor": platform.processor() or None,
            "cpus": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__}


def _save(out: Path, meta: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    doc = {**meta, "rows": rows}
    tmp = out / "campaign.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1, default=str))
    tmp.replace(out / "campaign.json")


def run(campaign: Campaign, out: str | Path | None = None, *, jobs: int = 1, progress: bool = True,
        command: str | None = None, log: Any = None) -> dict[str, Any]:
    """Run (or resume) every row into one folder; write campaign.json, plots and README.md.

    campaign.json is rewritten after each row, so an interruption (Ctrl-C) loses no finished row,
    and finished trials of the interrupted row are in the store."""
    from audit.game import run_audit

    log = log or sys.stderr
    out = Path(out) if out else campaign.default_out()
    out.mkdir(parents=True, exist_ok=True)
    config = campaign.path.resolve()
    config = config.relative_to(REPO) if config.is_relative_to(REPO) else config
    meta = {"name": campaign.name, "config": str(config), "quick": campaign.quick,
            "description": campaign.description, "out": str(out), "command": command or _default_command(campaign, out, jobs),
            "git": _git(), "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": _machine(), "jobs": jobs, "confidence": campaign.confidence,
            "roc_epsilon": campaign.roc_epsilon, "rows_planned": len(campaign.rows)}
    records: list[dict[str, Any]] = []
    total = sum(r.spec.trials for r in campaign.rows)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"campaign {campaign.name}", unit="trial", file=log, dynamic_ncols=True)
    t_start = time.time()
    n = len(campaign.rows)
    try:
        for i, row in enumerate(campaign.rows, 1):
            s = row.spec
            t0 = time.time()
            line = f"[{i}/{n}] {s.target} ε={s.epsilon:g} {s.attack} {s.dataset} ({s.trials} trials)"
            existing = _existing(out, s.key(), s.trials, s.estimator)
            error = None
            before = bar.n if bar is not None else 0
            if existing is not None:
                result = existing
                status = f"done before, skipped ({result.verdict} ε_lb {short(num(result.eps_lb), 3)})"
            else:
                try:
                    result = run_audit(s, out=out, jobs=jobs, progress=False,
                                       on_chunk=(lambda k: bar.update(k)) if bar is not None else None)
                    status = f"{result.verdict} ε_lb {short(num(result.eps_lb), 3)}"
                except (ValueError, RuntimeError) as err:  # one broken row must not sink the campaign
                    result, error, status = None, f"{type(err).__name__}: {err}", f"ERROR {err}"
            util = None
            if result is not None and row.utility:
                try:
                    util = utility(s, out)
                except (ValueError, RuntimeError) as err:
                    status += f" (utility failed: {err})"
            roc = roc_points(result, out / "audit.sqlite") if result is not None else None
            if roc is None and result is not None:  # rerun without the store: keep what campaign.json had
                roc = _previous_roc(out, s.key(), s.trials)
            wall = time.time() - t0
            records.append(_row_record(row, result, util=util, wall=wall, roc=roc, error=error))
            if bar is not None:
                bar.update(before + s.trials - bar.n)
            msg = f"{line}: {status}  [row {wall:.1f}s, elapsed {time.time() - t_start:.0f}s]"
            (bar.write(msg, file=log) if bar is not None else print(msg, file=log, flush=True))
            meta["wall_time_s"] = time.time() - t_start
            _save(out, meta, records)
    except KeyboardInterrupt:
        meta["interrupted"] = True
        meta["wall_time_s"] = time.time() - t_start
        _save(out, meta, records)
        write_campaign_report(out)
        raise
    finally:
        if bar is not None:
            bar.close()
    meta["wall_time_s"] = time.time() - t_start
    meta.pop("interrupted", None)
    _save(out, meta, records)
    write_campaign_report(out)
    return {**meta, "rows": records}


def _previous_roc(out: Path, key: str, trials: int) -> dict[str, list[float]] | None:
    path = out / "campaign.json"
    if not path.exists():
        return None
    try:
        for r in json.loads(path.read_text()).get("rows", []):
            if r.get("key") == key and r.get("trials") == trials and r.get("roc"):
                return r["roc"]
    except (OSError, json.JSONDecodeError):
        return None
    return None


def _default_command(campaign: Campaign, out: Path, jobs: int) -> str:
    args = ["python -m audit campaign", str(campaign.path)]
    if campaign.quick:
        args.append("--quick")
    args += ["--out", str(out), "--jobs", str(jobs)]
    return " ".join(args)
