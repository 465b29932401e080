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

The fit at an a-priori share (``node_fit.fit_at_share``, the default's), the share from the declared law
(``pair_prior.prior_fraction``) at the check's size:

| check | trials per world | reps | β | limit | P(fail \| rate 2β) |
|---|---|---|---|---|---|
| σ = 3 as above | 20,000 | 80 | 0.2 | 25 | 0.933 |
| HeterPoisson's played pair (seed 0's: σ = 31.85, exact ε 0.0943 at δ = 0.0033) | 7,000 and 50,000 | 80 | 0.2 | 25 | 0.933 |

| mutant | fails |
|---|---|
| bound × 1.1 | the σ = 3 check |
| the plug-in (σ̂ the smallest σ whose curve lies above the observed error pair: no confidence) | both checks |
| the declared q trusted when the true q is twice it | not the size check (30% of 30 draws exceed at β = 0.2, limit 31%): the k_t check refuses that law on its fewest releases (100: 40 of 40) |
| at the same share, never below cp_at_rank's figure on the same trials | (a property, 20 draws) |
"""
import numpy as np
import pytest

from audit.stats import node_curve, pair_prior
from audit.stats.estimators import node_fit
from audit.stats.estimators.cp_every_trial import cp_at_rank
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


class NodeShareCheck(NodeCheck):
    """:func:`node_fit.fit_at_share` at the share the declared law fixes for this size (no trial seen): the fit's own
    (:func:`node_fit.prior_share`), as the default reads it."""

    def __init__(self, sigma: float = 3.0, n: int = 20_000, reps: int = 80, confidence: float = 0.8,
                 fitted_q: float = LAW["q"], delta: float = DELTA):
        super().__init__(sigma, n, reps, confidence, fitted_q)
        self.delta = delta

    def run(self, name: str) -> int:
        exact = node_curve.epsilon(noise_std=self.sigma, magnitude=1.0, q=LAW["q"], t=LAW["t"], p=LAW["p"],
                                   steps=LAW["steps"], delta=self.delta)[0]
        fraction = node_fit.prior_share(sigma=self.sigma, n_out=self.n, n_in=self.n, delta=self.delta,
                                        confidence=self.confidence, **{**LAW, "q": self.fitted_q})[0]
        seed = stable_seed("size-node-fit-at-share", name)

        def draw(r: int) -> tuple[float, float]:
            out, inn = pair_prior.law_scores(_record(self.sigma), LAW["steps"], n=self.n, seed=seed + r)
            e = node_fit.fit_at_share(out, inn, delta=self.delta, confidence=self.confidence, seed=r,
                                      fraction=fraction, **{**LAW, "q": self.fitted_q})
            return e.eps_lb, exact

        return count_exceedances(draw, self.reps, self.beta, f"{name} (node-gaussian-fit-at-share)")


#: HeterPoisson's played pair on seed 0 (benchmarks/heterpoisson_power.md §7): noise std / canary norm, δ
HP_SIGMA, HP_DELTA = 15.927469240038253 / 0.5, 0.003305


def plug_in(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fit at a share with no confidence: σ rejected wherever its curve's TPR bound at V's median lies below
    the observed TPR (the point estimate, not the Beta–Binomial test)."""
    def point(rates, tp, n_in, w):
        median = int(np.searchsorted(np.cumsum(w), 0.5))
        return np.array([0.0 if rates[0, median] < tp[0] / n_in else 1.0])

    monkeypatch.setattr(node_fit._cp, "binomial_tail_mix", point)


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


@pytest.mark.parametrize("seed", range(20))
def test_at_a_share_the_fit_never_reports_less_than_cp_on_the_same_trials(seed):
    out, inn = pair_prior.law_scores(_record(HP_SIGMA), LAW["steps"], n=20_000, seed=100 + seed)
    fraction = [0.05, 0.1, 0.2, 0.45][seed % 4]
    fit = node_fit.fit_at_share(out, inn, delta=HP_DELTA, fraction=fraction, seed=seed, **LAW)
    cp = cp_at_rank(out, inn, HP_DELTA, 0.05, fraction, seed)[0]
    assert fit.eps_lb >= cp - 1e-6 and fit.method == node_fit.METHOD_AT_SHARE
    assert fit.counts["fp"] == int(np.floor(fraction * out.size)) and fit.assumption == node_fit.ASSUMPTION


