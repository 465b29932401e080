"""The default audit's portfolio (audit.plan.portfolio), its budgets (audit.plan.budget) and `regress --auto`."""
import json
from pathlib import Path

import numpy as np
import pytest

from attacks import base as attacks, learned
from audit.plan import catalogue, portfolio, portfolio_choice, portfolio_validity
from audit.stats import estimators
from audit.play import game
from audit.plan.budget import Budget, BudgetError, parse
from audit.console.cli import main
from canaries import base as canaries_registry

SMALL = "csbm:n=120,features=8"


# ---------------------------------------------------------------------------------------------
# budgets
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,trials,seconds", [("5m", None, 300.0), ("90s", None, 90.0), ("1.5h", None, 5400.0),
                                                 ("2000", 2000, None), (" 8 ", 8, None)])
def test_budget_parses_trials_and_durations(text, trials, seconds):
    b = parse(text)
    assert (b.trials, b.seconds) == (trials, seconds)


@pytest.mark.parametrize("text", ["", "5x", "-3", "0s", "6", "m5", "2e3", "1.5"])
def test_budget_rejects_what_it_cannot_read(text):
    with pytest.raises(BudgetError):
        parse(text)


def test_budget_is_trials_or_seconds():
    with pytest.raises(BudgetError):
        Budget(trials=100, seconds=5.0)
    with pytest.raises(BudgetError):
        Budget()
    assert Budget(seconds=300).describe() == "5 min" and Budget(trials=2000).describe() == "2,000 trials"


@pytest.mark.parametrize("argv,needle", [(["--budget", "5x"], "--budget"),
                                         (["--attack", "mechanism-lrt", "--budget", "2m"], "portfolio")])
def test_budget_errors_on_the_command_line(capsys, argv, needle):
    assert main(["run", "--target", "gaussian", "--no-progress"] + argv) == 2
    assert needle in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# candidates: read from the registries and the target's declarations
# ---------------------------------------------------------------------------------------------
def _pool(target, **params):
    graph, tgt, _ = game.setup_run(game.AuditSpec(target=target, dataset=SMALL, params=params))
    return portfolio.candidates(tgt, graph)


def test_candidates_of_an_edge_level_target_follow_its_views():
    pool, _ = _pool("gaussian")
    assert pool[0] == portfolio.Candidate("mechanism", "mechanism-lrt", "auto")  # the classic default first
    levels = {c.level for c in pool}
    assert levels == {"mechanism", "api"}
    names = {c.attack for c in pool}
    assert {"learned-mechanism", "learned-api", "linkteller"} <= names
    assert not names & {"gradient-lrt", "gmia", "lira"}  # trace attacks need a trace; node attacks a node unit
    canaries_ = {c.canary for c in pool}
    assert {"worst-edge", "low-degree-edge", "random-edge"} <= canaries_
    assert not canaries_ & {"remove-node", "dirac-gradient"}
    late = [attacks.get(c.attack).after_deviation for c in pool]
    assert late == sorted(late) and any(late)  # scores that wait for a deviation (measured-law) come last
    cheap = [c.level in portfolio.CHEAP_LEVELS for c, waits in zip(pool, late) if not waits]
    assert cheap == sorted(cheap, reverse=True)  # every cheap view before any view that trains a model


def test_an_attack_that_reads_a_row_per_node_is_left_out_where_the_release_has_none():
    """edge-correlation reads the canary's two rows of the mechanism's last step: GCON releases
    weights (d × c), so its pool leaves it out, with the reason, and never fails a pilot on it."""
    pool, skipped = _pool("gcon")
    assert "edge-correlation" not in {c.attack for c in pool}
    assert any(s["attack"] == "edge-correlation" and "applies_to" in s["why"] for s in skipped)
    assert "edge-correlation" in {c.attack for c in _pool("gaussian")[0]}


