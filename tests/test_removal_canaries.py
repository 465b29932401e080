"""Removal canaries: the half of the neighbouring relation where world 0 removes an existing edge
or node (canaries.edge_removal, canaries.node.IsolatingNode), and their enumeration."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.play.data import csbm as make_csbm
from audit.play.data import degrees, has_edge
from canaries import base as canaries
from canaries.edge_removal import (IsolatingEdge, MinDegreeEdge, RandomRemovedEdge, WorstRemovedEdge,
                                   relation_shares)
from canaries.node import IsolatingNode
from graphs.ops import add_edge
from targets.base import build


def _check_removal(pair, graph):
    u, v = pair.info["edge"]
    assert pair.info["relation"] == "remove"
    assert has_edge(pair.g1, u, v) and has_edge(pair.g1, v, u)
    assert not has_edge(pair.g0, u, v) and not has_edge(pair.g0, v, u)
    assert pair.g1.edge_index.size(1) == pair.g0.edge_index.size(1) + 2
    assert torch.equal(pair.g0.x, pair.g1.x)


def _regular(n=12, k=2):
    """A cycle with chords: every node of degree 2k (no leaf)."""
    g = make_csbm(n=n, avg_degree=2, seed=0)
    g.edge_index = torch.empty(2, 0, dtype=torch.long)
    for i in range(n):
        for s in range(1, k + 1):
            g = add_edge(g, i, (i + s) % n)
    return g


def test_random_removal_removes_an_existing_edge(csbm):
    pair = RandomRemovedEdge().worlds(csbm, np.random.default_rng(0))
    _check_removal(pair, csbm)
    assert pair.g1 is csbm
    other = RandomRemovedEdge().worlds(csbm, np.random.default_rng(1))
    assert other.info["edge"] != pair.info["edge"]


def test_isolating_edge_on_a_graph_with_leaves(csbm):
    pair = IsolatingEdge().worlds(csbm, np.random.default_rng(0))
    _check_removal(pair, csbm)
    (leaf,) = pair.info["isolates"]
    assert int(degrees(pair.g1)[leaf]) == 1 and int(degrees(pair.g0)[leaf]) == 0
    assert pair.info["min_degree"] == {"with_edge": 1, "without_edge": 0}


def test_isolating_edge_without_leaves_builds_the_pair():
    g = _regular()
    assert int(degrees(g).min()) == 4
    pair = IsolatingEdge().worlds(g, np.random.default_rng(0))
    _check_removal(pair, g)
    (leaf,) = pair.info["isolates"]
    assert int(degrees(pair.g1)[leaf]) == 1 and int(degrees(pair.g0)[leaf]) == 0
    assert pair.info["graph_modified"]["edges_dropped_in_both_worlds"] == 3
    # every other node keeps its edges that do not touch the leaf
    assert pair.g1.edge_index.size(1) == g.edge_index.size(1) - 2 * 3


def test_min_degree_edge_lowers_the_minimum_without_isolating():
    g = _regular()
    g = add_edge(g, 0, 6)  # node 0 and 6 now above the minimum 4
    pair = MinDegreeEdge().worlds(g, np.random.default_rng(0))
    _check_removal(pair, g)
    assert min(pair.info["degrees"]) == 4 and pair.info["isolates"] == []
    assert pair.info["min_degree"] == {"with_edge": 4, "without_edge": 3}


def test_relation_shares_count_edges():
    g = make_csbm(n=8, avg_degree=2, seed=0)
    g.edge_index = torch.empty(2, 0, dtype=torch.long)
    for u, v in [(0, 1), (1, 2), (2, 3), (3, 0), (0, 4)]:  # a square with one pendant edge
        g = add_edge(g, u, v)
    s = relation_shares(g)
    assert s["edges"] == 5 and s["min_degree"] == 1
    assert s["isolating"] == pytest.approx(1 / 5) and s["at_min_degree"] == pytest.approx(1 / 5)


def test_worst_removed_edge_maximises_the_noiseless_change(small_csbm):
    target = build("gaussian", epsilon=1.0)
    pair = WorstRemovedEdge(candidates=16).worlds(small_csbm, np.random.default_rng(0), target)
    _check_removal(pair, small_csbm)
    change = float((target.noiseless(pair.g1).double() - target.noiseless(pair.g0).double()).norm())
    assert change == pytest.approx(pair.info["noiseless_change"])
    assert pair.info["noiseless_change"] >= pair.info["random_median_change"]
    with pytest.raises(ValueError, match="noiseless"):
        WorstRemovedEdge().worlds(small_csbm, np.random.default_rng(0), None)


def test_isolating_node_leaves_a_neighbour_without_edges(csbm):
    pair = IsolatingNode().worlds(csbm, np.random.default_rng(0))
    z = pair.info["node"]
    assert bool(csbm.train_mask[z]) and not bool(pair.g0.train_mask[z])
    assert int(degrees(pair.g0)[z]) == 0 and int(degrees(pair.g1)[z]) > 0
    assert pair.info["isolates"], "csbm has leaves: some training node is a leaf's only neighbour"
    for w in pair.info["isolates"]:
        assert int(degrees(pair.g1)[w]) == 1 and int(degrees(pair.g0)[w]) == 0


def test_enumeration_covers_both_halves_of_the_relation(small_csbm):
    edge_target = build("gaussian", epsilon=1.0)
    names = canaries.relation_canaries(edge_target, small_csbm)
    assert {"random-edge", "worst-edge", "remove-edge", "isolating-edge", "min-degree-edge",
            "worst-remove-edge"} <= set(names)
    assert not any(canaries.get(n).unit == "node" for n in names)
    relations = {canaries.get(n).relation for n in names}
    assert relations == {"insert", "remove"}
    node_target = build("gap", epsilon=1.0, unit="node")
    node_names = canaries.relation_canaries(node_target, small_csbm)
    assert {"remove-node", "isolating-node", "insert-node"} <= set(node_names)
    assert "dirac-gradient" not in node_names and "remove-edge" not in node_names
