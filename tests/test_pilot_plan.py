"""The portfolio's pilot plan (audit/plan/pilot_plan.py): the AUC lower bound it chooses by, coverage of
every (view, attack family) before a second canary, duplicates, the views not reached; and the
learned distinguisher's training (attacks/learned.py)."""
import numpy as np
import pytest
from scipy.stats import norm

from attacks import learned
from attacks.metrics import auc, auc_lower
from audit.plan import pilot_plan, portfolio, portfolio_choice
from size import count_failures, stable_seed


# ---------------------------------------------------------------------------------------------
# the one-sided lower bound on the AUC
# ---------------------------------------------------------------------------------------------
def _gaussian_auc(mu: float) -> float:
    return float(norm.cdf(mu / np.sqrt(2)))


@pytest.mark.parametrize("mu, n", [(0.0, 50), (0.0, 15), (0.8, 50)])
def test_the_auc_lower_bound_exceeds_the_true_auc_at_most_at_its_rate(mu, n):
    """Scores N(0, 1) against N(μ, 1), n per world (the pilot's held-out halves: 50 on the mechanism
    view, 15 on the api): the 95 % bound exceeds the true AUC Φ(μ/√2) in at most the binomial limit of
    400 runs (limit 31; P(fail | rate 0.1) = 0.925, tests/size.py). Measured rates 0.050 to 0.068."""
    rng = np.random.default_rng(stable_seed("auc-lower", mu, n))
    truth = _gaussian_auc(mu)
    count_failures(lambda r: auc_lower(rng.normal(0, 1, n), rng.normal(mu, 1, n), 0.95) > truth, 400, 0.05,
                   f"the AUC lower bound (μ {mu}, n {n}) exceeded the true AUC")


def test_the_auc_point_value_fails_the_size_check():
    """The mutant the portfolio used to choose by: the point AUC, which is above the truth half the time."""
    rng = np.random.default_rng(stable_seed("auc-point"))
    with pytest.raises(AssertionError, match="exceeded the true AUC"):
        count_failures(lambda r: auc(rng.normal(0, 1, 50), rng.normal(0, 1, 50)) > 0.5, 400, 0.05,
                       "the point AUC exceeded the true AUC")


def test_the_auc_lower_bound_has_power():
    """A shift of one std at 50 per world (true AUC 0.76): the bound is above ½ in nearly every run."""
    rng = np.random.default_rng(stable_seed("auc-power"))
    above = [auc_lower(rng.normal(0, 1, 50), rng.normal(1, 1, 50)) > 0.5 for _ in range(200)]
    assert np.mean(above) > 0.95


def test_the_auc_lower_bound_reads_ties_and_refuses_tiny_samples():
    assert auc_lower(np.zeros(20), np.zeros(20)) == pytest.approx(0.5)      # every score tied: no signal
    assert auc_lower(np.zeros(20), np.ones(20)) == pytest.approx(1.0)       # separated, within each world constant
    with pytest.raises(ValueError, match="at least 2 scores"):
        auc_lower([0.0], [1.0, 2.0])


# ---------------------------------------------------------------------------------------------
# choosing where no pilot certified anything
# ---------------------------------------------------------------------------------------------
def _row(attack, auc_point, lower, eps_lb=0.0, level="mechanism", canary="auto"):
    return {"level": level, "attack": attack, "canary": canary, "heldout_eps_lb": eps_lb, "heldout_gdp_eps_lb": 0.0,
            "heldout_auc": auc_point, "heldout_auc_lower": lower, "gdp_valid": None, "direction": "higher = IN"}


def test_a_noise_fitted_score_does_not_win_on_its_auc_point_value():
    """The issue's case: every held-out ε_lb 0, the learned model's AUC point value the highest (0.542)
    but its lower bound below ½: the first candidate in priority order is certified, and said so."""
    first = portfolio.Candidate("mechanism", "mechanism-lrt", "auto")
    rows = [_row("mechanism-lrt", 0.426, 0.33), _row("learned-mechanism", 0.542, 0.45),
            _row("edge-correlation", 0.453, 0.36)]
    winner, why = portfolio_choice.choose(rows, first)
    assert winner == first and "no pilot of 3 showed a signal" in why


