"""Sensitivity witnesses: the worst neighbouring pair the probe found, as a file the game can play.

File format (JSON, ``format = "dpgnn-audit/sensitivity-witness/1"``)::

    {
      "format": "dpgnn-audit/sensitivity-witness/1",
      "target": "NAME" | "module:Class" | "file.py:Class", "config": {...every field of the target's config...},
      "step": "hops 1-2 (S_k = Aᵀ H_(k-1))", "covers": ["hop 1", "hop 2"], "norm": "l2",
      "canary": {"kind": "edge" | "directed" | "node", "edge": [u, v] | "node": z},
      "graph": {"num_nodes": n, "x": {"dtype", "shape", "data"}, "edge_index": {...}, "y": {...},
                "train_mask": {...}, "val_mask": {...}, "test_mask": {...}},
      "input": {"kind": "realised" | "adversarial" | "sampled", "x": {"dtype", "shape", "data"} | null},
      "sampled": {"batch_seed", "model_seed", ...}   (a sampled step only: the batch and model)
      "measured": Δ, "claimed": Δ_claim, "ratio": Δ/Δ_claim, "violation": bool,
      "found_by": "...", "created": "ISO time"
    }

``graph`` is the base world the game starts from: world 0 (without the canary) for ``edge`` and
``directed`` canaries, world 1 (with the node) for ``node`` canaries; where the step's X is the
graph's features (``StepMap.input_is_features``, a declared step), its features are X. The other world is rebuilt
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
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch_geometric.data import Data

from canaries.base import Canary
from canaries.edge import CanaryPair
from canaries.node import isolate
from targets.base import Unit
from targets.common.probe import StepMap, WitnessPlan, with_features
from graphs.datasets import graph_from_dict, graph_to_dict, tensor_from_dict
from graphs.ops import add_directed_edge, add_edge

FORMAT = "dpgnn-audit/sensitivity-witness/1"


def _tensor(t: torch.Tensor) -> dict[str, Any]:
    return {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape), "data": t.reshape(-1).tolist()}


def _config(target: Any) -> dict[str, Any]:
    import dataclasses

    return {k: v for k, v in dataclasses.asdict(target.config).items()}


def save(path: str | Path, *, target: Any, step: Any, m: Any, extra: dict[str, Any] | None = None) -> Path:
    """Write measurement `m` (a :class:`canaries.sensitivity.Measurement`) of `step` as a witness."""
    base = m.g1 if m.kind == "node" else m.g0
    if isinstance(step, StepMap) and step.input_is_features and m.x is not None:
        base = with_features(base, m.x)  # the witness graph carries X into the step (module doc)
    canary = {"kind": m.kind, ("node" if m.kind == "node" else "edge"):
              int(m.canary) if m.kind == "node" else [int(m.canary[0]), int(m.canary[1])]}
    doc = {
        "format": FORMAT, "target": target_spec(target), "config": _config(target),
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
    doc["x"] = tensor_from_dict(doc["input"]["x"]) if doc["input"].get("x") else None
    return doc


def target_spec(target: Any) -> str:
    """What rebuilds `target`'s class: its registry name, else ``package.module:Class``, else
    ``path/to/file.py:Class`` (a user's target loaded from a file)."""
    import inspect

    from targets.base import REGISTRY

    cls = type(target)
    try:
        if cls.name and REGISTRY.get(cls.name) is cls:
            return cls.name
    except (ValueError, ImportError):
        pass
    if not cls.__module__.startswith("_user_module_"):
        return f"{cls.__module__}:{cls.__qualname__}"
    return f"{inspect.getfile(cls)}:{cls.__qualname__}"


def build_target(doc: dict[str, Any]) -> Any:
    from targets.base import build

    cfg = dict(doc["config"])
    return build(doc["target"], **cfg)


def plan(path: str | Path, params: dict[str, str] | None = None) -> WitnessPlan | None:
    """The game's inputs for witness `path`: the target's ``witness_plan`` hook (None where the
    target cannot take the witness's input). `params`: the run's own ``--set`` parameters, kept
    (the witness's config fixes the rest)."""
    from targets.base import get

    doc = {**load(path), "path": str(path)}
    return get(doc["target"]).witness_plan(doc, dict(params or {}))


class WitnessCanary(Canary):
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
    def unit(self) -> Unit:
        return Unit.NODE if self.doc["canary"]["kind"] == "node" else Unit.EDGE

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
