"""The stable surface for users' targets (targets.api, audit.testing) is pinned: its names, the hooks'
signatures, the old import paths of moved modules (with a DeprecationWarning), and a user target written
from an earlier README, audited end to end."""
from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import audit.testing
import targets.api as api
from targets.base import Target
from targets.common.moved import MOVED

REPO = Path(__file__).resolve().parents[1]
README_TARGET = str(Path(__file__).with_name("user_api") / "readme_target.py") + ":ReadmeTarget"

#: the surface as released; removing or renaming one of these is a breaking change (CHANGELOG.md)
PINNED = {"Target", "TargetConfig", "Claim", "TraceLaw", "Release", "MechanismStep", "Lazy", "StepDeclaration",
          "Level", "Unit", "check_epsilon", "check_delta", "gdp_mu", "gdp_epsilon", "gdp_delta", "gdp_compose",
          "poisson_gdp_clt", "gaussian_rdp", "subsampled_gaussian_rdp", "rdp_to_dp", "calibrate_decreasing",
          "seeded", "child_generator", "noise_generator", "load_file",
          # the typed claim's parts and the contract's protocols (issue #46)
          "GaussianStep", "LaplaceStep", "NoiseStep", "Sampled", "Composed", "Series", "Unstated", "ClaimFieldMissing",
          "TargetCore", "Batching", "Preprocessing", "Probing", "Witnessing", "GradientCanary", "NeighbourSampling",
          "Catalogued", "implements",
          # a DP-SGD target's trace view (issue #45: a user's trace no longer imports targets.common.trace)
          "DPSGDTrace", "TraceStep"}
#: each hook's parameters (self left out), in order
HOOK_PARAMS = {"claim": ["graph"], "fit": ["graph", "rng"], "fit_batch": ["graph", "rngs"], "prepare": ["graph"],
               "cached_work": [], "noiseless": ["graph"], "declared_steps": ["graph"], "preprocess": ["graph"],
               "takes_gradient_canary": ["graph"], "dimension": ["graph"], "trial_cost": ["level"]}
TESTING_PARAMS = {"assert_private": ["target", "kwargs"], "assert_violation": ["target", "kwargs"]}


def test_the_surface_is_the_pinned_one_and_imports():
    assert set(api.__all__) == PINNED
    for name in PINNED:
        assert getattr(api, name) is not None
    assert set(api.HOOKS) == set(HOOK_PARAMS)


@pytest.mark.parametrize("hook", sorted(HOOK_PARAMS))
def test_hook_signatures_are_pinned(hook):
    params = list(inspect.signature(getattr(Target, hook)).parameters)
    assert params[0] == "self" and params[1:] == HOOK_PARAMS[hook]


def test_the_testing_half_is_pinned():
    for name in api.TESTING:
        assert callable(getattr(audit.testing, name))
    for name, params in TESTING_PARAMS.items():
        assert list(inspect.signature(getattr(audit.testing, name)).parameters) == params
    audit_params = inspect.signature(audit.testing.audit_claim).parameters
    assert {"epsilon", "delta", "bug", "params", "dataset", "trials", "seed", "out"} <= set(audit_params)


def test_every_moved_module_keeps_its_old_path_with_a_warning():
    """In one fresh interpreter (an old path must not be cached by an earlier import)."""
    lines = ["import warnings"]
    for old, (new, _, _) in sorted(MOVED.items()):
        lines += ["warnings.simplefilter('error', DeprecationWarning)",
                  f"try:\n    import {old}\nexcept DeprecationWarning as w:\n    print('WARNED', w)",
                  "warnings.simplefilter('ignore')", f"import {old} as a, {new} as b", f"print('SAME {old}', a is b)"]
    out = subprocess.run([sys.executable, "-c", "\n".join(lines)], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout
    for old, (new, _, _) in MOVED.items():
        assert f"WARNED {old} moved to {new}" in out and f"SAME {old} True" in out


def test_import_targets_accounting_warns_here_too():
    sys.modules.pop("targets.accounting", None)
    with pytest.warns(DeprecationWarning, match="targets.accounting moved to targets.common.accounting"):
        mod = importlib.import_module("targets.accounting")
    assert mod.gdp_mu(1.0, 1e-5) == pytest.approx(importlib.import_module("targets.common.accounting").gdp_mu(1.0, 1e-5))


def test_a_readme_target_with_the_old_import_is_audited_end_to_end(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        result = audit.testing.assert_private(README_TARGET, epsilon=2.0, trials=300, seed=0, out=tmp_path)
    assert result.verdict == "CONSISTENT" and result.trials == 300
    assert 0 < result.claimed_epsilon <= 2.0 + 1e-9
