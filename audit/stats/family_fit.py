"""The subsampled-Gaussian family fit in a run (issue #45): the sampler measured on releases of its own,
and the certificate read by :mod:`audit.stats.estimators.subsampled_fit` with cp beside it.

* **The sampler.** Up to :data:`SAMPLER_RELEASES` releases of the IN world, each from a seed of its own (a
  namespace no trial, pilot or declared check uses), sized from what is left of the budget
  (:meth:`audit.plan.meter.Meter.sampler_releases`: fewer releases give a wider interval on q, which the fit pays for; below
  :data:`MIN_SAMPLER_RELEASES` the fit is refused as budget-limited), give per step the canary's inclusion and the
  realised batch size (``DPSGDTrace.sampling_record``). :func:`audit.stats.sampler_check.check_sampler`
  measures q (a Clopper–Pearson interval at β_q = :data:`Q_SHARE`·β), the batch-size variance
  against Binomial(N, q) (N = the trace's expected batch over its declared q) and the independence
  of inclusions across steps. Where a check fails, the fit is refused and the run says which; a trace that
  does not record the canary's inclusion (a user's own trace may not) fails as unmeasured, never trusted.
* **The accounting.** A trace releasing more steps than its accountant charged
  (``DPSGDTrace.accounted_steps``; GAP's ``poisson-loader-steps``) is said (:func:`accounting_check`); the
  fit reads the steps the trace releases, so it certifies against the real T.
* **The certificate.** T is the number of steps the trace releases; the fit pays for q's interval
  with β_q and gives the box β − β_q. cp on the same trials (every trial, its own threshold rule) is
  the assumption-free floor reported beside it.

Which runs may use it (the score, the canary, the declared-model check) is the portfolio's rule
(:func:`audit.plan.portfolio._family_valid`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from audit.stats import estimators
from audit.stats.estimators import subsampled_fit
from audit.stats.sampler_check import SamplerCheck, check_sampler
from targets.base import Level

#: the most IN-world releases the sampler checks read (T inclusions each)
SAMPLER_RELEASES = 1000
#: the fewest worth reading: at q = 0.5, T = 3, q's interval at β_q = 0.005 is then about ±0.09
MIN_SAMPLER_RELEASES = 100
#: the share of what is left of the budget after the pilots the sampler's releases may take (the rest certifies)
SAMPLER_SHARE = 0.25
#: share of β paid for the interval on q
Q_SHARE = 0.1
_NAMESPACE = 0x5A3F1E  # seeds of the sampler's releases: apart from every trial's and check's


@dataclass(frozen=True)
class Sampler:
    """What the sampler's releases showed: the steps a trace releases, the declared q, the checks."""

    steps: int
    declared_q: float
    population: int
    check: SamplerCheck
    accounting: str | None = None

    def to_dict(self) -> dict[str, Any]:
        c = asdict(self.check)
        return {"steps": self.steps, "declared_q": self.declared_q, "population": self.population,
                "releases": self.check.trials, **c, "ok": self.check.ok, "accounting": self.accounting}


def accounting_check(trace: Any) -> str | None:
    """What is wrong with the trace's accounting, or None: more steps released than the accountant
    charged (a trace that does not say what it charged, ``accounted_steps = 0``, is not read)."""
    accounted = int(getattr(trace, "accounted_steps", 0) or 0)
    if 0 < accounted < len(trace):
        return (f"accounting: the trace releases {len(trace)} steps, the accountant charged {accounted} "
                f"(the fit reads all {len(trace)})")
    return None


#: the failure a trace without the canary's inclusions gets: the sampler cannot be measured, so it is not trusted
UNRECORDED = ("unmeasured: the trace does not record the canary's inclusion at every step (TraceStep.canary_in), "
              "so the sampler cannot be checked")


def _unmeasured(trials: int, steps: int) -> SamplerCheck:
    return SamplerCheck((0.0, 1.0), 0.0, trials, steps, float("nan"), float("nan"), float("nan"), (UNRECORDED,))


def measure_sampler(target: Any, pair: Any, *, seed: int, confidence: float, releases: int | None = None) -> Sampler:
    """The sampler checks on `releases` (default :data:`SAMPLER_RELEASES`) IN-world releases of the pair."""
    releases = releases or SAMPLER_RELEASES
    states = [np.random.SeedSequence([seed, _NAMESPACE, i]).generate_state(1, dtype=np.uint64)[0]
              for i in range(releases)]
    fits = target.fit_batch(pair.world(1), [torch.Generator().manual_seed(int(s) >> 1) for s in states])
    traces = [r.view(Level.TRACE) for r in fits]
    records = [t.sampling_record() for t in traces]
    inclusions = [r["canary_in"] for r in records]
    first = traces[0]
    q = float(first.sampling_rate)
    population = int(round(float(first.expected_batch) / q)) if q > 0 else 0
    if any(x is None for row in inclusions for x in row):
        return Sampler(len(first), q, population, _unmeasured(len(traces), len(first)), accounting_check(first))
    level = Q_SHARE * (1.0 - confidence)
    check = check_sampler(inclusions, [r["batch_size"] for r in records], population=population,
                          declared_q=q, q_level=level)
    return Sampler(len(first), q, population, check, accounting_check(first))


def certify(out_s: np.ndarray, in_s: np.ndarray, sampler: Sampler, *, delta: float, confidence: float,
            seed: int) -> tuple[estimators.Estimate, estimators.Estimate]:
    """(the family fit's estimate, cp's on the same trials). The sampler checks must have passed."""
    if not sampler.check.ok:
        raise ValueError(f"the subsampled-Gaussian fit is refused: {'; '.join(sampler.check.failures)}")
    fit = subsampled_fit.fit(out_s, in_s, delta=delta, steps=sampler.steps, q=sampler.check.q_interval,
                             confidence=confidence, q_level=sampler.check.q_level, seed=seed)
    cp = estimators.estimate(out_s, in_s, method="cp", delta=delta, confidence=confidence, seed=seed)
    return fit, cp


def pilot_bound(out_s: np.ndarray, in_s: np.ndarray, *, steps: int, q: float, delta: float,
                confidence: float) -> float:
    """The family fit on a pilot's trials at the declared q (a statistic for the choice only: the
    certificate measures q and reads fresh trials); 0 where the pilot is too small to fit."""
    try:
        return float(subsampled_fit.fit(out_s, in_s, delta=delta, steps=steps, q=q, confidence=confidence).eps_lb)
    except ValueError:
        return 0.0
