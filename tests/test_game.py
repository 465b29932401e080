import json

import numpy as np
import pytest

from attacks import base as attacks
from audit.play import game, trial_runner
from audit.play.game import AuditSpec, run_audit
from audit.records.result import Result
from audit.records.store import Store


def _spec(**kw):
    base = dict(target="gaussian", epsilon=2.0, trials=200, seed=5)
    base.update(kw)
    return AuditSpec(**base)


def _scores(result):
    with Store(result["store"]) as s:
        return s.trials(result["key"])


def test_bits_are_balanced_and_seeded():
    bits = [trial_runner.secret_bit(0, i) for i in range(1000)]
    assert sum(bits) == 500
    assert all(bits[2 * j] != bits[2 * j + 1] for j in range(500))
    assert bits != [trial_runner.secret_bit(1, i) for i in range(1000)]
    assert trial_runner.trial_seed(0, 1) != trial_runner.trial_seed(0, 2) != trial_runner.trial_seed(1, 1)


def test_the_whole_run_uses_one_thread_and_restores_the_callers(tmp_path, monkeypatch):
    import torch

    seen = []
    real_setup, real_resume = game.setup_run, game._resume

    def setup_spy(spec):  # before the probe, the canary and the trials
        seen.append(torch.get_num_threads())
        return real_setup(spec)

    def resume_spy(*args, **kw):
        seen.append(torch.get_num_threads())
        return real_resume(*args, **kw)

    monkeypatch.setattr(game, "setup_run", setup_spy)
    monkeypatch.setattr(game, "_resume", resume_spy)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_audit(_spec(trials=20), out=tmp_path, progress=False)
        assert len(seen) == 2 and set(seen) == {1}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_same_seed_same_result_and_different_seed_differs(tmp_path):
    a = run_audit(_spec(), out=tmp_path / "a", progress=False)
    b = run_audit(_spec(), out=tmp_path / "b", progress=False)
    c = run_audit(_spec(seed=6), out=tmp_path / "c", progress=False)
    assert _scores(a) == _scores(b)
    assert a["eps_lb"] == b["eps_lb"] and a["canary"] == b["canary"]
    assert _scores(a) != _scores(c)


def test_parallel_jobs_give_identical_trials(tmp_path):
    a = run_audit(_spec(), out=tmp_path / "a", progress=False)
    b = run_audit(_spec(), out=tmp_path / "b", progress=False, jobs=2)
    assert _scores(a) == _scores(b)


def test_resume_after_a_killed_run_loses_nothing(tmp_path):
    full = run_audit(_spec(), out=tmp_path / "full", progress=False)
    calls = []

    def die(n):
        calls.append(n)
        if len(calls) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_audit(_spec(), out=tmp_path / "cut", progress=False, on_chunk=die)
    with Store(tmp_path / "cut" / "audit.sqlite") as s:
        kept = s.trials(full.key)  # the store keys trials by options and code (store.run_key)
    assert 0 < len(kept) < 200  # the finished chunks were written
    resumed = run_audit(_spec(), out=tmp_path / "cut", progress=False)
    assert _scores(resumed) == _scores(full)
    assert resumed["eps_lb"] == full["eps_lb"]


def test_dask_backend_matches_local(tmp_path):
    pytest.importorskip("dask.distributed")
    from dask.distributed import LocalCluster

    local = run_audit(_spec(trials=64), out=tmp_path / "a", progress=False)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
        remote = run_audit(_spec(trials=64), out=tmp_path / "b", progress=False, backend="dask",
                           scheduler=cluster.scheduler_address)
    assert _scores(local) == _scores(remote)


def test_result_record_has_the_design_fields(tmp_path):
    r = run_audit(_spec(), out=tmp_path, progress=False)
    for key in ("target", "config", "dataset", "canary", "attack", "level", "trials", "seed", "claimed_epsilon",
                "claimed_delta", "accountant", "eps_lb", "ci", "method", "auc", "tpr_at_fpr",
                "max_certifiable_eps", "tightness", "verdict", "wall_time_s", "versions"):
        assert key in r.to_dict(), key
    on_disk = json.loads((tmp_path / f"{r.run_id}.json").read_text())
    assert on_disk == r.to_dict() and Result.from_dict(on_disk) == r  # the JSON round trip is exact
    assert r.method == "gdp"  # a GDP claim gets the GDP estimator by default


def test_no_noise_is_a_violation_and_correct_config_is_not(tmp_path):
    ok = run_audit(_spec(trials=400), out=tmp_path, progress=False)
    bad = run_audit(_spec(trials=400, bug="no-noise"), out=tmp_path, progress=False)
    assert ok["verdict"] == "CONSISTENT" and ok["eps_lb"] <= 2.0
    assert bad["verdict"] == "VIOLATION"


