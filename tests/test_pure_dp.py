"""Pure ε-DP claims (δ = 0, issue #44 item 1): read from the target's claim, audited by cp, bayes, fdp
and one-run, refused by the Gaussian-curve methods (gdp, one-run-fdp) with a reason; a ``--delta``
error names the input that was wrong. Sizes at δ = 0: tests/test_estimator_size.py."""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from audit.stats import estimators
from audit.play import game
from audit.plan import portfolio, portfolio_validity
from audit.console.cli import main
from audit.play.run_spec import AuditSpec, check_claim, setup_run
from targets.base import Claim
from targets.common.accounting import gdp_epsilon

USER = Path(__file__).with_name("user_targets")
CORRECT = f"{USER / 'laplace_correct.py'}:LaplaceCounts"


def _laplace_scores(eps: float, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.laplace(0, 1 / eps, n), rng.laplace(1, 1 / eps, n)


@pytest.mark.parametrize("method", ["cp", "bayes", "fdp"])
def test_multi_run_methods_bound_a_laplace_pair_at_delta_zero(method):
    out, inn = _laplace_scores(2.0, 4000)  # sensitivity 1, scale 1/2: exactly 2-DP
    est = estimators.estimate(out, inn, delta=0.0, method=method, confidence=0.95)
    assert est.delta == 0.0 and 0.5 < est.eps_lb <= 2.0
    assert math.isfinite(est.max_certifiable_eps)


def test_one_run_bounds_at_delta_zero():
    bits = np.random.default_rng(1).integers(0, 2, 2000)
    scores = bits + np.random.default_rng(2).laplace(0, 0.25, bits.size)  # ε = 4 per canary
    est = estimators.estimate(scores[bits == 0], scores[bits == 1], delta=0.0, method="one-run")
    assert 0 < est.eps_lb <= 4.0


@pytest.mark.parametrize("method", ["gdp", "one-run-fdp"])
def test_gaussian_curve_methods_are_refused_at_delta_zero_with_the_reason(method):
    out, inn = _laplace_scores(2.0, 400)
    with pytest.raises(ValueError, match=rf"{method} is refused at δ = 0: .*Gaussian"):
        estimators.estimate(out, inn, delta=0.0, method=method)
    with pytest.raises(ValueError, match="refused at δ = 0"):
        estimators.max_certifiable_eps(method, 200, 200, delta=0.0)


def test_a_gaussian_curve_has_infinite_epsilon_at_delta_zero():
    assert gdp_epsilon(0.1, 0.0) == math.inf and gdp_epsilon(0.0, 0.0) == 0.0
    assert math.isfinite(gdp_epsilon(0.1, 1e-12))


def test_auto_picks_cp_and_never_gdp_at_delta_zero():
    spec = AuditSpec(target="gaussian")
    claim = Claim(epsilon=1.0, delta=0.0, accountant="laplace", unit="edge", gdp_mu=0.5)  # even a μ set
    attack = SimpleNamespace(model_scores=lambda release, pair: None, natural_threshold_for=lambda r: 0.0)
    method, prior, why, _ = game.plan_estimator(spec, claim, attack, lambda: None, None, None)
    assert (method, prior) == ("cp", None) and "δ = 0" in why
    with pytest.raises(ValueError, match="refused at δ = 0"):
        game.plan_estimator(AuditSpec(target="gaussian", estimator="gdp"), claim, attack, lambda: None, None, None)
    assert portfolio_validity.gdp_valid(claim, "mechanism-lrt", None) is None
    out, inn = _laplace_scores(1.0, 400)
    stat = portfolio.heldout_statistic(out, inn, delta=0.0, confidence=0.95)
    assert stat["heldout_gdp_eps_lb"] == 0.0 and math.isfinite(stat["heldout_eps_lb"])


def test_a_pure_claim_is_read_from_the_target_without_any_delta_typed():
    setup = setup_run(AuditSpec(target=CORRECT))
    assert setup.claim.delta == 0.0 and setup.claim.epsilon == 1.0 and setup.target.config.delta == 0.0


def test_delta_errors_name_the_input_that_was_wrong(capsys):
    with pytest.raises(ValueError, match=r"--delta \(the audit's δ\) must be in \[0, 1\)"):
        AuditSpec(delta=-0.1)
    # the user's --delta 0 on a target whose accountant has no pure claim
    with pytest.raises(ValueError, match=r"--delta 0 was refused by target 'gaussian': delta must be in \(0, 1\)"):
        setup_run(AuditSpec(target="gaussian", delta=0.0))
    # a δ outside [0, 1) from the target's own accountant, with no --delta typed
    bad = Claim(epsilon=1.0, delta=1.5, accountant="x", unit="edge")
    with pytest.raises(ValueError, match=r"target 'mine' claims δ = 1.5 \(no --delta was given\)"):
        check_claim(AuditSpec(target="mine"), bad)
    with pytest.raises(SystemExit):
        main(["run", "--target", "gaussian", "--delta", "1"])
    assert "--delta must be in [0, 1)" in capsys.readouterr().err


def test_an_explicit_gdp_on_a_pure_claim_is_refused_before_any_trial(capsys, tmp_path):
    code = main(["run", "--target", CORRECT, "--estimator", "gdp", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "gdp is refused at δ = 0" in err and "Traceback" not in err
    assert not list(tmp_path.glob("*.json"))


def test_one_run_mode_says_the_fdp_analysis_is_refused_at_delta_zero():
    from audit.play import one_run_audit
    from audit.records import run_report

    bits = np.random.default_rng(3).integers(0, 2, 400)
    scores = bits + np.random.default_rng(4).laplace(0, 0.5, bits.size)
    claim = Claim(epsilon=1.0, delta=0.0, accountant="laplace", unit="edge")
    steinke = estimators.estimate(scores[bits == 0], scores[bits == 1], delta=0.0, method="one-run")
    rec = one_run_audit._bounds(scores, bits, claim, 0.95, steinke)
    assert rec["steinke"]["eps_lb"] == steinke.eps_lb and rec["fdp_gaussian"]["eps_lb"] is None
    assert "refused at δ = 0" in rec["fdp_gaussian"]["refused"]
    assert "analysis not run: one-run-fdp is refused" in run_report._one_run_line(rec)
