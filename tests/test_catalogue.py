import pytest

from audit.plan import catalogue
from audit.console.cli import main
from audit.testing import audit_claim
from targets.base import get


def test_entries_name_real_targets_and_bugs():
    for e in catalogue.CATALOGUE:
        cls = get(e.target)
        assert e.bug is None or e.bug in cls.bugs, e.name
        assert e.expect in ("VIOLATION", "CONSISTENT")
        assert (e.bug is None) == (e.expect == "CONSISTENT") or (e.bug is None and e.finding), e.name
    for (target, bug), why in catalogue.NOT_YET_CAUGHT.items():
        assert bug == "*" or bug in get(target).bugs, (target, bug)
        assert why


def test_every_planted_bug_is_in_the_catalogue_or_named_as_a_gap():
    from targets.base import available
    for name in available():
        if name == "gcn":  # non-private: no bugs to plant
            continue
        caught = {e.bug for e in catalogue.CATALOGUE if e.target == name and e.bug}
        gaps = {b for (t, b) in catalogue.NOT_YET_CAUGHT if t == name}  # may overlap a slow entry
        if "*" in gaps:
            continue
        assert set(get(name).bugs) <= caught | gaps, name


def test_false_alarm_rate_of_a_correct_config_is_within_the_confidence():
    """Flaky audits are bugs: the exact Gaussian's default audit (300 trials) at confidence 0.8 over
    80 seeds alarms at most 25 times (a correct audit fails this w.p. ≤ 0.01; one alarming at
    0.4, twice the nominal, w.p. 0.933: tests/size.py)."""
    from size import count_failures

    count_failures(lambda s: audit_claim("gaussian", epsilon=2, trials=300, confidence=0.8, seed=s)["verdict"]
                   == "VIOLATION", 80, 0.2, "the correct Gaussian was reported a VIOLATION")


def test_regress_quick_on_one_target(capsys):
    code = main(["regress", "--quick", "--target", "gaussian"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("| gaussian[") == len(catalogue.entries(quick=True, target="gaussian"))
    assert "MISMATCH" not in out


def test_regress_fails_on_a_missed_bug(monkeypatch, capsys):
    fake = [catalogue.Entry("gaussian", "VIOLATION", trials=100)]  # a correct config "expected" to violate
    monkeypatch.setattr(catalogue, "CATALOGUE", fake)
    assert main(["regress", "--quick"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


@pytest.mark.parametrize("method", ["gdp", "cp", "bayes", "fdp", "one-run"])
def test_a_correct_entry_at_a_tight_budget_is_consistent(tight_out, method):
    """A correct entry whose ε_lb sits within 10 % of the claim (tests/size.py), so it fails on a
    bound inflated by 10 % or, for the Gaussian, on 10 % less noise (tests/test_mutants.py)."""
    from size import check_entry, tight_entries

    result = check_entry(tight_entries()[method], tight_out)
    assert result.method == method and 1.1 * result.eps_lb > result.claimed_epsilon