"""The stable surface for a user's own target: everything a target written outside this package may
import, in one place. These names keep their meaning and signatures across releases; a name that moves
keeps working for at least one release with a DeprecationWarning, and the move is recorded in
CHANGELOG.md. Anything imported from elsewhere in ``targets`` may change without notice.

A user's target subclasses :class:`Target` with a config dataclass (:class:`TargetConfig`), and
implements the hooks in :data:`HOOKS` (the first two are required)::

    from targets.api import Claim, MechanismStep, Release, Target, TargetConfig, gdp_epsilon, gdp_mu

Its pytest suite uses :mod:`audit.testing`, the user API's other half (the names in :data:`TESTING`):
``from audit.testing import assert_private, assert_violation``. (This module does not import it: targets
sit below the audit layer.)
"""
from __future__ import annotations

from targets.base import Claim, Lazy, Level, MechanismStep, Release, Target, TargetConfig, TraceLaw, Unit
from targets.common.claim import (ClaimFieldMissing, Composed, GaussianStep, LaplaceStep, NoiseStep, Sampled, Series,
                                  Unstated)
from targets.core import TargetCore
from targets.protocols import (Batching, Catalogued, GradientCanary, NeighbourSampling, Preprocessing, Probing,
                               Witnessing, implements)
from targets.common.accounting import (calibrate_decreasing, check_delta, check_epsilon, gaussian_rdp, gdp_compose,
                                       gdp_delta, gdp_epsilon, gdp_mu, poisson_gdp_clt, rdp_to_dp,
                                       subsampled_gaussian_rdp)
from targets.common.probe import StepDeclaration
from targets.common.registry import load_file
from targets.common.runtime import child_generator, noise_generator, seeded
from targets.common.trace import DPSGDTrace, TraceStep

__all__ = [
    # the contract
    "Target", "TargetConfig", "Claim", "TraceLaw", "Release", "MechanismStep", "Lazy", "StepDeclaration",
    "Level", "Unit",
    # a DP-SGD target's trace view (docs/your-target.md: what the gradient canaries and gradient-lrt read)
    "DPSGDTrace", "TraceStep",
    # the typed claim's parts, and the core with its optional protocols
    "GaussianStep", "LaplaceStep", "NoiseStep", "Sampled", "Composed", "Series", "Unstated", "ClaimFieldMissing",
    "TargetCore", "Batching", "Preprocessing", "Probing", "Witnessing", "GradientCanary", "NeighbourSampling",
    "Catalogued", "implements",
    # accounting helpers (the claim's ε from an accountant)
    "check_epsilon", "check_delta", "gdp_mu", "gdp_epsilon", "gdp_delta", "gdp_compose", "poisson_gdp_clt",
    "gaussian_rdp", "subsampled_gaussian_rdp", "rdp_to_dp", "calibrate_decreasing",
    # randomness and loading
    "seeded", "child_generator", "noise_generator", "load_file",
]

#: the hooks of :class:`Target` a user's target may implement, with their signatures (``self`` left out);
#: ``claim`` and ``fit`` are required, the rest have defaults
HOOKS: dict[str, str] = {
    "claim": "(graph) -> Claim",
    "fit": "(graph, rng) -> Release",
    "fit_batch": "(graph, rngs) -> list[Release]",
    "prepare": "(graph) -> None",
    "cached_work": "() -> str | None",
    "noiseless": "(graph) -> torch.Tensor | None",
    "declared_steps": "(graph) -> list[StepDeclaration]",
    "preprocess": "(graph) -> tuple[graph, str | None]",
    "takes_gradient_canary": "(graph=None) -> bool",
    "dimension": "(graph) -> int",
    "trial_cost": "(level) -> float",
}

#: what :mod:`audit.testing` offers a user's test suite
TESTING: tuple[str, ...] = ("audit_claim", "assert_private", "assert_violation", "target_checks", "check_target")
