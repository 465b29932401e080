"""Printing and plotting results: one run's table, markdown and score/ROC figure, and a campaign's
README and plots (from its ``campaign.json`` alone). Every ROC curve is computed and drawn here."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from audit import estimators
from audit.power import power, record_power
from audit.result import Result, number

REPO = Path(__file__).resolve().parents[1]
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
    """A result's ``power`` field, else :func:`audit.power.power` from its scores (given, or read
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
    leaves an assumption the paper states (:mod:`audit.relation`)."""
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
    from audit.store import Store

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
    head = "| run | target | bug | dataset | attack | trials | claimed ε | ε_lb | CI | method | verdict | power |"
    lines = [head, "|" + "---|" * 12]
    for r in results:
        ci = r.ci or [None, None]
        lines.append(f"| {r.run_id or ''} | {r.target} | {r.config.get('bug') or '-'} | {r.dataset} | "
                     f"{r.attack} | {r.trials} | {_fmt(r.claimed_epsilon)} | {_fmt(r.eps_lb)} | "
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


# ---------------------------------------------------------------------------------------------
# a campaign's README and plots (from campaign.json alone)
# ---------------------------------------------------------------------------------------------
def short(x: Any, digits: int = 2) -> str:
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if isinstance(x, float) and not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)


def plot_epsilons(rows: list[dict[str, Any]], target: str, path: Path) -> Path | None:
    """ε lower bound (interval as error bars) vs claimed ε, one line per (attack, dataset, canary,
    parameters), with y = x and the trial budget's max certifiable ε dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["target"] == target and r.get("eps_lb") is not None
            and math.isfinite(number(r.get("claimed_epsilon")))]
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
        g = sorted((r for r in mine if variant(r) == key), key=lambda r: number(r["claimed_epsilon"]))
        label = f"{attack} / {dataset}" + (f" [bug {bug}]" if bug else "")
        if shared[key[:3]] > 1:
            label += f" / {canary}" + (f" ({params})" if params else "")
        x = [number(r["claimed_epsilon"]) for r in g]
        y = [number(r["eps_lb"]) for r in g]
        lo = [max(0.0, yy - number((r.get("ci") or [yy, yy])[0])) if math.isfinite(yy) else 0.0 for yy, r in zip(y, g)]
        hi = [max(0.0, number((r.get("ci") or [yy, yy])[1]) - yy) if math.isfinite(yy) else 0.0 for yy, r in zip(y, g)]
        hi = [h if math.isfinite(h) else 0.0 for h in hi]
        color = f"C{k % 10}"
        ax.errorbar(x, y, yerr=[lo, hi], marker="o", color=color, capsize=3, label=label)
        mc = [number(r["max_certifiable_eps"]) for r in g]
        ax.plot(x, mc, ls="--", color=color, lw=1, alpha=0.7)
        top = max(top, *[v for v in y + x if math.isfinite(v)])
    lim = [0, max(number(r["claimed_epsilon"]) for r in mine) * 1.1]
    # show the certifiable ceiling where it is near the claims, never let it flatten the bounds
    ceiling = [number(r["max_certifiable_eps"]) for r in mine if math.isfinite(number(r["max_certifiable_eps"]))]
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
    eps = sorted({number(r["epsilon"]) for r in rows})
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
    mine = [r for r in rows if r["target"] == target and r.get("roc")]
    eps = _roc_epsilon(mine, wanted)
    mine = [r for r in mine if number(r["epsilon"]) == eps]
    if not mine:
        return None
    # the legend (one entry a curve, each naming canary and parameters) sits below the panel
    fig, ax = plt.subplots(figsize=(6.4, 4.6 + 0.16 * (len(mine) + 1)))
    grid = np.logspace(-4, 0, 300)
    claimed = number(mine[0]["claimed_epsilon"])
    delta = float(mine[0]["claimed_delta"])
    if math.isfinite(claimed):
        bound = claim_tpr_limit(grid, claimed, delta)
        ax.plot(grid, bound, "k--", lw=1, label=f"claim limit (ε={claimed:.3g}, δ={delta:.1g})")
    for k, r in enumerate(sorted(mine, key=lambda r: (r["attack"], r["dataset"], r.get("bug") or "",
                                                      r.get("canary") or "", params_text(r)))):
        tags = ", ".join(t for t in (r.get("canary"), params_text(r)) if t)
        ax.plot(r["roc"]["fpr"], r["roc"]["tpr"], color=f"C{k % 10}",
                label=f"{r['attack']} / {r['dataset']}{' [bug ' + r['bug'] + ']' if r.get('bug') else ''}"
                      f"{' / ' + tags if tags else ''} (AUC {short(r.get('auc'), 3)}, {r['trials']} trials)")
    roc_axes(ax, grid)
    ax.set_title(f"{target} at target ε = {eps:g}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.14), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def params_text(r: dict[str, Any]) -> str:
    """The parameters a row's campaign block sets (its non-default ones), ``k=v k=v``."""
    return " ".join(f"{k}={v}" for k, v in sorted((r.get("params") or {}).items()))


def _who(r: dict[str, Any]) -> str:
    return r["target"] + (f" [bug {r['bug']}]" if r.get("bug") else "")


def _who_full(r: dict[str, Any]) -> str:
    """The target cell: target, bug and the parameters the block sets."""
    p = params_text(r)
    return _who(r) + (f" `{p}`" if p else "")


def row_tag(r: dict[str, Any]) -> str:
    """One row, told apart from its neighbours: target/attack/dataset/canary (parameters)."""
    p = params_text(r)
    return (f"{_who(r)}/{r['attack']}/{r['dataset']}" + (f"/{r['canary']}" if r.get("canary") else "")
            + (f" ({p})" if p else ""))


def _verdict_cell(r: dict[str, Any]) -> str:
    if r.get("verdict") == "ERROR":
        return "ERROR"
    if not math.isfinite(number(r.get("claimed_epsilon"))):
        return "n/a (no claim)"
    return f"**{r['verdict']}**" if r["verdict"] == "VIOLATION" else r["verdict"]


def _commit_of(r: dict[str, Any], doc: dict[str, Any]) -> str | None:
    """The commit a row's trials were played at: the row's own, else the campaign header's."""
    return r.get("commit") or (doc.get("git") or {}).get("commit")


def campaign_markdown(doc: dict[str, Any], images: dict[str, list[str]], discussion: str | None = None,
             folder: str = "") -> str:
    """The README. `discussion`: hand-written findings (the folder's ``discussion.md``), placed
    before the table; `folder`: a prefix for image paths (the copy in ``results/README.md``).
    A function of its arguments alone (no clock, no git): ``--report-only`` reproduces it."""
    rows = doc.get("rows", [])
    git = doc.get("git", {})
    m = doc.get("machine", {})
    conf = doc.get("confidence", 0.95)
    dirty = {True: " (working tree dirty: uncommitted changes)", False: " (clean)", None: ""}[git.get("dirty")]
    commits: dict[str, int] = {}
    for r in rows:
        c = _commit_of(r, doc) or "unknown"
        commits[c] = commits.get(c, 0) + 1
    many = len(commits) > 1
    lines = [f"# Audit campaign `{doc['name']}`" + (" (quick)" if doc.get("quick") else ""), ""]
    if doc.get("description"):
        lines += [doc["description"], ""]
    lines += [
        f"* command: `{doc.get('command', '')}`",
        f"* commit: `{git.get('commit') or 'unknown'}`{dirty}"
        + (" (the last session that ran rows); rows by commit: "
           + ", ".join(f"`{c[:10]}` × {k}" for c, k in commits.items()) + " (column *commit*)" if many else ""),
        f"* date: {doc.get('date', '')}; wall time {short(doc.get('wall_time_s'), 0)} s with --jobs {doc.get('jobs')}"
        + (f" ({doc['rows_run']} rows run in that session, the others kept from earlier ones)"
           if doc.get("rows_run") is not None and doc["rows_run"] < len(rows) else ""),
        f"* machine: {m.get('host', '?')}, {m.get('system', '')} {m.get('machine', '')}, {m.get('cpus', '?')} CPUs, "
        f"python {m.get('python', '?')}, torch {m.get('torch', '?')}",
        f"* config: `{doc.get('config', '')}`; {len(rows)} of {doc.get('rows_planned', len(rows))} rows finished"
        + ("; **interrupted** — rerun the command to resume" if doc.get("interrupted") else ""),
        f"* confidence {conf:.0%}; VIOLATION = the ε lower bound exceeds the claimed ε.",
        "* regenerate this file without rerunning: `python -m audit campaign "
        f"{doc.get('config', 'CONFIG')}{' --quick' if doc.get('quick') else ''}"
        f"{' --out ' + doc['out'] if doc.get('out') else ''} --report-only`",
        *([f"* per-row results, `campaign.json` and plots: [`{folder}`]({folder})"] if folder else []),
        "",
        *([discussion.strip(), ""] if discussion else []),
        "## Results", "",
        "| target | dataset | level | attack | canary | claimed ε | ε_lb [interval] | method | tightness | verdict | "
        "power | AUC | max cert. ε | trials | utility % | s |" + (" commit |" if many else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if many else ""),
    ]
    for r in rows:
        tail = f" `{(_commit_of(r, doc) or 'unknown')[:7]}` |" if many else ""
        canary = r.get("canary") or "–"
        if r.get("verdict") == "ERROR":
            lines.append(f"| {_who_full(r)} | {r['dataset']} | – | {r['attack']} | {canary} | {short(r['epsilon'])} | "
                         f"ERROR: {str(r.get('error'))[:80]} | | | ERROR | | | | {r['trials']} | | "
                         f"{short(r.get('wall_time_s'), 0)} |" + tail)
            continue
        ci = r.get("ci") or [None, None]
        unit = (r.get("unit") or "").split(" ")[0]
        pw = record_power(r, conf) or {}
        lines.append(
            f"| {_who_full(r)} | {r['dataset']} | {unit}/{r['level']} | {r['attack']} | {canary} | "
            f"{short(number(r['claimed_epsilon']))} | "
            f"{short(number(r['eps_lb']))} [{short(number(ci[0]) if ci[0] is not None else None)}, "
            f"{short(number(ci[1]) if ci[1] is not None else None)}] | {r['method']} | {short(r.get('tightness'))} | "
            f"{_verdict_cell(r)} | {pw.get('reading', '–')} | {short(r.get('auc'), 3)} | "
            f"{short(number(r['max_certifiable_eps']))} | {r['trials']} | "
            f"{short(r.get('utility'), 1)} | {short(r.get('wall_time_s'), 0)} |" + tail)
    lines += ["", "Utility: val-selected test accuracy (%) of one private fit with the row's parameters and ε "
                  "(seed 0), the audited configuration (see the notes where it is a fast one). "
                  "max cert. ε: the largest ε a perfect attack could certify with this many trials; a "
                  "CONSISTENT verdict with a claim above it says little. "
                  "power: how much the verdict knows — *budget-limited*: even a perfect attack could not have "
                  "certified the claim with this many trials; *no signal*: the attack's AUC interval "
                  f"({conf:.0%}, Hanley–McNeil, from the AUC and trials/2 a world where the row keeps no scores) "
                  "contains 0.5; *conclusive*: the budget could certify the claim and the attack separates the "
                  "worlds (or the bound exceeds the claim). "
                  "The target cell names the parameters the campaign block sets; canary: the neighbouring "
                  "worlds' difference.", ""]
    lines += ["## Violations", ""]
    viol = [r for r in rows if r.get("verdict") == "VIOLATION" and math.isfinite(number(r.get("claimed_epsilon")))]
    if not viol:
        lines += ["None: every finished row is CONSISTENT with its claim.", ""]
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in viol:  # one paragraph per (target, explanation, note), naming the rows it covers
        groups.setdefault((_who(r), r.get("explain") or "", r.get("note") or ""), []).append(r)
    for (who, explain, note), rs in groups.items():
        why = explain or "**UNEXPLAINED — investigate**"
        sub: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in rs:
            sub.setdefault((r["dataset"], r["attack"], r.get("canary") or "canary ?", params_text(r),
                            r["method"], r["trials"]), []).append(r)
        covered = "; ".join(
            f"{d}, {a}, {c}" + (f" ({p})" if p else "") + f" ({m}, {n} trials): claimed ε "
            + ", ".join(f"{short(number(r['claimed_epsilon']))} → ε_lb {short(number(r['eps_lb']))}" for r in sr)
            for (d, a, c, p, m, n), sr in sub.items())
        lines.append(f"* **{who}** ({len(rs)} row{'s' if len(rs) > 1 else ''}) — {covered}. {why}")
        if note:
            lines.append(f"  Note: {note}")
    errors = [r for r in rows if r.get("verdict") == "ERROR"]
    if errors:
        lines += ["", "## Rows that failed", ""]
        lines += [f"* {row_tag(r)} ε={short(r['epsilon'])}: {r.get('error')}" for r in errors]
    notes: dict[str, list[str]] = {}
    for r in rows:
        if r.get("note"):
            notes.setdefault(r["note"], [])
            tag = row_tag(r)
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
    lines += ["Left: ε lower bound (bars: its interval) against the claimed ε, one line per (attack, dataset, canary, "
              "parameters); the solid diagonal is the claim, dashed lines the budget's max certifiable ε. Right: ROC "
              "curves at one ε against the region the claim allows (dashed).", ""]
    return "\n".join(lines)


def campaign_texts(out: str | Path, *, plots: bool = True) -> dict[str, str]:
    """What :func:`write_campaign_report` writes from ``out/campaign.json``: {"README.md": …,
    "results/README.md": … (the copy with paths into the folder)}; ``plots``: draw the PNGs too."""
    out = Path(out)
    path = out / "campaign.json"
    if not path.exists():
        raise FileNotFoundError(f"no campaign.json in {out} (run the campaign first)")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a campaign file: {err}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise ValueError(f"{path} is not a campaign file (no 'rows')")
    rows = doc.get("rows", [])
    images: dict[str, list[str]] = {}
    for target in dict.fromkeys(r["target"] for r in rows):
        files = []
        for kind, fn in (("eps", lambda p: plot_epsilons(rows, target, p)),
                         ("roc", lambda p: plot_roc(rows, target, doc.get("roc_epsilon"), p))):
            name = f"{kind}-{_slug(target)}.png"
            if plots:
                p = fn(out / name)
                if p is not None:
                    files.append(p.name)
            elif (out / name).exists():
                files.append(name)
        if files:
            images[target] = files
    notes = out / "discussion.md"
    discussion = notes.read_text() if notes.exists() else None
    return {"README.md": campaign_markdown(doc, images, discussion),
            "results/README.md": campaign_markdown(doc, images, discussion, folder=f"{out.name}/"),
            "_quick": "1" if doc.get("quick") else ""}


def write_campaign_report(out: str | Path, results_readme: str | Path | None = None) -> Path:
    """Plots and README.md from ``out/campaign.json`` alone (no store, no rerun). The repository's
    ``results/README.md`` (the full campaign's report, paths into its folder) is written too when
    ``out`` is a folder of ``results/`` and not a --quick campaign, or to ``results_readme``."""
    out = Path(out)
    texts = campaign_texts(out)
    readme = out / "README.md"
    readme.write_text(texts["README.md"])
    results = (REPO / "results").resolve()
    if results_readme is not None:
        Path(results_readme).write_text(texts["results/README.md"])
    elif out.resolve().parent == results and not texts["_quick"]:
        (results / "README.md").write_text(texts["results/README.md"])
    return readme
