"""The user's CI: audit the trainer through `--target package.module:Class`."""
import subprocess
import sys
from pathlib import Path

import pytest

from audit.testing import assert_private, assert_violation

HERE = Path(__file__).resolve().parent
TARGET = "my_dpgnn:MyDPGNN"


@pytest.fixture(autouse=True)
def _importable(monkeypatch):
    monkeypatch.syspath_prepend(str(HERE))


@pytest.mark.audit
def test_my_trainer_keeps_its_claim(tmp_path):
    assert_private(TARGET, epsilon=2.0, trials=1000, seed=0, out=tmp_path)


@pytest.mark.audit
def test_the_leaky_calibration_is_caught(tmp_path):
    assert_violation(TARGET, epsilon=2.0, params={"leaky": True}, trials=4000, seed=0, out=tmp_path)


def test_cli_accepts_the_class_path(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "audit", "run", "--target", TARGET, "--epsilon", "2",
                           "--trials", "200", "--bug", "no-noise", "--out", str(tmp_path), "--no-progress",
                           "--fail-on-violation"], capture_output=True, text=True, cwd=HERE, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(HERE)})
    assert proc.returncode == 1, proc.stderr
    assert "VIOLATION" in proc.stdout
