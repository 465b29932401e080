"""The campaign runner: a tiny grid end to end, resume, README regeneration, and bad campaign files."""
import json
from pathlib import Path

import pytest

from audit.plan import campaign, campaign_rows
from audit.records import campaign_report
from audit.console.cli import main as cli_main
from audit.records.store import Store, run_key

TINY = """
[campaign]
name = "tiny"
datasets = ["csbm"]
epsilons = [1, 4]
roc_epsilon = 4

[quick]
trials = 16

[[audit]]
target = "gaussian"
attacks = ["mechanism-lrt"]
trials = 40
note = "exact reference mechanism"

[[audit]]
target = "gaussian"
bug = "no-noise"
attacks = ["mechanism-lrt"]
epsilons = [1]
trials = 40
explain = "planted bug: no noise at all"

[[audit]]
target = "gap"
attacks = ["mechanism-lrt"]
params = {encoder_epochs = 5, epochs = 1}
trials = 16
quick = false
"""


@pytest.fixture(autouse=True)
def clean_tree(monkeypatch):
    """These tests run whatever the checkout's state: git reports the real commit and a clean tree
    (the refusal of a dirty one is tested on its own below)."""
    real = campaign._git
    monkeypatch.setattr(campaign, "_git", lambda: {**real(), "dirty": False})


def _write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _trial_counts(out: Path) -> dict[str, int]:
    with Store(out / "audit.sqlite") as store:
        return {key: n for key, n in store._db.execute("SELECT key, COUNT(*) FROM trials GROUP BY key")}


def test_tiny_campaign_end_to_end_resume_and_report_only(tmp_path, monkeypatch):
    config = _write(tmp_path, TINY)
    out = tmp_path / "out"
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress"]) == 0

    doc = json.loads((out / "campaign.json").read_text())
    rows = doc["rows"]
    assert len(rows) == 5 and doc["rows_planned"] == 5
    assert {r["target"] for r in rows} == {"gaussian", "gap"}
    for r in rows:
        assert r["verdict"] in ("CONSISTENT", "VIOLATION") and r["roc"]["fpr"] and r["level"] == "mechanism"
        assert r["ci"] is not None and r["max_certifiable_eps"] is not None and r["method"]
    bugged = [r for r in rows if r["bug"] == "no-noise"]
    assert bugged and all(r["verdict"] == "VIOLATION" for r in bugged)
    gap = [r for r in rows if r["target"] == "gap"]
    assert all(isinstance(r["utility"], float) and 0 <= r["utility"] <= 100 for r in gap)
    assert json.loads((out / "utility.json").read_text())  # utility is cached in the folder
    assert doc["git"]["commit"] and doc["machine"]["cpus"]

    readme = (out / "README.md").read_text()
    assert "## Violations" in readme and "planted bug: no noise at all" in readme
    assert "UNEXPLAINED" not in readme
    for name in ("eps-gaussian.png", "roc-gaussian.png", "eps-gap.png", "roc-gap.png"):
        assert (out / name).stat().st_size > 1000 and f"({name})" in readme
    counts = _trial_counts(out)
    assert sorted(counts.values()) == [16, 16, 40, 40, 40]

    # a rerun plays no trial and runs no audit: every row is found finished in the folder
    import audit.play.game

    def no_audit(*a, **k):
        raise AssertionError("a finished row was run again")

    monkeypatch.setattr(audit.play.game, "run_audit", no_audit)
    cached = (out / "utility.json").read_text()
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress"]) == 0
    assert _trial_counts(out) == counts
    assert (out / "utility.json").read_text() == cached  # utility came from the folder's cache
    again = json.loads((out / "campaign.json").read_text())["rows"]
    assert [r["eps_lb"] for r in again] == [r["eps_lb"] for r in rows]
    assert [r["utility"] for r in again] == [r["utility"] for r in rows]
    # a rerun only adds: every stored row (timing, ROC points, provenance) and the header stand
    assert again == rows
    stored_json, stored_readme = (out / "campaign.json").read_text(), (out / "README.md").read_text()
    (out / "audit.sqlite").rename(out / "away.sqlite")  # a clean clone has no store: still nothing changes
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress"]) == 0
    assert (out / "campaign.json").read_text() == stored_json
    assert (out / "README.md").read_text() == stored_readme
    # --only keeps the other targets' rows
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress", "--only", "gap"]) == 0
    assert (out / "campaign.json").read_text() == stored_json
    (out / "away.sqlite").rename(out / "audit.sqlite")

    # a row whose stored code is not today's runs again (and only that row); --fresh runs every row
    calls = []

    def fake_audit(spec, **k):
        calls.append(spec.key())
        return campaign._existing(out, spec.key(), spec.trials, spec.estimator)

    monkeypatch.setattr(audit.play.game, "run_audit", fake_audit)
    doc = json.loads(stored_json)
    doc["rows"][1]["code"] = {"key": "0000000000000000", "commit": "0" * 40}
    (out / "campaign.json").write_text(json.dumps(doc, indent=1))
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress"]) == 0
    assert calls == [rows[1]["key"]]
    after = json.loads((out / "campaign.json").read_text())
    assert after["rows"][0] == rows[0] and rows[0]["commit"] == doc["git"]["commit"]  # kept, naming its session
    assert after["rows_run"] == 1 and after["date"] >= doc["date"]
    calls.clear()
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress", "--fresh"]) == 0
    assert len(calls) == len(rows)

    # README and plots regenerate from campaign.json alone, without the SQLite store
    (out / "audit.sqlite").unlink()
    for p in out.glob("*.png"):
        p.unlink()
    (out / "README.md").unlink()
    assert cli_main(["campaign", str(config), "--out", str(out), "--report-only"]) == 0
    assert (out / "README.md").exists() and (out / "roc-gaussian.png").exists()


