"""DPDGC's Table 2 (spec dpdgc.md §6.3) on the datasets we have: ``utility.py --paper dpdgc``.

Rows: DPDGC at edge ε = 1, N_k (k = 1, 5, 25) and node at ε = 16, DPDGC with its noise off (the
non-private ceiling), the MLP floor, and the GAP rows of the same table (edge ε = 1, node ε = 16,
non-private), all with the hyper-parameters of the paper's ``train_scripts/real`` (spec §2.4, §5) and
no grid. Split: 75/10/15 stratified per seed after dropping isolated nodes (the paper: one random
75/10/15 split, 10 runs). Every fit is cached in ``results/utility_dpdgc.json`` as it finishes, so
runs can be split (``--datasets``, ``--setting ROW,ROW``, ``--seeds``) and resumed; the section is
rendered from everything cached.
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

import utility as U

SPLIT = (0.75, 0.1, 0.15)
DATASETS = ["cora", "chameleon", "chameleon-directed", "squirrel", "squirrel-directed", "photo", "computers"]
_COLUMNS = ["squirrel", "chameleon", "computers", "cora", "photo"]
# Table 2 rows the DPDGC target does not hold: the MLP row, and GAP non-private
TABLE2_MLP = dict(zip(_COLUMNS, [34.14, 46.78, 85.27, 76.48, 91.35]))
TABLE2_GAP_INF = dict(zip(_COLUMNS, [36.86, 50.35, 91.05, 86.53, 95.13]))

# GAP as DPDGC's scripts run it (train_scripts/real/GAP-{edge,node}.sh): h = 64, lr 1e-3, 100 epochs
_GAP = {"hidden_dim": 64, "learning_rate": 1e-3, "epochs": 100, "encoder_epochs": 100, "hops": 2}
_GAP_EDGE = {**_GAP, "dropout": 0.5}
_GAP_NODE = {**_GAP, "unit": "node", "batch_size": 64, "max_degree": 100}

#: row id → (label, target, ε, params, bug, published setting of the target or a dict by dataset)
#: the target's defaults: c = 1 (spec §9 #2) and Z row-normalised before the classifier (Alg. 2)
_C8 = {"norm_scale": 1e-8, "normalize_z": False}  # the paper's experiments' c (spec §2.4), Z as Eq. 2
_RAW = {"normalize_z": False}  # c = 1, Z fed as it is (Eq. 2 and the reference code)
ROWS: dict[str, tuple[str, str | None, float, dict[str, Any], str | None, Any]] = {
    "mlp": ("MLP (floor)", None, math.inf, {}, None, TABLE2_MLP),
    "inf": ("DPDGC non-private (noise off)", "dpdgc", 1.0, {}, "no-noise", ("non-private", math.inf)),
    "edge": ("DPDGC edge ε=1", "dpdgc", 1.0, {}, None, ("edge", 1.0)),
    "k1": ("DPDGC N_1 ε=16", "dpdgc", 16.0, {"unit": "node", "k": 1}, None, ("k=1", 16.0)),
    "k5": ("DPDGC N_5 ε=16", "dpdgc", 16.0, {"unit": "node", "k": 5}, None, ("k=5", 16.0)),
    "k25": ("DPDGC N_25 ε=16", "dpdgc", 16.0, {"unit": "node", "k": 25}, None, ("k=25", 16.0)),
    "node": ("DPDGC node ε=16", "dpdgc", 16.0, {"unit": "node"}, None, ("node", 16.0)),
    # c = 1 without Alg. 2's normalisation: a noisy Z of norm ~√deg·c dominates the classifier
    "inf-raw": ("DPDGC non-private, Z not normalised", "dpdgc", 1.0, _RAW, "no-noise", ("non-private", math.inf)),
    "edge-raw": ("DPDGC edge ε=1, Z not normalised", "dpdgc", 1.0, _RAW, None, ("edge", 1.0)),
    "k1-raw": ("DPDGC N_1 ε=16, Z not normalised", "dpdgc", 16.0, {"unit": "node", "k": 1, **_RAW}, None,
               ("k=1", 16.0)),
    # the paper's c = 1e-8 with a real projection: every projected Adam step (lr 1e-3) overwrites
    # W's direction, and Z = A·W + b holds A·W only in the last bits of b's float32 mantissa
    "inf-c8": ("DPDGC non-private, c=1e-8", "dpdgc", 1.0, _C8, "no-noise", ("non-private", math.inf)),
    "edge-c8": ("DPDGC edge ε=1, c=1e-8", "dpdgc", 1.0, _C8, None, ("edge", 1.0)),
    "k1-c8": ("DPDGC N_1 ε=16, c=1e-8", "dpdgc", 16.0, {"unit": "node", "k": 1, **_C8}, None, ("k=1", 16.0)),
    "k5-c8": ("DPDGC N_5 ε=16, c=1e-8", "dpdgc", 16.0, {"unit": "node", "k": 5, **_C8}, None, ("k=5", 16.0)),
    "k25-c8": ("DPDGC N_25 ε=16, c=1e-8", "dpdgc", 16.0, {"unit": "node", "k": 25, **_C8}, None,
               ("k=25", 16.0)),
    "node-c8": ("DPDGC node ε=16, c=1e-8", "dpdgc", 16.0, {"unit": "node", **_C8}, None, ("node", 16.0)),
    # c = 1e-8 and (Z − b)/c fed to the classifier (the target's `rescale_z`, post-processing)
    "inf-rz": ("DPDGC non-private, c=1e-8, rescale_z", "dpdgc", 1.0, {**_C8, "rescale_z": True}, "no-noise",
               ("non-private", math.inf)),
    "edge-rz": ("DPDGC edge ε=1, c=1e-8, rescale_z", "dpdgc", 1.0, {**_C8, "rescale_z": True}, None,
                ("edge", 1.0)),
    # the reference code: W's rows never normalised (the target's planted `norm-noop`) at the paper's
    # c = 1e-8, so Z's noise σ·c·Δ is ~1e-8 of Z's signal (spec §8.1)
    "edge-noop": ("DPDGC edge ε=1, reference code (W never normalised, c=1e-8)", "dpdgc", 1.0, _C8, "norm-noop",
                  ("edge", 1.0)),
    "k1-noop": ("DPDGC N_1 ε=16, reference code (W never normalised, c=1e-8)", "dpdgc", 16.0,
                {"unit": "node", "k": 1, **_C8}, "norm-noop", ("k=1", 16.0)),
    "k5-noop": ("DPDGC N_5 ε=16, reference code (W never normalised, c=1e-8)", "dpdgc", 16.0,
                {"unit": "node", "k": 5, **_C8}, "norm-noop", ("k=5", 16.0)),
    "node-noop": ("DPDGC node ε=16, reference code (W never normalised, c=1e-8)", "dpdgc", 16.0,
                  {"unit": "node", **_C8}, "norm-noop", ("node", 16.0)),
    "gap-inf": ("GAP non-private (noise off)", "gap", 1.0, _GAP_EDGE, "no-noise", TABLE2_GAP_INF),
    "gap-edge": ("GAP edge ε=1", "gap", 1.0, _GAP_EDGE, None, ("edge (DPDGC)", 1)),
    "gap-node": ("GAP node ε=16", "gap", 16.0, _GAP_NODE, None, ("node", 16)),
    # diagnostic: GAP with the noise DPDGC's replacement analysis of GAP puts on it at ε = 16
    # (spec §3.1/§3.3: sensitivity 2√D per hop and 2C per DP-SGD sum, where GAP charges √D and C):
    # every noise std doubled, i.e. our GAP at the ε whose calibrated σ is twice σ(16)
    "gap-node-x2": ("GAP node, 2× σ(ε=16) (DPDGC's replacement noise)", "gap", -16.0, _GAP_NODE, None,
                    ("node", 16)),
    # and with the σ DPDGC's own accountant gives GAP at ε = 16 (fixed-size sampling without
    # replacement, replace-one: SGD_enc + 2 Gaussians + SGD_clf, spec §3.3-3.4), noise std 2σ_D·C
    # and 2σ_D·√D: our GAP at the ε whose calibrated multiplier is 2σ_D
    "gap-node-dpdgc": ("GAP node, noise of DPDGC's accounting of GAP at ε=16", "gap", -1.0, _GAP_NODE, None,
                       ("node", 16)),
}

#: rows whose c (and Z's normalisation) is selected per seed on validation accuracy among cached rows
SELECTED: dict[str, tuple[str, list[str]]] = {
    f"{row}-val": (f"{ROWS[row][0]}, c ∈ {{1 (Z normalised), 1e-8}} on validation", [row, f"{row}-c8"])
    for row in ("inf", "edge", "k1", "k5", "k25", "node")
}

#: measured explanations of the cells more than 5 points from the paper (see results/utility.md)
NOTES = """
**The row norm c and Z's normalisation (chosen on measurements; the accountant is untouched).** The paper
states c = 1e-8 for its experiments and c = 1 in its theorems; its reference code never applies the
projection (spec §8.1), so its Z is noise-free. In a sound implementation:

