"""The probe on maps that are not linear in their input (canaries/ascent.py, issue #44 item 3):
projected gradient ascent through the declared map finds the users' non-linear leaks of
tests/user_targets/nonlinear.py at their true Δ, a probe that differences ``apply(g, I)`` alone (the
mutant: every map taken as linear) misses them, the correct control stays under its claim and is
reported as a search, not a proof, and a Laplace step is measured in ℓ1."""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from canaries import sensitivity as S
from graphs.ops import add_edge
from graphs.small import make_graph
from targets.base import StepDeclaration, build, derived_step_maps

FILE = Path(__file__).parent / "user_targets" / "nonlinear.py"
H = 5  # feature width of the probe graphs


def true_delta(cls: str, h: int = H) -> tuple[float, float]:
    """[lower, upper] of each target's true Δ (the derivations in tests/user_targets/nonlinear.py)."""
    p = 1 / (1 + math.exp(-8))
    return {"NormalisedSum": (2 * math.sqrt(2), 2 * math.sqrt(2)),
            "AttentionSum": (2 * p * math.sqrt(2), 2 * math.sqrt(2)),
            "SharpenedTanh": (math.sqrt(2) * 2 * math.sqrt(h) * math.tanh(1.5 / math.sqrt(h)),) * 2,
            "SaturatedSum": (math.sqrt(2) * 2 * math.sqrt(h) * math.tanh(0.5 / math.sqrt(h)),) * 2}[cls]


def pendant_pair():
    """u = 0 and v = 1 each with one other neighbour (2 and 3); world 1 adds the edge u–v."""
    g0 = make_graph(4, [(0, 2), (1, 3)], name="2K2")
    g0.x = torch.zeros(4, H, dtype=torch.float64)
    return g0, add_edge(g0, 0, 1)


def step_of(cls: str):
    graph = pendant_pair()[0]
    (step,) = build(f"{FILE}:{cls}").step_maps(graph)
    return step


@pytest.mark.parametrize("cls, linear_misses", [("NormalisedSum", True), ("AttentionSum", False),
                                                 ("SharpenedTanh", True)])
def test_ascent_reaches_each_leaking_maps_true_delta_where_the_linear_reading_misses_it(cls, linear_misses):
    step = step_of(cls)
    assert not step.linear and step.radius == 1.0
    g0, g1 = pendant_pair()
    ms = S.measure_pair(step, g0, g1, "edge", (0, 1), np.random.default_rng(0), "2K2", effort=S.LONG_ASCENT)
    lower, upper = true_delta(cls)
    best = max(ms, key=lambda m: m.measured)
    assert 0.999 * lower <= best.measured <= upper * (1 + 1e-9)
    assert float(best.x.norm(dim=1).max()) <= 1 + 1e-12  # the witness's X is in the claim's domain
    # the mutant: the same map read as linear (main's probe) falls short of the true Δ on this pair
    mutant = dataclasses.replace(step, linear=True)
    (linear_only,) = S.measure_pair(mutant, g0, g1, "edge", (0, 1), np.random.default_rng(0), "2K2")
    if linear_misses:  # (the attention leak is large on sign patterns too: main's probe caught it)
        assert "projected ascent" in best.found_by
        assert linear_only.measured < 0.95 * lower


@pytest.mark.parametrize("cls", ["NormalisedSum", "AttentionSum", "SharpenedTanh"])
def test_the_probe_finds_a_witness_on_graphs_of_three_nodes(cls, tmp_path):
    step = step_of(cls)
    res = S.probe_step(step, pendant_pair()[0], max_nodes=3, use_families=False, given=False)
    assert res.violation and res.search == "ascent" and not res.searched_only
    assert res.best.measured <= true_delta(cls)[1] * (1 + 1e-9)


