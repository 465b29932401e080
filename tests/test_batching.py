"""Batched trials (issue "Throughput: batched trials"): same trials, same scores, same estimate."""
import dataclasses

import numpy as np
import pytest
import torch

from audit.play import data
from audit.play import game
from audit.play import trial_runner as runner
from canaries import base as canaries
from audit.play.game import AuditSpec, run_audit
from audit.records.store import Store
from targets import base as targets
from targets.gaussian import GaussianMechanism

CARIBOU_FAST = {"encoder_epochs": "5", "hidden": "16", "hops": "4", "cm_epochs": "3"}


def _trials(result):
    with Store(result["store"]) as s:
        return s.trials(result["key"])


def _run(tmp_path, name, pipeline=None, **kw):
    spec = AuditSpec(**{"target": "gaussian", "epsilon": 2.0, "trials": 40, "seed": 3, **kw})
    return run_audit(spec, out=tmp_path / name, progress=False, pipeline=pipeline)


def _same_release(a: targets.Release, b: targets.Release) -> None:
    sa, sb = a.view("mechanism"), b.view("mechanism")
    assert len(sa) == len(sb)
    for x, y in zip(sa, sb):
        assert torch.equal(x.output, y.output)
        assert x.noise_std == y.noise_std and x.mean_key == y.mean_key


@pytest.mark.parametrize("target,params", [("gaussian", {}), ("caribou", CARIBOU_FAST)])
def test_batched_run_is_the_unbatched_run(tmp_path, target, params):
    one = _run(tmp_path, "one", target=target, params=params, batch=1)
    auto = _run(tmp_path, "auto", target=target, params=params, batch=0)
    odd = _run(tmp_path, "odd", target=target, params=params, batch=3)  # uneven sub-batches
    assert one["batch"] == 1 and auto["batch"] == runner.AUTO_BATCH and odd["batch"] == 3
    rows = _trials(one)
    assert len(rows) == 40 and len({s for _, _, s in rows}) == 40  # real, distinct scores
    assert _trials(auto) == rows  # bitwise: same bits, same float scores
    assert _trials(odd) == rows
    assert auto["estimate"] == one["estimate"] and auto["eps_lb"] == one["eps_lb"]
    assert auto["key"] == one["key"] == odd["key"]  # the batch size is not part of the key


def test_pipelined_chunk_equals_sequential_chunk():
    graph = data.load("csbm", seed=0)
    spec = AuditSpec(target="caribou", params=CARIBOU_FAST, trials=24, seed=1)
    _, target, _ = game.setup_run(spec)
    pair = canaries.make("random-edge").worlds(graph, np.random.default_rng(0), target)
    setup = runner.TrialSetup("caribou", target.config, pair, graph, "mechanism-lrt", 1, batch=5)
    indices = list(range(3, 27))
    sequential = runner.play_chunk(_with(setup, pipeline=False), indices)
    pipelined = runner.play_chunk(_with(setup, pipeline=True), indices)
    looped = runner.play_chunk(_with(setup, batch=1, pipeline=False), indices)
    assert [i for i, _, _ in sequential] == indices  # rows come back in index order
    assert pipelined == sequential == looped


def _with(setup, **changes):
    return dataclasses.replace(setup, **changes)


def test_pipelined_run_equals_sequential_run(tmp_path):
    a = _run(tmp_path, "a", pipeline=False, batch=4)
    b = _run(tmp_path, "b", pipeline=True, batch=4)
    assert _trials(a) == _trials(b)


@pytest.mark.parametrize("target,params", [("gaussian", {}), ("caribou", CARIBOU_FAST),
                                           ("caribou", {**CARIBOU_FAST, "bug": "release-all-hops"}),
                                           ("caribou", {**CARIBOU_FAST, "bug": "no-noise"})])
def test_fit_batch_matches_fit(target, params):
    graph = data.load("csbm", seed=0)
    params = dict(params)
    bug = params.pop("bug", None)
    t = targets.build(target, bug=bug, **params)
    t.prepare(graph)
    seeds = [11, 12, 13]
    batch = t.fit_batch(graph, [torch.Generator().manual_seed(s) for s in seeds])
    single = [t.fit(graph, torch.Generator().manual_seed(s)) for s in seeds]
    assert len(batch) == 3
    for a, b in zip(batch, single):
        _same_release(a, b)
    _same_release(t.fit_batch(graph, [torch.Generator().manual_seed(7)])[0],
                  t.fit(graph, torch.Generator().manual_seed(7)))
    # each generator is consumed exactly as fit consumes it
    ga, gb = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    t.fit_batch(graph, [torch.Generator().manual_seed(4), ga])
    t.fit(graph, gb)
    assert torch.equal(ga.get_state(), gb.get_state())
    differ = not torch.equal(batch[0].view("mechanism")[-1].output, batch[1].view("mechanism")[-1].output)
    assert differ == (bug != "no-noise")  # independent trials (identical only without noise)


