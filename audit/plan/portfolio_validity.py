"""Which estimators may certify a portfolio candidate (:mod:`audit.plan.portfolio`), read from its pilot's
records: ``gdp`` (:func:`gdp_valid`) and the subsampled-Gaussian family fit (:func:`family_valid`), from the
claim, the pair's record and the declared-model check's record; and what that check found, where it failed
(:func:`deviation`, :func:`failed_tests`).
"""
from __future__ import annotations

from typing import Any


from attacks import base as attacks
from audit.declared_model.declared_verdict import StepStatus
from targets import base as targets
from targets.base import Level
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw


def family_valid(claim: targets.Claim, level: str, declared: dict[str, Any] | None,
                  canary: dict[str, Any] | None) -> str | None:
    """Why the subsampled-Gaussian family fit (:mod:`audit.stats.family_fit`) may certify this candidate, or
    None: a trace view whose gradient canary is a fixed vector entering each step on its own Poisson(q)
    coin, q < 1 (not a whole node, whose k_t is drawn with the batch), under the declared Gaussian
    noise, which passed its check or was found off only in its std (the family leaves the scale
    unknown). Any score is then a test of T subsampled Gaussian steps. Whether the sampler is the
    declared Poisson one is measured before the certificate (the sampler checks), not trusted."""
    law = PairLaw.of(canary or {})
    if claim.delta == 0 or level != Level.TRACE or law.node is not None or law.noise != NoiseLaw.GAUSSIAN:
        return None
    if not (law.sampling_rate is not None and 0.0 < law.sampling_rate < 1.0):
        return None
    if not ((_model_passed(declared) and _all_gaussian(declared)) or only_scale_off(declared)):
        return None
    return "T Poisson(q)-subsampled Gaussian steps of a fixed gradient canary under the declared Gaussian noise"


def kept_though_the_model_failed(attack: str, declared: dict[str, Any] | None, canary: dict[str, Any] | None,
                                 family: str | None) -> bool:
    """Whether a score that reads the declared model stays in the running after the check failed: only
    where the check found the noise std off and nothing else (:func:`only_scale_off`), and either the
    score is linear in the release (each world's score is then a Gaussian of one variance: gdp stays
    valid) or the pair is one the family fit covers (`family`, :func:`family_valid`), whose scale it
    leaves unknown, so any score stays a test of the family, certified by the fit or by cp. What the check
    found is then exploited, not dropped: the score at the declared std is still the family's strongest
    test up to that scale (the per-step log-ratio is rescaled inside the sampling mixture)."""
    if not only_scale_off(declared):
        return False
    return bool(family) or attacks.make(attack).linear_in_release(canary or {})


def gdp_valid(claim: targets.Claim, attack: str, declared: dict[str, Any] | None,
               canary: dict[str, Any] | None = None) -> str | None:
    """Why ``gdp`` is a valid estimator for this candidate, or None: the claim is μ-GDP (it then
    bounds every test's error pair by its Gaussian curve, whatever the score), or the score is the
    declared model's exact likelihood ratio, the model passed its check at the view and every step it
    checked is Gaussian, with no sampling mixture (:func:`_mixture`): the trade-off is then the declared
    Gaussian one. An exact ratio of another law (HeterPoisson's SML, a Laplace) or of a mixture has that
    law's trade-off, not a Gaussian curve: a Gaussian curve through one of its points can claim more ε
    than the law has, so gdp is refused there, and at δ = 0 always. Or the
    score is linear in the release given the pair's record `canary` (``Attack.linear_in_release``) and
    the check found only the noise std off (:func:`only_scale_off`): each world's score is then
    exactly Gaussian with one variance, whatever the std, so its trade-off is a Gaussian curve.
    """
    if claim.delta == 0:
        return None  # a Gaussian curve's ε at δ = 0 is infinite: gdp is refused for a pure ε-DP claim
    if claim.gdp_mu is not None:
        return "the claim is μ-GDP"
    if attacks.get(attack).rests_on_declared_model() and _model_passed(declared) and _all_gaussian(declared) \
            and not _mixture(canary or {}):
        return "an exact likelihood ratio of a declared Gaussian model that passed its check"
    if attacks.make(attack).linear_in_release(canary or {}) and only_scale_off(declared):
        return ("a score linear in the release, on noise the check found Gaussian, of one std in both worlds and "
                "around the declared mean, with only its std off the declared one: both worlds' scores are "
                "Gaussian with one variance, so the trade-off is a Gaussian curve")
    return None


