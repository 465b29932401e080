"""The whole-node gradient canary on HeterPoisson: scale k_t = 1[z central] + 2·(other stars keeping z)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.optimize import brentq
from scipy.stats import binom, norm

from attacks.gradient import FullVectorGradientCanary
from audit.play import game
from canaries import base as canaries
from audit.play.data import load
from canaries.gradient import DiracNode, exposed_training_node
from targets.heterpoisson import HeterPoisson

ONE_STEP = dict(epsilon=2.0, hidden=8, steps=1, sampling_rate=1.0, noise="gaussian")


def chosen(graph, target):
    return exposed_training_node(graph, target.config.neighbors, target.outdegrees(graph))[0]


def scales(target, graph, z, batches=200, seed=0):
    rng = torch.Generator().manual_seed(seed)
    return [target.node_canary_scale(target.sample_batch(graph, rng), z) for _ in range(batches)]


def with_isolated_training_nodes(graph, count=40):
    """The graph with every edge of its first `count` training nodes removed."""
    g = graph.clone()
    iso = g.train_mask.nonzero().view(-1)[:count]
    keep = ~(torch.isin(g.edge_index[0], iso) | torch.isin(g.edge_index[1], iso))
    g.edge_index = g.edge_index[:, keep]
    return g, iso


# ---------------------------------------------------------------------------------------------
# the scale, from the sampler's own decisions
# ---------------------------------------------------------------------------------------------
def test_correct_sampler_at_q1_gives_scale_one_every_step(csbm):
    t = HeterPoisson(**ONE_STEP)
    z = chosen(csbm, t)
    assert set(scales(t, csbm, z)) == {1.0}
    assert set(scales(HeterPoisson(**ONE_STEP, bug="isolated-fallback"), csbm, z)) == {1.0}  # z central: dropped


def test_order_overlap_lets_the_chosen_node_into_other_stars(csbm):
    t = HeterPoisson(**ONE_STEP, bug="order-overlap")
    z = chosen(csbm, t)
    s = np.array(scales(t, csbm, z))
    assert s.min() == 1.0 and (s > 1).mean() > 0.2
    assert set(np.unique(s)) <= {1.0, 3.0, 5.0, 7.0, 9.0}


def test_isolated_fallback_puts_a_non_central_node_into_unrelated_stars(csbm):
    g, iso = with_isolated_training_nodes(csbm)
    z = int(g.train_mask.nonzero().view(-1)[-1])
    out_neighbours = set(g.edge_index[1][g.edge_index[0] == z].tolist())
    kw = dict(epsilon=2.0, hidden=8, steps=1, sampling_rate=0.5, neighbors=4, noise="gaussian")
    for bug, foreign_expected in ((None, False), ("isolated-fallback", True)):
        t = HeterPoisson(**kw, bug=bug)
        rng = torch.Generator().manual_seed(0)
        foreign = 0
        for _ in range(100):
            b = t.sample_batch(g, rng)
            stars = set(b.dst[b.src == z].tolist())
            assert t.node_canary_scale(b, z) == float(bool((b.central == z).any())) + 2 * len(stars)
            foreign += len(stars - out_neighbours)
        assert (foreign > 0) == foreign_expected


# ---------------------------------------------------------------------------------------------
# the trace: recorded in both worlds, added in world 1 only, nothing else moves
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bug", [None, "order-overlap"])
def test_trace_scale_matches_the_clean_difference(csbm, bug):
    t = HeterPoisson(**ONE_STEP, bug=bug)
    pair = DiracNode(probe=False).worlds(csbm, np.random.default_rng(0), t)
    gc = pair.g1.canary_gradient
    seen = set()
    for seed in range(12):
        r0, r1 = (t.fit(g, torch.Generator().manual_seed(seed)) for g in pair)
        s0, s1 = r0.trace[0], r1.trace[0]
        assert s0.canary_scale == s1.canary_scale and s0.canary_in is None and s1.canary_in
        assert torch.allclose(s1.clean - s0.clean, s1.canary_scale * gc, atol=1e-5)
        assert torch.allclose(s1.noisy - s1.clean, s0.noisy - s0.clean, atol=1e-5)  # the same noise
        seen.add(s1.canary_scale)
    assert seen == {1.0} if bug is None else len(seen) > 1


def test_scales_agree_between_worlds_over_many_steps(csbm):
    t = HeterPoisson(epsilon=2.0, hidden=8, steps=6, sampling_rate=0.6, noise="gaussian", bug="order-overlap")
    pair = DiracNode(probe=False).worlds(csbm, np.random.default_rng(1), t)
    r0, r1 = (t.fit(g, torch.Generator().manual_seed(3)) for g in pair)
    k0 = [s.canary_scale for s in r0.trace]
    assert k0 == [s.canary_scale for s in r1.trace]
    assert [bool(k > 0) for k in k0] == [s.canary_in for s in r1.trace]
    assert all(torch.equal(a.central, b.central) for a, b in zip(r0.trace, r1.trace))


def test_world_zero_and_the_correct_world_one_change_nothing_else(csbm):
    t = HeterPoisson(**dict(ONE_STEP, steps=3))
    pair = DiracNode(probe=False).worlds(csbm, np.random.default_rng(0), t)
    plain = t.fit(csbm, torch.Generator().manual_seed(5))
    r0 = t.fit(pair.g0, torch.Generator().manual_seed(5))
    for a, b in zip(plain.trace, r0.trace):
        assert torch.equal(a.noisy, b.noisy) and torch.equal(a.clean, b.clean) and a.canary_scale is None
    assert all(torch.equal(plain.weights[k], r0.weights[k]) for k in plain.weights)
    assert torch.equal(plain.api(csbm), r0.api(csbm))
    # at q = 1 the correct sampler's whole-node canary is the old node hook exactly
    z, gc = pair.g1.canary_node, pair.g1.canary_gradient
    old = t.fit(csbm, torch.Generator().manual_seed(5), canary_gradient=gc, canary_node=z)
    r1 = t.fit(pair.g1, torch.Generator().manual_seed(5))
    assert torch.equal(old.trace.noisy_matrix(), r1.trace.noisy_matrix())
    assert not hasattr(csbm, "canary_node") or csbm.canary_node is None  # the input graph is untouched


def test_whole_node_needs_a_training_node(csbm):
    t = HeterPoisson(**ONE_STEP)
    with pytest.raises(ValueError, match="needs canary_node"):
        t.fit(csbm, torch.Generator().manual_seed(0), canary_whole_node=True)
    with pytest.raises(ValueError, match="not a training node"):
        t.fit(csbm, torch.Generator().manual_seed(0), canary_whole_node=True,
              canary_node=int((~csbm.train_mask).nonzero()[0]))


# ---------------------------------------------------------------------------------------------
# the attack: the exact LLR given k_t
# ---------------------------------------------------------------------------------------------
def test_llr_with_scale_is_the_gaussian_formula(csbm):
    t = HeterPoisson(**ONE_STEP, bug="order-overlap")
    pair = DiracNode(probe=False).worlds(csbm, np.random.default_rng(0), t)
    attack, gc = FullVectorGradientCanary(), pair.g1.canary_gradient.double()
    s = t.claim(csbm).details["noise_std"]
    for bit in (0, 1):
        for seed in range(6):
            step = t.fit(pair.world(bit), torch.Generator().manual_seed(seed)).trace[0]
            k = step.canary_scale
            x = step.noisy.double() - (step.clean.double() - (k * gc if bit else 0.0))
            want = (k * float(x @ gc) - k * k * float(gc @ gc) / 2) / s**2
            rel = t.fit(pair.world(bit), torch.Generator().manual_seed(seed))
            assert attack.score(rel, pair) == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_llr_given_the_scales_is_normal_with_mean_half_its_variance(csbm):
    """Each trial's score is N(±μ²/2, μ²) with μ² = Σ_t k_t²‖g^c‖²/s² given its scales."""
    t = HeterPoisson(**dict(ONE_STEP, steps=2), bug="order-overlap")
    pair = DiracNode(probe=False).worlds(csbm, np.random.default_rng(2), t)
    attack = FullVectorGradientCanary()
    cc = float(pair.g1.canary_gradient.double().norm() ** 2)
    s = t.claim(csbm).details["noise_std"]
    for bit, sign in ((0, -1), (1, 1)):
        z = []
        for seed in range(100):
            rel = t.fit(pair.world(bit), torch.Generator().manual_seed(1000 * bit + seed))
            mu2 = sum(step.canary_scale**2 for step in rel.trace) * cc / s**2
            z.append((attack.score(rel, pair) - sign * mu2 / 2) / math.sqrt(mu2))
        z = np.array(z)
        assert abs(z.mean()) < 4 / math.sqrt(len(z)) and z.std() == pytest.approx(1.0, abs=0.2)