* *c = 1e-8* (rows `c=1e-8`): every projected Adam step (lr 1e-3) is ~1e5× the row norm, so W's direction
  is overwritten at each step, and Z = A·W + b holds A·W only below b's float32 resolution: the classifier
  sees a constant Z and DPDGC is an MLP on X. Its non-private ceilings: Cora 80.5, Chameleon 44.9,
  Squirrel 39.1 (paper 82.44, 79.24, 79.92).
* *c = 1* (spec §9 #2). Privacy does not depend on c: σ, ε and the DP-Emb noise are the same, only Z's
  noise std σ·Δ_Z scales with c (tested in `tests/test_dpdgc.py`). The ceilings rise to the `non-private`
  rows above (Cora and Photo at the paper's, Chameleon and Squirrel 20-30 points above c = 1e-8's). Fed
  to the classifier as it is (Eq. 2, rows `Z not normalised`), the noisy Z (row norm ≈ 8σ·Δ_Z: 15 at N_1
  and 120 at edge ε = 1 on Cora) swamps it: Cora edge 67.2, N_1 24.6, Chameleon N_1 23.2. Row-normalised
  before the classifier, as the paper's Alg. 2 does (post-processing): Cora edge 78.8, N_1 56.2 (seed 0).

So the target's defaults are **c = 1 with Z row-normalised** (`norm_scale=1.0`, `normalize_z=True`): the one
setting in which Z carries the graph, with every default-row cell on Cora within 5 points of the paper, and
on Photo and Computers all but the N_1 / N_5 cells (explained below). Rows `… on validation` choose per seed between the default and c = 1e-8 by validation accuracy
(the only hyper-parameter searched; shown where both were run for the seed).

**Grid reduced (CPU: two cores shared by four sessions, load 5-10; a DPDGC N_k/node fit took 5-15 min
wall, a Computers edge fit 14 min).** No other grid; `n` is the number of seeds actually run (3 only where
the table says so). Stop 29 ran the cells still missing, one seed each (a Squirrel N_5 fit took 45 min
under load, a Computers N_k fit 7-12 min): Squirrel N_5/N_25/node and Computers N_1/N_5/N_25/node.
Stop 30 ran Computers N_1 / N_5, Photo N_1 and Chameleon N_5 under the reference code's `norm-noop` (4-10 min a fit),
and seeds 1-2 of every Photo and Computers row in the table.

**Why cells differ by more than 5 points (measured).**

* **Z's noise at the paper's ε** (from the claim, `build("dpdgc", …).claim(graph)`, split seed 0). Edge
  ε = 1: σ = 16.3 (Chameleon), 15.1 (Cora), 12.6 (Squirrel), so each row of Z carries noise of norm
  ≈ 8σ·c ≈ 100-130·c against a signal ‖A_i W‖ ≤ deg_i·c (median degree 12 on Chameleon, 17 on Squirrel,
  3 on Cora): Z is nearly pure noise. N_1 ε = 16: σ ≈ 2, noise norm ≈ 16c; node ε = 16: Δ_Z = c√(2D),
  noise norm ≈ 230c. A sound DPDGC at these ε adds little to its MLP branch, and the paper's margins over
  its own MLP / DP-MLP on the heterophilic graphs (Chameleon edge +7.1, N_1 +10.4, N_5 +9.0, node +8.2)
  need the reference code's noise-free Z (spec §8.1), which the stated accounting does not allow.
  **Measured:** the reference code's bug planted in our target (`--bug norm-noop`, c = 1e-8, W's rows never
  projected, so Z's signal is ~1e7× its noise) scores **Chameleon N_1 47.5 vs the paper's 48.63** and node
  42.8 vs 46.43 (rows `reference code`, seed 0), where the sound target gives 32.3 and 32.3 (c = 1e-8: 35.8 and 36.7).
* **Chameleon edge ε = 1, N_k and node** (below the paper; the sound cells sit at or below the MLP floor,
  49.3): by the above, the paper's numbers are those of a noise-free Z. The edge cell under the reference
  bug scores 48.1 (seed 0), within 6 points of 53.83 and at our MLP floor (the paper's MLP is 46.78).
  N_5 under the bug scores 40.8 (seed 0; validation 47.4) against the sound 30.2 and the paper's 47.22:
  the noise-free Z closes 10.6 of the 17-point gap, and one Chameleon seed moves cells by up to 8 points
  (edge: 41.3 / 47.2 / 49.3).
* **Squirrel N_1 ε = 16** (33.7 vs 42.71, seed 0): at the paper's own DP-MLP (34.46); the paper's 8-point
  margin over it is again that of a noise-free Z: the reference code's bug planted (row `reference code`)
  scores **40.5**, within 2.2 points.
* **Squirrel N_5 and N_25 ε = 16** (33.8 and 32.3 vs 41.00 and 40.51, seed 0): like N_1, at the paper's
  own DP-MLP (34.46) and our MLP floor (35.6); the paper's 6-point margins over its DP-MLP are those of
  the noise-free Z above. Squirrel node (32.2 vs 36.17) is within 5 points.
* **Computers N_1 and N_5 ε = 16** (75.5 ± 0.3 and 75.1 ± 0.5 over 3 seeds, vs 83.49 and 80.60; N_25 75.2 ± 0.8 vs
  78.25 is within 5): the three N_k cells sit together, ~10 points under our non-private MLP (85.2) and 4.5-5
  under the paper's DP-MLP (80.01), where Z's noise swamps it as on the other graphs. **Measured:**
  with the reference code's noise-free Z planted (`--bug norm-noop`, c = 1e-8; rows `reference code`,
  seed 0) the same cells score **81.5 (N_1) and 78.2 (N_5)**, within 2.0 and 2.4 points of the paper:
  as on Chameleon and Squirrel, the paper's margin over its DP-MLP is that of a Z without noise.
* **Photo N_1 ε = 16** (83.0 ± 0.6 over 3 seeds vs 88.38; N_5, N_25 and node, also over 3 seeds, are within 5): Z's
  noise again. **Measured:** under the reference code's noise-free Z (`norm-noop`, row `reference code`,
  seed 0) the cell scores **88.9**, +0.5 from the paper.
