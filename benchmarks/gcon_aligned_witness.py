"""A GCON edge pair built to align what the noise term charges (issue #47), written as a witness file.

Spec §7.1's tight canary (x_u = −x_v, isolated, ψ = Ψ at m = 1) moves each endpoint's row along its own
feature: Δz_u = −Δz_v = −(1−α)·x_u, so every column's Δb_j lies along x_u and equals, up to sign,
(1−α)·x_u·(ℓ'(x_uᵀθ_j; y_uj) − ℓ'(x_vᵀθ_j; y_vj)) plus the curvature part. It is largest when the two
endpoints' ℓ' have opposite signs and saturate, i.e. when x_vᵀθ_j is far from y_vj and x_uᵀθ_j far from
y_uj on the other side, which needs ‖θ_j‖ large along x_u. The adversary (features and labels are public)
gets that by giving every other node the same feature direction and one class: then θ_class ≈
−max_y |ℓ'(0; y)|/λ · (−e) sits near the θ bound, along e.

The graph: ``n`` nodes, all raw features ±scale·a (the encoder maps them to ±e), the majority at +e in
class 0 joined by random edges (δ = 1/|E| as on csbm; they change no row: all rows there are e), node v
at +e in class 1 (a training node, so its label is kept), node u at −e in class 0; u and v isolated, the
canary the edge {u, v}. Written over a copy of a GCON tight-canary witness (format and config kept).

    python benchmarks/gcon_aligned_witness.py TIGHT_WITNESS OUT [--n 600] [--edges 2400]
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.utils import coalesce, to_undirected

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphs.datasets import graph_to_dict  # noqa: E402


def aligned_graph(n: int, edges: int, features: int = 32, scale: float = 1e4, seed: int = 0) -> Data:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(features)
    a /= np.linalg.norm(a)
    u, v = n - 2, n - 1
    x = np.tile(scale * a, (n, 1))
    x[u] = -scale * a
    y = np.zeros(n, dtype=np.int64)
    y[v] = 1
    src = rng.integers(0, n - 2, edges)
    dst = rng.integers(0, n - 2, edges)
    keep = src != dst
    ei = torch.tensor(np.stack([src[keep], dst[keep]]), dtype=torch.long)
    ei = coalesce(to_undirected(ei, num_nodes=n), num_nodes=n)
    order = rng.permutation(n - 2)
    train = np.zeros(n, dtype=bool)
    val = np.zeros(n, dtype=bool)
    test = np.zeros(n, dtype=bool)
    train[order[:60]] = True
    val[order[60:120]] = True
    test[order[120:240]] = True
    train[[u, v]] = True
    g = Data(x=torch.tensor(x, dtype=torch.float32), edge_index=ei, y=torch.tensor(y),
             train_mask=torch.tensor(train), val_mask=torch.tensor(val), test_mask=torch.tensor(test))
    g.num_nodes = n
    return g


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tight_witness")
    p.add_argument("out")
    p.add_argument("--n", type=int, default=600)
    p.add_argument("--edges", type=int, default=2400)
    args = p.parse_args(argv)
    doc = json.loads(Path(args.tight_witness).read_text())
    g = aligned_graph(args.n, args.edges)
    u, v = args.n - 2, args.n - 1
    out = copy.deepcopy(doc)
    out["graph"] = graph_to_dict(g)
    out["canary"] = {"kind": "edge", "edge": [u, v]}
    out["found_by"] = (f"aligned GCON pair (benchmarks/gcon_aligned_witness.py): {args.n - 2} nodes at +e in class 0, "
                       f"v = {v} at +e in class 1, u = {u} at −e in class 0, canary edge ({u}, {v})")
    out["tight"] = {**doc.get("tight", {}), "edge": [u, v], "found_by": out["found_by"]}
    Path(args.out).write_text(json.dumps(out))
    print(f"wrote {args.out}: n = {args.n}, |E| = {g.edge_index.size(1)} directed, canary ({u}, {v})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
