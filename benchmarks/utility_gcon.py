"""GCON's figures (spec gcon.md §6.3) tested on the datasets we have: ``utility.py --paper gcon``.

The paper prints no accuracy numbers, only plots, so each verifiable claim of Figs. 1-4 is
measured with our target and judged held / not held from the numbers:

* Fig. 1 (ε ∈ {0.5, 1, 2, 3, 4}, one-hop private inference): GCON beats every edge-DP competitor
  we have (DPGCN/LapGraph, GAP-EDP) and the MLP at every ε, and sits close to the non-private GCN
  on the homophilous sets. Cora (Planetoid) stands in for Cora-ML; CiteSeer is the paper's own
  public split; Actor uses seeded 60/20/20 splits as the paper's (5 random splits → our 3 seeds).
* Fig. 2 (ε = 4, one-hop inference, m1 ∈ {1, 2, 5, 10, ∞} per α): α = 0.2 falls quickly with m1,
  α = 0.4 slightly, α = 0.6/0.8 flat or rising.
* Fig. 3 (ε = 4, public test graph: full propagation at inference): accuracy rises up to m1 ≈ 10,
  flat beyond.
* Fig. 4 (m1 = 2, ε grid, α grid): α = 0.8 best on Cora-ML and CiteSeer; α = 0.2 poor, worst at ε ≤ 1.

Every GCON cell is the test accuracy of the grid point with the best *validation* accuracy (a
subset of the paper's Appendix-Q grid, see ``FIG1_GRID``/``ABLATION_GRID``); the encoder is trained
from the run's seed (``encoder_seed = seed``), so seeds vary encoder and noise as the paper's runs do.
``--setting fig1,fig2,fig3,fig4`` picks the parts (default all); each finished part is written to
the section at once.

``--setting ceiling`` (apart, its own section ``gcon-ceiling``) measures why two claims fail: the
noise-free GCON (B = 0) over a wider part of the Appendix-Q grid (``CEILING_GRID``), validation-
selected and at its best test point, beside the GCN and the MLP ('close to GCN' needs the noise-free
pipeline itself to get there); and Fig. 3's α × m1 table with the noise off, beside Theorem 1's noise
rate β at ε = 4 (the fall with m1 at ε = 4 is then the calibration's, not the propagation's).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

import utility as U
from graphs.datasets import load

EPSILONS = [0.5, 1.0, 2.0, 3.0, 4.0]
#: dataset → split (None: the dataset's public split; the paper's 20/class, 500, 1000 for Planetoid)
SPLITS: dict[str, tuple[float, float, float] | None] = {"cora": None, "citeseer": None, "actor": (0.6, 0.2, 0.2)}
HOMOPHILOUS = ("cora", "citeseer")
#: Fig. 1's validation grid, a subset of Appendix Q (d1 = 64 and the MSM loss fixed; Λ ∈ {0.2, 1};
#: α ≥ 0.4 as the paper advises; α_I ∈ {α, 0.1}). Actor: the paper's multi-scale {m_i} ⊆ {0, 1, 2, 5}.
FIG1_GRID: dict[str, list] = {"alpha": [0.4, 0.8], "steps": ["2", "10"], "inference_alpha": [None, 0.1],
                              "lam": [0.2, 1.0], "pseudo_labels": [True, False]}
FIG1_GRID_ACTOR: dict[str, list] = {**FIG1_GRID, "steps": ["2", "0,2", "0,1,2"]}
#: Figs. 2-4: α and m1 are the plotted axes; the rest is selected on validation
ABLATION_GRID: dict[str, list] = {"inference_alpha": [None, 0.1], "lam": [0.2, 1.0], "pseudo_labels": [True, False]}
#: Eq. 22 leaves ξ open; Λ ← max(Λ, 2·bound) (the spec's [REC], still Theorem 1's condition Λ > bound):
#: with ξ ≈ 0 a binding bound sends c_θ → ∞ and Λ' → 1e5, so Θ ≈ 1e-8 (spec §3.2)
FIXED: dict[str, Any] = {"lam_margin": 2.0}
ALPHAS = [0.2, 0.4, 0.6, 0.8]
STEPS = ["1", "2", "5", "10", "inf"]
PARTS = ("fig1", "fig2", "fig3", "fig4", "ceiling")
#: the noise-free ceiling's grid: Appendix Q's d1 ∈ {16, 64}, Λ ∈ {0.01, 0.2}, α ∈ {0.2, 0.4, 0.8},
#: m1 ∈ {2, 10}, n1 ∈ {n0, n} (the MSM loss: pseudo-Huber measured within 0.2 points), per inference
CEILING_GRID: dict[str, list] = {"encoder_hidden": [16, 64], "lam": [0.01, 0.2], "alpha": [0.2, 0.4, 0.8],
                                 "steps": ["2", "10"], "pseudo_labels": [True, False]}


# ---------------------------------------------------------------------------------------------
# measuring
# ---------------------------------------------------------------------------------------------
class _Graphs:
    """Per (dataset, seed): the graph and the GCON encoder cache shared by every grid point."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[str, int], Any] = {}
        self.caches: dict[str, dict] = {}

    def get(self, dataset: str, seed: int) -> Any:
        if (dataset, seed) not in self._graphs:
            self._graphs[(dataset, seed)] = load(dataset, seed=seed, split=SPLITS.get(dataset))
            self.caches.setdefault(dataset, {"_cache": {}})
        return self._graphs[(dataset, seed)]


