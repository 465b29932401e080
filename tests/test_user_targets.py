"""The user-target suite: targets written as a user would (tests/user_targets/*.py, loaded by file
path with their default settings), each deviating the way a real implementation could, audited by
the default command (``run --target FILE:Class``: the portfolio, ``--attack auto --canary auto``).

The four tool gaps of issue #36 are among them: a target the sensitivity probe cannot see
(raw_features), steps sharing noise while the likelihood ratio assumes independence (shared_noise),
a deterministic release (fixed_seed), a leak only an edge removal shows (isolated_fallback). The
correct controls stay consistent. The audits run at a trial budget (not the default 2-minute one) so
that their pilots, and so their verdicts, do not depend on the machine's speed.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from audit.plan import portfolio
from audit.plan.budget import parse
from audit.play.game import AuditSpec
from audit.testing import check_target, target_checks

USER = Path(__file__).with_name("user_targets")
#: enough for the pilots to reach both halves of the edge relation (removal canaries included)
BUDGET = "10000"

DEVIANTS = {
    "raw_features.py:RawFeatures": "aggregates raw rows: Δ far above the claimed √2, nothing declared to probe",
    "shared_noise.py:SharedNoise": "one noise draw for two steps: their difference is exact",
    "fixed_seed.py:FixedSeed": "a constant noise seed: every release of a world is the same",
    "isolated_fallback.py:IsolatedFallback": "an isolated node's row released exact: only a removal reaches it",
    "per_dimension_noise.py:PerDimensionNoise": "noise std divided by √f",
    "scaled_rows.py:ScaledRows": "rows scaled to norm 4, the claim's Δ still for unit rows",
    "train_rows_only.py:TrainRowsOnly": "rows outside the training set released without noise",
    "uncomposed.py:Uncomposed": "eight hops, each calibrated to the whole budget",
    "laplace_miscalibrated.py:LaplaceMiscalibrated": "pure ε-DP Laplace counts at half the scale: true ε 2, claim 1",
    "poisson_sgd.py:InformedHalfNoise": "Poisson DP-SGD at half the claimed std: the check names the std, gradient-lrt "
                                        "stays for the family fit (1.26 at this budget; at 120u 4 of 10 seeds)",
}
CONTROLS = ["aggregation.py:Aggregation", "aggregation.py:TwoHops", "laplace_correct.py:LaplaceCounts",
            "poisson_sgd.py:PoissonSGD", "poisson_sgd.py:InformedPoissonSGD"]
#: deviants the default command finds but does not certify in this version (said, not hidden)
FOUND_NOT_CERTIFIED = {
    "debug_weights.py:DebugWeights": "the noiseless aggregate in `weights`: the declared check names the leak; "
                                     "the portfolio pilots the weights view only after every mechanism candidate",
    "poisson_sgd.py:HalfNoise": "DP-SGD noise at half the claimed std, on a trace that ignores the gradient canary: "
                                "its gradient pairs are refused (canaries.gradient.canary_unread), and the weights "
                                "view is past the pilot share at 120u",
}

#: issue #43's suite (tests/user_targets/issue43/README.md: how each leaks, its true ε, main's verdicts)
ISSUE43 = {
    "issue43/row_shared_noise.py:RowSharedNoise": "one noise row broadcast over all nodes",
    "issue43/degree_column.py:DegreeColumn": "the degree column released without noise",
    "issue43/centred_noise.py:CentredNoise": "noise centred per column: column sums noise-free",
    "issue43/degree_scaled_noise.py:DegreeScaledNoise": "noise scaled by (d − 1)/d, 0 at a leaf",
    "issue43/low_rank_noise.py:LowRankNoise": "rank-8 noise in 32 columns",
    "issue43/quieter_last_hop.py:QuieterLastHop": "the last of two hops at half the std (true ε 3.35)",
    "issue43/partly_shared_noise.py:PartlySharedNoise": "noise 0.9-shared across two steps (true ε 7.54)",
    "issue43/api_noiseless.py:ApiNoiseless": "posteriors from the noiseless aggregate: only the api view leaks",
}
ISSUE43_CONTROLS = ["issue43/api_from_release.py:ApiFromRelease", "issue43/extra_shared_noise.py:ExtraSharedNoise"]
#: leaks of issue #43's suite the default does not certify in this version (said, not hidden): none since the
#: pilots reach every view's families before a second canary (the api one, ApiNoiseless, is in ISSUE43)
ISSUE43_NOT_CERTIFIED: dict[str, str] = {}


def _path(spec: str) -> str:
    file, cls = spec.split(":")
    return f"{USER / file}:{cls}"


def _default_run(spec: str, out: Path):
    return portfolio.run(AuditSpec(target=_path(spec)), parse(BUDGET), out=out, progress=False)


@pytest.mark.parametrize("spec", [s for s in [*DEVIANTS, *CONTROLS, *FOUND_NOT_CERTIFIED, *ISSUE43, *ISSUE43_CONTROLS,
                                               *ISSUE43_NOT_CERTIFIED] if s != "fixed_seed.py:FixedSeed"])
def test_each_user_target_loads_by_path_and_keeps_the_contract(spec):
    if spec not in OVER_SENSITIVE:
        assert {"calibration", "determinism", "fit_batch"} <= set(check_target(_path(spec)))
        return
    checks = dict(target_checks(_path(spec)))
    for name in set(checks) - {"sensitivity"}:
        checks[name]()
    with pytest.raises(AssertionError, match=r"measured [0-9.]+ > claimed"):  # the probe reads its MechanismStep means
        checks["sensitivity"]()


#: deviants whose noisy step moves more than its claimed Δ: the contract check's sensitivity probe, which now reads
#: a target's MechanismStep means and claimed Δ where it declares no StepDeclaration (issue #44), names each
OVER_SENSITIVE = {"raw_features.py:RawFeatures", "scaled_rows.py:ScaledRows", "issue43/degree_column.py:DegreeColumn"}


def test_the_contract_check_already_names_a_fixed_seed():
    with pytest.raises(AssertionError, match="fits with different seeds release the same views"):
        check_target(_path("fixed_seed.py:FixedSeed"))


@pytest.mark.slow
@pytest.mark.parametrize("spec", list(DEVIANTS))
def test_the_default_command_catches_each_deviant(spec, tmp_path):
    result = _default_run(spec, tmp_path)
    assert result.verdict == "VIOLATION", f"{spec} ({DEVIANTS[spec]}) not caught: ε_lb {result.eps_lb}"


@pytest.mark.slow
@pytest.mark.parametrize("spec", list(ISSUE43))
def test_the_default_command_catches_each_leak_of_issue_43(spec, tmp_path):
    result = _default_run(spec, tmp_path)
    assert result.verdict == "VIOLATION", f"{spec} ({ISSUE43[spec]}) not caught: ε_lb {result.eps_lb}"


@pytest.mark.slow
@pytest.mark.parametrize("spec", CONTROLS + ISSUE43_CONTROLS)
def test_the_default_command_keeps_correct_controls_consistent(spec, tmp_path):
    assert _default_run(spec, tmp_path).verdict == "CONSISTENT"


def test_a_noiseless_tensor_left_in_an_unread_view_is_named_as_a_leak(small_csbm):
    import numpy as np

    from audit.declared_model import declared
    from canaries.edge import RandomEdge
    from targets.base import get

    target = get(_path("debug_weights.py:DebugWeights"))()
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    check = declared.check_declared(target, pair, seed=0, n=4, attack="mechanism-lrt", graph=small_csbm)
    assert check.unread_views == ["weights"]
    assert check.leaks and all("aggregate" in leak for leak in check.leaks)


def test_the_learned_api_distinguisher_reads_the_api_only_leak_and_not_its_control(small_csbm):
    """ApiNoiseless's posteriors come from the noiseless aggregate: the learned api distinguisher, reading
    the canary's endpoints and neighbours on both worlds' graphs, separates its worlds on every release;
    ApiFromRelease post-processes the noisy release, and its scores of the two worlds overlap."""
    import numpy as np
    import torch

    from attacks.learned import LearnedAPI
    from canaries.edge import RandomEdge
    from targets.base import get

    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))

    def scores(spec: str) -> tuple[list[float], list[float]]:
        target = get(_path(spec))()
        attack = LearnedAPI()
        attack.bind_target(target)
        attack.bind_run(0)
        return tuple([attack.score(target.fit(pair.world(b), torch.Generator().manual_seed(500 + 2 * j + b)), pair)
                      for j in range(12)] for b in (0, 1))

    out, inn = scores("issue43/api_noiseless.py:ApiNoiseless")
    assert max(out) < min(inn) or min(out) > max(inn)
    out, inn = scores("issue43/api_from_release.py:ApiFromRelease")
    assert not (max(out) < min(inn) or min(out) > max(inn))
