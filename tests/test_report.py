"""Reports: the committed campaign README regenerates byte for byte, clean errors on files that are
not run results, rows told apart (canary, parameters), violations said once, power readings, and
the per-run ROC band."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from audit.records import campaign_report, run_report
from audit.stats import estimators
from audit.records.power import auc_interval, auc_interval_from, record_power
from audit.console.cli import main as cli_main

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "results" / "campaign-default"


def test_report_only_reproduces_the_committed_campaign_readmes(tmp_path):
    folder = tmp_path / "campaign-default"
    shutil.copytree(COMMITTED, folder, ignore=shutil.ignore_patterns("*.sqlite*"))
    (folder / "README.md").unlink()
    campaign_report.write_campaign_report(folder, results_readme=tmp_path / "results-README.md")
    assert (folder / "README.md").read_text() == (COMMITTED / "README.md").read_text()
    assert (tmp_path / "results-README.md").read_text() == (REPO / "results" / "README.md").read_text()
    # and the campaign command's --report-only writes the same file
    (folder / "README.md").unlink()
    assert cli_main(["campaign", "default", "--out", str(folder), "--report-only"]) == 0
    assert (folder / "README.md").read_text() == (COMMITTED / "README.md").read_text()


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_report_on_a_campaign_file_or_a_non_json_file_is_a_clean_error(tmp_path, capsys):
    path = COMMITTED / "campaign.json"
    assert cli_main(["report", str(path)]) == 2
    err = _one_line_error(capsys)
    assert f"{path} is a campaign file" in err and "--report-only" in err
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert cli_main(["report", str(text)]) == 2
    assert f"{text} is not a result JSON: Expecting value" in _one_line_error(capsys)
    other = tmp_path / "list.json"
    other.write_text("[1, 2]")
    assert cli_main(["report", str(other)]) == 2
    assert f"{other} is not a result JSON" in _one_line_error(capsys)


def test_compare_skips_files_that_are_not_runs(capsys):
    files = sorted(str(p) for p in COMMITTED.glob("*.json"))
    assert cli_main(["compare", *files]) == 0
    out, err = capsys.readouterr()
    assert "skipped" in err and "campaign.json is a campaign file" in err and "utility.json" in err
    assert out.count("\n| ") == len(files) - 2 and "| power |" in out
    assert cli_main(["compare", str(COMMITTED / "campaign.json")]) == 2


def _row(**kw):
    r = {"target": "gap", "dataset": "csbm", "attack": "mechanism-lrt", "epsilon": 1.0, "bug": None,
         "params": {}, "canary": "worst-edge", "trials": 2000, "level": "mechanism", "unit": "edge",
         "claimed_epsilon": 1.0, "claimed_delta": 1e-5, "eps_lb": 1.2, "ci": [1.1, 1.5], "method": "gdp",
         "tightness": 1.2, "verdict": "VIOLATION", "auc": 0.7, "max_certifiable_eps": 40.0, "utility": None,
         "note": "paper defaults", "explain": "sensitivity 1 per directed entry", "wall_time_s": 3.0,
         "roc": {"fpr": [0.0, 0.5, 1.0], "tpr": [0.0, 0.8, 1.0]}}
    r.update(kw)
    return r


def test_rows_are_told_apart_and_a_violation_paragraph_is_said_once():
    rows = [_row(), _row(epsilon=2.0, claimed_epsilon=2.0, eps_lb=2.5),
            _row(canary="worst-directed-edge", verdict="CONSISTENT", eps_lb=0.5),
            _row(params={"edge_unit": "undirected"}, verdict="CONSISTENT", eps_lb=0.6)]
    text = campaign_report.campaign_markdown({"name": "x", "rows": rows, "git": {"commit": "a" * 40}, "machine": {}}, {})
    table = [line for line in text.splitlines() if line.startswith("| gap")]
    assert len(set(table)) == 4
    assert any("worst-directed-edge" in line for line in table)
    assert any("`edge_unit=undirected`" in line for line in table)
    assert text.count("sensitivity 1 per directed entry") == 1 and "(2 rows)" in text
    notes = text[text.index("## Notes"):].splitlines()[2]
    assert "gap/mechanism-lrt/csbm/worst-directed-edge" in notes and "(edge_unit=undirected)" in notes
    assert "| commit |" not in text  # one commit: the header names it


def test_rows_from_different_commits_name_their_commit():
    rows = [_row(commit="a" * 40), _row(epsilon=2.0, claimed_epsilon=2.0, commit="b" * 40)]
    text = campaign_report.campaign_markdown({"name": "x", "rows": rows, "git": {"commit": "b" * 40}, "machine": {},
                                     "rows_run": 1}, {})
    assert "| commit |" in text and "`aaaaaaa` |" in text and "`bbbbbbb` |" in text
    assert "rows by commit" in text and "1 rows run in that session" in text


def test_power_of_campaign_rows():
    assert record_power(_row())["reading"] == "conclusive"
    low = _row(verdict="CONSISTENT", eps_lb=0.0, max_certifiable_eps=0.5, claimed_epsilon=1.0)
    assert record_power(low)["reading"] == "budget-limited"
    flat = _row(verdict="CONSISTENT", eps_lb=0.0, auc=0.501)
    assert record_power(flat)["reading"] == "no signal"
    stored = _row(power={"reading": "no signal", "sentence": "s", "auc_interval": [0.4, 0.6]})
    assert record_power(stored)["reading"] == "no signal"
    # the interval from the AUC and counts is power.auc_interval's
    rng = np.random.default_rng(0)
    out, inn = rng.normal(size=500), rng.normal(0.3, size=500)
    a, lo, hi = auc_interval(out, inn)
    assert auc_interval_from(a, 500, 500) == pytest.approx((lo, hi))


def test_roc_band_surrounds_the_empirical_roc():
    rng = np.random.default_rng(1)
    out, inn = rng.normal(size=400), rng.normal(1.0, size=400)
    x, y = run_report.roc_band(out, inn, 0.95)
    assert x.size == y.size and np.all((0 < x) & (x <= 1)) and np.all((0 <= y) & (y <= 1))
    from matplotlib.path import Path as Polygon

    fpr, tpr = estimators.roc(out, inn)
    inside = Polygon(np.column_stack([np.log10(x), y])).contains_points(
        np.column_stack([np.log10(np.clip(fpr, 1e-4, 1)), tpr]), radius=1e-9)
    mid = (fpr > 0.01) & (fpr < 0.99)
    assert inside[mid].mean() > 0.95


def test_per_run_report_has_power_and_a_roc_band(tmp_path, capsys):
    from audit.play.game import AuditSpec, run_audit

    result = run_audit(AuditSpec(target="gaussian", epsilon=1.0, dataset="csbm", attack="mechanism-lrt",
                                 trials=40), out=tmp_path, progress=False)
    path = tmp_path / f"{result.run_id}.json"
    assert path.exists()
    assert cli_main(["report", str(path), "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert "power" in out and any(r in out for r in ("conclusive", "budget-limited", "no signal"))
    assert (tmp_path / "rep" / f"{result.run_id}.png").stat().st_size > 1000
    # a result without its store still reads its power (from the AUC and trial count)
    gone = result.replace(store=str(tmp_path / "missing.sqlite"), power=None)
    assert "power" in run_report.table(gone)


def test_kept_rows_of_an_earlier_session_name_its_commit(tmp_path, monkeypatch):
    """A legacy campaign.json (rows without their own commit): when one row runs again, the kept
    rows take the old header's commit and date, and the README names both commits."""
    from audit.plan import campaign, campaign_rows
    import audit.play.game

    toml = tmp_path / "c.toml"
    toml.write_text('[campaign]\nname = "t"\ndatasets = ["csbm"]\nepsilons = [1, 4]\n'
                    '[[audit]]\ntarget = "gaussian"\nattacks = ["mechanism-lrt"]\ntrials = 16\n')
    out = tmp_path / "out"
    plan = campaign.load(toml)
    monkeypatch.setattr(audit.play.game, "run_audit", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    rows = []
    for row in plan.rows:
        rec = _row(target="gaussian", epsilon=row.spec.epsilon, claimed_epsilon=row.spec.epsilon, trials=16,
                   key=row.spec.key(), params={}, verdict="CONSISTENT", explain="", note="", block=0)
        # today's code key (a row recording none is stale and would run again)
        rec["code"] = {"key": campaign_rows.current_code_key(rec["target"], rec["attack"], rec["canary"])}
        rows.append(rec)
    out.mkdir()
    legacy = {"name": "t", "git": {"commit": "c" * 40, "dirty": False}, "date": "2026-01-01T00:00:00+00:00",
              "machine": {}, "wall_time_s": 99.0, "jobs": 2, "rows_planned": 2, "rows": rows}
    (out / "campaign.json").write_text(json.dumps(legacy, indent=1))
    before = (out / "campaign.json").read_text()
    campaign.run(plan, out, progress=False)
    assert (out / "campaign.json").read_text() == before  # nothing ran: not a byte changes
    readme = (out / "README.md").read_text()
    assert "wall time 99 s" in readme and "2026-01-01" in readme and "c" * 40 in readme

    def fake(spec, **k):
        raise RuntimeError("pretend failure")  # the row really runs (and fails): an ERROR row

    monkeypatch.setattr(audit.play.game, "run_audit", fake)
    real_git = campaign._git
    monkeypatch.setattr(campaign, "_git", lambda: {**real_git(), "dirty": False})  # whatever the checkout's state
    doc = json.loads(before)
    doc["rows"][1]["code"] = {"key": "0" * 16}
    (out / "campaign.json").write_text(json.dumps(doc, indent=1))
    campaign.run(plan, out, progress=False)
    after = json.loads((out / "campaign.json").read_text())
    assert after["rows"][0]["commit"] == "c" * 40 and after["rows"][0]["date"] == "2026-01-01T00:00:00+00:00"
    assert after["rows"][1]["verdict"] == "ERROR" and after["rows"][1]["commit"] != "c" * 40
    assert after["rows_run"] == 1 and after["date"] != legacy["date"]
    assert "| commit |" in (out / "README.md").read_text()


def test_report_without_the_store_prints_the_table_and_creates_nothing(tmp_path, capsys):
    doc = json.loads(next(COMMITTED.glob("gap-*.json")).read_text())
    doc["store"] = str(tmp_path / "gone" / "audit.sqlite")
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    assert cli_main(["report", str(path), "--out", str(tmp_path / "rep")]) == 0
    out, err = capsys.readouterr()
    assert "no plot" in err and "power" in out and "verdict" in out
    assert not (tmp_path / "gone").exists() and not list((tmp_path / "rep").glob("*.png"))
