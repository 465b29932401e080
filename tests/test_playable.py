"""Playing the probe's witness through the target's own pipeline (Target.witness_plan) and
``--canary auto`` choosing it on the mechanism level (audit.play.witness_choice)."""
import json

import numpy as np
import pytest
import torch

from attacks.mechanism import _means, _step_score
from audit.play import witness_choice
from audit.play.game import AuditSpec, run_audit
from canaries import sensitivity as S
from canaries import witness as W
from canaries.base import CanaryPair
from canaries.witness import plan
from targets.caribou.given_input import CaribouGivenInput, unit_rows
from targets.base import MechanismStep, build

FAST = dict(hops=1, hidden=8, encoder_epochs=2, cm_epochs=1)
PROBE = {"candidates": 6, "max_nodes": 3, "use_families": True}


@pytest.fixture(scope="module")
def small(make_csbm):
    return make_csbm(n=60, classes=2, features=6, seed=1)


@pytest.fixture(scope="module")
def caribou_witness(small, tmp_path_factory):
    out = tmp_path_factory.mktemp("probe")
    report = S.probe(build("caribou", **FAST), small, seed=0, out=out, **PROBE)
    (step,) = report.steps
    return step


def test_unit_rows_fills_unread_rows_and_rejects_long_ones():
    x = torch.tensor([[0.6, 0.8], [0.0, 0.0]], dtype=torch.float64)
    assert torch.equal(unit_rows(x), torch.tensor([[0.6, 0.8], [1.0, 0.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match="norm"):
        unit_rows(torch.tensor([[1.0, 1.0]]))


def test_caribou_plays_the_witness_input_and_recomputes_its_delta(caribou_witness):
    doc = W.load(caribou_witness.witness)
    assert doc["input"]["kind"] == "adversarial"
    how = plan(caribou_witness.witness, {"cm_epochs": "1"})
    assert how.target == "targets.caribou.given_input:CaribouGivenInput" and how.params["x0"] == caribou_witness.witness
    target = build(how.target, **{k: v for k, v in doc["config"].items() if k in FAST}, x0=caribou_witness.witness)
    g0, g1 = doc["g0"], doc["g1"]
    release = target.fit(g0, torch.Generator().manual_seed(0))
    (step,) = release.mechanism
    assert step.noise_std and step.row_projected  # hops=1: the hop's exact law, pre-projection mean
    change = float((step.mean(g1).double() - step.mean(g0).double()).norm())
    assert change == pytest.approx(doc["measured"], rel=1e-5)  # the X⁽⁰⁾ float32 cast
    assert torch.allclose(target.embed(None, g0).double().norm(dim=1), torch.ones(g0.num_nodes, dtype=torch.float64))


def test_caribou_given_input_refuses_a_mismatched_graph(caribou_witness, small):
    target = CaribouGivenInput(**FAST, x0=caribou_witness.witness)
    assert W.load(caribou_witness.witness)["g0"].num_nodes != small.num_nodes
    with pytest.raises(ValueError, match="rows"):
        target.embed(None, small)


def test_witnesses_of_unplayable_targets_have_no_plan(caribou_witness, tmp_path):
    doc = json.loads(open(caribou_witness.witness).read())
    for name in ("dpdgc", "heterpoisson"):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**doc, "target": name}))
        assert plan(str(path)) is None


def test_projected_float32_rows_are_rescaled_before_the_llr():
    """A row the ball projection scaled (norm 1 up to float32 rounding) is scaled back."""
    g0, g1 = object(), object()
    m0 = torch.tensor([[3.0, 0.0]])
    m1 = torch.tensor([[3.0, 0.3]])
    out = (torch.tensor([[2.0, 1.0]]) / torch.tensor([[2.0, 1.0]]).norm()).float()
    step = MechanismStep(output=out, mean=lambda g: m0 if g is g0 else m1, noise_std=1.0, row_projected=True)
    means = _means(step, CanaryPair(g0, g1, {}))
    scale = float(torch.sqrt(torch.tensor(3.0**2 + 0.15**2 + 2 * 1.0)))
    o = out.double() * scale
    expect = float(((o - m0.double()) * (m1 - m0).double()).sum() - 0.5 * 0.09)
    assert _step_score(step, means) == pytest.approx(expect, rel=1e-6)


