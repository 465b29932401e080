"""audit.declared_model.declared: a target's declared noise model tested on held-out releases (issue #19 item 3).

Each deviant of tests/deviants.py departs from its declaration in one way; the check must fail
with the right reason (or, for a leaking view, report it). Correct targets pass.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from audit.declared_model import declared, declared_views
from audit.play.game import trial_seed
from canaries.base import make as make_canary
from canaries.edge import ExplicitEdge
from graphs.ops import degrees
from targets.base import Lazy, LazyDict, Release, build, replace_config


def pinned(name: str, graph, **params):
    """The target as the game runs it: the graph's public parameters pinned."""
    t = build(name, **params)
    pins = t.public_params(graph)
    return type(t)(replace_config(t.config, **pins)) if pins else t


@pytest.fixture(scope="module")
def pair(csbm):
    """World 1 adds an edge at the highest-degree node (so a degree-calibrated noise moves)."""
    top = int(degrees(csbm).argmax())
    nbrs = set(csbm.edge_index[1][csbm.edge_index[0] == top].tolist())
    v = next(i for i in range(csbm.num_nodes) if i != top and i not in nbrs)
    return ExplicitEdge(top, v).worlds(csbm, np.random.default_rng(0))


# (deviant, the failing test's name, a fragment of the reason)
DEVIANTS = [
    ("SmallNoise", "scale", "noise std differs from the declared noise_std"),
    ("LaplaceNoise", "kurtosis", "noise is not Gaussian"),
    ("UniformNoise", "kurtosis", "noise is not Gaussian"),
    ("ReusedNoise", "identical", "noise reused"),
    ("SelfLoopMean", "mean-direction", "declared mean misses a term"),
    ("SymNormMean", "entry-mean", "declared mean wrong"),
    ("RowBroadcastNoise", "rows-shared", "noise shared across rows"),
    ("ColumnBroadcastNoise", "cols-shared", "noise shared across columns"),
    ("WorldDependentStd", "world-scale", "noise std depends on the world"),
    ("PrivateCalibration", "declared-world", "declared noise_std depends on the world"),
    ("PartlyReusedNoise", "entry-mean", "noise partly reused across generators"),
]


@pytest.mark.parametrize("name,test,fragment", DEVIANTS, ids=[d[0] for d in DEVIANTS])
@pytest.mark.parametrize("seed", [0, 1])
def test_deviant_is_caught(csbm, pair, name, test, fragment, seed):
    target = pinned(f"tests.deviants:{name}", csbm)
    check = declared.check_declared(target, pair, seed=seed, n=8, attack="mechanism-lrt")
    assert not check.ok and not check.allows_declared_model
    assert fragment in check.reason, check.reason
    assert f"({test}" in check.reason, check.reason
    step = check.steps[0]
    assert step.status == "fail" and test in {t.name for t in step.failures()}
    method, prior, note = declared.apply_policy(check, "gdp", 0.0)
    assert (method, prior) == ("cp", None) and "not trusted" in note


def test_deviant_loaded_by_path(csbm, pair):
    """A user target named by module:Class (as --target takes it) is checked the same way."""
    check = declared.check_declared(build("tests.deviants:SmallNoise"), pair, seed=3, n=8)
    assert not check.ok and "measured std" in check.reason


def test_honest_deviant_passes(csbm, pair):
    check = declared.check_declared(pinned("tests.deviants:Honest", csbm), pair, seed=0, n=8, attack="mechanism-lrt")
    assert check.ok and check.allows_declared_model, check.reason
    assert check.unread_views == ["api"] and not check.leaks


def test_leaky_view_is_reported(csbm, pair):
    """A correct mechanism whose unread ``weights`` view carries the noiseless aggregate: the model
    check passes, the unread view and the leak are named."""
    check = declared.check_declared(pinned("tests.deviants:LeakyView", csbm), pair, seed=0, n=8,
                                    attack="mechanism-lrt")
    assert check.ok
    assert "weights" in check.unread_views and "unread views: api, weights" in check.reason
    assert any("weights['debug.aggregate'] equals the noiseless mean" in x for x in check.leaks)
    # an attack that reads every view leaves none unread
    check = declared.check_declared(pinned("tests.deviants:LeakyView", csbm), pair, seed=0, n=8,
                                    attack=("mechanism", "api", "weights"))
    assert check.unread_views == []