def test_where_no_bound_certifies_the_highest_auc_lower_bound_above_half_wins():
    rows = [_row("mechanism-lrt", 0.60, 0.51), _row("learned-mechanism", 0.70, 0.49),   # fewer held-out trials
            _row("linkteller", 0.66, 0.56, level="api")]
    winner, why = portfolio_choice.choose(rows, portfolio.Candidate("mechanism", "mechanism-lrt", "auto"))
    assert (winner.level, winner.attack) == ("api", "linkteller") and "lower bound on the held-out AUC, 0.560" in why


def test_a_certified_bound_still_wins_over_any_auc():
    rows = [_row("mechanism-lrt", 0.60, 0.55, eps_lb=0.2), _row("linkteller", 0.9, 0.85, level="api")]
    winner, _ = portfolio_choice.choose(rows, portfolio.Candidate("mechanism", "mechanism-lrt", "auto"))
    assert winner.attack == "mechanism-lrt"


def test_with_no_signal_the_exact_loss_on_the_pair_of_most_exact_eps_wins():
    """HeterPoisson at q = 0.5: no pilot shows a signal; the exact loss on the whole node's pair (exact ε
    0.094) is chosen over the Dirac gradient's (0.020) and over a higher held-out AUC lower bound."""
    rows = [{**_row("gradient-lrt", 0.58, 0.48, level="trace", canary="dirac-gradient"), "pair_exact_eps": 0.0204},
            {**_row("gradient-lrt", 0.55, 0.46, level="trace", canary="dirac-node"), "pair_exact_eps": 0.0943},
            _row("gradient-projection", 0.61, 0.52, level="trace", canary="split-gradient")]
    winner, why = portfolio_choice.choose(rows, portfolio.Candidate("trace", "gradient-lrt", "dirac-gradient"))
    assert (winner.attack, winner.canary) == ("gradient-lrt", "dirac-node")
    assert portfolio_choice.BY_EXACT in why and "0.0943" in why and winner.by_exact_eps == 0.0943
    certified = [{**rows[0], "heldout_eps_lb": 0.05}] + rows[1:]  # a pilot that certifies still wins
    chosen = portfolio_choice.choose(certified, portfolio.Candidate("trace", "gradient-lrt", "dirac-node"))[0]
    assert chosen.canary == "dirac-gradient" and chosen.by_exact_eps is None


def test_the_record_fixes_the_pairs_exact_eps():
    from audit.stats import node_curve, pair_prior
    from audit.stats.estimators import subsampled_curve

    base = {"noise": "gaussian", "noise_std": 15.93, "sampling_rate": 0.5, "clip_norm": 0.5, "magnitude": 0.5}
    node = {**base, "node": 172, "node_training_out_degree": 4, "node_keep_probability": 0.2, "node_scale_recorded": True}
    assert pair_prior.exact_from_record(base, 3, 0.0033) == pytest.approx(subsampled_curve.epsilon(31.86, 0.5, 3, 0.0033))
    assert pair_prior.exact_from_record(node, 3, 0.0033) == pytest.approx(
        node_curve.epsilon(noise_std=15.93, magnitude=0.5, q=0.5, t=4, p=0.2, steps=3, delta=0.0033)[0])
    assert pair_prior.exact_from_record(node, 3, 0.0033) > 4 * pair_prior.exact_from_record(base, 3, 0.0033)
    for missing in ({**base, "sampling_rate": 1.0}, {**base, "noise": "sml"}, {**node, "node_keep_probability": None},
                    {k: v for k, v in base.items() if k != "magnitude"}):
        assert pair_prior.exact_from_record(missing, 3, 0.0033) is None


# ---------------------------------------------------------------------------------------------
# coverage and what was not reached
# ---------------------------------------------------------------------------------------------
def _pool():
    C = portfolio.Candidate
    return [C("mechanism", "mechanism-lrt", "auto"), C("mechanism", "mechanism-lrt", "worst-edge"),
            C("mechanism", "learned-mechanism", "auto"), C("mechanism", "learned-mechanism", "worst-edge"),
            C("api", "linkteller", "random-edge"), C("api", "linkteller", "worst-edge"),
            C("api", "learned-api", "random-edge")]


