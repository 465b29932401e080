"""The edge-correlation attack: it catches CARIBOU's missing row projection and not the correct target."""
import pytest
import torch

from attacks.correlation import EdgeCorrelation
from audit.play.game import AuditSpec, run_audit
from canaries.edge import CanaryPair
from targets.base import MechanismStep, Release


def _spec(bug):
    return AuditSpec(target="caribou", epsilon=1.0, bug=bug, params={"encoder_epochs": "10"},
                     canary="low-degree-edge", attack="edge-correlation", trials=160, seed=3,
                     estimator="gdp")  # a μ-GDP claim, tested at one held-out threshold


def test_catches_the_missing_projection(tmp_path):
    r = run_audit(_spec("no-projection"), out=tmp_path, progress=False)
    assert r["verdict"] == "VIOLATION" and r["eps_lb"] > 1.0


def test_correct_caribou_is_consistent(tmp_path):
    r = run_audit(_spec(None), out=tmp_path, progress=False)
    assert r["verdict"] == "CONSISTENT"
    assert r["auc"] < 0.65


def test_score_is_the_endpoint_rows_inner_product():
    out = torch.tensor([[1.0, 2.0], [0.0, 0.0], [3.0, -1.0]])
    rel = Release(mechanism=[MechanismStep(output=out, mean=lambda g: out)])
    pair = CanaryPair(g0=None, g1=None, info={"edge": (0, 2)})
    assert EdgeCorrelation().score(rel, pair) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="edge canary"):
        EdgeCorrelation().score(rel, CanaryPair(g0=None, g1=None, info={"node": 1}))