def test_leak_scan_computes_lazy_weights_only_where_a_shape_could_match():
    """A ``LazyDict`` weights view whose lazy entries declare shapes: the scan checks its eager
    entries, computes the lazy ones only where a declared shape is a mean's shape (and then finds
    a leak there), and a wrong declaration is caught when the entries are computed."""
    mean = torch.randn(5, 3, dtype=torch.float64)
    calls = []

    def view(rest: dict, shapes: dict) -> Release:
        lazy = Lazy(lambda: calls.append(1) or rest)
        return Release(weights=LazyDict({"w": mean.float()}, lazy, shapes))

    other = {"clf": torch.zeros(4, 2)}
    found = declared_views.leaks(view(other, {"clf": (4, 2)}), {0: mean}, ("mechanism",))
    assert calls == [] and found == ["weights['w'] equals the noiseless mean of mechanism step 0"]
    found = declared_views.leaks(view({"clf": mean.clone()}, {"clf": (5, 3)}), {0: mean}, ("mechanism",))
    assert calls == [1] and "weights['clf'] equals the noiseless mean of mechanism step 0" in found
    with pytest.raises(AssertionError, match="differ from the declared"):
        dict(view(other, {"clf": (5, 3)}).weights)
    assert declared_views.leaks(view(other, None), {0: mean}, ("mechanism",)) and calls == [1, 1, 1]


@pytest.mark.parametrize("kw,fragment", [
    ({}, None),
    ({"law": "sml"}, None),
    ({"applied_scale": 0.8}, "noise std differs"),
    ({"law": "sml", "applied_law": "sml-per-coordinate"}, "SML"),
    ({"law": "gaussian", "applied_law": "sml"}, "noise is not Gaussian"),
    ({"law": "sml", "applied_scale": 0.7, "steps": 24}, "SML (W~Exp(1)) law"),
], ids=["gaussian", "sml", "gaussian-small", "sml-per-coordinate", "sml-declared-gaussian", "sml-small"])
def test_trace_declared_law(csbm, pair, kw, fragment):
    check = declared.check_declared(build("tests.deviants:TraceTarget", **kw), pair, seed=0, n=8)
    assert check.steps[0].view == "trace"
    if fragment is None:
        assert check.ok and check.allows_declared_model, check.reason
        assert check.to_dict()["steps"][0]["law"] == kw.get("law", "gaussian")  # what gdp's validity reads
    else:
        assert not check.ok and fragment in check.reason, check.reason


def test_correct_gaussian_passes(csbm):
    target = pinned("gaussian", csbm)
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, n=16, attack="mechanism-lrt", graph=csbm)
    assert check.ok and check.allows_declared_model, check.reason
    assert check.steps[0].status == "pass" and check.tests >= 20 and check.steps[0].law == "gaussian"
    assert declared.apply_policy(check, "gdp", 0.0)[:2] == ("gdp", 0.0)
    json.dumps(check.to_dict())


def test_gaussian_half_noise_bug_is_caught(csbm):
    target = pinned("gaussian", csbm, bug="half-noise")
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, n=8)
    assert not check.ok and "noise std differs" in check.reason


def test_correct_gap_passes(csbm):
    target = pinned("gap", csbm, hops=1)
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, n=8, attack="mechanism-lrt", graph=csbm)
    assert check.ok and check.allows_declared_model, check.reason
    assert set(check.unread_views) == {"api", "weights"}


def test_correct_caribou_passes_but_is_undeclared(csbm):
    """CARIBOU releases the last hop of a hidden noisy iteration (no noise law declared): the check
    passes (freshness only), and the strict policy does not let gdp rest on it."""
    target = pinned("caribou", csbm, hops=2)
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, n=8, attack="mechanism-lrt", graph=csbm)
    assert check.ok, check.reason
    assert [s.status for s in check.steps] == ["undeclared"]
    assert not check.allows_declared_model and check.allows(strict=False)
    assert declared.apply_policy(check, "gdp", None)[:2] == ("cp", None)
    assert declared.apply_policy(check, "gdp", None, strict=False)[:2] == ("gdp", None)


def test_caribou_release_all_hops_is_unverified(csbm):
    target = pinned("caribou", csbm, hops=2, bug="release-all-hops")
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, n=4, graph=csbm)
    assert check.ok and [s.status for s in check.steps] == ["unverified", "unverified"]
    assert all(any(t.name == "norm" and t.passed for t in s.tests) for s in check.steps)
    assert not check.allows(strict=False)


def test_heterpoisson_per_coordinate_bug_is_caught(csbm):
    """A real trace: HeterPoisson's SML noise drawn with a per-coordinate scale while the trace
    declares one W per step."""
    kw = dict(noise="sml", steps=3, sampling_rate=1.0, hidden=16)
    for bug, ok in ((None, True), ("per-coordinate-scale", False)):
        target = pinned("heterpoisson", csbm, bug=bug, **kw)
        pair = make_canary("dirac-gradient").worlds(csbm, np.random.default_rng(0), target)
        check = declared.check_declared(target, pair, seed=0, n=8, attack="gradient-lrt", graph=csbm)
        assert check.ok is ok, check.reason
        if not ok:
            assert "SML" in check.reason


