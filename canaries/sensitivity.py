"""Worst-case sensitivity probe: measured vs claimed Δ of every noisy step a claim charges.

A DP claim holds for every neighbouring pair in its domain, so the auditor may choose the graph,
the features and the canary. For each step (the target's ``step_maps`` hook, :mod:`targets.common.probe`: the
step's noiseless output is a map of a held-fixed input X, ``out = apply(graph, X)``) the probe maximises
``‖apply(g1, X) − apply(g0, X)‖`` (ℓ2 for Gaussian mechanisms, Σ-of-row-ℓ2 for GCON's Ψ) over

(a) canaries on the given graph: every edge / a ranked sample of non-edges (lowest degree,
    feature-extreme, random) / nodes, with the target's own X (``realised``) and the worst X;
(b) small graphs: every graph on up to ``max_nodes`` nodes up to isomorphism (networkx atlas),
    every canary on each, and structured families sized to the step (paths, cycles, stars,
    cliques, complete bipartite, random trees, a hub with more leaves than the degree bound);
(c) the input X over the claim's domain (rows of ℓ2 norm ≤ radius, after the target's own
    normalisation or projection). For a map linear in X, M = apply(g1, I) − apply(g0, I) is computed
    through the target's code, then X maximises ‖M X‖ by enumerating sign patterns (rank-one extreme
    points, exhaustive up to 14 free rows) and by projected ascent from many starts (X ← rownormalise(∇),
    a monotone step for a convex objective over a product of balls), keeping the best. Any other map
    is searched by projected gradient ascent on ‖apply(g1, X) − apply(g0, X)‖ (autograd through the
    target's code, :mod:`canaries.ascent`): a screen on every pair (each start evaluated once, a
    short climb from the best, ``SCREEN``), the full multi-start ascent on the ``FINALISTS`` pairs
    the screen ranks highest, each also from its screen's X; at or below its claim such a step is "searched, no witness found (a search, not a
    proof)", status ``no witness found``, never the exact answer of a linear map.

A step measured on sampled couplings (:class:`targets.common.probe.SampledStep`: one DP-SGD step's
batch) is probed over its own sources of graphs and nodes, every batch and model seed it names.
A target's ``tight_pair`` hook (a paper's own worst case) is measured beside the search.

A step the probe cannot measure is never a pass: the report says "not probed" with the reason, and
``python -m audit sensitivity`` exits with status 3 (0: every step probed and at or below its claim,
1: a step above its claim).

The best pair per step (largest measured/claimed) is written as a witness (:mod:`canaries.witness`)
and recomputed from the file through the target's code before it is reported. Measured above
claimed by more than ``rtol`` (1e-6 relative) is a sensitivity violation (exit status 1).

The command ``python -m audit sensitivity`` (``audit/console/cli.py``) calls :func:`probe` and prints
:func:`render`.
"""
from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from canaries import ascent
from canaries import witness as W
from canaries.node import isolate
from canaries.probe_graphs import atlas, canary_pairs, families
from graphs.ops import undirected_pairs
from targets.base import one_torch_thread
from targets.common.probe import SampledStep, StepMap

RTOL = 1e-6
#: a map not linear in X: every pair's screen and the finalists' long ascent, as (starts, iterations,
#: starts climbed: None = all); the screen climbs only from its best start, briefly
SCREEN = (6, 10, 3)
FINALISTS = 8
LONG_ASCENT = (10, 150, None)
#: what a step measured at or below its claim by a search alone is called (never a pass)
SEARCHED = "searched, no witness found (a search, not a proof)"


# ---------------------------------------------------------------------------------------------
# the norm of a change, and the worst input X
# ---------------------------------------------------------------------------------------------
def change_norm(diff: torch.Tensor, norm: str) -> float:
    diff = diff.double()
    if norm == "l21":
        return float(diff.norm(dim=1).sum())
    if norm == "l1":
        return float(diff.abs().sum())
    return float(diff.norm())


