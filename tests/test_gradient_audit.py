"""Dirac gradient canary, the gradient attacks, and the DP-SGD reference target."""
import math

import numpy as np
import pytest
import torch
from scipy.special import kve

from attacks.gradient import FullVectorGradientCanary, ProjectedGradientCanary, sml_log_integral
from audit.play import game
from canaries.gradient import DiracGradient
from targets.dpsgd_gcn import DPSGDGCN, dpsgd_epsilon
from targets.heterpoisson import HeterPoisson

TARGET = "targets.dpsgd_gcn:DPSGDGCN"


def _scores(target, pair, attack, trials, seed=0):
    out = {0: [], 1: []}
    for i in range(trials):
        bit = i % 2
        rel = target.fit(pair.world(bit), torch.Generator().manual_seed(seed * 100_000 + i))
        out[bit].append(attack.score(rel, pair, pair.g0))
    return np.array(out[0]), np.array(out[1])


# ---------------------------------------------------------------------------------------------
# the DP-SGD reference
# ---------------------------------------------------------------------------------------------
def test_dpsgd_calibration_round_trip(small_csbm):
    for eps in (2.0, 8.0):
        t = DPSGDGCN(epsilon=eps, steps=10)
        c = t.claim(small_csbm)
        assert c.epsilon <= eps and c.epsilon == pytest.approx(eps, rel=1e-4)
        sigma = c.details["noise_multiplier"]
        again, _ = dpsgd_epsilon(sigma, sampling_rate=c.details["sampling_rate"], steps=10, delta=c.delta)
        assert again == pytest.approx(c.epsilon, rel=1e-9)
        assert c.gdp_mu == pytest.approx(math.sqrt(10) / sigma)  # q = 1 on this graph
    sub = DPSGDGCN(epsilon=2.0, steps=10, sampling_rate=0.2).claim(small_csbm)
    assert sub.gdp_mu is None and sub.details["noise_multiplier"] < DPSGDGCN(epsilon=2.0, steps=10).claim(
        small_csbm).details["noise_multiplier"]  # amplification by subsampling


def test_dpsgd_noise_scale_and_no_noise_bug(small_csbm):
    t = DPSGDGCN(noise_multiplier=2.0, clip_norm=0.7, steps=5, hidden=0)
    rel = t.fit(small_csbm, torch.Generator().manual_seed(0))
    noise = torch.cat([s.noisy - s.clean for s in rel.view("trace")]).double()
    assert noise.std().item() == pytest.approx(1.4, rel=0.1)
    assert all(float(s.clean.norm()) <= 0.7 * s.central.numel() + 1e-4 for s in rel.view("trace"))
    bug = DPSGDGCN(noise_multiplier=2.0, clip_norm=0.7, steps=5, hidden=0, bug="no-noise")
    rel = bug.fit(small_csbm, torch.Generator().manual_seed(0))
    assert all(torch.equal(s.noisy, s.clean) for s in rel.view("trace"))
    assert bug.claim(small_csbm).epsilon == t.claim(small_csbm).epsilon


# ---------------------------------------------------------------------------------------------
# the canary
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: DPSGDGCN(noise_multiplier=1.0, steps=6, sampling_rate=0.5),
    lambda: HeterPoisson(noise_multiplier=1.0, steps=4, hidden=8, sampling_rate=0.5),
])
def test_canary_pair_differs_only_by_the_canary(small_csbm, make):
    target = make()
    pair = DiracGradient().worlds(small_csbm, np.random.default_rng(0), target)
    gc = pair.g1.canary_gradient
    d = target.dimension(small_csbm)
    j = pair.info["coordinate"]
    assert gc.shape == (d,) and float(gc[j]) == target.claim(small_csbm).details["clip_norm"]
    assert int((gc != 0).sum()) == 1
    assert pair.g0 is small_csbm and getattr(pair.g0, "canary_gradient", None) is None
    assert pair.g1.x is small_csbm.x and torch.equal(pair.g1.edge_index, small_csbm.edge_index)
    r0 = target.fit(pair.g0, torch.Generator().manual_seed(7)).view("trace")
    r1 = target.fit(pair.g1, torch.Generator().manual_seed(7)).view("trace")
    assert len(r0) == len(r1)
    assert any(s.canary_in for s in r1) and not all(s.canary_in for s in r1)  # q = 0.5: a real coin
    for s0, s1 in zip(r0, r1):
        assert torch.equal(s0.central, s1.central)  # identical batches
        assert torch.allclose(s0.noisy - s0.clean, s1.noisy - s1.clean, atol=1e-5)  # identical noise
    first = r1[0].noisy - r0[0].noisy  # same model at step 0: only the canary differs
    expect = gc if r1[0].canary_in else torch.zeros_like(gc)
    assert torch.allclose(first, expect, atol=1e-5)