def test_gap_node_level_trace_groups(csbm):
    """GAP at node level: the aggregation step declares no law (bounded degree), the DP-SGD trace's
    steps (two module sizes) are tested group by group."""
    target = pinned("gap", csbm, hops=1, unit="node")
    pair = make_canary("remove-node").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, n=4, attack="mechanism-lrt", graph=csbm)
    assert check.ok, check.reason
    views = [(s.view, s.status) for s in check.steps]
    assert views[0] == ("mechanism", "undeclared") and all(v == ("trace", "pass") for v in views[1:]) and len(views) > 1
    assert "trace" in check.unread_views


def test_api_only_target_spends_no_fit(csbm):
    target = pinned("gcn", csbm)
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    check = declared.check_declared(target, pair, seed=0, attack="linkteller")
    assert check.ok and not check.steps and check.n == 0 and check.wall_s < 1.0
    assert check.unread_views == ["weights"] and not check.allows_declared_model
    assert declared.apply_policy(check, "gdp", None)[0] == "cp"
    assert declared.apply_policy(check, "gdp", None, strict=False)[0] == "gdp"  # lenient: nothing contradicted


def test_generators_are_apart_from_trials():
    """The check's generators come from their own SeedSequence stream: none equals a trial's or the
    probe's seed, and they are distinct."""
    gens = declared.check_generators(7, 16)
    seeds = {g.initial_seed() for w in gens for g in w}
    assert len(seeds) == 32
    trials = {trial_seed(7, i) for i in range(20_000)} | {trial_seed(7, 2**40)}
    assert not seeds & trials


def test_deterministic_by_seed(csbm, pair):
    target = pinned("tests.deviants:Honest", csbm)
    a = declared.check_declared(target, pair, seed=5, n=6).to_dict()
    b = declared.check_declared(target, pair, seed=5, n=6).to_dict()
    a.pop("wall_s"), b.pop("wall_s")
    assert a == b


def test_apply_policy():
    assert declared.apply_policy(None, "gdp", 0.0) == ("gdp", 0.0, "declared model not checked")
    failed = declared.DeclaredCheck(ok=False, reason="x", steps=[], alpha=1e-3, n=8, tests=3)
    assert declared.apply_policy(failed, "bayes", 0.5)[:2] == ("bayes", None)
    assert declared.apply_policy(failed, "cp", None)[:2] == ("cp", None)


def _false_alarms(csbm, seeds, n, alpha):
    target = pinned("gaussian", csbm)
    pair = make_canary("random-edge").worlds(csbm, np.random.default_rng(0), target)
    fails = []
    for s in seeds:
        check = declared.check_declared(target, pair, seed=s, n=n, alpha=alpha)
        if not check.ok:
            fails.append((s, check.reason))
    return fails


def test_false_alarm_gaussian_20_seeds(csbm):
    """The correct reference mechanism passes on 20 seeds (Bonferroni at 1e-3: ≤ 2% expected to
    fail at worst; the seeds are fixed, so the test is deterministic)."""
    assert _false_alarms(csbm, range(20), n=8, alpha=1e-3) == []


def test_false_alarm_rate_within_alpha(csbm):
    """The combined test's size: at alpha = 0.2 the correct reference mechanism fails on at most
    25 of 80 seeds (a correct test at rate 0.2 fails this w.p. ≤ 0.01; one at rate 0.4 fails it
    w.p. 0.933, tests/size.py), so the combined test is not anti-conservative."""
    from size import count_failures

    seeds = range(1000, 1080)
    fails = _false_alarms(csbm, seeds, n=8, alpha=0.2)
    failed = {s for s, _ in fails}
    count_failures(lambda r: seeds[r] in failed, len(seeds), 0.2, "the declared check failed the correct mechanism")


def test_attack_object_and_record(csbm, pair):
    """An attack object is read for its levels; a failing check's record is JSON."""
    from attacks.base import make as make_attack

    check = declared.check_declared(pinned("tests.deviants:LaplaceNoise", csbm), pair, seed=0, n=6,
                                    attack=make_attack("mechanism-lrt"))
    record = json.loads(json.dumps(check.to_dict()))
    assert record["ok"] is False and record["allows_declared_model"] is False
    assert record["unread_views"] == ["api"] and record["attack_levels"] == ["mechanism"]
    assert record["steps"][0]["status"] == "fail" and any(not t["passed"] for t in record["steps"][0]["tests"])