* **"Under the reference code's noise-free Z the cells match the paper": only in some cells (issue #32).**
  Cell by cell, `--bug norm-noop` with c = 1e-8, seed 0 (rows `reference code` above), against the paper,
  "match" meaning within 5 points:

  | cell | noise-free Z (ours) | paper | difference | matches |
  |---|---|---|---|---|
  | Chameleon edge ε = 1 | 48.1 | 53.83 | −5.7 | no |
  | Chameleon N_1 ε = 16 | 47.5 | 48.63 | −1.1 | yes |
  | Chameleon N_5 ε = 16 | 40.8 | 47.22 | −6.5 | **no** |
  | Chameleon node ε = 16 | 42.8 | 46.43 | −3.6 | yes |
  | Squirrel N_1 ε = 16 | 40.5 | 42.71 | −2.2 | yes |
  | Photo N_1 ε = 16 | 88.9 | 88.38 | +0.5 | yes |
  | Computers N_1 ε = 16 | 81.5 | 83.49 | −2.0 | yes |
  | Computers N_5 ε = 16 | 78.2 | 80.60 | −2.4 | yes |

  Six of eight cells match; Chameleon edge and N_5 do not (one seed each; Chameleon's seeds alone move a cell
  by up to 8 points). The other cells (Squirrel N_5/N_25/node, Photo N_5/N_25/node, Computers N_25/node, every
  Cora cell) were not run under the reference code, so "the paper's numbers are a noise-free Z's" is measured
  in these six cells only.
* **Chameleon and Squirrel non-private** (70.5 and 63.7 vs 79.24 and 79.92): the reference code's
  non-private mode trains W freely (no projection, batch-norm in DP-Emb), which a projected DP-Emb (rows at
  norm c) does not reproduce; c = 1e-8 gives 44.9 and 39.1. The paper's graph is the directed geom-gcn
  graph (Table 1: 36,051 edges; our loader symmetrises it, 62,742): on the directed graph (rows
  `chameleon-directed`, c = 1e-8) the cells move by < 2 points.
* **GAP node ε = 16 on Cora** (+17): DPDGC's table runs GAP under DPDGC's own analysis of GAP, not GAP's.
  It charges node replacement (sensitivity 2√D per hop and 2C per DP-SGD sum, where GAP's accountant
  charges √D and C; spec dpdgc.md §3.1, §3.3) and accounts DP-SGD with fixed-size sampling without
  replacement (replace-one), which amplifies less than GAP's Poisson bound. Measured: with every noise std
  doubled (our ε = 5.75 has 2·σ(16)) GAP node scores 64.0; with the σ that DPDGC's accountant
  (`targets.dpdgc.accountant`, Lemma F.1) gives this GAP at ε = 16, σ_D = 1.94, i.e. noise std 2σ_D (our
  ε = 3.01, 3.4× our σ(16)), it scores **50.0 vs the paper's 54.36** (rows `GAP node, …`). Our GAP row keeps
  GAP's own accountant (unchanged), so it is legitimately higher.
* **GAP non-private on Chameleon** (+6.5, one seed): the graph. On the paper's directed graph GAP-∞ scores
  51.9 (+1.6) and GAP edge 47.5 (−2.0); GAP aggregates A·H, which the symmetrised graph doubles.
* Rows `c=1e-8`, `Z not normalised` and `rescale_z` are the alternatives measured above, not the target's
  configuration; their gaps are explained by the first paragraph.
"""


def selected_runs(cache: dict[str, Any], dataset: str, candidates: list[str]) -> list[tuple[str, dict]]:
    """Per seed with every candidate row cached, (row, fit) of the best validation accuracy (ties:
    the first candidate); the test accuracy is never looked at."""
    picks = []
    seeds = sorted({int(k.split("|")[2]) for k in cache if k.startswith(f"{dataset}|{candidates[0]}|")})
    for seed in seeds:
        fits = [(row, cache.get(f"{dataset}|{row}|{seed}")) for row in candidates]
        if all(fit is not None for _, fit in fits):
            picks.append(max(fits, key=lambda rf: rf[1]["val"]))  # max keeps the first of equal keys
    return picks


def paper_number(row: str, dataset: str) -> float:
    _, target, _, _, _, pub = ROWS[row]
    dataset = dataset.removesuffix("-directed")
    if isinstance(pub, dict):
        return pub.get(dataset, math.nan)
    return float(U.get(target).published_accuracy.get((dataset, *pub), math.nan))


def doubled_noise_epsilon(target: str, graph: Any, epsilon: float, params: dict[str, Any]) -> float:
    """The ε at which `target`'s calibrated noise multiplier is twice the one at `epsilon`."""
    return matched_noise_epsilon(target, graph, 2 * _sigma(target, graph, epsilon, params), params)


def _sigma(target: str, graph: Any, epsilon: float, params: dict[str, Any]) -> float:
    return U.build(target, epsilon=epsilon, **params).claim(graph).to_dict()["details"]["noise_multiplier"]


def matched_noise_epsilon(target: str, graph: Any, goal: float, params: dict[str, Any]) -> float:
    """The ε at which `target`'s calibrated noise multiplier is `goal` (geometric bisection over
    [1/64, 64]; the accountant is only read)."""
    lo, hi = 1 / 64, 64.0
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if _sigma(target, graph, mid, params) > goal else (lo, mid)
    return hi


def dpdgc_sigma_for_gap(graph: Any, epsilon: float) -> float:
    """σ that DPDGC's accountant gives GAP-node with DPDGC's GAP script (B = 64, 100 + 100 epochs,
    K = 2): T = ⌊100·m/B⌋ steps per module, q = B/m, δ = 10^-digits(m), Lemma F.1."""
    from targets.common.accounting import calibrate_decreasing, gap_delta, gaussian_rdp
    from targets.dpdgc.accountant import CALIBRATION, ORDERS, lemma_f1_epsilon, wor_gaussian_rdp

    m = int(graph.train_mask.sum())
    batch = _GAP_NODE["batch_size"]
    steps, q = (_GAP_NODE["epochs"] * m) // batch, batch / m

    def eps_of(sigma: float) -> float:
        rdp = 2 * steps * wor_gaussian_rdp(ORDERS, q, sigma, 1) + _GAP["hops"] * gaussian_rdp(ORDERS, sigma)
        return lemma_f1_epsilon(ORDERS, rdp, gap_delta(m))[0]

    return calibrate_decreasing(eps_of, epsilon, **CALIBRATION)


def directed_wiki(name: str, seed: int, split: tuple[float, float, float]) -> Any:
    """Chameleon or Squirrel as the paper counts them (Table 1: 36,051 / 216,933 edges): the
    geom-gcn graph kept directed, self-loops removed; our loader symmetrises it (62,742 / 396,706)."""
    import torch_geometric.datasets as pyg
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, remove_self_loops

    from graphs import datasets

    datasets.load(name)  # links the shared files into the cache
    raw = pyg.WikipediaNetwork(root=str(datasets._cache_dir()), name=name, geom_gcn_preprocess=True)[0]
    edges = coalesce(remove_self_loops(raw.edge_index)[0], num_nodes=raw.num_nodes)
    y = raw.y.view(-1).long()
    graph = Data(x=raw.x.float(), y=y, edge_index=edges, num_nodes=raw.num_nodes)
    graph.train_mask, graph.val_mask, graph.test_mask = datasets.stratified_split(y, *split, seed=seed)
    return graph


def _save(cache_file: Path, cache: dict[str, Any]) -> None:
    """Write the cache, keeping the fits other runs wrote meanwhile (runs may go side by side)."""
    if cache_file.exists():
        cache.update({k: v for k, v in json.loads(cache_file.read_text()).items() if k not in cache})
    cache_file.write_text(json.dumps(cache, indent=1))


def _cache_path(args: Any) -> Path:
    out = Path(args.out) if args.out else Path(__file__).resolve().parents[1] / "results" / "utility.md"
    return out.with_name("utility_dpdgc.json")


def run(args: Any, split: tuple[float, float, float] | None) -> str:
    split = split or SPLIT
    cache_file = _cache_path(args)
    cache: dict[str, Any] = json.loads(cache_file.read_text()) if cache_file.exists() else {}
    rows = args.setting.split(",") if args.setting else list(ROWS)
    notices: list[str] = []
    for dataset in args.datasets or DATASETS:
        for seed in range(args.seeds):
            graph = None
            for row in rows:
                key = f"{dataset}|{row}|{seed}"
                code = U.code_stamp(ROWS[row][1], __file__)
                if cache.get(key, {}).get("code") == code:
                    continue
                if graph is None:
                    graph = (directed_wiki(dataset.removesuffix("-directed"), seed, split)
                             if dataset.endswith("-directed") else
                             U.prepare_graph("dpdgc", dataset, seed, split, True, notices))
                _, target, eps, params, bug, _ = ROWS[row]
                if target is None:
                    start = time.time()
                    acc = U.mlp_accuracy(graph, seed, dropouts=(0.5,))
                    secs = time.time() - start
                else:
                    if eps == -1.0:
                        eps = matched_noise_epsilon(target, graph, 2 * dpdgc_sigma_for_gap(graph, 16.0), params)
                        print(f"{key}: our ε {eps:.4g} has the noise of DPDGC's accounting of GAP at ε 16")
                    elif eps < 0:
                        eps = doubled_noise_epsilon(target, graph, -eps, params)
                        print(f"{key}: ε {eps:.4g} has twice the noise multiplier of ε {-ROWS[row][2]:g}")
                    acc, secs = U.fit_accuracy(target, graph, eps, seed, params, bug)
                cache[key] = {**acc, "secs": secs, "code": code}
                _save(cache_file, cache)
                print(f"{key}: test {100 * acc['test']:.1f} (val {100 * acc['val']:.1f}, paper "
                      f"{paper_number(row, dataset)})  {secs:.0f}s", flush=True)
    for n in notices:
        print(n)
    stale = [k for k, v in cache.items()
             if k.split("|")[1] in ROWS and v.get("code") != U.code_stamp(ROWS[k.split("|")[1]][1], __file__)]
    return markdown(cache, split, notices) + U.stale_line(stale)


def markdown(cache: dict[str, Any], split: tuple[float, float, float], notices: list[str]) -> str:
    lines = [
        "# DPDGC's Table 2 (and its GAP rows) beside the paper", "",
        "Generated by `python benchmarks/utility.py --paper dpdgc` (cached per fit in "
        "`results/utility_dpdgc.json`). Paper numbers: DPDGC Table 2 (spec dpdgc.md §6.3; mean of 10 runs). "
        f"Ours: split {','.join(f'{f:g}' for f in split)} stratified per seed after dropping isolated nodes; the "
        "paper's hyper-parameters (train_scripts/real: h = 64, lr 1e-3, 100 + 100 epochs, B = 64, clip 1, D = 100; "
        "GAP: K = 2, h = 64, lr 1e-3, 100 epochs, dropout 0.5 edge / B = 64 node) and DPDGC's defaults c = 1 with "
        "Z row-normalised (Alg. 2; the paper's c = 1e-8 in rows `c=1e-8`, see below); test accuracy at the "
        "best-validation epoch (the paper's checkpointing). `n` = seeds.", "",
        "| dataset | row | ours (mean ± sd) | n | paper | ours − paper | s per fit |",
        "|---|---|---|---|---|---|---|",
    ]
    for dataset in DATASETS:
        for row, (label, *_rest) in ROWS.items():
            runs = [v for k, v in cache.items() if k.startswith(f"{dataset}|{row}|")]
            if not runs:
                continue
            tests = [100 * r["test"] for r in runs]
            paper = paper_number(row, dataset)
            diff = np.mean(tests) - paper
            flag = " **>5**" if abs(diff) > 5 else ""
            lines.append(f"| {dataset} | {label} | {np.mean(tests):.1f} ± {np.std(tests):.1f} | {len(tests)} | "
                         f"{paper:.2f} | {diff:+.1f}{flag} | {np.mean([r['secs'] for r in runs]):.0f} |")
        for sel, (label, candidates) in SELECTED.items():
            picks = selected_runs(cache, dataset, candidates)
            if picks:
                tests = [100 * r["test"] for _, r in picks]
                paper = paper_number(candidates[0], dataset)
                diff = np.mean(tests) - paper
                flag = " **>5**" if abs(diff) > 5 else ""
                chosen = ", ".join(row for row, _ in picks)
                lines.append(f"| {dataset} | {label} (picked: {chosen}) | {np.mean(tests):.1f} ± {np.std(tests):.1f} | "
                             f"{len(tests)} | {paper:.2f} | {diff:+.1f}{flag} | - |")
    if notices:
        lines += ["", "Pre-processing notices:", ""] + [f"* {n}" for n in notices]
    if NOTES:
        lines += ["", NOTES.strip()]
    return "\n".join(lines)