def gcon_cell(graphs: _Graphs, dataset: str, eps: float, seeds: int, params: dict[str, Any],
              grid: dict[str, list], bug: str | None = None) -> list[dict[str, Any]]:
    """One validation-selected GCON run per seed."""
    return [U.select_on_validation("gcon", graphs.get(dataset, s), eps, s, {**FIXED, **params, "encoder_seed": s}, grid,
                                   bug=bug, caches=graphs.caches[dataset]) for s in range(seeds)]


def baseline_cell(graphs: _Graphs, target: str, dataset: str, eps: float, seeds: int,
                  params: dict[str, Any]) -> list[dict[str, float]]:
    return [U.fit_accuracy(target, graphs.get(dataset, s), eps, s, params)[0] for s in range(seeds)]


def _mean(runs: list[dict]) -> float:
    return 100 * float(np.mean([r["test"] for r in runs]))


def _cell(runs: list[dict]) -> str:
    tests = [100 * r["test"] for r in runs]
    return f"{np.mean(tests):.1f} ± {np.std(tests):.1f}"


def _eps(e: float) -> str:
    return f"{e:g}"


# ---------------------------------------------------------------------------------------------
# Fig. 1
# ---------------------------------------------------------------------------------------------
def figure1(graphs: _Graphs, datasets: list[str], epsilons: list[float], seeds: int, log: Callable) -> str:
    lines = ["### Fig. 1: GCON vs the edge-DP competitors, the MLP and the non-private GCN", "",
             "Test accuracy (%), mean ± sd over seeds. GCON: validation-selected over `FIG1_GRID` "
             "(`FIG1_GRID_ACTOR` on Actor), one-hop private inference (Algorithm 4). LapGraph is the paper's "
             "DPGCN baseline, GAP its GAP-EDP (our targets at their defaults); ε = ∞ is GCON with B = 0 "
             "(`--bug no-noise`), grid-selected on validation.", "",
             "| dataset | ε | GCON | LapGraph (DPGCN) | GAP-EDP | best competitor | GCON − best |",
             "|---|---|---|---|---|---|---|"]
    verdicts: list[str] = []
    for ds in datasets:
        start = time.time()
        grid = FIG1_GRID_ACTOR if ds == "actor" else FIG1_GRID
        mlp = [U.mlp_accuracy(graphs.get(ds, s), s) for s in range(seeds)]
        gcn = baseline_cell(graphs, "gcn", ds, 1.0, seeds, {})
        ceiling = gcon_cell(graphs, ds, 1.0, seeds, {}, grid, bug="no-noise")
        wins, margins = 0, []
        gcon_by_eps = {}
        for eps in epsilons:
            gcon = gcon_cell(graphs, ds, eps, seeds, {}, grid)
            lap = baseline_cell(graphs, "lapgraph", ds, eps, seeds, {})
            gap = baseline_cell(graphs, "gap", ds, eps, seeds, {"unit": "edge"})
            best_name, best = max((("LapGraph", _mean(lap)), ("GAP-EDP", _mean(gap)), ("MLP", _mean(mlp))),
                                  key=lambda t: t[1])
            margin = _mean(gcon) - best
            wins += margin > 0
            margins.append(margin)
            gcon_by_eps[eps] = gcon
            lines.append(f"| {ds} | {_eps(eps)} | {_cell(gcon)} | {_cell(lap)} | {_cell(gap)} | "
                         f"{best_name} {best:.1f} | {margin:+.1f} |")
            log(f"fig1 {ds} ε={eps:g}: GCON {_cell(gcon)} LapGraph {_cell(lap)} GAP {_cell(gap)} "
                f"points {[r['point'] for r in gcon]}")
        lines.append(f"| {ds} | MLP (floor) | {_cell(mlp)} | | | | |")
        lines.append(f"| {ds} | GCON ∞ (noise off) | {_cell(ceiling)} | | | | |")
        lines.append(f"| {ds} | GCN (non-DP) | {_cell(gcn)} | | | | |")
        top = gcon_by_eps[max(epsilons)]
        gap_to_gcn = _mean(gcn) - _mean(top)
        verdicts.append(
            f"* **{ds}**: GCON beats the best competitor (LapGraph, GAP-EDP, MLP) at {wins}/{len(epsilons)} ε "
            f"(margins {', '.join(f'{m:+.1f}' for m in margins)}) → *{'held' if wins == len(epsilons) else 'not held'}*. "
            f"GCON at ε = {_eps(max(epsilons))} is {abs(gap_to_gcn):.1f} points {'below' if gap_to_gcn >= 0 else 'above'} "
            f"the non-private GCN "
            f"({_mean(top):.1f} vs {_mean(gcn):.1f}); its own noise-off ceiling is {_mean(ceiling):.1f}"
            + (f" → 'close to GCN' (≤ 5 points) *{'held' if gap_to_gcn <= 5 else 'not held'}*." if ds in HOMOPHILOUS
               else "."))
        log(f"fig1 {ds}: MLP {_cell(mlp)} GCN {_cell(gcn)} ceiling {_cell(ceiling)} ({time.time() - start:.0f}s)")
    return "\n".join(lines + ["", "Claims (Fig. 1):", ""] + verdicts)


