"""EdgeRand and LapGraph (LinkTeller's DP defences): claims, the perturbations' laws, bugs, API."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from attacks.linkteller import run_linkteller
from audit.play import data
from audit.play.data import add_edge
from audit.testing import audit_claim
from targets.edgerand import EdgeRand, upper_adjacency, upper_pairs
from targets.lapgraph import LapGraph

FAST = {"epochs": 30}


@pytest.fixture(scope="module")
def small(make_csbm):
    return make_csbm(n=200, seed=3)


def _is_undirected_simple(g) -> bool:
    ei = g.edge_index
    fwd = set(map(tuple, ei.t().tolist()))
    return all((b, a) in fwd for a, b in fwd) and not bool((ei[0] == ei[1]).any()) and len(fwd) == ei.size(1)


@pytest.mark.parametrize("cls", [EdgeRand, LapGraph])
def test_contract_and_claim(cls, csbm):
    t = cls(epsilon=2.0)
    assert t.unit.value == "edge" and set(t.levels) == {"mechanism", "api", "weights"} and "no-noise" in t.bugs
    c = t.claim(csbm)
    assert c.epsilon == 2.0 and c.delta == 1e-5 and c.unit == "edge"
    assert "pure" in c.accountant and c.details["pure_dp"] is True
    assert cls(epsilon=2.0, delta=1e-7).claim(csbm).delta == 1e-7
    assert t.public_params(csbm) == {}
    with pytest.raises(ValueError):
        cls(unit="node")


def test_edgerand_calibration_is_direct():
    for eps in (0.5, 1.0, 4.0, 8.0):
        d = EdgeRand(epsilon=eps).claim(data.csbm(n=50)).details
        assert d["s"] == pytest.approx(2 / (math.exp(eps) + 1))
        assert d["likelihood_ratio"] == pytest.approx(math.exp(eps))
    d = EdgeRand(epsilon=2.0, variant="density").claim(data.csbm(n=50)).details
    assert d["eps_link"] + d["eps_density"] == pytest.approx(2.0)
    assert d["p"] / (1 - d["p"]) == pytest.approx(math.exp(d["eps_link"]))
    d = LapGraph(epsilon=3.0).claim(data.csbm(n=50)).details
    assert d["eps_count"] == pytest.approx(0.03) and d["entry_laplace_scale"] == pytest.approx(1 / 2.97)


def test_upper_adjacency_round_trip(small):
    a = upper_adjacency(small)
    assert int(a.sum()) == small.edge_index.size(1) // 2
    r, c = upper_pairs(small.num_nodes)
    edges = set(zip(r[a].tolist(), c[a].tolist()))
    assert edges == {(u, v) for u, v in small.edge_index.t().tolist() if u < v}


def test_edgerand_rr_law(small):
    """Kept edges ≈ 1 − s/2, added non-edges ≈ s/2 (5-sigma binomial bands)."""
    t = EdgeRand(epsilon=1.0)
    s = t.flip_probability()
    a = upper_adjacency(small)
    keep, add = [], []
    for seed in range(5):
        noisy, _ = t.release_graph(small, torch.Generator().manual_seed(seed))
        assert _is_undirected_simple(noisy)
        b = upper_adjacency(noisy)
        keep.append(float(b[a].float().mean()))
        add.append(float(b[~a].float().mean()))
    n_e, n_ne = int(a.sum()) * 5, int((~a).sum()) * 5
    assert abs(np.mean(keep) - (1 - s / 2)) < 5 * math.sqrt(s / 2 * (1 - s / 2) / n_e)
    assert abs(np.mean(add) - s / 2) < 5 * math.sqrt(s / 2 * (1 - s / 2) / n_ne)


def test_edgerand_density_variant_preserves_density(small):
    t = EdgeRand(epsilon=4.0, variant="density")
    a = upper_adjacency(small)
    counts, kept = [], []
    for seed in range(5):
        noisy, stats = t.release_graph(small, torch.Generator().manual_seed(seed))
        b = upper_adjacency(noisy)
        counts.append(int(b.sum()))
        kept.append(float(b[a].float().mean()))
        assert 0 < stats["q"] <= 1
    assert abs(np.mean(counts) / int(a.sum()) - 1) < 0.15        # density kept (rr would add ~350 edges)
    p = 1 / (1 + math.exp(-3.6))
    assert np.mean(kept) == pytest.approx(p * np.mean([t.release_graph(small, torch.Generator().manual_seed(s))[1]["q"]
                                                       for s in range(5)]), abs=0.08)


def test_lapgraph_law(small):
    t = LapGraph(epsilon=4.0)
    a = upper_adjacency(small)
    m = int(a.sum())
    for seed in range(3):
        noisy, stats = t.release_graph(small, torch.Generator().manual_seed(seed))
        assert _is_undirected_simple(noisy)
        b = upper_adjacency(noisy)
        assert int(b.sum()) == stats["T"]
        assert abs(stats["T"] - m) <= 25 * 20                    # |Lap(1/0.04)| < 20 scales, w.p. 1 − 2e-9
        # top-T of A + Lap(1/3.96) keeps far more true edges than chance (m / M ≈ 0.04)
        assert float(b[a].float().mean()) > 0.3
    hi, _ = LapGraph(epsilon=200.0).release_graph(small, torch.Generator().manual_seed(0))
    assert float(upper_adjacency(hi)[a].float().mean()) > 0.99


@pytest.mark.parametrize("cls", [EdgeRand, LapGraph])
def test_determinism_and_no_noise_bug(cls, small):
    t = cls(epsilon=1.0, **FAST)
    r1 = t.fit(small, torch.Generator().manual_seed(5))
    r2 = t.fit(small, torch.Generator().manual_seed(5))
    r3 = t.fit(small, torch.Generator().manual_seed(6))
    assert all(torch.equal(r1.weights[k], r2.weights[k]) for k in r1.weights)
    assert r1.info["noisy_edges"] == r2.info["noisy_edges"]
    assert not all(torch.equal(r1.weights[k], r3.weights[k]) for k in r1.weights)
    assert r1.info["perturbation"]["perturbed"] is True
    bug = cls(epsilon=1.0, bug="no-noise", **FAST).fit(small, torch.Generator().manual_seed(5))
    assert bug.info["perturbation"]["perturbed"] is False
    assert bug.info["noisy_edges"] == small.edge_index.size(1) // 2
    assert cls(epsilon=1.0, bug="no-noise").claim(small).epsilon == 1.0


def test_noiseless_map_has_unit_edge_sensitivity(small):
    t = EdgeRand(epsilon=1.0)
    base = t.noiseless(small)
    for u, v in [(0, 150), (3, 77)]:
        if not bool(((small.edge_index[0] == u) & (small.edge_index[1] == v)).any()):
            assert float((t.noiseless(add_edge(small, u, v)) - base).norm()) == pytest.approx(1.0)


def test_api_runs_on_perturbed_edges_and_inductive_queries(small):
    t = LapGraph(epsilon=1.0, **FAST)
    r = t.fit(small, torch.Generator().manual_seed(0))
    p = r.view("api")(None, torch.arange(5))
    assert p.shape == (5, int(small.y.max()) + 1) and torch.allclose(p.sum(1), torch.ones(5, dtype=p.dtype))
    sub = data.csbm(n=60, seed=9)
    q = r.view("api")(sub, None)
    assert q.shape[0] == 60 and torch.isfinite(q).all()


def test_linkteller_separates_no_noise_from_strong_privacy(small):
    """LinkTeller recovers edges through the no-noise bug, and barely at ε = 1 (spec §4, 'DP GCNs')."""
    leaky = run_linkteller(EdgeRand(epsilon=1.0, bug="no-noise", **FAST), small, n_pairs=100, rng=0)
    private = run_linkteller(LapGraph(epsilon=1.0, **FAST), small, n_pairs=100, rng=0)
    assert leaky["auc"] > 0.9
    assert private["auc"] < 0.75
    assert leaky["auc"] - private["auc"] > 0.2


def test_short_audit_end_to_end(tmp_path):
    r = audit_claim("targets.lapgraph:LapGraph", epsilon=1.0, params=FAST, attack="linkteller",
                    canary="random-edge", trials=8, out=tmp_path)
    assert r["verdict"] == "CONSISTENT" and r["trials"] == 8
    assert r["claim"]["accountant"].startswith("Laplace")


def test_laplace_sampler_has_the_claimed_scale():
    from targets.edgerand import laplace

    z = laplace(200_000, 2.0, torch.Generator().manual_seed(0))
    assert float(z.abs().mean()) == pytest.approx(2.0, rel=0.02)       # E|Lap(b)| = b
    assert float(z.var()) == pytest.approx(8.0, rel=0.04)              # Var = 2b²
    assert abs(float(z.mean())) < 0.03


# ------------------------------------------------------------------ the mechanism view
def _pair(small, u=0, v=150):
    from attacks.base import make
    assert not bool(((small.edge_index[0] == u) & (small.edge_index[1] == v)).any())
    return make("mechanism-lrt"), type("Pair", (), {"g0": small, "g1": add_edge(small, u, v), "info": {}})(), (u, v)


def _pos(n, u, v):
    return u * n - u * (u + 1) // 2 + (v - u - 1)


def test_edgerand_mechanism_score_is_the_exact_rr_likelihood_ratio(small):
    """The score is ±ε at the canary pair, by the released entry; the view is the graph the GCN
    trains on; reading it trains no GCN (the stacked training is lazy: the same release either way)."""
    from targets.base import child_generator
    attack, pair, (u, v) = _pair(small)
    t = EdgeRand(epsilon=1.5, **FAST)
    stacks = []
    fit_graphs = t._gcn.fit_graphs
    t._gcn.fit_graphs = lambda graphs, rngs: stacks.append(len(graphs)) or fit_graphs(graphs, rngs)
    for g in (pair.g0, pair.g1):
        releases = t.fit_batch(g, [torch.Generator().manual_seed(s) for s in range(6)])
        for s, r in enumerate(releases):
            (step,) = r.view("mechanism")
            released = bool(step.output[_pos(small.num_nodes, u, v)])
            assert attack.score(r, pair) == pytest.approx(1.5 if released else -1.5, abs=1e-9)
            trained_on, _ = t.release_graph(g, child_generator(torch.Generator().manual_seed(s)))
            assert torch.equal(upper_adjacency(trained_on), step.output)
        assert stacks == [] and not any(r.weights.computed for r in releases)
        releases[0].view("api")(None, torch.arange(3))
        assert [len(r.view("weights")) for r in releases] == [4] * 6
        assert stacks == [6]  # the batch's GCNs trained together, once
        stacks.clear()


def test_edgerand_density_and_lapgraph_scores_are_their_exact_likelihood_ratios(small):
    attack, pair, (u, v) = _pair(small)
    c = _pos(small.num_nodes, u, v)
    edges = small.edge_index.size(1) // 2
    t = EdgeRand(epsilon=2.0, variant="density", **FAST)
    eps_link, eps_d = t.density_split()
    for r in t.fit_batch(pair.g1, [torch.Generator().manual_seed(s) for s in range(4)]):
        count, adj = r.view("mechanism")
        p, q = r.info["perturbation"]["p"], r.info["perturbation"]["q"]
        pair_term = math.log(p / (1 - p)) if bool(adj.output[c]) else math.log((1 - p * q) / (1 - (1 - p) * q))
        count_term = -eps_d * (abs(float(count.output) - edges - 1) - abs(float(count.output) - edges))
        assert attack.score(r, pair) == pytest.approx(pair_term + count_term, abs=1e-9)
    t = LapGraph(epsilon=2.0, **FAST)
    eps1, eps2 = t.split()
    for r in t.fit_batch(pair.g0, [torch.Generator().manual_seed(s) for s in range(4)]):
        count, entries = r.view("mechanism")
        a = float(entries.output[c])
        o = float(count.output)
        expected = -eps2 * (abs(a - 1) - abs(a)) - eps1 * (abs(o - edges - 1) - abs(o - edges))
        assert attack.score(r, pair) == pytest.approx(expected, abs=1e-9)
        assert abs(expected) <= 2.0 + 1e-9  # pure ε-DP: the likelihood ratio never exceeds e^ε
        assert r.info["noisy_edges"] == r.info["perturbation"]["T"]


@pytest.mark.parametrize("name", ["edgerand", "lapgraph"])
def test_mechanism_audit_default_separates_the_bug_and_bounds_the_correct_target(name, tmp_path):
    """The default attack is now the mechanism view's exact test: tight on the correct target
    (ε_lb ≤ ε, and informative), a VIOLATION on the no-noise bug, with no GCN trained."""
    from attacks.base import auto_attack
    from targets.base import build
    assert auto_attack(build(name, epsilon=1.0)) == "mechanism-lrt"
    ok = audit_claim(name, epsilon=1.0, trials=1000, out=tmp_path)
    assert ok["verdict"] == "CONSISTENT" and ok["attack"] == "mechanism-lrt" and 0.2 < ok["eps_lb"] <= 1.0
    bad = audit_claim(name, epsilon=1.0, bug="no-noise", trials=200, out=tmp_path)
    assert bad["verdict"] == "VIOLATION"
