"""Sensitivity witnesses: the worst neighbouring pair the probe found, as a file the game can play.

File format (JSON, ``format = "dpgnn-audit/sensitivity-witness/1"``)::

    {
      "format": "dpgnn-audit/sensitivity-witness/1",
      "target": "gap", "config": {...every field of the target's config...},
      "step": "hops 1-2 (S_k = Aᵀ H_(k-1))", "covers": ["hop 1", "hop 2"], "norm": "l2",
      "canary": {"kind": "edge" | "directed" | "node", "edge": [u, v] | "node": z},
      "graph": {"num_nodes": n, "x": {"dtype", "shape", "data"}, "edge_index": {...}, "y": {...},
                "train_mask": {...}, "val_mask": {...}, "test_mask": {...}},
      "input": {"kind": "realised" | "adversarial" | "sampled", "x": {"dtype", "shape", "data"} | null},
      "sampled": {"batch_seed", "model_seed", ...}   (HeterPoisson only: the batch and model)
      "measured": Δ, "claimed": Δ_claim, "ratio": Δ/Δ_claim, "violation": bool,
      "found_by": "...", "created": "ISO time"
    }

``graph`` is the base world the game starts from: world 0 (without the canary) for ``edge`` and
``directed`` canaries, world 1 (with the node) for ``node`` canaries. The other world is rebuilt
by adding the edge (``graphs.ops.add_edge`` / ``add_directed_edge``) or isolating the node
(``canaries.node.isolate``). ``input`` is the step's held-fixed input X, always stored: ``realised`` means
the target's own X on the probed graph (e.g. DPDGC's W from a fit, X⁽⁰⁾ of the encoder),
``adversarial`` an X in the claim's domain (for a hop ≥ 2 it is a previous release the claim must cover, which the
game cannot force through the graph's features).

:func:`recompute` rebuilds the target from ``config``, the step map, both worlds and X, and returns
the measured Δ again (it must equal ``measured``). :class:`WitnessCanary` (``witness:FILE``) gives
the game the witness pair; ``graphs.datasets.load("witness:FILE")`` gives its base graph.
"""
from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from canaries.edge import CanaryPair
from canaries.node import isolate
from graphs.datasets import graph_from_dict, graph_to_dict
from graphs.ops import add_directed_edge, add_edge

FORMAT = "dpgnn-audit/sensitivity-witness/1"


def _tensor(t: torch.Tensor) -> dict[str, Any]:
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "data": t.reshape(-1).tolist()}


def _untensor(d: dict[str, Any]) -> torch.Tensor:
    return torch.tensor(d["data"], dtype=getattr(torch, d["dtype"])).reshape(d["shape"])


def _config(target: Any) -> dict[str, Any]:
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(target.config).items()}


def save(path: str | Path, *, target: Any, step: Any, m: Any, extra: dict[str, Any] | None = None) -> Path:
    """Write measurement `m` (a :class:`canaries.sensitivity.Measurement`) of `step` as a witness."""
    base = m.g1 if m.kind == "node" else m.g0
    canary = {"kind": m.kind, ("node" if m.kind == "node" else "edge"):
              int(m.canary) if m.kind == "node" else [int(m.canary[0]), int(m.canary[1])]}
    doc = {
        "format": FORMAT, "target": target.name, "config": _config(target),
        "step": step.name, "covers": list(step.covers), "norm": step.norm, "canary": canary,
        "graph": graph_to_dict(base),
        "input": {"kind": m.x_kind, "x": _tensor(m.x.double()) if m.x is not None else None},
        "measured": m.measured, "claimed": m.claimed, "ratio": m.ratio,
        "violation": bool(m.measured > m.claimed * (1 + 1e-6)), "found_by": m.found_by,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        **({"sampled": m.extra} if getattr(m, "extra", None) else {}),
        **(extra or {}),
    }
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, default=str))
    return path


