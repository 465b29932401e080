"""The canary registry and contract (canaries.base)."""
import numpy as np
import pytest

from audit.play.data import csbm
from canaries import base as canaries
from canaries.edge import CanaryPair as EdgePair


def test_every_registered_canary_is_a_canary():
    names = canaries.available()
    assert {"random-edge", "worst-edge", "remove-node", "dirac-gradient"} <= set(names)
    for name in names:
        c = canaries.make(name)
        assert isinstance(c, canaries.Canary) and c.name == name and c.unit in ("edge", "node")


def test_names_user_canaries_and_errors():
    assert EdgePair is canaries.CanaryPair  # the old import path still works
    edge = canaries.make("edge:3-5")
    assert (edge.u, edge.v) == (3, 5)
    assert isinstance(canaries.make("canaries.edge:RandomEdge"), canaries.get("random-edge"))
    with pytest.raises(ValueError, match="unknown canary"):
        canaries.make("nope")
    with pytest.raises(ValueError, match="already registered"):
        canaries.register("random-edge", canaries.get("random-edge"))
    with pytest.raises(ValueError, match="cannot make many canaries"):
        canaries.make("worst-edge").many(csbm(n=40), 2, np.random.default_rng(0))