def test_the_control_stays_under_its_claim_and_is_called_a_search(tmp_path):
    step = step_of("SaturatedSum")
    g0, g1 = pendant_pair()
    res = S.probe_step(step, g0, max_nodes=4, use_families=False, given=False)
    (truth, _) = true_delta("SaturatedSum")
    assert not res.violation and 0.99 * truth <= res.best.measured <= truth * (1 + 1e-9)
    assert res.search == "ascent" and res.searched_only
    report = S.ProbeReport("control", {}, [res], 0.0, "2K2")
    assert report.status == "no witness found" and report.to_dict()["steps"][0]["searched_only"]
    text = S.render(report)
    assert S.SEARCHED in text and "no step above its claim" in text and "VIOLATION" not in text


def test_a_linear_step_keeps_the_exact_answer():
    graph = pendant_pair()[0]
    decl = StepDeclaration("A·X", lambda g: _sum(g, g.x), sensitivity=math.sqrt(2), feature_bound=1.0, linear=True)
    (step,) = derived_step_maps([decl], ("edge",), H)
    res = S.probe_step(step, graph, max_nodes=3, use_families=False, given=False)
    assert res.search == "exact" and not res.searched_only
    assert S.ProbeReport("t", {}, [res], 0.0, "d").status == "pass"


def _sum(graph, x):
    out = torch.zeros_like(x)
    out.index_add_(0, graph.edge_index[1], x[graph.edge_index[0]])
    return out


@pytest.mark.parametrize("linear", [True, False])
def test_a_laplace_step_is_measured_in_l1(linear):
    """A·X on rows of ℓ2 norm ≤ 1: an edge adds x_v to row u and x_u to row v, so its ℓ1 change is at
    most 2√h (rows spread evenly over h features), against √2 in ℓ2."""
    graph = pendant_pair()[0]
    decl = StepDeclaration("A·X", lambda g: _sum(g, g.x), sensitivity=2.0, noise="laplace", feature_bound=1.0,
                           linear=linear, norm="l1")
    (step,) = derived_step_maps([decl], ("edge",), H)
    assert step.norm == "l1"
    res = S.probe_step(step, graph, max_nodes=3, use_families=False, given=False)
    assert res.best.measured == pytest.approx(2 * math.sqrt(H), rel=1e-6) and res.violation
    l2 = S.probe_step(dataclasses.replace(step, norm="l2"), graph, max_nodes=3, use_families=False, given=False)
    assert l2.best.measured == pytest.approx(math.sqrt(2), rel=1e-6)


def test_a_declared_norm_outside_the_known_ones_is_refused():
    with pytest.raises(ValueError, match="norm"):
        StepDeclaration("A·X", lambda g: g.x, sensitivity=1.0, norm="linf")


@pytest.mark.parametrize("spec, violation", [("aggregation.py:Aggregation", False), ("scaled_rows.py:ScaledRows", True)])
def test_the_readmes_user_target_is_probed_from_its_mechanism_steps(spec, violation):
    """README's first user target declares no StepDeclaration: its MechanismStep means at the claim's
    Δ = √2 are probed on the given features (unit rows: an edge moves A·X by √2 exactly; rows scaled to
    norm 4 move it by 4√2)."""
    from graphs.datasets import load

    graph = load("csbm:n=40,classes=2,features=5,seed=2")
    target = build(f"{Path(__file__).parent / 'user_targets' / spec}")
    report = S.probe(target, graph, candidates=6, max_nodes=0, use_families=False)
    (res,) = report.steps
    assert res.search == "given input" and res.best.x_kind == "realised"
    expected = (4 if violation else 1) * math.sqrt(2)
    assert res.best.measured == pytest.approx(expected, rel=1e-6)
    assert report.status == ("violation" if violation else "no witness found")


@pytest.mark.slow
@pytest.mark.parametrize("cls, verdict", [("NormalisedSum", "VIOLATION"), ("AttentionSum", "VIOLATION"),
                                          ("SharpenedTanh", "VIOLATION"), ("SaturatedSum", "CONSISTENT")])
