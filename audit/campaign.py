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
import functools
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
        """target, ε, attack, dataset, and what tells the row from its neighbours: the bug, the
        canary (where the file names one) and the parameters the file sets."""
        s = self.spec
        extra = ([f"bug={s.bug}"] if s.bug else []) + ([f"canary={s.canary}"] if s.canary != "auto" else [])
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
                roc: dict[str, list[float]] | None, error: str | None = None,
                git: dict[str, Any] | None = None) -> dict[str, Any]:
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
        code = getattr(result, "code", None)
        power = getattr(result, "power", None)
        if code:
            rec["code"] = code
        if power:
            rec["power"] = power
        if getattr(result, "reused_trials", None) is not None:
            rec["reused_trials"] = result.reused_trials
    else:
        rec["verdict"] = "ERROR"
        rec["canary"] = None if s.canary == "auto" else s.canary
    # provenance of this row (the campaign header names the session's; rows kept from earlier
    # sessions keep theirs)
    code = rec.get("code") or {}
    git = git or {}
    rec["commit"] = code.get("commit") or git.get("commit")
    rec["dirty"] = bool(code.get("diff")) if code else git.get("dirty")
    rec["date"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    return rec


def _stored_rows(out: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """The previous campaign.json of `out`: (its header, its rows); (None, []) when there is none."""
    path = out / "campaign.json"
    if not path.exists():
        return None, []
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None, []
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        return None, []
    return {k: v for k, v in doc.items() if k != "rows"}, [r for r in doc["rows"] if isinstance(r, dict)]


def _matches(rec: dict[str, Any], spec: Any) -> bool:
    """A stored row holds this spec's outcome: same options (spec key), trial count and estimator."""
    if rec.get("key") != spec.key() or rec.get("trials") != spec.trials or rec.get("verdict") == "ERROR":
        return False
    return spec.estimator == "auto" or rec.get("method") == spec.estimator


@functools.lru_cache(maxsize=None)
def _current_code_key(target: str, attack: str, canary: str | None) -> str | None:
    """:func:`audit.provenance.code_identity` key of the code that would play this row now (its
    target, attack and canary classes), or None where it cannot be computed here."""
    try:
        from attacks import base as attacks_registry
        from audit.provenance import code_identity
        from canaries import base as canaries
        from targets import base as targets

        objs = [targets.get(target), attacks_registry.get(attack)]
        if canary:
            objs.append(canaries.get(canary))
        return code_identity(*objs)["key"]
    except Exception:  # noqa: BLE001 - unknown here: fall back to the options key
        return None


def _stale_code(rec: dict[str, Any]) -> str | None:
    """Why a stored row's code is not today's (None: same code, or the row records none)."""
    stored = (rec.get("code") or {}).get("key")
    if not stored:
        return None
    now = _current_code_key(rec["target"], rec["attack"], rec.get("canary"))
    if now is None or now == stored:
        return None
    return f"code {str(stored)[:8]} then, {now[:8]} now"


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
        command: str | None = None, log: Any = None, fresh: bool = False) -> dict[str, Any]:
    """Run (or resume) every row into one folder; write campaign.json, plots and README.md.

    A rerun only adds: a row whose options (spec key, trials, estimator) and code (where the stored
    row records it) match a row of the folder's campaign.json is kept as stored (its timing, ROC
    points, provenance and utility), and the header keeps its date, commit and wall time unless a
    row really ran. ``fresh``: run every row again. Rows of targets outside the plan (``--only``)
    are kept. campaign.json is rewritten after each row, so an interruption (Ctrl-C) loses no
    finished row, and finished trials of the interrupted row are in the store."""
    from audit.game import run_audit

    log = log or sys.stderr
    out = Path(out) if out else campaign.default_out()
    out.mkdir(parents=True, exist_ok=True)
    config = campaign.path.resolve()
    config = config.relative_to(REPO) if config.is_relative_to(REPO) else config
    prev_meta, prev_rows = _stored_rows(out)
    planned_targets = {r.spec.target for r in campaign.rows}
    kept = [r for r in prev_rows if r.get("target") not in planned_targets]  # other targets (--only)
    stored: list[dict[str, Any] | None] = []
    for row in campaign.rows:
        match = None if fresh else next((r for r in prev_rows if _matches(r, row.spec)), None)
        stored.append(match)
    git = _git()
    meta = {"name": campaign.name, "config": str(config), "quick": campaign.quick,
            "description": campaign.description, "out": str(out), "command": command or _default_command(campaign, out, jobs),
            "git": git, "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "machine": _machine(), "jobs": jobs, "confidence": campaign.confidence,
            "roc_epsilon": campaign.roc_epsilon, "rows_planned": len(campaign.rows) + len(kept)}
    current: list[dict[str, Any] | None] = list(stored)  # what campaign.json holds for each planned row
    ran = [False] * len(campaign.rows)
    total = sum(r.spec.trials for r in campaign.rows)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"campaign {campaign.name}", unit="trial", file=log, dynamic_ncols=True)
    t_start = time.time()
    n = len(campaign.rows)

    def save(final: bool = False) -> dict[str, Any]:
        header = dict(meta)
        if not any(ran) and prev_meta is not None:
            header = {**prev_meta, "rows_planned": meta["rows_planned"]}  # nothing ran: the header stands
            header.pop("interrupted", None)
        else:
            header["wall_time_s"] = time.time() - t_start
            header["rows_run"] = sum(ran)
        rows = _merge(prev_rows, [c for c in current if c is not None], planned_targets)
        if any(ran) and prev_meta is not None:
            # rows kept from an earlier session name that session's commit and date
            old = prev_meta.get("git") or {}
            for rec in rows:
                if "commit" not in rec:
                    rec["commit"], rec["dirty"] = old.get("commit"), old.get("dirty")
                    rec.setdefault("date", prev_meta.get("date"))
        _save(out, header, rows)
        return {**header, "rows": rows, "ran_now": sum(ran)}

    try:
        for i, row in enumerate(campaign.rows, 1):
            s = row.spec
            t0 = time.time()
            line = f"[{i}/{n}] {row.label} ({s.trials} trials)"
            error = None
            before = bar.n if bar is not None else 0
            rec = stored[i - 1]
            stale = _stale_code(rec) if rec is not None else None
            if rec is not None and stale is None:
                # kept exactly as stored; only the config's prose (note, explain) follows the file
                rec = {**rec, "note": row.note, "explain": row.explain, "block": row.block}
                current[i - 1] = rec
                status = f"done before, kept ({rec.get('verdict')} ε_lb {short(num(rec.get('eps_lb')), 3)})"
                if bar is not None:
                    bar.update(before + s.trials - bar.n)
                msg = f"{line}: {status}"
                (bar.write(msg, file=log) if bar is not None else print(msg, file=log, flush=True))
                save()
                continue
            existing = None if fresh or stale else _existing(out, s.key(), s.trials, s.estimator)
            if existing is not None and _stale_code({"target": s.target, "attack": s.attack,
                                                     "canary": existing.canary.get("canary"),
                                                     "code": getattr(existing, "code", None)}):
                existing = None
            if existing is not None:
                # a finished result JSON the campaign file does not hold: its own audit time
                result = existing
                status = f"result file found, kept ({result.verdict} ε_lb {short(num(result.eps_lb), 3)})"
            else:
                try:
                    result = run_audit(s, out=out, jobs=jobs, progress=False,
                                       on_chunk=(lambda k: bar.update(k)) if bar is not None else None)
                    status = (f"re-run ({stale}): " if stale else "") + f"{result.verdict} ε_lb {short(num(result.eps_lb), 3)}"
                except (ValueError, RuntimeError) as err:  # one broken row must not sink the campaign
                    result, error, status = None, f"{type(err).__name__}: {err}", f"ERROR {err}"
                ran[i - 1] = True
            util = None
            if result is not None and row.utility:
                try:
                    util = utility(s, out)
                except (ValueError, RuntimeError) as err:
                    status += f" (utility failed: {err})"
            roc = roc_points(result, out / "audit.sqlite") if result is not None else None
            if roc is None and result is not None:  # no store: keep what campaign.json had
                roc = _previous_roc(prev_rows, s.key(), s.trials)
            wall = time.time() - t0 if existing is None else float(existing.wall_time_s or 0.0)
            current[i - 1] = _row_record(row, result, util=util, wall=wall, roc=roc, error=error, git=git)
            if bar is not None:
                bar.update(before + s.trials - bar.n)
            msg = f"{line}: {status}  [row {wall:.1f}s, elapsed {time.time() - t_start:.0f}s]"
            (bar.write(msg, file=log) if bar is not None else print(msg, file=log, flush=True))
            save()
    except KeyboardInterrupt:
        meta["interrupted"] = True
        save()
        write_campaign_report(out)
        raise
    finally:
        if bar is not None:
            bar.close()
    meta.pop("interrupted", None)
    doc = save(final=True)
    write_campaign_report(out)
    return doc


def _merge(prev: list[dict[str, Any]], planned: list[dict[str, Any]], targets: set[str]) -> list[dict[str, Any]]:
    """The rows campaign.json holds: the planned rows, with the stored rows of targets outside the
    plan (``--only``) kept where they were (the planned rows of a target take the place of its
    stored ones)."""
    if not any(r.get("target") not in targets for r in prev):
        return planned
    out: list[dict[str, Any]] = []
    placed: set[str] = set()
    for r in prev:
        t = r.get("target")
        if t not in targets:
            out.append(r)
        elif t not in placed:
            placed.add(t)
            out += [p for p in planned if p["target"] == t]
    return out + [p for p in planned if p["target"] not in placed]


def _previous_roc(rows: list[dict[str, Any]], key: str, trials: int) -> dict[str, list[float]] | None:
    for r in rows:
        if r.get("key") == key and r.get("trials") == trials and r.get("roc"):
            return r["roc"]
    return None


def _default_command(campaign: Campaign, out: Path, jobs: int) -> str:
    args = ["python -m audit campaign", str(campaign.path)]
    if campaign.quick:
        args.append("--quick")
    args += ["--out", str(out), "--jobs", str(jobs)]
    return " ".join(args)
