"""audit.records.result.Result: the JSON record of a run, read back and written out unchanged."""
import json

from audit.records.result import Result, verdict

BASE = {
    "target": "gaussian", "config": {"epsilon": 2.0, "bug": None}, "dataset": "csbm",
    "canary": {"canary": "worst-edge", "edge": [1, 2]}, "attack": "mechanism-lrt", "level": "mechanism",
    "trials": 40, "seed": 0, "key": "k", "claimed_epsilon": 2.0, "claimed_delta": 1e-5, "accountant": "gdp",
    "claim": {"gdp_mu": 0.5}, "eps_lb": 0.1, "ci": [0.0, 1.0], "mu_lb": 0.0, "method": "gdp",
    "assumption": None, "confidence": 0.95, "estimate": {"eps_lb": 0.1}, "auc": 0.6,
    "tpr_at_fpr": {"0.1": 0.2}, "max_certifiable_eps": "inf", "tightness": 0.05,
    "attack_queries_per_trial": None, "verdict": "CONSISTENT", "wall_time_s": 1.0, "store": "x.sqlite",
    "versions": {"python": "3"}, "run_id": "r",
}


def test_multi_run_record_round_trips():
    d = {**BASE, "batch": 16, "cached_per_worker": None, "trials_played": 40, "trials_wall_s": 0.5}
    r = Result.from_dict(json.loads(json.dumps(d)))
    assert r.to_dict() == d and r.mode == "multi" and r.batch == 16
    assert r["auc"] == r.auc == 0.6 and r.get("nope", 3) == 3


def test_one_run_record_has_mode_and_no_worker_fields():
    d = {**BASE, "mode": "one-run"}
    r = Result.from_dict(d)
    assert r.to_dict() == d and r.mode == "one-run"


def test_unknown_keys_are_kept_and_missing_ones_read_as_none():
    r = Result.from_dict({**BASE, "batch": 1, "cached_per_worker": None, "trials_played": 0,
                          "trials_wall_s": 0.0, "added_later": [1]})
    assert r.to_dict()["added_later"] == [1]
    old = {k: v for k, v in BASE.items() if k not in ("mu_lb", "run_id")}
    assert Result.from_dict(old).mu_lb is None


def test_verdict():
    assert verdict(2.1, 2.0) == "VIOLATION" and verdict(2.0, 2.0) == "CONSISTENT"


def test_result_files_of_a_file_path_target_are_named_readably():
    """Issue #46: `path/to/file.py:Class` once gave dotfiles (`.path.to.file.py.Class-….json`)."""
    from audit.records.result import readable_name

    assert readable_name("gap") == "gap"
    assert readable_name("/home/me/audits/my_target.py:MyTarget") == "my_target.MyTarget"
    assert readable_name("./t.py:K") == "t.K" and readable_name("pkg.mod:Cls") == "pkg.mod.Cls"
    assert not any(readable_name(t).startswith(".") for t in ("./a.py:B", "/x.py:Y", ".hidden/z.py:W"))