def test_at_a_share_no_signal_certifies_nothing_and_bad_shares_are_refused():
    rng = np.random.default_rng(1)
    e = node_fit.fit_at_share(rng.standard_normal(3000), rng.standard_normal(3000), delta=1e-5, fraction=0.1, **LAW)
    assert e.eps_lb == 0.0 and e.counts["sigma_hat"] is None and e.max_certifiable_eps > 0
    with pytest.raises(ValueError, match="a-priori false-positive fraction"):
        node_fit.fit_at_share(np.zeros(100), np.ones(100), delta=1e-5, fraction=1.0, **LAW)


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


@pytest.mark.slow
def test_at_a_share_size_at_the_truth():
    NodeShareCheck().run("sigma=3")


@pytest.mark.slow
@pytest.mark.parametrize("n", [7_000, 50_000])
def test_at_a_share_size_on_heterpoissons_played_pair(n):
    NodeShareCheck(sigma=HP_SIGMA, n=n, delta=HP_DELTA).run(f"heterpoisson seed 0, {n}")


@pytest.mark.slow
def test_at_a_share_declared_q_trusted_fails():
    """The declared q = 0.25 trusted on a pair whose q is 0.5, at the share that law fixes: 26 of the first 28 draws
    exceed the true ε (measured). At cp's share it did not fail (30 % at β = 0.2); at the fit's own it does."""
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        NodeShareCheck(fitted_q=0.25).run("sigma=3")


@pytest.mark.slow
def test_at_a_share_inflated_bound_fails(monkeypatch):
    inflate_bound(monkeypatch, node_fit.METHOD_AT_SHARE, 1.1)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        NodeShareCheck().run("sigma=3")


@pytest.mark.slow
@pytest.mark.parametrize("check", [NodeShareCheck(), NodeShareCheck(sigma=HP_SIGMA, n=50_000, delta=HP_DELTA)],
                         ids=["sigma=3", "heterpoisson"])
def test_at_a_share_the_plug_in_fails(monkeypatch, check):
    plug_in(monkeypatch)
    with pytest.raises(AssertionError, match="exceeded the true ε"):
        check.run("plug-in")


def test_the_defaults_k_law_check_refuses_twice_the_declared_q():
    """The declared q = 0.25 trusted on a pair of q = 0.5 fails the fit's size check
    (:func:`test_at_a_share_declared_q_trusted_fails`), and the default never fits without the k_t check, which
    refuses that law on the fewest releases it reads (and passes the true law); half the declared p is refused
    too."""
    from audit.stats import node_family

    n = node_family.MIN_NODE_RELEASES
    declared = node_curve.scale_law(0.25, LAW["t"], LAW["p"])[:2]
    truth = node_curve.scale_law(0.5, LAW["t"], LAW["p"])[:2]
    half_p = node_curve.scale_law(0.5, LAW["t"], LAW["p"] / 2)[:2]
    draws = [_scales(0.5, n, s) for s in range(40)]
    assert sum(bool(check_node_scales(k, values=declared[0], probs=declared[1])) for k in draws) == 40
    assert sum(bool(check_node_scales(k, values=half_p[0], probs=half_p[1])) for k in draws) >= 32
    assert sum(not check_node_scales(k, values=truth[0], probs=truth[1]) for k in draws) >= 38


