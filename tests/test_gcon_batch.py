"""GCON's batched fit: fit_batch(g, rngs)[k] releases bitwise what fit(g, rngs[k]) does (Θ, the api,
the info, the auditor's mean and log-density) whatever K and whatever its batch mates, the
shared first Newton step changes nothing, and a whole run stores the same trials at --batch 1
and auto."""
import math

import pytest
import torch

from targets.base import build
from targets.gcon import Problem, sample_noise, solve_newton

SEEDS = [31, 32, 33, 34, 35, 36, 37]


@pytest.fixture(scope="module")
def graph(make_csbm):
    return make_csbm(n=200)


@pytest.fixture(scope="module")
def worlds(graph):
    """Two neighbouring graphs: `graph` and `graph` with one more undirected edge."""
    g1 = graph.clone()
    extra = torch.tensor([[0, 150], [150, 0]])
    g1.edge_index = torch.cat([graph.edge_index, extra], 1)
    return graph, g1


def _gens(seeds):
    return [torch.Generator().manual_seed(s) for s in seeds]


def _same(a, b, worlds):
    assert torch.equal(a.weights["theta"], b.weights["theta"])
    for key in ("accuracy", "gradient_norm", "exact_minimizer", "encoder_val_accuracy", "solver", "n1"):
        assert a.info[key] == b.info[key], key
    g0, g1 = worlds
    assert torch.equal(a.api(g0, None), b.api(g0, None))
    assert torch.equal(a.api(g1, [3, 7]), b.api(g1, [3, 7]))
    sa, sb = a.mechanism[0], b.mechanism[0]
    assert torch.equal(sa.output, sb.output)
    for g in (g1, g0):  # g1 first: the batch's densities are computed on the first graph asked
        assert sa.log_density(g) == sb.log_density(g)
        assert torch.equal(sa.mean(g), sb.mean(g))
    assert torch.equal(a.info["noise_free_problem"](g1).z, b.info["noise_free_problem"](g1).z)


CASES = [
    ({}, None),
    ({"loss": "huber", "encoder_hidden": 16, "steps": "1,inf"}, None),
    ({"pseudo_labels": False, "inference": "full"}, None),
    ({}, "no-noise"),
    ({}, "approximate-minimizer"),
    ({"optimizer": "adam", "adam_epochs": 15}, None),
]


@pytest.mark.parametrize("params,bug", CASES)
def test_fit_batch_is_fit_bitwise(graph, worlds, params, bug):
    t = build("gcon", epsilon=1.0, bug=bug, **params)
    alone = [t.fit(graph, g) for g in _gens(SEEDS)]
    for k in (1, 3, 7):
        batch = t.fit_batch(graph, _gens(SEEDS[:k]))
        assert len(batch) == k
        for a, b in zip(alone, batch):
            _same(a, b, worlds)
    assert not torch.equal(alone[0].weights["theta"], alone[1].weights["theta"]) or bug == "no-noise"


@pytest.mark.parametrize("params", [{"optimizer": "lbfgs"}, {"encoder_seed": None, "encoder_epochs": 10}])
def test_lbfgs_and_per_run_encoders(graph, worlds, params):
    t = build("gcon", epsilon=1.0, **params)
    alone = [t.fit(graph, g) for g in _gens(SEEDS[:3])]
    for a, b in zip(alone, t.fit_batch(graph, _gens(SEEDS[:3]))):
        _same(a, b, worlds)


def test_a_run_does_not_depend_on_its_stack_mates(graph, worlds):
    t = build("gcon", epsilon=1.0)
    a = t.fit_batch(graph, _gens([5, 6, 7]))[0]
    b = t.fit_batch(graph, _gens([5, 100, 200, 300, 400]))[0]
    _same(a, b, worlds)


@pytest.mark.parametrize("loss", ["msm", "huber"])
def test_shared_first_hessians_change_nothing(loss):
    """The batch's Newton solves start from the Hessians at Θ = 0 computed once: the same floats
    as each solve's own, whatever the noise (runs that take different numbers of iterations)."""
    gen = torch.Generator().manual_seed(0)
    n, d, c = 150, 24, 3
    z = torch.nn.functional.normalize(torch.randn(n, d, generator=gen, dtype=torch.float64), dim=1)
    y = torch.nn.functional.one_hot(torch.randint(0, c, (n,), generator=gen), c).double()
    first = Problem(z, y, torch.zeros(d, c, dtype=torch.float64), 1e-3, loss, 0.2).hessians(
        torch.zeros(d, c, dtype=torch.float64))
    for beta in (1e-3, 0.05, 1.0, 30.0, math.inf):
        p = Problem(z, y, sample_noise(d, c, beta, gen), 1e-3, loss, 0.2)
        theta = solve_newton(p, 1e-10, first_hessians=first)
        assert torch.equal(theta, solve_newton(p, 1e-10))
        assert float(p.columns(theta)[1].norm(dim=0).max()) <= 1e-10


def test_whole_run_same_trials_batched_or_not(tmp_path):
    """A run (mechanism-lrt; a random edge, which spares the test the canary probe) at --batch 1,
    auto and 5, each replayed (fresh) in one folder."""
    from audit.play.game import AuditSpec, run_audit
    from audit.records.store import Store

    runs = {}
    for name, batch in (("one", 1), ("auto", 0), ("odd", 5)):
        spec = AuditSpec(target="gcon", canary="random-edge", trials=24, seed=2, batch=batch)
        result = run_audit(spec, out=tmp_path, progress=False, fresh=True)
        with Store(result["store"]) as s:
            runs[name] = (s.trials(result["key"]), result["eps_lb"])
    assert runs["one"] == runs["auto"] == runs["odd"]
    assert len(runs["one"][0]) == 24 and len({score for _, _, score in runs["one"][0]}) == 24
