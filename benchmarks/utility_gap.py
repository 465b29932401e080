"""GAP (EDP) beside CARIBOU's GAP rows: ``utility.py --paper gap``.

GAP's own results table (spec gap.md §6) is on Facebook, Reddit and ogbn-products, none of which we
have; CARIBOU re-ran GAP under EDP on the chains, Cora, Photo and Computers (spec caribou.md §6.3,
Table 9: mean over 3 runs of the best configuration; Table 3: the top run), which we reproduce here.
DPDGC's GAP rows (edge ε = 1, node ε = 16) are in the DPDGC section (``--paper dpdgc``).

CARIBOU's protocol: split 10/10/20 stratified per seed (the chains: their own sizes), isolated nodes
dropped, GAP's code defaults (h = 16, lr 0.01, 100 + 100 epochs, batch-norm, dropout 0), and the
hops K chosen on **validation** accuracy per (dataset, ε, seed) among the grid below (GAP tunes K in
{1..5}; the chains need K near the chain length). Each fit is cached in ``results/utility_gap.json``.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

import utility as U

SPLIT = (0.1, 0.1, 0.2)
DATASETS = ["chain-s", "chain-m", "chain-l", "chain-x", "cora", "photo", "computers"]
EPSILONS = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]
_COLS = ["chain-s", "chain-m", "chain-l", "chain-x", "computers", "cora", "photo"]
# CARIBOU Table 9, GAP rows (ε = 1, 2, 4, 8, 16, 32, ∞); Table 3's GAP rows ("top") beside them
GAP_TABLE9: dict[str, list[float]] = {
    "chain-s": [65.6, 65.6, 62.5, 59.4, 59.4, 59.4, 97.9], "chain-m": [67.5, 67.5, 60.0, 60.0, 70.0, 65.0, 100.0],
    "chain-l": [61.7] * 6 + [93.3], "chain-x": [55.5, 55.0, 55.5, 55.5, 54.3, 54.3, 100.0],
    "computers": [87.0, 88.0, 88.8, 89.6, 90.0, 90.2, 90.9], "cora": [76.0, 76.8, 76.9, 78.2, 80.3, 82.2, 85.1],
    "photo": [92.8, 93.3, 93.8, 94.6, 94.6, 94.6, 95.2],
}
GAP_TABLE3: dict[str, list[float]] = {
    "chain-s": [65.6, 65.6, 65.6, 65.6, 62.5, 59.4, 100.0], "chain-m": [67.5, 67.5, 67.5, 60.0, 70.0, 65.0, 100.0],
    "chain-l": [61.7] * 6 + [100.0], "chain-x": [67.0, 68.0, 67.0, 67.0, 68.0, 68.0, 100.0],
    "computers": [87.2, 88.3, 87.2, 90.1, 90.1, 90.6, 91.0], "cora": [77.1, 77.5, 77.1, 79.0, 81.7, 82.5, 85.2],
    "photo": [93.0, 93.4, 93.0, 94.6, 94.6, 94.8, 95.5],
}
GRID_STANDARD = {"hops": [1, 2, 3]}
# chains: a short K (private: the noise of K hops drowns the one informative node, the head) and
# one near the chain length (noise off: every node needs ~its position in hops)
GRID_CHAINS = {"chain-s": [1, 2, 7], "chain-m": [1, 2, 9], "chain-l": [1, 2, 14], "chain-x": [1, 2, 14]}

#: measured explanations of the cells more than 5 points from the paper (see results/utility.md)
NOTES = """
**Why cells differ by more than 5 points (measured).**

