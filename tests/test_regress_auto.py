"""`regress --auto`'s counting (audit.plan.regress_auto): a bug whose configuration shows a finding counts
only where its ε_lb exceeds the correct system's exact ε on the played pair."""
import numpy as np
import pytest

from audit.plan import catalogue, regress_auto
from audit.play import game
from audit.plan.budget import Budget
from canaries import base as canaries
from targets import base as targets
from targets.common.accounting import gdp_epsilon

SMALL = "csbm:n=120,features=8"
#: a planted bug read "through a finding" (the note), as GAP's fresh-inference-noise is
ENTRY = catalogue.Entry("gaussian", "VIOLATION", bug="no-noise", epsilon=2, dataset=SMALL, trials=100,
                        auto_note="through a finding of this configuration")


@pytest.fixture(scope="module")
def played():
    """A worst-edge pair of the small graph, its canary record and the correct system's exact ε,
    computed here from the noiseless map and the claimed noise (μ = ‖Δm‖/σ, DRS 2019 Cor. 2.13)."""
    spec = game.AuditSpec(target="gaussian", epsilon=2, dataset=SMALL)
    graph, target, claim = game.setup_run(spec)
    pair = canaries.make("worst-edge").worlds(graph, np.random.default_rng([0, 0xCA4A]), targets.on_cpu(target))
    mu = float((target.noiseless(pair.g1) - target.noiseless(pair.g0)).norm()) / claim.details["noise_std"]
    return pair.info, gdp_epsilon(mu, claim.delta), claim.epsilon


def test_the_correct_systems_exact_epsilon_on_the_played_pair(played):
    canary, exact, claimed = played
    ceiling = regress_auto.correct_ceiling(ENTRY, canary, "mechanism", seed=0)
    assert ceiling.method == "closed-form" and ceiling.value == pytest.approx(exact, rel=1e-4)
    assert 0 < ceiling.value <= claimed * (1 + 1e-6)  # a correct system's pair stays within its claim
    # the api view is the mechanism's post-processing: the same ceiling bounds it
    assert regress_auto.correct_ceiling(ENTRY, canary, "api", seed=0).value == ceiling.value


def test_a_bug_counts_beyond_the_finding_only_above_the_ceiling(played):
    canary, exact, _ = played
    ceiling = regress_auto.correct_ceiling(ENTRY, canary, "mechanism", seed=0)
    above, below = regress_auto.beyond_finding(exact + 0.1, ceiling), regress_auto.beyond_finding(exact - 0.1, ceiling)
    assert above["beyond_finding"] and above["beyond_note"].startswith("caught beyond the finding")
    assert not below["beyond_finding"] and below["beyond_note"].startswith("not counted as caught")
    assert above["correct_exact"]["value"] == pytest.approx(exact, rel=1e-4)


def test_a_trace_is_not_bounded_by_the_mechanism_view(played):
    canary, _, _ = played
    ceiling = regress_auto.correct_ceiling(ENTRY, canary, "trace", seed=0)
    row = regress_auto.beyond_finding(50.0, ceiling)
    assert not ceiling.computable and not row["beyond_finding"] and "not computable" in row["beyond_note"]


def test_play_counts_a_bug_caught_beyond_its_finding(tmp_path):
    """no-noise leaks more than the correct system's exact ε ≤ 2 on any pair."""
    row = regress_auto.play(ENTRY, Budget(trials=400), seed=0, out=tmp_path, jobs=1)
    assert row["got"] == "VIOLATION" and row["counts_as_caught"] and row["beyond_finding"]
    assert row["eps_lb"] > row["correct_exact"]["value"]
    assert "caught beyond the finding" in regress_auto.row_text(row)


def test_an_entry_that_errors_fails_the_catalogue_and_the_rest_still_run(tmp_path, monkeypatch, capsys):
    """A target that raises in its noiseless map (as GAP's proxy did on a one-row batch) is an ERROR row, the
    other entries still play, and `regress --auto` exits non-zero (issue #42)."""
    from audit.console import cli

    broken = catalogue.Entry("gaussian", "CONSISTENT", epsilon=2, dataset=SMALL, trials=100, params={"normalize": "true"})
    fine = catalogue.Entry("gaussian", "VIOLATION", bug="no-noise", epsilon=2, dataset=SMALL, trials=100)
    real = regress_auto.play

    def play(entry, *args, **kwargs):
        if entry is broken:
            raise ValueError("noiseless failed")
        return real(entry, *args, **kwargs)

    monkeypatch.setattr(regress_auto, "play", play)
    rows = list(regress_auto.play_all([broken, fine], Budget(trials=200), seed=0, out=tmp_path, jobs=1))
    assert [r["got"] for r in rows] == ["ERROR", "VIOLATION"]
    assert not rows[0]["ok"] and rows[0]["error"] == "ValueError: noiseless failed"
    assert "ERROR  ← ValueError: noiseless failed" in regress_auto.row_text(rows[0])
    assert "1 error(s)" in regress_auto.summary(rows)
    monkeypatch.setattr(catalogue, "entries", lambda **kw: [broken, fine])
    assert cli.main(["regress", "--auto", "--budget", "200", "--out", str(tmp_path / "cli")]) == 1
    assert "ERROR" in capsys.readouterr().out


def test_only_errors_and_unlisted_misses_fail_the_catalogue():
    row = {"ok": True, "known_miss": "", "expected": "VIOLATION"}
    assert not regress_auto.fails(row)
    assert regress_auto.fails({**row, "ok": False})
    assert not regress_auto.fails({**row, "ok": False, "known_miss": "a 60-trial pilot cannot show it"})
    assert regress_auto.fails({**row, "ok": False, "error": "ValueError: x"})
    alarm = {**row, "ok": False, "expected": "CONSISTENT"}
    assert regress_auto.false_alarm(alarm) and regress_auto.fails(alarm)
    assert not regress_auto.fails(alarm, tolerate_false_alarms=True)
    missed = {**row, "ok": False, "expected": "VIOLATION"}
    assert regress_auto.fails(missed, tolerate_false_alarms=True)  # a missed planted bug always fails
    assert regress_auto.fails({**alarm, "error": "KeyError: x"}, tolerate_false_alarms=True)
    listed = [e for e in catalogue.entries() if e.auto_miss]
    assert listed and all(e.bug and e.expect == "VIOLATION" for e in listed)  # only planted bugs may be listed


def test_a_monte_carlo_ceiling_with_an_unbounded_tail_counts_nothing_and_says_why():
    """GAP fresh-inference-noise's case: ε_lb 9.82 above the correct system's Monte Carlo point 8.25
    but not above its upper end ∞ (the samples cannot bound the tail at δ) is not counted, and the
    note gives the point and the reason; above a finite upper end it counts."""
    from audit.stats.pair_epsilon import MONTE_CARLO, PairEpsilon

    unbounded = PairEpsilon(value=8.25, method=MONTE_CARLO, delta=1e-5, interval=(7.82, float("inf")))
    row = regress_auto.beyond_finding(9.82, unbounded)
    assert not row["beyond_finding"]
    assert "point 8.25" in row["beyond_note"] and "cannot bound" in row["beyond_note"]
    bounded = PairEpsilon(value=8.25, method=MONTE_CARLO, delta=1e-5, interval=(7.82, 8.7))
    assert regress_auto.beyond_finding(9.82, bounded)["beyond_finding"]
    assert not regress_auto.beyond_finding(8.5, bounded)["beyond_finding"]  # above the point, not the upper end
