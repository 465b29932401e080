import json
import subprocess
import sys

import pytest

from audit.console.cli import main


def _run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_accounting_json_gaussian(capsys):
    code, out, _ = _run(["accounting", "--target", "gaussian", "--epsilon", "2", "--delta", "1e-5", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["gdp_mu"] == pytest.approx(0.5016, abs=1e-3) and "noise_multiplier" in d["details"]


def test_caribou_accounting_acceptance(capsys):
    args = ["accounting", "--target", "caribou", "--epsilon", "1", "--delta", "1e-5", "--set", "hops=10",
            "contraction=0.8", "alpha1=0.9", "--json"]
    d = json.loads(_run(args, capsys)[1])
    assert d["details"]["M"] == pytest.approx(7.2547, abs=1e-4)
    assert d["details"]["noise_multiplier"] == pytest.approx(10.048, abs=0.01)
    d = json.loads(_run(args + ["--set", "accountant=rdp_paper"], capsys)[1])
    assert d["details"]["noise_multiplier"] == pytest.approx(13.199, abs=0.02)


@pytest.mark.parametrize("args, message", [
    (["run", "--target", "nope"], "unknown target 'nope'"),
    (["accounting", "--target", "caribou", "--set", "hops=0"], "'hops' parameter"),
    (["accounting", "--target", "caribou", "--set", "frobnicate=1"], "unknown parameter"),
    (["accounting", "--target", "gaussian", "--bug", "nope"], "unknown bug"),
    (["accounting", "--target", "gaussian", "--dataset", "cora", "--data-root", "/nonexistent"], "not found"),
    (["run", "--target", "gaussian", "--trials", "7"], "trials"),
])
def test_user_errors_exit_2_without_traceback(args, message, capsys):
    code, _, err = _run(args, capsys)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["run", "--target", "gaussian", "--epsilon", "0"],
                                  ["run", "--target", "gaussian", "--epsilon", "-1"],
                                  ["run", "--target", "gaussian", "--delta", "1.5"],
                                  ["estimate", "--scores-out", "a", "--scores-in", "b", "--delta", "1"]])
def test_argument_errors_exit_2(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2


def test_estimate_on_score_files(tmp_path, capsys):
    import numpy as np
    rng = np.random.default_rng(0)
    (tmp_path / "o").write_text("\n".join(map(str, rng.standard_normal(500))))
    (tmp_path / "i").write_text("\n".join(map(str, rng.standard_normal(500) + 3)))
    code, out, _ = _run(["estimate", "--scores-out", str(tmp_path / "o"), "--scores-in", str(tmp_path / "i"),
                         "--delta", "1e-5", "--json"], capsys)
    assert code == 0 and json.loads(out)["eps_lb"] > 0.5
    (tmp_path / "bad").write_text("1.0\nabc\n")
    code, _, err = _run(["estimate", "--scores-out", str(tmp_path / "bad"), "--scores-in", str(tmp_path / "i"),
                         "--delta", "1e-5"], capsys)
    assert code == 2 and "line 2" in err


def test_run_report_and_fail_on_violation(tmp_path, capsys):
    code, out, _ = _run(["run", "--target", "gaussian", "--trials", "200", "--bug", "no-noise", "--out",
                         str(tmp_path), "--no-progress", "--json", "--fail-on-violation"], capsys)
    result = json.loads(out)
    assert code == 1 and result["verdict"] == "VIOLATION"
    code, out, _ = _run(["report", str(tmp_path / f"{result['run_id']}.json")], capsys)
    assert code == 0 and (tmp_path / f"{result['run_id']}.png").stat().st_size > 10_000
    assert "VIOLATION" in (tmp_path / f"{result['run_id']}.md").read_text()


def test_list_names_targets_and_bugs(capsys):
    code, out, _ = _run(["list", "--json"], capsys)
    info = json.loads(out)
    assert {"gaussian", "caribou"} <= set(info["targets"])
    assert "release-all-hops" in info["targets"]["caribou"]["bugs"]


def test_module_entry_point_runs():
    proc = subprocess.run([sys.executable, "-m", "audit", "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "caribou" in proc.stdout


def test_auto_runs_both_gradient_attacks_on_a_trace_claim(tmp_path, capsys):
    code, out, _ = _run(["run", "--target", "dpsgd-gcn", "--epsilon", "4", "--trials", "40", "--out", str(tmp_path),
                         "--no-progress", "--json"], capsys)
    results = json.loads(out)
    assert code == 0 and [r["attack"] for r in results] == ["gradient-lrt", "gradient-projection"]
    assert all(r["level"] == "trace" for r in results)
