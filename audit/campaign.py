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

import argparse
import datetime
import hashlib
import json
import math
import platform
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
CAMPAIGNS = REPO / "campaigns"

_CAMPAIGN_KEYS = {"name", "datasets", "epsilons", "seed", "confidence", "roc_epsilon", "description"}
_BLOCK_KEYS = {"target", "epsilons", "datasets", "attacks", "trials", "params", "note", "explain", "quick",
               "canary", "level", "estimator", "delta", "bug", "utility"}
_QUICK_KEYS = _BLOCK_KEYS - {"target", "quick", "note", "explain"} | {"targets"}
_ROC_POINTS = 300


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
    from audit import data as datasets
    from audit.game import ATTACKS, AuditSpec, auto_attacks, available, make_attack
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
    known_attacks = set(available(ATTACKS))
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
            attacks = auto_attacks(probe)
        for a in attacks:
            if a not in known_attacks:
                raise CampaignError(f"{where}: unknown attack {a!r}; known: {', '.join(sorted(known_attacks))}")
            level = b.get("level", "auto")
            need = make_attack(a).levels
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
def _existing(out: Path, key: str, trials: int, estimator: str) -> dict[str, Any] | None:
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
            return r
    return None


def _roc_points(result: dict[str, Any], store_path: Path) -> dict[str, list[float]] | None:
    """Down-sampled ROC points of a result, read from the store (kept in campaign.json)."""
    import numpy as np

    from audit import estimators
    from audit.store import Store

    if not store_path.exists():
        return None
    with Store(store_path) as store:
        rows = store.trials(result["key"], limit=result["trials"])
    if not rows:
        return None
    bits = np.array([b for _, b, _ in rows])
    scores = np.array([s for _, _, s in rows])
    fpr, tpr = estimators.roc(scores[bits == 0], scores[bits == 1])
    if fpr.size > _ROC_POINTS:
        keep = np.unique(np.linspace(0, fpr.size - 1, _ROC_POINTS).round().astype(int))
        # keep the low-FPR corner exactly: it is where ε is read
        low = np.flatnonzero(fpr <= 0.05)
        keep = np.union1d(keep, low[-_ROC_POINTS:])
        fpr, tpr = fpr[keep], tpr[keep]
    return {"fpr": [round(float(x), 6) for x in fpr], "tpr": [round(float(x), 6) for x in tpr]}


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


def _row_record(row: Row, result: dict[str, Any] | None, *, util: float | None, wall: float,
                roc: dict[str, list[float]] | None, error: str | None = None) -> dict[str, Any]:
    s = row.spec
    rec: dict[str, Any] = {"target": s.target, "dataset": s.dataset, "attack": s.attack, "epsilon": s.epsilon,
                           "params": s.params, "bug": s.bug, "trials": s.trials, "key": s.key(),
                           "block": row.block, "note": row.note, "explain": row.explain, "utility": util,
                           "wall_time_s": wall, "error": error}
    if result is not None:
        claim = result.get("claim", {})
        rec.update({"run_id": result.get("run_id"), "unit": claim.get("unit"), "level": result["level"],
                    "canary": result.get("canary", {}).get("canary"),
                    "claimed_epsilon": result["claimed_epsilon"], "claimed_delta": result["claimed_delta"],
                    "accountant": result.get("accountant"), "eps_lb": result["eps_lb"], "ci": result.get("ci"),
                    "method": result["method"], "tightness": result.get("tightness"),
                    "verdict": result["verdict"], "auc": result["auc"],
                    "tpr_at_fpr": result.get("tpr_at_fpr"), "gdp_mu": claim.get("gdp_mu"),
                    "max_certifiable_eps": result["max_certifiable_eps"], "trials": result["trials"],
                    "audit_wall_time_s": result.get("wall_time_s"), "roc": roc})
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
                status = f"done before, skipped ({result['verdict']} ε_lb {_f(_num(result['eps_lb']), 3)})"
            else:
                try:
                    result = run_audit(s, out=out, jobs=jobs, progress=False,
                                       on_chunk=(lambda k: bar.update(k)) if bar is not None else None)
                    status = f"{result['verdict']} ε_lb {_f(_num(result['eps_lb']), 3)}"
                except (ValueError, RuntimeError) as err:  # one broken row must not sink the campaign
                    result, error, status = None, f"{type(err).__name__}: {err}", f"ERROR {err}"
            util = None
            if result is not None and row.utility:
                try:
                    util = utility(s, out)
                except (ValueError, RuntimeError) as err:
                    status += f" (utility failed: {err})"
            roc = _roc_points(result, out / "audit.sqlite") if result is not None else None
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
        write_report(out)
        raise
    finally:
        if bar is not None:
            bar.close()
    meta["wall_time_s"] = time.time() - t_start
    meta.pop("interrupted", None)
    _save(out, meta, records)
    write_report(out)
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


