"""One-run audits on graphs: canaries spread beyond the target's receptive field, and both
analyses of the guesses (Steinke et al.'s and the f-DP one) reported side by side, named."""
import re

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from audit.play.data import load
from audit.play.game import AuditSpec, run_audit
from canaries.spread import interacting, spread_non_edges
from targets.common.accounting import gdp_epsilon, gdp_mu


def _path(n):
    src = torch.arange(n - 1)
    ei = torch.stack([torch.cat([src, src + 1]), torch.cat([src + 1, src])])
    return Data(edge_index=ei, num_nodes=n)


def _dist(g, a, b):
    """Hop distance on a path graph 0–1–…–(n−1)."""
    return abs(a - b)


def test_spread_canaries_on_a_path_keep_their_distance():
    g = _path(200)
    edges, spread = spread_non_edges(g, 10, np.random.default_rng(0), hops=3)
    assert spread == 10 and len({x for e in edges for x in e}) == 20
    for i, (u, v) in enumerate(edges):
        assert abs(u - v) != 1  # a non-edge
        for j, (a, b) in enumerate(edges):
            if i != j:
                assert min(_dist(g, x, y) for x in (u, v) for y in (a, b)) > 3
    assert interacting(g, edges, 3) == 0


def test_interacting_counts_canaries_near_another():
    g = _path(50)
    assert interacting(g, [(0, 2), (4, 6), (30, 32)], 2) == 2  # 2 and 4 are two hops apart
    assert interacting(g, [(0, 2), (4, 6), (30, 32)], 1) == 0


def test_spread_fills_with_node_disjoint_edges_when_the_graph_is_too_small():
    g = load("csbm")
    edges, spread = spread_non_edges(g, 250, np.random.default_rng(1), hops=1)
    assert len(edges) == 250 and 0 < spread < 250
    assert len({x for e in edges for x in e}) == 500
    assert interacting(g, edges[:spread], 1) == 0  # the spread set alone is free of interaction


def test_one_run_result_names_both_bounds_and_the_neighbourhoods(tmp_path):
    r = run_audit(AuditSpec(target="gaussian", epsilon=2.0, trials=200, seed=3, mode="one-run"),
                  out=tmp_path, progress=False)
    one = r["one_run"]
    assert one["steinke"]["eps_lb"] == r["eps_lb"]  # the verdict stands on the assumption-free bound
    f = one["fdp_gaussian"]
    assert f["claimed_mu"] == pytest.approx(gdp_mu(2.0, r["claimed_delta"]))  # the exact Gaussian's μ
    assert f["eps_lb"] == pytest.approx(gdp_epsilon(f["mu_lb"], r["claimed_delta"]))  # that curve's ε at δ
    assert 0 < f["mu_lb"] < f["claimed_mu"] and "Gaussian" in f["analysis"]
    assert f["refutes_mu_gdp_claim"] is False
    c = r["canary"]
    assert c["receptive_hops"] == 1 and c["count"] == 200
    assert "hops from each other" in c["chosen_by"]
    alone = int(re.match(r"(\d+) of 200 canaries have no other canary", c["neighbourhoods"]).group(1))
    assert c["interacting"] + alone == 200


def test_one_run_fdp_flags_a_refuted_mu_gdp_claim(tmp_path):
    r = run_audit(AuditSpec(target="gaussian", epsilon=2.0, trials=200, seed=3, mode="one-run", bug="no-noise"),
                  out=tmp_path, progress=False)
    f = r["one_run"]["fdp_gaussian"]
    assert f["mu_lb"] > f["claimed_mu"] and f["refutes_mu_gdp_claim"] is True
