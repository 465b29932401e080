"""The exact ε of a trace pair read off its record alone, before any trial: what the portfolio may prefer
where no pilot shows a signal (:func:`audit.plan.portfolio_choice.choose`).

A gradient canary of norm C on a Poisson(q)-sampled trace under the declared Gaussian noise of std s, q < 1:
a fixed vector is T subsampled Gaussian steps of noise multiplier s/C
(:mod:`audit.stats.estimators.subsampled_curve`, the optimistic PLD); a whole node (``dirac-node``) is the
k_t mixture of :mod:`audit.stats.node_curve`. Both are the declared mechanism's figures (a planted bug or
a wrong declaration can move them): they rank candidates, they certify nothing.
"""
from __future__ import annotations

from typing import Any

from audit.stats import node_curve
from audit.stats.estimators import subsampled_curve
from targets.common.noise import NoiseLaw
from targets.common.pair_law import PairLaw


def exact_from_record(record: dict[str, Any] | None, steps: int, delta: float) -> float | None:
    """The pair's exact ε at `delta` over `steps` steps, or None where its record does not fix it."""
    law = PairLaw.of(record or {})
    q, std, magnitude = law.sampling_rate, law.noise_std, (record or {}).get("magnitude")
    if law.noise != NoiseLaw.GAUSSIAN or not (q is not None and 0.0 < q < 1.0) or not (std and std > 0) \
            or not (isinstance(magnitude, (int, float)) and magnitude > 0) or not 0.0 < delta < 1.0 or steps < 1:
        return None
    try:
        if law.node is None:
            return subsampled_curve.epsilon(std / magnitude, q, steps, delta)
        t_z, p_z = record.get("node_training_out_degree"), record.get("node_keep_probability")
        if t_z is None or p_z is None:
            return None
        return node_curve.epsilon(noise_std=std, magnitude=float(magnitude), q=q, t=int(t_z), p=float(p_z),
                                  steps=steps, delta=delta)[0]
    except ValueError:
        return None