def load(path: str | Path) -> dict[str, Any]:
    """The witness document with ``g0``, ``g1`` (Data) and ``x`` (tensor or None) added."""
    doc = json.loads(Path(path).expanduser().read_text())
    if doc.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a sensitivity witness (format {doc.get('format')!r})")
    base = graph_from_dict(doc["graph"])
    c = doc["canary"]
    if c["kind"] == "node":
        doc["g0"], doc["g1"] = isolate(base, int(c["node"])), base
    elif c["kind"] == "directed":
        doc["g0"], doc["g1"] = base, add_directed_edge(base, *c["edge"])
    else:
        doc["g0"], doc["g1"] = base, add_edge(base, *c["edge"])
    doc["x"] = _untensor(doc["input"]["x"]) if doc["input"].get("x") else None
    return doc


def build_target(doc: dict[str, Any]) -> Any:
    from targets.base import build

    cfg = dict(doc["config"])
    return build(doc["target"], **cfg)


def recompute(path_or_doc: str | Path | dict[str, Any]) -> float:
    """The witness's Δ recomputed through the target's code (must equal the stored ``measured``)."""
    from canaries.sensitivity import evaluate
    from canaries.sensitivity_maps import steps_for

    doc = path_or_doc if isinstance(path_or_doc, dict) else load(path_or_doc)
    target = build_target(doc)
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


class WitnessCanary:
    """The witness pair as the game's two worlds (``--canary witness:FILE``; pair it with
    ``--dataset witness:FILE``). ``worlds`` returns the witness's (g0, g1) whatever graph it is
    given, and says in ``info`` whether that graph was the witness's base graph."""

    name = "witness"

    def __init__(self, path: str | None = None) -> None:
        self.path = path
        self._doc: dict[str, Any] | None = None

    @classmethod
    def parse(cls, text: str) -> WitnessCanary:
        return cls(text)

    @property
    def doc(self) -> dict[str, Any]:
        if self.path is None:
            raise ValueError("the witness canary needs a file: --canary witness:FILE")
        if self._doc is None:
            self._doc = load(self.path)
        return self._doc

    @property
    def unit(self) -> str:
        return "node" if self.doc["canary"]["kind"] == "node" else "edge"

    def worlds(self, graph: Data, rng: np.random.Generator | None = None, target: Any = None) -> CanaryPair:
        from graphs.ops import fingerprint

        doc = self.doc
        base = doc["g1"] if doc["canary"]["kind"] == "node" else doc["g0"]
        same = graph is not None and fingerprint(graph) == fingerprint(base)
        info = {"canary": self.name, "file": str(self.path), "witness_kind": doc["canary"]["kind"],
                **{k: doc["canary"][k] for k in ("edge", "node") if k in doc["canary"]},
                "step": doc["step"], "measured": doc["measured"], "claimed": doc["claimed"],
                "given_graph_is_witness_graph": same,
                "chosen_by": f"sensitivity witness ({doc['found_by']})"}
        return CanaryPair(doc["g0"], doc["g1"], info)


# ---------------------------------------------------------------------------------------------
# GCON's tight canary (spec gcon.md §7.1): two otherwise isolated nodes with opposite features
# ---------------------------------------------------------------------------------------------
def gcon_tight_canary(target: Any, graph: Data, *, out: str | Path | None = None, scale: float = 1e4,
                      directions: int = 6, candidates: int = 24, seed: int = 0) -> dict[str, Any]:
    """Append two isolated, unmasked nodes u, v (rows of the loss through the pseudo-labels) whose
    raw features are ±scale·a, so that the (affine) encoder maps them to x_u ≈ −x_v; the canary is
    the edge {u, v}. Theorem 1's worst case for ψ: 2(1−α) at every m ≥ 1. Returns ψ, Ψ, the
    minimiser change ‖Θ*(g1) − Θ*(g0)‖, the noise-density privacy loss at the noiseless minimiser
    (:func:`canaries.sensitivity_maps.gcon_noise_loss`) against its budget, and the same two for the
    worst of `candidates` edges of the given graph, and writes the witness to `out`."""
    from canaries.sensitivity import Measurement, evaluate
    from canaries.sensitivity_maps import gcon_minimiser_change, gcon_noise_loss, gcon_steps
    from canaries.sensitivity import _given_candidates
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
        save(path, target=target, step=step, m=m, extra={"gcon": res})
        res["witness"] = str(path)
        res["recomputed"] = recompute(path)
    return res