def test_every_view_and_attack_family_is_piloted_before_a_second_canary():
    order = pilot_plan.cover_order(_pool())
    firsts = [(c.level, c.attack) for c in order[:4]]
    assert firsts == [("mechanism", "mechanism-lrt"), ("mechanism", "learned-mechanism"), ("api", "linkteller"),
                      ("api", "learned-api")]
    assert [c.canary for c in order[4:]] == ["worst-edge", "worst-edge", "worst-edge"]  # then priority order


def test_the_views_not_reached_come_with_the_budget_that_reaches_them():
    class Costs:
        def setup_cost(self):
            return 2.0

        def trial_cost(self, level):
            return {"mechanism": 0.01, "api": 0.5}[level]

    budget = portfolio.Budget(units=20.0)
    rows = [{"level": "mechanism", "attack": "mechanism-lrt", "canary": "auto", "status": "piloted", "trials": 200}]
    order = pilot_plan.cover_order(_pool())
    out = pilot_plan.unreached(order, rows, lambda: portfolio.Meter(budget, Costs(), 0.0),
                               pilot_size=lambda c: portfolio.PILOT_TRIALS[c.level], share=0.3, in_trials=False)
    assert [v["view"] for v in out] == ["api"] and out[0]["first"] == "linkteller / random-edge"
    # the two mechanism pilots (setup 2 + 200 × 0.01 + learned training 2 × 64 × 0.01), then the first api one
    # (setup 2 + 60 × 0.5), over the pilot share 0.3
    need = (2 + 2 + 2 + 1.28 + 2 + 30) / 0.3
    assert out[0]["budget"] == f"{need:.0f}u"
    assert pilot_plan.unreached(order, rows + [dict(rows[0], level="api")], lambda: None, pilot_size=len,
                                share=0.3, in_trials=False) == []


# ---------------------------------------------------------------------------------------------
# the learned distinguisher's training
# ---------------------------------------------------------------------------------------------
def test_the_learning_curve_stops_where_more_releases_no_longer_help():
    rng = np.random.default_rng(0)

    def shifted(by, width=20):
        def draw(bit, start, stop):  # a shift in one coordinate of `width`
            x = rng.normal(0, 1, (stop - start, width))
            x[:, 0] += by * bit
            return x
        return draw

    x0, x1, strong = learned.learning_curve(shifted(4.0), 64)  # found at once: the curve is flat after
    assert strong[0]["per_world"] == learned.FIRST_ROUND and len(x0) == len(x1) == strong[-1]["per_world"] < 64
    assert strong[-1]["cv_auc"] > 0.9
    x0, _, noise = learned.learning_curve(shifted(0.0), 64)  # nothing found: it spends what it may
    assert len(x0) == 64 and [p["per_world"] for p in noise] == [8, 16, 32, 64]
    _, _, slow = learned.learning_curve(shifted(4.0, width=400), 64)  # one coordinate of 400: it keeps learning
    assert slow[-1]["per_world"] > 16 and slow[-1]["cv_auc"] > 0.9


def test_training_generators_follow_the_run_seed_apart_from_every_trial():
    from audit.play.trial_runner import trial_seed

    a, b = learned.LearnedAPI(), learned.LearnedAPI()
    a.bind_run(0)
    b.bind_run(1)
    seeds = lambda attack: [g.initial_seed() for bit in (0, 1) for g in attack._rngs(bit, 0, 16)]  # noqa: E731
    assert seeds(a) != seeds(b) and len(set(seeds(a))) == 32
    assert seeds(a) == [g.initial_seed() for bit in (0, 1) for g in a._rngs(bit, 0, 16)]
    trials = {trial_seed(s, i) for s in (0, portfolio.game.stream_seed(portfolio.game.AuditSpec(trial_stream=1)))
              for i in range(2000)}
    assert not trials & set(seeds(a))
    with pytest.raises(ValueError, match="bind_run"):
        learned.LearnedAPI().trained(None)