def test_a_failed_k_law_check_refuses_the_fit_and_cp_certifies():
    from audit.play import estimation
    from audit.play.run_spec import AuditSpec
    from audit.stats import estimators, node_family

    law = node_family.NodeLaw(0.5, LAW["t"], LAW["p"], HP_SIGMA)
    failed = node_family.NodeScales(3, law, 400, ("node scale: the recorded k_t do not follow the declared law",))
    out, inn = pair_prior.law_scores(_record(HP_SIGMA), LAW["steps"], n=2000, seed=5)
    rows = [(i, 0, float(s)) for i, s in enumerate(out)] + [(2000 + i, 1, float(s)) for i, s in enumerate(inn)]
    cp = estimators.estimate(out, inn, method="cp", delta=HP_DELTA, fp_fraction=0.2)
    claim = type("Claim", (), {"delta": HP_DELTA})()
    spec = AuditSpec(target="heterpoisson", epsilon=2.0)
    est, why, record = estimation.node_estimate(spec, claim, failed, rows, cp, "auto", 0.2)
    assert est is cp and "whole-node fit refused: node scale" in why and record["node_scales"]["ok"] is False
    with pytest.raises(ValueError, match="refused"):
        node_family.certify(out, inn, failed, delta=HP_DELTA, confidence=0.95, seed=0)
    passed = node_family.NodeScales(3, law, 400, ())
    est, why, record = estimation.node_estimate(spec, claim, passed, rows, cp, "auto", 0.2)
    share = node_family.fit_share(passed, 2000, 2000, delta=HP_DELTA, confidence=0.95)
    assert est.method == node_fit.METHOD_AT_SHARE and est.counts["fp_fraction"] == share and "checked on 400" in why
    assert record["cp_share"] == 0.2 and record["cp"]["eps_lb"] == cp.eps_lb
    undeclared = node_family.NodeScales.undeclared("no whole node")
    est, why, record = estimation.node_estimate(spec, claim, undeclared, rows, cp, "auto", 0.2)
    assert est is cp and "no whole node" in why and record["node_scales"]["q"] is None
    with pytest.raises(ValueError, match="no whole node"):
        node_family.certify(out, inn, undeclared, delta=HP_DELTA, confidence=0.95, seed=0)


def test_the_fits_share_is_its_own_optimum_at_expected_counts():
    """prior_share reads the declared law and the counts alone; at each of its shares the fit's bound at expected
    counts is at most the one it returns, and on the played pair at 197,660 a world it lies well above cp's share
    (the fit gains from a central share that cp's line does not)."""
    kw = dict(sigma=HP_SIGMA, delta=HP_DELTA, **LAW)
    share, expected = node_fit.prior_share(n_out=197_660, n_in=197_660, **kw)
    assert share in node_fit.SHARES and expected > 0
    cp_share = pair_prior.prior_fraction(_record(HP_SIGMA), LAW["steps"], 197_660, 197_660, HP_DELTA, 0.95)[0]
    assert share > 2 * cp_share
    small, _ = node_fit.prior_share(n_out=7_000, n_in=7_000, **kw)
    assert small in node_fit.SHARES
    with pytest.raises(ValueError):
        node_fit.prior_share(n_out=100, n_in=100, **{**kw, "q": 0.0})


@pytest.mark.slow
def test_on_the_played_pair_the_fits_share_beats_cps():
    """16 draws of the played pair at 197,660 a world (the 400,000-trial budget): the fit at its own share has a
    higher median bound than at cp's share, on the same draws."""
    n = 197_660
    share = node_fit.prior_share(sigma=HP_SIGMA, n_out=n, n_in=n, delta=HP_DELTA, **LAW)[0]
    cp_share = pair_prior.prior_fraction(_record(HP_SIGMA), LAW["steps"], n, n, HP_DELTA, 0.95)[0]
    own, cps = [], []
    for r in range(16):
        out, inn = pair_prior.law_scores(_record(HP_SIGMA), LAW["steps"], n=n, seed=7000 + r)
        own.append(node_fit.fit_at_share(out, inn, delta=HP_DELTA, fraction=share, seed=r, **LAW).eps_lb)
        cps.append(node_fit.fit_at_share(out, inn, delta=HP_DELTA, fraction=cp_share, seed=r, **LAW).eps_lb)
    assert np.median(own) > np.median(cps)
