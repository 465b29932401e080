"""A probe for any target: a user's target loaded by file path is probed from its declared steps
alone (``Target.declared_steps``), a planted over-sensitive one is caught, and one that declares
nothing is reported as not probed, with its own exit status, never as a pass."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from audit.cli import SENSITIVITY_STATUS, main
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
    assert SENSITIVITY_STATUS == {"pass": 0, "violation": 1, "not probed": 3}


def test_a_declared_correct_step_is_probed_and_reaches_its_claim(tmp_path, capsys):
    status, doc = sensitivity("ClippedAggregation", tmp_path, capsys)
    assert status == 0 and doc["status"] == "pass" and doc["not_probed"] is None
    (step,) = doc["steps"]
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


def test_a_target_that_declares_nothing_is_not_probed(tmp_path, capsys):
    status, doc = sensitivity("Undeclared", tmp_path, capsys)
    assert status == 3 and doc["status"] == "not probed" and not doc["violation"]
    assert "not probed" in doc["not_probed"] and "declared_steps" in doc["not_probed"]
    text = S.render(S.probe(build(f"{FILE}:Undeclared"), _graph(), max_nodes=0, use_families=False))
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
