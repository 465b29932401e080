"""GCON (objective perturbation, edge-level DP): accountant anchors, sensitivity, noise, bugs."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from audit.play.data import add_edge
from targets.base import build
from targets.gcon import (
    GCON,
    GCONConfig,
    Problem,
    accountant_at,
    calibrate,
    loss_constants,
    loss_terms,
    parse_steps,
    propagate,
    psi,
    psi_single,
    sample_noise,
    solve_lbfgs,
    solve_newton,
)

EXAMPLE1 = dict(classes=7, n1=140, num_edges=16316, encoder_hidden=16)  # + alpha=0.8, steps=2, lam=0.2


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def recover_noise(release, graph, target) -> torch.Tensor:
    """B from the released Θ through the first-order condition (Lemma 5's bijection)."""
    cfg = target.config
    info = release.info
    z = propagate(graph.edge_index, info["features"], cfg.alpha, parse_steps(cfg.steps))[info["rows"]]
    theta = release.weights["theta"].double()
    labels = info["labels"]
    _, d1, _ = loss_terms(z @ theta, labels, cfg.loss, labels.size(1), cfg.huber_delta)
    return -(z.T @ d1) - z.size(0) * info["lam_solver"] * theta


# ---------------------------------------------------------------------------------------------
# accountant anchors (spec §3.4) and round trips
# ---------------------------------------------------------------------------------------------
def test_psi_table():
    table = {0.2: [1.600, 2.880, 5.379, 7.141, 8.000], 0.4: [1.200, 1.920, 2.767, 2.982, 3.000],
             0.6: [0.800, 1.120, 1.320, 1.333, 1.333], 0.8: [0.400, 0.480, 0.500, 0.500, 0.500]}
    for alpha, row in table.items():
        for m, want in zip([1, 2, 5, 10, math.inf], row):
            assert psi_single(alpha, m) == pytest.approx(want, abs=6e-4)
    assert psi_single(0.5, 0) == 0.0
    assert psi(0.4, (0, 1, 2)) == pytest.approx((0 + 1.2 + 1.92) / 3)


def test_loss_constants_are_the_sups():
    xs = torch.linspace(-30, 30, 600_001, dtype=torch.float64)
    for loss, hd in (("msm", 0.2), ("huber", 0.1), ("huber", 0.5)):
        c1, c2, c3 = loss_constants(loss, 4, hd)
        sup1 = sup2 = 0.0
        for y in (0.0, 1.0):
            _, d1, d2 = loss_terms(xs, torch.full_like(xs, y), loss, 4, hd)
            sup1, sup2 = max(sup1, float(d1.abs().max())), max(sup2, float(d2.abs().max()))
            d3 = torch.diff(d2) / (xs[1] - xs[0])
            assert float(d3.abs().max()) <= c3 * (1 + 1e-3)
            assert float(d3.abs().max()) >= c3 * 0.99
        assert sup1 <= c1 and sup1 >= 0.99 * c1
        assert sup2 <= c2 + 1e-15 and sup2 >= 0.99 * c2


def test_worked_example_1(csbm):
    """Spec §3.4 example 1 (Cora-ML-like: c=7, d=16, α=0.8, m=2, Λ=0.2, δ=1/16316, n1=140, ε=1)."""
    claim = build("gcon", epsilon=1.0, **EXAMPLE1).claim(csbm)
    d = claim.details
    assert d["sensitivity"] == pytest.approx(0.48)
    assert d["c_sf"] == pytest.approx(39.26, rel=1e-3)
    assert d["lam_bound"] == pytest.approx(0.0374, rel=2e-3)
    assert d["lam"] == 0.2 and not d["lam_raised"]
    assert d["c_theta"] == pytest.approx(1.798, rel=1e-3)
    assert d["eps_lambda"] == pytest.approx(0.0115, rel=5e-3)
    assert d["lam_prime"] == 0.0
    assert d["beta"] == pytest.approx(1.421, rel=1e-3)
    assert d["expected_noise_norm"] == pytest.approx(11.26, rel=1e-3)
    assert claim.delta == pytest.approx(1 / 16316)
    assert claim.epsilon == pytest.approx(1.0, abs=1e-9)
    # the same numbers with --delta instead of num_edges
    d2 = build("gcon", epsilon=1.0, delta=1 / 16316, classes=7, n1=140, encoder_hidden=16).claim(csbm).details
    assert d2["beta"] == pytest.approx(d["beta"], rel=1e-12)


@pytest.mark.parametrize("n1,eps,c_theta,eps_lam,beta", [
    (140, 0.5, 3.529, 0.0144, 0.538), (140, 2, 1.200, 0.0106, 3.188), (140, 4, 0.945, 0.0101, 6.723),
    (2995, 0.5, 0.798, 0.0005, 0.868), (2995, 1, 0.756, 0.0005, 1.751), (2995, 4, 0.725, 0.0005, 7.055),
])
def test_sweep_table(csbm, n1, eps, c_theta, eps_lam, beta):
    d = build("gcon", epsilon=eps, classes=7, n1=n1, num_edges=16316, encoder_hidden=16).claim(csbm).details
    assert d["c_theta"] == pytest.approx(c_theta, rel=2e-3)
    assert d["eps_lambda"] == pytest.approx(eps_lam, abs=6e-5)
    assert d["lam_prime"] == 0.0
    assert d["beta"] == pytest.approx(beta, rel=2e-3)


def test_pseudo_huber_and_pubmed_examples(csbm):
    d = build("gcon", epsilon=1.0, loss="huber", huber_delta=0.2, **EXAMPLE1).claim(csbm).details
    assert d["c_theta"] == pytest.approx(1.159, rel=1e-3)
    assert d["eps_lambda"] == pytest.approx(0.120, rel=5e-3)
    assert d["lam_prime"] == pytest.approx(0.0392, rel=3e-3)
    assert d["beta"] == pytest.approx(1.379, rel=1e-3)
    d = build("gcon", epsilon=0.5, classes=3, n1=19717, num_edges=88648, encoder_hidden=64,
              alpha=0.4, steps="10", lam=0.01).claim(csbm).details
    assert d["c_theta"] == pytest.approx(347, rel=2e-3)
    assert d["eps_lambda"] == pytest.approx(0.51, rel=1e-2)
    assert d["lam_prime"] == pytest.approx(0.0925, rel=2e-3)
    assert d["beta"] == pytest.approx(0.00172, rel=3e-3)


def test_lam_margin(csbm):
    d = build("gcon", epsilon=0.5, alpha=0.2, steps="inf", lam=0.2, lam_margin=2.0,
              **{**EXAMPLE1, "encoder_hidden": 64}).claim(csbm).details
    assert d["lam"] == pytest.approx(2 * d["lam_bound"] + 1e-6)
    assert d["lam_prime"] == 0.0 and math.isfinite(d["beta"])


def test_lambda_raised_to_its_bound(csbm):
    """α = 0.2, m = ∞ (Ψ = 8), d = 64, ε = 0.5: Λ must be ≥ 3.31 (spec §3.4)."""
    d = build("gcon", epsilon=0.5, alpha=0.2, steps="inf", lam=0.2, xi=1e-3,
              **{**EXAMPLE1, "encoder_hidden": 64}).claim(csbm).details
    assert d["lam_raised"]
    assert d["lam_bound"] == pytest.approx(3.31, rel=2e-3)
    assert d["lam"] == pytest.approx(d["lam_bound"] + 1e-3)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5, 8.0])
