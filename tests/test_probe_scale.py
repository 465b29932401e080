"""The sensitivity probe on large graphs: the difference matrix near the canary (linear memory)
equals the whole n × n one, and edge membership without Python sets."""
import numpy as np
import pytest
import torch

from audit.play import data
from canaries import sensitivity as S
from canaries.probe_graphs import canary_pairs
from targets.common.probe import StepMap
from graphs.ops import EdgeSet, undirected_pairs
from targets.base import build


@pytest.mark.parametrize("name, params, kind", [
    ("gaussian", {}, "edge"), ("gap", {}, "edge"), ("caribou", {}, "edge"),
    ("gap", {"unit": "node"}, "node"), ("dpdgc", {}, "edge")])
def test_local_difference_equals_the_whole_matrix(name, params, kind):
    graph = data.load("csbm:n=150")
    target = build(name, **params)
    target.prepare(graph) if hasattr(target, "prepare") else None
    steps = [s for s in target.step_maps(graph) if isinstance(s, StepMap)]
    assert steps, f"{name} has a probe adapter"
    rng = np.random.default_rng(0)
    cand = S._given_candidates(graph, kind, 8, rng)
    pairs = list(canary_pairs(graph, kind, rng=rng, **cand))[:6]
    assert len(pairs) >= 3
    compared = 0
    for step in steps:
        if kind not in step.kinds + step.extra_kinds:
            continue
        for canary, g0, g1 in pairs:
            m = S.difference_matrix(step, g0, g1, kind, canary)
            rows, cols, block = S._local_difference(step, g0, g1, kind, canary, block=16)
            dense_rows = (m.abs().sum(1) > 0).nonzero().view(-1)
            dense_cols = (m.abs().sum(0) > 0).nonzero().view(-1)
            assert torch.equal(rows, dense_rows) and torch.equal(cols, dense_cols), (name, canary)
            assert torch.equal(block, m[rows][:, cols])
            assert cols.numel() < graph.num_nodes  # local: not every column
            compared += 1
    assert compared >= 3


def test_edge_set_and_undirected_pairs_agree_with_python_sets():
    graph = data.load("csbm:n=300")
    ei = graph.edge_index
    present = set(map(tuple, ei.t().tolist()))
    edges = EdgeSet(ei)
    rng = np.random.default_rng(1)
    probes = list(present)[:200] + [tuple(map(int, rng.integers(0, 300, 2))) for _ in range(500)]
    assert all((p in edges) == (p in present) for p in probes)
    assert (300, 0) not in edges and (-1, 2) not in edges and len(edges) == len(present)
    und = sorted({(min(u, v), max(u, v)) for u, v in present})
    assert [tuple(map(int, r)) for r in undirected_pairs(graph)] == und
