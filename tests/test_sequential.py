"""`run --sequential` and `regress`'s sequential default (audit.play.sequential_run on audit.stats.group_sequential)."""
import json

import pytest

from audit.plan import catalogue
from audit.play import game
from audit.console.cli import build_parser, main
from audit.play.game import AuditSpec, run_audit
from audit.records.result import Result
from audit.play.sequential_run import first_look


def _run(tmp_path, sequential=True, **kw):
    spec = AuditSpec(**{"target": "gaussian", "epsilon": 2, "trials": 2000, **kw})
    return run_audit(spec, out=tmp_path, progress=False, sequential=sequential)


@pytest.mark.parametrize("bug,epsilon", [("half-noise", 2), ("no-noise", 1)])
def test_a_gross_bug_stops_early_with_its_violation(tmp_path, bug, epsilon):
    r = _run(tmp_path, bug=bug, epsilon=epsilon)
    seq = r.sequential
    assert r.verdict == "VIOLATION" and seq["on"] and seq["stop"] == "violation"
    assert r.trials == seq["trials_used"] < 2000 and r.trials_played == r.trials
    j = seq["stopped_at_look"]
    assert j < len(seq["looks_per_world"]) - 1 and seq["looks_evaluated"] == j + 1
    # the reported bound is the stopping look's own, at its own level, and it exceeds the claim
    assert r.estimate["confidence"] == pytest.approx(1 - seq["look_betas"][j])
    assert r.eps_lb == seq["history"][-1]["eps_lb"] > r.claimed_epsilon
    assert sum(seq["look_betas"]) == pytest.approx(0.05) and seq["beta_spent"] <= 0.05 + 1e-12
    assert r.confidence == 0.95 and r.run_id.endswith(f"-seq{r.trials}")


def test_the_correct_reference_stays_consistent_within_the_budget(tmp_path):
    r = _run(tmp_path)
    seq = r.sequential
    assert r.verdict == "CONSISTENT" and seq["stop"] == "consistent" and r.trials <= 2000
    assert r.eps_lb <= r.claimed_epsilon
    assert all(h["decision"] in ("continue", "consistent") for h in seq["history"])


def test_auto_shape_pilot_is_played_first_and_read_by_no_look(tmp_path):
    r = _run(tmp_path, bug="half-noise")  # declared model fails its check: auto tests the shape
    seq = r.sequential
    assert seq["pilot_per_world"] == 300 and "pilot of 300 trials per world" in r.estimator_choice
    assert seq["looks_per_world"][-1] == 700  # the looks' budget is what the pilot leaves
    n = seq["history"][-1]["n_per_world"]
    assert r.trials == 2 * (300 + n) and r.estimate["counts"]["n_out"] == n  # gdp at the pilot's threshold


def test_schedule_first_look():
    assert first_look(1000) == 63 and first_look(100) == 25


def test_resume_and_reuse_of_fixed_trials(tmp_path):
    a = _run(tmp_path / "a", bug="half-noise")
    again = _run(tmp_path / "a", bug="half-noise")
    assert again.trials_played == 0 and again.reused_trials == a.trials and again.eps_lb == a.eps_lb
    # a fixed run's stored trials are the same trials: a sequential run over them gives the fresh one's result
    fixed = _run(tmp_path / "b", sequential=False, bug="half-noise")
    assert fixed.sequential == {"on": False} and fixed.trials == 2000 and fixed.run_id != a.run_id
    b = _run(tmp_path / "b", bug="half-noise")
    assert b.trials_played == 0 and (b.eps_lb, b.trials, b.verdict) == (a.eps_lb, a.trials, a.verdict)


def test_same_seed_same_result_for_any_batch_and_play_order(tmp_path, monkeypatch):
    a = _run(tmp_path / "a", bug="half-noise", trials=800)
    # workers (--jobs) finish chunks in any order: play them backwards, in other chunk and batch sizes
    chunks = game.chunk_indices
    monkeypatch.setattr(game, "chunk_indices", lambda idx, jobs, max_chunk=100: chunks(idx, 3, max_chunk=7)[::-1])
    b = _run(tmp_path / "b", bug="half-noise", trials=800, batch=3)
    assert (a.eps_lb, a.trials, a.sequential["history"]) == (b.eps_lb, b.trials, b.sequential["history"])


def test_result_round_trip_and_an_estimator_without_a_sequential_form(tmp_path):
    r = _run(tmp_path, bug="no-noise", epsilon=1)
    d = r.to_dict()
    assert d["sequential"]["on"] and Result.from_dict(json.loads(json.dumps(d))) == r
    one = _run(tmp_path, estimator="one-run", trials=200)
    assert one.sequential["on"] is False and "no sequential form" in one.sequential["why_not"]
    assert one.trials == 200


def test_cli_flags(tmp_path, capsys):
    p = build_parser()
    assert p.parse_args(["run", "--target", "gaussian", "--sequential"]).sequential
    assert not p.parse_args(["run", "--target", "gaussian"]).sequential
    assert not p.parse_args(["regress"]).no_sequential and p.parse_args(["regress", "--no-sequential"]).no_sequential
    assert main(["run", "--target", "gaussian", "--bug", "no-noise", "--trials", "400", "--sequential", "--json",
                 "--no-progress", "--out", str(tmp_path)]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["sequential"]["on"] and rec["trials"] < 400


@pytest.mark.parametrize("flag,on", [([], True), (["--no-sequential"], False)])
def test_regress_is_sequential_by_default(monkeypatch, capsys, flag, on):
    monkeypatch.setattr(catalogue, "CATALOGUE", [catalogue.Entry("gaussian", "VIOLATION", bug="no-noise", trials=400),
                                                 catalogue.Entry("gaussian", "CONSISTENT", trials=200, mode="one-run")])
    assert main(["regress", "--quick", "--json"] + flag) == 0
    out = capsys.readouterr().out
    rows = json.loads(out[out.index("\n{") + 1:])["rows"]  # the JSON document starts a line
    assert rows[0]["sequential"] is on and (rows[0]["trials"] < 400) is on
    assert rows[1]["sequential"] is False and rows[1]["trials"] == 200  # one-run: the fixed budget