def test_choose_plays_caribou_witness_and_keeps_gaussian(small, tmp_path):
    car = witness_choice.choose(build("caribou", **FAST), small, level="mechanism", dataset="t", out=tmp_path,
                           options=PROBE)
    assert car.play and car.canary.startswith("witness:") and car.target_name.endswith("CaribouGivenInput")
    assert car.record["witness_ratio"] > car.record["given_ratio"]
    again = witness_choice.choose(build("caribou", **FAST), small, level="mechanism", dataset="t", out=tmp_path,
                             options=PROBE)
    assert again.record["probe"].endswith("report.json") and again.record["witness"] == car.record["witness"]
    gap = witness_choice.choose(build("gap", hops=1, hidden_dim=8, encoder_epochs=2, epochs=1), small,
                           level="mechanism", dataset="t", out=tmp_path, options=PROBE)
    assert not gap.play and "does not beat" in gap.record["chosen_by"]  # a directed edge moves a hop by 1
    deep = build("caribou", **{**FAST, "hops": 3})  # hop k > 1 reads the noisy hop k − 1, not the witness's X
    for target, level in ((build("gaussian"), "mechanism"), (build("caribou", **FAST), "trace"), (deep, "mechanism")):
        skipped = witness_choice.choose(target, small, level=level, dataset="t", out=tmp_path, options=PROBE)
        assert not skipped.play and skipped.record["probe"] == "skipped"


def test_auto_canary_on_the_mechanism_level_plays_the_witness(tmp_path):
    spec = AuditSpec(target="caribou", epsilon=2.0, params={k: str(v) for k, v in FAST.items()},
                     dataset="csbm:n=60,classes=2,features=6,seed=1", canary="auto", attack="mechanism-lrt",
                     level="mechanism", trials=40, estimator="cp")
    result = run_audit(spec, out=tmp_path, progress=False)
    choice = result.canary["input_choice"]
    assert result.canary["canary"] == "witness" and choice["chosen_by"].startswith("sensitivity witness")
    assert "CaribouGivenInput" in choice["played_as"]
    record = json.loads(next(tmp_path.glob("caribou-*.json")).read_text())
    assert record["canary"]["input_choice"]["witness_ratio"] == pytest.approx(choice["witness_ratio"])
    assert np.isfinite(result.auc)


def test_choose_prefers_a_playable_witness_among_equal_ratios(caribou_witness, small, tmp_path):
    """GCON's probe finds ψ/Ψ on an atlas graph with an adversarial X (not playable) and the tight
    canary (playable through raw features) at the same ratio: the game plays the tight canary."""
    doc = json.loads(open(caribou_witness.witness).read())
    atlas, tight = tmp_path / "atlas.json", tmp_path / "tight.json"
    atlas.write_text(json.dumps({**doc, "target": "dpdgc"}))
    tight.write_text(json.dumps({**doc, "target": "gcon", "tight": {"ratio": 0.5 - 1e-9}}))
    target = build("gcon")
    folder = tmp_path / "sensitivity" / witness_choice.probe_key(target, small, PROBE)
    folder.mkdir(parents=True)
    step = {"step": "Z", "witness": str(atlas), "ratio": 0.5, "found_by": "atlas", "violation": False,
            "by_search": {"given graph [realised X]": {"ratio": 0.1}}}
    (folder / "report.json").write_text(json.dumps({"steps": [step], "seconds": 0.0,
                                                    "tight": {"witness": str(tight), "ratio": 0.5 - 1e-9,
                                                              "label": "GCON tight canary (spec §7.1)"}}))
    choice = witness_choice.choose(target, small, level="mechanism", dataset="t", out=tmp_path, options=PROBE)
    assert choice.play and choice.record["witness"] == str(tight) and choice.canary == f"witness:{tight}"
    assert choice.record["given_ratio"] == 0.1
