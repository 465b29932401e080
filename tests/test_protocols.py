"""The target contract as a core and optional protocols (targets.core, targets.protocols): the core's
size, every Target member's home, and each protocol checked on every built-in target."""
import inspect
from pathlib import Path

import numpy as np
import pytest
import torch

from audit import data
from audit.testing import CHECK_DATASET
from targets import base
from targets.common.catalogue import Entry
from targets.common.claim import Claim, GaussianStep
from targets.common.probe import TightPair, WitnessPlan
from targets.core import CORE_MEMBERS, TargetCore
from targets.protocols import (PROTOCOLS, Batching, Catalogued, GradientCanary, NeighbourSampling, Preprocessing,
                               Probing, Witnessing, implements)
from targets.release import MechanismStep, Release
from targets.common.value_enum import Level
from audit.play.game import AuditSpec, run_audit
from targets.target import Target, protocols_of, with_defaults

NAMES = base.available()


@pytest.fixture(scope="module")
def graph():
    return data.load(CHECK_DATASET, seed=0)


def _public(cls: type) -> set[str]:
    return {k for k in vars(cls) if not k.startswith("_")} | set(getattr(cls, "__annotations__", {}))


def test_the_core_has_at_most_ten_members():
    assert len(CORE_MEMBERS) <= 10
    assert _public(TargetCore) <= set(CORE_MEMBERS)  # nothing the core declares is left uncounted
    assert "device" in CORE_MEMBERS and {"claim", "fit"} <= set(TargetCore.__abstractmethods__)


def test_every_member_of_target_is_in_the_core_or_one_protocol():
    homes: dict[str, list[str]] = {}
    for p in PROTOCOLS:
        for m in p.members():
            homes.setdefault(m, []).append(p.__name__)
    assert all(len(h) == 1 for h in homes.values()), homes
    assert not set(homes) & set(CORE_MEMBERS)
    members = {k for k in dir(Target) if not k.startswith("_")} - {"members"}
    assert members - set(homes) - set(CORE_MEMBERS) == {"overrides"}  # the old helper, kept


def test_implements_asks_whether_a_target_states_a_protocol():
    class Bare(TargetCore):
        name = "bare"

        def claim(self, graph):
            return Claim(1.0, 1e-5, "toy", "edge", step=GaussianStep(1.0, 1.0))

        def fit(self, graph, rng):
            return Release(weights={"w": torch.zeros(1)})

    class Sampler(Bare, NeighbourSampling):
        def neighbour_sample_size(self):
            return 4

    class Defaults(Target):
        claim, fit = Bare.claim, Bare.fit

    assert not any(implements(Bare(), p) for p in PROTOCOLS)
    assert implements(Sampler(), NeighbourSampling) and not implements(Sampler(), Probing)
    assert implements(Sampler, NeighbourSampling, "neighbour_sample_size")
    assert not implements(Sampler, NeighbourSampling, "outdegrees")
    assert protocols_of(Defaults()) == [] and Defaults().neighbour_sample_size() == 1  # the defaults, kept


@pytest.mark.parametrize("name", NAMES)
def test_batching(name, graph):
    t = base.build(name)
    for level in t.levels:
        assert t.trial_cost(level) > 0
    assert t.setup_cost() >= 0 and isinstance(t.batched, bool) and isinstance(t.score_alongside, bool)
    assert t.auto_batch is None or (isinstance(t.auto_batch, int) and t.auto_batch >= 1)
    assert not t.batched or implements(t, Batching, "fit_batch")  # a batched target vectorises fit_batch
    assert t.cached_work() is None or isinstance(t.cached_work(), str)


@pytest.mark.parametrize("name", NAMES)
def test_preprocessing(name, graph):
    t = base.build(name)
    g, notice = t.preprocess(graph)
    assert g.num_nodes <= graph.num_nodes and (notice is None or isinstance(notice, str))
    assert isinstance(t.public_params(g), dict)
    assert all(isinstance(a, str) for a in t.claim_assumptions(g))
    assert isinstance(t.pair_params(g, g), dict)
    assert t.charged_claim(g, g) == t.claim(g)
    assert t.receptive_hops is None or t.receptive_hops >= 0


@pytest.mark.parametrize("name", NAMES)
def test_probing(name, graph):
    t = base.build(name)
    assert isinstance(t.probed_by_declaration(), bool)
    if implements(t, Probing, "tight_pair"):
        pair = t.tight_pair(graph, np.random.default_rng(0))
        assert pair is None or isinstance(pair, TightPair)
    if implements(t, Probing, "noiseless"):
        assert t.noiseless(graph) is None or isinstance(t.noiseless(graph), torch.Tensor)
    if not implements(t, Probing):
        assert t.declared_steps(graph) == [] and t.tight_pair(graph, None) is None


@pytest.mark.parametrize("name", NAMES)
def test_witnessing(name):
    t = base.build(name)
    assert isinstance(t.takes_witness(), bool)
    if not implements(t, Witnessing):  # the default: a witness only through declared steps
        plan = type(t).witness_plan({"path": "w.json", "target": name}, {})
        assert t.takes_witness() == t.probed_by_declaration() == (plan is not None)
        assert plan is None or isinstance(plan, WitnessPlan) and plan.dataset == "witness:w.json"