def _value(m: np.ndarray, x: np.ndarray, norm: str) -> float:
    y = m @ x
    if norm == "l1":
        return float(np.abs(y).sum())
    return float(np.linalg.norm(y, axis=1).sum()) if norm == "l21" else float(np.linalg.norm(y))


def _rownormalise(g: np.ndarray, prev: np.ndarray) -> np.ndarray:
    nrm = np.linalg.norm(g, axis=1, keepdims=True)
    return np.where(nrm > 1e-300, g / np.maximum(nrm, 1e-300), prev)


def maximise(m: np.ndarray, width: int, norm: str, rng: np.random.Generator, *, starts: int = 6,
             iters: int = 200, exhaustive: int = 14) -> tuple[float, np.ndarray]:
    """max ‖M X‖ over X (b × h) with rows of norm ≤ 1: (value, X). Sign enumeration (rank one,
    exhaustive for b ≤ `exhaustive`) then projected ascent from the best signs, the top singular
    directions and random starts."""
    a, b = m.shape
    # ℓ2 and Σ-row-ℓ2 values are reached in rank ≤ b; ℓ1 gains from spreading a row over every column
    h = max(1, width or b) if norm == "l1" else max(1, min(width or b, b))
    if b <= exhaustive:
        rest = list(itertools.product((1.0, -1.0), repeat=b - 1))
        signs = np.array([(1.0, *r) for r in rest], dtype=float).reshape(len(rest), b)
    else:
        signs = rng.choice((1.0, -1.0), size=(512, b))
    y = m @ signs.T  # a × S
    vals = np.abs(y).sum(0) if norm in ("l21", "l1") else np.linalg.norm(y, axis=0)
    order = np.argsort(-vals)[:4]
    inits = []
    for k in order:
        x = np.zeros((b, h))
        x[:, 0] = signs[k]
        inits.append(x)
    try:
        _, _, vt = np.linalg.svd(m, full_matrices=False)
        x = np.zeros((b, h))
        k = min(h, vt.shape[0])
        x[:, :k] = vt[:k].T
        inits.append(_rownormalise(x, np.full((b, h), 1 / math.sqrt(h))))
    except np.linalg.LinAlgError:
        pass
    for _ in range(starts):
        inits.append(_rownormalise(rng.standard_normal((b, h)), np.full((b, h), 1 / math.sqrt(h))))
    best, best_x = -1.0, inits[0]
    for x in inits:
        f = _value(m, x, norm)
        for _ in range(iters):
            y = m @ x
            if norm == "l21":
                nrm = np.linalg.norm(y, axis=1, keepdims=True)
                u = np.where(nrm > 1e-300, y / np.maximum(nrm, 1e-300), 0.0)
                g = m.T @ u
            elif norm == "l1":
                g = m.T @ np.sign(y)
            else:
                g = m.T @ y
            x_new = _rownormalise(g, x)
            f_new = _value(m, x_new, norm)
            if f_new <= f * (1 + 1e-14):
                if f_new > f:
                    x, f = x_new, f_new
                break
            x, f = x_new, f_new
        if f > best:
            best, best_x = f, x
    return best, best_x


# ---------------------------------------------------------------------------------------------
# one neighbouring pair
# ---------------------------------------------------------------------------------------------
@dataclass
class Measurement:
    measured: float
    claimed: float
    kind: str
    canary: Any
    g0: Data
    g1: Data
    x: torch.Tensor | None
    x_kind: str
    found_by: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.measured / self.claimed if self.claimed > 0 else (math.inf if self.measured > 0 else 0.0)


#: graphs up to this many nodes get the whole difference matrix (the step applied to I, n × n);
#: larger ones only the columns near the canary (:func:`_local_difference`), in linear memory
DENSE_DIFFERENCE_MAX_N = 4096


def difference_matrix(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any) -> torch.Tensor:
    """M = apply(g1, I) − apply(g0, I) (rows: outputs, columns: input rows), canary row excluded
    for node canaries where the claim excludes it."""
    n = int(g1.num_nodes)
    eye = torch.eye(n, dtype=torch.float64)
    m = (step.apply(g1, eye) - step.apply(g0, eye)).double()
    if kind == "node" and step.node_excludes_row:
        m[int(canary)] = 0.0
    return m