def test_sensitivity_then_the_default_game_on_its_witness(cls, verdict, tmp_path, capsys):
    """Acceptance (issue #44): `sensitivity` exits 1 with a witness on each leaking target and the
    default game on that witness reads VIOLATION; the control exits 0 and stays CONSISTENT."""
    import json

    from audit.console.cli import main

    target = f"{FILE}:{cls}"
    status = main(["sensitivity", "--target", target, "--dataset", "csbm:n=40,classes=2,features=5,seed=2",
                   "--candidates", "6", "--max-nodes", "4", "--no-families", "--out", str(tmp_path / "w"), "--json"])
    (step,) = json.loads(capsys.readouterr().out)["steps"]
    assert status == (1 if verdict == "VIOLATION" else 0) and step["witness"]
    w = f"witness:{step['witness']}"
    main(["run", "--target", target, "--dataset", w, "--canary", w, "--out", str(tmp_path / "r"), "--json"])
    assert json.loads(capsys.readouterr().out)["verdict"] == verdict


def screening_pool():
    """Three edge pairs (u = 0, v = 1 joined in world 1) whose true Δ is known: u and v isolated;
    only u with another neighbour; both with one (the worst: 2K2 → P4). The worst comes last."""
    def pair(edges):
        g0 = make_graph(4, edges, name="pool")
        g0.x = torch.zeros(4, H, dtype=torch.float64)
        return g0, add_edge(g0, 0, 1)

    return [pair([(2, 3)]), pair([(0, 2)]), pair([(0, 2), (1, 3)])]


def screened_then_finished(step, screen):
    """The probe's two stages on the pool: every pair screened with `screen`, one finalist kept
    (S.select_finalists), and the full ascent on it: (index of the kept pair, its measured Δ)."""
    screened = []
    for i, (g0, g1) in enumerate(screening_pool()):
        for m in S.measure_pair(step, g0, g1, "edge", (0, 1), np.random.default_rng(0), f"pair {i}", effort=screen):
            if m.x_kind == "adversarial":
                screened.append((m.ratio, len(screened), (g0, g1, "edge", (0, 1), f"pair {i}", "pool", m.x)))
    ((g0, g1, kind, canary, label, _, x),) = S.select_finalists(screened, 1)
    ms = S.measure_pair(step, g0, g1, kind, canary, np.random.default_rng(0), label, effort=S.LONG_ASCENT, seeds=(x,))
    return int(label.split()[-1]), max(m.measured for m in ms)


@pytest.mark.parametrize("cls, mutants", [
    ("SharpenedTanh", [(6, 0, 3)]),
    ("NormalisedSum", [(6, 0, 3), (2, 30, None)]),
])
def test_the_screen_keeps_the_worst_pair_and_a_wrong_screen_loses_it(cls, mutants):
    """With one finalist, the screen (a short climb from the best starts) keeps the pair whose Δ is
    largest, and the full ascent then reaches it. Mutants: a screen by the starting values alone (no
    climb) ranks the isolated pair first on tanh(3·sum) (every row at once moves most from zero) and
    the half-neighboured pair first on the normalised sum; the former short ascent (2 starts at fixed
    radii, 30 iterations, every start climbed) stalls at √2 on the worst pair of the normalised sum."""
    step = step_of(cls)
    lower, _ = true_delta(cls)
    kept, value = screened_then_finished(step, S.SCREEN)
    assert kept == 2 and value >= 0.999 * lower
    for screen in mutants:
        kept, value = screened_then_finished(step, screen)
        assert kept != 2 and value < 0.95 * lower


def test_finalists_are_distinct_pairs_ranked_by_their_screen():
    a, b, c = object(), object(), object()
    entry = lambda g, x: (g, g, "edge", (0, 1), "l", "s", x)  # noqa: E731
    screened = [(1.0, 0, entry(a, "a1")), (3.0, 1, entry(b, "b1")), (2.0, 2, entry(a, "a2")),
                (3.0, 3, entry(b, "b2")), (0.5, 4, entry(c, "c"))]
    assert [p[-1] for p in S.select_finalists(screened, 2)] == ["b1", "a2"]
    assert [p[-1] for p in S.select_finalists(screened, 5)] == ["b1", "a2", "c"]