* **Cora, Photo, Computers at the stated 10/10/20 split: the split.** CARIBOU states 10 % train / 20 % test
  (spec caribou.md §6.1), but its numbers are those of GAP's loader split, 75/10/15 (`RandomNodeSplit(num_val=0.1,
  num_test=0.15)`, GAP spec §5, which CARIBOU says it reuses). Measured: the **MLP** row, which involves no
  privacy and no graph, scores 61.7 / 86.5 / 78.0 (Cora / Photo / Computers) at 10/10/20 against the paper's
  72.9 / 91.1 / 83.9, and 76.9 / 91.6 / 84.9 at 75/10/15; DPDGC's Table 2 (75/10/15) prints 76.5 / 91.4 / 85.3
  for its MLP. Rerun at 75/10/15 with nothing else changed, **every GAP cell on Cora, Photo and Computers is
  within 3.2 points of Table 9** (rows `0.75,0.1,0.15` above; 3 seeds), the noise-off ceiling
  included. This bears on the CARIBOU section too: its MLP row is the same measurement. The 10/10/20 rows
  are kept: they are what the paper's text asks for, and they fall short by the same amount as the MLP floor.
* **Cora ∞ at 10/10/20** (75.7 vs 85.1): the same split effect (83.3 at 75/10/15); GAP's code defaults (h = 16,
  lr 0.01) are used here; with DPDGC's GAP settings (h = 64, lr 1e-3, dropout 0.5) GAP-∞ on Cora at 75/10/15
  scores 87.1 (DPDGC section), so CARIBOU's unstated grid (h ∈ {16, 64}) spans the paper's 85.1.
* **Chains.** Private GAP sits at chance (41-54) on every chain while the paper prints 54-70, flat in ε
  (Chain-L: 61.7 at every ε). The test sets are 32-100 nodes (one Chain-S node = 3.1 points; a binomial sd at
  p = 0.6 is 8.7 points on Chain-S, 4.9 on Chain-X) and the validation sets 8-25 nodes, so the val-selected K is
  itself noisy: `top` (test-selected over K × 3 seeds, Table 3's rule) reaches 52-75. Only the chain's head
  carries features, and K noisy hops (σ ∝ √K) drown it, for a short K (1, 2) as for one near the chain length.
  With the noise off the val-selected K gives 81-100 (`top` 85-100) against the paper's 93-100, the paper's
  being its best configuration. The paper's MLP row (40.6 on Chain-S, below chance for two balanced classes) also
  shows its chain splits differ from ours (stratified, seeded per run: 53.1).
"""


def grid_for(dataset: str, override: dict[str, list]) -> dict[str, list]:
    grid = {"hops": GRID_CHAINS[dataset]} if dataset in GRID_CHAINS else dict(GRID_STANDARD)
    return {**grid, **override}


def _paper(table: dict[str, list[float]], dataset: str, key: Any) -> float:
    if key == "mlp":
        return U.CARIBOU_TABLE9.get(dataset, {}).get("mlp", math.nan)
    index = 6 if key == "inf" else EPSILONS.index(key)
    return table.get(dataset, [math.nan] * 7)[index]


def run(args: Any, split: tuple[float, float, float] | None) -> str:
    split = split or SPLIT
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "utility.md"
    cache_file = out.with_name("utility_gap.json")
    cache: dict[str, Any] = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    override = {k: [U._literal(v) for v in vals.split(",")] for k, vals in (a.split("=", 1) for g in args.grid for a in g)}
    keys: list[Any] = ["mlp", *(args.epsilons or EPSILONS), "inf"]
    if args.setting:
        keys = [k if k in ("mlp", "inf") else float(k) for k in args.setting.split(",")]
    notices: list[str] = []
    for dataset in args.datasets or DATASETS:
        grid = grid_for(dataset, override)
        for seed in range(args.seeds):
            graph = None
            for key in keys:
                name = f"{dataset}|{key}|{seed}" + ("" if split == SPLIT or dataset in GRID_CHAINS else f"|{_label(split)}")
                code = U.code_stamp(None if key == "mlp" else "gap", __file__)
                if cache.get(name, {}).get("code") == code:
                    continue
                if graph is None:
                    graph = U.prepare_graph("gap", dataset, seed, split, True, notices)
                if key == "mlp":
                    start = time.time()
                    acc = U.mlp_accuracy(graph, seed)
                    result = {"test": acc["test"], "val": acc["val"], "top": acc["test"], "point": None,
                              "secs": time.time() - start}
                else:
                    result = U.select_on_validation("gap", graph, 1.0 if key == "inf" else key, seed, {}, grid,
                                                    bug="no-noise" if key == "inf" else None)
                cache[name] = {**result, "code": code}
                if cache_file.exists():  # keep what runs side by side wrote meanwhile
                    cache.update({k: v for k, v in json.loads(cache_file.read_text()).items() if k not in cache})
                cache_file.write_text(json.dumps(cache, indent=1))
                print(f"{name}: test {100 * result['test']:.1f} (val {100 * result['val']:.1f}, point "
                      f"{result['point']}, paper {_paper(GAP_TABLE9, dataset, key)})  {result['secs']:.1f}s/fit",
                      flush=True)
    for n in notices:
        print(n)
    stale = [k for k, v in cache.items()
             if v.get("code") != U.code_stamp(None if k.split("|")[1] == "mlp" else "gap", __file__)]
    return markdown(cache, split, notices) + U.stale_line(stale)


def _label(split: tuple[float, float, float]) -> str:
    return ",".join(f"{f:g}" for f in split)


def _runs(cache: dict[str, Any], dataset: str, key: Any, split: str) -> list[dict[str, Any]]:
    """The cached fits of (dataset, key) on `split` (keys without a split are on CARIBOU's)."""
    out = []
    for name, value in cache.items():
        parts = name.split("|")
        if parts[0] == dataset and parts[1] == str(key) and (parts[3] if len(parts) > 3 else _label(SPLIT)) == split:
            out.append(value)
    return out


def markdown(cache: dict[str, Any], split: tuple[float, float, float], notices: list[str]) -> str:
    lines = [
        "# GAP (EDP) beside CARIBOU's GAP rows", "",
        "Generated by `python benchmarks/utility.py --paper gap` (cached per fit in `results/utility_gap.json`). "
        "GAP's own table (Facebook, Reddit, ogbn-products) uses datasets we do not have, so the paper numbers are "
        "CARIBOU's re-run of GAP: `paper` = Table 9 (mean over 3 runs, best configuration; spec caribou.md §6.3), "
        "`paper top` = Table 3 (top run over 3 runs × grid, §6.2), MLP = Table 3's MLP row. Ours: split "
        f"{','.join(f'{f:g}' for f in split)} (chains: their own sizes), GAP's code defaults, K chosen on "
        "**validation** per seed among " + f"{GRID_STANDARD['hops']} (chains: {GRID_CHAINS})" + "; mean ± sd over "
        "`n` seeds of the val-selected test accuracy; `top` = best test accuracy over grid × seeds (Table 3's "
        "selection, for reference only). DPDGC's GAP rows are in the DPDGC section.", "",
        "| dataset | split | ε | ours (mean ± sd) | n | paper (T9) | ours − paper | top | paper top (T3) | K chosen "
        "| s per fit |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    splits = sorted({name.split("|")[3] for name in cache if name.count("|") == 3})
    for dataset in DATASETS:
        for split_label in [_label(SPLIT), *splits]:
            for key in ["mlp", *EPSILONS, "inf"]:
                runs = _runs(cache, dataset, key, split_label)
                if runs:
                    lines.append(_row(dataset, "own" if dataset in GRID_CHAINS else split_label, key, runs))
    if notices:
        lines += ["", "Pre-processing notices:", ""] + [f"* {n}" for n in notices]
    if NOTES:
        lines += ["", NOTES.strip()]
    return "\n".join(lines)


def _row(dataset: str, split_label: str, key: Any, runs: list[dict[str, Any]]) -> str:
    tests = [100 * r["test"] for r in runs]
    paper = _paper(GAP_TABLE9, dataset, key)
    top_paper = _paper(GAP_TABLE3, dataset, key) if key != "mlp" else paper
    diff = np.mean(tests) - paper
    label = {"mlp": "MLP (floor)", "inf": "∞ (noise off)"}.get(key, f"{key:g}" if isinstance(key, float) else key)
    hops = ",".join(str(r["point"].get("hops")) for r in runs if r.get("point")) or "-"
    return (f"| {dataset} | {split_label} | {label} | {np.mean(tests):.1f} ± {np.std(tests):.1f} | {len(tests)} | "
            f"{paper:.1f} | {diff:+.1f}{' **>5**' if abs(diff) > 5 else ''} | "
            f"{100 * max(r['top'] for r in runs):.1f} | {top_paper:.1f} | {hops} | "
            f"{np.mean([r['secs'] for r in runs]):.1f} |")