def changed_block(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rows, cols, M[rows][:, cols]): the rows and columns of the difference matrix that are not
    all zero, and that block."""
    if int(g1.num_nodes) > DENSE_DIFFERENCE_MAX_N:
        return _local_difference(step, g0, g1, kind, canary)
    m = difference_matrix(step, g0, g1, kind, canary)
    rows = (m.abs().sum(1) > 0).nonzero().view(-1)
    cols = (m.abs().sum(0) > 0).nonzero().view(-1)
    return rows, cols, m[rows][:, cols]


def _difference(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any, x: torch.Tensor) -> torch.Tensor:
    d = (step.apply(g1, x) - step.apply(g0, x)).double()
    if kind == "node" and step.node_excludes_row:
        d[int(canary)] = 0.0
    return d


def _local_difference(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any, block: int = 64
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`changed_block` without the n × n matrix: a graph map moves only the inputs near the
    canary. The candidate columns are the h-hop ball around the canary's nodes in g0 ∪ g1, grown
    until M·z = 0 for a Gaussian z that is zero on the ball (then, almost surely, every column
    outside it is zero); M's columns on the ball are computed `block` at a time."""
    n = int(g1.num_nodes)
    ei = torch.cat([g0.edge_index, g1.edge_index], 1).cpu()
    ball = torch.zeros(n, dtype=torch.bool)
    ball[torch.as_tensor(list(canary) if isinstance(canary, (tuple, list)) else [int(canary)])] = True
    gen = torch.Generator().manual_seed(0)
    while True:
        z = torch.randn(n, 1, dtype=torch.float64, generator=gen)
        z[ball] = 0.0
        if float(_difference(step, g0, g1, kind, canary, z).abs().max()) == 0.0 or bool(ball.all()):
            break
        grown = ball.clone()
        grown[ei[1][ball[ei[0]]]] = True
        grown[ei[0][ball[ei[1]]]] = True
        if bool((grown == ball).all()):  # a component exhausted: the rest cannot be reached
            grown = torch.ones(n, dtype=torch.bool)
        ball = grown
    candidates = ball.nonzero().view(-1)
    parts: list[tuple[torch.Tensor, torch.Tensor]] = []
    for start in range(0, candidates.numel(), block):
        idx = candidates[start:start + block]
        x = torch.zeros(n, idx.numel(), dtype=torch.float64)
        x[idx, torch.arange(idx.numel())] = 1.0
        d = _difference(step, g0, g1, kind, canary, x)
        nz = (d.abs().sum(1) > 0).nonzero().view(-1)
        parts.append((nz, d[nz]))
    rows = torch.unique(torch.cat([nz for nz, _ in parts])) if parts else torch.zeros(0, dtype=torch.long)
    full = torch.zeros(rows.numel(), candidates.numel(), dtype=torch.float64)
    start = 0
    for nz, vals in parts:
        full[torch.searchsorted(rows, nz), start:start + vals.size(1)] = vals
        start += vals.size(1)
    keep = full.abs().sum(0) > 0
    return rows, candidates[keep], full[:, keep]


def evaluate(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any, x: torch.Tensor) -> float:
    """‖apply(g1, X) − apply(g0, X)‖ in the step's norm, through the target's code."""
    diff = step.apply(g1, x) - step.apply(g0, x)
    if kind == "node" and step.node_excludes_row:
        diff = diff.clone()
        diff[int(canary)] = 0.0
    return change_norm(diff, step.norm)