def test_a_canary_that_reads_the_noiseless_map_only_where_the_target_declares_one():
    """The non-private GCN declares no noiseless mechanism map: the worst-case canaries, which rank
    pairs by it, would fail after being charged their pilot, so they are left out with the reason."""
    pool, skipped = _pool("gcn", epochs="2")
    needs_map = {c for c in canaries_registry.available() if canaries_registry.get(c).needs_map}
    assert needs_map and not needs_map & {c.canary for c in pool}
    assert needs_map <= {s.get("canary") for s in skipped}
    assert {"random-edge", "remove-edge"} <= {c.canary for c in pool}  # the others stay
    assert needs_map <= {c.canary for c in _pool("gaussian")[0]}  # a target with a map keeps them
    record = {"budget": "120 work units", "pilot_stream": 1, "certification_trials": 8, "why": "-",
              "winner": {"attack": "linkteller", "canary": "random-edge", "level": "api"},
              "candidates": [], "not_applicable": skipped}
    table = portfolio.render(record)
    assert all(f"every attack / {c} @ every view" in table for c in needs_map)  # said, with the reason


def test_no_trace_candidate_where_the_release_has_no_trace():
    """DPDGC at the edge level releases no trace (its DP-SGD carries a node-level claim only) and takes
    no gradient canary: a trace candidate there could only fail after being charged its pilot."""
    pool, skipped = _pool("dpdgc", unit="edge", epochs_encoder="1", epochs_classifier="1")
    assert "trace" not in {c.level for c in pool}
    node_pool, _ = _pool("dpdgc", unit="node", epochs_encoder="1", epochs_classifier="1")
    assert "trace" in {c.level for c in node_pool}


def test_candidates_of_a_dp_sgd_target_pair_gradient_attacks_with_gradient_canaries():
    pool, skipped = _pool("dpsgd-gcn")
    assert pool[0].attack == "gradient-lrt" and pool[0].level == "trace"
    for c in pool:
        kind = attacks.get(c.attack).canary_kind
        if kind == "gradient":
            assert c.canary in ("dirac-gradient", "spread-gradient", "split-gradient", "dirac-node")
        assert c.attack not in ("linkteller", "edge-correlation", "mechanism-lrt")
    assert {"learned-trace", "learned-weights", "learned-api"} <= {c.attack for c in pool}
    assert any(s["attack"] == "adam-lrt" for s in skipped)  # its applies_to refuses a non-Adam release


# ---------------------------------------------------------------------------------------------
# the held-out statistic and the validity of certifying on fresh trials
# ---------------------------------------------------------------------------------------------
def test_heldout_statistic_reads_the_other_tail():
    rng = np.random.default_rng(0)
    out_s, in_s = rng.normal(3, 1, 400), rng.normal(0, 1, 400)  # lower means IN
    stat = portfolio.heldout_statistic(out_s, in_s, delta=1e-5, confidence=0.95)
    assert stat["direction"] == "lower = IN" and stat["heldout_auc"] > 0.9 and stat["heldout_eps_lb"] > 1
    same = portfolio.heldout_statistic(rng.normal(0, 1, 400), rng.normal(0, 1, 400), delta=1e-5, confidence=0.95)
    assert same["heldout_eps_lb"] < 0.5


def test_choosing_on_pilots_then_certifying_fresh_trials_keeps_the_confidence():
    """Many candidates, each a Gaussian shift of at most the true μ; the best held-out pilot is chosen
    and certified by cp on fresh draws at its pilot's threshold. Its bound exceeds the true ε no more often than the binomial
    limit of 5% (and a bound certified on the pilot trials of the maximum would be the peeking bug):
    400 runs at 95 %, limit 31, P(fail | rate 0.1) = 0.925 (tests/size.py)."""
    from size import count_exceedances

    rng = np.random.default_rng(1)
    mu, delta = 1.0, 1e-5
    true_eps = float(estimators.gdp_epsilon(mu, delta))
    shifts = [0.0, 0.3, 0.6, mu, mu]

    def draw(_):
        rows = [portfolio.heldout_statistic(rng.normal(0, 1, 50), rng.normal(s, 1, 50), delta=delta, confidence=0.95)
                | {"level": "mechanism", "attack": f"a{k}", "canary": "c"} for k, s in enumerate(shifts)]
        winner, _ = portfolio_choice.choose(rows, portfolio.Candidate("mechanism", "a0", "c"))
        k = int(winner.attack[1:])
        sign = 1 if rows[k]["direction"] == "higher = IN" else -1
        est = estimators.estimate(sign * rng.normal(0, 1, 300), sign * rng.normal(shifts[k], 1, 300), delta=delta,
                                  method="cp", threshold=sign * rows[k]["threshold"])
        return est.eps_lb, true_eps

    count_exceedances(draw, 400, 0.05, "the portfolio's chosen candidate")