def test_unexplained_violation_is_marked(tmp_path):
    rows = [{"target": "gaussian", "dataset": "csbm", "attack": "mechanism-lrt", "epsilon": 1.0, "bug": None,
             "trials": 40, "level": "mechanism", "unit": "edge", "claimed_epsilon": 1.0, "claimed_delta": 1e-5,
             "eps_lb": 3.0, "ci": [2.5, 4.0], "method": "gdp", "tightness": 3.0, "verdict": "VIOLATION",
             "auc": 0.99, "max_certifiable_eps": 9.0, "utility": None, "note": "", "explain": "",
             "roc": {"fpr": [1.0, 0.0], "tpr": [1.0, 0.0]}}]
    (tmp_path / "campaign.json").write_text(json.dumps({"name": "x", "rows": rows, "git": {}, "machine": {}}))
    text = campaign_report.write_campaign_report(tmp_path).read_text()
    assert "UNEXPLAINED — investigate" in text
    # hand-written findings beside campaign.json go into the regenerated README, before the table
    (tmp_path / "discussion.md").write_text("## Findings\n\nThe reference is exact.\n")
    text = campaign_report.write_campaign_report(tmp_path).read_text()
    assert text.index("The reference is exact.") < text.index("## Results")


def test_quick_subset(tmp_path):
    c = campaign.load(_write(tmp_path, TINY), quick=True)
    assert {r.spec.target for r in c.rows} == {"gaussian"}  # gap has quick = false
    assert all(r.spec.trials == 16 for r in c.rows)
    assert c.default_out().name == "campaign-tiny-quick"
    assert campaign.load(_write(tmp_path, TINY), only="gap").rows[0].spec.params == {"encoder_epochs": "5",
                                                                                    "epochs": "1"}