def measure_pair(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any, rng: np.random.Generator,
                 found_by: str, *, realised: torch.Tensor | None = None, search_x: bool = True,
                 effort: tuple[int, int, int | None] = SCREEN, seeds: tuple[torch.Tensor, ...] = ()
                 ) -> list[Measurement]:
    """Measurements of one pair: with the realised X (if given) and with the worst X in the domain
    (for a map not linear in X, projected ascent with `effort` = (starts, iterations, starts
    climbed), also from each of `seeds`)."""
    claimed = step.claimed(g0, g1)
    if claimed is None:
        return []
    if step.in_domain is not None and not step.in_domain(g0, g1, kind, canary):
        return []
    out: list[Measurement] = []
    if realised is not None:
        out.append(Measurement(evaluate(step, g0, g1, kind, canary, realised), claimed, kind, canary, g0, g1,
                               realised, "realised", found_by + "; the target's own X"))
    if search_x and step.radius is not None:
        rows, cols, block = changed_block(step, g0, g1, kind, canary)
        if rows.numel() == 0 and step.linear:
            return out
        if rows.numel() == 0:
            out.append(_ascent(step, g0, g1, kind, canary, rng, found_by, realised, [*seeds], effort))
            return out
        sub = block.numpy()
        width = step.width or int(cols.numel())
        _, xs = maximise(sub, width, step.norm, rng)
        n = int(g1.num_nodes)
        full = max(step.width or xs.shape[1], xs.shape[1])
        if realised is not None and tuple(realised.shape) == (n, full):
            x = realised.clone().double()  # rows the change does not read keep the target's own values
        else:
            x = torch.zeros(n, full, dtype=torch.float64)
        x[cols] = 0.0
        x[cols, : xs.shape[1]] = torch.from_numpy(xs) * step.radius
        value = evaluate(step, g0, g1, kind, canary, x)  # authoritative: the target's code on X
        out.append(Measurement(value, claimed, kind, canary, g0, g1, x, "adversarial",
                               found_by + f"; worst X over rows ‖x‖ ≤ {step.radius:.4g}"))
        if not step.linear:
            out.append(_ascent(step, g0, g1, kind, canary, rng, found_by, realised, [x, *seeds], effort))
    return out


def _ascent(step: StepMap, g0: Data, g1: Data, kind: str, canary: Any, rng: np.random.Generator, found_by: str,
            realised: torch.Tensor | None, extra: list[torch.Tensor], effort: tuple[int, int, int | None]
            ) -> Measurement:
    """A map not linear in X: projected gradient ascent through the target's code (:mod:`canaries.ascent`)."""
    n = int(g1.num_nodes)
    width = step.width or int(getattr(g1, "x", torch.zeros(0, 1)).size(1))
    if realised is not None and tuple(realised.shape) == (n, width):
        base = ascent.project(realised.clone().double(), step.radius)
        extra = [*extra, realised]
    else:
        base = torch.zeros(n, width, dtype=torch.float64)
    extra = [e for e in extra if tuple(e.shape) == (n, width)]
    rows = ascent.free_rows(g0, g1, canary, n)
    _, x = ascent.ascend(lambda z: _difference(step, g0, g1, kind, canary, z), step.norm, base, rows,
                         step.radius, rng, extra=extra, count=effort[0], iters=effort[1], climbed=effort[2])
    value = evaluate(step, g0, g1, kind, canary, x)  # authoritative: the target's code on X
    return Measurement(value, step.claimed(g0, g1), kind, canary, g0, g1, x, "adversarial",
                       found_by + f"; projected ascent over rows ‖x‖ ≤ {step.radius:.4g}")


# ---------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------
def select_finalists(screened: list[tuple[float, int, tuple[Any, ...]]], k: int) -> list[tuple[Any, ...]]:
    """The `k` pairs whose screened ratio is highest, each once with its best screened X: `screened`
    holds (ratio, order, (g0, g1, kind, canary, label, search, X)); ties go to the earlier pair."""
    chosen: dict[tuple[int, int, str], tuple[Any, ...]] = {}
    for _, _, pair in sorted(screened, key=lambda f: (-f[0], f[1])):
        if len(chosen) == k:
            break
        chosen.setdefault((id(pair[0]), id(pair[1]), repr(pair[3])), pair)
    return list(chosen.values())


