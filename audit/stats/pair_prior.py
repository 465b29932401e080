"""The exact ε of a trace pair read off its record alone, before any trial: what the portfolio may prefer
where no pilot shows a signal (:func:`audit.plan.portfolio_choice.choose`).

A gradient canary of norm C on a Poisson(q)-sampled trace under the declared Gaussian noise of std s, q < 1:
a fixed vector is T subsampled Gaussian steps of noise multiplier s/C
(:mod:`audit.stats.estimators.subsampled_curve`, the optimistic PLD); a whole node (``dirac-node``) is the
k_t mixture of :mod:`audit.stats.node_curve`. Both are the declared mechanism's figures (a planted bug or
a wrong declaration can move them): they rank candidates, they certify nothing.

The same record fixes the law of the exact-loss score (``gradient-lrt``) on that pair in each world
(:func:`law_scores`), and so, before any trial, the one false-positive count at which cp is expected to
certify the most at a given trial count (:func:`prior_fraction`): the chosen pair's certificate then spends
its whole β on that one test (:func:`audit.stats.estimators.cp_every_trial.cp_at_rank`) instead of a
Bonferroni grid. A wrong declaration moves the count, which costs power, never validity.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.stats import node_curve
from audit.stats.estimators import subsampled_curve
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw


@dataclass(frozen=True)
class Declared:
    """What a pair's record declares of the trace law its exact loss is scored under."""

    q: float
    std: float
    magnitude: float
    #: a whole node whose k_t the trace records: (t_z, p_z) of :func:`audit.stats.node_curve.scale_law`
    node: tuple[int, float] | None


def declared(record: dict[str, Any] | None, steps: int) -> Declared | None:
    """The record's Gaussian trace law (0 < q ≤ 1, a positive std and canary norm, and a whole node's k_t law
    where the trace records k_t), or None where the record does not fix it."""
    law = PairLaw.of(record or {})
    q, std, magnitude = law.sampling_rate, law.noise_std, (record or {}).get("magnitude")
    if law.noise != NoiseLaw.GAUSSIAN or not (q is not None and 0.0 < q <= 1.0) or not (std and std > 0) \
            or not (isinstance(magnitude, (int, float)) and magnitude > 0) or steps < 1:
        return None
    if not law.node_scales:
        return Declared(q, std, float(magnitude), None)
    t_z, p_z = record.get("node_training_out_degree"), record.get("node_keep_probability")
    return None if t_z is None or p_z is None else Declared(q, std, float(magnitude), (int(t_z), float(p_z)))


def exact_from_record(record: dict[str, Any] | None, steps: int, delta: float) -> float | None:
    """The pair's exact ε at `delta` over `steps` steps, or None where its record does not fix it."""
    law = declared(record, steps)
    if law is None or not law.q < 1.0 or not 0.0 < delta < 1.0:
        return None
    try:
        if law.node is None:
            return subsampled_curve.epsilon(law.std / law.magnitude, law.q, steps, delta)
        return node_curve.epsilon(noise_std=law.std, magnitude=law.magnitude, q=law.q, t=law.node[0], p=law.node[1],
                                  steps=steps, delta=delta)[0]
    except ValueError:
        return None


#: draws per world of the declared score law that :func:`prior_fraction` reads
LAW_DRAWS = 200_000
#: the false-positive fractions :func:`prior_fraction` chooses among
FRACTIONS = np.logspace(-4, np.log10(0.95), 160)


def law_scores(record: dict[str, Any] | None, steps: int, n: int = LAW_DRAWS, seed: int = 0
               ) -> tuple[np.ndarray, np.ndarray] | None:
    """`n` draws a world (OUT, IN) of the exact loss Σ_t ln((1 − q) + q·e^{ℓ_t}) (``gradient-lrt``) on the
    pair its record describes, under the declared law (as :func:`exact_from_record`), or None where the
    record does not fix it. A whole node: given k_t the loss is Gaussian, N(±m/2, m), m = (C/s)²·Σ_t k_t²
    (:mod:`audit.stats.node_curve`). A fixed vector: ℓ_t ~ N(−μ²/2, μ²) without it, N(+μ²/2, μ²) with it
    (each step with probability q in the IN world), μ = C/s."""
    law = declared(record, steps)
    if law is None:
        return None
    rng = np.random.default_rng([int(seed), 0x1A_4D])
    q, mu2 = law.q, (law.magnitude / law.std) ** 2
    if law.node is not None:
        values, probs, _ = node_curve.scale_law(q, *law.node)
        k = rng.choice(values, size=(2, n, steps), p=probs / probs.sum())
        m = mu2 * (k ** 2).sum(axis=2)
        z = rng.standard_normal((2, n))
        return -m[0] / 2 + np.sqrt(m[0]) * z[0], m[1] / 2 + np.sqrt(m[1]) * z[1]
    mu = np.sqrt(mu2)
    worlds = []
    for b in (0, 1):
        inside = rng.random((n, steps)) < q if b else np.zeros((n, steps), dtype=bool)
        ell = np.where(inside, mu2 / 2, -mu2 / 2) + mu * rng.standard_normal((n, steps))
        worlds.append(ell.sum(axis=1) if q >= 1.0 else np.logaddexp(np.log1p(-q), np.log(q) + ell).sum(axis=1))
    return worlds[0], worlds[1]


def prior_fraction(record: dict[str, Any] | None, steps: int, n_out: int, n_in: int, delta: float,
                   confidence: float) -> tuple[float, float] | None:
    """(f, the bound expected there): the OUT false-positive fraction of :data:`FRACTIONS` at which cp's
    one-count test (:func:`audit.stats.estimators.cp_every_trial.cp_at_rank`) at these trial counts gives
    the largest bound when each count is its expectation under the declared score law (:func:`law_scores`).
    None where the record does not fix the law. Read off the record alone: no trial is seen."""
    from audit.stats.estimators.cp_every_trial import _tie_broken, mix_eps

    drawn = law_scores(record, steps)
    if drawn is None or n_out < 2 or n_in < 1:
        return None
    out, inn, _ = _tie_broken(*drawn, seed=0)  # ties (a node whose k_t are all 0 scores 0) split as cp_at_rank does
    ranked = np.sort(out)
    at = ranked[np.minimum(((1.0 - FRACTIONS) * ranked.size).astype(int), ranked.size - 1)]
    tpr = 1.0 - np.searchsorted(np.sort(inn), at, side="left") / inn.size  # P(IN score ≥ the threshold)
    ks = np.minimum(np.floor(FRACTIONS * n_out).astype(int), n_out - 1)
    bounds = mix_eps(np.round(tpr * n_in), ks, n_out, n_in, delta, 1.0 - confidence)
    best = int(np.argmax(bounds))
    return float(FRACTIONS[best]), float(bounds[best])