# ---------------------------------------------------------------------------------------------
# end to end
# ---------------------------------------------------------------------------------------------
def test_the_portfolio_records_every_candidate_and_certifies_on_its_own_trials(tmp_path):
    spec = game.AuditSpec(target="gaussian", bug="no-noise", dataset=SMALL)
    r = portfolio.run(spec, Budget(trials=1200), out=tmp_path, progress=False)
    rec = r.extra["portfolio"]
    assert r.verdict == "VIOLATION" and r.sequential["on"]
    piloted = [c for c in rec["candidates"] if c["status"] == "piloted"]
    assert piloted and all("heldout_eps_lb" in c and "heldout_auc" in c for c in piloted)
    w = rec["winner"]
    assert (w["level"], w["attack"]) == (r.level, r.attack.removeprefix(attacks.REVERSED))
    assert any((c["level"], c["attack"], c["canary"]) == (w["level"], w["attack"], w["canary"]) for c in piloted)
    played = sum(c.get("trials", 0) for c in rec["candidates"])  # set-aside pilots played trials too
    assert rec["certification_trials"] == 1200 - played and played <= portfolio.PILOT_SHARE * 1200
    assert "portfolio" in json.loads((tmp_path / f"{r.run_id}.json").read_text())
    # the pilots' results live inside the run's result, not as files of their own
    assert [p.name for p in tmp_path.glob("*.json")] == [f"{r.run_id}.json"]
    assert all(c["record"]["trials"] == c["trials"] and c["record"]["key"] for c in piloted)
    # the pilots played another stream of trials: none of the certificate's keys is a pilot's
    assert game.stream_seed(game.AuditSpec(trial_stream=1)) != game.stream_seed(game.AuditSpec())


def test_a_no_signal_target_stops_early_and_says_so(tmp_path):
    spec = game.AuditSpec(target="gaussian", epsilon=0.02, dataset=SMALL)
    r = portfolio.run(spec, Budget(trials=4000), out=tmp_path, progress=False)
    assert r.verdict == "CONSISTENT" and r.power["reading"] == "no signal"
    assert r.sequential["on"] and r.trials < r.extra["portfolio"]["certification_trials"]


