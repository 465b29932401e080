"""The whole-node family fit in a run (issue #45, HeterPoisson's unit): the node's per-step scales k_t measured
on releases of their own, and the certificate read by :func:`audit.stats.estimators.node_fit.fit_at_share` with cp
at the same a-priori share beside it.

* **The law.** The pair's record declares it (:func:`law_of`): the sampling rate q, z's training out-degree t and
  keep probability p (public structure), the Gaussian std and the canary's norm.
* **The check.** Up to ``releases`` IN-world releases, each from a seed of its own (a namespace no trial, pilot,
  declared check or sampler check uses), give the k_t every step records (``TraceStep.canary_scale``);
  :func:`audit.stats.sampler_check.check_node_scales` tests them against the declared law. Where it fails, or the
  trace records no k_t, the fit is refused and the run says why; cp certifies.
* **The certificate.** On every trial, at the OUT false-positive share the pair's declared law and the trial
  counts fix before any trial for the fit (:func:`fit_share`); cp_at_rank at cp's own a-priori share
  (:func:`audit.stats.pair_prior.prior_fraction`) on the same trials is the assumption-free floor reported beside
  it.

Which runs use it is the portfolio's rule: an exact loss chosen by its whole-node pair's exact ε.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from audit.stats import estimators, node_curve, pair_prior
from audit.stats.estimators import node_fit
from audit.stats.sampler_check import check_node_scales
from targets.base import Level

#: the most IN-world releases the k_t check reads (T scales each)
NODE_RELEASES = 400
#: the fewest worth reading: 100 releases of 3 steps refuse the law of twice the declared q on 100 of 100 draws,
#: the law of half the declared p on 92, and the true law on none (tests/test_node_fit.py)
MIN_NODE_RELEASES = 100
#: the share of what is left of the budget the check may take: it pays nothing into the fit (a pass or a refusal),
#: so every release beyond what the check needs is a certification trial lost (400 of 14,034 at 120u flipped a
#: HeterPoisson seed's ε_lb from 0.0033 to 0)
NODE_SHARE = 0.01
_NAMESPACE = 0x40DE5C  # seeds of the check's releases: apart from every trial's and check's


@dataclass(frozen=True)
class NodeLaw:
    """The whole node's declared k_t law: q, t and p of :func:`audit.stats.node_curve.scale_law`; and the declared
    noise scale σ = std / canary norm, which fixes the fit's a-priori share (:func:`fit_share`)."""

    q: float
    t: int
    p: float
    sigma: float


def law_of(record: dict[str, Any] | None) -> NodeLaw | None:
    """The record's whole-node law, or None where the pair is not a whole node on a Poisson(q < 1) Gaussian trace."""
    law = pair_prior.declared(record, 1)
    if law is None or law.node is None or not law.q < 1.0:
        return None
    return NodeLaw(law.q, *law.node, sigma=law.std / law.magnitude)


@dataclass(frozen=True)
class NodeScales:
    """What the check's releases showed: the steps a trace releases, the law checked, the failures. A pair with no
    declared whole-node law carries no law, no releases and the refusal (:meth:`undeclared`)."""

    steps: int
    law: NodeLaw | None
    releases: int
    failures: tuple[str, ...]

    @classmethod
    def undeclared(cls, why: str = "the pair's record declares no whole node's k_t law on a Poisson(q < 1) "
                                   "Gaussian trace") -> "NodeScales":
        return cls(0, None, 0, (why,))

    @property
    def ok(self) -> bool:
        return not self.failures and self.law is not None

    @property
    def refusal(self) -> str | None:
        """Why the fit may not run, or None where the check passed."""
        return None if self.ok else "; ".join(self.failures) or "no whole-node law"

    def to_dict(self) -> dict[str, Any]:
        law = self.law
        return {"steps": self.steps, "q": law and law.q, "t": law and law.t, "p": law and law.p,
                "sigma": law and law.sigma, "releases": self.releases, "failures": list(self.failures), "ok": self.ok}


def measure(target: Any, pair: Any, law: NodeLaw, *, seed: int, releases: int) -> NodeScales:
    """The k_t check on `releases` IN-world releases of the pair (k_t has one law in both worlds)."""
    states = [np.random.SeedSequence([seed, _NAMESPACE, i]).generate_state(1, dtype=np.uint64)[0]
              for i in range(releases)]
    fits = target.fit_batch(pair.world(1), [torch.Generator().manual_seed(int(s) >> 1) for s in states])
    traces = [r.view(Level.TRACE) for r in fits]
    scales = [[getattr(step, "canary_scale", None) for step in trace] for trace in traces]
    steps = len(traces[0])
    if any(x is None for row in scales for x in row):
        return NodeScales(steps, law, releases, ("unmeasured: the trace does not record the node's scale k_t at every "
                                                 "step (TraceStep.canary_scale), so its law cannot be checked",))
    values, probs, _ = node_curve.scale_law(law.q, law.t, law.p)
    return NodeScales(steps, law, releases, check_node_scales(scales, values=values, probs=probs))


def fit_share(scales: NodeScales, n_out: int, n_in: int, *, delta: float, confidence: float) -> float:
    """The fit's OUT false-positive share, fixed before any trial from the declared law and the trial counts alone
    (:func:`audit.stats.estimators.node_fit.prior_share`: the fit's own optimum, not cp's)."""
    law = scales.law
    if law is None:
        raise ValueError(f"the whole-node fit is refused: {scales.refusal}")
    return node_fit.prior_share(sigma=law.sigma, q=law.q, t=law.t, p=law.p, steps=scales.steps, n_out=n_out,
                                n_in=n_in, delta=delta, confidence=confidence)[0]


def certify(out_s: np.ndarray, in_s: np.ndarray, scales: NodeScales, *, delta: float, confidence: float,
            seed: int) -> estimators.Estimate:
    """The whole-node fit's estimate at its a-priori share (:func:`fit_share`); cp at its own share, on the same
    trials, is the run's own estimate and is reported beside it by the caller. The k_t check must have passed."""
    if not scales.ok:
        raise ValueError(f"the whole-node fit is refused: {scales.refusal}")
    law = scales.law
    assert law is not None  # scales.ok
    share = fit_share(scales, len(out_s), len(in_s), delta=delta, confidence=confidence)
    return node_fit.fit_at_share(out_s, in_s, delta=delta, steps=scales.steps, q=law.q, t=law.t, p=law.p,
                                 fraction=share, confidence=confidence, seed=seed)