@pytest.mark.parametrize("name", NAMES)
def test_gradient_canary(name, graph):
    t = base.build(name)
    if implements(t, GradientCanary, "dimension"):
        assert base.Level.TRACE in type(t).levels
        if t.takes_gradient_canary(graph):
            assert isinstance(t.dimension(graph), int) and t.dimension(graph) > 0
    else:
        assert not t.takes_gradient_canary(graph)
        with pytest.raises(NotImplementedError):
            t.dimension(graph)


@pytest.mark.parametrize("name", NAMES)
def test_neighbour_sampling(name, graph):
    t = base.build(name)
    deg = t.outdegrees(graph)
    assert deg.shape == (graph.num_nodes,) and int(deg.min()) >= 0
    m = t.neighbour_sample_size()
    assert isinstance(m, int) and m >= 1
    assert implements(t, NeighbourSampling) or m == 1


@pytest.mark.parametrize("name", NAMES)
def test_catalogued(name):
    t = base.build(name)
    assert all(isinstance(e, Entry) and (e.bug is None or e.target != name or e.bug in t.bugs) for e in t.catalogue)
    assert set(t.not_yet_caught) <= set(t.bugs)
    for attack, (params, canary) in t.attack_fixtures.items():
        assert isinstance(attack, str) and isinstance(params, dict) and isinstance(canary, str)
    assert not (t.catalogue or t.not_yet_caught or t.attack_fixtures) or implements(t, Catalogued)


def test_old_names_keep_working():
    for name in ("Target", "Release", "Lazy", "LazyDict", "MechanismStep", "TargetConfig", "Claim", "TraceLaw",
                 "REGISTRY", "build", "get", "register", "available", "TRIAL_COST", "SETUP_COST", "charge_of",
                 "sync_fields", "resolve", "LEVELS", "DECLARED_WITNESS_HOW", "on_cpu", "check_release"):
        assert hasattr(base, name), name
    assert base.Target is Target and inspect.getmodule(base.Release).__name__ == "targets.release"


CORE_ONLY = f"{Path(__file__).parent / 'user_targets' / 'core_only.py'}:CoreOnlyAggregation"


def _leaky_core_only() -> type:
    """The user's bare core with a tenth of the noise its claim states (a bare core still: it subclasses
    the user's class as written, not the one the harness completed)."""
    core = base.get(CORE_ONLY).core_class

    class LeakyCoreOnly(core):
        name = "leaky-core-only"

        def fit(self, graph, rng):
            mean = self.aggregate(graph)
            std = self.claim(graph).step.noise_std / 10
            noisy = mean + std * torch.randn(mean.shape, generator=rng, dtype=mean.dtype)
            return Release(mechanism=[MechanismStep(output=noisy, mean=self.aggregate, noise_std=std)])

    return LeakyCoreOnly


def test_a_bare_core_loads_with_every_protocols_default():
    cls = base.get(CORE_ONLY)
    assert issubclass(cls, TargetCore) and cls.__name__ == "CoreOnlyAggregation"
    assert not any(implements(cls, p) for p in PROTOCOLS)  # the defaults are mixed in, not stated
    t = cls()
    assert t.trial_cost(Level.MECHANISM) > 0 and t.neighbour_sample_size() == 1 and t.catalogue == ()
    assert base.get(CORE_ONLY) is cls  # one adapted class per core class: workers and runs agree


def test_a_bare_core_that_mixes_a_protocol_in_keeps_it():
    class Sampler(TargetCore, NeighbourSampling):
        name = "bare-sampler"

        def claim(self, graph):
            return Claim(1.0, 1e-5, "toy", "edge", step=GaussianStep(1.0, 1.0))

        def fit(self, graph, rng):
            return Release(weights={"w": torch.zeros(1)})

        def neighbour_sample_size(self):
            return 4

    cls = with_defaults(Sampler)
    assert implements(cls, NeighbourSampling) and not implements(cls, Probing)
    assert cls().neighbour_sample_size() == 4 and cls().setup_cost() >= 0
    with pytest.raises(TypeError, match="TargetCore"):
        with_defaults(int)


@pytest.mark.parametrize("cls, verdict", [(CORE_ONLY, "CONSISTENT"), ("leaky-core-only", "VIOLATION")])
def test_a_bare_core_runs_an_audit(tmp_path, cls, verdict):
    if cls == "leaky-core-only":
        leaky = _leaky_core_only()
        assert not issubclass(leaky, Target)
        base.register(cls, leaky, force=True)
    try:
        spec = AuditSpec(target=cls, epsilon=1.0, dataset=CHECK_DATASET, trials=400, attack="mechanism-lrt",
                         canary="isolating-edge", seed=0)
        result = run_audit(spec, out=tmp_path, progress=False)
    finally:
        base.REGISTRY.unregister("leaky-core-only") if cls == "leaky-core-only" else None
    assert result.verdict == verdict
    assert (result.eps_lb > 1.0) == (verdict == "VIOLATION")


def test_a_mechanism_that_is_not_a_list_of_steps_is_a_clear_error():
    t = base.get(CORE_ONLY)()
    with pytest.raises(ValueError, match="must be a list of targets.base.MechanismStep"):
        base.check_release(Release(mechanism=torch.zeros(3)), t)