def test_run_default_is_the_portfolio_and_regress_auto_reports_the_choice(tmp_path, capsys, monkeypatch):
    assert main(["run", "--target", "gaussian", "--dataset", SMALL, "--bug", "no-noise", "--budget", "400",
                 "--no-progress", "--json", "--out", str(tmp_path)]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["verdict"] == "VIOLATION" and rec["portfolio"]["winner"]["attack"] == rec["attack"]
    monkeypatch.setattr(catalogue, "CATALOGUE", [catalogue.Entry("gaussian", "VIOLATION", bug="no-noise",
                                                                 dataset=SMALL, canary="worst-edge", trials=100)])
    assert main(["regress", "--auto", "--budget", "400", "--json"]) == 0
    out = capsys.readouterr().out
    row = json.loads(out[out.index('{\n'):])["rows"][0]
    assert row["counts_as_caught"] and row["chosen"].startswith(rec["attack"]) and row["seconds"] > 0
    assert "1/1 planted violations caught by the default" in out


def test_a_reversed_attack_negates_every_score():
    class Constant(attacks.Attack):
        name, levels = "constant", ("mechanism",)

        def score(self, release, pair, graph=None):
            return 2.0

    flipped = attacks.Reversed(Constant())
    assert flipped.name == "reversed:constant" and flipped.levels == ("mechanism",)
    assert flipped.score(None, None) == -2.0 and flipped.score_batch([None, None], None) == [-2.0, -2.0]
    assert isinstance(attacks.make("reversed:mechanism-lrt").inner, attacks.get("mechanism-lrt"))


# ---------------------------------------------------------------------------------------------
# same seed, same result; pilots share their setup
# ---------------------------------------------------------------------------------------------
#: what a run's JSON may differ in between two machines or two runs: timings and paths
_TIMING = {"seconds", "wall_s", "wall_time_s", "trials_wall_s", "store", "probe_seconds", "created"}


def _without_timing(value):
    if isinstance(value, dict):
        return {k: _without_timing(v) for k, v in value.items() if k not in _TIMING}
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def test_budget_parses_work_units():
    assert parse("120u").units == 120.0 and parse(" 2.5 u ").units == 2.5
    assert parse("120u").reproducible and parse("2000").reproducible and not parse("2m").reproducible
    assert portfolio.DEFAULT_BUDGET.reproducible  # the default plays the same trials on any machine
    with pytest.raises(BudgetError):
        Budget(units=0.0)


def test_a_work_budget_charges_an_attacks_pair_cost_once_per_pair():
    """adam-lrt solves its law once per pair (pair_cost) and reads it per score (score_cost): the
    meter charges the first once per (view, canary) and the target's setup once per (view, canary)
    whatever the attack."""
    class Costs:
        def setup_cost(self):
            return 2.0

        def trial_cost(self, level):
            return 0.01

    adam = attacks.get("adam-lrt")
    meter = portfolio.Meter(Budget(units=1000.0), Costs(), 0.0)
    first, same, other = (portfolio.Candidate("weights", "adam-lrt", "auto"),
                          portfolio.Candidate("weights", "adam-lrt", "auto"),
                          portfolio.Candidate("weights", "learned-weights", "auto"))
    assert meter.setup_units(first) == pytest.approx(2.0 + adam.pair_cost)
    meter.charge(first, 60)
    assert meter.units == pytest.approx(2.0 + adam.pair_cost + 60 * (0.01 + adam.score_cost))
    assert meter.setup_units(same) == 0.0  # setup shared, pair solved
    # a learned distinguisher's training releases are charged on its pair: the most its curve may draw
    assert meter.setup_units(other) == pytest.approx(2 * learned.MOST_PER_WORLD["weights"] * 0.01)
    assert meter.setup_units(portfolio.Candidate("weights", "adam-lrt", "random-edge")) == \
        pytest.approx(2.0 + adam.pair_cost)


def test_the_default_budget_gives_the_same_result_for_the_same_seed(tmp_path, monkeypatch):
    """Two runs of the same spec on a work-unit budget, one of them on a machine made 'slower' (every
    clock reading later by a minute per call): the same JSON, timings aside, trial counts included."""
    spec = game.AuditSpec(target="gaussian", bug="half-noise", epsilon=2.0, dataset=SMALL)
    first = portfolio.run(spec, Budget(units=4.0), out=tmp_path / "a", progress=False)
    clock = iter(range(10**9))
    monkeypatch.setattr(portfolio.time, "time", lambda: 60.0 * next(clock))
    second = portfolio.run(spec, Budget(units=4.0), out=tmp_path / "b", progress=False)
    a, b = (json.loads(Path(r.store).parent.joinpath(f"{r.run_id}.json").read_text()) for r in (first, second))
    assert _without_timing(a) == _without_timing(b)
    rec = a["portfolio"]
    piloted = [c for c in rec["candidates"] if c["status"] == "piloted"]
    assert len(piloted) >= 2 and rec["units_spent_on_pilots"] <= portfolio.PILOT_SHARE * 4.0
    assert rec["replay"] == {"pilots": {portfolio._label(c): c["trials"] for c in rec["candidates"] if "trials" in c},
                             "certification_trials": rec["certification_trials"]}


def test_a_time_budget_depends_on_the_clock_and_records_its_replay(tmp_path, monkeypatch):
    """The same slowed clock exhausts a time budget's pilot share after the first pilot: what a time
    budget plays depends on the machine, and the record says which trials reproduce it."""
    spec = game.AuditSpec(target="gaussian", bug="half-noise", epsilon=2.0, dataset=SMALL)
    clock = iter(range(10**9))
    monkeypatch.setattr(portfolio.time, "time", lambda: 60.0 * next(clock))
    r = portfolio.run(spec, Budget(seconds=120.0), out=tmp_path, progress=False)
    rec = r.extra["portfolio"]
    assert len(rec["replay"]["pilots"]) == 1 and rec["replay"]["certification_trials"] == rec["certification_trials"]


def test_pilots_share_their_setup_and_play_what_a_run_plays_alone(tmp_path):
    """Pilots on one canary build its pair and check once; a pilot's trials on the shared setup (and
    shared target, with its cached encoder) equal the same run played alone."""
    params = {"encoder_epochs": "1"}
    spec = game.AuditSpec(target="caribou", dataset=SMALL, params=params)
    r = portfolio.run(spec, Budget(units=16.0), out=tmp_path / "p", progress=False)
    rec = r.extra["portfolio"]
    piloted = [c for c in rec["candidates"] if c["status"] == "piloted"]
    canaries_played = {c["canary_chosen"] for c in piloted}
    assert len(piloted) >= 3 and rec["setups_built"]["pair"] == len(canaries_played) < len(piloted)
    row = next(c for c in piloted if c["level"] == "mechanism" and c["attack"] != "mechanism-lrt")
    alone = game.run_audit(game.AuditSpec(target="caribou", dataset=SMALL, params=params,
                                          attack=row["attack"], canary=row["canary"], level=row["level"],
                                          trials=row["trials"], trial_stream=1, estimator="cp"),
                           out=tmp_path / "alone", progress=False)
    from audit.records.store import Store

    with Store(r.store) as s1, Store(alone.store) as s2:
        assert s1.trials(alone.key, limit=row["trials"]) == s2.trials(alone.key, limit=row["trials"])


# ---------------------------------------------------------------------------------------------
# the order follows what the target declares, and a failed declared-model check is acted on
# ---------------------------------------------------------------------------------------------
def test_candidates_the_target_points_to_come_right_after_the_classic_default():
    pool, _ = _pool("heterpoisson", hidden="32", steps="1", sampling_rate="1", noise="gaussian")
    assert not pool[0].pointed_by                                   # the classic default stays first
    early = [c for c in pool[1:] if c.pointed_by]
    assert early and {c.canary for c in early} == {"dirac-node"}    # it samples neighbours: a whole node
    assert pool[1:1 + len(early)] == early
    hub, _ = _pool("gap", unit="node", max_degree="2", encoder_epochs="1", epochs="1")
    pointed = [c for c in hub if c.pointed_by]
    assert pointed and all(c.canary == "insert-hub-node" and "D = 2" in c.pointed_by for c in pointed)
    assert hub.index(pointed[0]) <= 2
    plain, _ = _pool("gaussian")
    assert not any(c.pointed_by for c in plain)                     # nothing declared, nothing moved


def test_a_failed_check_sets_aside_declared_model_scores_and_promotes_what_exploits_it():
    pool = [portfolio.Candidate("mechanism", a, "worst-edge")
            for a in ("mechanism-lrt", "edge-correlation", "exact-rows", "learned-mechanism")]
    pool.append(portfolio.Candidate("api", "linkteller", "worst-edge"))
    rows = [{"level": "mechanism", "attack": "mechanism-lrt", "canary": "auto", "status": "piloted"}]
    left = portfolio_choice.act_on_deviation("mechanism", "noise-free: 40 entries without noise", pool, rows)
    assert rows[0]["status"].startswith("set aside") and "noise-free" in rows[0]["status"]
    assert [c.attack for c in left] == ["exact-rows", "learned-mechanism", "edge-correlation", "linkteller"]
    assert all("exploits" in c.pointed_by for c in left[:2]) and not left[2].pointed_by
    assert any(r["attack"] == "mechanism-lrt" and r["status"].startswith("not piloted") for r in rows[1:])


def test_a_linear_score_is_kept_where_only_the_std_is_off():
    pool = [portfolio.Candidate("trace", a, "dirac-gradient") for a in ("gradient-lrt", "gradient-projection")]
    rows = [{"level": "trace", "attack": "gradient-lrt", "canary": "split-gradient", "status": "piloted"}]
    left = portfolio_choice.act_on_deviation("trace", "noise std differs", pool, rows,
                                       keep=lambda name: name == "gradient-lrt")
    assert rows == [{"level": "trace", "attack": "gradient-lrt", "canary": "split-gradient", "status": "piloted"}]
    assert [c.attack for c in left] == ["gradient-lrt", "gradient-projection"]
    assert portfolio_choice.act_on_deviation("trace", "noise std differs", pool, rows)[0].attack == "gradient-projection"


def _scale_off_check(scale_passed: bool = False) -> dict:
    from audit.plan.portfolio_validity import _SHAPE_TESTS

    tests = [{"name": n, "passed": True} for n in sorted(_SHAPE_TESTS)]
    return {"checked": True, "deviations": [], "steps": [{"status": "pass" if scale_passed else "fail", "law": "gaussian",
                                                         "tests": tests + [{"name": "scale", "passed": scale_passed}]}]}


def test_a_score_is_kept_on_a_family_pair_where_only_the_std_is_off():
    """What the check found (the std off) is exploited, not dropped: on a Poisson(q < 1) pair the family fit
    covers, the exact mixture score stays (the fit leaves the scale unknown); without the family, a mixture
    score is not linear in the release and goes; with another failure than the std, nothing is kept."""
    from audit.plan.portfolio_validity import kept_though_the_model_failed as kept

    sampled = {"canary": "dirac-gradient", "noise": "gaussian", "noise_std": 2.0, "sampling_rate": 0.3}
    family = "T Poisson(q)-subsampled Gaussian steps"
    assert kept("gradient-lrt", _scale_off_check(), sampled, family)
    assert not kept("gradient-lrt", _scale_off_check(), sampled, None)
    assert kept("gradient-lrt", _scale_off_check(), {**sampled, "sampling_rate": 1.0}, None)  # linear at q = 1
    shape_off = _scale_off_check()
    shape_off["steps"][0]["tests"][0]["passed"] = False
    assert not kept("gradient-lrt", shape_off, sampled, family)
    assert not kept("gradient-lrt", _scale_off_check(scale_passed=True), sampled, family)  # nothing failed


def test_the_default_acts_on_a_deviation_end_to_end(tmp_path):
    """A user target that releases the rows of non-training nodes without noise: the check names the
    deviation, the exact LLR is set aside, and the certificate rests on a score that does not use the
    declared model."""
    spec = game.AuditSpec(target="tests/user_targets/train_rows_only.py:TrainRowsOnly", dataset=SMALL)
    r = portfolio.run(spec, Budget(units=30.0), out=tmp_path, progress=False)
    rec = r.extra["portfolio"]
    aside = [c for c in rec["candidates"] if "declared model failed" in c["status"]]
    assert aside and all(attacks.get(c["attack"]).rests_on_declared_model() for c in aside)
    assert not attacks.get(rec["winner"]["attack"]).rests_on_declared_model()
    assert r.verdict == "VIOLATION"


# ---------------------------------------------------------------------------------------------
# the estimator: gdp where it is valid and the stronger test on the winner's held-out pilot
# ---------------------------------------------------------------------------------------------
def test_gdp_is_valid_only_for_a_gdp_claim_or_a_checked_exact_llr():
    from targets.base import Claim

    plain = Claim(epsilon=8.0, delta=1e-3, accountant="rdp", unit="node")
    gdp_claim = Claim(epsilon=8.0, delta=1e-3, accountant="gdp", unit="node", gdp_mu=3.0)
    passed = {"checked": True, "ok": True, "steps": [{"status": "pass", "law": "gaussian"}, {"status": "undeclared"}]}
    sml = {"checked": True, "ok": True, "steps": [{"status": "pass", "law": "sml"}]}
    unnamed = {"checked": True, "ok": True, "steps": [{"status": "pass"}]}  # a record without the law
    failed = {"checked": True, "ok": False, "steps": [{"status": "fail"}]}
    deviating = {"checked": True, "ok": True, "deviations": ["shared-steps"], "steps": [{"status": "pass"}]}
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", deviating) is None
    assert portfolio_validity.gdp_valid(gdp_claim, "learned-trace", None)
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", passed)
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", failed) is None
    assert portfolio_validity.gdp_valid(plain, "learned-trace", passed) is None      # not the declared model's LLR
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", None) is None
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", sml) is None          # SML's exact LLR: not a Gaussian curve
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", unnamed) is None
    full, sampled = {"sampling_rate": 1.0, "noise": "gaussian"}, {"sampling_rate": 0.5, "noise": "gaussian"}
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", passed, full)
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", passed, sampled) is None  # a mixture: not a Gaussian curve
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", passed, {**full, "node": 3}) is None  # k_t drawn with the batch
    assert portfolio_validity.gdp_valid(plain, "mechanism-lrt", passed, {"canary": "worst-edge"})  # no trace, no sampling


def test_the_estimator_is_gdp_where_its_held_out_bound_beats_cp():
    """Gaussian scores at μ = 4 on 2 × 300 held-out trials: cp's bound is capped by the trial count,
    gdp's is not; the winner is certified by gdp only where gdp is valid for it."""
    rng = np.random.default_rng(3)
    stat = portfolio.heldout_statistic(rng.normal(0, 1, 600), rng.normal(4, 1, 600), delta=1e-3, confidence=0.95)
    assert stat["heldout_gdp_eps_lb"] > stat["heldout_eps_lb"] > 0
    spec = game.AuditSpec()
    win = portfolio.Candidate("trace", "gradient-lrt", "dirac-gradient")
    row = {"level": "trace", "attack": "gradient-lrt", "canary": "dirac-gradient", **stat}
    assert portfolio_choice.estimator(spec, [{**row, "gdp_valid": "the claim is μ-GDP"}], win)[0] == "gdp"
    assert portfolio_choice.estimator(spec, [{**row, "gdp_valid": None}], win)[0] == "auto"
    assert portfolio_choice.estimator(game.AuditSpec(estimator="cp"), [{**row, "gdp_valid": "x"}], win)[0] == "cp"
    assert portfolio_choice.rank({**row, "gdp_valid": "x"})[0] == stat["heldout_gdp_eps_lb"]
    assert portfolio_choice.rank({**row, "gdp_valid": None})[0] == stat["heldout_eps_lb"]


# ---------------------------------------------------------------------------------------------
# gdp for a linear score where the check found only the noise std off
# ---------------------------------------------------------------------------------------------
GAUSSIAN_Q1 = {"noise": "gaussian", "sampling_rate": 1.0}


@pytest.fixture(scope="module")
def trace_checks(csbm):
    """The declared check's records on a Gaussian trace: honest, its std planted at half the
    declared one, and Laplace-like noise (SML) declared Gaussian."""
    from audit.declared_model import declared
    from canaries.edge import ExplicitEdge
    from targets.base import build

    pair = ExplicitEdge(0, 1).worlds(csbm, np.random.default_rng(0))
    record = lambda **kw: {"checked": True, **declared.check_declared(  # noqa: E731
        build("tests.deviants:TraceTarget", **kw), pair, seed=0, n=8).to_dict()}
    return record(), record(applied_scale=0.5), record(applied_law="sml")


def test_gdp_is_valid_for_a_linear_score_where_only_the_std_is_off(trace_checks):
    from targets.base import Claim

    plain = Claim(epsilon=8.0, delta=1e-3, accountant="rdp", unit="node")
    honest, half_std, laplace_like = trace_checks
    assert not half_std["ok"] and "noise std differs" in half_std["reason"]
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", half_std, GAUSSIAN_Q1).startswith("a score linear")
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", half_std, {**GAUSSIAN_Q1, "sampling_rate": 0.5}) is None  # a mixture
    assert portfolio_validity.gdp_valid(plain, "gradient-projection", half_std, GAUSSIAN_Q1) is None  # reads the whole batch
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", half_std, None) is None  # the record is silent: not known
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", half_std, {**GAUSSIAN_Q1, "node": 3}) is None  # k_t drawn
    # a non-Gaussian deviation: the shape test fails, gdp is refused
    assert not laplace_like["ok"] and "not Gaussian" in laplace_like["reason"]
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", laplace_like, GAUSSIAN_Q1) is None
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", honest, GAUSSIAN_Q1).startswith("an exact likelihood ratio")
    steps = [{**s, "tests": [t for t in s["tests"] if t["name"] != "world-scale"]} for s in half_std["steps"]]
    assert portfolio_validity.gdp_valid(plain, "gradient-lrt", {**half_std, "steps": steps}, GAUSSIAN_Q1) is None  # not run


def test_gdp_on_a_linear_score_with_a_planted_std_covers_the_true_epsilon():
    """The Gaussian mechanism behind gradient-lrt at q = 1: T steps release b·c + N(0, s'² I) and
    the score is Σ_t (⟨x_t, c⟩ − ‖c‖²/2)/s² at the declared s, while the planted s' = s/2. Its exact
    ε is the μ-GDP one at μ = √T‖c‖/s'. The portfolio's gdp (held-out threshold, 95%) exceeds it in at
    most the binomial limit of 400 seeds."""
    from tests.size import count_exceedances
    from targets.common.accounting import gdp_epsilon

    steps, dim, declared_std, delta = 4, 16, 4.0, 1e-3
    c = np.zeros(dim)
    c[0] = 1.0
    true_std = declared_std / 2
    truth = gdp_epsilon(np.sqrt(steps) * np.linalg.norm(c) / true_std, delta)

    def draw(r):
        rng = np.random.default_rng([r, 0x5CA1E])
        scores = []
        for b in (0, 1):
            x = b * c + true_std * rng.standard_normal((300, steps, dim))
            scores.append(((x @ c) - 0.5 * c @ c).sum(axis=1) / declared_std**2)
        est = estimators.estimate(*scores, delta=delta, method="gdp", confidence=0.95, seed=r)
        return est.eps_lb, truth

    count_exceedances(draw, 400, 0.05, "gdp on a linear score with a planted std")


def test_a_tie_at_zero_certifies_by_gdp_where_valid_and_a_lower_gdp_bound_does_not():
    """Neither bound certifies on the pilot's held-out half (weak signal, 0 = 0): gdp, where valid, reads
    the whole curve (GAP's directed-edge finding at ε = 1 read 0.24 by cp, 1.07 by gdp); where gdp's
    held-out bound is below cp's, the run's own estimator."""
    spec = game.AuditSpec()
    win = portfolio.Candidate("mechanism", "measured-law", "auto")
    row = {"level": "mechanism", "attack": "measured-law", "canary": "auto", "heldout_eps_lb": 0.0,
           "heldout_gdp_eps_lb": 0.0}
    method, why = portfolio_choice.estimator(spec, [{**row, "gdp_valid": "the claim is μ-GDP"}], win)
    assert method == "gdp" and "ties" in why
    assert portfolio_choice.estimator(spec, [{**row, "gdp_valid": None}], win)[0] == "auto"
    lower = {**row, "heldout_eps_lb": 1.2, "heldout_gdp_eps_lb": 0.8, "gdp_valid": "the claim is μ-GDP"}
    method, why = portfolio_choice.estimator(spec, [lower], win)
    assert method == "auto" and "below" in why
