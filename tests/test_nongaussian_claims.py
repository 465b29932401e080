"""The default run on μ-GDP claims whose noise is not Gaussian (tests/nongaussian_targets.py).

Their true ε at δ equals the claim, so a valid audit is CONSISTENT; gdp's Gaussian extrapolation
is not valid on them. The default (``--estimator auto``) must not rest on that assumption: it
falls back to cp and says why. The false-alarm rate over 200 seeds is in
benchmarks/estimators_issue24.md (benchmarks/run_false_alarm.py).
"""
from __future__ import annotations

from dataclasses import replace

import pytest

from audit.play.game import AuditSpec, run_audit

TARGETS = {"laplace": "tests.nongaussian_targets:LaplaceClaimingGDP",
           "rr": "tests.nongaussian_targets:RRClaimingGDP"}


@pytest.mark.parametrize("law", sorted(TARGETS))
def test_default_run_falls_back_from_gdp(law, tmp_path):
    spec = AuditSpec(target=TARGETS[law], trials=1000, seed=0)
    result = run_audit(spec, out=tmp_path, progress=False)
    assert result.claim["gdp_mu"] > 0  # a μ-GDP claim, as the Gaussian reference makes
    assert result.method == "cp"
    assert "held-out check failed" in result.estimator_choice
    assert result.verdict == "CONSISTENT"
    assert 0 < float(result.eps_lb) <= float(result.claimed_epsilon)
    if law == "laplace":  # declared Gaussian: the declared-model check catches the law
        assert result.declared["ok"] is False
        assert "not Gaussian" in result.declared["reason"]
    # the trap is real: gdp asked for explicitly, on the same trials, overshoots the true ε (= the claim)
    forced = run_audit(replace(spec, estimator="gdp"), out=tmp_path, progress=False)
    assert forced.method == "gdp"
    assert forced.verdict == "VIOLATION"


def test_calibration_is_exact():
    """The claim and the true ε at δ agree: ε0 = ε − 2 ln(1 − δ) for Laplace, and RR's
    ln((p − δ)/(1 − p)) = ε."""
    import math

    from targets.base import build

    lap = build(TARGETS["laplace"], epsilon=2.0)
    eps0 = 1 / lap.scale()
    assert eps0 + 2 * math.log1p(-1e-5) == pytest.approx(2.0, abs=1e-12)
    rr = build(TARGETS["rr"], epsilon=2.0)
    p = rr.keep()
    assert math.log((p - 1e-5) / (1 - p)) == pytest.approx(2.0, abs=1e-12)
