"""Worst-case sensitivity probe: measured vs claimed Δ of every noisy step a claim charges.

A DP claim holds for every neighbouring pair in its domain, so the auditor may choose the graph,
the features and the canary. For each step (:mod:`canaries.sensitivity_maps`: the step's noiseless
output is linear in a held-fixed input X, ``out = apply(graph, X)``) the probe maximises
``‖apply(g1, X) − apply(g0, X)‖`` (ℓ2 for Gaussian mechanisms, Σ-of-row-ℓ2 for GCON's Ψ) over

(a) canaries on the given graph: every edge / a ranked sample of non-edges (lowest degree,
    feature-extreme, random) / nodes, with the target's own X (``realised``) and the worst X;
(b) small graphs: every graph on up to ``max_nodes`` nodes up to isomorphism (networkx atlas),
    every canary on each, and structured families sized to the step (paths, cycles, stars,
    cliques, complete bipartite, random trees, a hub with more leaves than the degree bound);
(c) the input X over the claim's domain (rows of ℓ2 norm ≤ radius, after the target's own
    normalisation or projection): M = apply(g1, I) − apply(g0, I) is computed through the target's
    code, then X maximises ‖M X‖ by enumerating sign patterns (rank-one extreme points, exhaustive
    up to 14 free rows) and by projected ascent from many starts (X ← rownormalise(∇), a monotone
    step for a convex objective over a product of balls), keeping the best.

The best pair per step (largest measured/claimed) is written as a witness (:mod:`canaries.witness`)
and recomputed from the file through the target's code before it is reported. Measured above
claimed by more than ``rtol`` (1e-6 relative) is a sensitivity violation (exit status 1).

The command ``python -m audit sensitivity`` (``audit/cli.py``) calls :func:`probe` and prints
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

from canaries import witness as W
from graphs.ops import undirected_pairs
from graphs.ops import add_edge
from canaries.sensitivity_maps import StepMap, hub_size, steps_for
from canaries.worstcase_graphs import atlas, canary_pairs, families

RTOL = 1e-6


# ---------------------------------------------------------------------------------------------
# the norm of a change, and the worst input X
# ---------------------------------------------------------------------------------------------
def change_norm(diff: torch.Tensor, norm: str) -> float:
    diff = diff.double()
    if norm == "l21":
        return float(diff.norm(dim=1).sum())
    return float(diff.norm())


def _value(m: np.ndarray, x: np.ndarray, norm: str) -> float:
    y = m @ x
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
    h = max(1, min(width or b, b))
    if b <= exhaustive:
        rest = list(itertools.product((1.0, -1.0), repeat=b - 1))
        signs = np.array([(1.0, *r) for r in rest], dtype=float).reshape(len(rest), b)
    else:
        signs = rng.choice((1.0, -1.0), size=(512, b))
    y = m @ signs.T  # a × S
    vals = np.abs(y).sum(0) if norm == "l21" else np.linalg.norm(y, axis=0)
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
                 found_by: str, *, realised: torch.Tensor | None = None, search_x: bool = True
                 ) -> list[Measurement]:
    """Measurements of one pair: with the realised X (if given) and with the worst X in the domain."""
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
        if rows.numel() == 0:
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
    return out


# ---------------------------------------------------------------------------------------------
# the search
# ---------------------------------------------------------------------------------------------
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

    def to_dict(self) -> dict[str, Any]:
        b = self.best
        return {
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
    from canaries.edge import FeatureExtremeEdge, LowDegreeEdge, _random_non_edges

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
        absent += _random_non_edges(graph, max(1, count // 4), rng)
    except ValueError:
        pass
    return {"edges": list(dict.fromkeys(present + absent))}


def probe_step(step: StepMap, graph: Data, *, candidates: int = 32, max_nodes: int = 5,
               use_families: bool = True, seed: int = 0, given: bool = True) -> StepResult:
    rng = np.random.default_rng(seed)
    res = StepResult(step)
    t0 = time.perf_counter()

    def consider(ms: list[Measurement], search: str, verdict: bool) -> None:
        for m in ms:
            res.pairs += 1
            if verdict:
                _keep(res.by_search, f"{search} [{m.x_kind} X]", m)
                if res.best is None or m.ratio > res.best.ratio:
                    res.best = m
            else:
                _keep(res.extra, m.kind, m)

    kinds = [(k, True) for k in step.kinds] + [(k, False) for k in step.extra_kinds]
    # (a) the given graph
    if given:
        realised = None
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
            sources += list(families(hub_size(step)))
        for label, g in sources:
            search = "structured families" if not label.startswith("atlas") else f"all graphs ≤ {max_nodes} nodes"
            for kind, verdict in kinds:
                for canary, g0, g1 in canary_pairs(g, kind, rng=rng):
                    consider(measure_pair(step, g0, g1, kind, canary, rng, f"{label}: {kind} {canary}"),
                             search, verdict)
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
    gcon: dict[str, Any] | None = None

    @property
    def violation(self) -> bool:
        return any(s.violation for s in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "config": self.config, "dataset": self.dataset,
                "violation": self.violation, "seconds": round(self.seconds, 3),
                "steps": [s.to_dict() for s in self.steps], "unprobed": self.unprobed, "gcon": self.gcon}


def probe_heterpoisson(target: Any, graph: Data, *, candidates: int = 32, batches: int = 4,
                       use_families: bool = True, seed: int = 0) -> StepResult:
    """HeterPoisson: one DP-SGD step's clipped gradient sum, node canaries, coupled batches
    (world 0 = world 1's batch without the node), over nodes × batch seeds × model seeds, on the
    given graph and on hub/star/clique families (every node a training node)."""
    from canaries.sensitivity_maps import heterpoisson_step_change
    from canaries.worstcase_graphs import make_graph

    cfg = target.config
    step = StepMap(name="one DP-SGD step (Σ clipped sub-graph gradients)", norm="l2", kinds=("node",),
                   apply=lambda g, x: x, claimed=lambda g0, g1: None, radius=None, width=0,
                   covers=["every DP-SGD step"],
                   note="claimed per pair: c if the node is central, else 2c per star it is a peripheral in")
    res = StepResult(step)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    sources: list[tuple[str, Data, list[int]]] = []
    train = graph.train_mask.nonzero().view(-1)
    deg = torch.bincount(graph.edge_index[0], minlength=graph.num_nodes)
    top = train[torch.argsort(-deg[train])][: max(1, candidates // 2)].tolist()
    rand = rng.choice(train.numel(), size=min(train.numel(), max(1, candidates // 2)), replace=False)
    sources.append((f"given graph ({graph.num_nodes} nodes)", graph, list(dict.fromkeys(top + train[rand].tolist()))))
    if use_families:
        k = max(4, 2 * cfg.neighbors + 2)
        hub = make_graph(k + 1, [(0, i) for i in range(1, k + 1)], features=graph.x.size(1), classes=2)
        clique = make_graph(6, [(i, j) for i in range(6) for j in range(i + 1, 6)], features=graph.x.size(1))
        sources += [(f"hub + {k} leaves", hub, [0, 1]), ("clique K6", clique, [0])]
    for label, g, nodes in sources:
        search = "given graph" if label.startswith("given") else "structured families"
        for z in nodes:
            for b in range(batches):
                for model_seed in (0, 1):
                    measured, claimed, info = heterpoisson_step_change(
                        target, g, int(z), torch.Generator().manual_seed(1000 * b + 7), model_seed)
                    if claimed == 0 and measured == 0:
                        continue  # the node is in no sub-graph of this batch
                    m = Measurement(measured, claimed, "node", int(z), isolate_for(g, int(z)), g, None, "sampled",
                                    f"{label}: node {z}, batch seed {1000 * b + 7}, model seed {model_seed} "
                                    f"(central={info['central']}, peripheral stars={info['peripheral_stars']})")
                    m.extra = {"batch_seed": 1000 * b + 7, "model_seed": model_seed, **info}
                    res.pairs += 1
                    _keep(res.by_search, f"{search} [sampled X]", m)
                    if res.best is None or m.ratio > res.best.ratio:
                        res.best = m
    res.seconds = time.perf_counter() - t0
    return res


def isolate_for(graph: Data, node: int) -> Data:
    from canaries.node import isolate

    return isolate(graph, node)


def probe(target: Any, graph: Data, *, candidates: int = 32, max_nodes: int = 5, use_families: bool = True,
          seed: int = 0, out: str | Path | None = None, dataset: str = "") -> ProbeReport:
    """Probe every step of `target`; with `out`, write each step's witness there and recompute it."""
    import dataclasses


    t0 = time.perf_counter()
    steps = steps_for(target, graph)
    results = [probe_step(s, graph, candidates=candidates, max_nodes=max_nodes, use_families=use_families,
                          seed=seed) for s in steps]
    if target.name == "heterpoisson":
        results = [probe_heterpoisson(target, graph, candidates=candidates, use_families=use_families, seed=seed)]
        steps = [results[0].step]
    config = {k: v for k, v in dataclasses.asdict(target.config).items()}
    report = ProbeReport(target.name, config, results, 0.0, dataset)
    if not steps:
        report.unprobed = (f"no sensitivity adapter for {target.name!r} in this configuration "
                           f"(unit={getattr(target.config, 'unit', '?')})")
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        for i, r in enumerate(results):
            if r.best is None:
                continue
            path = Path(out) / f"witness-{target.name}-step{i}.json"
            W.save(path, target=target, step=r.step, m=r.best)
            r.witness = str(path)
            r.recomputed = recompute(path)
    report.seconds = time.perf_counter() - t0
    return report


def render(report: ProbeReport) -> str:
    lines = [f"sensitivity probe: {report.target} on {report.dataset} ({report.seconds:.1f} s)"]
    if report.unprobed:
        lines.append("  " + report.unprobed)
    for r in report.steps:
        b = r.best
        if b is None:
            lines.append(f"  {r.step.name}: no pair in the claim's domain")
            continue
        flag = "VIOLATION" if r.violation else "ok"
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
    if report.gcon:
        g = report.gcon
        lines.append(f"  GCON tight canary (§7.1): ψ {g['psi']:.6g} / Ψ {g['Psi']:.6g}; ‖ΔΘ*‖ "
                     f"{g['minimiser_change']:.4g} (Theorem-1 bound {g['minimiser_change_bound']:.4g}) vs worst "
                     f"given-graph edge {g['given_worst_minimiser_change']:.4g}; noise-term privacy loss at the "
                     f"mean {g['noise_loss']:.4g} vs {g['given_worst_noise_loss']:.4g} (budget {g['noise_loss_budget']:.4g})"
                     f" (×{g['gain']:.1f}); witness {g.get('witness')}")
    lines.append("verdict: " + ("SENSITIVITY VIOLATION" if report.violation else "no step above its claim"))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# witnesses: recomputing one, and GCON's tight canary (spec gcon.md §7.1)
# ---------------------------------------------------------------------------------------------
def recompute(path_or_doc: str | Path | dict[str, Any]) -> float:
    """The witness's Δ recomputed through the target's code (must equal the stored ``measured``)."""
    doc = path_or_doc if isinstance(path_or_doc, dict) else W.load(path_or_doc)
    target = W.build_target(doc)
    if doc["target"] == "heterpoisson":
        from canaries.sensitivity_maps import heterpoisson_step_change

        s = doc["sampled"]
        return heterpoisson_step_change(target, doc["g1"], int(doc["canary"]["node"]),
                                        torch.Generator().manual_seed(int(s["batch_seed"])), int(s["model_seed"]))[0]
    steps = {s.name: s for s in steps_for(target, doc["g1"] if doc["canary"]["kind"] == "node" else doc["g0"])}
    if doc["step"] not in steps:
        raise ValueError(f"the target has no step {doc['step']!r} (steps: {', '.join(steps)})")
    step = steps[doc["step"]]
    kind = doc["canary"]["kind"]
    canary = doc["canary"]["node"] if kind == "node" else tuple(doc["canary"]["edge"])
    x = doc["x"]
    if x is None:
        if step.realised is None:
            raise ValueError("the witness's input is the realised X but the step cannot compute it")
        x = step.realised(doc["g1"])
    return evaluate(step, doc["g0"], doc["g1"], kind, canary, x)


def gcon_tight_canary(target: Any, graph: Data, *, out: str | Path | None = None, scale: float = 1e4,
                      directions: int = 6, candidates: int = 24, seed: int = 0) -> dict[str, Any]:
    """Append two isolated, unmasked nodes u, v (rows of the loss through the pseudo-labels) whose
    raw features are ±scale·a, so that the (affine) encoder maps them to x_u ≈ −x_v; the canary is
    the edge {u, v}. Theorem 1's worst case for ψ: 2(1−α) at every m ≥ 1. Returns ψ, Ψ, the
    minimiser change ‖Θ*(g1) − Θ*(g0)‖, the noise-density privacy loss at the noiseless minimiser
    (:func:`canaries.sensitivity_maps.gcon_noise_loss`) against its budget, and the same two for the
    worst of `candidates` edges of the given graph, and writes the witness to `out`."""
    from canaries.sensitivity_maps import gcon_minimiser_change, gcon_noise_loss, gcon_steps
    from canaries.worstcase_graphs import canary_pairs

    step = gcon_steps(target)[0]
    rng = np.random.default_rng(seed)
    n, f = graph.num_nodes, graph.x.size(1)
    best: tuple[float, Any] | None = None
    for k in range(directions):
        a = torch.tensor(rng.standard_normal(f), dtype=torch.float32)
        a = a / a.norm()
        g0 = graph.clone()
        g0.x = torch.cat([graph.x, (scale * a).unsqueeze(0), (-scale * a).unsqueeze(0)])
        g0.y = torch.cat([graph.y, graph.y[:2]])
        for key in ("train_mask", "val_mask", "test_mask"):
            setattr(g0, key, torch.cat([getattr(graph, key), torch.zeros(2, dtype=torch.bool)]))
        g0.num_nodes = n + 2
        g1 = add_edge(g0, n, n + 1)
        change = gcon_minimiser_change(target, g0, g1)
        if best is None or change > best[0]:
            best = (change, (g0, g1, k))
    assert best is not None
    change, (g0, g1, k) = best
    x = step.realised(g1)
    psi = evaluate(step, g0, g1, "edge", (n, n + 1), x)
    Psi = step.claimed(g0, g1)
    # the given graph's worst edge by minimiser change (ranked sample)
    worst, worst_loss = 0.0, 0.0
    cand = _given_candidates(graph, "edge", candidates, rng)
    for canary, h0, h1 in canary_pairs(graph, "edge", rng=rng, **cand):
        worst = max(worst, gcon_minimiser_change(target, h0, h1))
        worst_loss = max(worst_loss, gcon_noise_loss(target, h0, h1))
    det = target.claim(g0).details
    # strong convexity: ‖Δθ_j‖ ≤ ‖∇L_g1 − ∇L_g0‖/λ ≤ (c1 + c2·c_θ)·Ψ/(n1·λ) per column (‖θ_j‖ ≤ c_θ)
    bound = math.sqrt(det["classes"]) * (det["c1"] + det["c2"] * det["c_theta"]) * Psi / (det["n1"] * det["lam_solver"])
    res = {"psi": psi, "Psi": Psi, "psi_ratio": psi / Psi, "minimiser_change": change,
           "minimiser_change_bound": bound,
           "given_worst_minimiser_change": worst, "gain": change / worst if worst > 0 else math.inf,
           "noise_loss": gcon_noise_loss(target, g0, g1), "given_worst_noise_loss": worst_loss,
           "noise_loss_budget": max(target.config.epsilon - det["eps_lambda"], target.config.omega * target.config.epsilon),
           "x_u_dot_x_v": float(x[n] @ x[n + 1]), "direction": k,
           "edge": [n, n + 1], "given_candidates": candidates}
    if out is not None:
        m = Measurement(psi, Psi, "edge", (n, n + 1), g0, g1, x, "realised",
                        f"GCON tight canary (spec §7.1): nodes {n}, {n + 1} appended isolated with raw features "
                        f"±{scale:g}·a (encoder output x_u·x_v = {res['x_u_dot_x_v']:.6f})")
        path = Path(out) / "witness-gcon-tight.json"
        W.save(path, target=target, step=step, m=m, extra={"gcon": res})
        res["witness"] = str(path)
        res["recomputed"] = recompute(path)
    return res
