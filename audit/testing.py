"""Helpers for auditing a DP-GNN from pytest.

    from audit.testing import assert_private

    @pytest.mark.audit
    def test_my_trainer_is_private(tmp_path):
        assert_private("mypkg.trainer:MyDPGNN", epsilon=2.0, trials=400, out=tmp_path)

``audit_claim`` plays the game and returns the result dict; ``assert_private`` fails the test
when the lower bound exceeds the claim at the stated confidence (a VIOLATION). Mark long audits
``@pytest.mark.slow``. A correct target fails such a test at most 1 − confidence of the time;
fix the seed so CI is reproducible.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from audit.game import AuditSpec, run_audit


def audit_claim(target: str, *, epsilon: float = 1.0, delta: float | None = None, bug: str | None = None,
                params: dict[str, Any] | None = None, dataset: str = "csbm", attack: str = "auto",
                canary: str = "auto", trials: int = 400, seed: int = 0, confidence: float = 0.95,
                estimator: str = "auto", mode: str = "multi", jobs: int = 1,
                out: str | Path | None = None) -> dict[str, Any]:
    """Audit `target` (a registry name or ``package.module:Class``) and return the result."""
    spec = AuditSpec(target=target, epsilon=epsilon, delta=delta, bug=bug,
                     params={k: str(v) for k, v in (params or {}).items()}, dataset=dataset, canary=canary,
                     attack=attack, trials=trials, seed=seed, confidence=confidence, estimator=estimator,
                     mode=mode)
    if out is None:
        with tempfile.TemporaryDirectory(prefix="dpgnn-audit-") as tmp:
            return run_audit(spec, out=tmp, jobs=jobs, progress=False)
    return run_audit(spec, out=out, jobs=jobs, progress=False)


def assert_private(target: str, **kwargs: Any) -> dict[str, Any]:
    """Audit and raise AssertionError on a VIOLATION; returns the result otherwise."""
    result = audit_claim(target, **kwargs)
    if result["verdict"] == "VIOLATION":
        raise AssertionError(
            f"{target}: empirical ε lower bound {result['eps_lb']} exceeds the claimed ε "
            f"{result['claimed_epsilon']:.4g} at {result['confidence']:.0%} confidence "
            f"({result['method']}, {result['trials']} trials, attack {result['attack']})")
    return result


def assert_violation(target: str, **kwargs: Any) -> dict[str, Any]:
    """The opposite check, for planted bugs: raise unless the audit reports a VIOLATION."""
    result = audit_claim(target, **kwargs)
    if result["verdict"] != "VIOLATION":
        raise AssertionError(f"{target} with bug {kwargs.get('bug')!r} was not caught: ε_lb {result['eps_lb']} "
                             f"≤ claimed {result['claimed_epsilon']:.4g}")
    return result