# ---------------------------------------------------------------------------------------------
# the README and the plots (from campaign.json alone)
# ---------------------------------------------------------------------------------------------
def _f(x: Any, digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _num(x: Any) -> float:
    if isinstance(x, str):
        return float(x.replace("∞", "inf"))
    return float("nan") if x is None else float(x)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def plot_epsilons(rows: list[dict[str, Any]], target: str, path: Path) -> Path | None:
    """ε lower bound (interval as error bars) vs claimed ε, one line per (attack, dataset, canary,
    parameters), with y = x and the trial budget's max certifiable ε dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["target"] == target and r.get("eps_lb") is not None
            and math.isfinite(_num(r.get("claimed_epsilon")))]
    if not mine:
        return None
    fig, ax = plt.subplots(figsize=(6.8, 4.8))

    def variant(r: dict[str, Any]) -> tuple[str, ...]:
        params = " ".join(f"{k}={v}" for k, v in sorted((r.get("params") or {}).items()))
        return r["attack"], r["dataset"], r.get("bug") or "", r.get("canary") or "", params

    groups = sorted({variant(r) for r in mine})
    # a line's label names the canary and parameters only where they tell two lines apart
    shared = {g[:3]: sum(h[:3] == g[:3] for h in groups) for g in groups}
    top = 0.0
    for k, key in enumerate(groups):
        attack, dataset, bug, canary, params = key
        g = sorted((r for r in mine if variant(r) == key), key=lambda r: _num(r["claimed_epsilon"]))
        label = f"{attack} / {dataset}" + (f" [bug {bug}]" if bug else "")
        if shared[key[:3]] > 1:
            label += f" / {canary}" + (f" ({params})" if params else "")
        x = [_num(r["claimed_epsilon"]) for r in g]
        y = [_num(r["eps_lb"]) for r in g]
        lo = [max(0.0, yy - _num((r.get("ci") or [yy, yy])[0])) if math.isfinite(yy) else 0.0 for yy, r in zip(y, g)]
        hi = [max(0.0, _num((r.get("ci") or [yy, yy])[1]) - yy) if math.isfinite(yy) else 0.0 for yy, r in zip(y, g)]
        hi = [h if math.isfinite(h) else 0.0 for h in hi]
        color = f"C{k % 10}"
        ax.errorbar(x, y, yerr=[lo, hi], marker="o", color=color, capsize=3, label=label)
        mc = [_num(r["max_certifiable_eps"]) for r in g]
        ax.plot(x, mc, ls="--", color=color, lw=1, alpha=0.7)
        top = max(top, *[v for v in y + x if math.isfinite(v)])
    lim = [0, max(_num(r["claimed_epsilon"]) for r in mine) * 1.1]
    # show the certifiable ceiling where it is near the claims, never let it flatten the bounds
    ceiling = [_num(r["max_certifiable_eps"]) for r in mine if math.isfinite(_num(r["max_certifiable_eps"]))]
    top = max(top, min(max(ceiling, default=0.0), 2 * lim[1]))
    ax.plot(lim, lim, color="k", lw=1, label="y = x (the claim)")
    ax.plot([], [], ls="--", color="0.4", lw=1, label="max certifiable ε (trial budget)")
    ax.set_xlabel("claimed ε")
    ax.set_ylabel("empirical ε lower bound")
    ax.set_ylim(0, max(top, lim[1]) * 1.08)
    ax.set_xlim(0, lim[1])
    ax.set_title(f"{target}: ε lower bound vs claim")
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _roc_epsilon(rows: list[dict[str, Any]], wanted: float | None) -> float | None:
    eps = sorted({_num(r["epsilon"]) for r in rows})
    if not eps:
        return None
    if wanted is None:
        return eps[len(eps) // 2]
    return min(eps, key=lambda e: (abs(math.log(e / wanted)), e))


def plot_roc(rows: list[dict[str, Any]], target: str, wanted: float | None, path: Path) -> Path | None:
    """ROC curves of a target's attacks at one ε (log FPR), against the region the claim allows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    mine = [r for r in rows if r["target"] == target and r.get("roc")]
    eps = _roc_epsilon(mine, wanted)
    mine = [r for r in mine if _num(r["epsilon"]) == eps]
    if not mine:
        return None
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    grid = np.logspace(-4, 0, 300)
    claimed = _num(mine[0]["claimed_epsilon"])
    delta = float(mine[0]["claimed_delta"])
    if math.isfinite(claimed):
        from audit.report import claim_tpr_limit

        bound = claim_tpr_limit(grid, claimed, delta)
        ax.plot(grid, bound, "k--", lw=1, label=f"claim limit (ε={claimed:.3g}, δ={delta:.1g})")
    for k, r in enumerate(sorted(mine, key=lambda r: (r["attack"], r["dataset"]))):
        ax.plot(r["roc"]["fpr"], r["roc"]["tpr"], color=f"C{k % 10}",
                label=f"{r['attack']} / {r['dataset']}{' [bug ' + r['bug'] + ']' if r.get('bug') else ''} (AUC {r['auc']:.3f}, {r['trials']} trials)")
    from audit.report import roc_axes

    roc_axes(ax, grid)
    ax.set_title(f"{target} at target ε = {eps:g}")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _who(r: dict[str, Any]) -> str:
    return r["target"] + (f" [bug {r['bug']}]" if r.get("bug") else "")


def _verdict_cell(r: dict[str, Any]) -> str:
    if r.get("verdict") == "ERROR":
        return "ERROR"
    if not math.isfinite(_num(r.get("claimed_epsilon"))):
        return "n/a (no claim)"
    return f"**{r['verdict']}**" if r["verdict"] == "VIOLATION" else r["verdict"]


def markdown(doc: dict[str, Any], images: dict[str, list[str]], discussion: str | None = None,
             folder: str = "") -> str:
    """The README. `discussion`: hand-written findings (the folder's ``discussion.md``), placed
    before the table; `folder`: a prefix for image paths (the copy in ``results/README.md``)."""
    rows = doc.get("rows", [])
    git = doc.get("git", {})
    m = doc.get("machine", {})
    dirty = {True: " (working tree dirty: uncommitted changes)", False: " (clean)", None: ""}[git.get("dirty")]
    lines = [f"# Audit campaign `{doc['name']}`" + (" (quick)" if doc.get("quick") else ""), ""]
    if doc.get("description"):
        lines += [doc["description"], ""]
    lines += [
        f"* command: `{doc.get('command', '')}`",
        f"* commit: `{git.get('commit') or 'unknown'}`{dirty}",
        f"* date: {doc.get('date', '')}; wall time {_f(doc.get('wall_time_s'), 0)} s with --jobs {doc.get('jobs')}",
        f"* machine: {m.get('host', '?')}, {m.get('system', '')} {m.get('machine', '')}, {m.get('cpus', '?')} CPUs, "
        f"python {m.get('python', '?')}, torch {m.get('torch', '?')}",
        f"* config: `{doc.get('config', '')}`; {len(rows)} of {doc.get('rows_planned', len(rows))} rows finished"
        + ("; **interrupted** — rerun the command to resume" if doc.get("interrupted") else ""),
        f"* confidence {doc.get('confidence', 0.95):.0%}; VIOLATION = the ε lower bound exceeds the claimed ε.",
        "* regenerate this file without rerunning: `python -m audit campaign "
        f"{doc.get('config', 'CONFIG')}{' --quick' if doc.get('quick') else ''}"
        f"{' --out ' + doc['out'] if doc.get('out') else ''} --report-only`",
        *([f"* per-row results, `campaign.json` and plots: [`{folder}`]({folder})"] if folder else []),
        "",
        *([discussion.strip(), ""] if discussion else []),
        "## Results", "",
        "| target | dataset | level | attack | claimed ε | ε_lb [interval] | method | tightness | verdict | AUC | "
        "max cert. ε | trials | utility % | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r.get("verdict") == "ERROR":
            lines.append(f"| {r['target']} | {r['dataset']} | – | {r['attack']} | {_f(r['epsilon'])} | "
                         f"ERROR: {str(r.get('error'))[:80]} | | | ERROR | | | {r['trials']} | | "
                         f"{_f(r.get('wall_time_s'), 0)} |")
            continue
        ci = r.get("ci") or [None, None]
        unit = (r.get("unit") or "").split(" ")[0]
        lines.append(
            f"| {_who(r)} | {r['dataset']} | {unit}/{r['level']} | {r['attack']} | {_f(_num(r['claimed_epsilon']))} | "
            f"{_f(_num(r['eps_lb']))} [{_f(_num(ci[0]) if ci[0] is not None else None)}, "
            f"{_f(_num(ci[1]) if ci[1] is not None else None)}] | {r['method']} | {_f(r.get('tightness'))} | "
            f"{_verdict_cell(r)} | {_f(r.get('auc'), 3)} | {_f(_num(r['max_certifiable_eps']))} | {r['trials']} | "
            f"{_f(r.get('utility'), 1)} | {_f(r.get('wall_time_s'), 0)} |")
    lines += ["", "Utility: val-selected test accuracy (%) of one private fit with the row's parameters and ε "
                  "(seed 0), the audited configuration (see the notes where it is a fast one). "
                  "max cert. ε: the largest ε a perfect attack could certify with this many trials; a "
                  "CONSISTENT verdict with a claim above it says little.", ""]
    lines += ["## Violations", ""]
    viol = [r for r in rows if r.get("verdict") == "VIOLATION" and math.isfinite(_num(r.get("claimed_epsilon")))]
    if not viol:
        lines += ["None: every finished row is CONSISTENT with its claim.", ""]
    for r in viol:
        why = r.get("explain") or "**UNEXPLAINED — investigate**"
        lines.append(f"* **{_who(r)}** on {r['dataset']}, {r['attack']}, claimed ε = {_f(_num(r['claimed_epsilon']))}"
                     f": ε_lb = {_f(_num(r['eps_lb']))} ({r['method']}, {r['trials']} trials). {why}")
        if r.get("note"):
            lines.append(f"  Note: {r['note']}")
    errors = [r for r in rows if r.get("verdict") == "ERROR"]
    if errors:
        lines += ["", "## Rows that failed", ""]
        lines += [f"* {r['target']} ε={_f(r['epsilon'])} {r['attack']} {r['dataset']}: {r.get('error')}" for r in errors]
    notes: dict[str, list[str]] = {}
    for r in rows:
        if r.get("note"):
            notes.setdefault(r["note"], [])
            tag = f"{r['target']}/{r['attack']}/{r['dataset']}"
            if tag not in notes[r["note"]]:
                notes[r["note"]].append(tag)
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"* {', '.join(tags)}: {text}" for text, tags in notes.items()]
    lines += ["", "## Plots", ""]
    for target, files in images.items():
        lines.append(f"### {target}")
        lines.append("")
        lines += [f"![{target} {Path(f).stem}]({folder}{f})" for f in files]
        lines.append("")
    lines += ["Left: ε lower bound (bars: its interval) against the claimed ε, one line per (attack, dataset); "
              "the solid diagonal is the claim, dashed lines the budget's max certifiable ε. Right: ROC curves at "
              "one ε against the region the claim allows (dashed).", ""]
    return "\n".join(lines)


def write_report(out: str | Path) -> Path:
    """Plots and README.md from ``out/campaign.json`` alone (no store, no rerun)."""
    out = Path(out)
    path = out / "campaign.json"
    if not path.exists():
        raise FileNotFoundError(f"no campaign.json in {out} (run the campaign first)")
    doc = json.loads(path.read_text())
    rows = doc.get("rows", [])
    images: dict[str, list[str]] = {}
    for target in dict.fromkeys(r["target"] for r in rows):
        files = []
        for kind, fn in (("eps", lambda p: plot_epsilons(rows, target, p)),
                         ("roc", lambda p: plot_roc(rows, target, doc.get("roc_epsilon"), p))):
            p = fn(out / f"{kind}-{_slug(target)}.png")
            if p is not None:
                files.append(p.name)
        if files:
            images[target] = files
    notes = out / "discussion.md"
    discussion = notes.read_text() if notes.exists() else None
    readme = out / "README.md"
    readme.write_text(markdown(doc, images, discussion))
    results = (REPO / "results").resolve()
    if out.resolve().parent == results and not doc.get("quick"):
        # the repository's results/README.md is the full campaign's report, paths into its folder
        (results / "README.md").write_text(markdown(doc, images, discussion, folder=f"{out.name}/"))
    return readme


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("campaign", help="a declared grid of audits into one results folder")
    p.add_argument("config", help="campaign TOML path, or a name in campaigns/ (e.g. default)")
    p.add_argument("--quick", action="store_true", help="the [quick] subset (CI)")
    p.add_argument("--out", default=None, help="results folder (default results/campaign-<name>[-quick]/)")
    p.add_argument("--jobs", type=int, default=1, help="parallel trial workers")
    p.add_argument("--only", default=None, metavar="TARGET", help="only this target's rows")
    p.add_argument("--report-only", action="store_true", help="regenerate README.md and plots from campaign.json")
    p.add_argument("--dry-run", action="store_true", help="list the rows and their trial budgets, run nothing")
    p.add_argument("--no-progress", action="store_true")
    return p


def cmd_campaign(args: argparse.Namespace) -> int:
    import torch

    if args.jobs < 1:
        raise CampaignError(f"--jobs must be >= 1, got {args.jobs}")
    campaign = load(args.config, quick=args.quick, only=args.only)
    out = Path(args.out) if args.out else campaign.default_out()
    if args.report_only:
        readme = write_report(out)
        print(f"regenerated {readme}")
        return 0
    if args.dry_run:
        for i, row in enumerate(campaign.rows, 1):
            print(f"[{i}/{len(campaign.rows)}] {row.label} trials={row.spec.trials} params={row.spec.params}")
        print(f"{len(campaign.rows)} rows, {sum(r.spec.trials for r in campaign.rows)} trials")
        return 0
    torch.set_num_threads(1)
    command = "python -m audit campaign " + " ".join(_argv_of(args))
    try:
        doc = run(campaign, out, jobs=args.jobs, progress=not args.no_progress, command=command)
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished rows are in {out / 'campaign.json'} and finished trials in the store; "
              "rerun the same command to resume", file=sys.stderr)
        return 130
    n_v = sum(r.get("verdict") == "VIOLATION" and math.isfinite(_num(r.get("claimed_epsilon"))) for r in doc["rows"])
    n_e = sum(r.get("verdict") == "ERROR" for r in doc["rows"])
    print(f"{len(doc['rows'])} rows, {n_v} violation(s), {n_e} error(s), {doc['wall_time_s']:.0f} s; "
          f"report: {out / 'README.md'}")
    return 0


def _argv_of(args: argparse.Namespace) -> list[str]:
    out = [str(args.config)]
    if args.quick:
        out.append("--quick")
    if args.out:
        out += ["--out", str(args.out)]
    if args.jobs != 1:
        out += ["--jobs", str(args.jobs)]
    if args.only:
        out += ["--only", args.only]
    return out


def main(argv: list[str] | None = None) -> int:
    """``python -m audit.campaign CONFIG ...`` (the same as ``python -m audit campaign``)."""
    parser = argparse.ArgumentParser(prog="dpgnn-audit campaign")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["campaign", *(sys.argv[1:] if argv is None else argv)])
    try:
        return cmd_campaign(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"dpgnn-audit campaign: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