@dataclass
class StepResult:
    step: StepMap
    best: Measurement | None = None  # largest measured/claimed over the verdict kinds
    by_search: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, dict[str, Any]] = field(default_factory=dict)
    pairs: int = 0
    seconds: float = 0.0
    witness: str | None = None
    recomputed: float | None = None

    @property
    def violation(self) -> bool:
        return self.best is not None and self.best.measured > self.best.claimed * (1 + RTOL) + 1e-300

    @property
    def search(self) -> str:
        """How the step's input was searched: ``exact`` (a map linear in X, through its matrix),
        ``ascent`` (any other map over the claim's domain: a search, not a proof), ``given input``
        (a map not linear in X with no domain declared: only the target's own X), ``sampled``."""
        if isinstance(self.step, SampledStep):
            return "sampled"
        if self.step.linear:
            return "exact"
        return "ascent" if self.step.radius is not None else "given input"

    @property
    def searched_only(self) -> bool:
        """Measured at or below its claim by a search that proves nothing (:attr:`search`)."""
        return self.best is not None and not self.violation and self.search in ("ascent", "given input")

    def to_dict(self) -> dict[str, Any]:
        b = self.best
        return {"search": self.search, "searched_only": self.searched_only,
            "step": self.step.name, "covers": self.step.covers, "norm": self.step.norm,
            "kinds": list(self.step.kinds), "measured": b.measured if b else None,
            "claimed": b.claimed if b else None, "ratio": b.ratio if b else None,
            "violation": self.violation, "found_by": b.found_by if b else None,
            "canary": {"kind": b.kind, "canary": _jsonable_canary(b.canary)} if b else None,
            "input": b.x_kind if b else None, "by_search": self.by_search, "extra_kinds": self.extra,
            "pairs": self.pairs, "seconds": round(self.seconds, 3), "witness": self.witness,
            "recomputed": self.recomputed, "note": self.step.note,
        }


def _jsonable_canary(c: Any) -> Any:
    return list(c) if isinstance(c, tuple) else c


def _keep(table: dict[str, dict[str, Any]], key: str, m: Measurement) -> None:
    cur = table.get(key)
    if cur is None or m.ratio > cur["ratio"]:
        table[key] = {"measured": m.measured, "claimed": m.claimed, "ratio": m.ratio, "found_by": m.found_by,
                      "input": m.x_kind}