def test_canary_coordinate_is_rarely_used(small_csbm):
    target = DPSGDGCN(noise_multiplier=1.0, steps=4)
    pair = DiracGradient().worlds(small_csbm, np.random.default_rng(1), target)
    probe = DPSGDGCN(noise_multiplier=1.0, steps=4, bug="no-noise").fit(
        small_csbm, torch.Generator().manual_seed(99)).view("trace")
    usage = torch.stack([s.clean.abs() for s in probe]).sum(0)
    assert usage[pair.info["coordinate"]] < usage.median()
    assert "probe" in pair.info["chosen_by"]
    again = DiracGradient().worlds(small_csbm, np.random.default_rng(1), target)
    assert again.info["coordinate"] == pair.info["coordinate"]


# ---------------------------------------------------------------------------------------------
# the attacks
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d", [1, 3, 7, 40])
def test_sml_log_integral_matches_bessel(d):
    std = 0.8
    r2 = np.array([1e-4, 0.3, 2.0, 50.0])
    a, nu = r2 / (2 * std**2), 1 - d / 2
    exact = math.log(2) + nu / 2 * np.log(a) + np.log(kve(nu, 2 * np.sqrt(a))) - 2 * np.sqrt(a)
    assert np.allclose(sml_log_integral(r2, d, std), exact, atol=1e-8)


def test_gaussian_llr_has_the_right_mean_in_each_world(small_csbm):
    sigma, steps = 3.0, 8
    target = DPSGDGCN(noise_multiplier=sigma, steps=steps, hidden=0)
    pair = DiracGradient().worlds(small_csbm, np.random.default_rng(0), target)
    s0, s1 = _scores(target, pair, FullVectorGradientCanary(), 120)
    mu2 = steps / sigma**2  # each world's LLR is N(±μ²/2, μ²)
    se = math.sqrt(mu2 / 60)
    assert abs(s1.mean() - mu2 / 2) < 4 * se and abs(s0.mean() + mu2 / 2) < 4 * se
    assert s0.std() == pytest.approx(math.sqrt(mu2), rel=0.3)
    p0, p1 = _scores(target, pair, ProjectedGradientCanary(), 60)
    assert p1.mean() - p0.mean() == pytest.approx(steps, abs=4 * sigma * math.sqrt(2 * steps / 30))


def test_sml_llr_sign_in_each_world(small_csbm):
    target = HeterPoisson(noise_multiplier=0.6, steps=3, hidden=4)
    pair = DiracGradient().worlds(small_csbm, np.random.default_rng(0), target)
    assert pair.info["noise"] == "sml"
    s0, s1 = _scores(target, pair, FullVectorGradientCanary(), 60)
    assert s1.mean() > 0 > s0.mean()  # E_1 LLR = KL(P1||P0) > 0 > −KL(P0||P1) = E_0 LLR
    assert (s1 > 0).mean() > 0.5 > (s0 > 0).mean()


def test_mixture_llr_under_poisson_sampling(small_csbm):
    target = DPSGDGCN(noise_multiplier=1.0, steps=4, sampling_rate=0.3, hidden=0)
    pair = DiracGradient().worlds(small_csbm, np.random.default_rng(0), target)
    attack = FullVectorGradientCanary()
    rel = target.fit(pair.g1, torch.Generator().manual_seed(3))
    ell = attack.step_llrs(rel, pair)
    assert attack.score(rel, pair) == pytest.approx(float(np.sum(np.log(0.7 + 0.3 * np.exp(ell)))))
    assert attack.score(rel, pair) > 4 * math.log(0.7)  # the mixture LLR is bounded below by T·ln(1−q)