@pytest.mark.parametrize("kw, match", [
    (dict(epsilon=0), "epsilon"), (dict(delta=1.0), "delta"), (dict(trials=7), "trials"),
    (dict(estimator="x"), "estimator"), (dict(mode="x"), "mode")])
def test_bad_specs_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        _spec(**kw)


def test_worst_case_canary_is_at_least_as_sensitive_as_a_random_one():
    from audit.play.data import load
    from canaries.edge import RandomEdge, WorstCaseEdge
    from targets.base import build

    g, t = load("csbm"), build("caribou", encoder_epochs=5)
    rng = np.random.default_rng(0)
    worst = WorstCaseEdge().worlds(g, rng, t)
    rand = RandomEdge().worlds(g, np.random.default_rng(1), t)
    change = lambda p: float((t.noiseless(p.g1) - t.noiseless(p.g0)).norm())
    assert change(worst) >= change(rand)
    assert worst.info["noiseless_change"] == pytest.approx(change(worst), rel=1e-5)


def test_gdp_uses_the_attacks_a_priori_threshold_and_every_trial(tmp_path):
    r = run_audit(_spec(trials=400), out=tmp_path, progress=False)
    assert r["estimate"]["threshold"] == 0.0
    assert r["estimate"]["counts"]["n_out"] + r["estimate"]["counts"]["n_in"] == 400
    cp = run_audit(_spec(trials=400, estimator="cp"), out=tmp_path, progress=False)
    # cp counts every trial too: its thresholds are a fixed grid paid for by Bonferroni, none held out
    assert cp["estimate"]["counts"]["n_out"] + cp["estimate"]["counts"]["n_in"] == 400


def test_one_run_mode(tmp_path):
    ok = run_audit(_spec(trials=200, mode="one-run"), out=tmp_path, progress=False)
    bad = run_audit(_spec(trials=200, mode="one-run", bug="no-noise"), out=tmp_path, progress=False)
    assert ok["method"] == "one-run" and ok["verdict"] == "CONSISTENT"
    assert bad["verdict"] == "VIOLATION" and bad["eps_lb"] <= bad["max_certifiable_eps"]
    assert ok["canary"]["count"] == 200 and 60 < ok["canary"]["inserted"] < 140
    again = run_audit(_spec(trials=200, mode="one-run"), out=tmp_path / "b", progress=False)
    assert again["eps_lb"] == ok["eps_lb"]


def test_disjoint_canaries_share_no_endpoint():
    from audit.play.data import load
    from canaries.edge import disjoint_non_edges
    g = load("csbm")
    edges = disjoint_non_edges(g, 250, np.random.default_rng(0))
    ends = [x for e in edges for x in e]
    assert len(set(ends)) == 500
    with pytest.raises(ValueError, match="at most 300"):
        disjoint_non_edges(g, 301, np.random.default_rng(0))


@pytest.mark.parametrize("target, params, expected", [
    ("dpdgc", {"unit": "node", "k": 25}, "lira-online"),  # fixed-size batches: no gradient canary
    ("dpdgc", {"unit": "node", "k": 25, "batch_size": 1000}, "gradient-lrt"),  # full batch, q = 1
    ("gap", {"unit": "node"}, "lira-online"),  # two traced modules: no single canary space
    ("gap", {"unit": "node", "trace_module": "encoder"}, "gradient-lrt"),
    ("heterpoisson", {}, "gradient-lrt"),
    ("dpdgc", {}, "mechanism-lrt"),
])
def test_auto_attack_picks_a_trace_attack_only_where_a_gradient_canary_fits(target, params, expected):
    from audit.play.data import load
    from targets.base import build

    assert attacks.auto_attack(build(target, **params), load("csbm")) == expected


def test_a_runs_chunks_share_one_target_and_attack_and_the_trials_do_not_change(tmp_path, monkeypatch):
    from targets.gaussian import GaussianMechanism

    built = []
    init = GaussianMechanism.__init__

    def counting_init(self, *a, **k):
        built.append(1)
        init(self, *a, **k)

    monkeypatch.setattr(GaussianMechanism, "__init__", counting_init)
    spec = _spec(trials=400, batch=8)  # several chunks of at most 100 trials
    reused = run_audit(spec, out=tmp_path / "reused", progress=False).to_dict()
    n_reused = len(built)
    assert not trial_runner.held_workers()  # released when the run ends

    class Forgetful(dict):
        def __setitem__(self, key, value):
            pass

    monkeypatch.setattr(trial_runner, "_WORKER", Forgetful())
    built.clear()
    fresh = run_audit(spec, out=tmp_path / "fresh", progress=False).to_dict()
    assert len(built) >= n_reused + 3  # one more target for each chunk after the first
    assert _scores(reused) == _scores(fresh)