def test_api_features_are_the_canary_nodes_posteriors_on_both_worlds():
    import torch
    from torch_geometric.data import Data

    edges = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
    g0 = Data(x=torch.zeros(6, 2), edge_index=edges, num_nodes=6)
    g1 = Data(x=torch.zeros(6, 2), edge_index=torch.cat([edges, torch.tensor([[1, 3], [3, 1]])], 1), num_nodes=6)

    class Pair:
        edge, node = (1, 3), None

    pair = Pair()
    pair.g0, pair.g1 = g0, g1
    assert learned.canary_nodes(pair) == [1, 3, 0, 2, 4]   # endpoints, then their neighbours in either world
    asked = []

    class Release:
        def view(self, level):
            def predict(graph, nodes):
                asked.append((graph is g1, nodes.tolist()))
                return torch.full((len(nodes), 3), float(graph is g1))
            return predict

    x = learned.features(Release(), "api", pair)
    assert x.shape == (2 * 5 * 3,) and asked == [(False, [1, 3, 0, 2, 4]), (True, [1, 3, 0, 2, 4])]


def test_exact_rows_is_mechanism_lrt_only_where_no_row_is_noise_free():
    import torch

    from attacks.exact_rows import ExactRows
    from targets.base import MechanismStep, Release

    mean = torch.arange(12.0).reshape(4, 3)
    noisy = mean + torch.randn(4, 3, generator=torch.Generator().manual_seed(0))
    passed = {"checked": True, "deviations": []}

    def release(output, **kw):
        return Release(mechanism=[MechanismStep(output=output, mean=lambda g: mean, noise_std=1.0, **kw)])

    attack = ExactRows()
    assert attack.same_score_as(release(noisy), None, passed) == "mechanism-lrt"
    leaky = noisy.clone()
    leaky[2] = mean[2]                                               # one row released without noise
    assert attack.same_score_as(release(leaky), None, passed) is None
    assert attack.same_score_as(release(noisy), None, {"checked": True, "deviations": ["noise-free: 1 entry"]}) is None
    assert attack.same_score_as(release(noisy, row_projected=True), None, passed) is None


def test_the_table_says_which_views_were_not_reached_and_what_is_a_duplicate():
    record = {"budget": "120u", "pilot_stream": 1, "certification_trials": 1000, "why": "…",
              "winner": {"level": "mechanism", "attack": "mechanism-lrt", "canary": "auto"},
              "candidates": [_row("mechanism-lrt", 0.5, 0.4) | {"status": "piloted", "trials": 200, "seconds": 1.0},
                             {"level": "mechanism", "attack": "exact-rows", "canary": "auto",
                              "status": "not piloted: the same pair and score as mechanism-lrt / auto @ mechanism"},
                             {"level": "api", "attack": "linkteller", "canary": "auto",
                              "status": "not piloted: the pilot share of the budget was spent"}],
              "views_not_reached": [{"view": "api", "first": "linkteller / auto", "budget": "131u"}]}
    table = portfolio.render(record)
    assert "| exact-rows / auto @ mechanism | – | – | – | – | – | not piloted: the same pair and score as" in table
    assert "| 1 more (linkteller / auto @ api)" in table
    assert "view not reached: api (no pilot played there; its first candidate linkteller / auto): a budget of " \
           "about 131u would reach it" in table


def test_a_score_that_waits_for_a_deviation_takes_no_coverage_turn_until_promoted():
    """measured-law waits for a deviation (after_deviation): without one, every other candidate, second
    canaries included, is played before it; once a deviation promotes it (pointed_by), its family's
    turn comes first as any other's."""
    C = portfolio.Candidate
    pool = [C("mechanism", "mechanism-lrt", "auto"), C("mechanism", "learned-mechanism", "auto"),
            C("mechanism", "mechanism-lrt", "isolating-edge"), C("mechanism", "exact-rows", "isolating-edge"),
            C("mechanism", "measured-law", "auto"), C("mechanism", "measured-scale", "auto")]
    order = pilot_plan.cover_order(pool, portfolio._waiting)
    assert [c.attack for c in order][-2:] == ["measured-law", "measured-scale"]
    assert [(c.attack, c.canary) for c in order][:3] == [("mechanism-lrt", "auto"), ("learned-mechanism", "auto"),
                                                         ("exact-rows", "isolating-edge")]
    promoted = [C("mechanism", "measured-law", "auto", "exploits what the check found (shared-steps)")] + pool[:4]
    assert pilot_plan.next_index(promoted, {("mechanism", "mechanism-lrt")}, portfolio._waiting) == 0
    assert [c.attack for c in pilot_plan.cover_order(pool)][:4] == ["mechanism-lrt", "learned-mechanism", "exact-rows",
                                                                   "measured-law"]  # without the rule: a turn each