@pytest.mark.parametrize("make", [
    lambda bug: DPSGDGCN(epsilon=2.0, steps=4, bug=bug),
    lambda bug: HeterPoisson(epsilon=2.0, steps=2, hidden=4, bug=bug),
])
def test_no_noise_bug_separates_perfectly(small_csbm, make):
    pair = DiracGradient().worlds(small_csbm, np.random.default_rng(0), make(None))
    target = make("no-noise")
    for attack in (FullVectorGradientCanary(), ProjectedGradientCanary()):
        s0, s1 = _scores(target, pair, attack, 12)
        assert s1.min() > s0.max()
    honest0, honest1 = _scores(make(None), pair, FullVectorGradientCanary(), 12)
    assert honest1.min() < 1e6 and honest0.max() > -1e6  # the honest target's scores stay moderate


def test_game_end_to_end(tmp_path):
    spec = game.AuditSpec(target=TARGET, epsilon=4.0, attack="gradient-lrt", trials=40,
                          estimator="gdp", params={"steps": "5", "hidden": "0"}, dataset="csbm:n=150")
    res = game.run_audit(spec, out=tmp_path, progress=False)
    assert res["canary"]["canary"] == "dirac-gradient" and res["level"] == "trace"
    assert res["verdict"] == "CONSISTENT" and res["auc"] > 0.6
    bug = game.run_audit(game.AuditSpec(**{**spec.__dict__, "bug": "no-noise"}), out=tmp_path, progress=False)
    assert bug["auc"] == 1.0 and bug["eps_lb"] > 4.0 and bug["verdict"] == "VIOLATION"


# ---------------------------------------------------------------------------------------------
# the spread canary and the product-Laplace statistic (per-coordinate noise laws)
# ---------------------------------------------------------------------------------------------
def test_spread_canary_has_the_clip_norm_and_a_large_l1_norm(small_csbm):
    from canaries.gradient import SpreadGradient

    target = HeterPoisson(noise_multiplier=0.6, steps=2, hidden=4)
    pair = SpreadGradient().worlds(small_csbm, np.random.default_rng(0), target)
    gc = pair.g1.canary_gradient.double()
    d = target.dimension(small_csbm)
    clip = pair.info["clip_norm"]
    assert gc.norm().item() == pytest.approx(clip, rel=1e-6)
    assert gc.abs().sum().item() == pytest.approx(math.sqrt(d) * clip, rel=1e-5)
    assert pair.info["coordinate"] is None and "fixed direction" in pair.info["chosen_by"]


def test_product_laplace_llr_is_exact_and_beats_projection_on_per_coordinate_noise(small_csbm):
    from attacks.gradient import ProductLaplaceGradientCanary
    from canaries.gradient import SpreadGradient

    target = HeterPoisson(noise_multiplier=0.6, steps=1, hidden=4, bug="per-coordinate-scale")
    pair = SpreadGradient().worlds(small_csbm, np.random.default_rng(0), target)
    attack = ProductLaplaceGradientCanary()
    rel = target.fit(pair.g1, torch.Generator().manual_seed(1))
    step = rel.view("trace")[0]
    c = pair.g1.canary_gradient.double()
    x = step.noisy.double() - (step.clean.double() - c)
    b = pair.info["noise_std"] / math.sqrt(2)
    assert attack.score(rel, pair) == pytest.approx(float((x.abs() - (x - c).abs()).sum() / b))
    # per-coordinate Laplace: the ℓ1 LLR has √2 the separation of the projection (Fisher 2/s² vs 1/s²)
    l0, l1 = _scores(target, pair, attack, 200)
    p0, p1 = _scores(target, pair, ProjectedGradientCanary(), 200)
    sep = lambda s0, s1: (s1.mean() - s0.mean()) / np.sqrt(0.5 * (s0.var() + s1.var()))  # noqa: E731
    assert sep(l0, l1) > 1.15 * sep(p0, p1)


