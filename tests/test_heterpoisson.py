"""Tests for targets.heterpoisson (HeterPoisson + SML, Xiang, Wang & Wang, S&P 2024)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from targets.base import build, resolve
from targets.heterpoisson import (
    HeterPoisson,
    _log_poisson_laplace_moment,
    heterpoisson_epsilon,
    sml_sample,
)

FB = dict(sampling_rate=0.1823, steps=50, delta=1.63e-5, neighbors=1)  # Facebook, paper convention


def small(**kw):
    """A fast configuration on csbm (tiny hidden layer)."""
    base = dict(epsilon=4.0, hidden=8, steps=12, sampling_rate=0.2)
    base.update(kw)
    return HeterPoisson(**base)


# ---------------------------------------------------------------------------------------------
# accountant anchors (spec §4.3/4.4) and the acceptance numbers
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma,eps", [(10.26, 2.000), (5.47, 4.00), (2.94, 8.01), (1.61, 15.94)])
def test_exact_accountant_facebook_anchors(sigma, eps):
    got, _ = heterpoisson_epsilon(sigma, **FB, accountant="exact")
    assert got == pytest.approx(eps, abs=0.01)


def test_best_order_and_paper_variant():
    _, alpha = heterpoisson_epsilon(10.26, **FB, accountant="exact")
    assert alpha == pytest.approx(8.9, abs=0.1)
    loose, _ = heterpoisson_epsilon(10.26, **FB, accountant="paper")
    assert loose == pytest.approx(2.54, abs=0.01)


def test_paper_example_lnB():
    # |G| = 1e4+1, α = 2, σ = 1, k = 1e4 (paper §4.3): ln B_k ≈ 14141.7 and Gaussian needs σ ≈ 84.09
    a = np.array([2.0])
    lnb = _log_poisson_laplace_moment(a, 1 / math.sqrt(2), 1e4, 0.0, exact=False)[0]
    assert lnb == pytest.approx(14141.7, abs=0.1)
    assert math.sqrt(2 * 1 * 1e8 / (2 * lnb)) == pytest.approx(84.09, abs=0.01)


def test_acceptance_claim_multiplier():
    t = build("heterpoisson", epsilon=2, delta=1.63e-5, sampling_rate=0.1823, steps=50, neighbors=1,
              accountant="exact")
    c = t.claim(None)
    assert c.details["noise_multiplier"] == pytest.approx(10.26, rel=0.01)
    assert c.epsilon == pytest.approx(2.0, abs=1e-4) and c.epsilon <= 2.0
    paper = build("heterpoisson", epsilon=2, delta=1.63e-5, sampling_rate=0.1823, steps=50, neighbors=1,
                  accountant="paper", noise_multiplier=10.26)
    assert paper.claim(None).epsilon == pytest.approx(2.54, abs=0.01)


@pytest.mark.parametrize("eps,sigma", [(2, 11.76), (8, 3.37)])
def test_no_overlap_removal_variant(eps, sigma):
    t = build("heterpoisson", epsilon=eps, delta=1.63e-5, sampling_rate=0.1823, steps=50, remove_overlap=False)
    assert t.claim(None).details["noise_multiplier"] == pytest.approx(sigma, rel=0.005)


@pytest.mark.parametrize("eps,sigma", [(2, 14.5), (16, 3.2)])
def test_gaussian_variant_d100(eps, sigma):
    # the spec gives these to 3 / 2 significant digits
    t = build("heterpoisson", epsilon=eps, delta=1.63e-5, sampling_rate=0.1823, steps=50, noise="gaussian",
              max_degree=100)
    assert t.claim(None).details["noise_multiplier"] == pytest.approx(sigma, abs=0.05)


@pytest.mark.parametrize("kw", [dict(), dict(accountant="paper"), dict(neighbors=3),
                                dict(noise="gaussian", max_degree=50)])
@pytest.mark.parametrize("eps", [1.0, 4.0, 16.0])
def test_calibration_round_trip(kw, eps):
    t = build("heterpoisson", epsilon=eps, delta=1e-5, sampling_rate=0.1, steps=30, **kw)
    c = t.claim(None)
    sigma = c.details["noise_multiplier"]
    back = build("heterpoisson", epsilon=eps, delta=1e-5, sampling_rate=0.1, steps=30, noise_multiplier=sigma, **kw)
    assert back.claim(None).epsilon == pytest.approx(eps, rel=1e-4)
    assert c.epsilon <= eps + 1e-9
    slightly_less = build("heterpoisson", epsilon=eps, delta=1e-5, sampling_rate=0.1, steps=30,
                          noise_multiplier=sigma * 0.98, **kw)
    assert slightly_less.claim(None).epsilon > eps


def test_default_rules_on_graph(csbm):
    c = HeterPoisson(epsilon=4.0).claim(csbm)
    n_train = int(csbm.train_mask.sum())
    assert c.delta == pytest.approx(n_train ** -1.1)
    assert c.details["sampling_rate"] == min(1.0, 4096 / n_train)
    assert c.details["steps"] == math.ceil(9 / c.details["sampling_rate"])
    assert c.details["noise_std"] == pytest.approx(c.details["noise_multiplier"] * 2 * 0.5)


# ---------------------------------------------------------------------------------------------
# the sampler
# ---------------------------------------------------------------------------------------------
def test_sampler_inclusion_rates_and_disjointness(csbm):
    q, m, reps = 0.3, 2, 1500
    t = HeterPoisson(sampling_rate=q, neighbors=m, steps=10)
    cache = t._sampler_cache(csbm)
    src, dst = cache["src"], cache["dst"]
    n = csbm.num_nodes
    edge_id = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(src, dst))}
    train = csbm.train_mask
    central_counts = torch.zeros(n)
    kept_counts = torch.zeros(src.numel())
    rng = torch.Generator().manual_seed(1)
    for _ in range(reps):
        b = t.sample_batch(csbm, rng, _cache=cache)
        central_counts[b.central] += 1
        assert not set(b.src.tolist()) & set(b.central.tolist())  # never central and peripheral
        assert set(b.dst.tolist()) <= set(b.central.tolist())
        for a, c in zip(b.src.tolist(), b.dst.tolist()):
            kept_counts[edge_id[(a, c)]] += 1  # raises KeyError for a non-edge
    # central nodes: Bernoulli(q) each step
    rate = central_counts[train].sum() / (reps * int(train.sum()))
    assert abs(rate - q) < 4 * math.sqrt(q * (1 - q) / (reps * int(train.sum())))
    assert central_counts[~train].sum() == 0
    # peripheral edges j -> i: q (i central) * min(1, M/outdeg j) * (1 - q if j is a training node)
    outdeg = torch.bincount(src, minlength=n).double()
    p = q * torch.clamp(m / outdeg[src], max=1.0) * torch.where(train[src], 1 - q, 1.0)
    p = torch.where(train[dst], p, torch.zeros_like(p))
    for group in (train[src], ~train[src], outdeg[src] <= m, outdeg[src] > 2 * m):
        exp = float(p[group].sum() * reps)
        var = float((p[group] * (1 - p[group])).sum() * reps)
        if exp > 0:
            assert abs(float(kept_counts[group].sum()) - exp) < 5 * math.sqrt(var), group.sum()
    assert kept_counts[~train[dst]].sum() == 0


def _with_isolated(graph):
    g = graph.clone()
    n = g.num_nodes
    iso = g.train_mask.nonzero().view(-1)[:20]
    keep = ~(torch.isin(g.edge_index[0], iso) | torch.isin(g.edge_index[1], iso))
    g.edge_index = g.edge_index[:, keep]
    return g, iso


def test_bug_order_overlap_makes_central_peripheral(csbm):
    t = HeterPoisson(sampling_rate=0.5, neighbors=3, steps=5, bug="order-overlap")
    rng = torch.Generator().manual_seed(0)
    both = 0
    for _ in range(20):
        b = t.sample_batch(csbm, rng)
        both += len(set(b.src.tolist()) & set(b.central.tolist()))
    assert both > 0


def test_bug_isolated_fallback(csbm):
    g, iso = _with_isolated(csbm)
    edges = set(zip(g.edge_index[0].tolist(), g.edge_index[1].tolist()))
    for bug, expect in ((None, False), ("isolated-fallback", True)):
        t = HeterPoisson(sampling_rate=0.5, neighbors=2, steps=5, bug=bug)
        rng = torch.Generator().manual_seed(0)
        foreign = 0
        for _ in range(10):
            b = t.sample_batch(g, rng)
            foreign += sum((a, c) not in edges for a, c in zip(b.src.tolist(), b.dst.tolist()))
        assert (foreign > 0) == expect


def test_exact_steps_and_bug_extra_steps(csbm):
    r = small().fit(csbm, torch.Generator().manual_seed(0))
    assert len(r.trace) == r.trace.accounted_steps == 12
    t = small(bug="extra-steps")
    r = t.fit(csbm, torch.Generator().manual_seed(0))
    assert t.claim(csbm).details["steps"] == 12
    assert len(r.trace) > 12


# ---------------------------------------------------------------------------------------------
# training, determinism, noise law
# ---------------------------------------------------------------------------------------------
def test_determinism(csbm):
    t = small(backbone="gin")
    a = t.fit(csbm, torch.Generator().manual_seed(3))
    b = t.fit(csbm, torch.Generator().manual_seed(3))
    c = t.fit(csbm, torch.Generator().manual_seed(4))
    assert torch.equal(a.trace.noisy_matrix(), b.trace.noisy_matrix())
    assert all(torch.equal(a.weights[k], b.weights[k]) for k in a.weights)
    assert torch.equal(a.api(csbm), b.api(csbm))
    assert not torch.equal(a.trace.noisy_matrix(), c.trace.noisy_matrix())
    assert not torch.equal(a.weights["lin1.weight"], c.weights["lin1.weight"])


@pytest.mark.parametrize("backbone", ["gcn", "sage", "gin"])
def test_release_views(csbm, backbone):
    t = small(backbone=backbone)
    r = t.fit(csbm, torch.Generator().manual_seed(0))
    assert set(r.levels) == {"api", "weights", "trace"}
    probs = r.api(csbm, [0, 5, 7])
    assert probs.shape == (3, int(csbm.y.max()) + 1)
    assert torch.allclose(probs.sum(1), torch.ones(3), atol=1e-5)
    assert torch.allclose(r.api(csbm, [5]), probs[1:2], atol=1e-6)
    assert r.trace.dim == t.dimension(csbm) == sum(v.numel() for v in r.weights.values())
    assert all(0 <= resolve(r.info["accuracy"])[s] <= 1 for s in ("train", "val", "test"))


def test_bug_no_noise(csbm):
    r = small(bug="no-noise").fit(csbm, torch.Generator().manual_seed(0))
    assert all(torch.equal(s.noisy, s.clean) for s in r.trace)
    r = small().fit(csbm, torch.Generator().manual_seed(0))
    assert not any(torch.equal(s.noisy, s.clean) for s in r.trace)


def test_clipped_sum_bounded(csbm):
    r = small(bug="no-noise").fit(csbm, torch.Generator().manual_seed(0))
    for s in r.trace:
        assert s.clean.norm() <= 0.5 * s.central.numel() + 1e-4


def _scales(release, d, std):
    """Per-step W estimates ||noise||² / (d·std²) (= W·χ²_d/d for SML, χ²_d/d for Gaussian)."""
    return torch.stack([((s.noisy - s.clean).double() ** 2).sum() / (d * std**2) for s in release.trace])


def test_noise_scale_gaussian(csbm):
    t = small(noise="gaussian", max_degree=50, steps=40)
    r = t.fit(csbm, torch.Generator().manual_seed(0))
    std = t.claim(csbm).details["noise_std"]
    noise = torch.stack([s.noisy - s.clean for s in r.trace]).double()
    assert noise.std().item() == pytest.approx(std, rel=0.03)
    w = _scales(r, noise.size(1), std)
    assert w.std() / w.mean() < 0.2


def test_noise_law_sml_in_training(csbm):
    t = small(steps=300, sampling_rate=0.05, eval_every=300)
    r = t.fit(csbm, torch.Generator().manual_seed(0))
    std = t.claim(csbm).details["noise_std"]
    d = r.trace.dim
    w = _scales(r, d, std).numpy()
    # one scale per step: the per-step scale estimates are Exp(1)-distributed (χ²_d/d ≈ 1 for d ≈ 300)
    assert abs(w.mean() - 1) < 0.25
    assert abs(w.std() / w.mean() - 1) < 0.3
    assert stats.kstest(w, "expon").pvalue > 1e-3
    # per-coordinate scale bug: the scale averages out, every step looks Gaussian
    rb = small(steps=300, sampling_rate=0.05, eval_every=300, bug="per-coordinate-scale").fit(
        csbm, torch.Generator().manual_seed(0))
    wb = _scales(rb, d, std).numpy()
    assert wb.std() / wb.mean() < 0.2
    assert abs(wb.mean() - 1) < 0.1


def test_sml_sampler_law():
    rng = torch.Generator().manual_seed(0)
    d, std, n = 6, 2.0, 20000
    x = torch.stack([sml_sample(d, std, rng, dtype=torch.float64) for _ in range(n)]).numpy()
    b = std / math.sqrt(2)
    # marginals and a random projection are Laplace(0, σ/√2); covariance σ² I
    assert stats.kstest(x[:, 0], "laplace", args=(0, b)).pvalue > 1e-3
    u = np.random.default_rng(0).normal(size=d)
    u /= np.linalg.norm(u)
    assert stats.kstest(x @ u, "laplace", args=(0, b)).pvalue > 1e-3
    assert np.allclose(np.cov(x.T), std**2 * np.eye(d), atol=0.25)
    # coordinates uncorrelated but dependent (one W): squared coordinates are positively correlated
    assert np.corrcoef(x[:, 0] ** 2, x[:, 1] ** 2)[0, 1] > 0.1
    y = torch.stack([sml_sample(d, std, rng, per_coordinate=True, dtype=torch.float64) for _ in range(n)]).numpy()
    assert abs(np.corrcoef(y[:, 0] ** 2, y[:, 1] ** 2)[0, 1]) < 0.05
    assert stats.kstest(y[:, 0], "laplace", args=(0, b)).pvalue > 1e-3


# ---------------------------------------------------------------------------------------------
# gradient-canary hook
# ---------------------------------------------------------------------------------------------
def test_canary_hook_virtual(csbm):
    t = small(steps=20, sampling_rate=0.4)
    d = t.dimension(csbm)
    gc = torch.zeros(d)
    gc[3] = 0.5
    r0 = t.fit(csbm, torch.Generator().manual_seed(7))
    r1 = t.fit(csbm, torch.Generator().manual_seed(7), canary_gradient=gc)
    mask = r1.trace.canary_mask()
    assert 0 < int(mask.sum()) < 20
    first = int(mask.nonzero()[0])
    for step in range(first + 1):  # identical until the first inclusion, then exactly + g_c
        diff = r1.trace[step].clean - r0.trace[step].clean
        assert torch.allclose(diff, gc if step == first else torch.zeros(d), atol=1e-6)
    for s0, s1 in zip(r0.trace, r1.trace):  # same noise draws in both worlds
        assert torch.allclose(s1.noisy - s1.clean, s0.noisy - s0.clean, atol=1e-5)
    assert all(s.canary_in is None for s in r0.trace)
    # through graph attributes, same result
    g = csbm.clone()
    g.canary_gradient = gc
    r2 = t.fit(g, torch.Generator().manual_seed(7))
    assert torch.equal(r2.trace.noisy_matrix(), r1.trace.noisy_matrix())


def test_canary_hook_node(csbm):
    t = small(steps=20, sampling_rate=0.3)
    d = t.dimension(csbm)
    z = int(csbm.train_mask.nonzero()[0])
    r = t.fit(csbm, torch.Generator().manual_seed(1), canary_gradient=torch.ones(d) / math.sqrt(d) * 0.5,
              canary_node=z)
    assert [s.canary_in for s in r.trace] == [bool((s.central == z).any()) for s in r.trace]
    with pytest.raises(ValueError, match="canary_gradient"):
        t.fit(csbm, torch.Generator().manual_seed(1), canary_gradient=torch.ones(d + 1))
    with pytest.raises(ValueError, match="not a training node"):
        t.fit(csbm, torch.Generator().manual_seed(1), canary_gradient=torch.ones(d),
              canary_node=int((~csbm.train_mask).nonzero()[0]))


# ---------------------------------------------------------------------------------------------
# config validation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,match", [
    (dict(sampling_rate=0.0), "sampling_rate"),
    (dict(sampling_rate=1.5), "sampling_rate"),
    (dict(steps=0), "steps"),
    (dict(neighbors=0), "neighbors"),
    (dict(noise="laplace"), "noise"),
    (dict(accountant="opacus"), "accountant"),
    (dict(backbone="gat"), "backbone"),
    (dict(clip_norm=-1.0), "clip_norm"),
    (dict(noise_multiplier=0.0), "noise_multiplier"),
    (dict(unit="edge"), "unit"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(bug="nonsense"), "unknown bug"),
])
def test_bad_config(kw, match):
    with pytest.raises(ValueError, match=match):
        HeterPoisson(**kw)


def test_cli_strings_coerced():
    t = build("heterpoisson", epsilon=2, sampling_rate="0.1823", steps="50", neighbors="1",
              accountant="exact", delta=1.63e-5)
    assert t.config.steps == 50 and isinstance(t.config.neighbors, int)