@pytest.mark.parametrize("text, message", [
    ('[[audit]]\ntarget = "nope"\nepsilons = [1]\ndatasets = ["csbm"]', "unknown target 'nope'"),
    ('[[audit]]\ntarget = "gaussian"\nattacks = ["nope"]\nepsilons = [1]\ndatasets = ["csbm"]', "unknown attack 'nope'"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = [0]\ndatasets = ["csbm"]', "ε must be"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = [-1]\ndatasets = ["csbm"]', "ε must be"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = []\ndatasets = ["csbm"]', "empty grid"),
    ('[campaign]\nname = "x"', "empty grid"),
    ('[[audit]]\ntarget = "gaussian"\nepsilon = [1]\ndatasets = ["csbm"]', "unknown key(s) 'epsilon'"),
    ('[campaign]\nfoo = 1\n[[audit]]\ntarget = "gaussian"', "unknown key(s) 'foo'"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = [1]\ndatasets = ["csbm"]\nparams = {frobnicate = 1}',
     "unknown parameter"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = [1]\ndatasets = ["nope"]', "unknown dataset 'nope'"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = [1]\ndatasets = ["csbm"]\ntrials = 7', "trials"),
    ('[[audit]]\ntarget = "gaussian"\nepsilons = [1]\ndatasets = ["csbm"]\nattacks = ["gradient-lrt"]', "needs the trace"),
    ('[[audit]\ntarget = "gaussian"', "not valid TOML"),
])
def test_bad_campaign_files_raise_clear_errors(tmp_path, text, message, capsys):
    path = _write(tmp_path, text)
    with pytest.raises(campaign.CampaignError, match=None) as err:
        campaign.load(path)
    assert message in str(err.value)
    assert cli_main(["campaign", str(path), "--out", str(tmp_path / "o")]) == 2
    assert message in capsys.readouterr().err


def test_config_by_name_and_shipped_campaigns_validate():
    with pytest.raises(campaign.CampaignError, match="no campaign 'nope'"):
        campaign.find_config("nope")
    full = campaign.load("default")
    quick = campaign.load("default", quick=True)
    assert full.path == campaign.CAMPAIGNS / "default.toml" and len(quick.rows) < len(full.rows)
    targets = {r.spec.target for r in full.rows}
    assert {"caribou", "gap", "dpdgc", "heterpoisson", "gcon"} <= targets
    assert {r.spec.dataset for r in quick.rows} == {"csbm"}


def test_tightness_campaign_plays_witness_datasets_and_attacks_by_path(tmp_path):
    """campaigns/tightness.toml (issue #32): a witness file as the dataset and an attack named by path
    validate; --quick keeps the one CARIBOU row (2,000 trials) and the one-sided DPDGC joint row (500)."""
    full = campaign.load("tightness")
    quick = campaign.load("tightness", quick=True)
    assert {r.spec.dataset for r in full.rows} == {"witness:campaigns/witnesses/caribou-binding.json", "csbm"}
    assert "attacks.joint:JointLRT" in {r.spec.attack for r in full.rows}
    assert [(r.spec.target, r.spec.epsilon, r.spec.trials) for r in quick.rows] == [
        ("targets.caribou.given_input:CaribouGivenInput", 4.0, 2000), ("dpdgc", 4.0, 500)]
    with pytest.raises(campaign.CampaignError, match="unknown dataset"):
        campaign.load(_write(tmp_path, '[campaign]\nname = "c"\ndatasets = ["nope"]\nepsilons = [1]\n'
                                        '[[audit]]\ntarget = "gaussian"\n'))


def test_code_key_is_the_one_the_game_computes():
    """The campaign checks a stored row's code key against code_identity of the classes the game
    passes (type of the built target, attack and canary)."""
    from attacks import base as attacks_registry
    from audit.records.provenance import code_identity
    from canaries import base as canaries
    from targets import base as targets

    target = targets.build("gap", epsilon=1.0, bug=None)
    game = code_identity(type(target), type(attacks_registry.make("mechanism-lrt")),
                         type(canaries.make("worst-directed-edge")))["key"]
    assert campaign_rows.current_code_key("gap", "mechanism-lrt", "worst-directed-edge") == game
    rec = {"target": "gap", "attack": "mechanism-lrt", "canary": "worst-directed-edge", "code": {"key": game}}
    assert campaign_rows.stale_code(rec) is None
    assert "code" in campaign_rows.stale_code({**rec, "code": {"key": "0" * 16}})
    # a row without a code key predates code recording: it is rerun, not trusted on its options
    assert "no code recorded" in campaign_rows.stale_code({**rec, "code": None})
    assert "no code recorded" in campaign_rows.stale_code({k: v for k, v in rec.items() if k != "code"})
    # the store key changes with the code and the options, and is the same in another process (no hash())
    key = run_key("a" * 16, "b" * 16)
    assert len(key) == 16 and key not in (run_key("a" * 16, "c" * 16), run_key("c" * 16, "b" * 16))
    assert key == _in_a_fresh_process('from audit.records.store import run_key; print(run_key("a" * 16, "b" * 16))')


def _in_a_fresh_process(code: str) -> str:
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root,
                          env={"PYTHONPATH": root, "PYTHONHASHSEED": "random"}).stdout.strip()


