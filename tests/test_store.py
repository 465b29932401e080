"""The results store: a corrupt or locked file is a clear usage error, and nothing saved is lost."""
import sqlite3

import pytest

from audit.records import store as store_module
from audit.console.cli import main as cli_main
from audit.console.exit_status import is_usage_error
from audit.records.store import Store, StoreError


def test_trials_and_results_round_trip(tmp_path):
    with Store(tmp_path / "a.sqlite") as s:
        s.begin("k", {"x": 1})
        s.add_trials("k", [(0, 1, 0.5), (1, 0, -1.0), (2, 1, 2.0)])
        s.save_result("r", "k", {"eps": 1.5})
    with Store(tmp_path / "a.sqlite") as s:  # reopened: every committed row is there
        assert s.done("k") == {0, 1, 2} and s.trials("k", limit=2) == [(0, 1, 0.5), (1, 0, -1.0)]
        assert s.result("r") == {"eps": 1.5} and s.created("k") is not None
        s.forget("k")
        assert s.trials("k") == [] and s.result("r") is None and s.created("k") is None


def test_a_corrupt_store_is_a_usage_error_that_keeps_the_file(tmp_path):
    path = tmp_path / "audit.sqlite"
    junk = b"this is not sqlite\n" * 300
    path.write_bytes(junk)
    with pytest.raises(StoreError, match=r"not a readable store.*left as it is") as err:
        Store(path)
    assert str(path) in str(err.value) and is_usage_error(err.value)
    assert path.read_bytes() == junk  # nothing overwritten


def test_the_cli_answers_a_corrupt_store_in_one_line(tmp_path, capsys):
    (tmp_path / "audit.sqlite").write_bytes(b"\x00garbage" * 512)
    code = cli_main(["run", "--target", "gaussian", "--epsilon", "1", "--trials", "8", "--attack",
                     "mechanism-lrt", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and "not a readable store" in err and "Traceback" not in err


def test_a_locked_store_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(store_module, "LOCK_TIMEOUT_S", 0.05)
    path = tmp_path / "audit.sqlite"
    with Store(path) as s:
        s.begin("k", {})
        s.add_trials("k", [(0, 1, 0.5)])
        holder = sqlite3.connect(str(path))
        holder.execute("BEGIN EXCLUSIVE")  # another process mid-write
        try:
            with pytest.raises(StoreError, match="locked by another process"):
                s.add_trials("k", [(1, 0, 0.1)])
        finally:
            holder.rollback()
            holder.close()
        assert s.trials("k") == [(0, 1, 0.5)]  # the saved trial survives