def test_no_mixture_where_the_scale_is_recorded(csbm):
    t = HeterPoisson(epsilon=2.0, hidden=8, steps=5, sampling_rate=0.5, noise="gaussian")
    pair = DiracNode(probe=False).worlds(csbm, np.random.default_rng(0), t)
    attack = FullVectorGradientCanary()
    rel = t.fit(pair.g1, torch.Generator().manual_seed(4))
    assert attack.score(rel, pair) == pytest.approx(float(attack.step_llrs(rel, pair).sum()))
    assert all(k == 1.0 or k % 2 == 0 for k in (s.canary_scale for s in rel.trace))  # central, or 2c per star


# ---------------------------------------------------------------------------------------------
# why gdp is a valid estimator for the catalogue's order-overlap audit (q = 1, T = 1, Gaussian)
# ---------------------------------------------------------------------------------------------
def order_overlap_scale_law(t_z: int, p: float) -> dict[int, float]:
    """Law of k = 1 + 2m at q = 1: m ~ Bin(R, p), R ~ Uniform{0..t_z} (z's rank among its training
    out-neighbours in the shuffled batch: only those before z keep z's copy)."""
    law: dict[int, float] = {}
    for r in range(t_z + 1):
        for m in range(r + 1):
            law[1 + 2 * m] = law.get(1 + 2 * m, 0.0) + binom.pmf(m, r, p) / (t_z + 1)
    return law