@pytest.mark.parametrize("loss", ["msm", "huber"])
def test_calibration_round_trip(csbm, eps, loss):
    """ε → (β, Λ, Λ') → ε: Theorem 1 and the reverse accountant (§3.3) at the recipe's outputs."""
    t = build("gcon", epsilon=eps, loss=loss)
    claim = t.claim(csbm)
    d = claim.details
    assert claim.epsilon == pytest.approx(eps, abs=1e-9)
    # §3.3 at the recipe's c_θ: exactly ε when Λ' = 0, at most ε otherwise; δ below the target
    if d["lam_prime"] == 0.0:
        assert d["epsilon_at_c_theta"] == pytest.approx(eps, abs=1e-9)
    assert d["epsilon_at_c_theta"] <= eps + 1e-9
    assert d["delta_at_c_theta"] <= claim.delta
    # the reverse accountant never says more than the target and meets δ exactly
    assert d["reverse_epsilon"] <= eps + 1e-9
    if d["lam_prime"] == 0.0:  # with Λ' > 0 the run can be far more private than claimed
        assert d["reverse_epsilon"] >= 0.9 * eps
    assert d["reverse_delta"] == pytest.approx(claim.delta, rel=1e-6)
    # monotone: more ε, less noise
    assert build("gcon", epsilon=2 * eps, loss=loss).claim(csbm).details["beta"] > d["beta"]


