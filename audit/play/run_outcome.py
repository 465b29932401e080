"""A run's outcome: the result record built from its estimate, scores and claim, and written out."""
from __future__ import annotations

import json
import math
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from audit.stats import estimators
from audit.stats.pair_epsilon import PairEpsilon, slack
from audit.records.power import power
from audit.records.result import Result, verdict
from audit.play.run_spec import AuditSpec
from audit.records.store import Store
from targets import base as targets


def make_result(spec: AuditSpec, key: str, target: targets.Target, claim: targets.Claim, canary: dict[str, Any],
                attack: str, level: targets.Level, est: estimators.Estimate, scores: np.ndarray, bits: np.ndarray,
                *, wall: float, store_path: Path, attack_queries: int | None = None,
                exact: PairEpsilon | None = None, **run: Any) -> Result:
    """The result record (DESIGN.md). `attack_queries`: API queries per trial; where the target's
    inference is randomised each one is a fresh release that its claim (``queries``) must compose.
    `exact`: the exact ε of the played pair (:mod:`audit.stats.pair_epsilon`), written with the slack
    claim → exact → ε_lb. `run`: the run's own fields (``run_id``, ``mode``, and for multi-run audits ``batch``,
    ``cached_per_worker``, ``trials_played``, ``trials_wall_s``)."""
    out_s, in_s = scores[bits == 0], scores[bits == 1]
    import torch_geometric

    config = {k: v for k, v in asdict(target.config).items()}
    estimate = est.to_dict()
    found = verdict(est.eps_lb, claim.epsilon)
    reading = power(verdict=found, claimed_epsilon=claim.epsilon, max_certifiable_eps=est.max_certifiable_eps,
                    scores_out=out_s, scores_in=in_s, confidence=est.confidence)
    return Result(
        target=spec.target, config=config, dataset=spec.dataset, canary=canary,
        attack=attack, level=level, trials=int(bits.size), seed=spec.seed, key=key,
        claimed_epsilon=claim.epsilon if math.isfinite(claim.epsilon) else "inf",
        claimed_delta=claim.delta, accountant=claim.accountant,
        claim=claim.to_dict(), eps_lb=estimate["eps_lb"], ci=estimate["interval"],
        mu_lb=est.mu_lb, method=est.method, assumption=est.assumption,
        confidence=est.confidence, estimate=estimate,
        auc=estimators.auc(out_s, in_s),
        tpr_at_fpr={str(f): estimators.tpr_at_fpr(out_s, in_s, f) for f in (0.1, 0.01, 0.001)},
        max_certifiable_eps=estimate["max_certifiable_eps"],
        tightness=(est.eps_lb / claim.epsilon)
        if 0 < claim.epsilon < math.inf and math.isfinite(est.eps_lb) else None,
        attack_queries_per_trial=attack_queries,
        pair_epsilon=None if exact is None else exact.to_dict(),
        slack=None if exact is None else slack(claim.epsilon, exact, est.eps_lb),
        verdict=found, power=reading.to_dict(),
        wall_time_s=wall, store=str(store_path),
        versions={"python": platform.python_version(), "torch": torch.__version__,
                  "torch_geometric": torch_geometric.__version__, "numpy": np.__version__},
        **run)


def save_result(store: Store, out: Path, result: Result) -> None:
    """Write `result` into the store (then closed) and as ``out/<run_id>.json``."""
    record = result.to_dict()
    store.save_result(result.run_id, result.key, record)
    store.close()
    (out / f"{result.run_id}.json").write_text(json.dumps(record, indent=2, sort_keys=True))