def _eps_at(delta_of, delta):
    return brentq(lambda e: delta_of(e) - delta, 0.0, 60.0)


def _gauss_delta(eps, mu):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def test_order_overlap_scale_law_matches_the_sampler(csbm):
    t = HeterPoisson(**ONE_STEP, bug="order-overlap")
    z, _, t_z, p = exposed_training_node(csbm, 1, t.outdegrees(csbm))
    law = order_overlap_scale_law(t_z, p)
    s = np.array(scales(t, csbm, z, batches=1500, seed=9))
    for k, pk in law.items():
        assert (s == k).mean() == pytest.approx(pk, abs=4 * math.sqrt(pk * (1 - pk) / s.size) + 1e-3)


@pytest.mark.parametrize("seed", range(5))
def test_gdp_is_conservative_for_the_plain_release(seed):
    """gdp at the LLR's 0 bounds μ of the TV-matched Gaussian, Φ(μ/2) = E_k Φ(kμ₀/2); its ε at the
    claim's δ is below the exact ε of the release *without* k (the mixture Σ π_k N(kμ₀, 1) against
    N(0, 1), numerically), let alone with k revealed. So ε_lb ≤ the true ε of what HeterPoisson releases."""
    graph = load("csbm", seed=seed)
    t = HeterPoisson(epsilon=2.0, hidden=32, steps=1, sampling_rate=1.0, noise="gaussian", bug="order-overlap")
    claim = t.claim(graph)
    mu0 = claim.details["clip_norm"] / claim.details["noise_std"]
    _, _, t_z, p = exposed_training_node(graph, 1, t.outdegrees(graph))
    law = order_overlap_scale_law(t_z, p)
    ks, w = np.array(list(law)), np.array(list(law.values()))
    mu_tv = 2 * norm.ppf((w * norm.cdf(ks * mu0 / 2)).sum())
    eps_tv = _eps_at(lambda e: _gauss_delta(e, mu_tv), claim.delta)
    x = np.linspace(-12, 12 + ks.max() * mu0, 200_001)
    dens1 = (w[:, None] * norm.pdf(x[None, :] - ks[:, None] * mu0)).sum(0)
    dens0 = norm.pdf(x)
    hidden = _eps_at(lambda e: np.maximum(dens1 - math.exp(e) * dens0, 0).sum() * (x[1] - x[0]), claim.delta)
    revealed = _eps_at(lambda e: float((w * np.array([_gauss_delta(e, k * mu0) for k in ks])).sum()), claim.delta)
    correct = _eps_at(lambda e: _gauss_delta(e, mu0), claim.delta)
    assert correct < claim.epsilon < eps_tv < hidden < revealed


# ---------------------------------------------------------------------------------------------
# registry and a short game
# ---------------------------------------------------------------------------------------------
def test_registered_and_a_short_game(tmp_path):
    assert isinstance(canaries.make("dirac-node"), DiracNode)
    spec = game.AuditSpec(target="heterpoisson", epsilon=2.0, bug="order-overlap", canary="dirac-node",
                          attack="gradient-lrt", estimator="gdp", trials=40,
                          params={"hidden": "8", "steps": "1", "sampling_rate": "1", "noise": "gaussian"})
    res = game.run_audit(spec, out=tmp_path, progress=False)
    assert res["canary"]["canary"] == "dirac-node" and res["canary"]["node"] == chosen(load("csbm"), HeterPoisson())
    assert res["auc"] > 0.5
