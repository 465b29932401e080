"""The run's estimator: fixed before any trial (:func:`plan_estimator`), then read on all the trials
(:func:`estimate`); the subsampled-Gaussian family fit where a run asks for it (:func:`measure_sampler`,
:func:`family_estimate`); and the declared-model check's record beside the estimate (:func:`declared_record`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from audit.declared_model import declared, declared_joint
from audit.play.run_spec import AuditSpec
from audit.play.sequential_run import AUTO_SHAPE, worlds
from audit.stats import estimators
from targets import base as targets
from audit.stats.kinds import Method

if TYPE_CHECKING:
    from audit.stats.node_family import NodeScales


def measure_sampler(spec: AuditSpec, target: targets.Target, pair: Any, releases: bool | int = True) -> Any:
    """The sampler checks (:func:`audit.stats.family_fit.measure_sampler`), before any trial; where one fails
    the pair's record says so, and the gradient scores stop reading the rest of the batch
    (:func:`attacks.gradient.not_poisson`)."""
    from audit.stats import family_fit

    sampler = family_fit.measure_sampler(target, pair, seed=spec.seed, confidence=spec.confidence,
                                         releases=None if releases is True else int(releases))
    failures = "; ".join(sampler.check.failures)
    pair.info["sampler"] = "poisson (checked)" if sampler.check.ok else \
        failures if failures.startswith("unmeasured") else f"not poisson: {failures}"
    return sampler


def family_estimate(spec: AuditSpec, claim: targets.Claim, sampler: Any, rows: list[Any],
            cp: estimators.Estimate, why: str) -> tuple[estimators.Estimate, str, dict[str, Any]]:
    """The run's estimate by the subsampled-Gaussian family fit where the sampler checks pass, with cp
    (`cp`, on the same trials) beside it; cp itself, and which check failed, where one did."""
    from audit.stats import family_fit

    record: dict[str, Any] = {"sampler": sampler.to_dict(), "cp": cp.to_dict()}
    if not sampler.check.ok:
        record["refused"] = "; ".join(sampler.check.failures)
        return cp, f"{why}; the subsampled-Gaussian fit refused: {record['refused']}" \
            + (f"; {sampler.accounting}" if sampler.accounting else ""), record
    fit, _ = family_fit.certify(*worlds(rows), sampler, delta=claim.delta, confidence=spec.confidence,
                                seed=spec.seed)
    lo, hi = sampler.check.q_interval
    return fit, (f"the subsampled-Gaussian family fit (T = {sampler.steps} steps, q measured in [{lo:.4g}, {hi:.4g}] "
                 f"from {sampler.check.trials:,} releases, paid β_q = {sampler.check.q_level:g}); cp on the same "
                 f"trials {cp.eps_lb:.4g}" + (f"; {sampler.accounting}" if sampler.accounting else "")), record


def measure_node_scales(spec: AuditSpec, target: targets.Target, pair: Any, releases: int) -> NodeScales:
    """The whole-node k_t check (:func:`audit.stats.node_family.measure`) on `releases` releases, before any
    trial: a :class:`~audit.stats.node_family.NodeScales`, refused where the pair's record declares no whole-node
    law."""
    from audit.stats import node_family

    law = node_family.law_of(pair.info)
    if law is None:
        return node_family.NodeScales.undeclared()
    return node_family.measure(target, pair, law, seed=spec.seed, releases=int(releases))


def node_estimate(spec: AuditSpec, claim: targets.Claim, scales: NodeScales, rows: list[Any], cp: estimators.Estimate,
                  why: str, fraction: float | None) -> tuple[estimators.Estimate, str, dict[str, Any]]:
    """The run's estimate by the whole-node fit at its a-priori share where the k_t check passed, with cp at its own
    a-priori share `fraction` (`cp`, on the same trials) beside it; cp itself, and why the fit was refused, where
    it was not."""
    from audit.stats import node_family

    record: dict[str, Any] = {"family": "whole node", "cp": cp.to_dict(), "node_scales": scales.to_dict()}
    if scales.refusal:
        record["refused"] = scales.refusal
        return cp, f"{why}; the whole-node fit refused: {scales.refusal}", record
    out_s, in_s = worlds(rows)
    fit = node_family.certify(out_s, in_s, scales, delta=claim.delta, confidence=spec.confidence, seed=spec.seed)
    record["cp_share"] = fraction
    law = scales.law
    return fit, (f"the whole-node family fit at its share {fit.counts['fp_fraction']:.3g}, fixed before any trial from "
                 f"the declared law and the trial counts (T = {scales.steps} steps, k_t = 1 w.p. q = {law.q:g} else 2·Bin({law.t}, q·{law.p:.4g}), checked on "
                 f"{scales.releases:,} releases); cp" + (f" at its share {fraction:.3g}" if fraction is not None else "")
                 + f" on the same trials {cp.eps_lb:.4g}"), record


def plan_estimator(spec: AuditSpec, claim: targets.Claim, attack: Any, probe: Callable[[], Any], pair: Any,
          check: declared.DeclaredCheck | None) -> tuple[str, float | None, str, str]:
    """The estimator as fixed before any trial: (method, a-priori threshold or None, why, the
    declared-model policy note). The method is :data:`AUTO_SHAPE` where ``auto`` leaves the choice
    to a Gaussian-shape test on held-out trials.

    ``auto``: cp for a claim that is not μ-GDP or has δ = 0 (where ``gdp`` is refused, and an explicit
    ``--estimator gdp`` is an error: :func:`audit.stats.estimators.pure_refusal`); for a μ-GDP claim, gdp at the a-priori threshold 0
    only where the score is an exact Gaussian LLR (the attack says so on a probe release) and the
    declared noise model passed its check, so the trade-off is proven Gaussian; otherwise the
    Gaussian shape is tested on held-out trials. So a declared model that failed its check is never
    relied on: the score's own held-out shape decides. An explicit ``--estimator`` is used as asked,
    at a held-out threshold where the declared model failed its check.
    """
    kw = dict(delta=claim.delta, confidence=spec.confidence)
    trusted = check is not None and check.allows(False)
    if claim.delta == 0 and spec.estimator in estimators.GAUSSIAN_CURVE_METHODS:
        raise ValueError(f"--estimator {spec.estimator}: {estimators.pure_refusal(spec.estimator)}")
    if spec.estimator == Method.AUTO and claim.delta == 0:
        method, why = "cp", ("auto: a pure ε-DP claim (δ = 0), so the assumption-free cp (gdp is refused at δ = 0: "
                             "a Gaussian curve's ε there is infinite)")
    elif spec.estimator == Method.AUTO and claim.gdp_mu is None:
        method, why = "cp", "auto: the claim is not μ-GDP, so the assumption-free cp"
    elif spec.estimator == Method.AUTO:
        prior = attack.natural_threshold_for(probe()) if trusted else None
        if prior is not None:
            return "gdp", prior, ("auto: μ-GDP claim read by an exact Gaussian LLR whose declared noise model "
                                  "passed its check (trade-off proven Gaussian): gdp at the a-priori threshold"), \
                _policy_note(check)
        return AUTO_SHAPE, None, "auto", _policy_note(check)
    else:
        method, why = spec.estimator, f"--estimator {spec.estimator}"
    # an attack may fix the threshold before any trial: an exact LLR's 0 (gdp), or the cp rule's
    # choice on draws from its own model of each world (model_scores), read off one probe release
    prior = attack.natural_threshold_for(probe()) if method == Method.GDP else None
    if prior is None and method == Method.CP:
        drawn = attack.model_scores(probe(), pair)
        if drawn is not None:
            prior = estimators.select_threshold("cp", *drawn, **kw)
    fallback, prior, policy = declared.apply_policy(check, method, prior, strict=False)
    if fallback != method:
        # asked for explicitly: kept, at a held-out threshold. gdp at one held-out threshold is a
        # valid test of a μ-GDP claim whatever the scores' law (the claim bounds every test's
        # FPR/FNR pair by its Gaussian trade-off curve); only the a-priori threshold assumed the model
        policy += f"; --estimator {method} kept as asked, at a held-out threshold"
    return method, prior, why, policy


def estimate(spec: AuditSpec, claim: targets.Claim, attack: Any, probe: Callable[[], Any], pair: Any,
              check: declared.DeclaredCheck | None, out_s: np.ndarray, in_s: np.ndarray,
              fp_fraction: float | None = None) -> tuple[estimators.Estimate, str, str]:
    """The run's estimate on all its trials, why that estimator (:func:`plan_estimator`), and the
    declared-model policy note. :data:`AUTO_SHAPE`: the Gaussian shape is tested on held-out
    trials and gdp runs on the rest, or cp on all trials when the test rejects
    (:func:`audit.stats.shape_check.auto_estimate`). `fp_fraction`: where the plan is cp, its one test at
    this OUT false-positive share, fixed before any trial by the caller (:func:`audit.stats.pair_prior.prior_fraction`)."""
    from audit.stats.shape_check import auto_estimate

    kw = dict(delta=claim.delta, confidence=spec.confidence)
    method, prior, why, policy = plan_estimator(spec, claim, attack, probe, pair, check)
    if method == AUTO_SHAPE:
        est, method, why = auto_estimate(out_s, in_s, claim_is_gdp=True, seed=spec.seed, **kw)
        return est, f"auto: {why}", policy
    if fp_fraction is not None and method == Method.CP and prior is None:
        return estimators.estimate(out_s, in_s, method=method, fp_fraction=fp_fraction, seed=spec.seed, **kw), \
            (f"{why}; cp at one false-positive share fixed before any trial ({fp_fraction:.4g} of the OUT trials, "
             "from the pair's declared law at this trial count): its whole β on that test"), policy
    return estimators.estimate(out_s, in_s, method=method, threshold=prior, **kw), why, policy


def _policy_note(check: declared.DeclaredCheck | None) -> str:
    return declared.apply_policy(check, "cp", None, strict=False)[2]


def declared_record(check: declared.DeclaredCheck | None, policy: str, est: estimators.Estimate,
                     scores: np.ndarray, bits: np.ndarray) -> dict[str, Any]:
    """The declared-model check's record, and the deterministic distinguisher where the trials show one."""
    det = declared_joint.deterministic_distinguisher(scores[bits == 0], scores[bits == 1], est)
    extra = {"deterministic": det} if det else {}
    if check is None:
        return {"checked": False, "policy": "the score uses no declared noise model (api/weights view)", **extra}
    return {"checked": True, "policy": policy, **check.to_dict(), **extra}