def test_product_laplace_llr_keeps_its_point_masses_exact():
    from attacks.gradient import _laplace_llr_terms

    rng = np.random.default_rng(0)
    c = torch.tensor([0.7, -0.3, 0.0, 1e-3], dtype=torch.float64)
    x = torch.from_numpy(rng.laplace(0, 1, (20_000, 4))) + c * torch.from_numpy(rng.integers(0, 2, (20_000, 1)))
    terms = _laplace_llr_terms(x, c)
    assert torch.allclose(terms, x.abs() - (x - c).abs(), atol=1e-12)
    # saturated entries are exactly ±|c_i|, whichever world produced x
    far = (x - c / 2).abs() >= c.abs() / 2
    assert torch.equal(terms[far].abs(), c.abs().expand_as(terms)[far])


def test_product_laplace_cp_bound_is_valid_on_the_exact_laplace_mechanism():
    """ε_lb ≤ the true ε (here the 1-D Laplace's C/b) at the stated confidence. With the
    subtraction form the rounding residues at the point masses gave 2.4-2.8 against 1."""
    from attacks.gradient import _laplace_llr_terms
    from audit.stats.estimators import estimate

    c, above = torch.tensor([1.0], dtype=torch.float64), 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        x0 = torch.from_numpy(rng.laplace(0, 1, (4000, 1)))
        x1 = torch.from_numpy(rng.laplace(0, 1, (4000, 1))) + c
        s0, s1 = (_laplace_llr_terms(x, c).sum(1).numpy() for x in (x0, x1))
        above += estimate(s0, s1, delta=1e-5, method="cp", seed=seed).eps_lb > 1.0
    assert above <= 1


def test_split_canary_has_the_clip_norm_on_three_coordinates(small_csbm):
    from canaries.gradient import SplitGradient

    target = HeterPoisson(noise_multiplier=0.6, steps=1, hidden=4)
    pair = SplitGradient().worlds(small_csbm, np.random.default_rng(0), target)
    gc = pair.g1.canary_gradient.double()
    clip = pair.info["clip_norm"]
    assert int((gc != 0).sum()) == 3 and bool((gc[-3:] > 0).all())
    assert gc.norm().item() == pytest.approx(clip, rel=1e-6)
    assert gc.abs().sum().item() == pytest.approx(math.sqrt(3) * clip, rel=1e-6)


def test_orthant_event_separates_per_coordinate_laplace_from_the_sml():
    """The event the split canary's audit thresholds on: all three coordinates of the noise ≥ c_i
    (c_i = C/√3, t = C/b). Its probability is e^{−√3 t}/8 under the per-coordinate-scale bug and
    E_W[Φ̄(c_i/(σ√W))³] under the SML (σ = √2 b); the IN world's is 1/8 under both. Both losses
    exceed the 1-D Laplace's t that the claim charges (the SML's is the finding of the catalogue),
    the bug's by more."""
    from scipy import integrate, stats

    from targets.heterpoisson import sml_sample

    t, b = 2.0, 1.0
    ci, std = t * b / math.sqrt(3), math.sqrt(2) * b
    sml_p0 = integrate.quad(lambda w: math.exp(-w) * stats.norm.sf(ci / (std * math.sqrt(w))) ** 3, 0, np.inf)[0]
    bug_p0 = math.exp(-math.sqrt(3) * t) / 8
    assert t < math.log(1 / 8 / sml_p0) < math.log(1 / 8 / bug_p0) - 0.5
    rng = torch.Generator().manual_seed(0)
    for per_coordinate, p0 in ((True, bug_p0), (False, sml_p0)):
        draws = torch.stack([sml_sample(3, std, rng, per_coordinate=per_coordinate, dtype=torch.float64)
                             for _ in range(40_000)])
        hits = int((draws >= ci).all(1).sum())
        assert abs(hits - 40_000 * p0) < 4 * math.sqrt(40_000 * p0)
