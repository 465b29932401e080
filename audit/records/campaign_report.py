"""A campaign's report: its README and plots, from its ``campaign.json`` alone (no store, no rerun)."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from audit.stats.pair_epsilon import exact_cell, slack_line
from audit.records.power import record_power
from audit.records.result import number
from audit.records.run_report import claim_tpr_limit, roc_axes

REPO = Path(__file__).resolve().parents[2]


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


def _exact_cell(r: dict[str, Any]) -> str:
    """The row's exact ε of the played pair (:func:`audit.stats.pair_epsilon.exact_cell`)."""
    if r.get("verdict") == "ERROR":
        return "–"
    return exact_cell(r.get("pair_epsilon"), lambda x: short(number(x)))


def _slack_section(rows: list[dict[str, Any]]) -> list[str]:
    """One line per row: claim → exact ε of the pair → ε_lb, or why the middle number is missing."""
    lines = ["## Slack: claim → exact ε of the played pair → ε_lb", ""]
    finished = [r for r in rows if r.get("verdict") != "ERROR"]
    for r in finished:
        if r.get("pair_epsilon") is not None:
            line = slack_line(number(r["claimed_epsilon"]), r["pair_epsilon"], number(r["eps_lb"]))
            lines.append(f"* {row_tag(r)} ε={short(r['epsilon'])}: {line}")
    older = len([r for r in finished if r.get("pair_epsilon") is None])
    if older:
        lines.append(f"* {older} row{'s' if older > 1 else ''} played before the exact ε was recorded: not computed "
                     "(rerun the campaign to fill it in)")
    return lines + [""]


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
        "| target | dataset | level | attack | canary | claimed ε | exact ε (pair) | ε_lb [interval] | method | "
        "tightness | exact / claim | verdict | power | AUC | max cert. ε | trials | utility % | s |"
        + (" commit |" if many else ""),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if many else ""),
    ]
    for r in rows:
        tail = f" `{(_commit_of(r, doc) or 'unknown')[:7]}` |" if many else ""
        canary = r.get("canary") or "–"
        if r.get("verdict") == "ERROR":
            lines.append(f"| {_who_full(r)} | {r['dataset']} | – | {r['attack']} | {canary} | {short(r['epsilon'])} | "
                         f"| ERROR: {str(r.get('error'))[:80]} | | | | ERROR | | | | {r['trials']} | | "
                         f"{short(r.get('wall_time_s'), 0)} |" + tail)
            continue
        ci = r.get("ci") or [None, None]
        unit = (r.get("unit") or "").split(" ")[0]
        pw = record_power(r, conf) or {}
        lines.append(
            f"| {_who_full(r)} | {r['dataset']} | {unit}/{r['level']} | {r['attack']} | {canary} | "
            f"{short(number(r['claimed_epsilon']))} | {_exact_cell(r)} | "
            f"{short(number(r['eps_lb']))} [{short(number(ci[0]) if ci[0] is not None else None)}, "
            f"{short(number(ci[1]) if ci[1] is not None else None)}] | {r['method']} | {short(r.get('tightness'))} | "
            f"{short((r.get('slack') or {}).get('exact_over_claim'))} | {_verdict_cell(r)} | {pw.get('reading', '–')} | {short(r.get('auc'), 3)} | "
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
                  "worlds' difference. "
                  "exact ε (pair): the exact ε of the pair the row played, on the view its attack observes "
                  "(cf: closed form, the pair is μ-GDP; mc: Monte Carlo of the exact privacy loss, with its "
                  "interval; n/c: not computable, the reason under *Slack*; †: a caveat, named under *Slack*): "
                  "the best any test of that view could certify. tightness = ε_lb / claim; exact / claim is the accounting's slack on this "
                  "pair, ε_lb / exact the attack's and the estimator's.", ""]
    lines += _slack_section(rows)
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
            "_quick": "1" if doc.get("quick") else "", "_name": str(doc.get("name", ""))}


def write_campaign_report(out: str | Path, results_readme: str | Path | None = None) -> Path:
    """Plots and README.md from ``out/campaign.json`` alone (no store, no rerun). The repository's
    ``results/README.md`` (the full default campaign's report, paths into its folder) is written too when
    ``out`` is a folder of ``results/`` and the campaign is ``default`` run in full, or to ``results_readme``."""
    out = Path(out)
    texts = campaign_texts(out)
    readme = out / "README.md"
    readme.write_text(texts["README.md"])
    results = (REPO / "results").resolve()
    if results_readme is not None:
        Path(results_readme).write_text(texts["results/README.md"])
    elif out.resolve().parent == results and not texts["_quick"] and texts["_name"] == "default":
        (results / "README.md").write_text(texts["results/README.md"])
    return readme
