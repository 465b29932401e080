"""Bad inputs end with one line and exit status 2, never a traceback; user targets by file path;
``list --target`` documents every key (issue #21)."""
import textwrap

import pytest

from audit.console import cli

_NOT_A_RELEASE = '''
from dataclasses import dataclass

import torch

from targets.base import Claim, Target, TargetConfig


@dataclass
class TensorConfig(TargetConfig):
    unit: str = "edge"


class ReturnsTensor(Target[TensorConfig]):
    """fit() returns the noisy tensor itself instead of a Release."""

    name = "returns-tensor"
    Config = TensorConfig
    levels = ("mechanism",)

    def claim(self, graph):
        return Claim(epsilon=self.config.epsilon, delta=1e-5, accountant="none", unit="edge")

    def fit(self, graph, rng):
        return graph.x + torch.randn(graph.x.shape, generator=rng)
'''


def _file(tmp_path, body, name="user_target.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def test_fit_returning_a_tensor_is_a_clean_error(tmp_path, capsys):
    path = _file(tmp_path, _NOT_A_RELEASE)
    code = cli.main(["run", "--target", f"{path}:ReturnsTensor", "--dataset", "csbm:n=60", "--trials", "8",
                     "--attack", "mechanism-lrt", "--canary", "random-edge", "--out", str(tmp_path / "r"),
                     "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert "fit() returned Tensor, not a targets.base.Release" in err and "Traceback" not in err


def test_target_from_a_file_path_runs(tmp_path, capsys):
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "my_dpgnn" / "my_dpgnn.py"
    code = cli.main(["run", "--target", f"{example}:MyDPGNN", "--dataset", "csbm:n=80", "--trials", "40",
                     "--out", str(tmp_path / "r"), "--no-progress"])
    assert code == 0
    assert "verdict" in capsys.readouterr().out


def test_missing_file_and_unknown_class_are_clean_errors(tmp_path, capsys):
    assert cli.main(["accounting", "--target", f"{tmp_path}/nope.py:X"]) == 2
    assert "no such file" in capsys.readouterr().err
    path = _file(tmp_path, _NOT_A_RELEASE)
    assert cli.main(["accounting", "--target", f"{path}:Missing"]) == 2
    assert "has no attribute 'Missing'" in capsys.readouterr().err


def test_list_target_prints_every_key_with_default_type_and_meaning(capsys):
    from targets.base import config_help, get

    assert cli.main(["list", "--target", "gap"]) == 0
    out = capsys.readouterr().out
    for row in config_help(get("gap").Config):
        line = next(ln for ln in out.splitlines() if ln.split()[:1] == [row["key"]])
        assert row["default"] in line and row["meaning"][:20] in line
    assert "--bug" in out or "planted bugs" in out


def test_bad_numbers_exit_2(tmp_path, capsys):
    for argv in (["run", "--target", "gaussian", "--epsilon", "0"],
                 ["run", "--target", "gaussian", "--delta", "1.5"],
                 ["run", "--target", "gaussian", "--trials", "seven"],
                 ["run", "--target", "nope"]):
        try:
            code = cli.main(argv + ["--out", str(tmp_path)])
        except SystemExit as stop:  # argparse's own usage errors
            code = stop.code
        assert code == 2, argv
        assert "Traceback" not in capsys.readouterr().err


_RAISES = '''
import torch
from targets.api import Claim, Target, gdp_mu


class InLibrary(Target):
    name = "raises-in-library"
    levels = ("mechanism",)

    def claim(self, graph):
        return Claim(epsilon=1.0, delta=1e-5, accountant="gdp", unit="edge", gdp_mu=gdp_mu(1.0, 1e-5),
                     details={"noise_std": 3.0})

    def fit(self, graph, rng):
        torch.nn.functional.batch_norm(torch.zeros(1, 4), None, None, training=True)  # a one-row batch


class OnPurpose(InLibrary):
    def fit(self, graph, rng):
        raise ValueError("k must be > 0 for this trainer")


class Broken(InLibrary):
    def fit(self, graph, rng):
        return {}["release"]
'''


def _run_file(path, cls, tmp_path, *extra):
    return cli.main(["run", "--target", f"{path}:{cls}", "--dataset", "csbm:n=60", "--trials", "8",
                     "--attack", "mechanism-lrt", "--canary", "random-edge", "--out", str(tmp_path / "r"),
                     "--no-progress", *extra])


@pytest.mark.parametrize("cls, kind", [("InLibrary", "ValueError"), ("Broken", "KeyError")])
def test_an_internal_error_is_reported_as_one(tmp_path, capsys, cls, kind):
    """A ValueError from inside a library (torch's BatchNorm on one row) or any other exception is not a usage
    error: a short message naming where it came from and how to report it, its own exit status, and the
    traceback only behind --debug."""
    path = _file(tmp_path, _RAISES)
    assert _run_file(path, cls, tmp_path) == cli.ExitCode.INTERNAL == 70
    err = capsys.readouterr().err
    assert f"internal error: {kind}" in err and "Traceback" not in err and "--debug" in err
    assert f"{path}:" in err  # the user's frame that called the library
    assert _run_file(path, cls, tmp_path, "--debug") == 70
    assert "Traceback" in capsys.readouterr().err


def test_a_value_error_raised_on_purpose_stays_a_usage_error(tmp_path, capsys):
    path = _file(tmp_path, _RAISES)
    assert _run_file(path, "OnPurpose", tmp_path) == 2
    err = capsys.readouterr().err
    assert "error: k must be > 0 for this trainer" in err and "internal" not in err and "Traceback" not in err