#: the tests that must have run and passed on a step whose only failure is its scale: the law's
#: shape (standardised by the measured variance, so free of the scale), one std in both worlds,
#: the declared mean (:mod:`audit.declared_model.declared`)
_SHAPE_TESTS = frozenset({"shape-ks", "kurtosis", "world-scale", "entry-mean", "global-mean"})


def only_scale_off(declared: dict[str, Any] | None) -> bool:
    """The check failed, and only on the noise std (``scale``): every failing step declares the
    Gaussian law and passed its shape, world-scale and mean tests, no joint deviation was found,
    and every other step passed or declares no law. This reading spends no α of its own: it reads
    the check's tests (α overall, Bonferroni); what it adds rests on those tests' power to reject a
    non-Gaussian shape or a world-dependent std, not on a further test."""
    if not declared or not declared.get("checked") or declared.get("deviations"):
        return False
    steps = declared.get("steps") or []
    failing = [s for s in steps if s.get("status") == StepStatus.FAIL]
    if not failing or any(s.get("status") not in (StepStatus.PASS, StepStatus.FAIL, StepStatus.UNDECLARED) for s in steps):
        return False
    for s in failing:
        tests = s.get("tests") or []
        if s.get("law") != NoiseLaw.GAUSSIAN or any(not t["passed"] and t["name"] != "scale" for t in tests):
            return False
        if not _SHAPE_TESTS <= {t["name"] for t in tests if t["passed"]}:
            return False
    return all(s.get("law") == NoiseLaw.GAUSSIAN for s in steps if s.get("status") == StepStatus.PASS)


def _mixture(canary: dict[str, Any]) -> bool:
    """A trace pair whose canary is drawn with the batch (:func:`attacks.gradient.drawn_with_batch`): the
    exact ratio is then of a mixture of Gaussians, whose trade-off is the subsampled Gaussian's, not a
    Gaussian curve (a Gaussian curve through one of its points can claim more ε than the mixture has)."""
    law = PairLaw.of(canary)
    return law.sampling_rate is not None and law.drawn_with_batch


def _all_gaussian(declared: dict[str, Any]) -> bool:
    """Every step the check passed declares the Gaussian law (a record without the law: not known)."""
    passed = [s for s in declared.get("steps") or [] if s.get("status") == StepStatus.PASS]
    return bool(passed) and all(s.get("law") == NoiseLaw.GAUSSIAN for s in passed)


def _model_passed(declared: dict[str, Any] | None) -> bool:
    """The declared model passed its check, undeclared steps aside (``DeclaredCheck.allows(strict=False)``,
    what ``--estimator gdp`` needs for its a-priori threshold)."""
    if not declared or not declared.get("checked") or not declared.get("ok") or declared.get("deviations"):
        return False
    return all(s.get("status") in (StepStatus.PASS, StepStatus.UNDECLARED) for s in declared.get("steps") or [])


def deviation(declared: dict[str, Any] | None) -> str | None:
    """What the declared-model check found, where it failed (None where it passed or did not run)."""
    if not declared or not declared.get("checked") or (declared.get("ok") and not declared.get("deviations")):
        return None
    found = declared.get("deviations") or []
    return "; ".join(found) if found else str(declared.get("reason") or "the declared noise model failed its check")


def failed_tests(declared: dict[str, Any] | None) -> set[str]:
    """The names of the tests the declared-model check failed: each step's failing tests (``scale``,
    ``noise-free``, ...) and each joint deviation's (``shared-steps: ...``)."""
    if not declared:
        return set()
    names = {str(t["name"]) for s in declared.get("steps") or [] for t in s.get("tests") or [] if not t.get("passed")}
    return names | {str(d).split(":")[0].strip() for d in declared.get("deviations") or []}
