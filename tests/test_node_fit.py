"""The whole-node curve fit (``audit/stats/estimators/node_fit.py``) and the check of its k_t law
(``audit.stats.sampler_check.check_node_scales``): its curve, its input checks and (slow) its size on scores
drawn from the pair's exact law, with the mutants that must fail it.

| check | trials per world | reps | β | limit | P(fail \\| rate 2β) |
|---|---|---|---|---|---|
| q = 0.5, t = 4, p = 0.2, T = 3, σ = 3 (exact ε 8.23 at δ = 1e-5; the fit reads about 0.91 of it) | 20,000 | 80 | 0.2 | 25 | 0.933 |

| mutant | fails |
|---|---|
| bound × 1.1 | the size check |
| the box's bounds on the wrong side (lower CP bounds: the inversion the wrong way) | the size check |
| the declared q trusted when the true q is twice it | the size check, and the k_t law check refuses that law |
"""
import numpy as np
import pytest

from audit.stats import node_curve, pair_prior
from audit.stats.estimators import node_fit
from audit.stats.sampler_check import check_node_scales
from mutants import box_on_the_wrong_side, inflate_bound
from size import DELTA, SizeLimits, count_exceedances, stable_seed

LAW = {"q": 0.5, "t": 4, "p": 0.2, "steps": 3}


def _record(sigma: float, q: float = LAW["q"]) -> dict:
    return {"canary": "dirac-node", "node": 1, "node_training_out_degree": LAW["t"], "node_keep_probability": LAW["p"],
            "magnitude": 1.0, "noise": "gaussian", "noise_std": sigma, "sampling_rate": q, "node_scale_recorded": True}


class NodeCheck(SizeLimits):
    def __init__(self, sigma: float = 3.0, n: int = 20_000, reps: int = 80, confidence: float = 0.8,
                 fitted_q: float = LAW["q"]):
        self.sigma, self.n, self.reps, self.confidence, self.fitted_q = sigma, n, reps, confidence, fitted_q

    def run(self, name: str) -> int:
        exact = node_curve.epsilon(noise_std=self.sigma, magnitude=1.0, q=LAW["q"], t=LAW["t"], p=LAW["p"],
                                   steps=LAW["steps"], delta=DELTA)[0]
        seed = stable_seed("size-node-fit", name)

        def draw(r: int) -> tuple[float, float]:
            out, inn = pair_prior.law_scores(_record(self.sigma), LAW["steps"], n=self.n, seed=seed + r)
            e = node_fit.fit(out, inn, delta=DELTA, confidence=self.confidence, seed=r, **{**LAW, "q": self.fitted_q})
            return e.eps_lb, exact

        return count_exceedances(draw, self.reps, self.beta, f"{name} (node-gaussian-fit)")


def test_the_curve_rises_with_sigma_and_lies_below_a_gaussian_of_the_largest_k():
    alphas = np.array([1e-3, 0.01, 0.1, 0.5])
    lo, hi = (node_fit.curve_family(**LAW)(s)(alphas) for s in (4.0, 8.0))
    assert np.all(lo <= hi + 1e-12) and np.any(lo < hi)
    assert np.all((0 <= lo) & (lo <= 1 - alphas + 1e-9))


def test_the_report_is_the_lower_exact_figure_and_falls_with_sigma():
    e6, e8 = (node_fit.epsilon_at(s, LAW["q"], LAW["t"], LAW["p"], LAW["steps"], DELTA) for s in (6.0, 8.0))
    lo, hi = node_curve.epsilon(noise_std=6.0, magnitude=1.0, delta=DELTA, **LAW)
    assert e6 == pytest.approx(lo) and lo <= hi and e8 < e6


def test_no_signal_certifies_nothing():
    rng = np.random.default_rng(0)
    e = node_fit.fit(rng.standard_normal(3000), rng.standard_normal(3000), delta=1e-5, **LAW)
    assert e.eps_lb == 0.0 and e.counts["sigma_hat"] is None and e.assumption == node_fit.ASSUMPTION


def test_a_strong_signal_certifies_most_of_the_exact_epsilon():
    out, inn = pair_prior.law_scores(_record(6.0), LAW["steps"], n=20_000, seed=3)
    e = node_fit.fit(out, inn, delta=DELTA, **LAW)
    exact = node_curve.epsilon(noise_std=6.0, magnitude=1.0, delta=DELTA, **LAW)[0]
    assert 0.6 * exact < e.eps_lb <= exact < e.max_certifiable_eps + 5


@pytest.mark.parametrize("kwargs, match", [({"q": 0.0}, "0 < q"), ({"steps": 0}, "steps"),
                                           ({"select_fraction": 1.0}, "select_fraction")])
def test_bad_input_is_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        node_fit.fit(np.zeros(100), np.ones(100), delta=1e-5, **{**LAW, **kwargs})


def _scales(q: float, n: int, seed: int) -> np.ndarray:
    values, probs, _ = node_curve.scale_law(q, LAW["t"], LAW["p"])
    return np.random.default_rng(seed).choice(values, size=(n, LAW["steps"]), p=probs / probs.sum())


def test_the_k_law_check_passes_the_declared_law_and_refuses_twice_its_q():
    values, probs, _ = node_curve.scale_law(0.25, LAW["t"], LAW["p"])
    passed = sum(not check_node_scales(_scales(0.25, 1000, s), values=values, probs=probs) for s in range(20))
    assert passed >= 19  # α = 1e-3 per check
    assert check_node_scales(_scales(0.5, 1000, 0), values=values, probs=probs)  # the true q twice the declared
    assert "does not have" in check_node_scales(np.full((10, 3), 3.0), values=values, probs=probs)[0]
    assert check_node_scales(np.empty((0, 3)), values=values, probs=probs)[0].startswith("unmeasured")


def test_the_k_law_check_refuses_steps_that_move_together():
    values, probs, _ = node_curve.scale_law(0.5, LAW["t"], LAW["p"])
    one = _scales(0.5, 1000, 1)[:, :1]
    failures = check_node_scales(np.repeat(one, LAW["steps"], axis=1), values=values, probs=probs)
    assert any("independent" in f for f in failures)


@pytest.mark.slow
def test_size_at_the_truth():
    NodeCheck().run("sigma=3")


@pytest.mark.slow
def test_inflated_bound_fails(monkeypatch):
    inflate_bound(monkeypatch, node_fit.METHOD, 1.1)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        NodeCheck().run("sigma=3")


@pytest.mark.slow
def test_box_on_the_wrong_side_fails(monkeypatch):
    box_on_the_wrong_side(monkeypatch)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        NodeCheck().run("sigma=3")


@pytest.mark.slow
def test_declared_q_trusted_fails():
    """The k_t law of q = 0.25 fitted to a pair whose q is 0.5 (the k_t law check refuses it before any fit)."""
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        NodeCheck(fitted_q=0.25).run("sigma=3")