def test_reverse_accountant_tradeoff():
    kw = dict(beta=1.421, lam_total=0.2, c=7, d=16, n1=140, psi=0.48, c1=1 / 7, c2=1 / 28, c3=1 / (42 * math.sqrt(3)))
    e1, d1 = accountant_at(1.5, **kw)
    e2, d2 = accountant_at(2.0, **kw)
    assert e1 < e2 and d1 > d2


def test_delta_rule(csbm):
    claim = build("gcon", epsilon=1.0).claim(csbm)
    assert claim.delta == pytest.approx(1 / csbm.edge_index.size(1))
    assert build("gcon", epsilon=1.0, delta=1e-3).claim(csbm).delta == 1e-3
    assert "undirected" in claim.unit_text
    assert "weights" in claim.details["covers"]


# ---------------------------------------------------------------------------------------------
# propagation: Lemma 1 and the sensitivity bound Ψ by brute force over single-edge flips
# ---------------------------------------------------------------------------------------------
def _small_graphs():
    def ei(pairs, n):
        if not pairs:
            return torch.empty(2, 0, dtype=torch.long), n
        e = torch.tensor(pairs, dtype=torch.long).T
        return torch.cat([e, e.flip(0)], 1), n

    n = 7
    out = [ei([(i, i + 1) for i in range(n - 1)], n), ei([(0, i) for i in range(1, n)], n),
           ei([(i, (i + 1) % n) for i in range(n)], n), ei(list(itertools.combinations(range(5), 2)), 5),
           ei([], 4)]
    rng = np.random.default_rng(0)
    for _ in range(3):
        pairs = [p for p in itertools.combinations(range(n), 2) if rng.random() < 0.35]
        out.append(ei(pairs, n))
    return out


def _flip(edge_index, n, u, v):
    a = torch.zeros(n, n, dtype=torch.bool)
    a[edge_index[0], edge_index[1]] = True
    a[u, v] = a[v, u] = not bool(a[u, v])
    return a.nonzero().T


def test_lemma1_propagation_matrix():
    for edge_index, n in _small_graphs():
        deg = torch.bincount(edge_index[0], minlength=n).double()
        for alpha in (0.2, 0.5, 0.8):
            for m in (1, 2, 5, math.inf):
                r = propagate(edge_index, torch.eye(n, dtype=torch.float64), alpha, (m,))
                assert float(r.min()) >= -1e-15
                assert torch.allclose(r.sum(1), torch.ones(n, dtype=torch.float64), atol=1e-10)
                assert bool((r.sum(0) <= torch.clamp((deg + 1) / 2, min=1.0) + 1e-9).all())


