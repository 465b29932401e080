"""The pair's charge (audit.play.relation, Target.pair_params / charged_claim / claim_assumptions)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from audit.play import relation
from audit.play.data import degrees
from audit.play.game import AuditSpec, run_audit
from canaries.edge_removal import IsolatingEdge, MinDegreeEdge
from graphs.ops import add_edge
from targets.base import Claim, Release, Target, TargetConfig, build, replace_config


@dataclasses.dataclass
class DegreeConfig(TargetConfig):
    """A toy calibration that reads the minimum degree (or a public one) and the node count.

    Args:
        d_min (int, optional): the public minimum degree; None reads it off the graph.
    """

    d_min: int | None = None


class DegreeCalibrated(Target[DegreeConfig]):
    """Noise std 1/D_min (a smaller minimum degree charges more); ε grows with the training nodes."""

    name = "degree-calibrated"
    Config = DegreeConfig
    levels = ("mechanism",)

    def d_min(self, graph):
        return self.config.d_min if self.config.d_min is not None else int(degrees(graph).min())

    def claim_assumptions(self, graph):
        return ["a node of degree 0"] if bool((degrees(graph) == 0).any()) else []

    def public_params(self, graph):
        return {"d_min": self.d_min(graph)}

    def claim(self, graph):
        eps = self.config.epsilon * (1 + 1e-3 * int(graph.train_mask.sum()))
        return Claim(epsilon=eps, delta=1e-5, accountant="toy", unit="edge",
                     details={"noise_std": 1.0 / max(self.d_min(graph), 1), "sensitivity": 1.0})

    def fit(self, graph, rng):
        return Release(mechanism=[])


def _ring(n=10, extra=()):
    from audit.play.data import csbm

    g = csbm(n=n, avg_degree=2, seed=0)
    g.edge_index = torch.empty(2, 0, dtype=torch.long)
    for i in range(n):
        g = add_edge(g, i, (i + 1) % n)
    for u, v in extra:
        g = add_edge(g, u, v)
    return g


def test_the_pair_is_charged_at_the_world_that_charges_more():
    g = _ring(extra=[(0, 5), (1, 6), (2, 7), (3, 8), (4, 9)])   # 3-regular
    assert int(degrees(g).min()) == 3
    pair = MinDegreeEdge().worlds(g, np.random.default_rng(0))
    assert pair.info["min_degree"] == {"with_edge": 3, "without_edge": 2}
    unpinned = DegreeCalibrated()
    pinned = DegreeCalibrated(d_min=3)              # the game's pins from the given graph
    target, claim, record = relation.charge(unpinned, pair, pinned, pinned.claim(g))
    assert target.config.d_min == 2 and claim.details["noise_std"] == pytest.approx(0.5)
    assert record["pins"] == {"d_min": 2} and "worse world" in record["pins_from"]
    assert record["assumptions_left"] == {}
    assert relation.readings(record, "CONSISTENT")["paper"].startswith("CONSISTENT")


def test_the_claim_is_the_worse_of_the_two_worlds(csbm):
    pair = IsolatingEdge().worlds(csbm, np.random.default_rng(0))
    g0 = pair.g0.clone()
    g0.train_mask = g0.train_mask.clone()
    g0.train_mask[: 5] = True                       # world 0 has more training nodes: a larger claim
    pair = dataclasses.replace(pair, g0=g0)
    pinned = DegreeCalibrated(d_min=1)
    claim = pinned.charged_claim(pair.g0, pair.g1)
    per_world = [pinned.claim(pair.g0).epsilon, pinned.claim(pair.g1).epsilon]
    assert per_world[0] > per_world[1]
    assert claim.epsilon == pytest.approx(max(per_world))
    assert list(claim.per_world_epsilon) == per_world
    assert claim.to_dict()["details"]["per_world_epsilon"] == per_world  # the JSON keeps its place


def test_a_pair_outside_the_papers_assumption_gets_both_readings(csbm):
    pair = IsolatingEdge().worlds(csbm, np.random.default_rng(0))
    pinned = DegreeCalibrated(d_min=1)
    target, claim, record = relation.charge(DegreeCalibrated(), pair, pinned, pinned.claim(csbm))
    assert record["pins"] == {"d_min": 1}          # world 0 is outside the claim: world 1's pins
    assert list(record["assumptions_left"]) == ["world 0"]
    share = record["share"]
    assert share["kind"] == "isolating" and 0 < share["share"] < 1
    both = relation.readings(record, "VIOLATION")
    assert both["standard"] == "VIOLATION"
    assert both["paper"].startswith("not covered") and f"{100 * share['share']:.1f}%" in both["paper"]


def test_caribou_run_on_an_isolating_pair_reports_both_readings(tmp_path):
    spec = AuditSpec(target="caribou", params={"hops": "1"}, canary="isolating-edge", attack="mechanism-lrt",
                     trials=40, seed=0)
    result = run_audit(spec, out=tmp_path, progress=False)
    record = result.canary["relation_charge"]
    assert record["relation"] == "remove" and result.canary["isolates"]
    assert "degree 0" in " ".join(record["assumptions_left"]["world 0"])
    assert record["readings"]["standard"] == result.verdict
    assert record["readings"]["paper"].startswith("not covered")
    stored = json.loads(next(tmp_path.glob("caribou-*.json")).read_text())
    assert stored["canary"]["relation_charge"]["readings"] == record["readings"]


def test_an_insertion_on_a_covered_graph_keeps_the_runs_claim(small_csbm):
    from canaries.edge import RandomEdge

    unpinned = build("gaussian", epsilon=1.0)
    target = type(unpinned)(replace_config(unpinned.config, **unpinned.public_params(small_csbm)))
    pair = RandomEdge().worlds(small_csbm, np.random.default_rng(0))
    claim = target.claim(small_csbm)
    same, charged, record = relation.charge(unpinned, pair, target, claim)
    assert same is target and charged is claim
    assert record["relation"] == "insert" and record["pins_from"] == "the given graph"


def test_equal_claims_keep_the_pins_whose_bound_holds_on_both_worlds():
    """pair_params' tie-break (equal ε and δ): the larger noise std, because that pin is the only
    one that bounds both worlds; the smaller-noise pin's minimum degree is broken by one world."""
    g = _ring(extra=[(0, 5), (1, 6), (2, 7), (3, 8), (4, 9)])   # 3-regular
    pair = MinDegreeEdge().worlds(g, np.random.default_rng(0))
    unpinned = DegreeCalibrated()
    options = [unpinned.public_params(w) for w in (pair.g0, pair.g1)]
    claims = [DegreeCalibrated(**o).claim(pair.g0) for o in options]
    assert options[0] != options[1]
    assert (claims[0].epsilon, claims[0].delta) == (claims[1].epsilon, claims[1].delta)   # a tie
    pins = unpinned.pair_params(pair.g0, pair.g1)
    chosen = DegreeCalibrated(**pins).claim(pair.g0).details["noise_std"]
    assert chosen == max(c.details["noise_std"] for c in claims)
    assert all(int(degrees(w).min()) >= pins["d_min"] for w in (pair.g0, pair.g1))
    other = next(o for o in options if o != pins)
    assert any(int(degrees(w).min()) < other["d_min"] for w in (pair.g0, pair.g1))
