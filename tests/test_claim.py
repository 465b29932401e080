"""The typed claim (targets.common.claim): every built-in target's default claim (and its node-level
and trace configurations) reads back from its stored form as the same value; no field has a silent
default; the deprecated ``details`` keeps a user's pre-typed target working."""
import dataclasses
import json
import math
import warnings

import pytest

from audit import data
from audit.testing import CHECK_DATASET
from targets import base
from targets.common.claim import (Claim, ClaimFieldMissing, Composed, GaussianStep, LaplaceStep, NoiseStep, Notes,
                                  Sampled, Series, TraceLaw, Unstated, describe, event_from_dict, event_to_dict,
                                  leaves)
from targets.common.value_enum import Unit

CONFIGS = [(name, {}) for name in base.available()] + [
    ("dpdgc", {"unit": "node"}),
    ("gap", {"unit": "node"}), ("caribou", {"unit": "node"}),
    ("dpsgd-gcn", {"sampling_rate": "0.1"}), ("heterpoisson", {"noise": "sml"})]


@pytest.fixture(scope="module")
def graph():
    return data.load(CHECK_DATASET, seed=0)


def stored(claim: Claim) -> Claim:
    return Claim.from_dict(json.loads(json.dumps(claim.to_dict())))


@pytest.mark.parametrize("name, params", CONFIGS, ids=[f"{n}-{p}" for n, p in CONFIGS])
def test_a_stored_claim_reads_back_equal(name, params, graph):
    target = base.build(name, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # a built-in target states its claim typed
        claim = target.claim(graph)
    assert isinstance(claim.unit, Unit) and claim.unit_text.startswith(claim.unit.value)
    again = stored(claim)
    assert again == claim
    assert again.to_dict() == claim.to_dict()
    assert not hasattr(type(claim), "__dataclass_fields__") or "details" not in {
        f.name for f in dataclasses.fields(claim)}


def test_the_stored_json_keeps_its_unit_and_flat_details(graph):
    claim = base.build("gaussian").claim(graph)
    d = claim.to_dict()
    assert d["unit"] == "edge (one undirected edge)"
    assert d["details"]["noise_std"] == pytest.approx(claim.noise_std)
    assert d["details"]["noise_multiplier"] * d["details"]["sensitivity"] == pytest.approx(d["details"]["noise_std"])


def test_a_trace_target_states_its_trace_law(graph):
    law = base.build("dpsgd-gcn", sampling_rate=0.1).claim(graph).trace_law()
    assert law == TraceLaw("gaussian", law.noise_std, 1.0, 1.0, 0.1)
    gap = base.build("gap", unit="node").claim(graph)
    assert gap.trace_law().noise_std != gap.noise_std  # the trace's σ·C, not the PMA's σ·Δ


def test_unstated_fields_raise_naming_the_claim_and_the_field():
    claim = Claim(epsilon=1.0, delta=1e-5, accountant="toy accountant", unit="edge (one edge)")
    for read in (lambda: claim.noise_std, lambda: claim.sensitivity, claim.trace_law, lambda: claim.note("orders")):
        with pytest.raises(ClaimFieldMissing, match="toy accountant"):
            read()
    assert claim.stated("noise_std") is None and isinstance(claim.composition, Unstated)
    # a DP-SGD claim without its clip norm states no trace law: never clip → 1, q → 1
    with pytest.warns(DeprecationWarning):
        partial = Claim(1.0, 1e-5, "x", "node", details={"noise": "gaussian", "noise_std": 2.0})
    with pytest.raises(ClaimFieldMissing, match="trace"):
        partial.trace_law()
    with pytest.raises(ValueError, match="must start with 'edge' or 'node'"):
        Claim(1.0, 1e-5, "x", "vertex")


def test_the_deprecated_details_keep_a_users_claim_working():
    with pytest.warns(DeprecationWarning):
        claim = Claim(epsilon=1.0, delta=1e-5, accountant="gdp", unit="edge (undirected)", gdp_mu=0.5,
                      details={"noise_std": 2.0, "sensitivity": 1.0, "steps": 2})
    assert claim.noise_std == 2.0 and claim.sensitivity == 1.0 and claim.note("steps") == 2
    with pytest.warns(DeprecationWarning):
        assert claim.details["noise_std"] == 2.0
    with pytest.warns(DeprecationWarning):
        claim.details["noise_std"] = 1.0  # a user target that rescales its claim in place
    assert claim.noise_std == 1.0
    with pytest.warns(DeprecationWarning):
        moved = dataclasses.replace(claim, epsilon=3.0, details={**claim.details, "sensitivity": 4.0})
    assert moved.sensitivity == 4.0 and moved.epsilon == 3.0 and moved.note("steps") == 2
    assert stored(moved) == moved
    old = moved.to_dict()
    del old["typed"]  # a result stored before the claim was typed
    assert Claim.from_dict(old) == moved
    charged = dataclasses.replace(moved, per_world_epsilon=(1.0, 3.0))
    assert stored(charged) == charged and charged.to_dict()["details"]["per_world_epsilon"] == [1.0, 3.0]


def test_event_trees_round_trip_and_list_their_steps():
    g = GaussianStep(2.0, 1.5)
    tree = Series((Composed(Sampled(0.1, g), 100), LaplaceStep(0.5, 1.0), NoiseStep(law="sml", noise_std=1.0),
                   Unstated("a minimiser")))
    assert event_from_dict(json.loads(json.dumps(event_to_dict(tree)))) == tree
    assert leaves(tree) == [g, LaplaceStep(0.5, 1.0), NoiseStep(law="sml", noise_std=1.0)]
    assert g.noise_std == 3.0 and g.law == "gaussian"
    assert describe(tree).startswith("100 × Sampled(q=0.1, poisson, Gaussian(σ=2, Δ=1.5)) + Laplace(b=0.5, Δ=1)")
    with pytest.raises(ValueError, match="unknown claim event"):
        event_from_dict({"type": "poisson-thing"})


def test_notes_are_frozen_json_values():
    notes = Notes({"order": math.nan, "curves": (1, 2)})
    assert notes["order"] == "nan" and notes["curves"] == [1, 2]
    with pytest.raises(TypeError):
        notes["order"] = 1  # type: ignore[index]


def test_a_key_removed_from_the_deprecated_details_is_unstated(graph):
    claim = base.build("gaussian").claim(graph)
    with pytest.warns(DeprecationWarning):
        claim.details.pop("sensitivity")
    assert claim.stated("sensitivity") is None and claim.noise_std > 0
    with pytest.raises(ClaimFieldMissing, match="sensitivity"):
        claim.sensitivity


def test_a_std_rescaled_through_the_deprecated_details_is_the_claims_std(graph):
    claim = base.build("gaussian").claim(graph)
    with pytest.warns(DeprecationWarning):
        claim.details["noise_std"] = claim.noise_std / 2  # a user's subclass, as uncomposed.py does
    assert claim.noise_std == pytest.approx(claim.noise_multiplier * claim.sensitivity / 2)
    assert stored(claim) == claim


def test_the_claim_a_result_file_stores_reads_back_equal(tmp_path):
    from audit.result import Result
    from audit.testing import audit_claim

    result = audit_claim("gaussian", epsilon=2.0, canary="worst-edge", attack="mechanism-lrt",
                         estimator="cp", trials=200, out=tmp_path)
    (path,) = [p for p in tmp_path.rglob("*.json")]
    stored_result = Result.from_dict(json.loads(path.read_text()))
    claim = Claim.from_dict(stored_result.claim)
    assert claim == Claim.from_dict(result.claim) and claim.to_dict() == result.claim
    assert isinstance(claim.step, GaussianStep) and claim.epsilon == pytest.approx(2.0)
