"""The exact LLR of an Adam-computed GCON release (attacks.adam_lrt)."""
import numpy as np
import pytest
import torch

from attacks.adam_lrt import AdamLRT, ColumnLaw, column_map
from audit.play import game
from audit.stats.estimators import select_threshold
from canaries import base as canaries
from canaries.edge import CanaryPair, ExplicitEdge
from targets.gcon import GCON, Problem, sample_noise


def _column(n1: int = 40, seed: int = 0) -> Problem:
    """A noise-free d = 1 problem with three classes (λ = 0.05); the tests use its column 0."""
    g = torch.Generator().manual_seed(seed)
    z = torch.rand(n1, generator=g, dtype=torch.float64) * 2 - 1
    y = (torch.rand(n1, generator=g, dtype=torch.float64) < 0.4).double()
    return Problem(z[:, None], torch.stack([y, 1 - y, y], 1), torch.zeros(1, 3, dtype=torch.float64), 0.05, "msm", 0.2)


def _laplace(n: int, beta: float, seed: int) -> torch.Tensor:
    u = torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) - 0.5
    return -torch.sign(u) * torch.log1p(-2 * u.abs()) / beta


def test_adam_map_replays_the_released_theta(small_csbm):
    target = GCON(epsilon=1, encoder_hidden=1, adam_lr=0.1, bug="approximate-minimizer")
    rel = target.fit(small_csbm, torch.Generator().manual_seed(5))
    assert rel.info["solver"] == {"name": "adam", "steps": 10, "lr": 0.1}
    p = rel.info["noise_free_problem"](small_csbm)
    noise = sample_noise(1, p.y.size(1), rel.info["beta"], torch.Generator().manual_seed(5))  # fit's first draw
    for j in range(p.y.size(1)):
        replay = column_map(p, j, noise[0, j:j + 1], 10, 0.1)
        assert float(replay[0]) == pytest.approx(float(rel.weights["theta"][0, j]), abs=1e-12)
    assert GCON(epsilon=1)._solver()["name"] == "newton"


def test_a_large_step_folds_the_map_and_the_support_is_exact():
    p = _column()
    for lr in (0.5, 0.01):
        law = ColumnLaw(p, 0, beta=2.0, steps=10, lr=lr, grid=4001)
        assert len(law.pieces) > 1
        # every draw of the mechanism lands where its own law has positive density (no support cut short)
        theta = column_map(p, 0, _laplace(50_000, 2.0, 1), 10, lr).numpy()
        assert np.all(law.log_density(theta) > -600)


def test_density_matches_a_histogram_away_from_the_folds():
    p = _column()
    law = ColumnLaw(p, 0, beta=2.0, steps=10, lr=0.5, grid=4001)
    theta = column_map(p, 0, _laplace(200_000, 2.0, 2), 10, 0.5).numpy()
    folds = np.array([p[1][0] for p in law.pieces[1:]])
    edges = np.quantile(theta, np.linspace(0.02, 0.98, 25))
    checked = 0
    for lo, hi in zip(edges[:-1], edges[1:]):
        if np.any((folds > lo - 1e-3) & (folds < hi + 1e-3)) or hi - lo < 1e-6:
            continue  # a fold inside: the density is singular there
        mid = np.linspace(lo, hi, 201)
        mass = np.trapezoid(np.exp(law.log_density(mid)), mid)
        emp = np.mean((theta >= lo) & (theta < hi))
        assert mass == pytest.approx(emp, rel=0.1, abs=2e-3)
        checked += 1
    assert checked >= 5


def test_the_attack_needs_adam_and_one_feature(small_csbm):
    pair = ExplicitEdge(0, 1).worlds(small_csbm, np.random.default_rng(0))
    exact = GCON(epsilon=1, encoder_hidden=1).fit(pair.g1, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="needs a release computed by Adam"):
        AdamLRT().score(exact, pair)
    wide = GCON(epsilon=1, encoder_hidden=2, bug="approximate-minimizer").fit(pair.g1, torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="one feature per column"):
        AdamLRT(grid=101).score(wide, pair)


def test_explicit_edge_canary(small_csbm):
    u, v = (int(x) for x in small_csbm.edge_index[:, 0])
    have = canaries.make(f"edge:{u}-{v}").worlds(small_csbm, np.random.default_rng(0))
    assert have.info["in_graph"] and have.g1 is small_csbm and have.g0.edge_index.size(1) == small_csbm.edge_index.size(1) - 2
    with pytest.raises(ValueError, match="edge:U-V"):
        canaries.make("edge:3")
    with pytest.raises(ValueError, match="nodes"):
        canaries.make("edge:0-100000").worlds(small_csbm, np.random.default_rng(0))
    assert isinstance(have, CanaryPair)


def test_threshold_is_fixed_from_the_two_laws_alone(small_csbm):
    target = GCON(epsilon=1, encoder_hidden=1, adam_lr=0.5, bug="approximate-minimizer")
    pair = ExplicitEdge(0, 5).worlds(small_csbm, np.random.default_rng(0))
    probe = target.fit(pair.g0, torch.Generator().manual_seed(123))
    attack = AdamLRT(grid=2001)
    out, inn = attack.simulate(probe, pair, n=2000)
    assert out.shape == inn.shape == (2000,) and inn.mean() > out.mean()  # an LLR: higher in the IN world
    assert attack.reads_probe
    t = select_threshold("cp", *attack.model_scores(probe, pair), delta=1e-3, confidence=0.95)
    assert np.isfinite(t) or t == -np.inf
    # the probe is only read for the public problem: another probe gives the same model scores
    other = target.fit(pair.g0, torch.Generator().manual_seed(7))
    assert select_threshold("cp", *attack.model_scores(other, pair), delta=1e-3, confidence=0.95) == t


def test_game_counts_every_trial_at_the_attacks_a_priori_threshold(tmp_path):
    spec = game.AuditSpec(target="gcon", bug="approximate-minimizer", dataset="csbm:n=120,features=8",
                          params={"encoder_hidden": "1", "adam_lr": "0.5"}, canary="edge:0-5", attack="adam-lrt",
                          estimator="cp", trials=40)
    res = game.run_audit(spec, out=tmp_path, progress=False)
    counts = res["estimate"]["counts"]
    assert counts["n_out"] + counts["n_in"] == 40  # nothing held out
    graph, target, claim = game.setup_run(spec)
    pair = canaries.make(spec.canary).worlds(graph, np.random.default_rng(0), target)
    probe = target.fit(pair.g0, torch.Generator().manual_seed(0))
    assert res["estimate"]["threshold"] == select_threshold("cp", *AdamLRT().model_scores(probe, pair),
                                                            delta=claim.delta, confidence=0.95)