def test_caribou_lazy_views_work_per_release():
    graph = data.load("csbm", seed=0)
    t = targets.build("caribou", **CARIBOU_FAST)
    t.prepare(graph)
    a, b = t.fit_batch(graph, [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)])
    solo = t.fit(graph, torch.Generator().manual_seed(2))
    pb, ps = b.view("api")(graph), solo.view("api")(graph)
    assert pb.shape == (graph.num_nodes, int(graph.y.max()) + 1)
    assert torch.equal(pb, ps)  # the classifier trained lazily from the split-off generator
    assert not torch.equal(a.view("api")(graph), pb)
    assert all(torch.equal(b.view("weights")[k], solo.view("weights")[k]) for k in solo.view("weights"))


def test_mechanism_score_batch_equals_score():
    from attacks.mechanism import MechanismLRT

    graph = data.load("csbm", seed=0)
    t = targets.build("caribou", **CARIBOU_FAST)
    pair = canaries.make("random-edge").worlds(graph, np.random.default_rng(2), t)
    releases = t.fit_batch(pair.g1, [torch.Generator().manual_seed(s) for s in range(5)])
    batched = MechanismLRT().score_batch(releases, pair, graph)
    assert batched == [MechanismLRT().score(r, pair, graph) for r in releases]
    assert len(set(batched)) == 5


def test_batch_is_not_in_the_key_and_is_validated():
    assert AuditSpec(batch=0).key() == AuditSpec(batch=64).key() == AuditSpec(batch=1).key()
    assert AuditSpec(seed=1).key() != AuditSpec(seed=2).key()
    with pytest.raises(ValueError, match="batch"):
        AuditSpec(batch=-1)


def test_auto_batch_size_follows_the_target():
    assert runner.batch_size(0, targets.build("gaussian")) == runner.AUTO_BATCH
    assert runner.batch_size(0, targets.build("gap"), "api") == runner.AUTO_BATCH_TRAINING
    assert runner.batch_size(0, targets.build("gap")) == 32  # its own: the whole batch's hop products side by side
    assert runner.batch_size(0, targets.build("gcn"), "api") == runner.AUTO_BATCH_TRAINING  # stacked since stop 28
    assert runner.batch_size(0, targets.build("gcon")) == 64  # its own auto_batch: per-graph work shared by a batch
    assert runner.batch_size(0, targets.build("dpdgc")) == 48 and runner.batch_size(3, targets.build("dpdgc")) == 3
    assert runner.batch_size(0, targets.build("dpdgc"), "api") == runner.AUTO_BATCH_TRAINING
    assert runner.batch_size(5, targets.build("gcon")) == 5


def test_a_small_last_sub_batch_joins_the_one_before():
    bits = {i: i % 2 for i in range(24)}  # 12 trials per world
    sizes = lambda batch: [len(b) for _, b in runner.world_batches(runner.TrialSetup("t", None, None, None, "a", 0, batch=batch), bits)]
    assert sizes(5) == [5, 7, 5, 7]  # 5, 5, 2: the 2 (< 5 / 2) joins
    assert sizes(4) == [4, 4, 4] * 2 and sizes(16) == [12, 12] and sizes(1) == [1] * 24
    assert sizes(7) == [7, 5] * 2 and sizes(8) == [8, 4] * 2  # 4 >= 8 / 2 stays
    played = [i for _, b in runner.world_batches(runner.TrialSetup("t", None, None, None, "a", 0, batch=5), bits) for i in b]
    assert sorted(played) == list(range(24))


class _Counting(GaussianMechanism):
    """A target with only ``fit`` of its own (the base class's fit_batch loops over it)."""

    name = "counting-gaussian"
    batched = False
    calls = 0

    def fit(self, graph, rng):
        type(self).calls += 1
        return GaussianMechanism.fit_batch(self, graph, [rng])[0]

    def fit_batch(self, graph, rngs):
        return targets.Target.fit_batch(self, graph, rngs)


def test_target_without_fit_batch_runs_batched(tmp_path):
    name = f"{__name__}:_Counting"
    a = _run(tmp_path, "a", target=name, batch=1)
    _Counting.calls = 0
    b = _run(tmp_path, "b", target=name, batch=8)
    assert _Counting.calls >= 40  # the default fit_batch went through fit, trial by trial
    assert b["batch"] == 8 and b["cached_per_worker"] is not None
    assert _trials(a) == _trials(b)
    ref = _run(tmp_path, "ref", target="gaussian", batch=1)
    assert [s for _, _, s in _trials(a)] == [s for _, _, s in _trials(ref)]


def test_result_records_batch_and_cached_work(tmp_path):
    r = _run(tmp_path, "r", target="caribou", params=CARIBOU_FAST)
    assert r["batch"] == runner.AUTO_BATCH
    assert "encoder" in r["cached_per_worker"]
    node = targets.build("caribou", unit="node")
    assert node.cached_work() is None and targets.build("gcn").cached_work() is None


def test_cli_run_takes_batch(tmp_path, capsys):
    from audit.console.cli import main

    args = ["run", "--target", "gaussian", "--trials", "16", "--no-progress", "--json", "--out", str(tmp_path),
            "--batch", "5", "--device", "cpu"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert '"batch": 5' in out
    assert main(args[:-4] + ["--batch", "-2"]) == 2
    assert "--batch must be >= 0" in capsys.readouterr().err