# ---------------------------------------------------------------------------------------------
# Figs. 2-4
# ---------------------------------------------------------------------------------------------
def _sweep(graphs: _Graphs, ds: str, seeds: int, configs: list[tuple[Any, Any, float, dict[str, Any]]],
           grid: dict[str, list], log: Callable, tag: str) -> dict[tuple[Any, Any], list[dict]]:
    out = {}
    for row, col, eps, params in configs:
        out[(row, col)] = gcon_cell(graphs, ds, eps, seeds, params, grid)
        log(f"{tag} {ds} {row} {col}: {_cell(out[(row, col)])}")
    return out


def _table(title: str, rows: list, cols: list, cells: dict, row_name: str, col_name: str) -> list[str]:
    lines = [title, "", f"| {row_name} \\ {col_name} | " + " | ".join(
        _eps(c) if isinstance(c, float) else str(c) for c in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for r in rows:
        lines.append(f"| {r} | " + " | ".join(_cell(cells[(r, c)]) for c in cols) + " |")
    return lines


def figures_2_3(graphs: _Graphs, ds: str, seeds: int, inference: str, log: Callable) -> tuple[list[str], str]:
    grid = ABLATION_GRID if inference == "one-hop" else {k: v for k, v in ABLATION_GRID.items() if k != "inference_alpha"}
    configs = [(a, m, 4.0, {"alpha": a, "steps": m, "inference": inference}) for a in ALPHAS for m in STEPS]
    cells = _sweep(graphs, ds, seeds, configs, grid, log, "fig2" if inference == "one-hop" else "fig3")
    fig = "Fig. 2 (private test graph, one-hop inference)" if inference == "one-hop" else \
        "Fig. 3 (public test graph, full propagation at inference)"
    lines = _table(f"#### {fig}, {ds}, ε = 4", ALPHAS, STEPS, cells, "α", "m1")
    acc = {k: _mean(v) for k, v in cells.items()}
    if inference == "one-hop":
        drops = {a: acc[(a, "1")] - min(acc[(a, m)] for m in STEPS[1:]) for a in ALPHAS}
        rise = {a: acc[(a, "10")] - acc[(a, "1")] for a in (0.6, 0.8)}
        held = drops[0.2] > drops[0.4] and drops[0.2] >= 5 and all(r >= -1.0 for r in rise.values())
        verdict = (f"* **{ds}, Fig. 2**: largest drop from m1 = 1 to the worst m1 > 1: "
                   + ", ".join(f"α = {a:g}: {drops[a]:.1f}" for a in ALPHAS)
                   + "; m1 = 10 − m1 = 1 for α = 0.6/0.8: " + ", ".join(f"{rise[a]:+.1f}" for a in rise)
                   + f" → 'α = 0.2 falls fast (≥ 5 points, more than α = 0.4), α ≥ 0.6 flat or rising (≥ −1)' "
                     f"*{'held' if held else 'not held'}*.")
    else:
        rises = {a: acc[(a, "10")] - acc[(a, "1")] for a in ALPHAS}
        flats = {a: acc[(a, "inf")] - acc[(a, "10")] for a in ALPHAS}
        held = all(rises[a] > 0 for a in (0.4, 0.6, 0.8)) and all(abs(flats[a]) <= 2 for a in (0.4, 0.6, 0.8))
        verdict = (f"* **{ds}, Fig. 3**: m1 = 10 − m1 = 1: " + ", ".join(f"α = {a:g}: {rises[a]:+.1f}" for a in ALPHAS)
                   + "; m1 = ∞ − m1 = 10: " + ", ".join(f"{flats[a]:+.1f}" for a in ALPHAS)
                   + f" → 'rises up to m1 ≈ 10, flat beyond (|Δ| ≤ 2) for α ≥ 0.4' *{'held' if held else 'not held'}*.")
    return lines, verdict


def figure4(graphs: _Graphs, ds: str, seeds: int, epsilons: list[float], log: Callable) -> tuple[list[str], str]:
    configs = [(a, e, e, {"alpha": a, "steps": "2"}) for a in ALPHAS for e in epsilons]
    cells = _sweep(graphs, ds, seeds, configs, ABLATION_GRID, log, "fig4")
    lines = _table(f"#### Fig. 4 (m1 = 2, one-hop inference), {ds}", ALPHAS, epsilons, cells, "α", "ε")
    acc = {k: _mean(v) for k, v in cells.items()}
    best = {e: max(ALPHAS, key=lambda a: acc[(a, e)]) for e in epsilons}
    worst_small = [e for e in epsilons if e <= 1 and min(ALPHAS, key=lambda a: acc[(a, e)]) == 0.2]
    small = [e for e in epsilons if e <= 1]
    best08 = sum(best[e] == 0.8 for e in epsilons)
    verdict = (f"* **{ds}, Fig. 4**: best α per ε: " + ", ".join(f"ε = {_eps(e)}: {best[e]:g}" for e in epsilons)
               + f" → 'α = 0.8 best' *{'held' if best08 == len(epsilons) else f'held at {best08}/{len(epsilons)} ε'}*; "
               f"α = 0.2 worst at {len(worst_small)}/{len(small)} of ε ≤ 1 → "
               f"*{'held' if small and len(worst_small) == len(small) else 'not held'}*.")
    return lines, verdict


# ---------------------------------------------------------------------------------------------
# the noise-free ceiling (why 'close to GCN' and Fig. 3 fail)
# ---------------------------------------------------------------------------------------------
FIG3_READING = ("Fig. 3's claimed shape (a rise up to m1 ≈ 10, flat beyond) is what the noise-free target "
                "shows for α ≤ 0.4 above; at ε = 4 Theorem 1's β falls as m1 grows (more noise for a longer "
                "propagation), most for α = 0.2, and the private cells of the Fig. 3 tables in the GCON "
                "section fall with it: the paper's rise at ε = 4 would need less noise than its own theorem "
                "charges.")


def _top(runs: list[dict]) -> str:
    tops = [100 * r["top"] for r in runs]
    return f"{np.mean(tops):.1f} ± {np.std(tops):.1f}"


def _beta(graph: Any, params: dict[str, Any]) -> float:
    """Theorem 1's noise rate β at ε = 4 (B's columns have density ∝ exp(−β‖b‖)), other settings at
    their defaults (Λ = 0.2, n1 = n)."""
    from targets import base

    return float(base.build("gcon", epsilon=4.0, **{**FIXED, **params}).claim(graph).to_dict()["details"]["beta"])


def ceiling(graphs: _Graphs, datasets: list[str], seeds: int, log: Callable) -> str:
    lines = ["# GCON's noise-free ceiling: why 'close to GCN' and Fig. 3 are not held", "",
             f"Generated by `python benchmarks/utility.py --paper gcon --setting ceiling` ({seeds} seeds). GCON with "
             "the noise off (B = 0, `--bug no-noise`; everything else as released) over `CEILING_GRID` "
             f"({int(np.prod([len(v) for v in CEILING_GRID.values()]))} points of Appendix Q: "
             + ", ".join(f"{k} ∈ {{{', '.join(map(str, v))}}}" for k, v in CEILING_GRID.items())
             + "). *Selected*: the test accuracy of the best-validation point; *best test*: the grid's highest "
             "test accuracy (an upper bound on any selection, shown only as a bound).", "",
             "| dataset | inference | noise-free GCON, selected | noise-free GCON, best test | GCN (non-DP) | MLP | GCN − best test |",
             "|---|---|---|---|---|---|---|"]
    verdicts = []
    for ds in datasets:
        gcn = baseline_cell(graphs, "gcn", ds, 1.0, seeds, {})
        mlp = [U.mlp_accuracy(graphs.get(ds, s), s) for s in range(seeds)]
        for inference in ("one-hop", "full"):
            free = gcon_cell(graphs, ds, 1.0, seeds, {"inference": inference}, CEILING_GRID, bug="no-noise")
            gap = _mean(gcn) - float(np.mean([100 * r["top"] for r in free]))
            lines.append(f"| {ds} | {inference} | {_cell(free)} | {_top(free)} | {_cell(gcn)} | {_cell(mlp)} | {gap:+.1f} |")
            setting = "Fig. 1's one-hop private inference" if inference == "one-hop" else "full propagation (public test graph)"
            verdicts.append(
                f"* **{ds}, {setting}**: no point of the grid comes within {gap:.1f} points of the GCN even with the "
                "noise off, so no ε can bring GCON 'close to GCN' (≤ 5 points) here: the loss is in the noise-free "
                "pipeline (an encoder trained edge-free on the labelled nodes alone, then a fixed propagation of "
                "its output and a linear Θ), not in the privacy."
                if gap > 5 else
                f"* **{ds}, {setting}**: the noise-free grid comes within {gap:.1f} points of the GCN, so the "
                "shortfall of the private cells is the noise the accountant calibrates (and the validation choice).")
            log(f"ceiling {ds} {inference}: selected {_cell(free)}, best test {_top(free)}, GCN {_cell(gcn)}")
    lines += ["", *verdicts, ""]
    grid = {k: v for k, v in ABLATION_GRID.items() if k != "inference_alpha"}
    for ds in datasets:
        configs = [(a, m, 4.0, {"alpha": a, "steps": m, "inference": "full"}) for a in ALPHAS for m in STEPS]
        cells = {}
        for row, col, _, params in configs:
            cells[(row, col)] = gcon_cell(graphs, ds, 4.0, seeds, params, grid, bug="no-noise")
        lines += _table(f"#### Fig. 3 with the noise off (public test graph, full propagation), {ds}",
                        ALPHAS, STEPS, cells, "α", "m1")
        graph = graphs.get(ds, 0)
        betas = {(a, m): _beta(graph, {"alpha": a, "steps": m}) for a in ALPHAS for m in STEPS}
        lines += ["", f"Theorem 1's noise rate β at ε = 4 ({ds}; B_j has density ∝ exp(−β‖b‖): smaller β, more noise; "
                  "at the defaults Λ = 0.2 and n1 = n, while the cells choose Λ and n1 on validation):", "",
                  "| α \\ m1 | " + " | ".join(STEPS) + " |", "|---|" + "---|" * len(STEPS)]
        lines += [f"| {a} | " + " | ".join(f"{betas[(a, m)]:.3g}" for m in STEPS) + " |" for a in ALPHAS]
        acc = {k: _mean(v) for k, v in cells.items()}
        rises = {a: acc[(a, "10")] - acc[(a, "1")] for a in ALPHAS}
        lines += ["", f"* **{ds}**: noise off, m1 = 10 − m1 = 1: " + ", ".join(f"α = {a:g}: {rises[a]:+.1f}" for a in ALPHAS)
                  + "; β from m1 = 1 to m1 = 10: " + ", ".join(
                      f"α = {a:g}: {betas[(a, '1')]:.3g} → {betas[(a, '10')]:.3g}" for a in ALPHAS) + ".", ""]
        log(f"ceiling fig3 {ds} done")
    lines.append(FIG3_READING)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
def run(args: Any, split: Any) -> str:
    """Entry point of ``utility.py --paper gcon`` (`split` is ignored: each dataset has the paper's)."""
    datasets = args.datasets or list(SPLITS)
    epsilons = args.epsilons or EPSILONS
    seeds = args.seeds
    parts = args.setting.split(",") if args.setting else list(PARTS)
    unknown = set(parts) - set(PARTS)
    if unknown:
        raise SystemExit(f"--setting for --paper gcon picks parts among {','.join(PARTS)}; got {sorted(unknown)}")
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "utility.md"
    header = [
        "# GCON utility beside the paper's figures (edge-DP)", "",
        f"Generated by `python benchmarks/utility.py --paper gcon` ({seeds} seeds; parts {','.join(parts)}). "
        "The paper (spec gcon.md §6.3) prints accuracy only as plots, so each row below tests one of its "
        "figures' qualitative claims with our target (exact Newton minimiser, the accountant untouched). "
        "Datasets: Cora (Planetoid public split, for the paper's Cora-ML), CiteSeer (public split, as the "
        "paper), Actor (seeded 60/20/20, as the paper); PubMed and Cora-ML are not in our dataset store. "
        "δ = 1/|E| (directed count). GCON cells are validation-selected (never test); every GCON fit uses "
        "`lam_margin = 2` (Eq. 22's ξ is unstated; Λ ← max(Λ, 2·bound), the spec's [REC]).", ""]
    sections: list[str] = []
    verdicts: list[str] = []
    graphs = _Graphs()

    def flush(note: str = "") -> str:
        text = "\n".join(header + sections + (["### Claims (Figs. 2-4)", ""] + verdicts if verdicts else [])
                         + ([note] if note else []))
        U.write_section(out, "gcon", text)
        return text

    log = print
    if "ceiling" in parts:
        text = ceiling(graphs, [d for d in datasets if d in HOMOPHILOUS], seeds, log)
        U.write_section(out, "gcon-ceiling", text)
        parts = [p for p in parts if p != "ceiling"]
        if not parts:
            return text + "\n"
    if "fig1" in parts:
        sections += [figure1(graphs, datasets, epsilons, seeds, log), ""]
        flush("\n*(partial: later parts running)*")
    for ds in (d for d in datasets if d in HOMOPHILOUS):
        for part, inference in (("fig2", "one-hop"), ("fig3", "full")):
            if part in parts:
                lines, verdict = figures_2_3(graphs, ds, seeds, inference, log)
                sections += lines + [""]
                verdicts.append(verdict)
                flush("\n*(partial: later parts running)*")
        if "fig4" in parts:
            lines, verdict = figure4(graphs, ds, seeds, epsilons, log)
            sections += lines + [""]
            verdicts.append(verdict)
            flush("\n*(partial: later parts running)*")
    return flush() + "\n"
