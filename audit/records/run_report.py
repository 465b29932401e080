"""One run's report: its table, markdown, score/ROC figure and power reading, read back from its
result JSON and store; the ROC helpers the campaign report draws with (:mod:`audit.records.campaign_report`)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from audit.stats import estimators
from audit.stats.pair_epsilon import exact_cell, slack_line
from audit.records.power import power, record_power
from audit.records.result import Result, number

_ROC_POINTS = 300


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, float):
        return f"{x:.{digits}f}" if math.isfinite(x) else ("inf" if x > 0 else "-inf")
    return str(x)


def claim_tpr_limit(fpr: np.ndarray, eps: float, delta: float) -> np.ndarray:
    """The largest TPR an (ε, δ)-DP mechanism allows at each FPR (both §0 inequalities)."""
    return np.minimum(1.0, np.minimum(math.exp(eps) * fpr + delta,
                                      1.0 - math.exp(-eps) * np.clip(1.0 - delta - fpr, 0, None)))


def roc_axes(ax: Any, grid: np.ndarray) -> None:
    """The ROC panel's frame: chance diagonal, log FPR from 1e-3, labels."""
    ax.plot(grid, grid, color="0.7", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlim(1e-3, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")


def result_power(result: Result, scores: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any] | None:
    """A result's ``power`` field, else :func:`audit.records.power.power` from its scores (given, or read
    from its store when that exists), else the reading from its AUC and trial count."""
    if getattr(result, "power", None):
        return result.power
    if result.verdict not in ("VIOLATION", "CONSISTENT"):
        return None
    if scores is None and result.store and Path(result.store).exists():
        try:
            scores = scores_of(result)
        except Exception:  # noqa: BLE001 - a store without this run: fall back to the AUC
            scores = None
    if scores is not None and scores[0].size and scores[1].size:
        return power(verdict=result.verdict, claimed_epsilon=number(result.claimed_epsilon),
                     max_certifiable_eps=number(result.max_certifiable_eps), scores_out=scores[0],
                     scores_in=scores[1], confidence=result.confidence).to_dict()
    return record_power({"verdict": result.verdict, "claimed_epsilon": result.claimed_epsilon,
                         "max_certifiable_eps": result.max_certifiable_eps, "auc": result.auc,
                         "trials": result.trials}, result.confidence)


def _sequential_line(seq: dict[str, Any]) -> str:
    if not seq.get("on"):
        return "off (the whole budget)" + (f": {seq['why_not']}" if seq.get("why_not") else "")
    j = seq.get("stopped_at_look")
    level = f"look {j}'s bound at its level 1 − {seq['look_betas'][j]:.2g}" if j is not None else "first look's bound"
    return (f"on: {seq['trials_used']} of {seq['budget']} trials, {seq['looks_evaluated']} of "
            f"{len(seq['looks_per_world'])} looks; stopped ({seq['stop']}): {seq['reason']}; ε_lb is the {level} "
            f"(the looks' levels sum to the confidence)")


def _one_run_line(one: dict[str, Any]) -> str:
    f = one["fdp_gaussian"]
    if f.get("refused"):
        return (f"Steinke et al. ε_lb {_fmt(one['steinke']['eps_lb'])} (assumption-free, the verdict's); f-DP "
                f"(Gaussian curve) analysis not run: {f['refused']}")
    mu = f"μ_lb {_fmt(f['mu_lb'])}" + (f" vs claimed μ {_fmt(f['claimed_mu'])}" if f.get("claimed_mu") else "")
    return (f"Steinke et al. ε_lb {_fmt(one['steinke']['eps_lb'])} (assumption-free, the verdict's); f-DP "
            f"(Gaussian curve) ε_lb {_fmt(f['eps_lb'])}, {mu}"
            + ("; it refutes the μ-GDP claim" if f.get("refutes_mu_gdp_claim") else ""))


def table(result: Result, scores: tuple[np.ndarray, np.ndarray] | None = None) -> str:
    """A human-readable summary of one result (with its power reading: from the result, else from
    ``scores`` or its store, else from its AUC)."""
    ci = result.ci or [None, None]
    canary = result.canary
    rows = [
        ("target", f"{result.target}  (bug: {result.config.get('bug') or 'none'})"),
        ("dataset", result.dataset),
        ("canary", f"{canary.get('canary', '?')} {canary.get('edge', '')}  ({canary.get('chosen_by', '')})"),
        ("attack / level", f"{result.attack} / {result.level}"),
        ("trials", str(result.trials)),
        ("claimed", f"ε = {_fmt(result.claimed_epsilon, 4)}, δ = {result.claimed_delta:.3g}  "
                    f"({result.accountant})"),
        *([("queries / trial", f"{result.attack_queries_per_trial} (each a fresh release where inference is "
                                "randomised)")] if result.attack_queries_per_trial else []),
        ("ε lower bound", f"{_fmt(result.eps_lb)} at {result.confidence:.0%}, one-sided  "
                          f"({result.method}); two-sided interval [{_fmt(ci[0])}, {_fmt(ci[1])}]"),
        ("max certifiable ε", _fmt(result.max_certifiable_eps)),
        ("tightness", _fmt(result.tightness)),
        ("slack", slack_line(number(result.claimed_epsilon), result.pair_epsilon, number(result.eps_lb))),
        *([("exact ε how", result.pair_epsilon["note"])] if (result.pair_epsilon or {}).get("note") else []),
        ("AUC", _fmt(result.auc)),
        ("TPR @ FPR 1%", _fmt(result.tpr_at_fpr.get("0.01"))),
        ("verdict", result.verdict),
        *([("why", result.declared["deterministic"])] if (result.declared or {}).get("deterministic") else []),
        *([("sequential", _sequential_line(result.sequential))] if result.sequential else []),
        *([("one-run bounds", _one_run_line(result.one_run))] if result.one_run else []),
        *([("canaries", result.canary["neighbourhoods"])] if result.canary.get("neighbourhoods") else []),
        *_relation_rows(result.canary.get("relation_charge")),
    ]
    pw = result_power(result, scores)
    if pw:
        rows.append(("power", f"{pw.get('reading')}: {pw.get('sentence')}"))
    if result.assumption:
        rows.insert(8, ("assumes", result.assumption))
    if result.mu_lb is not None:
        rows.insert(7, ("μ lower bound", _fmt(result.mu_lb)))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def _relation_rows(record: dict[str, Any] | None) -> list[tuple[str, str]]:
    """The pair's charge where it is not the given graph's, and the paper's reading where the pair
    leaves an assumption the paper states (:mod:`audit.play.relation`)."""
    if not record:
        return []
    rows = []
    if record.get("pins_from", "the given graph") != "the given graph" or record.get("per_world_epsilon"):
        rows.append(("pair charged", f"{record['pins_from']}: {record['pins']}"
                     + (f", claim per world {record['per_world_epsilon']}" if record.get("per_world_epsilon") else "")))
    reading = record.get("readings") or {}
    if record.get("assumptions_left"):
        rows.append(("standard reading", f"{reading.get('standard', '?')} (the verdict: every neighbouring pair)"))
        rows.append(("paper's reading", reading.get("paper", "?")))
    return rows


class NotAResult(ValueError):
    """A file given as a run that holds no run record."""


class CampaignFile(NotAResult):
    """A campaign's ``campaign.json`` given where a run's result JSON is wanted."""


def load_result(run: str | Path) -> Result:
    """A result by JSON path, or by run id inside ``results/``."""
    path = Path(run)
    if not path.exists():
        candidate = Path("results") / f"{run}.json"
        if candidate.exists():
            path = candidate
        else:
            raise FileNotFoundError(f"no result {run!r} (give a result JSON path or a run id in results/)")
    try:
        doc = json.loads(path.read_text())
    except UnicodeDecodeError as err:
        raise NotAResult(f"{path} is not a result JSON: not text ({err.reason})") from None
    except json.JSONDecodeError as err:
        raise NotAResult(f"{path} is not a result JSON: {err}") from None
    if isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "target" not in doc:
        raise CampaignFile(f"{path} is a campaign file; use `python -m audit campaign "
                           f"{doc.get('config', 'CONFIG')} --out {path.parent} --report-only`")
    if not isinstance(doc, dict) or not {"target", "key", "trials", "verdict"} <= set(doc):
        what = "a JSON " + type(doc).__name__ if not isinstance(doc, dict) else "no run record (no target/key/verdict)"
        raise NotAResult(f"{path} is not a result JSON: {what}")
    return Result.from_dict(doc)


def scores_of(result: Result, store_path: str | Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Both worlds' scores of a result, read from its store (or the one at `store_path`)."""
    from audit.records.store import Store

    with Store(result.store if store_path is None else store_path) as store:
        rows = store.trials(result.key, limit=result.trials)
    bits = np.array([b for _, b, _ in rows])
    scores = np.array([s for _, _, s in rows])
    return scores[bits == 0], scores[bits == 1]


def plot(result: Result, path: str | Path) -> Path:
    """Both worlds' score histograms, and the ROC curve against the region the claim allows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from scipy.stats import norm

    out_s, in_s = scores_of(result)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    bins = np.histogram_bin_edges(np.concatenate([out_s, in_s]), bins=40)
    ax1.hist(out_s, bins=bins, alpha=0.6, label="world 0 (canary out)")
    ax1.hist(in_s, bins=bins, alpha=0.6, label="world 1 (canary in)")
    ax1.set_xlabel("attack score")
    ax1.set_ylabel("trials")
    ax1.legend()
    ax1.set_title(f"{result.target} / {result.attack}")

    fpr, tpr = estimators.roc(out_s, in_s)
    grid = np.logspace(-4, 0, 400)
    eps, delta = float(result.claimed_epsilon), result.claimed_delta
    if math.isfinite(eps):
        bound = claim_tpr_limit(grid, eps, delta)
        ax2.plot(grid, bound, "k--", label=f"(ε={eps:.3g}, δ={delta:.1g}) limit")
    mu = result.claim.get("gdp_mu")
    if mu:
        ax2.plot(grid, norm.cdf(norm.ppf(grid) + mu), "k:", label=f"μ={mu:.3g} GDP curve")
    band = roc_band(out_s, in_s, result.confidence)
    if band is not None:
        ax2.fill(band[0], band[1], color="C3", alpha=0.18, lw=0,
                 label=f"{result.confidence:.0%} Clopper–Pearson band (TPR × FPR)")
    ax2.plot(fpr, tpr, "C3", label=f"attack (AUC {_fmt(result.auc)})")
    roc_axes(ax2, grid)
    ax2.set_title(f"ε_lb = {_fmt(result.eps_lb)} ({result.method}), {result.verdict}")
    ax2.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def roc_band(scores_out: np.ndarray, scores_in: np.ndarray, confidence: float = 0.95, points: int = 200,
             floor: float = 1e-4) -> tuple[np.ndarray, np.ndarray] | None:
    """A polygon (x, y) around the empirical ROC: at each threshold of a grid (score quantiles),
    the two-sided Clopper–Pearson intervals of FPR (world 0) and TPR (world 1) at ``confidence``;
    the band's upper edge joins (FPR low, TPR high), its lower edge (FPR high, TPR low). FPR is
    floored at ``floor`` for the log axis."""
    from scipy.stats import beta

    out = np.asarray(scores_out, dtype=float)
    inn = np.asarray(scores_in, dtype=float)
    n0, n1 = out.size, inn.size
    if not n0 or not n1:
        return None
    both = np.concatenate([out, inn])
    thr = np.unique(np.quantile(both, np.linspace(0, 1, points)))
    thr = np.concatenate([[-np.inf], thr, [np.inf]])
    fp = (out[None, :] >= thr[:, None]).sum(1)
    tp = (inn[None, :] >= thr[:, None]).sum(1)
    a = (1 - confidence) / 2

    def cp(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        lo = np.where(k > 0, beta.ppf(a, np.maximum(k, 1), n - k + 1), 0.0)
        hi = np.where(k < n, beta.ppf(1 - a, k + 1, np.maximum(n - k, 1)), 1.0)
        return np.nan_to_num(lo), np.nan_to_num(hi, nan=1.0)

    f_lo, f_hi = cp(fp, n0)
    t_lo, t_hi = cp(tp, n1)
    upper_x, upper_y = np.maximum(f_lo, floor), t_hi
    lower_x, lower_y = np.maximum(f_hi, floor), t_lo
    iu, il = np.argsort(upper_x, kind="stable"), np.argsort(lower_x, kind="stable")
    x = np.concatenate([upper_x[iu], lower_x[il][::-1]])
    y = np.concatenate([np.maximum.accumulate(upper_y[iu]), np.minimum.accumulate(lower_y[il][::-1])])
    return x, y


def markdown(result: Result, image: str | None = None) -> str:
    lines = [f"# Audit {result.run_id or ''}", "", "```", table(result), "```", ""]
    if image:
        lines += [f"![scores and ROC]({image})", ""]
    lines += ["Claim internals:", "", "```json", json.dumps(result.claim, indent=2), "```"]
    return "\n".join(lines)


def compare(results: list[Result]) -> str:
    head = ("| run | target | bug | dataset | attack | trials | claimed ε | exact ε (pair) | ε_lb | CI | method | "
            "verdict | power |")
    lines = [head, "|" + "---|" * 13]
    for r in results:
        ci = r.ci or [None, None]
        lines.append(f"| {r.run_id or ''} | {r.target} | {r.config.get('bug') or '-'} | {r.dataset} | "
                     f"{r.attack} | {r.trials} | {_fmt(r.claimed_epsilon)} | "
                     f"{exact_cell(r.pair_epsilon, lambda x: _fmt(number(x)))} | {_fmt(r.eps_lb)} | "
                     f"[{_fmt(ci[0])}, {_fmt(ci[1])}] | {r.method} | {r.verdict} | "
                     f"{(result_power(r) or {}).get('reading', '-')} |")
    return "\n".join(lines)


def roc_points(result: Result, store_path: Path) -> dict[str, list[float]] | None:
    """Down-sampled ROC points of a result, read from the store at `store_path` (kept in
    campaign.json, so a campaign's ROC plots are redrawn without the store)."""
    if not store_path.exists():
        return None
    out_s, in_s = scores_of(result, store_path)
    if not out_s.size + in_s.size:
        return None
    fpr, tpr = estimators.roc(out_s, in_s)
    if fpr.size > _ROC_POINTS:
        keep = np.unique(np.linspace(0, fpr.size - 1, _ROC_POINTS).round().astype(int))
        # keep the low-FPR corner exactly: it is where ε is read
        low = np.flatnonzero(fpr <= 0.05)
        keep = np.union1d(keep, low[-_ROC_POINTS:])
        fpr, tpr = fpr[keep], tpr[keep]
    return {"fpr": [round(float(x), 6) for x in fpr], "tpr": [round(float(x), 6) for x in tpr]}
