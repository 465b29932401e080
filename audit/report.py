"""Printing and plotting results: the table, markdown, and the score/ROC figure."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from audit import estimators


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


def table(result: dict[str, Any]) -> str:
    """A human-readable summary of one result."""
    ci = result.get("ci") or [None, None]
    canary = result.get("canary", {})
    rows = [
        ("target", f"{result['target']}  (bug: {result['config'].get('bug') or 'none'})"),
        ("dataset", result["dataset"]),
        ("canary", f"{canary.get('canary', '?')} {canary.get('edge', '')}  ({canary.get('chosen_by', '')})"),
        ("attack / level", f"{result['attack']} / {result['level']}"),
        ("trials", str(result["trials"])),
        ("claimed", f"ε = {_fmt(result['claimed_epsilon'], 4)}, δ = {result['claimed_delta']:.3g}  "
                    f"({result['accountant']})"),
        *([("queries / trial", f"{result['attack_queries_per_trial']} (each a fresh release where inference is "
                                "randomised)")] if result.get("attack_queries_per_trial") else []),
        ("ε lower bound", f"{_fmt(result['eps_lb'])} at {result['confidence']:.0%}, one-sided  "
                          f"({result['method']}); two-sided interval [{_fmt(ci[0])}, {_fmt(ci[1])}]"),
        ("max certifiable ε", _fmt(result["max_certifiable_eps"])),
        ("tightness", _fmt(result.get("tightness"))),
        ("AUC", _fmt(result["auc"])),
        ("TPR @ FPR 1%", _fmt(result["tpr_at_fpr"].get("0.01"))),
        ("verdict", result["verdict"]),
    ]
    if result.get("assumption"):
        rows.insert(8, ("assumes", result["assumption"]))
    if result.get("mu_lb") is not None:
        rows.insert(7, ("μ lower bound", _fmt(result["mu_lb"])))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k.ljust(width)}  {v}" for k, v in rows)


def load_result(run: str | Path) -> dict[str, Any]:
    """A result by JSON path, or by run id inside ``results/``."""
    path = Path(run)
    if not path.exists():
        candidate = Path("results") / f"{run}.json"
        if candidate.exists():
            path = candidate
        else:
            raise FileNotFoundError(f"no result {run!r} (give a result JSON path or a run id in results/)")
    return json.loads(path.read_text())


def scores_of(result: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    from audit.store import Store

    with Store(result["store"]) as store:
        rows = store.trials(result["key"], limit=result["trials"])
    bits = np.array([b for _, b, _ in rows])
    scores = np.array([s for _, _, s in rows])
    return scores[bits == 0], scores[bits == 1]


def plot(result: dict[str, Any], path: str | Path) -> Path:
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
    ax1.set_title(f"{result['target']} / {result['attack']}")

    fpr, tpr = estimators.roc(out_s, in_s)
    grid = np.logspace(-4, 0, 400)
    eps, delta = float(result["claimed_epsilon"]), result["claimed_delta"]
    if math.isfinite(eps):
        bound = claim_tpr_limit(grid, eps, delta)
        ax2.plot(grid, bound, "k--", label=f"(ε={eps:.3g}, δ={delta:.1g}) limit")
    mu = result["claim"].get("gdp_mu")
    if mu:
        ax2.plot(grid, norm.cdf(norm.ppf(grid) + mu), "k:", label=f"μ={mu:.3g} GDP curve")
    ax2.plot(fpr, tpr, "C3", label=f"attack (AUC {result['auc']:.3f})")
    roc_axes(ax2, grid)
    ax2.set_title(f"ε_lb = {_fmt(result['eps_lb'])} ({result['method']}), {result['verdict']}")
    ax2.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def markdown(result: dict[str, Any], image: str | None = None) -> str:
    lines = [f"# Audit {result.get('run_id', '')}", "", "```", table(result), "```", ""]
    if image:
        lines += [f"![scores and ROC]({image})", ""]
    lines += ["Claim internals:", "", "```json", json.dumps(result["claim"], indent=2), "```"]
    return "\n".join(lines)


def compare(results: list[dict[str, Any]]) -> str:
    head = "| run | target | bug | dataset | attack | trials | claimed ε | ε_lb | CI | method | verdict |"
    lines = [head, "|" + "---|" * 11]
    for r in results:
        ci = r.get("ci") or [None, None]
        lines.append(f"| {r.get('run_id', '')} | {r['target']} | {r['config'].get('bug') or '-'} | {r['dataset']} | "
                     f"{r['attack']} | {r['trials']} | {_fmt(r['claimed_epsilon'])} | {_fmt(r['eps_lb'])} | "
                     f"[{_fmt(ci[0])}, {_fmt(ci[1])}] | {r['method']} | {r['verdict']} |")
    return "\n".join(lines)
