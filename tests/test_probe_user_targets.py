"""A probe for any target: a user's target loaded by file path is probed from its declared steps
alone (``Target.declared_steps``), a planted over-sensitive one is caught, and one that declares
nothing is reported as not probed, with its own exit status, never as a pass."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from audit.console.cli import SENSITIVITY_STATUS, main
from canaries import sensitivity as S
from targets.base import build

FILE = Path(__file__).parent / "probe_targets" / "aggregation.py"
DATASET = "csbm:n=40,classes=2,features=5,seed=2"
FAST = ["--candidates", "6", "--max-nodes", "3", "--no-families"]


def sensitivity(cls: str, out: Path, capsys) -> tuple[int, dict]:
    status = main(["sensitivity", "--target", f"{FILE}:{cls}", "--dataset", DATASET, *FAST, "--out", str(out),
                   "--json"])
    return status, json.loads(capsys.readouterr().out)


def test_exit_statuses_are_distinct_and_documented():
    assert SENSITIVITY_STATUS == {"pass": 0, "no witness found": 0, "violation": 1, "not probed": 3}


def test_a_declared_correct_step_is_probed_and_reaches_its_claim(tmp_path, capsys):
    status, doc = sensitivity("ClippedAggregation", tmp_path, capsys)
    # a map not linear in X (it clips) is searched by ascent: at its claim, but a search, not a proof
    assert status == 0 and doc["status"] == "no witness found" and doc["not_probed"] is None
    (step,) = doc["steps"]
    assert step["search"] == "ascent" and step["searched_only"]
    # an edge moves A·X by ‖x_u‖² + ‖x_v‖² ≤ 2 in squared norm: the claim √2 is tight and reached
    assert step["measured"] == pytest.approx(math.sqrt(2), rel=1e-6)
    assert step["measured"] <= step["claimed"] * (1 + S.RTOL)
    assert step["recomputed"] == pytest.approx(step["measured"], rel=1e-9)


def test_a_linear_declaration_is_searched_exactly_and_its_own_features_are_read():
    target = build(f"{FILE}:LinearAggregation")
    graph = _graph()
    (step,) = target.step_maps(graph)
    assert step.linear and step.width == graph.x.size(1)
    unit = graph.clone()
    unit.x = graph.x / graph.x.norm(dim=1, keepdim=True)
    ok = S.probe_step(step, unit, candidates=6, max_nodes=3, use_families=False)
    assert not ok.violation and ok.best.measured == pytest.approx(math.sqrt(2), rel=1e-6)
    # csbm's raw rows are longer than the declared bound: A·X on them moves by more than the claim,
    # and the probe says so through the target's own features
    raw = S.probe_step(step, graph, candidates=6, max_nodes=0, use_families=False)
    assert raw.violation and raw.best.x_kind == "realised"


@pytest.mark.parametrize("cls, floor", [("DoubledEdges", 2 * math.sqrt(2)), ("SaturatedOverclaim", 1.5)])
def test_a_planted_over_sensitive_declared_step_is_caught(cls, floor, tmp_path, capsys):
    status, doc = sensitivity(cls, tmp_path, capsys)
    assert status == 1 and doc["status"] == "violation"
    (step,) = doc["steps"]
    assert step["violation"] and step["measured"] >= floor * (1 - 1e-6)
    witness = json.loads(Path(step["witness"]).read_text())
    assert witness["target"].endswith(f"aggregation.py:{cls}")  # rebuildable from the file
    assert S.recompute(step["witness"]) == pytest.approx(step["measured"], rel=1e-9)


def test_a_target_without_declarations_is_probed_from_its_mechanism_steps(tmp_path, capsys):
    """Issue #44: MechanismStep means and the claim's Δ are what the probe needs; on the given
    features only (no feature bound declared), so a search, never a pass."""
    status, doc = sensitivity("Undeclared", tmp_path, capsys)
    assert status == 0 and doc["status"] == "no witness found" and not doc["violation"]
    (step,) = doc["steps"]
    assert step["step"] == "A·X" and step["search"] == "given input" and step["input"] == "realised"
    assert step["measured"] <= step["claimed"] * (1 + S.RTOL) and "given features only" in step["note"]


def test_a_target_that_declares_nothing_is_not_probed():
    class NoDelta(build(f"{FILE}:Undeclared").__class__):
        def claim(self, graph):
            c = super().claim(graph)
            c.details.pop("sensitivity")
            return c

    report = S.probe(NoDelta(), _graph(), max_nodes=0, use_families=False)
    assert report.status == "not probed" and "declared_steps" in report.not_probed
    text = S.render(report)
    assert "NOT PROBED" in text and "no step above its claim" not in text


def test_a_step_with_no_measured_pair_is_not_a_pass():
    target = build(f"{FILE}:LinearAggregation")
    graph = _graph()
    (step,) = target.step_maps(graph)
    report = S.ProbeReport("t", {}, [S.StepResult(step)], 0.0, "d")
    assert report.status == "not probed" and step.name in report.not_probed


def _graph():
    from graphs.datasets import load

    return load(DATASET)


def test_a_declaration_only_target_plays_its_witness_under_auto(tmp_path):
    """``--canary auto`` plays a declared target's witness through the default ``witness_plan``: the
    witness graph carries the searched features, so the played pair moves the target's own mean by
    the measured Δ."""
    from audit.play import witness_choice
    from canaries.witness import WitnessCanary
    from graphs.datasets import load

    target = build(f"{FILE}:ClippedAggregation")
    assert target.takes_witness() and not build(f"{FILE}:Undeclared").takes_witness()
    graph = _graph()
    graph.x = 0.5 * graph.x / graph.x.norm(dim=1, keepdim=True)  # short rows: the given graph stays below Δ
    options = {"candidates": 6, "max_nodes": 3, "use_families": False}
    choice = witness_choice.choose(target, graph, level="mechanism", dataset=DATASET, out=tmp_path, options=options)
    assert choice.play, choice.record["chosen_by"]
    assert choice.record["given_ratio"] == pytest.approx(0.5, rel=1e-6)  # ‖(x_u, x_v)‖ = 0.5·√2 on the given graph
    assert choice.record["witness_ratio"] == pytest.approx(1.0, rel=1e-6)
    path = choice.record["witness"]
    assert choice.dataset == choice.canary == f"witness:{path}" and choice.target_name.endswith(":ClippedAggregation")
    witness = json.loads(Path(path).read_text())
    pair = WitnessCanary(path).worlds(load(choice.dataset))
    moved = float((target.mean(pair.g1) - target.mean(pair.g0)).norm())
    assert moved == pytest.approx(witness["measured"], rel=1e-9) and moved == pytest.approx(math.sqrt(2), rel=1e-6)
    # the same witness, offered to the game at another level, is not probed
    assert not witness_choice.choose(target, graph, level="api", dataset=DATASET, out=tmp_path).play
