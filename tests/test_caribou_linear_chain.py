"""CARIBOU's PCMP as a linear Gaussian chain (targets.caribou.linear_chain, issue #32): the closed form
against the target's own hops, a two-hop case by hand, and the witness search's constraint."""
import math

import numpy as np
import torch

from graphs.ops import add_edge
from graphs.small import make_graph
from targets.caribou.accountant import convergent_multiplier
from targets.caribou.binding import antipodal_pair, search
from targets.caribou.linear_chain import chain_law, max_row_norm, pair_mu
from targets.caribou.target import Caribou

PATH = [(0, 1), (1, 2), (2, 3), (3, 4)]


def _x0(n: int, width: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, width, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm(dim=1, keepdim=True)


def test_law_matches_the_targets_own_hops_without_projection():
    graph = make_graph(5, PATH, features=2)
    x0 = _x0(5, 2, 1)
    target = Caribou(hops=3, contraction=0.7, alpha1=0.8, beta=0.5, hidden=2, bug="no-projection")
    s, draws = 0.3, 4000
    gen = torch.Generator().manual_seed(7)
    out = torch.stack([target.pcmp(graph, x0, s, gen)[-1] for _ in range(draws)])  # draws × n × h
    law = chain_law(graph, x0, 3, 0.7, 0.8, 0.5)
    assert torch.allclose(out.mean(0), law.mean, atol=4 * s * law.cov.diagonal().max().sqrt() / math.sqrt(draws))
    centred = (out - law.mean).permute(2, 0, 1).reshape(-1, 5)  # every column a draw of the n-vector
    empirical = centred.T @ centred / centred.size(0)
    assert torch.allclose(empirical, s**2 * law.cov, atol=0.1 * s**2 * float(law.cov.max()))


def test_two_hops_by_hand():
    """K = 2: X⁽²⁾ = L²X0 + β(I + L)X0 + L Z0 + Z1, covariance s²(I + LLᵀ); L from Â written out."""
    g0 = make_graph(4, [(0, 1), (2, 3)], features=1)
    g1 = add_edge(g0, 1, 2)
    c, a1, beta, s = 0.6, 1.0, 0.4, 0.5
    x0 = torch.tensor([[1.0], [-1.0], [1.0], [-1.0]], dtype=torch.float64)

    def lin(adj: np.ndarray) -> np.ndarray:
        a = adj + np.eye(4)
        d = a.sum(1)
        return c * a / np.sqrt(np.outer(d, d))

    adj0 = np.zeros((4, 4))
    adj0[0, 1] = adj0[1, 0] = adj0[2, 3] = adj0[3, 2] = 1
    adj1 = adj0.copy()
    adj1[1, 2] = adj1[2, 1] = 1
    x = x0.numpy()
    means = [l @ l @ x + beta * (np.eye(4) + l) @ x for l in (lin(adj0), lin(adj1))]
    cov0 = np.eye(4) + lin(adj0) @ lin(adj0).T
    diff = means[1] - means[0]
    mu_hand = math.sqrt(float((diff.T @ np.linalg.solve(cov0, diff)).item())) / s
    laws = [chain_law(g, x0, 2, c, a1, beta) for g in (g0, g1)]
    assert np.allclose(laws[0].mean.numpy(), means[0]) and np.allclose(laws[0].cov.numpy(), cov0)
    got = pair_mu(laws[0], laws[1], s)
    assert math.isclose(got["mu_0"], mu_hand, rel_tol=1e-9)
    assert got["cov_gap"] > 0  # the edge changes the hidden hop's propagation too


def test_log_density_ratio_is_the_gaussian_one():
    """With equal covariances the log-density ratio of the two laws at x is the linear test's."""
    graph = make_graph(5, PATH, features=1)
    law0 = chain_law(graph, _x0(5, 1, 2), 2, 0.5, 1.0, 0.3)
    law1 = type(law0)(mean=law0.mean + 0.1, cov=law0.cov)
    x, s = law0.mean + 0.05, 0.2
    diff = law1.mean - law0.mean
    linear = float((diff * torch.linalg.solve(law0.cov, x - (law0.mean + law1.mean) / 2)).sum()) / s**2
    assert math.isclose(law1.log_density(x, s) - law0.log_density(x, s), linear, rel_tol=1e-9)


def test_convergent_multiplier_is_the_scalar_chains_mu_squared():
    """M(K, γ) = (Σγʲ)² / Σγ²ʲ: a signal Δ along an eigenvector of eigenvalue γ at every hop."""
    for k, g in ((10, 0.8), (5, 0.5), (3, 0.1)):
        assert math.isclose(convergent_multiplier(k, g), sum(g**j for j in range(k)) ** 2
                            / sum(g ** (2 * j) for j in range(k)), rel_tol=1e-12)


def test_search_keeps_the_hops_in_the_ball_and_reads_below_the_claim_at_default_contraction():
    g0, g1, _ = antipodal_pair(8, 2, 2)
    found = search(g0, g1, hops=5, contraction=0.8, alpha1=1.0, width=2, steps=60, restarts=1)
    assert found.max_norm <= 0.95 + 1e-9
    assert all(max_row_norm(g, found.x0, 5, 0.8, 1.0, found.beta) <= 0.95 + 1e-9 for g in (g0, g1))
    assert 0 < found.ratio < 1


def test_given_input_declares_the_chain_density_and_it_separates_the_worlds(tmp_path):
    """K > 1 on a given X⁽⁰⁾: the release's log-density ratio is the chain's, its mean moves from
    −μ²/2 to +μ²/2 between the worlds (μ the pair's exact one), and with the noise off it is absent."""
    import json

    from targets.caribou.given_input import CaribouGivenInput

    g0, g1, _ = antipodal_pair(8, 2, 2)
    x0 = _x0(8, 2, 3)
    path = tmp_path / "x0.json"
    path.write_text(json.dumps({"input": {"x": {"dtype": "float64", "shape": [8, 2], "data": x0.reshape(-1).tolist()}}}))
    params = dict(x0=str(path), hops=3, contraction=0.3, alpha1=1.0, beta=0.3, hidden=2, encoder_epochs=1,
                  epsilon=4.0, d_max=3, bug="no-projection")
    target = CaribouGivenInput(**params)
    std = target.claim(g0).details["noise_std"]
    laws = [chain_law(g, x0, 3, 0.3, 1.0, 0.3) for g in (g0, g1)]
    mu = pair_mu(laws[0], laws[1], std)["mu_0"]
    means = []
    for b, g in enumerate((g0, g1)):
        releases = target.fit_batch(g, [torch.Generator().manual_seed(100 * b + i) for i in range(300)])
        steps = [r.mechanism[0] for r in releases]
        assert all(s.log_density is not None for s in steps)
        means.append(float(np.mean([s.log_density(g1) - s.log_density(g0) for s in steps])))
    assert means[0] < 0 < means[1]
    # the two worlds' covariances differ a little, so the centres are ±μ²/2 only up to that gap
    assert math.isclose(means[1] - means[0], mu**2, rel_tol=0.25)
    quiet = CaribouGivenInput(**{**params, "bug": "no-noise"}).fit(g0, torch.Generator().manual_seed(0))
    assert quiet.mechanism[0].log_density is None