@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.5, 0.8])
def test_sensitivity_bound_brute_force(alpha):
    """Σ_i ‖Δz_i‖ ≤ Ψ(Z) for every single-edge flip (add or remove), and Σ|ΔR_m| ≤ Ψ(Z_m)."""
    rng = np.random.default_rng(1)
    configs = [(1,), (2,), (5,), (10,), (math.inf,), (0, 2), (1, math.inf)]
    worst = 0.0
    for edge_index, n in _small_graphs():
        x = torch.from_numpy(rng.normal(size=(n, 3)))
        x = x / x.norm(dim=1, keepdim=True)
        eye = torch.eye(n, dtype=torch.float64)
        for steps in configs:
            bound = psi(alpha, steps)
            z = propagate(edge_index, x, alpha, steps)
            r = propagate(edge_index, eye, alpha, steps) * len(steps)  # [R_m1 | ...] without 1/s
            for u, v in itertools.combinations(range(n), 2):
                flipped = _flip(edge_index, n, u, v)
                dz = (propagate(flipped, x, alpha, steps) - z).norm(dim=1).sum().item()
                assert dz <= bound + 1e-9, (steps, u, v, dz, bound)
                worst = max(worst, dz / bound)
                if len(steps) == 1:
                    dr = (propagate(flipped, eye, alpha, steps) * 1 - r).abs().sum().item()
                    assert dr <= psi_single(alpha, steps[0]) + 1e-9
    assert worst > 0.2  # the test exercises the bound, not only trivially small changes


@pytest.mark.parametrize("m", [1, 2, 5, math.inf])
def test_isolated_opposite_pair_meets_two_one_minus_alpha(m):
    alpha = 0.3
    x = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    empty = torch.empty(2, 0, dtype=torch.long)
    edge = torch.tensor([[0, 1], [1, 0]])
    dz = (propagate(edge, x, alpha, (m,)) - propagate(empty, x, alpha, (m,))).norm(dim=1).sum().item()
    assert dz == pytest.approx(2 * (1 - alpha), abs=1e-10)
    if m == 1:
        assert dz == pytest.approx(psi_single(alpha, 1), abs=1e-10)


def test_one_hop_inference_is_local(csbm):
    t = build("gcon", epsilon=1.0)
    r = t.fit(csbm, gen(0))
    deg = torch.bincount(csbm.edge_index[0], minlength=csbm.num_nodes)
    a, b = 0, 1
    while bool(((csbm.edge_index[0] == a) & (csbm.edge_index[1] == b)).any()):
        b += 1
    g2 = add_edge(csbm, a, b)
    p1, p2 = r.api(csbm), r.api(g2)
    assert torch.allclose(p1.sum(1), torch.ones(csbm.num_nodes), atol=1e-5)
    changed = (p1 - p2).abs().max(1).values > 1e-7
    assert set(changed.nonzero().view(-1).tolist()) == {a, b}  # only the endpoints' predictions move
    assert r.api(csbm, nodes=[a, b]).shape == (2, 3)
    # the public-graph mode propagates m hops, so neighbours of the endpoints move too
    full = build("gcon", epsilon=1.0, inference="full").fit(csbm, gen(0))
    moved = ((full.api(csbm) - full.api(g2)).abs().max(1).values > 1e-9).sum().item()
    assert moved > 2 and deg.sum() > 0


# ---------------------------------------------------------------------------------------------
# noise and optimisation
# ---------------------------------------------------------------------------------------------
def test_noise_sampler_law():
    d, c, beta = 16, 4000, 2.5
    b = sample_noise(d, c, beta, gen(3))
    radius = b.norm(dim=0).numpy()
    assert radius.mean() == pytest.approx(d / beta, rel=0.02)
    assert stats.kstest(radius * beta, stats.gamma(a=d).cdf).pvalue > 1e-3
    # isotropy: the first coordinate of the direction ~ 2·Beta((d-1)/2, (d-1)/2) − 1
    u1 = (b[0] / b.norm(dim=0)).numpy()
    assert stats.kstest((u1 + 1) / 2, stats.beta((d - 1) / 2, (d - 1) / 2).cdf).pvalue > 1e-3
    # per-entry std = sqrt(d+1)/β (what Claim.details['noise_std'] reports)
    assert float(b.std()) == pytest.approx(math.sqrt(d + 1) / beta, rel=0.03)


