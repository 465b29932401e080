"""--batch auto fits the free memory: the planned per-trial memory, the batch it allows, the line
``run`` prints, and the same trials whatever the plan chose."""
import pytest
import torch

from audit.play import memory_plan
from audit.play.game import AuditSpec, run_audit
from audit.records.store import Store
from targets.base import build


def _trials(result):
    with Store(result["store"]) as s:
        return s.trials(result["key"])


def test_batch_for_caps_the_automatic_batch_by_half_the_free_memory():
    mib = 2**20
    assert memory_plan.batch_for(10 * mib, 16, 1, 1000 * mib).batch == 16  # 16 × 10 MiB ≤ 500 MiB
    plan = memory_plan.batch_for(10 * mib, 16, 2, 100 * mib)  # 50 MiB for 2 jobs: 2 each
    assert plan.batch == 2 and plan.capped
    assert memory_plan.batch_for(10 * mib, 16, 1, mib).batch == 1  # never below one trial


def test_planned_memory_is_the_release_twice():
    from audit.play import data

    graph = data.load("csbm")
    target = build("gaussian")
    plan = memory_plan.plan(target, graph, 16, 1, free=1 << 40)
    n, f = graph.x.shape
    assert plan.per_trial == 2 * n * f * 4 and plan.batch == 16 and not plan.capped


def test_a_run_short_of_memory_plays_smaller_batches_and_the_same_trials(tmp_path, monkeypatch, capsys):
    spec = AuditSpec(target="gaussian", epsilon=2.0, trials=64, seed=3)
    roomy = run_audit(spec, out=tmp_path / "a", progress=True)
    assert roomy["batch"] == 16
    line = [l for l in capsys.readouterr().err.splitlines() if l.startswith("memory plan:")]
    assert len(line) == 1 and "MiB per trial" in line[0] and "batch 16" in line[0]
    per_trial = 2 * 600 * 32 * 4
    monkeypatch.setattr(memory_plan, "available_memory", lambda: 2 * 3 * per_trial)  # room for 3
    tight = run_audit(spec, out=tmp_path / "b", progress=False)
    assert tight["batch"] == 3
    assert _trials(tight) == _trials(roomy)