def _given_candidates(graph: Data, kind: str, count: int, rng: np.random.Generator) -> dict[str, Any]:
    from canaries.edge import FeatureExtremeEdge, LowDegreeEdge, random_non_edges

    n = int(graph.num_nodes)
    if kind == "node":
        deg = torch.bincount(graph.edge_index[0], minlength=n)
        top = torch.argsort(-deg)[: count // 2].tolist()
        rest = rng.choice(n, size=min(n, count // 2), replace=False).tolist()
        return {"nodes": list(dict.fromkeys(int(z) for z in top + rest))}
    und = undirected_pairs(graph)
    present = [(int(und[i, 0]), int(und[i, 1]))
               for i in rng.choice(len(und), size=min(len(und), count // 2), replace=False)] if len(und) else []
    absent: list[tuple[int, int]] = []
    for strategy in (LowDegreeEdge(), FeatureExtremeEdge()):
        try:
            absent += strategy.ranked(graph, rng, max(1, count // 4))
        except ValueError:
            pass
    try:
        absent += random_non_edges(graph, max(1, count // 4), rng)
    except ValueError:
        pass
    return {"edges": list(dict.fromkeys(present + absent))}


def probe_step(step: StepMap, graph: Data, *, candidates: int = 32, max_nodes: int = 5,
               use_families: bool = True, seed: int = 0, given: bool = True) -> StepResult:
    rng = np.random.default_rng(seed)
    res = StepResult(step)
    t0 = time.perf_counter()

    finalists: list[tuple[float, int, tuple[Any, ...]]] = []  # (screened ratio, order, the pair and its X)

    def consider(ms: list[Measurement], search: str, verdict: bool) -> None:
        for m in ms:
            if not step.linear and m.x_kind == "adversarial" and verdict:
                finalists.append((m.ratio, len(finalists), (m.g0, m.g1, m.kind, m.canary, m.found_by.split("; ")[0],
                                                           search, m.x)))
            res.pairs += 1
            if verdict:
                _keep(res.by_search, f"{search} [{m.x_kind} X]", m)
                if res.best is None or m.ratio > res.best.ratio:
                    res.best = m
            else:
                _keep(res.extra, m.kind, m)

    kinds = [(k, True) for k in step.kinds] + [(k, False) for k in step.extra_kinds]
    realised = None
    # (a) the given graph
    if given:
        if step.realised is not None:
            try:
                realised = step.realised(graph)
            except Exception:  # noqa: BLE001 - a graph the target cannot encode: domain search only
                realised = None
        for kind, verdict in kinds:
            cand = _given_candidates(graph, kind, candidates, rng)
            for canary, g0, g1 in canary_pairs(graph, kind, rng=rng, **cand):
                label = f"given graph ({graph.num_nodes} nodes): {kind} {canary}"
                consider(measure_pair(step, g0, g1, kind, canary, rng, label, realised=realised), "given graph", verdict)
    # (b) every small graph, and structured families
    if step.radius is not None:
        sources = list(atlas(max_nodes)) if max_nodes >= 2 else []
        if use_families:
            sources += list(families(step.hub_size))
        for label, g in sources:
            search = "structured families" if not label.startswith("atlas") else f"all graphs ≤ {max_nodes} nodes"
            for kind, verdict in kinds:
                for canary, g0, g1 in canary_pairs(g, kind, rng=rng):
                    consider(measure_pair(step, g0, g1, kind, canary, rng, f"{label}: {kind} {canary}"),
                             search, verdict)
    # (c) a map not linear in X: every pair was screened; the best ones get the full ascent
    for g0, g1, kind, canary, label, search, x in select_finalists(finalists, FINALISTS):
        ms = measure_pair(step, g0, g1, kind, canary, rng, label + " (long)", effort=LONG_ASCENT,
                          realised=realised if search == "given graph" else None, seeds=(x,))
        consider([m for m in ms if "projected ascent" in m.found_by], search, True)
    res.seconds = time.perf_counter() - t0
    return res


@dataclass
class ProbeReport:
    target: str
    config: dict[str, Any]
    steps: list[StepResult]
    seconds: float
    dataset: str
    unprobed: str | None = None
    tight: dict[str, Any] | None = None

    @property
    def violation(self) -> bool:
        return any(s.violation for s in self.steps)

    @property
    def not_probed(self) -> str | None:
        """Why the probe cannot pass this target: no step to probe, or a step with no measured pair
        (None where every step was measured)."""
        if self.unprobed:
            return self.unprobed
        missing = [r.step.name for r in self.steps if r.best is None]
        if missing:
            return f"no pair in the claim's domain was measured for step(s) {', '.join(missing)}"
        return None

    @property
    def status(self) -> str:
        """``violation``, ``not probed``, ``no witness found`` (every step probed and at or below its
        claim, one at least only by a search that proves nothing: a map not linear in its input) or
        ``pass`` (every step probed, exactly where its map is linear, and at or below its claim)."""
        if self.violation:
            return "violation"
        if self.not_probed:
            return "not probed"
        return "no witness found" if any(s.searched_only for s in self.steps) else "pass"

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "config": self.config, "dataset": self.dataset,
                "violation": self.violation, "status": self.status, "not_probed": self.not_probed,
                "seconds": round(self.seconds, 3), "steps": [s.to_dict() for s in self.steps],
                "unprobed": self.unprobed, "tight": self.tight}


def probe_sampled(step: SampledStep, graph: Data, *, candidates: int = 32, use_families: bool = True,
                  seed: int = 0) -> StepResult:
    """A step measured on sampled couplings: every node its sources name × its batch and model seeds
    (world 0 = world 1's batch without the node)."""
    res = StepResult(step)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    for label, g, nodes in step.sources(graph, candidates, rng, use_families):
        search = "given graph" if label.startswith("given") else "structured families"
        for z in nodes:
            for batch_seed in step.batch_seeds:
                for model_seed in step.model_seeds:
                    c = step.change(g, int(z), batch_seed, model_seed)
                    if c.claimed == 0 and c.measured == 0:
                        continue  # the node is in no part of this batch
                    m = Measurement(c.measured, c.claimed, "node", int(z), isolate(g, int(z)), g, None, "sampled",
                                    f"{label}: node {z}, batch seed {batch_seed}, model seed {model_seed} "
                                    f"({step.describe(c.info)})")
                    m.extra = {"batch_seed": batch_seed, "model_seed": model_seed, **c.info}
                    res.pairs += 1
                    _keep(res.by_search, f"{search} [sampled X]", m)
                    if res.best is None or m.ratio > res.best.ratio:
                        res.best = m
    res.seconds = time.perf_counter() - t0
    return res


def _label(target: Any) -> str:
    return target.name or f"{type(target).__module__}.{type(target).__qualname__}"


def probe(target: Any, graph: Data, *, candidates: int = 32, max_nodes: int = 5, use_families: bool = True,
          seed: int = 0, out: str | Path | None = None, dataset: str = "", tight: bool = False) -> ProbeReport:
    """Probe every step of `target` (its ``step_maps``); with `tight`, also the target's own tight
    pair; with `out`, write each step's witness there and recompute it. On one torch thread, as a
    run is (``one_torch_thread``): on two loaded cores index_add_ on 5 × 32 took 0.11 s with two
    threads against 5 µs with one."""
    t0 = time.perf_counter()
    with one_torch_thread():  # many small ops: a second intra-op thread costs far more than it gives
        return _probe(target, graph, candidates=candidates, max_nodes=max_nodes, use_families=use_families,
                      seed=seed, out=out, dataset=dataset, tight=tight, t0=t0)


def _probe(target: Any, graph: Data, *, candidates: int, max_nodes: int, use_families: bool, seed: int,
           out: str | Path | None, dataset: str, tight: bool, t0: float) -> ProbeReport:
    import dataclasses

    steps = target.step_maps(graph)
    results = [probe_sampled(s, graph, candidates=candidates, use_families=use_families, seed=seed)
               if isinstance(s, SampledStep) else
               probe_step(s, graph, candidates=candidates, max_nodes=max_nodes, use_families=use_families, seed=seed)
               for s in steps]
    config = {k: v for k, v in dataclasses.asdict(target.config).items()}
    report = ProbeReport(_label(target), config, results, 0.0, dataset)
    if not steps:
        report.unprobed = (f"not probed: {_label(target)} declares no noisy step in this configuration "
                           f"(unit={target.unit}): neither a step map (Target.step_maps), a declared "
                           f"step (Target.declared_steps), nor a released MechanismStep with a mean at a "
                           f"claimed Δ (Claim.sensitivity)")
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(results):
            if r.best is None:
                continue
            path = Path(out) / f"witness-{_label(target)}-step{i}.json"
            W.save(path, target=target, step=r.step, m=r.best)
            r.witness = str(path)
            r.recomputed = recompute(path)
    if tight:
        report.tight = tight_canary(target, graph, out=out)
    report.seconds = time.perf_counter() - t0
    return report


def render(report: ProbeReport) -> str:
    lines = [f"sensitivity probe: {report.target} on {report.dataset} ({report.seconds:.1f} s)"]
    if report.unprobed:
        lines.append("  " + report.unprobed)
    for r in report.steps:
        b = r.best
        if b is None:
            lines.append(f"  {r.step.name}: not probed: no pair in the claim's domain was measured")
            continue
        flag = "VIOLATION" if r.violation else (SEARCHED if r.searched_only else "ok")
        lines.append(f"  {r.step.name} [{r.step.norm}, {'/'.join(r.step.kinds)}]: measured {b.measured:.6g} / "
                     f"claimed {b.claimed:.6g} = {b.ratio:.4f}  {flag}")
        lines.append(f"      found by: {b.found_by}")
        for search, row in r.by_search.items():
            lines.append(f"      {search}: {row['measured']:.6g} / {row['claimed']:.6g} = {row['ratio']:.4f}")
        for kind, row in r.extra.items():
            lines.append(f"      (info) {kind} canary: {row['measured']:.6g} / {row['claimed']:.6g} = "
                         f"{row['ratio']:.4f}")
        if r.witness:
            lines.append(f"      witness: {r.witness} (recomputed Δ {r.recomputed:.6g})")
    if report.tight:
        lines.append("  " + report.tight["line"])
    verdict = {"violation": "SENSITIVITY VIOLATION", "pass": "no step above its claim",
               "no witness found": f"no step above its claim: {SEARCHED}",
               "not probed": f"NOT PROBED ({report.not_probed})"}[report.status]
    lines.append("verdict: " + verdict)
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# witnesses: recomputing one, and a target's tight pair
# ---------------------------------------------------------------------------------------------
def recompute(path_or_doc: str | Path | dict[str, Any]) -> float:
    """The witness's Δ recomputed through the target's code (must equal the stored ``measured``)."""
    doc = path_or_doc if isinstance(path_or_doc, dict) else W.load(path_or_doc)
    target = W.build_target(doc)
    base = doc["g1"] if doc["canary"]["kind"] == "node" else doc["g0"]
    steps = {s.name: s for s in target.step_maps(base)}
    if doc["step"] not in steps:
        raise ValueError(f"the target has no step {doc['step']!r} (steps: {', '.join(steps)})")
    step = steps[doc["step"]]
    if isinstance(step, SampledStep):
        s = doc["sampled"]
        return step.change(doc["g1"], int(doc["canary"]["node"]), int(s["batch_seed"]), int(s["model_seed"])).measured
    kind = doc["canary"]["kind"]
    canary = doc["canary"]["node"] if kind == "node" else tuple(doc["canary"]["edge"])
    x = doc["x"]
    if x is None:
        if step.realised is None:
            raise ValueError("the witness's input is the realised X but the step cannot compute it")
        x = step.realised(doc["g1"])
    return evaluate(step, doc["g0"], doc["g1"], kind, canary, x)


def tight_canary(target: Any, graph: Data, *, out: str | Path | None = None, candidates: int = 24,
                 seed: int = 0) -> dict[str, Any] | None:
    """The target's tight pair (its ``tight_pair`` hook; None where it has none) measured on its step
    with the target's own X, beside the target's numbers against `candidates` canaries of the given
    graph; with `out`, written as a witness and recomputed."""
    rng = np.random.default_rng(seed)
    pair = target.tight_pair(graph, rng)
    if pair is None:
        return None
    step = next(s for s in target.step_maps(graph) if s.name == pair.step)
    x = step.realised(pair.g1)
    measured = evaluate(step, pair.g0, pair.g1, pair.kind, pair.canary, x)
    claimed = step.claimed(pair.g0, pair.g1)
    cand = _given_candidates(graph, pair.kind, candidates, rng)
    given = list(canary_pairs(graph, pair.kind, rng=rng, **cand))
    res = {"label": pair.label, "step": pair.step, "measured": measured, "claimed": claimed,
           "ratio": measured / claimed, **pair.summary(given), "given_candidates": candidates}
    if out is not None:
        m = Measurement(measured, claimed, pair.kind, pair.canary, pair.g0, pair.g1, x, "realised", res["found_by"])
        path = Path(out) / f"witness-{_label(target)}-tight.json"
        W.save(path, target=target, step=step, m=m, extra={"tight": res})
        res["witness"] = str(path)
        res["recomputed"] = recompute(path)
    res["line"] = pair.render(res)
    return res