def test_released_weights_carry_the_claimed_noise(csbm):
    """B recovered from Θ_priv through the optimality condition has the claimed law (ε = 1)."""
    t = build("gcon", epsilon=1.0)
    claim = t.claim(csbm)
    beta, d = claim.details["beta"], claim.details["d"]
    radii, entries = [], []
    for seed in range(25):
        b = recover_noise(t.fit(csbm, gen(seed)), csbm, t)
        radii += b.norm(dim=0).tolist()
        entries.append(b.view(-1))
    radii = np.array(radii)
    assert stats.kstest(radii * beta, stats.gamma(a=d).cdf).pvalue > 1e-3
    assert float(torch.cat(entries).std()) == pytest.approx(claim.details["noise_std"], rel=0.1)
    # and exactly the B drawn from the generator (the fit's first draw)
    b0 = recover_noise(t.fit(csbm, gen(7)), csbm, t)
    assert torch.allclose(b0, sample_noise(d, 3, beta, gen(7)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("loss,steps", [("msm", "2"), ("huber", "2"), ("msm", "0,1,inf")])
def test_exact_minimiser(csbm, loss, steps):
    t = build("gcon", epsilon=1.0, loss=loss, steps=steps)
    r = t.fit(csbm, gen(0))
    assert r.info["gradient_norm"] <= 1e-9
    assert r.info["exact_minimizer"]
    assert r.weights["theta"].shape == (t.claim(csbm).details["d"], 3)


def test_lbfgs_agrees_with_newton():
    g = torch.Generator().manual_seed(0)
    z = torch.randn(80, 6, generator=g, dtype=torch.float64)
    z = z / z.norm(dim=1, keepdim=True)
    y = torch.nn.functional.one_hot(torch.randint(0, 3, (80,), generator=g), 3).double()
    b = sample_noise(6, 3, 1.0, g)
    for loss in ("msm", "huber"):
        p = Problem(z, y, b, 0.05, loss, 0.2)
        tn, tl = solve_newton(p, 1e-11), solve_lbfgs(p, 1e-11)
        assert float(p.columns(tn)[1].norm()) <= 1e-10
        assert torch.allclose(tn, tl, atol=1e-6)


def test_adam_mode_is_flagged(csbm):
    t = build("gcon", epsilon=1.0, optimizer="adam", adam_epochs=50)
    assert t.claim(csbm).details["covered_by_theorem"] is False
    assert build("gcon", epsilon=1.0).claim(csbm).details["covered_by_theorem"] is True
    r = t.fit(csbm, gen(0))
    assert r.info["optimizer"] == "adam" and r.info["gradient_norm"] > 1e-6


# ---------------------------------------------------------------------------------------------
# determinism, caching, views
# ---------------------------------------------------------------------------------------------
def test_determinism_by_seed(csbm):
    t = build("gcon", epsilon=1.0)
    r1, r2, r3 = t.fit(csbm, gen(5)), t.fit(csbm, gen(5)), t.fit(csbm, gen(6))
    assert torch.equal(r1.weights["theta"], r2.weights["theta"])
    assert torch.equal(r1.api(csbm), r2.api(csbm))
    assert not torch.allclose(r1.weights["theta"], r3.weights["theta"])
    # a fresh target (no cache, no prepare) and a prepared one give the same release
    fresh = build("gcon", epsilon=1.0)
    fresh.prepare(csbm)
    assert torch.equal(fresh.fit(csbm, gen(5)).weights["theta"], r1.weights["theta"])
    # encoder drawn from the generator: still deterministic by seed
    t2 = build("gcon", epsilon=1.0, encoder_seed=None)
    assert torch.equal(t2.fit(csbm, gen(5)).weights["theta"], t2.fit(csbm, gen(5)).weights["theta"])


def test_release_views_and_accuracy(csbm):
    t = build("gcon", epsilon=4.0)
    r = t.fit(csbm, gen(0))
    assert r.levels == ("api", "weights", "mechanism") == GCON.levels
    acc = r.info["accuracy"]
    assert set(acc) == {"train", "val", "test"} and 0.0 <= acc["test"] <= 1.0
    assert acc["test"] > 0.6  # csbm is easy; a broken pipeline sits near 1/3
    assert r.info["fresh_noise_per_query"] is False
    step = r.mechanism[0]
    assert step.noise_std is None and torch.equal(step.output, r.weights["theta"])
    noiseless = t.noiseless(csbm)
    assert torch.allclose(step.mean(csbm), noiseless, atol=1e-8)
    assert not torch.allclose(step.output, noiseless, atol=1e-3)


def test_accuracy_survives_tiny_weights(csbm):
    """A huge Λ shrinks Θ to ~1e-9 without changing its direction much; the reported accuracy is
    the argmax of the float64 logits, so it must not collapse to one class (float32 posteriors tie)."""
    accs = {}
    for lam in (1e3, 1e9):
        r = build("gcon", epsilon=1.0, lam=lam, bug="no-noise").fit(csbm, gen(0))
        accs[lam] = r.info["accuracy"]["test"]
    assert float(r.weights["theta"].abs().max()) < 1e-6
    assert accs[1e9] > 0.6 and abs(accs[1e9] - accs[1e3]) < 0.05


def test_pseudo_labels_use_every_node(csbm):
    t = build("gcon", epsilon=1.0, pseudo_labels=True)
    assert t.claim(csbm).details["n1"] == csbm.num_nodes
    assert build("gcon", epsilon=1.0, pseudo_labels=False).claim(csbm).details["n1"] == int(csbm.train_mask.sum())
    r = t.fit(csbm, gen(0))
    assert r.info["n1"] == csbm.num_nodes and r.info["gradient_norm"] <= 1e-9


def test_accounting_overrides_refused_by_fit(csbm):
    with pytest.raises(ValueError, match="accounting override"):
        build("gcon", epsilon=1.0, classes=7).fit(csbm, gen(0))
    with pytest.raises(ValueError, match="accounting override"):
        build("gcon", epsilon=1.0, n1=140).fit(csbm, gen(0))
    assert build("gcon", epsilon=1.0, n1=csbm.num_nodes).fit(csbm, gen(0)).info["n1"] == csbm.num_nodes


# ---------------------------------------------------------------------------------------------
# planted bugs
# ---------------------------------------------------------------------------------------------
def test_bug_no_noise(csbm):
    honest = build("gcon", epsilon=1.0)
    buggy = build("gcon", epsilon=1.0, bug="no-noise")
    assert buggy.claim(csbm) == honest.claim(csbm)
    r = buggy.fit(csbm, gen(0))
    step = r.mechanism[0]
    assert torch.allclose(step.output, step.mean(csbm), atol=1e-8)
    assert float(recover_noise(r, csbm, buggy).abs().max()) < 1e-6
    h = honest.fit(csbm, gen(0)).mechanism[0]
    assert not torch.allclose(h.output, h.mean(csbm), atol=1e-3)


def test_bug_approximate_minimizer(csbm):
    honest = build("gcon", epsilon=1.0)
    buggy = build("gcon", epsilon=1.0, bug="approximate-minimizer")
    assert buggy.claim(csbm) == honest.claim(csbm)
    assert buggy.claim(csbm).details["covered_by_theorem"] is True  # still claims Theorem 1
    r, h = buggy.fit(csbm, gen(0)), honest.fit(csbm, gen(0))
    assert r.info["gradient_norm"] > 1e-4 and not r.info["exact_minimizer"]
    assert (r.weights["theta"] - h.weights["theta"]).abs().max() > 1e-2


def test_unknown_bug_rejected():
    with pytest.raises(ValueError, match="unknown bug"):
        build("gcon", bug="nope")


# ---------------------------------------------------------------------------------------------
# config validation
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key,value", [
    ("alpha", 1.5), ("alpha", 0.0), ("steps", "0"), ("steps", "a,2"), ("steps", "-1"), ("loss", "l2"),
    ("optimizer", "sgd"), ("lam", 0.0), ("omega", 1.0), ("xi", 0.0), ("encoder_hidden", 0),
    ("inference_alpha", 0.0), ("inference", "two-hop"), ("n1", 0), ("classes", 1), ("tol", -1.0),
    ("huber_delta", 0.0), ("encoder_dropout", 1.0), ("unit", "node"), ("weight_decay", -1e-3),
    ("lam_margin", 0.5), ("encoder_activation", "gelu"), ("encoder_seed", -1),
])
def test_bad_config_rejected(key, value):
    with pytest.raises(ValueError, match=f"The '{key}' parameter"):
        GCONConfig(**{key: value})