def test_a_cached_utility_is_keyed_by_the_targets_code(monkeypatch):
    """utility.json keeps an accuracy per (options, target code): another code's is not reused."""
    spec = campaign.load("default").rows[0].spec
    key = campaign._utility_key(spec)
    assert campaign._target_code_key(spec.target) is not None and campaign._utility_key(spec) == key
    monkeypatch.setattr(campaign, "_target_code_key", lambda target: "0" * 16)
    assert campaign._utility_key(spec) != key


class _Preprocessing:
    """A classifier whose preprocessing replaces the graph: it records which graph it was fitted on."""

    def __init__(self):
        self.fitted_on = []

    def preprocess(self, graph):
        return ("preprocessed", graph), "dropped 1 isolated node"

    def claim(self, graph):
        from targets.base import Claim
        return Claim(epsilon=1.0, delta=1e-5, unit="edge", accountant="none")

    def fit(self, graph, gen):
        from types import SimpleNamespace
        self.fitted_on.append(graph)
        return SimpleNamespace(accuracy={"train": 1.0, "val": 0.5, "test": 0.25})


def test_train_and_the_campaigns_utility_fit_the_same_preprocessed_graph(monkeypatch, tmp_path, capsys):
    """One function serves both (issue #46): `utility` once skipped the target's preprocessing."""
    import targets.base
    from audit.console import cli as cli_module
    from audit.play import private_fit

    spec = campaign.load("default").rows[0].spec
    fake = _Preprocessing()
    monkeypatch.setattr(private_fit.datasets, "load", lambda name, root=None, seed=0: f"raw {name}")
    monkeypatch.setattr(targets.base, "build", lambda *a, **k: fake)
    monkeypatch.setattr(cli_module, "build", lambda *a, **k: fake)
    assert campaign.utility(spec, tmp_path) == 25.0
    assert cli_main(["train", "--target", "gcn", "--dataset", "csbm"]) == 0
    assert fake.fitted_on == [("preprocessed", f"raw {spec.dataset}"), ("preprocessed", "raw csbm")]
    assert "dropped 1 isolated node" in capsys.readouterr().err


DIRTY = """
[campaign]
name = "dirty"
datasets = ["csbm"]
epsilons = [1]

[[audit]]
target = "gaussian"
attacks = ["mechanism-lrt"]
trials = 16
"""


def test_a_dirty_tree_is_refused_unless_allowed(tmp_path, monkeypatch, capsys):
    """Uncommitted changes to tracked files: running rows is refused with a clear error (exit 2) and
    nothing is written; --allow-dirty runs them and records the tree as dirty; rows kept from
    campaign.json need no run, so a rerun with nothing to play is not refused."""
    config = _write(tmp_path, DIRTY)
    out = tmp_path / "out"
    monkeypatch.setattr(campaign, "_git", lambda: {"commit": "a" * 40, "dirty": True})
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress"]) == 2
    assert "--allow-dirty" in capsys.readouterr().err
    assert not (out / "campaign.json").exists()
    with pytest.raises(campaign.CampaignError, match="uncommitted changes"):
        campaign.run(campaign.load(str(config)), out, progress=False)

    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress", "--allow-dirty"]) == 0
    doc = json.loads((out / "campaign.json").read_text())
    assert doc["git"] == {"commit": "a" * 40, "dirty": True}
    assert "--allow-dirty" in doc["command"]
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress"]) == 0  # all kept
    assert cli_main(["campaign", str(config), "--out", str(out), "--no-progress", "--fresh"]) == 2