def test_set_strings_are_coerced(csbm):
    t = build("gcon", epsilon="1", **{"classes": "7", "n1": "140", "num_edges": "16316", "steps": "2",
                                      "encoder_hidden": "16",
                                      "alpha": "0.8", "pseudo_labels": "false"})
    assert t.claim(csbm).details["beta"] == pytest.approx(1.421, rel=1e-3)


def test_calibrate_function_matches_claim(csbm):
    c1, c2, c3 = loss_constants("msm", 7)
    cal = calibrate(1.0, 1 / 16316, c=7, d=16, n1=140, psi=0.48, c1=c1, c2=c2, c3=c3, lam=0.2)
    assert cal["beta"] == pytest.approx(build("gcon", epsilon=1.0, **EXAMPLE1).claim(csbm).details["beta"])


# ---------------------------------------------------------------------------------------------
# end to end through the audit game (where the harness pieces are present)
# ---------------------------------------------------------------------------------------------
def test_short_audit_run(tmp_path):
    from audit.play import game

    spec = game.AuditSpec(target="gcon", epsilon=0.5, dataset="csbm", trials=60, seed=0,
                          canary="random-edge", bug="no-noise")
    bad = game.run_audit(spec, out=tmp_path, progress=False)
    spec_ok = game.AuditSpec(target="gcon", epsilon=0.5, dataset="csbm", trials=60, seed=0,
                             canary="random-edge")
    ok = game.run_audit(spec_ok, out=tmp_path, progress=False)
    assert bad["verdict"] == "VIOLATION"
    assert ok["verdict"] == "CONSISTENT"


def test_log_density_is_the_noise_law_at_the_inverted_noise(csbm):
    """The mechanism step's log-density: −β Σ_j ‖B_j‖ + Σ_j log det H_j, with B from the first-order
    condition under the graph asked about; the attack's exact likelihood ratio is its difference."""
    from attacks.mechanism import MechanismLRT
    from canaries.edge import CanaryPair

    t = build("gcon", epsilon=1.0)
    r = t.fit(csbm, gen(3))
    beta, step = t.claim(csbm).details["beta"], r.mechanism[0]
    b = recover_noise(r, csbm, t)
    cfg, info = t.config, r.info
    z = propagate(csbm.edge_index, info["features"], cfg.alpha, parse_steps(cfg.steps))[info["rows"]]
    p = Problem(z, info["labels"], torch.zeros_like(b), info["lam_solver"], cfg.loss, cfg.huber_delta)
    expected = -beta * float(b.norm(dim=0).sum()) + float(torch.logdet(p.hessians(r.weights["theta"].double())).sum())
    assert step.log_density(csbm) == pytest.approx(expected, rel=1e-9)
    g1 = add_edge(csbm, 0, 599)
    pair = CanaryPair(csbm, g1, {"edge": [0, 599]})
    attack = MechanismLRT()
    assert attack.natural_threshold_for(r) == 0.0
    assert attack.score(r, pair) == pytest.approx(step.log_density(g1) - step.log_density(csbm))
